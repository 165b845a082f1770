"""Analyse GGUF repos and files: exact weights per file from GGUF headers, and llama.cpp's KV cache
(``hfmem.memory.kv.llamacpp``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hfmem.errors import LocalPathError, MalformedHeader, NoSafetensors, UsageError
from hfmem.gguf.reader import GGUFHeader, parse_gguf, read_local_gguf, remote_fetcher
from hfmem.hub.local import check_inside, is_regular, looks_local, model_root
from hfmem.memory.kv.llamacpp import GGUFKV, gguf_kv

_SHARD_RE = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
_QUANT_RE = re.compile(r"(?i)(?:^|[-_.])((?:I?Q\d(?:_[A-Z0-9]+)*)|BF16|F16|F32|FP16|MXFP4(?:_MOE)?)(?=[-_.](?:\d{5}-of|gguf))")


@dataclass
class GGUFFile:
    name: str  # first shard's path in the repo (or the file name)
    quant: str
    size_bytes: int | None
    shards: list[str]
    is_projector: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.name, "quant": self.quant, "size_bytes": self.size_bytes, "shards": len(self.shards), "mmproj": self.is_projector}


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:  # a broken link: listed, and refused if it is the file to read
        return None


def quant_from_name(name: str) -> str:
    m = _QUANT_RE.search(Path(name).name)
    return m.group(1).upper() if m else "?"


def group_gguf_files(files: dict[str, int | None]) -> list[GGUFFile]:
    """Group shards (-00001-of-0000N.gguf) and mark mmproj-*.gguf vision projectors."""
    groups: dict[str, GGUFFile] = {}
    for path in sorted(files):
        if not path.endswith(".gguf"):
            continue
        m = _SHARD_RE.search(path)
        key = path[: m.start()] if m else path
        g = groups.get(key)
        if g is None:
            g = groups[key] = GGUFFile(path, quant_from_name(path), 0, [], Path(path).name.lower().startswith("mmproj"))
        g.shards.append(path)
        size = files[path]
        g.size_bytes = None if size is None or g.size_bytes is None else g.size_bytes + size
    return list(groups.values())


@dataclass
class GGUFReport:
    repo: str
    revision: str | None
    source: str
    files: list[GGUFFile]
    selected: GGUFFile | None
    header: GGUFHeader | None
    architecture: dict[str, Any] = field(default_factory=dict)
    kv_cache: list[GGUFKV] = field(default_factory=list)
    request_count: int = 0
    warnings: list[str] = field(default_factory=list)
    offload: Any = None  # --gpu: hfmem.gguf.offload.OffloadPlan (llama.cpp's -ngl on one GPU)
    serve: Any = None  # --gpu: the llama-server command of that plan (hfmem.memory.serve.ServeCommand)

    def parameters(self) -> dict[str, Any]:
        if self.header is None:
            return {}
        h = self.header
        return {
            "total": h.parameters,
            "weight_bytes": h.weight_bytes,
            "bits_per_weight": round(8 * h.weight_bytes / h.parameters, 4) if h.parameters else None,
            "by_ggml_type": h.by_type(),
            "tensors": len(h.tensors),
        }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "repo": self.repo, "revision": self.revision, "source": self.source, "format": "gguf",
            "gguf_files": [f.to_dict() for f in self.files],
            "selected_file": self.selected.name if self.selected else None,
            "architecture": self.architecture, "parameters": self.parameters(),
        }  # fmt: skip
        if self.kv_cache:
            kv = [k.to_dict() for k in self.kv_cache]
            out["kv_cache"] = kv[0] if len(kv) == 1 else kv
        if self.offload is not None:
            out["gpu_offload"] = self.offload.to_dict()
        if self.serve is not None:
            out["serve"] = self.serve.to_dict()
        out["warnings"] = list(self.warnings)
        return out


def architecture_from_metadata(md: dict[str, Any], array_lengths: dict[str, int]) -> dict[str, Any]:
    arch = md.get("general.architecture")
    if not isinstance(arch, str):
        raise MalformedHeader("GGUF metadata has no general.architecture")

    def key(name: str, default: Any = None) -> Any:
        return md.get(f"{arch}.{name}", default)

    heads = key("attention.head_count")
    kv_heads = key("attention.head_count_kv", heads)
    embd = key("embedding_length")
    layers = key("block_count")
    head_for_dim = max(heads) if isinstance(heads, list) and heads else heads
    key_len = key("attention.key_length", embd // head_for_dim if embd and head_for_dim else None)
    out: dict[str, Any] = {
        "architecture": arch,
        "name": md.get("general.name"),
        "file_type": md.get("general.file_type"),
        "num_layers": layers,
        "hidden_size": embd,
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "key_length": key_len,
        "value_length": key("attention.value_length", key_len),
        "context_length": key("context_length"),
        "sliding_window": key("attention.sliding_window"),
        "vocab_size": key("vocab_size", array_lengths.get("tokenizer.ggml.tokens")),
        "expert_count": key("expert_count"),
        "expert_used_count": key("expert_used_count"),
    }
    # What llama.cpp's memory layout depends on beyond the attention shape (docs/gguf.md), only where the file says
    # it with the type llama.cpp reads (anything else is ignored, as a malformed value must not crash the report).
    def num(name: str) -> int | None:
        v = key(name)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    def flags(name: str) -> list | None:
        v = key(name)
        return v if isinstance(v, list) and all(isinstance(x, (bool, int)) for x in v) else None

    nextn = num("nextn_predict_layers") or 0
    if nextn and isinstance(layers, int) and nextn < layers:
        out["trunk_layers"] = int(layers) - nextn  # llama_hparams::n_layer(): NextN/MTP layers get no trunk KV
    # MLA (src/llama-hparams.cpp is_mla: key_length_mla and value_length_mla set): the converter writes
    # key_length = kv_lora_rank + rope dims and head_count_kv = 1; llama.cpp caches that K row and no V.
    if num("attention.key_length_mla") and num("attention.value_length_mla"):
        out["is_mla"] = True
        out["kv_lora_rank"] = num("attention.kv_lora_rank")
        out["rope_dimension_count"] = num("rope.dimension_count")
    pattern = key("attention.sliding_window_pattern")
    extra = {
        "key_length_swa": num("attention.key_length_swa"), "value_length_swa": num("attention.value_length_swa"),
        "sliding_window_pattern": flags("attention.sliding_window_pattern") if isinstance(pattern, list) else num("attention.sliding_window_pattern"),
        "recurrent_layers": flags("attention.recurrent_layers"), "full_attention_interval": num("full_attention_interval") or None,
        "shared_kv_layers": num("attention.shared_kv_layers"),
    }  # fmt: skip
    out.update({k: v for k, v in extra.items() if v is not None})
    ssm = {
        "d_conv": num("ssm.conv_kernel"), "d_inner": num("ssm.inner_size"), "d_state": num("ssm.state_size"),
        "n_group": num("ssm.group_count"), "shortconv_l_cache": num("shortconv.l_cache"),
        "wkv_head_size": num("wkv.head_size"), "token_shift_count": num("token_shift_count"),
    }  # fmt: skip
    ssm = {k: v for k, v in ssm.items() if v is not None}
    if ssm:
        out["ssm"] = ssm
    if flags("feed_forward_length") is not None:
        out["feed_forward_length"] = key("feed_forward_length")  # nemotron_h: recurrent layers have no FFN
    return out


def read_gguf_report(
    ref: str,
    gguf_file: str | None = None,
    quant: str | None = None,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    contexts: list[int] | None = None,
    batch: int = 1,
    cache_type: str = "f16",
    defaults: str = "llama-server",
) -> GGUFReport:
    """List the GGUF files of a repo/folder, read the selected file's header (all shards), and size its KV cache."""
    path = Path(ref).expanduser()
    counter: list[int] = []
    if path.exists() or path.is_symlink() or looks_local(ref):
        # The local-path rules of safetensors folders (hfmem.hub.local): regular files only (a FIFO would hang
        # open(), /dev/zero never ends), and files found in a folder may link only inside it (an HF cache
        # snapshot: into its repo's blobs/); a file named directly may be a link anywhere, the user chose it.
        files: dict[str, int | None]
        if not path.exists():
            raise LocalPathError(f"{ref}: no such file or directory", path=ref)
        if not path.is_dir():
            is_regular(path, ref)
            files = {path.name: path.stat().st_size}
            root, allowed = path.parent, None
        else:
            root, allowed = path, model_root(path)
            files = {str(p.relative_to(root)): _size(p) for p in root.rglob("*.gguf")}
            if not files and path.name.lower().endswith(".gguf"):
                raise LocalPathError(f"{ref}: a directory, not a GGUF file", path=ref)
        source, repo, sha = "local", ref, None

        def read(name: str) -> GGUFHeader:
            file = root / name
            if allowed is not None:
                check_inside(file, allowed, ref)
            try:
                return read_local_gguf(file, ref)
            except LocalPathError as exc:
                exc.fill(path=str(file))
                raise
    else:
        from huggingface_hub import HfApi

        from hfmem.hub.remote import HubContext, check_revision

        check_revision(revision)
        from huggingface_hub import constants

        from hfmem.hub.timeout import check_timeout

        # As read_hub: --timeout, else HF_HUB_DOWNLOAD_TIMEOUT (default 10 s).
        ctx = HubContext(ref, revision, token, check_timeout(timeout if timeout is not None else constants.HF_HUB_DOWNLOAD_TIMEOUT))
        # One request: the commit sha and every file's size (retried on transient failures, see retry.py).
        info = ctx.guard(lambda: ctx.call(lambda: HfApi().model_info(ref, revision=revision, token=token, files_metadata=True)))
        files = {s.rfilename: s.size for s in info.siblings or [] if s.rfilename.endswith(".gguf")}
        sha = info.sha
        source, repo = "hub", ref
        read = lambda name: ctx.guard(lambda: ctx.call(lambda: parse_gguf(remote_fetcher(ctx, name, revision, counter), name)))  # noqa: E731
    groups = group_gguf_files(files)
    if not groups:
        raise NoSafetensors(f"{ref}: no GGUF files found")
    selected = None
    if gguf_file:
        selected = next((g for g in groups if gguf_file in (g.name, Path(g.name).name) or gguf_file in g.shards), None)
        if selected is None:
            raise UsageError(f"{ref}: no GGUF file named {gguf_file!r} (have: {', '.join(g.name for g in groups)[:300]})")
    elif quant:
        matches = [g for g in groups if g.quant == quant.upper() and not g.is_projector]
        if not matches:
            raise UsageError(f"{ref}: no GGUF file with quant {quant!r} (have: {', '.join(sorted({g.quant for g in groups}))})")
        selected = matches[0]
    else:
        models = [g for g in groups if not g.is_projector]
        if len(models) == 1:
            selected = models[0]
    report = GGUFReport(repo, sha, source, groups, selected, None)
    if selected is None:
        return report
    headers = [read(name) for name in selected.shards]
    merged = headers[0]
    for extra in headers[1:]:
        merged.tensors.extend(extra.tensors)
    report.header = merged
    report.architecture = architecture_from_metadata(merged.metadata, merged.array_lengths)
    for context in contexts or []:
        report.kv_cache.append(gguf_kv(report.architecture, context, batch, cache_type, defaults))
    report.request_count = len(counter)
    return report
