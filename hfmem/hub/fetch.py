"""Get config.json and safetensors headers from the Hub, a local folder or the HF cache; never the weights.

All Hub traffic goes through ``huggingface_hub`` (auth, HF_ENDPOINT, revisions, cache, HF_HUB_OFFLINE).
On ``main`` the one-shot ``safetensors-metadata`` endpoint returns every shard header in one request, issued
concurrently with the config download; other revisions, and hubs without that endpoint, fall back to the index
plus one range request per shard (all shards concurrently).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from hfmem.errors import (
    GatedRepo,
    HfmemError,
    LocalPathError,
    MalformedConfig,
    MalformedHeader,
    NetworkError,
    NoConfig,
    NoSafetensors,
    RateLimited,
    RepoNotFound,
    RevisionNotFound,
    ServerError,
    UsageError,
    redact,
)
from hfmem.hub.header import MAX_HEADER_BYTES, FileHeader, header_length, parse_header_bytes, read_local_header, validate_header
from hfmem.hub.retry import (
    DeadlineExceeded,
    attempts_of,
    call_with_retries,
    is_incomplete_body,
    is_transient,
    retry_after,
    status_of,
    transient_for_downloads,
    transient_not_timeout,
)

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_CONFIG_BYTES = 20_000_000
_MAX_JSON_DEPTH = 64
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
T = TypeVar("T")


@dataclass
class ModelFiles:
    """What hfmem read about one model: its config, its safetensors headers, and where they came from."""

    repo: str
    revision: str | None
    source: str  # "hub" | "local" | "cache"
    config: dict[str, Any]
    headers: list[FileHeader]
    index_metadata: dict[str, Any] | None = None
    approximate_total_bytes: int | None = None  # from pytorch_model.bin.index.json when there is no safetensors
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------------
# Shared helpers


def load_json_text(
    text: str | bytes,
    file: str,
    error: type[HfmemError] = MalformedConfig,
    max_bytes: int = MAX_CONFIG_BYTES,
    max_depth: int | None = _MAX_JSON_DEPTH,
) -> dict[str, Any]:
    """Decode a JSON object from a repo file, with clear errors for the hostile cases.

    ``max_depth=None`` skips the nesting walk for large machine-written answers (json.loads still bounds recursion).
    """
    if len(text) > max_bytes:  # bytes >= characters, so one check covers both input kinds
        raise error(f"{file}: larger than {max_bytes} bytes")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise error(f"{file}: not valid UTF-8") from None
    try:
        obj = json.loads(text)
    except RecursionError:
        raise error(f"{file}: JSON nested too deeply") from None
    except ValueError as exc:
        raise error(f"{file}: not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(obj, dict):
        raise error(f"{file}: expected a JSON object, got {type(obj).__name__}")
    if max_depth is not None and _depth(obj) > max_depth:
        raise error(f"{file}: JSON nested deeper than {max_depth} levels")
    return obj


def read_bounded(path: Path, limit: int = MAX_CONFIG_BYTES, named: str | None = None) -> bytes:
    """A JSON file's bytes, reading at most limit + 1 (so load_json_text reports it too large, without the memory)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit + 1)
    except OSError as exc:
        raise LocalPathError(f"{named or path.name}: cannot read {path.name!r} ({exc.strerror or type(exc).__name__})") from None


def _depth(obj: Any) -> int:
    # Iterative, so a hostile file cannot exhaust the Python stack.
    deepest, stack = 0, [(obj, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > _MAX_JSON_DEPTH:
            return level
        if isinstance(node, dict):
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, level + 1) for v in node)
    return deepest


def _index_shards(index: dict[str, Any], file: str) -> list[str]:
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise MalformedHeader(f"{file}: weight_map must map tensor names to file names")
    shards = sorted(set(weight_map.values()))
    for shard in shards:
        if shard.startswith("/") or ".." in Path(shard).parts:
            raise MalformedHeader(f"{file}: shard path {shard!r} leaves the model folder")
    return shards


def _restrict_to_index(headers: list[FileHeader], index: dict[str, Any] | None) -> list[FileHeader]:
    """Keep only tensors the index names (what transformers loads); headers may hold extras."""
    if not index or not isinstance(index.get("weight_map"), dict):
        return headers
    wanted = index["weight_map"]
    out = []
    for h in headers:
        kept = tuple(t for t in h.tensors if wanted.get(t.name) == h.file)
        out.append(FileHeader(h.file, kept, h.metadata, h.warnings) if len(kept) != len(h.tensors) else h)
    return out


def _approximate_from_bin_index(index_text: bytes | str | None, file: str) -> int | None:
    if index_text is None:
        return None
    try:
        total = load_json_text(index_text, file).get("metadata", {}).get("total_size")
    except HfmemError:
        return None
    return total if isinstance(total, int) and total > 0 else None


# ---------------------------------------------------------------------------------------------------------------
# Local folders and cached snapshots


def looks_local(ref: str) -> bool:
    return (
        ref.startswith((".", "/", "~"))
        or os.sep in ref.rstrip(os.sep) and os.path.exists(ref)
        or os.path.isdir(ref)
        or ref.count("/") > 1
    )


def read_local(path_str: str) -> ModelFiles:
    path = Path(path_str).expanduser()
    if not path.exists():
        raise LocalPathError(f"{path_str}: no such file or directory")
    if not path.is_dir():
        raise LocalPathError(f"{path_str}: not a model folder (expected a directory with config.json)")
    root = path.resolve()
    snapshot = _snapshot_revision(root)
    # Files may be symlinks only to places inside the folder the user named; in an HF cache snapshot, into the
    # repo's own blobs/ folder (models--org--name/), which is how the cache stores them.
    allowed = root.parent.parent if snapshot else root
    config_path = path / "config.json"
    if not config_path.is_file():
        raise NoConfig(f"{path_str}: no config.json in this folder")
    _check_inside(config_path, allowed, path_str)
    config = load_json_text(read_bounded(config_path, named=path_str), "config.json")
    warnings: list[str] = []
    index = None
    index_path = path / INDEX_FILE
    if index_path.is_file():
        _check_inside(index_path, allowed, path_str)
        index = load_json_text(read_bounded(index_path, named=path_str), INDEX_FILE, MalformedHeader)
        shards = _index_shards(index, INDEX_FILE)
    elif (path / SINGLE_FILE).is_file():
        shards = [SINGLE_FILE]
    else:
        shards = _fallback_safetensors([p.name for p in path.glob("*.safetensors")], warnings)
    if not shards:
        bin_index = path / "pytorch_model.bin.index.json"
        approx = _approximate_from_bin_index(read_bounded(bin_index, named=path_str) if bin_index.is_file() else None, bin_index.name)
        raise _no_safetensors(path_str, approx)
    headers = []
    for shard in shards:
        shard_path = _check_inside(path / shard, allowed, path_str)
        if not shard_path.is_file():
            raise NoSafetensors(f"{path_str}: {INDEX_FILE} names {shard!r}, which is missing")
        try:
            headers.append(read_local_header(shard_path, shard))
        except OSError as exc:
            raise LocalPathError(f"{path_str}: cannot read {shard!r} ({exc.strerror or type(exc).__name__})") from None
    return ModelFiles(
        repo=snapshot[0] if snapshot else path_str,
        revision=snapshot[1] if snapshot else None,
        source="cache" if snapshot else "local",
        config=config,
        headers=_restrict_to_index(headers, index),
        index_metadata=(index or {}).get("metadata") if index else None,
        warnings=warnings,
    )


def _check_inside(path: Path, allowed: Path, named: str) -> Path:
    """The resolved path, if it (after following symlinks) stays inside `allowed`; else a LocalPathError."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # symlink loops
        raise LocalPathError(f"{named}: cannot resolve {path.name!r} (symlink loop?)") from None
    if resolved != allowed and allowed not in resolved.parents:
        raise LocalPathError(f"{named}: {path.name!r} points outside the model folder; not followed")
    return resolved


def _snapshot_revision(root: Path) -> tuple[str, str] | None:
    """A folder inside the HF cache (models--org--name/snapshots/<sha>) names its repo and commit."""
    if root.parent.name == "snapshots" and _SHA_RE.match(root.name):
        repo_dir = root.parent.parent.name
        if repo_dir.startswith("models--"):
            return repo_dir[len("models--") :].replace("--", "/"), root.name
    return None


def _fallback_safetensors(names: list[str], warnings: list[str]) -> list[str]:
    """No index and no model.safetensors: take root *.safetensors except known duplicates."""
    skip = ("consolidated", "adapter_model", "adapter")
    picked = sorted(n for n in names if n.endswith(".safetensors") and "/" not in n and not n.startswith(skip))
    if picked:
        warnings.append(
            f"no {INDEX_FILE} or {SINGLE_FILE}; counted root safetensors files: {', '.join(picked[:5])}"
            + (" ..." if len(picked) > 5 else "")
        )
    return picked


def _no_safetensors(repo: str, approx: int | None) -> NoSafetensors:
    msg = f"{repo}: no safetensors weights ({INDEX_FILE} or {SINGLE_FILE}) found"
    if approx:
        msg += f"; pytorch_model.bin.index.json says total_size {approx} bytes (approximate: .bin weights, not analysed)"
    err = NoSafetensors(msg)
    err.approximate_total_bytes = approx  # type: ignore[attr-defined]
    return err


# ---------------------------------------------------------------------------------------------------------------
# The Hub


# Speculative first range for a shard header: sized from the index (tensor count and name lengths) when there is
# one, else this. Over the 2,817 shard files of /work/shared/models the per-shard estimate covered 100 % (mean
# over-read 20 kB); every single-file (index-less) header there is under 90 kB. See docs/speed.md.
SPECULATIVE_RANGE = 262_144
_BYTES_PER_TENSOR = 96  # JSON of one entry beyond its name: {"dtype":..,"shape":[..],"data_offsets":[..,..]},
_HEADER_SLACK = 4096  # __metadata__ and padding
MAX_SHARD_WORKERS = 64
MAX_METADATA_BYTES = 1_000_000_000  # the one-shot answer holds every shard header (each <= 100 MB)
_NOT_SHARDED = "not-sharded"


def read_hub(repo_id: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None) -> ModelFiles:
    """Config + headers of a Hub repo in as few round trips as the Hub allows (see docs/speed.md):

    - main, sharded: GET config.json and GET the one-shot safetensors-metadata endpoint, concurrently (2 requests);
    - other revisions / no endpoint: GET config.json and GET the index concurrently, then one range per shard, all
      shards concurrently, at the commit the config answered with;
    - repeat runs: the header digest cache (hfmem.hub.digest) keyed by commit sha: 1 request (the config GET that
      re-resolves the revision), 0 for a full-sha revision or with HF_HUB_OFFLINE=1.
    """
    from huggingface_hub import constants
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    from hfmem.hub import digest as cache

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise UsageError(f"invalid repo id {repo_id!r}: {str(exc).splitlines()[0][:160]}") from None
    check_revision(revision)
    timeout = timeout if timeout is not None else constants.HF_HUB_DOWNLOAD_TIMEOUT
    ctx = _HubContext(repo_id, revision, token, timeout)
    if constants.HF_HUB_OFFLINE:
        sha = cache.read_ref(repo_id, revision) or _hf_cache_sha(repo_id, revision)
        hit = _from_digest(repo_id, sha, None, "cache")
        return hit if hit is not None else ctx.guard(ctx.read_offline)
    if cache.is_sha(revision):  # a commit names immutable content: a digest hit needs no request at all
        hit = _from_digest(repo_id, revision, None, "hub")
        if hit is not None:
            return hit
    return ctx.guard(ctx.read_online)


def _from_digest(repo_id: str, sha: str | None, config: dict[str, Any] | None, source: str) -> ModelFiles | None:
    from hfmem.hub import digest as cache

    hit = cache.load(repo_id, sha)
    if hit is None:
        return None
    cached_config, headers, index_metadata, warnings = hit
    return ModelFiles(
        repo=repo_id,
        revision=sha,
        source=source,
        config=config if config is not None else cached_config,
        headers=headers,
        index_metadata=index_metadata,
        warnings=list(warnings),
    )


def _hf_cache_sha(repo_id: str, revision: str | None) -> str | None:
    """The commit the HF cache resolves `revision` to (via its refs), if config.json of it is cached."""
    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except Exception:
        return None
    return _sha_from_cache_path(path) if isinstance(path, str) else None


# git check-ref-format's rules (what the Hub accepts for branches and tags), plus a length cap. A revision ends up
# in URLs (quoted by huggingface_hub) and as a file name under the cache's refs/ folder, so ".." must never pass.
_BAD_REF_RE = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^/|/$|\.lock$|^@$|\.$|^-")


def check_revision(revision: str | None) -> None:
    if revision is None:
        return
    if not isinstance(revision, str) or not revision or len(revision) > 256 or _BAD_REF_RE.search(revision):
        raise UsageError(f"invalid revision {str(revision)[:80]!r}: not a branch, tag or commit name")


def cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """The cached snapshot folder of a repo when it holds config.json and safetensors weights, else None."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except Exception:
        return None
    if not isinstance(found, str):
        return None
    folder = Path(found).parent
    if (folder / INDEX_FILE).is_file() or (folder / SINGLE_FILE).is_file():
        return folder
    return None


def _sha_from_cache_path(path: str) -> str | None:
    parts = Path(path).parts
    if "snapshots" in parts:
        candidate = parts[parts.index("snapshots") + 1]
        if _SHA_RE.match(candidate):
            return candidate
    return None


def _same_commit(commit: str | None, sha: str | None) -> bool:
    return commit is None or sha is None or commit == sha


def _commit(response: Any) -> str | None:
    commit = response.headers.get("X-Repo-Commit") if response is not None else None
    return commit if isinstance(commit, str) and _SHA_RE.match(commit) else None


def _total_size(response: Any) -> int | None:
    """The file size from Content-Range ("bytes 0-99/1234"), or Content-Length of a 200 answer."""
    content_range = response.headers.get("Content-Range", "")
    if "/" in content_range and content_range.rsplit("/", 1)[1].isdigit():
        return int(content_range.rsplit("/", 1)[1])
    length = response.headers.get("Content-Length", "")
    return int(length) if response.status_code == 200 and length.isdigit() else None


def _shard_guesses(index: dict[str, Any]) -> dict[str, int]:
    """Bytes to ask for in the first range request of each shard, from the index's tensor names."""
    guesses: dict[str, int] = {}
    for name, shard in index["weight_map"].items():
        guesses[shard] = guesses.get(shard, 8 + _HEADER_SLACK) + len(name.encode("utf-8")) + _BYTES_PER_TENSOR
    return guesses


class _HubContext:
    def __init__(self, repo_id: str, revision: str | None, token: str | bool | None, timeout: float):
        from huggingface_hub import HfApi

        self.repo_id = repo_id
        self.revision = revision
        self.token = token
        self.timeout = timeout
        self.api = HfApi()
        self.token_sent = bool(token) or _has_saved_token()

    def call(self, fn: Callable[[], T], download: bool = False) -> T:
        """One Hub operation, retried on transient failures (see retry.py).

        Requests made here (``_get``: one GET through huggingface_hub's session; ``list_repo_files``) pass
        --timeout to the client as its read timeout, so silence for that long raises at once (and is not retried);
        their wall-clock cap is generous, so a large answer on a slow link still arrives. ``download=True`` is for
        ``hf_hub_download`` (only ``read_offline`` uses it now), which after a failed HEAD retries on its own with a
        60 s timeout and resumes cut-short bodies itself: a wall-clock deadline of --timeout, retries included.
        """
        # A 429's Retry-After is waited out when it is no longer than --timeout, else reported at once.
        if download:
            return call_with_retries(
                fn, deadline_s=self.timeout, retryable=transient_for_downloads, max_retry_after_s=self.timeout
            )
        started = [time.monotonic()]

        def attempt() -> T:
            started[0] = time.monotonic()
            return fn()

        def retryable(exc: BaseException) -> bool:
            # A timeout that took (most of) --timeout was a stall: report it. One raised early (a pool or connect
            # hiccup) is transient like any other.
            if transient_not_timeout(exc):
                return True
            return is_transient(exc) and time.monotonic() - started[0] < 0.5 * self.timeout

        return call_with_retries(
            attempt, deadline_s=max(60.0, 10 * self.timeout), retryable=retryable, max_retry_after_s=self.timeout
        )

    # -- flows ------------------------------------------------------------------------------------------------
    def read_online(self) -> ModelFiles:
        from hfmem.hub import digest as cache

        on_main = self.revision in (None, "main")
        known = cache.read_ref(self.repo_id, self.revision)
        early: Any = None
        if known is not None and cache.has(self.repo_id, known):
            # Seen before: one request re-resolves the revision; the digest answers if the commit is unchanged.
            config_bytes, sha = self.get_config()
            config = load_json_text(config_bytes, "config.json")
            hit = _from_digest(self.repo_id, sha, config, "hub")
            if hit is not None:
                return hit
        else:
            # First time: config and the headers (or the index) are fetched in the same round trip.
            with ThreadPoolExecutor(max_workers=2) as pool:
                config_future = pool.submit(self.get_config)
                early_future = pool.submit(self.get_sharded if on_main else self.get_index, self.revision)
                try:
                    config_bytes, sha = config_future.result()
                finally:
                    early_exc = early_future.exception()  # wait for it either way
                if early_exc is not None:
                    raise early_exc
                early = early_future.result()
            config = load_json_text(config_bytes, "config.json")
            hit = _from_digest(self.repo_id, sha, config, "hub")  # e.g. another branch name for a known commit
            if hit is not None:
                cache.write_ref(self.repo_id, self.revision, sha)  # type: ignore[arg-type]
                return hit
        at = sha or self.revision  # pin every later request to the commit the config came from
        if known is not None and early is None:  # the digest path missed: the commit moved since last time
            early = self.get_sharded(at) if on_main else self.get_index(at)
        warnings: list[str] = []
        if on_main and isinstance(early, tuple) and _same_commit(early[2], sha):
            headers, index_metadata = early[0], early[1]
        elif on_main and early == _NOT_SHARDED:
            headers, index_metadata = self.headers_from_index(None, at, warnings)
        else:
            index, index_commit = early if not on_main else self.get_index(at)
            if not _same_commit(index_commit, sha):  # the branch moved between the two requests
                index, _ = self.get_index(at)
            headers, index_metadata = self.headers_from_index(index, at, warnings)
        if sha is not None:
            cache.store(self.repo_id, sha, config, headers, index_metadata, warnings)
            cache.write_ref(self.repo_id, self.revision, sha)
        return ModelFiles(
            repo=self.repo_id,
            revision=sha,
            source="hub",
            config=config,
            headers=headers,
            index_metadata=index_metadata,
            warnings=warnings,
        )

    def read_offline(self) -> ModelFiles:
        """HF_HUB_OFFLINE and no digest: the HF cache's config.json, and headers if the snapshot holds the weights."""
        from huggingface_hub import hf_hub_download

        config_path = self.call(
            lambda: hf_hub_download(self.repo_id, "config.json", revision=self.revision, token=self.token),
            download=True,
        )
        snapshot = Path(config_path).parent
        if (snapshot / INDEX_FILE).is_file() or (snapshot / SINGLE_FILE).is_file():
            try:
                files = read_local(str(snapshot))
            except NoSafetensors:
                pass  # a partial snapshot (index without its shards); a symlink leaving the repo folder is an error
            else:
                files.repo = self.repo_id
                return files
        raise NetworkError(f"{self.repo_id}: safetensors headers are not cached and HF_HUB_OFFLINE is set")

    def headers_from_index(
        self, index: dict[str, Any] | None, revision: str | None, warnings: list[str]
    ) -> tuple[list[FileHeader], dict[str, Any] | None]:
        from huggingface_hub.errors import EntryNotFoundError

        if index is None:
            try:
                return [self.range_header(SINGLE_FILE, revision)], None
            except EntryNotFoundError:
                return self.headers_without_index(revision, warnings), None
        shards = _index_shards(index, INDEX_FILE)
        guesses = _shard_guesses(index)
        try:
            with ThreadPoolExecutor(max_workers=max(1, min(MAX_SHARD_WORKERS, len(shards)))) as pool:
                headers = list(pool.map(lambda s: self.range_header(s, revision, guesses.get(s)), shards))
        except EntryNotFoundError:
            raise NoSafetensors(f"{self.repo_id}: {INDEX_FILE} names a shard that is missing") from None
        return _restrict_to_index(headers, index), index.get("metadata")

    # -- requests (huggingface_hub's session, URL builder, headers and error classes) -------------------------
    def _open(self, url: str, extra: dict[str, str] | None = None):
        from huggingface_hub.utils import build_hf_headers, get_session

        headers = build_hf_headers(token=self.token)
        if extra:
            headers.update(extra)
        return get_session().stream("GET", url, headers=headers, timeout=self.timeout, follow_redirects=True)

    def _get(self, url: str, limit: int, extra: dict[str, str] | None = None) -> tuple[bytes, Any]:
        """One GET = one retried operation (transient failures, a body cut short, 429 Retry-After: see call)."""
        return self.call(lambda: self._get_once(url, limit, extra))

    def _get_once(self, url: str, limit: int, extra: dict[str, str] | None = None) -> tuple[bytes, Any]:
        """GET reading at most `limit` body bytes (a server that ignores Range cannot make us download weights)."""
        from huggingface_hub.utils import hf_raise_for_status

        with self._open(url, extra) as response:
            if response.status_code >= 400:
                if response.status_code == 416:
                    return b"", response
                response.read()
                hf_raise_for_status(response)
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size >= limit:
                    break
            return b"".join(chunks)[:limit], response

    def _url(self, filename: str, revision: str | None) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo_id, filename, revision=revision)

    def get_config(self) -> tuple[bytes, str | None]:
        """config.json in one GET (hf_hub_download would add a HEAD); the commit comes from X-Repo-Commit."""
        data, response = self._get(self._url("config.json", self.revision), MAX_CONFIG_BYTES + 1)
        return data, _commit(response)

    def get_index(self, revision: str | None) -> tuple[dict[str, Any] | None, str | None]:
        """(model.safetensors.index.json, commit), or (None, commit) when the repo has no index."""
        from huggingface_hub.errors import EntryNotFoundError

        try:
            data, response = self._get(self._url(INDEX_FILE, revision), MAX_CONFIG_BYTES + 1)
        except EntryNotFoundError as exc:
            return None, _commit(getattr(exc, "response", None))
        return load_json_text(data, INDEX_FILE, MalformedHeader), _commit(response)

    def get_sharded(self, revision: str | None = None) -> tuple[list[FileHeader], dict[str, Any] | None, str | None] | str | None:
        """Every shard header in one request (main only): (headers, index metadata, commit); _NOT_SHARDED when the
        repo has no index; None when the hub lacks the endpoint."""
        from huggingface_hub import constants
        from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError
        url = f"{constants.ENDPOINT}/api/models/{self.repo_id}/safetensors-metadata/{quote(INDEX_FILE, safe='/')}"
        try:
            data, response = self._get(url, MAX_METADATA_BYTES)
        except EntryNotFoundError:
            return _NOT_SHARDED
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status in (400, 404, 405, 501) and not _error_code(exc):
                return None  # a hub (or mirror) without the endpoint
            raise
        body = load_json_text(data, "safetensors-metadata", MalformedHeader, MAX_METADATA_BYTES, max_depth=None)
        shard_headers, index = body.get("headers"), body.get("index")
        if not isinstance(shard_headers, dict) or not isinstance(index, dict):
            raise MalformedHeader("safetensors-metadata: expected 'headers' and 'index' objects")
        headers = [validate_header(shard_headers[name], name) for name in sorted(shard_headers)]
        metadata = index.get("metadata")
        return headers, metadata if isinstance(metadata, dict) else None, _commit(response)

    def range_header(self, filename: str, revision: str | None, guess: int | None = None) -> FileHeader:
        """One range request for the header (a second only if it is longer than the speculative first read)."""
        url = self._url(filename, revision)
        first = max(8, min(guess or SPECULATIVE_RANGE, MAX_HEADER_BYTES + 8))
        data, response = self._get(url, first, {"Range": f"bytes=0-{first - 1}"})
        length = header_length(data[:8], filename, _total_size(response))
        need = 8 + length
        if len(data) < need and len(data) >= first:
            more, _ = self._get(url, need - len(data), {"Range": f"bytes={len(data)}-{need - 1}"})
            data += more
        if len(data) < need:
            raise MalformedHeader(f"{filename}: header truncated ({len(data) - 8} of {length} bytes)")
        return parse_header_bytes(data[8:need], filename)

    def headers_without_index(self, revision: str | None, warnings: list[str]) -> list[FileHeader]:
        names = self.call(lambda: self.api.list_repo_files(self.repo_id, revision=revision, token=self.token))
        shards = _fallback_safetensors(names, warnings)
        if not shards:
            approx = None
            if "pytorch_model.bin.index.json" in names:
                data, _ = self._get(self._url("pytorch_model.bin.index.json", revision), MAX_CONFIG_BYTES + 1)
                approx = _approximate_from_bin_index(data, "pytorch_model.bin.index.json")
            err = _no_safetensors(self.repo_id, approx)
            if any(n.endswith(".gguf") for n in names):
                err.message += " (the repo has GGUF files)"
            raise err
        with ThreadPoolExecutor(max_workers=max(1, min(MAX_SHARD_WORKERS, len(shards)))) as pool:
            return list(pool.map(lambda s: self.range_header(s, revision), shards))

    # -- errors -----------------------------------------------------------------------------------------------
    def guard(self, call: Callable[[], T]) -> T:
        """Translate huggingface_hub/httpx failures into one-line hfmem errors (never with the token in them)."""
        try:
            return call()
        except HfmemError:
            raise
        except Exception as exc:
            translated = self.translate(exc)
            if translated is None:
                raise
            raise translated from None

    def translate(self, exc: BaseException) -> HfmemError | None:
        from huggingface_hub import constants
        from huggingface_hub import errors as hf

        endpoint = constants.ENDPOINT
        if isinstance(exc, hf.HFValidationError):  # huggingface_hub's own check of an id, on a call's arguments
            return UsageError(f"invalid repo id {self.repo_id!r}: {str(exc).splitlines()[0][:160]}")
        tries = attempts_of(exc)
        after = f" after {tries} attempts" if tries > 1 else ""
        # GatedRepoError subclasses RepositoryNotFoundError, and both subclass HfHubHTTPError: order matters.
        if isinstance(exc, hf.GatedRepoError):
            return GatedRepo(
                f"{self.repo_id} is a gated repo: accept its terms on the model page ({endpoint}/{self.repo_id}), "
                "then use a token that has access "
                f"({'a token was sent' if self.token_sent else 'no token was sent; set HF_TOKEN or run `hf auth login`'})"
            )
        if isinstance(exc, hf.RepositoryNotFoundError):
            return RepoNotFound(
                f"repository {self.repo_id!r} not found on {endpoint} "
                f"(or it is private{' and the token sent has no access' if self.token_sent else ' and no token was sent'})"
            )
        if isinstance(exc, hf.RevisionNotFoundError):
            return RevisionNotFound(f"revision {self.revision!r} not found in {self.repo_id}")
        if isinstance(exc, DeadlineExceeded):
            budget = f"within {exc.seconds:g} s (--timeout, default HF_HUB_DOWNLOAD_TIMEOUT)"
            if exc.last_status == 429:
                return RateLimited(f"{self.repo_id}: rate limited by {endpoint} (HTTP 429), still {budget}{self.cache_hint()}")
            if exc.last_status is not None and exc.last_status >= 500:
                return ServerError(
                    f"{self.repo_id}: {endpoint} kept answering HTTP {exc.last_status}; gave up {budget}{self.cache_hint()}"
                )
            if exc.last_error:
                return NetworkError(
                    f"{self.repo_id}: cannot reach {endpoint} ({redact(exc.last_error)}); gave up {budget}{self.cache_hint()}"
                )
            return NetworkError(f"{self.repo_id}: timed out: no complete answer from {endpoint} {budget}{self.cache_hint()}")
        if isinstance(exc, hf.LocalEntryNotFoundError):
            cause = exc.__cause__
            if cause is not None and not isinstance(cause, hf.LocalEntryNotFoundError):
                try:
                    cause.hfmem_attempts = tries  # type: ignore[attr-defined]  # the retries were of the wrapper
                except Exception:
                    pass
                inner = self.translate(cause)
                if inner is not None:
                    return inner
            if constants.HF_HUB_OFFLINE:
                return NetworkError(f"{self.repo_id}: not in the local cache and HF_HUB_OFFLINE is set")
            return NetworkError(f"{self.repo_id}: cannot reach {endpoint}{after} and the repo is not cached")
        if isinstance(exc, hf.EntryNotFoundError):
            if "config.json" in str(exc):
                return NoConfig(f"{self.repo_id}: the repo has no config.json")
            return NoSafetensors(f"{self.repo_id}: {str(exc).splitlines()[0][:200]}")
        if isinstance(exc, hf.OfflineModeIsEnabled):
            return NetworkError(
                f"{self.repo_id}: needs the network but HF_HUB_OFFLINE is set (only fully cached models work offline)"
            )
        status = status_of(exc)
        if isinstance(exc, hf.HfHubHTTPError) or status is not None:
            status = status or 0
            if status == 429:
                asked = retry_after(exc)
                when = f"the Hub asks to retry after {asked:g} s" if asked is not None else "try again later"
                if asked is not None and asked > self.timeout:
                    when += f" (longer than --timeout {self.timeout:g} s, so hfmem did not wait)"
                return RateLimited(f"{self.repo_id}: rate limited by {endpoint} (HTTP 429{after}); {when}{self.cache_hint()}")
            if status >= 500:
                return ServerError(f"{self.repo_id}: {endpoint} answered HTTP {status}{after}{self.cache_hint()}")
            if status in (401, 403):
                return RepoNotFound(
                    f"{self.repo_id}: access denied (HTTP {status}); "
                    + ("the token sent has no access" if self.token_sent else "no token was sent; set HF_TOKEN")
                )
            return NetworkError(f"{self.repo_id}: HTTP {status} from {endpoint}")
        module = type(exc).__module__ or ""
        if isinstance(exc, (OSError, TimeoutError)) or module.startswith(("httpx", "httpcore")):
            # httpx transport errors are not OSError subclasses. Their text names host and port, never headers.
            name = type(exc).__name__
            text = str(exc)
            if "Timeout" in name:
                what = (
                    f"timed out: no answer from {endpoint} within {self.timeout:g} s "
                    "(--timeout, default HF_HUB_DOWNLOAD_TIMEOUT)"
                )
            elif is_incomplete_body(exc):
                what = f"{endpoint} sent an incomplete (truncated) response"
            elif name == "ConnectError" and ("Name or service" in text or "nodename" in text or "resolv" in text):
                what = f"cannot resolve the host of {endpoint} (DNS)"
            elif name == "ConnectError":
                # The reason, e.g. "[Errno 111] Connection refused" (it names no header, and is redacted anyway).
                reason = redact(text.splitlines()[0][:160]) if text.strip() else ""
                what = f"cannot connect to {endpoint}" + (f" ({reason})" if reason else "")
            elif name == "RemoteProtocolError":
                what = f"{endpoint} closed the connection without answering"
            else:
                what = f"network error talking to {endpoint} ({name})"
            return NetworkError(f"{self.repo_id}: {what}{after}{self.cache_hint()}")
        return None

    def cache_hint(self) -> str:
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE or cached_snapshot(self.repo_id, self.revision) is None:
            return ""
        return "; the model is in the local cache: set HF_HUB_OFFLINE=1 to use it"


def _error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    return response.headers.get("X-Error-Code") if response is not None else None


def _has_saved_token() -> bool:
    try:
        from huggingface_hub import get_token

        return get_token() is not None
    except Exception:
        return False


__all__ = ["ModelFiles", "read_hub", "read_local", "looks_local", "load_json_text", "parse_header_bytes"]
