"""The typed Python API: ``analyze(ref)`` reads a model's config and headers and returns a ``Report``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .architecture import Architecture, build_architecture
from .fetch import ModelFiles, looks_local, read_hub, read_local
from .inventory import CountedTensor, Parameters, count_tensors, summarize
from .validate import check_config


@dataclass
class Report:
    repo: str
    revision: str | None
    source: str
    architecture: Architecture
    parameters: Parameters
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tensors: list[CountedTensor] = field(default_factory=list, repr=False)
    extra: dict[str, Any] = field(default_factory=dict)  # sections later features add (kv_cache, weights, ...)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract (see README): stable keys that scripts rely on."""
        out: dict[str, Any] = {
            "repo": self.repo,
            "revision": self.revision,
            "source": self.source,
            "architecture": self.architecture.to_dict(),
            "parameters": self.parameters.to_dict(),
        }
        for key, value in self.extra.items():
            out[key] = value.to_dict() if hasattr(value, "to_dict") else value
        out["notes"] = list(self.notes)
        out["warnings"] = list(self.warnings)
        return out


def read_model(ref: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None) -> ModelFiles:
    """Read config.json and safetensors headers for a Hub repo id, a local folder or a cached snapshot."""
    if looks_local(ref):
        return read_local(ref)
    return read_hub(ref, revision=revision, token=token, timeout=timeout)


def analyze_files(files: ModelFiles) -> Report:
    config_warnings = check_config(files.config)  # before transformers or hfmem trust any value
    entries = [t for h in files.headers for t in h.tensors]
    arch, arch_notes = build_architecture(files.config, entries)
    counted, scheme, tie_notes = count_tensors(files.headers, files.config, arch.num_layers, arch.tie_word_embeddings)
    params = summarize(counted, scheme, tie_notes)
    warnings = list(files.warnings) + config_warnings + [w for h in files.headers for w in h.warnings]
    notes = list(arch_notes) + params.notes
    if scheme is not None and scheme.method.startswith("gptq-or-awq"):
        warnings.append("quantized tensors found without quantization_config: logical count assumes 4-bit packing")
    if params.by_component.get("mtp"):
        notes.append(
            f"{params.by_component['mtp']:,} parameters are multi-token-prediction layers: counted in total "
            "(the Hub's convention) but not loaded by transformers for inference"
        )
    return Report(
        repo=files.repo,
        revision=files.revision,
        source=files.source,
        architecture=arch,
        parameters=params,
        warnings=warnings,
        notes=notes,
        tensors=counted,
    )


def analyze(ref: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None) -> Report:
    """Analyse a model without downloading its weights.

    >>> report = analyze("fixtures/models/Qwen/Qwen2-7B-Instruct")  # doctest: +SKIP
    >>> report.parameters.total
    7615616512
    """
    from .errors import HfmemError

    try:
        return analyze_files(read_model(ref, revision=revision, token=token, timeout=timeout))
    except HfmemError as exc:
        if ref not in exc.message:  # "config.json: ..." says which file; say which model too (batches, logs)
            exc.message = f"{ref}: {exc.message}"
            exc.args = (exc.message,)
        raise
