"""hfmem: exact memory needs of a Hugging Face model from its config.json and safetensors headers.

>>> import hfmem
>>> report = hfmem.analyze("Qwen/Qwen2-7B", ctx="32k", gpu="4090")   # doctest: +SKIP
>>> report.parameters.total, report.kv_cache[0].total_bytes, report.inference.fits   # doctest: +SKIP
(7615616512, 1879048192, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Resolved lazily so that `import hfmem` (and so `hfmem --help`) imports neither huggingface_hub nor transformers.
_EXPORTS = {
    "analyze": "hfmem.api", "analyze_safetensors": "hfmem.api", "analyze_gguf": "hfmem.api", "analyze_many": "hfmem.api",
    "check": "hfmem.api", "compare": "hfmem.api", "card": "hfmem.api", "read_model": "hfmem.api",
    "analyze_files": "hfmem.api", "attach_sections": "hfmem.api", "CheckResult": "hfmem.api",
    "Report": "hfmem.report", "GGUFReport": "hfmem.gguf.model", "HfmemError": "hfmem.errors",
}  # fmt: skip

__all__ = [
    "__version__", "analyze", "analyze_safetensors", "analyze_gguf", "analyze_many", "check", "compare", "card",
    "read_model", "analyze_files", "attach_sections", "CheckResult", "Report", "GGUFReport", "HfmemError",
]  # fmt: skip

if TYPE_CHECKING:
    from hfmem.api import (
        CheckResult,
        analyze,
        analyze_files,
        analyze_gguf,
        analyze_many,
        analyze_safetensors,
        attach_sections,
        card,
        check,
        compare,
        read_model,
    )
    from hfmem.errors import HfmemError
    from hfmem.gguf.model import GGUFReport
    from hfmem.report import Report


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hfmem' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
