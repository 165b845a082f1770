"""The typed result of an analysis: model facts plus the memory sections the options asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hfmem.model.architecture import Architecture
from hfmem.model.inventory import CountedTensor, Parameters

if TYPE_CHECKING:
    from hfmem.memory.kv import KVCacheEstimate
    from hfmem.memory.parallel import Setup
    from hfmem.memory.planner import InferencePlan
    from hfmem.memory.precision import WeightsByPrecision
    from hfmem.memory.serve import ServeCommand
    from hfmem.memory.training import TrainingReport


@dataclass
class Report:
    """One safetensors model: what its config and headers say, and the memory sections computed from them.

    ``kv_cache`` is set when contexts were asked for (one estimate per context, in the order given); ``weights``,
    ``inference`` and ``download_bytes`` by the planner (``hfmem.analyze`` always runs it); ``training`` with
    ``train=``. ``to_dict()`` is the CLI's ``--format json``."""

    repo: str
    revision: str | None
    source: str  # "hub" | "local" | "cache"
    architecture: Architecture
    parameters: Parameters
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tensors: list[CountedTensor] = field(default_factory=list, repr=False)
    kv_cache: list[KVCacheEstimate] | None = None
    weights: WeightsByPrecision | None = None
    inference: InferencePlan | None = None
    download_bytes: int | None = None  # local folders: bytes on disk; Hub repos: see hfmem.check
    training: TrainingReport | None = None
    # With --gpu: the fewest GPUs of that type that fit (hfmem.memory.parallel), and every layout tried to find it.
    setup: Setup | None = None
    setups: list[Setup] | None = None
    tp_sizes: list[Setup] | None = None  # every_tp=True (-v): the plan at every TP size vLLM accepts on one node
    speed: dict[str, Any] | None = None  # --gpu, fitting on one node: the roofline (hfmem.memory.speed), an upper bound
    hardware: dict[str, Any] | None = None  # --gpu: the GPU's capabilities and whether it runs the precision
    gpus_auto: bool = False  # --gpus auto: the plan is at the smallest setup's TP (its pipeline stages in ``setup``)
    serve: ServeCommand | None = None  # --gpu under vLLM: the `vllm serve` command of the plan (hfmem.memory.serve)

    def to_dict(self, catalog: bool = True) -> dict[str, Any]:
        """The JSON contract (docs/json.md): stable keys that scripts rely on. One context gives ``kv_cache`` as an
        object, several as a list. ``catalog=False`` leaves out ``inference.fits_on`` without computing it."""
        out: dict[str, Any] = {
            "repo": self.repo,
            "revision": self.revision,
            "source": self.source,
            "architecture": self.architecture.to_dict(),
            "parameters": self.parameters.to_dict(),
        }
        if self.kv_cache is not None:
            kv = [e.to_dict() for e in self.kv_cache]
            out["kv_cache"] = kv[0] if len(kv) == 1 else kv
        if self.inference is not None:
            out["weights"] = self.weights.to_dict() if self.weights is not None else None
            out["inference"] = self.inference.to_dict(catalog)
            out["download_bytes"] = self.download_bytes
        if self.training is not None:
            out["training"] = self.training.to_dict()
        if self.hardware is not None:
            out["hardware"] = dict(self.hardware)
        if self.speed is not None:
            out["speed"] = dict(self.speed)
        if self.serve is not None:
            out["serve"] = self.serve.to_dict()
        if self.tp_sizes is not None:
            out["tp_sizes"] = [s.to_dict() for s in self.tp_sizes]
        if self.setups is not None:
            out["smallest_setup"] = self.setup.to_dict() if self.setup is not None else None
            out["setups_tried"] = [s.to_dict() for s in self.setups]
        out["notes"] = list(self.notes)
        out["warnings"] = list(self.warnings)
        return out
