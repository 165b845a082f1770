"""Quantized checkpoint layouts: which stored tensors are packed weights (and how many logical values each holds)
and which are bookkeeping (scales, zeros, indices, serialized quant state) that is overhead, not parameters.

One recogniser per layout, each looking only at a tensor's own name/dtype/shape and at its siblings by exact name
(dictionary look-ups), so a checkpoint is classified in time linear in its tensor count. Layouts and sources:

- GPTQ (AutoGPTQ ``QuantLinear``, auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py; vllm quantization/gptq.py
  ``create_weights``): ``qweight`` I32 ``[in*bits/32, out]`` (packed along the input dim), ``qzeros`` I32
  ``[ceil(in/g), out*bits/32]``, ``scales`` F16 ``[ceil(in/g), out]``, ``g_idx`` I32 ``[in]``.
- AWQ GEMM (AutoAWQ ``WQLinear_GEMM``; vllm quantization/awq.py, ``packed_dim=1``): ``qweight`` I32
  ``[in, out*bits/32]`` (packed along the output dim), ``qzeros`` I32 ``[in/g, out*bits/32]``, ``scales`` F16
  ``[in/g, out]``. The two layouts are told apart by shape: GPTQ's qweight has as many columns as ``scales``.
- bitsandbytes 4-bit (bitsandbytes/nn/modules.py ``Linear4bit._save_to_state_dict``, functional.py
  ``QuantState.as_dict``; shapes confirmed by quantizing a Linear with bitsandbytes 0.50.2 on CPU, see
  scripts/make_fixtures.py): ``weight`` U8 ``[ceil(n/2), 1]`` (or ``bnb_4bit_quant_storage`` dtype, ``[n/(2*itemsize),
  1]``), ``weight.absmax`` ``[ceil(n/blocksize)]``, ``weight.quant_map`` F32 ``[16]``, ``weight.nested_absmax``,
  ``weight.nested_quant_map`` (double quant), ``weight.quant_state.bitsandbytes__nf4|fp4`` (U8 JSON: tensor DATA,
  never read). Logical n = numel * itemsize * 2. 8-bit (``Linear8bitLt``): ``weight`` I8 ``[out, in]`` + ``SCB`` F32
  ``[out]`` + ``weight_format`` U8 scalar.
- Scaled 8-bit / MX weights: fine-grained FP8 (transformers integrations/finegrained_fp8.py): ``weight`` F8_E4M3 +
  ``weight_scale_inv`` F32 ``[ceil(out/b0), ceil(in/b1)]``; per-tensor/channel FP8 and compressed-tensors
  float/int-quantized: ``weight`` F8/I8 + ``weight_scale`` ``[1]``/``[out, 1]`` (+ ``input_scale``); MXFP8
  (OCP Microscaling spec, 32 values per E8M0 scale): ``weight`` F8_E4M3 + U8/E8M0 ``weight_scale_inv`` ``[out, in/32]``;
  DeepSeek-V4 style ``weight`` + ``scale`` F8_E8M0: a byte-wide weight whose per-row E8M0 scales cover twice its
  width (``scale.shape[-1] * 32 == 2 * weight.shape[-1]``) holds two FP4 (E2M1) values per byte, i.e. MXFP4.
- compressed-tensors pack-quantized (compressed_tensors compressors; module matching follows
  compressed_tensors/utils/match.py: ``re:`` targets use ``re.match``, other targets are exact names or class names):
  ``weight_packed`` (I32 or U8 container, ``container_bits/num_bits`` values per element, ``num_bits`` from the
  config group that targets the module) + ``weight_scale`` ``[out, in/g]`` + optional ``weight_zero_point``,
  ``weight_g_idx``, ``weight_global_scale`` and ``weight_shape`` (I32/I64 ``[2]``: its values are data, not read).
- MXFP4 (gpt-oss; transformers integrations/mxfp4.py): ``*_blocks`` U8 ``[..., in/32, 16]`` (two FP4 per byte) +
  ``*_scales`` U8 ``[..., in/32]``.
- MLX (mlx/nn/layers/quantized.py ``QuantizedLinear``): ``weight`` U32 ``[out, in*bits/32]`` + ``scales`` and
  ``biases`` ``[out, in/group_size]``; config key ``quantization`` (not ``quantization_config``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

from hfmem.hub.header import TensorEntry
from hfmem.model.dtypes import dtype_bits
from hfmem.units import cdiv

PARAM = "param"
QUANTIZED = "quantized"
OVERHEAD = "quant_overhead"

_FP8 = {"F8_E4M3": "fp8_e4m3", "F8_E5M2": "fp8_e5m2", "F8_E4M3FNUZ": "fp8_e4m3fnuz", "F8_E5M2FNUZ": "fp8_e5m2fnuz"}
_BYTE = ("I8", "U8")
# Activation / KV-cache scales stored beside quantized modules: never parameters.
_ACTIVATION_SCALE_SUFFIXES = (".input_scale", ".output_scale", ".k_scale", ".v_scale", ".q_scale", ".kv_scale",
                              ".input_global_scale", ".input_zero_point")
_BNB4_SUFFIXES = (".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map")
_CT_SUFFIXES = (".weight_scale", ".weight_zero_point", ".weight_g_idx", ".weight_shape", ".weight_global_scale")
_MX_BLOCK = 32  # OCP Microscaling: one E8M0 scale per 32 elements


class Role(NamedTuple):
    role: str  # PARAM | QUANTIZED | OVERHEAD
    logical: int  # logical parameters (0 for overhead)
    fmt: str | None = None  # storage format of a quantized tensor, e.g. "awq-int4", "fp8_e4m3", "mxfp4"


_BOOKKEEPING = Role(OVERHEAD, 0)  # one shared (immutable) answer for the many scale/zero tensors
# Quantizer.name_only_role's answer without a scheme: PARAM with each tensor's own element count
NUMEL_PARAM = Role(PARAM, -1)


@dataclass
class QuantScheme:
    """What the checkpoint says (config) and shows (tensors) about its quantization."""

    method: str
    bits: int | None = None
    group_size: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    source: str = "config"  # "config" | "tensors"
    config: dict[str, Any] = field(default_factory=dict, repr=False)
    quantizer: Any = field(default=None, repr=False, compare=False)  # the Quantizer that classified the tensors

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "bits": self.bits, "group_size": self.group_size, "source": self.source} | self.details


@dataclass
class Quantization:
    """How a checkpoint is quantized: the scheme (from the config, else the tensors), the logical parameters it
    quantizes and the bytes of its scales/zeros (``overhead_bytes``, outside the parameter count).

    ``scheme_details`` holds the scheme's own settings (AWQ ``version``, FP8 ``weight_block_size``, ...);
    ``tensor_details`` what the tensors show (``formats``: logical parameters per stored format, packed layouts,
    scale kinds, bits and group sizes read from the shapes)."""

    method: str
    bits: int | None
    group_size: int | None
    source: str  # "config" | "tensors"
    overhead_bytes: int
    quantized_parameters: int
    unquantized_parameters: int
    scheme_details: dict[str, Any] = field(default_factory=dict)
    tensor_details: dict[str, Any] = field(default_factory=dict)

    @property
    def formats(self) -> dict[str, int]:
        return dict(self.tensor_details.get("formats") or {})

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "bits": self.bits, "group_size": self.group_size, "source": self.source} | (
            self.scheme_details) | {
            "overhead_bytes": self.overhead_bytes, "quantized_parameters": self.quantized_parameters,
            "unquantized_parameters": self.unquantized_parameters,
        } | self.tensor_details  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Scheme detection: config first, tensors as the fallback (and the cross-check, see Quantizer.check)


def quant_config(config: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(quantization config, key) from config.json, also nested under text_config; MLX uses ``quantization``."""
    text_config = config.get("text_config")
    holders: tuple[dict[str, Any], ...] = (config, text_config) if isinstance(text_config, dict) else (config,)
    for holder in holders:
        q = holder.get("quantization_config")
        if isinstance(q, dict):
            return q, "quantization_config"
        q = holder.get("quantization")
        if isinstance(q, dict) and ("bits" in q or "group_size" in q):
            return q, "quantization"
    return None, None


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def scheme_from_config(q: dict[str, Any], key: str = "quantization_config") -> QuantScheme:
    if key == "quantization":
        return QuantScheme("mlx", _int_or_none(q.get("bits")), _int_or_none(q.get("group_size")), {}, "config", q)
    method = str(q.get("quant_method") or q.get("quant_type") or "unknown").lower()
    if method == "bitsandbytes":
        four = bool(q.get("load_in_4bit") or q.get("_load_in_4bit"))
        if four:
            details = {
                "quant_type": q.get("bnb_4bit_quant_type", "fp4"),
                "double_quant": bool(q.get("bnb_4bit_use_double_quant", False)),
                "quant_storage": q.get("bnb_4bit_quant_storage", "uint8"),
            }
            return QuantScheme("bitsandbytes-4bit", 4, 64, details, "config", q)
        return QuantScheme("bitsandbytes-8bit", 8, None, {}, "config", q)
    if method == "compressed-tensors":
        groups = []
        for name, grp in (q.get("config_groups") or {}).items():
            w = (grp or {}).get("weights") or {}
            groups.append({
                "name": name,
                "targets": list((grp or {}).get("targets") or []),
                "num_bits": _int_or_none(w.get("num_bits")),
                "type": w.get("type"),
                "strategy": w.get("strategy"),
                "group_size": _int_or_none(w.get("group_size")),
                "block_structure": w.get("block_structure"),
                "format": (grp or {}).get("format") or q.get("format"),
            })
        bits = {g["num_bits"] for g in groups}
        sizes = {g["group_size"] for g in groups}
        details = {"format": q.get("format"), "groups": groups, "ignore": len(q.get("ignore") or [])}
        return QuantScheme(method, bits.pop() if len(bits) == 1 else None, sizes.pop() if len(sizes) == 1 else None,
                           details, "config", q)
    if method == "fp8":
        details = {k: q[k] for k in ("weight_block_size", "fmt", "activation_scheme", "scale_fmt") if k in q}
        return QuantScheme(method, 8, None, details, "config", q)
    if method == "mxfp8":
        return QuantScheme(method, 8, _MX_BLOCK, {"weight_block_size": q.get("weight_block_size")}, "config", q)
    if method == "mxfp4":
        return QuantScheme(method, 4, _MX_BLOCK, {}, "config", q)
    int_bits = _int_or_none(q.get("bits") or q.get("w_bit") or q.get("num_bits") or q.get("wbits"))
    group = _int_or_none(q.get("group_size") if "group_size" in q else q.get("q_group_size"))
    keys = ("version", "desc_act", "sym", "zero_point", "checkpoint_format", "backend")
    return QuantScheme(method, int_bits, group, {k: q[k] for k in keys if k in q}, "config", q)


def scheme_from_tensors(entries: list[TensorEntry]) -> QuantScheme | None:
    """A scheme from tensor names/dtypes alone (no quantization_config), one pass."""
    seen: set[str] = set()
    for t in entries:
        n = t.name
        if n.endswith(".qweight"):
            seen.add("gptq-or-awq")
        elif n.endswith(".weight_packed"):
            seen.add("compressed-tensors")
        elif n.endswith("_blocks") and t.dtype == "U8":
            seen.add("mxfp4")
        elif n.endswith(".absmax"):
            seen.add("bitsandbytes-4bit")
        elif n.endswith(".SCB"):
            seen.add("bitsandbytes-8bit")
        elif t.dtype in _FP8:
            seen.add("fp8")
        elif t.dtype == "F8_E8M0":
            seen.add("mx")
    for method in ("gptq-or-awq", "compressed-tensors", "bitsandbytes-4bit", "bitsandbytes-8bit", "mxfp4", "fp8", "mx"):
        if method in seen:
            bits = {"mxfp4": 4, "fp8": 8, "bitsandbytes-8bit": 8, "bitsandbytes-4bit": 4}.get(method)
            return QuantScheme(method, bits, None, {}, "tensors")
    return None


def detect_scheme(config: dict[str, Any], entries: list[TensorEntry]) -> QuantScheme | None:
    """From quantization_config when present, else from tensor names/dtypes."""
    q, key = quant_config(config)
    if q is not None:
        return scheme_from_config(q, key or "quantization_config")
    return scheme_from_tensors(entries)


# ---------------------------------------------------------------------------------------------------------------
# Geometry helpers


def _itemsize(dtype: str) -> int:
    return max(1, (dtype_bits(dtype) or 8) // 8)


@dataclass(frozen=True)
class PackedLinear:
    """A GPTQ/AWQ linear recovered from its tensor shapes."""

    layout: str  # "gptq" (packed along in) | "awq" (packed along out)
    bits: int
    in_features: int
    out_features: int
    group_size: int  # -1: one group per column (per-channel)


def packed_linear_geometry(
    qweight: TensorEntry,
    scales: TensorEntry | None,
    qzeros: TensorEntry | None,
    g_idx: TensorEntry | None,
    config_bits: int | None,
    config_method: str | None,
    config_group: int | None = None,
) -> PackedLinear | None:
    """Recover (layout, bits, in, out, group) of a GPTQ or AWQ linear from shapes; None if they do not fit."""
    if len(qweight.shape) != 2:
        return None
    q0, q1 = qweight.shape
    s = scales.shape if scales is not None and len(scales.shape) == 2 else None
    if s is not None and s[1] == q1:
        layout, out = "gptq", q1
    elif s is not None and q1 and s[1] % q1 == 0 and s[1] > q1:
        layout, out = "awq", s[1]
    elif s is None and config_method in ("gptq", "awq"):
        layout, out = config_method, None
    else:
        return None
    bits: Fraction | None = None
    if layout == "awq":
        bits = Fraction(32 * q1, out)
    elif g_idx is not None and len(g_idx.shape) == 1 and g_idx.shape[0]:
        bits = Fraction(32 * q0, g_idx.shape[0])
    elif qzeros is not None and len(qzeros.shape) == 2 and out:
        bits = Fraction(32 * qzeros.shape[1], out)
    if bits is None or bits.denominator != 1 or bits not in (2, 3, 4, 8):
        if config_bits is None:
            return None
        bits = Fraction(config_bits)
    b = int(bits)
    if layout == "gptq":
        in_f = Fraction(q0 * 32, b)
        out = q1
    else:
        in_f = Fraction(q0)
        out = out if out is not None else q1 * 32 // b
    if in_f.denominator != 1:
        return None
    in_features = int(in_f)
    group = -1
    if s is not None and s[0] > 1:
        if config_group and config_group > 0 and cdiv(in_features, config_group) == s[0]:
            group = config_group  # when in_features % group != 0 the last group is short: only the config says g
        else:
            group = in_features // s[0] if in_features % s[0] == 0 else cdiv(in_features, s[0])
    return PackedLinear(layout, b, in_features, out, group)


# Every ASCII digit mapped to "0" (on the UTF-8 bytes: bytes.translate is a table look-up, str.translate a dict
# look-up per character): the memo key of a module name when the config's rules cannot tell digits apart.
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
# In a pattern's source: a digit (literal digits, ranges ending in one, {n} counts, octal escapes, numbered
# backreferences), a hex/unicode/named character escape (which could spell a digit) or a named backreference.
_DIGIT_SENSITIVE_SOURCE = re.compile(r"[0-9]|\\[xuUN]|\(\?P=")


def digit_blind(patterns: list[re.Pattern[str]], exact: set[str]) -> bool:
    """Whether ``re.match`` of every pattern, and membership in ``exact``, give the same answer for a name and for
    the name with every ASCII digit replaced by 0 (so answers can be memoised per digit pattern, e.g. one per
    expert projection instead of one per expert and layer).

    Sufficient condition, checked on the source text: no digit, no hex/unicode/named escape, no backreference. Then
    every atom treats the ten ASCII digits alike (``.``, ``\\d``, ``\\w`` and negated classes accept all of them or
    none; a range whose ends are not digits holds all of 0-9 or none, the digits being contiguous), so the engine
    takes the same path through a name and its digit pattern. An exact name without digits equals only itself,
    and a name with digits maps to one with a 0, so membership agrees too."""
    if any(_DIGIT_SENSITIVE_SOURCE.search(p.pattern) for p in patterns):
        return False
    return not any(any(ch.isdigit() for ch in name) for name in exact)


# A regex source built only of: literal characters other than digits and "#" (and the metacharacters), escaped
# punctuation ("\\."), ".*" (not followed by a quantifier), plain and (?:...) groups, "|", "?" after a literal or a
# group, and "^"/"$".
_PATTERN_BLIND_SOURCE = re.compile(
    r"\^?(?:(?:[^\\.\[\](){}|?*+^$#0-9]|\\[^0-9A-Za-z#])\??|\.\*(?![*+?{])|\((?:\?:)?|\)\??|\|)*\$?\Z"
)


def pattern_blind(patterns: list[re.Pattern[str]], exact: set[str]) -> bool:
    """Whether ``re.match`` of every pattern, and membership in ``exact``, give the same answer for a name and for its
    pattern (each numeric part's digits replaced by one "#", inventory.CountedTensor.pattern), so answers can be
    memoised per pattern: one per expert projection instead of one per expert, layer and digit count.

    Sufficient condition, checked on the source text (``_PATTERN_BLIND_SOURCE``): a match then consists of literal
    characters, none a digit or "#", which stand at the same places of the name and of its pattern, and ".*" spans
    between them, which may take a run of digits or the "#" standing for it alike (several adjacent spans sharing a
    run give it to the first, the others match empty). A "." alone, "+", counts or classes could tell "12" from "#",
    so they are refused. An exact name without digits and "#" equals a name exactly when it equals its pattern."""
    if not all(p.flags == re.UNICODE and _PATTERN_BLIND_SOURCE.match(p.pattern) for p in patterns):
        return False
    return not any(any(ch.isdigit() or ch == "#" for ch in name) for name in exact)


def _compile_targets(targets: list[str]) -> tuple[set[str], list[re.Pattern[str]], bool]:
    exact = {t for t in targets if not t.startswith("re:") and "." in t}
    regex = [re.compile(t[3:]) for t in targets if t.startswith("re:")]
    # Anything else is a class name ("Linear", "Conv1D"...): a quantized weight is stored only for such modules.
    by_class = any(not t.startswith("re:") and "." not in t for t in targets)
    return exact, regex, by_class


# ---------------------------------------------------------------------------------------------------------------
# The classifier


def any_match(patterns: list[re.Pattern[str]]) -> Callable[[str], bool]:
    """``any(p.match(s) for p in patterns)`` as one compiled alternation (one C call a name, not a generator): the
    same answers, since re.match of (?:a)|(?:b) matches where a or b matches at the start. Patterns that the
    alternation could change (backreferences, whose group numbers shift; global inline flags) stay a loop."""
    if not patterns:
        return lambda s: False
    if len(patterns) == 1:
        only = patterns[0].match
        return lambda s: only(s) is not None
    sources = [p.pattern for p in patterns]
    if not any(re.search(r"\\\d|\(\?P=|^\(\?[aiLmsux]+\)", src) for src in sources) and len({p.flags for p in patterns}) == 1:
        try:
            combined = re.compile("|".join(f"(?:{src})" for src in sources), patterns[0].flags)
        except re.error:
            pass
        else:
            return lambda s: combined.match(s) is not None
    return lambda s: any(p.match(s) for p in patterns)


class Quantizer:
    """Classifies every tensor of one checkpoint and collects what it saw for the summary and the cross-check."""

    memo = True  # False: every tensor worked out on its own (tests compare the two on every fixture)

    def __init__(self, scheme: QuantScheme | None, index: Mapping[str, TensorEntry]):
        self.scheme = scheme
        self.index = index
        self.method = scheme.method if scheme else None
        self.formats: Counter[str] = Counter()  # fmt -> logical parameters
        self.linears: Counter[tuple[str, int, int, int, int]] = Counter()  # GPTQ/AWQ (layout, bits, in, out, group)
        self.bnb_blocksizes: Counter[int] = Counter()
        self.bnb_quant_types: Counter[str] = Counter()
        self.bnb_nested = 0
        self.scale_kinds: Counter[str] = Counter()  # granularity of FP8/int8/MX weight scales -> tensors
        self._scaled_memo: dict[tuple[Any, ...], tuple[Role, str]] = {}  # see _scaled_weight
        self.problems: Counter[str] = Counter()  # message -> occurrences
        self._ct_groups = self._prepare_ct_groups()
        self._ct_match = [(g, exact, any_match(regex)) for g, exact, regex, _ in self._ct_groups]
        self._ct_by_class = next((g for g, _, _, by_class in self._ct_groups if by_class), None)
        self._ignore_exact, self._ignore_regex = self._prepare_ignore()
        self._ignore_match = any_match(self._ignore_regex)
        # compressed-tensors: (group, ignored) per module, keyed by the module's digit pattern when the targets and
        # ignore list cannot tell digits apart (a per-layer rule such as "re:.*layers\\.3\\..*" keeps the full name)
        self._ct_digit_blind = digit_blind(
            [p for _, _, regex, _ in self._ct_groups for p in regex] + self._ignore_regex,
            {n for _, exact, _, _ in self._ct_groups for n in exact} | self._ignore_exact,
        )
        self._ct_pattern_blind = self._ct_digit_blind and pattern_blind(
            [p for _, _, regex, _ in self._ct_groups for p in regex] + self._ignore_regex,
            {n for _, exact, _, _ in self._ct_groups for n in exact} | self._ignore_exact,
        )
        self._ct_memo: dict[tuple[Any, ...], tuple[Role, tuple[str, ...]]] = {}
        self._dispatch = self._build_dispatch()

    # -- config helpers ------------------------------------------------------------------------------------------

    def _prepare_ct_groups(self) -> list[tuple[dict[str, Any], set[str], list[re.Pattern[str]], bool]]:
        if not self.scheme or self.method != "compressed-tensors":
            return []
        out = []
        for g in self.scheme.details.get("groups", []):
            try:
                exact, regex, by_class = _compile_targets(g["targets"])
            except re.error:
                self.problems[f"compressed-tensors group {g['name']}: invalid target regex"] += 1
                continue
            out.append((g, exact, regex, by_class))
        return out

    def _prepare_ignore(self) -> tuple[set[str], list[re.Pattern[str]]]:
        cfg = self.scheme.config if self.scheme else {}
        names = cfg.get("ignore") if self.method == "compressed-tensors" else None
        if not isinstance(names, list):
            return set(), []
        exact = {n for n in names if isinstance(n, str) and not n.startswith("re:")}
        regex = []
        for n in names:
            if isinstance(n, str) and n.startswith("re:"):
                try:
                    regex.append(re.compile(n[3:]))
                except re.error:
                    pass
        return exact, regex

    def _ignored(self, module: str) -> bool:
        """compressed-tensors ``ignore``: exact module names or ``re:`` patterns (re.match), like its targets."""
        return module in self._ignore_exact or self._ignore_match(module)

    def _ct_group_for(self, module: str) -> dict[str, Any] | None:
        for g, exact, match in self._ct_match:
            if module in exact or match(module):
                return g
        return self._ct_by_class

    # -- entry point ---------------------------------------------------------------------------------------------

    def role(self, t: TensorEntry) -> Role:
        """(role, logical parameter count, format) of one stored tensor: O(1), dispatched on the name's last part."""
        if self.scheme is None:
            return Role(PARAM, t.numel)
        tail = t.name.rpartition(".")[2]
        r = None
        for recognise in self._dispatch.get(tail, ()):
            r = recognise(t)
            if r is not None:
                break
        if r is None and tail.endswith(("_blocks", "_scales")):
            r = self._mxfp4_blocks(t)
        if r is None and tail.startswith("bitsandbytes__"):
            r = self._bnb4(t)
        if r is not None:
            if r.role == QUANTIZED and r.fmt:
                self.formats[r.fmt] += r.logical
            return r
        if t.dtype in _FP8:  # an FP8 tensor without a scale companion is still 8-bit storage of one value each
            self.formats[_FP8[t.dtype]] += t.numel
            return Role(QUANTIZED, t.numel, _FP8[t.dtype])
        if t.dtype == "F8_E8M0":  # power-of-two scales (MX formats); never weights
            return _BOOKKEEPING
        return Role(PARAM, t.numel)

    def name_only_role(self, name: str) -> Role | None:
        """role()'s answer for every tensor whose name ends like ``name`` (the same last part after a dot), where
        role() decides it from that part alone: NUMEL_PARAM without a scheme (PARAM, the tensor's element count),
        the shared bookkeeping answer for a scale/zero whose only recogniser claims it by its suffix (compressed-
        tensors' weight_scale & co., activation scales, weight_scale_inv). None: role() per tensor."""
        if not self.memo:
            return None
        if self.scheme is None:
            return NUMEL_PARAM
        _, dot, tail = name.rpartition(".")
        if not dot:
            return None
        recognisers = self._dispatch.get(tail)
        if recognisers == (self._compressed_packed,) and "." + tail in _CT_SUFFIXES:
            return _BOOKKEEPING  # _compressed_packed: name.endswith(_CT_SUFFIXES)
        if recognisers == (self._activation_scale,):
            return _BOOKKEEPING  # _activation_scale: name.endswith(_ACTIVATION_SCALE_SUFFIXES)
        if tail == "weight_scale_inv" and recognisers == (self._scaled_weight,):
            return _BOOKKEEPING  # _scaled_weight: name.endswith(".weight_scale_inv")
        return None

    def pattern_recogniser(self, pattern: str) -> Callable[[TensorEntry], Role] | None:
        """A faster stand-in for role() on every tensor whose name has this pattern (numeric parts replaced by
        ".#", inventory.CountedTensor.pattern), or None. Only for compressed-tensors ``weight_packed``: role() would
        dispatch on the last name part to _compressed_packed alone, which tests the suffixes the pattern already
        shows; the stand-in does the rest of _compressed_packed, with the same memo and key (or, where the config's
        rules are pattern_blind, a memo of this pattern's own: _packed_weight_of), and role()'s count."""
        if not (self.memo and pattern.endswith(".weight_packed")):
            return None
        if self._dispatch.get("weight_packed") != (self._compressed_packed,):
            return None
        if not self._ct_pattern_blind:
            return self._packed_weight
        return self._packed_weight_of(pattern[: -len(".weight_packed")])

    def _packed_weight(self, t: TensorEntry) -> Role:
        """role() of a tensor named ``*.weight_packed`` (see pattern_recogniser)."""
        role = self._weight_packed_role(t, t.name[: -len(".weight_packed")])
        self.formats[role.fmt] += role.logical  # type: ignore[index]  # always QUANTIZED with a format
        return role

    def _packed_weight_of(self, module_pattern: str) -> Callable[[TensorEntry], Role]:
        """_packed_weight for the names of one pattern where the config's rules cannot tell a module from its
        pattern (``pattern_blind``): _compressed_packed_role then reads of the module only what its pattern shows,
        so the memo keys on the pattern, the dtype and the two shapes (it runs for every packed tensor: 250k of them
        in the largest checkpoints)."""
        # memo: the role, its problems, and its format and logical count (read once: a NamedTuple's fields are
        # properties)
        memo: dict[tuple[Any, ...], tuple[Role, tuple[str, ...], Any, int]] = {}
        formats, counted_problems = self.formats, self.problems

        def packed(t: TensorEntry) -> Role:
            module = t.name[:-14]  # (14: len(".weight_packed"))
            scale = self.index.get(module + ".weight_scale")  # (not bound early: count_tensors drops the index)
            key = (t.dtype, t.shape, scale.shape if scale is not None else None)
            hit = memo.get(key)
            if hit is None:
                role, problems = self._compressed_packed_role(t, module, scale)
                hit = memo[key] = (role, problems, role.fmt, role.logical)
            role, problems, fmt, logical = hit
            if problems:
                for problem in problems:
                    counted_problems[problem] += 1
            formats[fmt] += logical  # type: ignore[index]  # always QUANTIZED with a format
            return role

        return packed

    def _build_dispatch(self) -> dict[str, tuple[Any, ...]]:
        """Last name component -> the recognisers that may claim it (each still checks its own siblings)."""
        if self.scheme is None:
            return {}  # role() answers PARAM before dispatching
        tails = {name.rpartition(".")[2] for name in self.index}
        d: dict[str, tuple[Any, ...]] = {
            "qweight": (self._gptq_awq,), "qzeros": (self._gptq_awq,), "g_idx": (self._gptq_awq,),
            "scales": (self._gptq_awq, self._mlx), "biases": (self._mlx,),
            "weight_packed": (self._compressed_packed,),
            "absmax": (self._bnb4,), "quant_map": (self._bnb4,), "nested_absmax": (self._bnb4,),
            "nested_quant_map": (self._bnb4,),
            "SCB": (self._bnb8,), "weight_format": (self._bnb8,),
            # A ".weight" is claimed only through a companion tensor; a recogniser whose companions' last name
            # part occurs nowhere in the checkpoint cannot claim one, so it is not tried (half the tensors of a
            # checkpoint are ".weight"s: four look-ups each on 92k-tensor repos otherwise).
            "weight": tuple(f for f, companions in ((self._bnb4, ("absmax",)), (self._bnb8, ("SCB",)),
                                                    (self._mlx, ("scales",)),
                                                    (self._scaled_weight, ("weight_scale_inv", "weight_scale", "scale")))
                            if any(c in tails for c in companions)),
            "weight_scale_inv": (self._scaled_weight,), "scale": (self._scaled_weight,),
        }
        for suffix in _CT_SUFFIXES:
            d[suffix[1:]] = (self._compressed_packed,)
        for suffix in _ACTIVATION_SCALE_SUFFIXES:
            d[suffix[1:]] = (self._activation_scale,)
        return d

    # -- one recogniser per layout --------------------------------------------------------------------------------

    def _gptq_awq(self, t: TensorEntry) -> Role | None:
        name = t.name
        if name.endswith((".qzeros", ".scales", ".g_idx")):
            stem = name.rsplit(".", 1)[0]
            return _BOOKKEEPING if self.index.get(stem + ".qweight") is not None else None
        if not name.endswith(".qweight"):
            return None
        stem = name[: -len(".qweight")]
        cfg_method = self.method if self.method in ("gptq", "awq") else None
        s = self.scheme
        geo = packed_linear_geometry(t, self.index.get(stem + ".scales"), self.index.get(stem + ".qzeros"),
                                     self.index.get(stem + ".g_idx"), s.bits if s else None, cfg_method,
                                     s.group_size if s else None)
        if geo is None:
            bits = (self.scheme.bits if self.scheme else None) or 4
            self.problems[f"qweight shapes do not fit GPTQ or AWQ; assumed {bits}-bit packing along one dim"] += 1
            return Role(QUANTIZED, t.numel * 32 // bits, f"int{bits}-packed")
        self.linears[(geo.layout, geo.bits, geo.in_features, geo.out_features, geo.group_size)] += 1
        return Role(QUANTIZED, geo.in_features * geo.out_features, f"{geo.layout}-int{geo.bits}")

    def _compressed_packed(self, t: TensorEntry) -> Role | None:
        name = t.name
        if name.endswith(_CT_SUFFIXES):  # names only quantized checkpoints use
            return _BOOKKEEPING
        if not name.endswith(".weight_packed"):
            return None
        return self._weight_packed_role(t, name[: -len(".weight_packed")])

    def _weight_packed_role(self, t: TensorEntry, module: str) -> Role:
        """The role of ``module``'s ``weight_packed`` tensor ``t``, its problems counted."""
        scale = self.index.get(module + ".weight_scale")
        if not self.memo:
            role, problems = self._compressed_packed_role(t, module, scale)
        else:
            # the outcome is a function of the module's config rules, the dtype and the two shapes: memoised on those
            key = (module.encode("utf-8", "surrogatepass").translate(_DIGITS_TO_ZERO) if self._ct_digit_blind else module,
                   t.dtype, t.shape, scale.shape if scale is not None else None)
            hit = self._ct_memo.get(key)
            if hit is None:
                hit = self._ct_memo[key] = self._compressed_packed_role(t, module, scale)
            role, problems = hit
        for problem in problems:
            self.problems[problem] += 1
        return role

    def _compressed_packed_role(self, t: TensorEntry, module: str, scale: TensorEntry | None) -> tuple[Role, tuple[str, ...]]:
        """(role, problems to count) of a ``weight_packed`` tensor of ``module`` with its ``weight_scale``."""
        problems: list[str] = []
        group = self._ct_group_for(module) if self._ct_groups else None
        bits = (group or {}).get("num_bits") or (self.scheme.bits if self.scheme else None)
        if not bits:
            bits = 4
            problems.append("weight_packed without a config group giving num_bits; assumed 4-bit")
        if self._ignored(module):
            problems.append("modules listed in quantization_config ignore are stored packed")
        container = _itemsize(t.dtype) * 8
        logical = t.numel * container // bits
        gsize = (group or {}).get("group_size")
        if scale is not None and gsize and len(scale.shape) == 2 and len(t.shape) == 2:
            expected_rows, width = scale.shape[0], scale.shape[1] * gsize
            if expected_rows != t.shape[0] or not (width - gsize < logical // t.shape[0] <= width):
                problems.append("weight_packed does not match its weight_scale groups")
        fmt = (group or {}).get("format") or (self.scheme.details.get("format") if self.scheme else None) or "pack-quantized"
        kind = (group or {}).get("type") or "int"
        label = {"nvfp4-pack-quantized": "nvfp4", "mxfp4-pack-quantized": "mxfp4"}.get(fmt, f"{kind}{bits}")
        return Role(QUANTIZED, logical, label), tuple(problems)

    def _mxfp4_blocks(self, t: TensorEntry) -> Role | None:
        name = t.name
        if name.endswith("_scales") and t.dtype == "U8":
            return _BOOKKEEPING if self.index.get(name[: -len("_scales")] + "_blocks") is not None else None
        if not (name.endswith("_blocks") and t.dtype == "U8"):
            return None
        scales = self.index.get(name[: -len("_blocks")] + "_scales")
        if scales is None or t.shape[-1:] != (16,) or scales.shape != t.shape[:-1]:
            self.problems["MXFP4 *_blocks without a matching *_scales [..., in/32]"] += 1
        return Role(QUANTIZED, t.numel * 2, "mxfp4")

    def _bnb4(self, t: TensorEntry) -> Role | None:
        name = t.name
        if ".quant_state.bitsandbytes__" in name:
            self.bnb_quant_types[name.rsplit("__", 1)[1]] += 1
            return _BOOKKEEPING
        if name.endswith(_BNB4_SUFFIXES):
            if name.endswith(".nested_absmax"):
                self.bnb_nested += 1
            return _BOOKKEEPING if self.index.get(name.rsplit(".", 1)[0]) is not None else None
        absmax = self.index.get(name + ".absmax")
        if absmax is None:
            return None
        logical = t.numel * _itemsize(t.dtype) * 2
        sizes = [b for b in (32, 64, 128, 256, 512, 1024, 2048, 4096) if cdiv(logical, b) == absmax.numel]
        if sizes:
            self.bnb_blocksizes[sizes[0]] += 1
        else:
            self.problems["bitsandbytes absmax length fits no blocksize for the packed weight"] += 1
        return Role(QUANTIZED, logical, "bnb-4bit")

    def _bnb8(self, t: TensorEntry) -> Role | None:
        name = t.name
        if name.endswith((".SCB", ".weight_format")):
            return _BOOKKEEPING if self.index.get(name.rsplit(".", 1)[0] + ".weight") is not None else None
        if t.dtype == "I8" and name.endswith(".weight") and self.index.get(name[: -len("weight")] + "SCB") is not None:
            return Role(QUANTIZED, t.numel, "bnb-int8")
        return None

    def _mlx(self, t: TensorEntry) -> Role | None:
        if self.method != "mlx":
            return None
        name = t.name
        if name.endswith((".scales", ".biases")):
            w = self.index.get(name.rsplit(".", 1)[0] + ".weight")
            return _BOOKKEEPING if w is not None and w.dtype == "U32" else None
        if t.dtype == "U32" and name.endswith(".weight") and self.index.get(name[: -len("weight")] + "scales") is not None:
            bits = (self.scheme.bits if self.scheme else None) or 4
            return Role(QUANTIZED, t.numel * 32 // bits, f"mlx-int{bits}")
        return None

    def _scaled_weight(self, t: TensorEntry) -> Role | None:
        """FP8 / int8 / MX weights with scale companions (per tensor, channel, 2-D block or 1x32 MX groups)."""
        name = t.name
        if name.endswith(".weight_scale_inv"):
            return _BOOKKEEPING  # with or without its weight (a scale of a weight stored unquantized is still one)
        if name.endswith(".scale"):
            w = self.index.get(name[: -len(".scale")] + ".weight")
            return _BOOKKEEPING if w is not None and (w.dtype in _FP8 or w.dtype in _BYTE) else None
        if not name.endswith(".weight") or not (t.dtype in _FP8 or t.dtype in _BYTE):
            return None
        stem = name[: -len(".weight")]
        get = self.index.get
        scale = get(stem + ".weight_scale_inv") or get(stem + ".weight_scale") or get(stem + ".scale")
        if scale is None:
            return None
        if not self.memo:
            role, kind = self._scaled_weight_role(t, scale)
        else:
            # a function of the two tensors' dtypes and shapes (and the scheme): worked out once per distinct pair
            key = (t.dtype, t.shape, scale.dtype, scale.shape)
            hit = self._scaled_memo.get(key)
            if hit is None:
                hit = self._scaled_memo[key] = self._scaled_weight_role(t, scale)
            role, kind = hit
        self.scale_kinds[kind] += 1
        return role

    def _scaled_weight_role(self, t: TensorEntry, scale: TensorEntry) -> tuple[Role, str]:
        """(role, scale granularity) of a byte-wide weight with its scale tensor."""
        mx_pack = self._mx_pack(t, scale)
        kind = self._scale_kind(t, scale, mx_pack)
        if mx_pack == 2:
            return Role(QUANTIZED, t.numel * 2, "mxfp4"), kind
        if t.dtype in _FP8:
            return Role(QUANTIZED, t.numel, "mxfp8" if mx_pack == 1 else _FP8[t.dtype]), kind
        return Role(QUANTIZED, t.numel, "int8"), kind

    def _scale_kind(self, weight: TensorEntry, scale: TensorEntry, mx_pack: int | None) -> str:
        """Scale granularity: per tensor, per channel, MX 1x32, or 2-D blocks (size from the config when it fits)."""
        if mx_pack:
            return f"mx 1x{_MX_BLOCK}"
        if scale.numel == 1:
            return "tensor"
        if len(weight.shape) != 2:
            return "other"
        out, inp = weight.shape
        if scale.shape in ((out,), (out, 1)):
            return "channel"
        if len(scale.shape) != 2:
            return "other"
        block = (self.scheme.details.get("weight_block_size") if self.scheme else None) or []
        if len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block):
            r0, r1 = cdiv(out, block[0]), cdiv(inp, block[1])
            # fused projections (e.g. MiMo qkv_proj) round each part up separately: a few extra rows/columns
            if r0 <= scale.shape[0] <= r0 + 4 and r1 <= scale.shape[1] <= r1 + 4:
                return f"block {block[0]}x{block[1]}"
        b0, b1 = cdiv(out, scale.shape[0]), cdiv(inp, scale.shape[1])
        return f"block ~{b0}x{b1}"

    @staticmethod
    def _mx_pack(weight: TensorEntry, scale: TensorEntry) -> int | None:
        """Values per stored byte when scale is a per-row MX scale (one byte-wide scale per 32 values), else None."""
        if scale.dtype not in ("F8_E8M0", "U8") or len(weight.shape) < 2 or scale.shape[:-1] != weight.shape[:-1]:
            return None
        values, stored = scale.shape[-1] * _MX_BLOCK, weight.shape[-1]
        if values == stored:
            return 1
        if values == 2 * stored and weight.dtype in _BYTE:
            return 2
        return None

    def _activation_scale(self, t: TensorEntry) -> Role | None:
        return _BOOKKEEPING if t.name.endswith(_ACTIVATION_SCALE_SUFFIXES) else None

    # -- after all tensors ---------------------------------------------------------------------------------------

    def details(self) -> dict[str, Any]:
        out: dict[str, Any] = {"formats": dict(sorted(self.formats.items()))}
        if self.linears:
            layouts = Counter(k[0] for k in self.linears.elements())
            bits = Counter(k[1] for k in self.linears.elements())
            groups = Counter(k[4] for k in self.linears.elements())
            out["layout"] = {"gptq": "gptq (packed along in_features)", "awq": "awq (packed along out_features)"}[
                layouts.most_common(1)[0][0]] if len(layouts) == 1 else dict(layouts)
            out["bits_from_shapes"] = bits.most_common(1)[0][0] if len(bits) == 1 else dict(bits)
            out["group_size_from_shapes"] = groups.most_common(1)[0][0] if len(groups) == 1 else dict(groups)
            out["linears"] = [
                {"layout": lay, "bits": b, "in_features": i, "out_features": o, "group_size": g, "count": n}
                for (lay, b, i, o, g), n in sorted(self.linears.items())
            ]
        if self.scale_kinds:
            out["scales"] = dict(sorted(self.scale_kinds.items()))
        if self.scheme is not None and self.scheme.source == "tensors" and self.linears:
            layout_set = {k[0] for k in self.linears}
            bit_set = {k[1] for k in self.linears}
            if len(layout_set) == 1:
                out["method"] = layout_set.pop()
            if len(bit_set) == 1:
                out["bits"] = bit_set.pop()
        if self.bnb_blocksizes:
            out["blocksize_from_shapes"] = self.bnb_blocksizes.most_common(1)[0][0]
        if self.bnb_quant_types:
            out["quant_type_from_tensors"] = self.bnb_quant_types.most_common(1)[0][0]
        return out

    def check(self, quantized_parameters: int) -> list[str]:
        """Cross-check the config against the tensors; one warning per disagreement."""
        s = self.scheme
        if s is None:
            return []
        warnings = [f"{msg} ({n} tensors)" for msg, n in self.problems.items()]
        formats = set(self.formats)
        if s.source == "tensors":
            seen = ", ".join(sorted(formats)) or s.method
            warnings.append(f"no quantization_config in config.json; quantization detected from tensors: {seen}")
            return warnings
        if not quantized_parameters:
            warnings.append(
                f"quantization_config declares {s.method} but no stored tensor is in a quantized layout: the weights "
                "are stored unquantized (quantized when loading, if at all)"
            )
            return warnings
        expected = {
            "gptq": {"gptq-"}, "awq": {"awq-"}, "bitsandbytes-4bit": {"bnb-4bit"}, "bitsandbytes-8bit": {"bnb-int8"},
            "fp8": {"fp8_"}, "mxfp8": {"mxfp8"}, "mxfp4": {"mxfp4"}, "mlx": {"mlx-"},
        }.get(s.method)
        if expected is not None:
            odd = sorted(f for f in formats if not any(f.startswith(p) for p in expected))
            if odd:
                n = sum(self.formats[f] for f in odd)
                warnings.append(
                    f"quantization_config says {s.method} but {n:,} parameters are stored as {', '.join(odd)} "
                    "(detected from tensor shapes and dtypes)"
                )
        if self.linears and s.method in ("gptq", "awq"):
            layouts = {k[0] for k in self.linears}
            if s.method not in layouts:
                warnings.append(f"quantization_config says {s.method} but qweight shapes are packed the "
                                f"{'gptq (along in_features)' if 'gptq' in layouts else 'awq (along out_features)'} way")
            bits = {k[1] for k in self.linears}
            if s.bits is not None and bits != {s.bits}:
                warnings.append(f"quantization_config says {s.bits}-bit but qweight/qzeros shapes give {sorted(bits)}-bit")
            groups = {k[4] for k in self.linears}
            if s.group_size is not None and groups != {s.group_size} and not (s.group_size == -1 or groups == {-1}):
                warnings.append(f"quantization_config group_size {s.group_size} but scales shapes give {sorted(groups)}")
        block = s.details.get("weight_block_size")
        if s.method in ("fp8", "mxfp8") and isinstance(block, list) and len(block) == 2:
            want = f"mx 1x{_MX_BLOCK}" if s.method == "mxfp8" else f"block {block[0]}x{block[1]}"
            odd_scales = {k: n for k, n in self.scale_kinds.items() if k.startswith(("block", "mx")) and k != want}
            if odd_scales and not (s.method == "fp8" and set(odd_scales) == {f"mx 1x{_MX_BLOCK}"}):  # FP4 experts warned above
                warnings.append(f"quantization_config weight_block_size {block} but weight scales are "
                                + ", ".join(f"{k} ({n} tensors)" for k, n in sorted(odd_scales.items())))
        if s.method == "bitsandbytes-4bit":
            qt = self.bnb_quant_types.most_common(1)[0][0] if self.bnb_quant_types else None
            if qt and qt != s.details.get("quant_type"):
                warnings.append(f"quantization_config bnb_4bit_quant_type {s.details.get('quant_type')} but tensors hold {qt} state")
            if bool(self.bnb_nested) != bool(s.details.get("double_quant")):
                warnings.append(
                    f"quantization_config bnb_4bit_use_double_quant is {bool(s.details.get('double_quant'))} but "
                    f"{self.bnb_nested} nested_absmax tensors are stored"
                )
        return warnings
