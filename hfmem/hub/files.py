"""What a read of one model yields (``ModelFiles``), and the parsing both the local and the Hub reads share:
bounded JSON loading and the safetensors index (which shards, which tensors, what to do without one)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

from hfmem.errors import HfmemError, LocalPathError, MalformedConfig, MalformedHeader, NoSafetensors
from hfmem.hub.header import FileHeader

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
BIN_INDEX_FILE = "pytorch_model.bin.index.json"
MAX_CONFIG_BYTES = 20_000_000
MAX_JSON_DEPTH = 64
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class ModelFiles:
    """What hfmem read about one model: its config, its safetensors headers, and where they came from."""

    repo: str
    revision: str | None
    source: str  # "hub" | "local" | "cache"
    config: dict[str, Any]
    headers: list[FileHeader]
    index_metadata: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def is_sha(revision: str | None) -> bool:
    """Whether `revision` is a full commit id (40 lowercase hex digits), which names immutable content."""
    return revision is not None and _SHA_RE.match(revision) is not None


def load_json_text(
    text: str | bytes | bytearray,
    file: str,
    error: type[HfmemError] = MalformedConfig,
    max_bytes: int = MAX_CONFIG_BYTES,
    max_depth: int | None = MAX_JSON_DEPTH,
) -> dict[str, Any]:
    """Decode a JSON object from a repo file, with clear errors for the hostile cases.

    ``max_depth=None`` skips the nesting walk for large machine-written answers (json.loads still bounds recursion).
    """
    if len(text) > max_bytes:  # bytes >= characters, so one check covers both input kinds
        raise error(f"{file}: larger than {max_bytes:,} bytes", path=file)
    if isinstance(text, (bytes, bytearray)):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise error(f"{file}: not valid UTF-8", path=file) from None
    try:
        obj = json.loads(text)
    except RecursionError:
        raise error(f"{file}: JSON nested too deeply", path=file) from None
    except ValueError as exc:
        raise error(f"{file}: not valid JSON ({str(exc)[:80]})", path=file) from None
    if not isinstance(obj, dict):
        raise error(f"{file}: expected a JSON object, got {type(obj).__name__}", path=file)
    if max_depth is not None and json_depth(obj) > max_depth:
        raise error(f"{file}: JSON nested deeper than {max_depth} levels", path=file)
    return obj


def read_bounded(path: Path, limit: int = MAX_CONFIG_BYTES, named: str | None = None) -> bytes:
    """A JSON file's bytes, reading at most limit + 1 (so load_json_text reports it too large, without the memory)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit + 1)
    except OSError as exc:
        raise LocalPathError(
            f"{named or path.name}: cannot read {path.name!r} ({exc.strerror or type(exc).__name__})", path=str(path)
        ) from None


def json_depth(obj: Any) -> int:
    # Iterative, so a hostile file cannot exhaust the Python stack.
    deepest, stack = 0, [(obj, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_JSON_DEPTH:
            return level
        if isinstance(node, dict):
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, level + 1) for v in node)
    return deepest


def index_shards(index: dict[str, Any], file: str) -> list[str]:
    """The shard files an index's weight_map names, each checked to stay inside the model folder."""
    weight_map = index.get("weight_map")
    try:  # checked on the distinct values (a few hundred files for 500k tensors); a list or object is unhashable
        files = set(weight_map.values()) if isinstance(weight_map, dict) else None
    except TypeError:
        files = None
    if files is None or not all(isinstance(v, str) for v in files):
        raise MalformedHeader(f"{file}: weight_map must map tensor names to file names", path=file)
    shards = sorted(files)
    for shard in shards:
        if shard.startswith("/") or ".." in Path(shard).parts:
            raise MalformedHeader(f"{file}: shard path {shard!r} leaves the model folder", path=file)
    return shards


def select_indexed(headers: list[FileHeader], index: dict[str, Any] | None, warnings: list[str]) -> list[FileHeader]:
    """The tensors that count, decided in one place for the Hub (one-shot answer or range reads, any revision), a
    local folder and a cached snapshot, so all of them agree by construction.

    With an index, what counts is what its weight_map names, which is what transformers loads
    (modeling_utils.PreTrainedModel.from_pretrained takes the checkpoint keys from the index; a stored tensor it does
    not name is an unexpected key and never becomes a parameter):
    - a stored tensor the index does not name, or a file the index does not list, is not counted (one warning);
    - a named tensor stored in another shard than the index says is counted where it is stored (one warning);
    - a named tensor that no shard stores is a broken checkpoint: its size is unknown, so MalformedHeader.
    """
    if not index or not isinstance(index.get("weight_map"), dict):
        return _some_tensors(headers)
    wanted: dict[str, str] = index["weight_map"]
    listed = set(wanted.values())
    unlisted = sorted(h.file for h in headers if h.file not in listed)
    unnamed = misplaced = 0
    first_unnamed = first_misplaced = ""
    out = []
    homes = {h.file: list(map(wanted.get, map(_name_of, h.tensors))) for h in headers if h.file in listed}
    if all(places.count(file) == len(places) for file, places in homes.items()):
        # The usual case: every tensor where the index says, so each is a name of the weight_map; as a header
        # holds no name twice (the parser refuses duplicates) and a name has one home, they cover the index exactly
        # when their count is its size. Only another count needs the set of names.
        out = [h for h in headers if h.file in listed]
        if sum(map(len, homes.values())) != len(wanted):
            names = {t.name for h in out for t in h.tensors}
            if len(names) != len(wanted):
                _missing(wanted, names)
        return _some_tensors(_warn_unlisted(out, unlisted, warnings))
    found: set[str] = set()
    # only needed when some tensor is stored away from where the index puts it
    at_home = {t.name for h in headers if h.file in homes for t, home in zip(h.tensors, homes[h.file]) if home == h.file}
    for h in headers:
        if h.file not in listed:
            continue
        places = homes[h.file]
        if places.count(h.file) == len(places):  # every tensor where the index says
            found.update(map(_name_of, h.tensors))
            out.append(h)
            continue
        kept = []
        for t in h.tensors:
            home = wanted.get(t.name)
            if home is None or t.name in found or (home != h.file and t.name in at_home):
                unnamed += 1  # not named, or a second copy of a tensor counted where the index puts it
                first_unnamed = first_unnamed or t.name
                continue
            if home != h.file:
                misplaced += 1
                first_misplaced = first_misplaced or f"{t.name[:120]!r} in {h.file[:120]!r}, indexed in {home[:120]!r}"
            found.add(t.name)
            kept.append(t)
        out.append(FileHeader(h.file, tuple(kept), h.metadata, h.warnings) if len(kept) != len(h.tensors) else h)
    if len(found) != len(wanted):
        _missing(wanted, found)
    _warn_unlisted(out, unlisted, warnings)
    if unnamed:
        warnings.append(
            f"{unnamed} stored tensor(s) that {INDEX_FILE} does not name were not counted (first: {first_unnamed[:120]!r}); "
            "transformers loads only what the index names"
        )
    if misplaced:
        warnings.append(
            f"{misplaced} tensor(s) are stored in another shard than {INDEX_FILE} says (first: {first_misplaced}); "
            "counted where stored"
        )
    return _some_tensors(out)


_name_of = attrgetter("name")


def _missing(wanted: dict[str, str], found: set[str]) -> None:
    missing = next(name for name in wanted if name not in found)
    raise MalformedHeader(
        f"{INDEX_FILE} names {len(wanted) - len(found)} of {len(wanted)} tensors that no shard stores (first: "
        f"{missing[:120]!r}, indexed in {wanted[missing][:120]!r}); their sizes are unknown",
        path=INDEX_FILE,
    )


def _warn_unlisted(out: list[FileHeader], unlisted: list[str], warnings: list[str]) -> list[FileHeader]:
    if unlisted:
        warnings.append(
            f"{len(unlisted)} safetensors file(s) that {INDEX_FILE} does not list were not counted: "
            + ", ".join(repr(u[:120]) for u in unlisted[:3]) + (" ..." if len(unlisted) > 3 else "")
        )
    return out


def _some_tensors(headers: list[FileHeader]) -> list[FileHeader]:
    """A checkpoint that stores no tensor at all (an empty header, an empty index) is not a model: exit 17."""
    if not any(h.tensors for h in headers):
        names = ", ".join(repr(h.file[:120]) for h in headers[:3]) or "no file"
        raise MalformedHeader(f"{names}: the safetensors header(s) hold no tensors", path=headers[0].file if headers else None)
    return headers


def approximate_from_bin_index(index_text: bytes | bytearray | str | None, file: str) -> int | None:
    """total_size from a pytorch_model.bin index, if it has a usable one."""
    if index_text is None:
        return None
    try:
        total = load_json_text(index_text, file).get("metadata", {}).get("total_size")
    except HfmemError:
        return None
    return total if isinstance(total, int) and total > 0 else None


def fallback_safetensors(names: list[str], warnings: list[str]) -> list[str]:
    """No index and no model.safetensors: take root *.safetensors except known duplicates."""
    skip = ("consolidated", "adapter_model", "adapter")
    picked = sorted(n for n in names if n.endswith(".safetensors") and "/" not in n and not n.startswith(skip))
    if picked:
        warnings.append(
            f"no {INDEX_FILE} or {SINGLE_FILE}; counted root safetensors files: {', '.join(picked[:5])}"
            + (" ..." if len(picked) > 5 else "")
        )
    return picked


def no_safetensors(repo: str, approx: int | None) -> NoSafetensors:
    """The error for a model without safetensors weights, with the .bin index's total size when known."""
    msg = f"{repo}: no safetensors weights ({INDEX_FILE} or {SINGLE_FILE}) found"
    if approx:
        msg += f"; {BIN_INDEX_FILE} says total_size {approx} bytes (approximate: .bin weights, not analysed)"
    return NoSafetensors(msg)
