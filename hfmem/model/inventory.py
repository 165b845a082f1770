"""Tensor inventory: exact parameter counts per dtype, per component and per part, from safetensors headers alone.

A parameter is counted once (a stored tied lm_head copy is noted); buffers (position_ids, inv_freq, masks, integer
tables) are not parameters; packed quantized storage counts its logical elements (``quant.Quantizer``), its scales
and zeros are overhead bytes. The rules, with the checkpoints they were checked on: docs/parameters.md."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter
from typing import Any

from hfmem.hub.header import FileHeader, TensorEntry
from hfmem.model.components import structural_parts
from hfmem.model.moe import MoeSummary
from hfmem.model.quant import NUMEL_PARAM, OVERHEAD, PARAM, QUANTIZED, Quantization, Quantizer, QuantScheme, Role, detect_scheme

# Non-parameter buffers that checkpoints sometimes carry.
_BUFFER_RE = re.compile(
    r"(^|\.)(position_ids|inv_freq|num_batches_tracked|masked_bias|_float_tensor)$|(^|\.)attn\.bias$"
)
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block)\.(\d+)\.")

COMPONENTS = (
    "embeddings",
    "attention",
    "mlp",
    "moe_experts",
    "moe_shared_experts",
    "moe_router",
    "ssm",
    "norms",
    "lm_head",
    "vision",
    "audio",
    "projector",
    "speech_generator",
    "mtp",
    "other",
)


@dataclass
class Parameters:
    total: int
    active: int
    stored_bytes: int
    stored_elements: int
    by_dtype: dict[str, int]
    by_component: dict[str, int]
    bytes_by_component: dict[str, int]
    tensors: int
    buffers: int = 0
    tied_duplicate_elements: int = 0
    quantization: Quantization | None = None
    notes: list[str] = field(default_factory=list)
    # total minus what transformers does not build for inference (multi-token-prediction layers)
    inference_loaded: int | None = None
    by_part: dict[str, int] = field(default_factory=dict)  # language_model / vision_tower / audio_tower / projector ...
    moe: MoeSummary | None = None  # set by hfmem.api.analyze_files from moe.summarize_moe
    warnings: list[str] = field(default_factory=list)  # config/tensor disagreements (moved to Report.warnings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "active": self.active,
            "inference_loaded": self.total if self.inference_loaded is None else self.inference_loaded,
            "stored_bytes": self.stored_bytes,
            "stored_elements": self.stored_elements,
            "tensors": self.tensors,
            "by_dtype": dict(self.by_dtype),
            "by_component": dict(self.by_component),
            "bytes_by_component": dict(self.bytes_by_component),
            "buffer_elements": self.buffers,
            "tied_duplicate_elements": self.tied_duplicate_elements,
            "by_part": dict(self.by_part),
            "quantization": self.quantization.to_dict() if self.quantization else None,
            "moe": self.moe.to_dict() if self.moe else None,
        }


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, 8x the cost of a plain slots
# one, and there is one of these per stored tensor (500k in the largest checkpoints). Treated as immutable all the
# same; unsafe_hash keeps them hashable and comparable by value.
@dataclass(slots=True, unsafe_hash=True)
class CountedTensor:
    entry: TensorEntry
    component: str
    logical: int  # logical parameters (0 for overhead and buffers)
    role: str  # "param" | "quant_overhead" | "buffer" | "tied_duplicate"
    layer: int | None
    # the name with its numeric parts replaced by ".#" (one shared string per pattern), for later per-pattern memos;
    # None where the name is outside _NameFactsMemo's reasoning. Derived from the name: not part of the value.
    pattern: str | None = field(default=None, compare=False)


_PROJECTOR_KEYS = (
    "multi_modal_projector", "mm_projector", "vision_projector", "visual.merger", "deepstack_merger", "embed_vision",
    "mm_input_projection", "audio_projector", "embed_audio", "patch_merge_mlp", "audio_encoder.projection",
)
_TOWER_KEYS = (
    "visual.", "vision_tower", "vision_model", "vision_encoder", "audio_tower", "audio_model", "audio_encoder",
    "image_encoder", "vit.", "siglip", "speech_embeddings",
)
_AUDIO_KEYS = ("audio", "whisper", "speech")


def classify_component(name: str, num_layers: int | None = None) -> str:
    """Which part of the model a tensor belongs to, from its name alone."""
    return name_facts(name, num_layers)[0]


def name_facts(name: str, num_layers: int | None = None) -> tuple[str, int | None, bool]:
    """(component, layer index, whether it is a buffer) of a tensor name, in one pass over it.

    The name rules do not depend on numeric path parts, so they are evaluated once per name *pattern* (numbers
    replaced) and cached; only the layer index, and the MTP rule that uses it (a layer index past
    num_hidden_layers), look at the number itself.
    """
    base, buffer = _pattern_facts(_NUMERIC_PART_RE.sub(".#", name))
    m = _LAYER_RE.search(name)
    layer = int(m.group(1)) if m else None
    if base in ("speech_generator", "mtp") or num_layers is None:
        return base, layer, buffer
    lower = name.lower()
    if lower == name:
        index = layer
    else:
        m_lower = _LAYER_RE.search(lower)
        index = int(m_lower.group(1)) if m_lower else None
    if index is not None and index >= num_layers and base not in ("vision", "audio", "projector"):
        return "mtp", layer, buffer  # DeepSeek-V3 style next-token-prediction layers stored after the last decoder layer
    return base, layer, buffer


# A numeric path part with the dot before it (replaced by ".#"): the same parts as (?<=\.)\d+(?=\.), found twice as
# fast (the scan looks for the literal dot instead of testing a look-behind at every position).
_NUMERIC_PART_RE = re.compile(r"\.\d+(?=\.)")
# the same on ASCII names, where \d is [0-9]; the class is ~8 % faster to scan than \d's Unicode category test
_ASCII_NUMERIC_PART_RE = re.compile(r"\.[0-9]+(?=\.)")


@lru_cache(maxsize=65536)
def _pattern_facts(key: str) -> tuple[str, bool]:
    """(component, buffer) of a name pattern; _BUFFER_RE only looks at name parts that are never numbers."""
    buffer = _BUFFER_RE.search(key) is not None and not key.endswith("e_score_correction_bias")
    return _classify_pattern(key.lower()), buffer


@lru_cache(maxsize=65536)
def _classify_pattern(n: str) -> str:
    if n.startswith(("talker.", "code2wav.", "token2wav.")):
        return "speech_generator"  # Qwen-Omni style speech output models (their own layers, experts and config)
    if n.startswith("mtp.") or ".mtp." in n or n.startswith("model.mtp"):
        return "mtp"
    if any(k in n for k in _PROJECTOR_KEYS):
        return "projector"
    if _is_tower(n):
        return "audio" if any(k in n for k in _AUDIO_KEYS) else "vision"
    if "shared_expert" in n:
        return "moe_shared_experts"
    if ".experts." in n or n.endswith(".experts") or ".experts_" in n or "experts.gate_up" in n or "experts.down" in n:
        return "moe_experts"
    if _ROUTER_RE.search(n):
        return "moe_router"
    if _HEAD_RE.search(n) or n.startswith("cls.predictions") or n.startswith("lm_head"):
        return "lm_head"
    if any(k in n for k in _EMBED_KEYS) or n in ("shared.weight", "embeddings.weight", "embed.weight"):
        return "embeddings"
    if _NORM_RE.search(n) and not n.endswith(("proj.weight", "dense.weight")):
        return "norms"
    if any(k in n for k in _SSM_KEYS):
        return "ssm" if "linear_attn." not in n else "attention"
    if any(k in n for k in _ATTN_KEYS):
        return "attention"
    if any(k in n for k in _MLP_KEYS):
        return "mlp"
    if n.startswith("embeddings.") or ".embeddings." in n:
        return "embeddings"
    return "other"


_ROUTER_RE = re.compile(
    r"(\.router\.|\.router$|mlp\.gate\.|block_sparse_moe\.gate\.|feed_forward\.gate\.|ffn\.gate\.|e_score_correction"
    r"|\.moe_gate|mlp\.gate$)"
)
_HEAD_RE = re.compile(r"(^|\.)(lm_head|embed_out|output|head)\.(weight|bias)$")
_NORM_RE = re.compile(r"(norm|ln_\d|ln_f|layernorm|layer_norm)")
_EMBED_KEYS = ("embed_tokens", "wte.", "wpe.", "word_embeddings", "position_embeddings", "token_type_embeddings",
               "tok_embeddings", "embed_positions", "relative_attention_bias")
_ATTN_KEYS = ("self_attn", "self_attention.", "encoder_attn.", ".attn.", ".attention.", "selfattention", "encdecattention",
              "cross_attn", "out_proj", "q_proj", "k_proj", "v_proj", "o_proj", "query_key_value", "c_attn")
_MLP_KEYS = ("mlp", "feed_forward", "ffn", "densereludense", ".intermediate.", ".output.dense", "fc1", "fc2", "gate_proj",
             "up_proj", "down_proj", "c_fc", "dense_h_to_4h", "dense_4h_to_h")

_SSM_KEYS = ("mixer.", "mamba", ".ssm", "linear_attn.", "conv1d", "a_log", "dt_bias", "dt_proj", "x_proj")


# Which model of a composite checkpoint a component belongs to (parameters.by_part).
PART_OF = {"vision": "vision_tower", "audio": "audio_tower", "projector": "projector", "mtp": "mtp",
           "speech_generator": "speech_generator"}
PARTS = ("language_model", "vision_tower", "audio_tower", "projector", "speech_generator", "mtp")


def _is_tower(n: str) -> bool:
    return any(k in n for k in _TOWER_KEYS) or n.startswith(("vision.", "audio.", "thinker.visual", "thinker.audio"))


def layer_index(name: str) -> int | None:
    m = _LAYER_RE.search(name)
    return int(m.group(1)) if m else None


_INDEX_DTYPES = frozenset({"BOOL", "I16", "U16", "I32", "I64", "U64"})


def count_tensors(
    headers: Iterable[FileHeader],
    config: dict[str, Any],
    num_layers: int | None = None,
    tie_word_embeddings: bool = False,
    hidden_size: int | None = None,
    vocab_size: int | None = None,
) -> tuple[list[CountedTensor], QuantScheme | None, list[str]]:
    """Classify every stored tensor once (linear time: sibling look-ups go through one name -> entry dict).

    The returned scheme carries the ``Quantizer`` that saw the tensors (``scheme.quantizer``) for ``summarize``.
    """
    entries = [t for h in headers for t in h.tensors]
    scheme = detect_scheme(config, entries)
    # sibling look-ups by name are the recognisers' (without a scheme role() answers from the tensor alone)
    index = dict(zip(map(_name_of, entries), entries)) if scheme is not None else {}
    quantizer = Quantizer(scheme, index)
    if scheme is not None:
        scheme.quantizer = quantizer
    notes: list[str] = []
    counted: list[CountedTensor] = []
    # only a tied checkpoint compares its output head with the input embedding (a scan of every name otherwise)
    embed = _find_input_embedding(entries) if tie_word_embeddings else None
    index_tables: list[str] = []
    # towers and projectors from the config's encoder sub-configs and the tensors' module paths (model/components.py),
    # one component per prefix; the name rules below decide the rest
    parts = structural_parts(config, entries, hidden_size, vocab_size, _owned_by_name_rules)
    prefixes = tuple(sorted(parts, key=len, reverse=True))
    facts_of = _NameFactsMemo(num_layers, parts, prefixes, quantizer.name_only_role, quantizer.pattern_recogniser)
    for t, (component, layer, buffer, pattern, fixed) in zip(entries, facts_of.classify(map(_name_of, entries))):
        if buffer:
            counted.append(CountedTensor(t, component, 0, "buffer", layer, pattern))
            continue
        if (
            component == "lm_head"
            and tie_word_embeddings
            and embed is not None
            and t.shape == embed.shape
            and t.name.endswith("weight")
        ):
            counted.append(CountedTensor(t, component, 0, "tied_duplicate", layer, pattern))
            notes.append(
                f"{t.name} is stored although tie_word_embeddings is true; counted once (shares {embed.name})"
            )
            continue
        if fixed is None:
            role, logical, _ = quantizer.role(t)
        elif fixed is NUMEL_PARAM:
            role, logical = PARAM, t.numel
        elif type(fixed) is Role:
            role, logical = fixed.role, fixed.logical
        else:
            role, logical, _ = fixed(t)
        if role == PARAM and t.dtype in _INDEX_DTYPES:
            # Integer/bool tensors that no quantized layout claims are lookup tables or masks, not trainable weights.
            counted.append(CountedTensor(t, component, 0, "buffer", layer, pattern))
            index_tables.append(t.name)
            continue
        counted.append(CountedTensor(t, component, logical, role, layer, pattern))
    # The quantizer lives on in the scheme (for summarize), in a reference cycle (its dispatch table holds its bound
    # methods); its name index is no longer needed, and released here it is freed with the report instead of waiting
    # for a full cyclic collection (half a second at exit on a 500k-tensor checkpoint).
    quantizer.index = {}
    if index_tables:
        notes.append(
            f"{len(index_tables)} integer tensors (e.g. {index_tables[0]}) are lookup tables, not parameters: "
            "stored bytes counted, parameters not"
        )
    return counted, scheme, notes


# The first layer-stack number of a name pattern (numeric parts replaced by ".#"): _LAYER_RE on the pattern.
_LAYER_IN_PATTERN_RE = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block)\.#\.")
_NUMBERS_RE = re.compile(r"\.(\d+)(?=\.)")  # the numeric parts _NUMERIC_PART_RE replaces, in order
_NO_MTP_RULE = frozenset({"speech_generator", "mtp", "vision", "audio", "projector"})
_name_of = attrgetter("name")


class _NameFactsMemo:
    """``name_facts`` plus the structural prefix rule of ``count_tensors``, worked out once per name pattern.

    Everything but the layer number is a function of the pattern (numeric parts replaced by ".#"): the name rules
    (see name_facts), and which numeric part _LAYER_RE picks in the name and in its lower-case form (the pattern
    keeps every character but the digits of numeric parts, so a match in the name is a match at the same place in
    the pattern). A structural prefix with no digit and no "#" starts the name exactly when it starts the pattern
    (the two first differ at a digit of the name, which such a prefix cannot hold). So per tensor: one
    substitution, one dictionary look-up, and the numeric parts only when a layer number is needed. Names this
    reasoning does not cover (non-ASCII, whose lower-casing may change lengths; a literal "#"; prefixes with
    digits) take name_facts tensor by tensor."""

    memo = True  # False: every name worked out on its own (tests compare the two)

    def __init__(self, num_layers: int | None, parts: dict[str, str], prefixes: tuple[str, ...],
                 name_role: Callable[[str], Role | None] | None = None,
                 recogniser: Callable[[str], Callable[[TensorEntry], Role] | None] | None = None):
        self.num_layers = num_layers
        self.parts = parts
        self.prefixes = prefixes
        self.name_role = name_role  # Quantizer.name_only_role: the same for every name of a pattern (same last part)
        self.recogniser = recogniser  # Quantizer.pattern_recogniser: role() per tensor, faster, for one pattern
        self.facts: dict[str, tuple[Any, ...]] = {}
        self.by_pattern = self.memo and not any(ch.isdigit() or ch == "#" for p in prefixes for ch in p)

    def __call__(self, name: str) -> tuple[str, int | None, bool, str | None, Any]:
        """(component, layer, buffer, pattern or None, the role for every name of the pattern or the recogniser
        that stands in for role() on them, or None: role() itself)."""
        return self.classify((name,))[0]

    def classify(self, names: Iterable[str]) -> list[tuple[str, int | None, bool, str | None, Any]]:
        """[self(name) for name in names]: per name one substitution and one dictionary look-up, the rest inlined
        (this runs once per stored tensor, 500k times on the largest checkpoints); a name whose pattern has no layer
        number shares its pattern's answer tuple."""
        out: list[tuple[str, int | None, bool, str | None, Any]] = []
        append = out.append
        per_name = self._per_name
        if not self.by_pattern:
            for name in names:
                append((*per_name(name), None, None))
            return out
        sub = _ASCII_NUMERIC_PART_RE.sub  # (only ASCII names reach it)
        get = self.facts.get
        learn = self._learn
        findall = _NUMBERS_RE.findall
        num_layers = self.num_layers
        small_numbers: dict[str, int] = {}
        numbers_at = small_numbers.get
        for name in names:
            if not name.isascii() or "#" in name:
                append((*per_name(name), None, None))
                continue
            key = sub(".#", name)
            facts = get(key)
            if facts is None:
                facts = learn(key)
            shared, at, mtp_at, first, component, buffer, override, key, role = facts  # key: one string per pattern
            if shared is not None:  # no layer number
                append(shared)
                continue
            if first is not None:  # the number is the first numeric part, which starts where the pattern's first "#" is
                # its first three characters hold its dot when it has one or two digits, and then decide it: a
                # look-up instead of find, slice and int (a third of this loop's time)
                number = numbers_at(name[first : first + 3])
                if number is None:
                    end = name.find(".", first)
                    number = int(name[first:end])
                    if end - first < 3:
                        small_numbers[name[first : first + 3]] = number
                layer = number if at is not None else None
                mtp_number = number if mtp_at is not None else None
            else:
                numbers = findall(name)
                layer = int(numbers[at]) if at is not None else None
                mtp_number = int(numbers[mtp_at]) if mtp_at is not None else None
            if override is not None:
                append((override, layer, buffer, key, role))
            elif mtp_number is not None and mtp_number >= num_layers:  # type: ignore[operator]
                append(("mtp", layer, buffer, key, role))
            else:
                append((component, layer, buffer, key, role))
        return out

    def _learn(self, key: str) -> tuple[Any, ...]:
        """The memo entry of a pattern: (the answer tuple when no layer number is read, else None; position of the
        layer number, of the MTP rule's number; where the first numeric part starts when that is the one read;
        component, buffer, prefix part, the pattern, the role or recogniser)."""
        # (a numeric part is followed by a dot, so the last part of the pattern is the name's own)
        component, buffer, at, mtp_at, override = self._pattern(key)
        # where the first numeric part starts, when the numbers asked for are that one (names before it agree)
        first = key.index("#") if {at, mtp_at} <= {0, None} and (at, mtp_at) != (None, None) else None
        role_of: Any = self.name_role(key) if self.name_role else None
        if role_of is None and self.recogniser is not None:
            role_of = self.recogniser(key)
        shared = (component, None, buffer, key, role_of) if at is None and mtp_at is None else None
        facts = self.facts[key] = (shared, at, mtp_at, first, component, buffer, override, key, role_of)
        return facts

    def _per_name(self, name: str) -> tuple[str, int | None, bool]:
        component, layer, buffer = name_facts(name, self.num_layers)
        if self.prefixes and name.startswith(self.prefixes):  # (tower blocks past num_hidden_layers are not MTP layers)
            component = next(self.parts[p] for p in self.prefixes if name.startswith(p))
        return component, layer, buffer

    def _pattern(self, key: str) -> tuple[str, bool, int | None, int | None, str | None]:
        """(component without the MTP layer rule: the prefix's part if one applies, buffer, position of the layer
        number among the numeric parts, of the number the MTP rule compares (in the lower-case name) or None when the
        rule cannot apply, prefix part)."""
        base, buffer = _pattern_facts(key)
        m = _LAYER_IN_PATTERN_RE.search(key)
        at = key.count(".#", 0, m.end()) - 1 if m else None
        mtp_at = None
        if self.num_layers is not None and base not in _NO_MTP_RULE:
            lower = key.lower()
            m_lower = m if lower == key else _LAYER_IN_PATTERN_RE.search(lower)
            mtp_at = lower.count(".#", 0, m_lower.end()) - 1 if m_lower else None
        override = None
        if self.prefixes and key.startswith(self.prefixes):
            override = next(self.parts[p] for p in self.prefixes if key.startswith(p))
            mtp_at = None
        return override or base, buffer, at, mtp_at, override


def _owned_by_name_rules(prefix: str) -> bool:
    """Module roots whose part the name rules decide: output heads, embeddings, MTP layers, speech generators."""
    return _classify_pattern(prefix.lower() + "weight") in ("lm_head", "embeddings", "mtp", "speech_generator")


def _find_input_embedding(entries: list[TensorEntry]) -> TensorEntry | None:
    for t in entries:
        n = t.name
        if n.endswith(("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "tok_embeddings.weight")) or n == "shared.weight":
            if not _is_tower(n.lower()):
                return t
    return None


def summarize(counted: list[CountedTensor], scheme: QuantScheme | None, notes: list[str]) -> Parameters:
    # One pass adding up (bytes, elements, logical parameters) per (role, component, dtype), a few dozen keys, then
    # the totals from those sums (the same additions, grouped).
    sums: dict[tuple[str, str, str], list[int]] = {}
    get = sums.get
    for c in counted:
        e = c.entry
        key = (c.role, c.component, e.dtype)
        acc = get(key)
        if acc is None:
            sums[key] = [e.nbytes, e.numel, c.logical]
        else:
            acc[0] += e.nbytes
            acc[1] += e.numel
            acc[2] += c.logical
    by_dtype: Counter[str] = Counter()
    by_component: Counter[str] = Counter()
    bytes_by_component: Counter[str] = Counter()
    total = stored_bytes = stored_elements = buffers = tied = 0
    overhead = quantized_params = 0
    for (role, component, dtype), (nbytes, numel, logical) in sums.items():
        stored_bytes += nbytes
        stored_elements += numel
        if role == "buffer":
            buffers += numel
            continue
        if role == "tied_duplicate":
            tied += numel
            continue
        bytes_by_component[component] += nbytes
        if role == OVERHEAD:
            overhead += nbytes
            continue
        by_dtype[dtype] += numel
        by_component[component] += logical
        total += logical
        if role == QUANTIZED:
            quantized_params += logical
    quantization = None
    warnings: list[str] = []
    if scheme is not None:
        quantizer = getattr(scheme, "quantizer", None)
        from_tensors = quantizer.details() if quantizer is not None else {}
        quantization = Quantization(
            method=from_tensors.pop("method", scheme.method), bits=from_tensors.pop("bits", scheme.bits),
            group_size=scheme.group_size, source=scheme.source, overhead_bytes=overhead,
            quantized_parameters=quantized_params, unquantized_parameters=total - quantized_params,
            scheme_details=dict(scheme.details), tensor_details=from_tensors,
        )
        if quantizer is not None:
            warnings = quantizer.check(quantized_params)
    ordered = {k: by_component[k] for k in COMPONENTS if by_component.get(k)}
    by_part: Counter[str] = Counter()
    for k, n in ordered.items():
        by_part[PART_OF.get(k, "language_model")] += n
    mtp = by_component.get("mtp", 0)
    return Parameters(
        total=total,
        active=total - mtp,
        stored_bytes=stored_bytes,
        stored_elements=stored_elements,
        by_dtype=dict(sorted(by_dtype.items())),
        by_component=ordered,
        bytes_by_component={k: bytes_by_component[k] for k in COMPONENTS if bytes_by_component.get(k)},
        tensors=len(counted),
        buffers=buffers,
        tied_duplicate_elements=tied,
        quantization=quantization,
        notes=list(notes),
        inference_loaded=total - mtp,
        by_part={k: by_part[k] for k in PARTS if by_part.get(k)},
        warnings=warnings,
    )
