"""What a download for serving fetches: the safetensors weights and the small files beside them, not every file of
the repo tree. Repos often also carry the same weights in other formats (``pytorch_model*.bin``, ``original/
consolidated.pth``, ``.gguf``, ONNX/OpenVINO/Core ML exports): vLLM fetches ``*.safetensors`` when a repo has them
(vllm/model_executor/model_loader/default_loader.py: ``DefaultModelLoader._prepare_weights`` tries the
``*.safetensors`` pattern first and only falls back to ``*.bin``/``*.pt``), and transformers' ``from_pretrained``
prefers ``model.safetensors(.index.json)`` over ``pytorch_model.bin``."""

from __future__ import annotations

from dataclasses import dataclass, field

# Weight files of formats other than safetensors, and folders that hold exports or original checkpoints.
_OTHER_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".gguf", ".onnx", ".onnx_data", ".msgpack", ".h5", ".tflite",
                  ".mlmodel", ".ot", ".nemo", ".pkl")
_OTHER_FOLDERS = ("original/", "onnx/", "openvino/", "coreml/", "gguf/", "tflite/", "flax/", "tf/")
_SMALL = 64 * 2**20  # a file that size or larger with no known role is counted as weights of some other format


@dataclass
class DownloadPlan:
    """Bytes to fetch (``needed_bytes``, ``needed`` files) and what a full snapshot would add (``skipped``)."""

    needed_bytes: int
    needed: list[str] = field(default_factory=list)
    skipped_bytes: int = 0
    skipped: list[str] = field(default_factory=list)

    @property
    def snapshot_bytes(self) -> int:
        return self.needed_bytes + self.skipped_bytes


def select(files: list[tuple[str, int]]) -> DownloadPlan:
    """The files a safetensors model needs from ``files`` ((path, size) of the repo tree)."""
    plan = DownloadPlan(0)
    has_safetensors = any(p.endswith(".safetensors") for p, _ in files)
    for path, size in files:
        low = path.lower()
        other = (any(low.startswith(d) or f"/{d}" in low for d in _OTHER_FOLDERS)
                 or (has_safetensors and (low.endswith(_OTHER_WEIGHTS)
                                          or (not low.endswith((".safetensors", ".json")) and size >= _SMALL))))
        if other:
            plan.skipped_bytes += size
            plan.skipped.append(path)
        else:
            plan.needed_bytes += size
            plan.needed.append(path)
    return plan
