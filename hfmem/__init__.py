"""hfmem: exact memory needs of a Hugging Face model from its config.json and safetensors headers.

>>> import hfmem
>>> report = hfmem.analyze("Qwen/Qwen2-7B")          # doctest: +SKIP
>>> report.parameters.total                            # doctest: +SKIP
7615616512
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "analyze", "analyze_many", "Report", "HfmemError"]


def __getattr__(name: str):
    # Keep `import hfmem` (and so `hfmem --help`) free of huggingface_hub/transformers imports.
    if name in ("analyze", "Report", "read_model", "analyze_files", "attach_sections"):
        from hfmem import api as analysis

        return getattr(analysis, name)
    if name == "analyze_many":
        from hfmem.batch import analyze_many

        return analyze_many
    if name == "HfmemError":
        from hfmem.errors import HfmemError

        return HfmemError
    raise AttributeError(name)
