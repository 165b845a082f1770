"""The per-pattern memos of the per-tensor pass give what working out every tensor on its own gives.

``Quantizer`` memoises compressed-tensors ``weight_packed`` roles per module digit pattern (only when the config's
target/ignore rules provably cannot tell digits apart, else per full module name), and ``weight_tensors`` memoises
each tensor's logical form per (role, count, component, dtype, shape, last name part). Both are compared with the
tensor-by-tensor path on every fixture inventory, and the digit rule against ``re.match`` itself, so a memo keyed
on too little fails here."""

from __future__ import annotations

import copy
import re

import pytest
from stubs import fixture_repo_ids, load_config, load_inventory, model_files

from hfmem.api import analyze_files
from hfmem.memory.precision import _LINEAR_UNLESS_CONV, WeightTensor, _weight_form, group_tensors, weight_tensors
from hfmem.model.inventory import _NameFactsMemo, count_tensors, name_facts, summarize
from hfmem.model.quant import Quantizer, digit_blind, pattern_blind


def weight_tensors_reference(counted, quantization=None, hidden_size=None):
    """``weight_tensors`` without its memo: every tensor's form worked out from its own name."""
    method = quantization.method if quantization else None
    bits = quantization.bits if quantization else None
    out, overhead = [], 0
    for c in counted:
        if c.role in ("buffer", "tied_duplicate"):
            continue
        if c.role == "quant_overhead":
            overhead += c.entry.nbytes
            continue
        e = c.entry
        count, rows, cols, kind = _weight_form(e.name, e.dtype, e.shape, c.role, c.logical, c.component, method, bits,
                                               hidden_size)
        if kind == _LINEAR_UNLESS_CONV:
            kind = "other" if "conv" in e.name.lower() else "linear"
        out.append(WeightTensor(e.name, c.component, c.layer, kind, rows, cols, count, e.nbytes))
    if overhead and out:
        out.append(WeightTensor("<quantization scales/zeros>", "other", None, "bookkeeping", overhead, 1, 1, overhead))
    return out


def _inventory(files, config=None):
    from hfmem.model.architecture import build_architecture

    config = files.config if config is None else config
    entries = [t for h in files.headers for t in h.tensors]
    arch, _ = build_architecture(config, entries)
    counted, scheme, notes = count_tensors(files.headers, config, arch.num_layers, arch.tie_word_embeddings,
                                           arch.hidden_size, arch.vocab_size)
    params = summarize(counted, scheme, notes)
    q = scheme.quantizer if scheme is not None else None
    seen = (dict(q.problems), dict(q.formats), q.details(), q.check(params.quantization.quantized_parameters)) if q else None
    return counted, params, seen, arch


def _both(files, monkeypatch, config=None):
    fast = _inventory(files, config)
    with monkeypatch.context() as m:
        m.setattr(Quantizer, "memo", False)
        m.setattr(_NameFactsMemo, "memo", False)
        slow = _inventory(files, config)
    return fast, slow


@pytest.mark.parametrize("repo_id", fixture_repo_ids())
def test_memoised_pass_equals_tensor_by_tensor(repo_id, monkeypatch):
    files = model_files(repo_id)
    (counted, params, seen, arch), (counted_ref, params_ref, seen_ref, _) = _both(files, monkeypatch)
    assert counted == counted_ref
    assert params.to_dict() == params_ref.to_dict()
    assert params.warnings == params_ref.warnings
    assert seen == seen_ref
    for subset in (counted, [c for c in counted if c.component != "mtp"]):
        fast = weight_tensors(subset, params.quantization, arch.hidden_size)
        reference = weight_tensors_reference(subset, params.quantization, arch.hidden_size)
        assert fast == reference
        # group_tensors' per-pattern categories: the same groups as categorising every tensor by its name
        assert all(t.pattern is None for t in reference)
        assert group_tensors(fast, arch.num_layers or 1) == group_tensors(reference, arch.num_layers or 1)
        # (and without a hidden size, which decides the rows of flattened bitsandbytes storage)
        assert weight_tensors(subset, params.quantization) == weight_tensors_reference(subset, params.quantization)


@pytest.mark.parametrize("repo_id", fixture_repo_ids())
def test_vllm_parameter_keys_per_pattern_equal_name_by_name(repo_id):
    """The planner groups tensors into the parameters vLLM allocates (the allocator-rounding term) per name pattern
    and layer: the same keys as vllm_parameter of every name."""
    from hfmem.memory.vllm_weights import parameter_keys, vllm_parameter

    files = model_files(repo_id)
    counted, params, _, arch = _inventory(files)
    tensors = weight_tensors(counted, params.quantization, arch.hidden_size)
    assert parameter_keys(tensors) == [vllm_parameter(t.name) for t in tensors]


def test_vllm_parameter_keys_per_pattern_on_odd_names():
    from hfmem.memory.precision import WeightTensor
    from hfmem.memory.vllm_weights import parameter_keys, vllm_parameter

    names = [("model.layers.3.mlp.experts.7.gate_proj.weight", 3), ("model.layers.3.mlp.experts.9.up_proj.weight", 3),
             ("model.layers.4.mlp.experts.7.gate_proj.weight", 4), ("visual.blocks.0.attn.qkv.weight", None),
             ("visual.blocks.1.attn.qkv.weight", None), ("model.layers.2.mlp.experts.1.linear.0.weight", 2),
             ("model.layers.2.mlp.experts.1.linear.1.weight", 2), ("experts.5.w1.weight", None),
             ("experts.6.w1.weight", None), ("model.layers.1.q_proj.weight", 1)]
    tensors = [WeightTensor(n, "mlp", layer, "linear", 4, 4, 1, 32, pattern=re.sub(r"\.\d+(?=\.)", ".#", n))
               for n, layer in names]
    assert parameter_keys(tensors) == [vllm_parameter(t.name) for t in tensors]


def _kimi_with(ignore=None, groups=None):
    config = copy.deepcopy(load_config("moonshotai/Kimi-K3"))
    q = config.get("quantization_config") or config["text_config"]["quantization_config"]
    if ignore is not None:
        q["ignore"] = ignore
    if groups is not None:
        q["config_groups"] = groups
    return config


def _packed_modules() -> list[str]:
    return [n[: -len(".weight_packed")] for n, *_ in load_inventory("moonshotai/Kimi-K3")["tensors"]
            if n.endswith(".weight_packed")]


IGNORED = "modules listed in quantization_config ignore are stored packed"


@pytest.mark.parametrize("ignore", [
    ["re:.*layers\\.1\\.block_sparse_moe\\.experts\\.0\\..*"],  # one expert of one layer: digits decide
    ["re:.*layers\\.[0-1]\\.block_sparse_moe\\.experts\\..*"],  # a digit range
    ["re:.*experts\\.(\\d)\\1\\..*"],  # a backreference: expert 11, 22, ...
    ["re:.*experts\\.1.*", "lm_head"],  # experts 1, 10-19, 100-...
    ["re:.*experts\\.\\d\\..*"],  # digit-blind: one-digit experts only (the memo keys on the digit pattern)
])
def test_ignore_rules_counted_per_module(ignore, monkeypatch):
    """The "ignored but stored packed" count equals re.match over the stored modules, memo or not."""
    config = _kimi_with(ignore=ignore)
    files = model_files("moonshotai/Kimi-K3", config=config)
    (_, params, seen, _), (_, params_ref, seen_ref, _) = _both(files, monkeypatch, config)
    pattern = re.compile(ignore[0][3:])
    expected = sum(1 for m in _packed_modules() if pattern.match(m))
    assert 0 < expected < len(_packed_modules())
    assert digit_blind([pattern], set()) == ("\\d\\." in ignore[0] and "(" not in ignore[0])
    assert seen[0].get(IGNORED, 0) == seen_ref[0].get(IGNORED, 0) == expected
    assert params.to_dict() == params_ref.to_dict()


def test_group_by_layer_number_gives_its_bits(monkeypatch):
    """Layer 0-1's experts in an 8-bit group, the rest 4-bit: the logical counts follow the layer number."""
    groups = {
        "group_8": {"targets": ["re:.*layers\\.[0-1]\\.block_sparse_moe\\.experts\\..*"], "format": "pack-quantized",
                    "weights": {"num_bits": 8, "type": "int", "group_size": 32}},
        "group_4": {"targets": ["Linear"], "format": "pack-quantized",
                    "weights": {"num_bits": 4, "type": "int", "group_size": 32}},
    }
    config = _kimi_with(groups=groups)
    files = model_files("moonshotai/Kimi-K3", config=config)
    (_, params, seen, _), (_, params_ref, seen_ref, _) = _both(files, monkeypatch, config)
    assert params.to_dict() == params_ref.to_dict() and seen == seen_ref
    eight = re.compile(r".*layers\.[0-1]\.block_sparse_moe\.experts\.")
    entries = {t.name: t for h in files.headers for t in h.tensors}
    expected = {"int8": 0, "int4": 0}
    for name, t in entries.items():
        if name.endswith(".weight_packed"):
            bits = 8 if eight.match(name) else 4
            expected[f"int{bits}"] += t.numel * 32 // bits if t.dtype == "I32" else t.numel * 8 // bits
    assert expected["int8"] and expected["int4"]
    assert seen[1] == expected


NAMES = ["model.layers.0.mlp.experts.7.up_proj", "model.layers.12.mlp.experts.3.up_proj", "model.layers.1.self_attn",
         "model.layers.10.mlp.experts.11.down_proj", "lm_head", "h.5.mlp.c_fc", "blocks.99.ffn.w2", "a0", "a1", "a10",
         "vision_tower.blocks.3.attn.qkv", "layers.1.x", "layers.9.x", "layers.٣.x"]  # (an Arabic-Indic digit)


@pytest.mark.parametrize("source", [
    ".*experts.*", ".*self_attn.*", ".*mlp\\.(gate|up|gate_up|down)_proj.*", "[^.]+\\.\\w+\\.\\d+\\..*", ".*\\.\\d\\..*",
    "(?i)MODEL\\.LAYERS\\.\\d+\\.", ".*[+-:][+-:].*", ".*\\b\\w\\b.*", "(?=.*experts)(?!.*down).*", "\\D*\\.\\d\\.[a-z]",
    "lm_head", ".*\\.\\d\\d\\..*", "(?P<n>\\d+)?.*",
])
def test_digit_blind_rules_answer_alike_for_a_name_and_its_digit_pattern(source):
    pattern = re.compile(source)
    assert digit_blind([pattern], set())
    for name in NAMES:
        key = name.encode("utf-8", "surrogatepass").translate(bytes.maketrans(b"123456789", b"000000000")).decode()
        assert bool(pattern.match(name)) == bool(pattern.match(key)), (source, name)


@pytest.mark.parametrize("source", [
    ".*layers\\.1\\..*", ".*[0-2].*", ".*\\x31.*", ".*\\u0031.*", "(\\d)\\1", "(?P<a>\\d)(?P=a)", ".*\\N{DIGIT ONE}.*",
    "a{2}",
])
def test_digit_sensitive_rules_are_not_digit_blind(source):
    assert not digit_blind([re.compile(source)], set())


PATTERN_NAMES = NAMES[:-1] + [
    "model.layers.123.mlp.experts.4567.gate_proj", "model.layers.07.mlp", "x.1.2.3.y", "a.12.b.3", "w1.2.w3",
    "model.layers.5.mlp.experts.60.up_proj", "model.layers.56.mlp.experts.0.up_proj", "layers.1.2x.3",
    "model.layers.12.mlp.gate_proj", "model.layers.3.mlp.down_proj", "model.layers.10.ffn.x",
]


@pytest.mark.parametrize("source", [
    ".*experts.*", ".*self_attn.*", ".*mlp\\.(gate|up|gate_up|down)_proj.*", "lm_head", "^.*vision_tower.*",
    ".*\\..*\\..*", "(?:.*\\.)?layers\\..*x$", ".*a.*.*\\.b", "(.*)?\\.(?:mlp|ffn)?", "model\\.layers\\..*\\.mlp",
])
def test_pattern_blind_rules_answer_alike_for_a_name_and_its_pattern(source):
    """What pattern_blind accepts matches a name exactly when it matches the name's pattern (numeric parts replaced
    by ".#", the key of the per-pattern weight_packed memo), on names with multi-digit and adjacent numbers."""
    pattern = re.compile(source)
    assert pattern_blind([pattern], set())
    matched = 0
    for name in PATTERN_NAMES:
        key = re.sub(r"\.\d+(?=\.)", ".#", name)
        assert bool(pattern.match(name)) == bool(pattern.match(key)), (source, name)
        matched += bool(pattern.match(name))
    assert matched  # (each source matches some name, so the test can fail)


@pytest.mark.parametrize("source", [
    ".*experts\\.\\d\\..*", ".*layers\\..\\..*", ".*a.+\\.b", ".*x.*+", "[a-z].*", ".*experts\\.1.*", "(?i).*x.*",
    ".*#.*", ".*\\#.*", ".*x{2}.*", ".*\\w.*", ".*\\b.*", "a??", ".*\\x31.*", "(?=a).*",
])
def test_rules_that_can_tell_a_name_from_its_pattern_are_refused(source):
    """".*layers\\..\\..*" matches "layers.1.x" but not "layers.12.x", while both have the pattern "layers.#.x"."""
    assert not pattern_blind([re.compile(source)], set())


def test_exact_names_must_hold_no_digit_or_hash_to_be_pattern_blind():
    assert pattern_blind([], {"lm_head"})
    assert not pattern_blind([], {"model.layers.0.mlp"}) and not pattern_blind([], {"a.#.b"})


@pytest.mark.parametrize("ignore", [["re:.*block_sparse_moe.*"], ["re:.*self_attn.*", "lm_head"]])
def test_pattern_blind_rules_memoised_per_pattern(ignore, monkeypatch):
    """Kimi-K3's own ignore list and one that ignores every packed module: the per-pattern memo (taken: the rules
    are pattern-blind) gives what every tensor worked out on its own gives."""
    config = _kimi_with(ignore=ignore)
    files = model_files("moonshotai/Kimi-K3", config=config)
    entries = [t for h in files.headers for t in h.tensors]
    from hfmem.model.quant import detect_scheme

    assert Quantizer(detect_scheme(config, entries), {})._ct_pattern_blind
    (_, params, seen, _), (_, params_ref, seen_ref, _) = _both(files, monkeypatch, config)
    assert seen == seen_ref and params.to_dict() == params_ref.to_dict()
    packed = sum(1 for t in entries if t.name.endswith(".weight_packed"))
    assert seen[0].get(IGNORED, 0) == (packed if "block_sparse_moe" in ignore[0] else 0)


def test_exact_names_with_digits_are_not_digit_blind():
    assert not digit_blind([], {"model.layers.0.mlp.down_proj"})
    assert digit_blind([], {"lm_head"})


def test_report_unchanged_by_memo(monkeypatch):
    """The whole report (every number of the JSON contract) with and without the quantizer's memo."""
    files = model_files("moonshotai/Kimi-K3")
    fast = analyze_files(files).to_dict()
    monkeypatch.setattr(Quantizer, "memo", False)
    monkeypatch.setattr(_NameFactsMemo, "memo", False)
    assert analyze_files(model_files("moonshotai/Kimi-K3")).to_dict() == fast


def test_scaled_weights_keyed_on_their_scale_too(monkeypatch):
    """Layer 0's FP8 weights given per-tensor and per-channel scales, the rest 128x128 blocks: same weight shapes,
    other granularities, so a memo keyed on the weight alone would count them all as blocks."""
    tensors = []
    changed = {"tensor": 0, "channel": 0}
    for name, dtype, shape, file in load_inventory("Qwen/Qwen3-8B-FP8")["tensors"]:
        if name.startswith("model.layers.0.") and name.endswith(".weight_scale_inv"):
            kind = "tensor" if "mlp" in name else "channel"
            weight = next(s for n, _, s, _ in load_inventory("Qwen/Qwen3-8B-FP8")["tensors"]
                          if n == name[: -len("_scale_inv")])
            shape = [1] if kind == "tensor" else [weight[0], 1]
            changed[kind] += 1
        tensors.append([name, dtype, shape, file])
    assert changed["tensor"] == 3 and changed["channel"] >= 4
    files = model_files("Qwen/Qwen3-8B-FP8", tensors=tensors)
    (_, params, seen, _), (_, params_ref, seen_ref, _) = _both(files, monkeypatch)
    assert seen == seen_ref and params.to_dict() == params_ref.to_dict()
    scales = seen[2]["scales"]
    assert scales["tensor"] == changed["tensor"] and scales["channel"] == changed["channel"]


_ODD_NAMES = [
    "model.layers.3.mlp.gate_proj.weight", "model.layers.61.self_attn.q_proj.weight", "model.LAYERS.7.mlp.up_proj.weight",
    "model.Layers.62.mlp.up_proj.weight", "transformer.h.12.attn.c_attn.weight", "h.0.ln_1.weight",
    "model.layers.07.mlp.down_proj.weight", "model.layers.5.blocks.70.attn.q_proj.weight",
    "model.layers.2.mlp.experts.17.gate_proj.weight_packed", "model.layers.#.x.weight", "model.layers.9.#.weight",
    "model.layers.١٢.mlp.down_proj.weight", "modèl.layers.70.mlp.weight", "mtp.layers.0.eh_proj.weight",
    "model.layers.4.0.weight", "model.layers..3.weight", "model.layers.3", "layers.3.", "block.99.norm.weight",
    "vision_tower.blocks.80.attn.qkv.weight", "visual.blocks.70.mlp.fc1.weight", "model.layers.70.rotary_emb.inv_freq",
    "a.1.b.2.layers.3.c.weight", "blocks.3.layers.4.mlp.weight", "lm_head.weight", "model.layers.70.1.weight",
    "vision_tower.patch_embed.proj.weight", "mm.merger.ln_q.weight", "mm.layers.2.mlp.weight",  # prefixes, no number
    "model.layers.1234.mlp.up_proj.weight", "model.layers.5.x", "model.layers.5.", "model.layers.62.", "h.100.mlp.weight",
    "model.layers.007.mlp.weight", "model.layers.7.1.weight",  # layer numbers read by their first three characters
]


@pytest.mark.parametrize("num_layers", [None, 0, 4, 61, 64])
@pytest.mark.parametrize("parts", [{}, {"vision_tower.": "vision", "mm.": "projector"}, {"model.layers.3.": "vision"}])
def test_name_facts_per_pattern_equal_name_by_name(num_layers, parts):
    """The per-pattern memo gives name_facts (and the structural prefix rule) for names that test its reasoning:
    upper-case layer stacks, leading zeros, a literal '#', non-ASCII digits and letters, several stacks, MTP layers."""
    prefixes = tuple(sorted(parts, key=len, reverse=True))
    memo = _NameFactsMemo(num_layers, parts, prefixes)
    for name in _ODD_NAMES * 2:  # the second round answers from the memo
        component, layer, buffer = name_facts(name, num_layers)
        if prefixes and name.startswith(prefixes):
            component = next(parts[p] for p in prefixes if name.startswith(p))
        got = memo(name)
        assert got[:3] == (component, layer, buffer), name
        assert got[4] is None
        assert got[3] is None or got[3] == re.sub(r"\.\d+(?=\.)", ".#", name)


def test_cache_shape_lookups_see_every_tensor_they_ask_for(monkeypatch):
    """_cache_shapes_from_weights filters the tensors once by _CACHE_SHAPE_SUFFIXES before its look-ups: every
    suffix a look-up asks for must be in that filter (else it would find nothing), and each look-up finds what it
    finds among all tensors, on every fixture."""
    from hfmem.model import architecture

    real = architecture._first_layer_tensor
    asked: set[str] = set()
    checked = 0

    def lookup(arch, entries, *suffixes, **kw):
        nonlocal checked
        asked.update(suffixes)
        got = real(arch, entries, *suffixes, **kw)
        assert got is real(arch, everything, *suffixes, **kw)
        checked += got is not None
        return got

    monkeypatch.setattr(architecture, "_first_layer_tensor", lookup)
    for repo_id in fixture_repo_ids():
        files = model_files(repo_id)
        everything = [t for h in files.headers for t in h.tensors]
        architecture.build_architecture(files.config, everything)
    assert asked and asked <= set(architecture._CACHE_SHAPE_SUFFIXES)
    assert checked >= 20
