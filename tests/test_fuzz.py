"""Fuzzing hostile input: property-based tests (hypothesis) over safetensors headers and configs, and a mutation
fuzzer over real fixture headers. The only acceptable failures are hfmem's own errors (HfmemError); whatever is
accepted must satisfy the format's invariants. The default run covers >= 10,000 cases (COUNTS below); the `slow`
marker runs 20x more of the mutation fuzzer.
"""

from __future__ import annotations

import json
import math
import random
import struct
import traceback

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hfmem.api import analyze_files, attach_sections
from hfmem.model.dtypes import DTYPE_BITS
from hfmem.errors import HfmemError, MalformedConfig, MalformedHeader
from hfmem.hub.files import ModelFiles, load_json_text
from hfmem.hub.header import MAX_FILE_DATA_BYTES, FileHeader, parse_file_bytes, parse_header_bytes
from hfmem.model.inventory import count_tensors, summarize
from stubs import header_bytes, load_config, load_inventory

# Cases per fuzzer in the default run (sum >= 10,000).
MUTATIONS = 8_800
HEADER_PROPERTIES = 1_000
CONFIG_PROPERTIES = 250
JSON_PROPERTIES = 150
assert MUTATIONS + HEADER_PROPERTIES + CONFIG_PROPERTIES + JSON_PROPERTIES >= 10_000

_INT64_MAX = 2**63 - 1
def fast(n: int) -> settings:
    return settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def check_invariants(header: FileHeader) -> None:
    """What an accepted header must satisfy (safetensors' Metadata::validate, plus hfmem's own fields)."""
    names = set()
    for t in header.tensors:
        assert t.name not in names
        names.add(t.name)
        assert all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in t.shape)
        assert t.numel == math.prod(t.shape) <= _INT64_MAX
        bits = DTYPE_BITS.get(t.dtype)
        if bits is not None:
            assert t.numel * bits == t.nbytes * 8
        assert t.nbytes >= 0
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in header.metadata.items())


def downstream(header: FileHeader, config: dict) -> None:
    """Everything after parsing that only needs the header (no transformers): must not crash either."""
    counted, scheme, notes = count_tensors([header], config, 2, bool(config.get("tie_word_embeddings")))
    params = summarize(counted, scheme, notes)
    assert params.stored_bytes == sum(t.nbytes for t in header.tensors)
    assert params.total >= 0
    json.dumps(params.to_dict())


# ------------------------------------------------------------------------------------ mutation fuzzer (real headers)

_SEEDS = [  # (repo, tensors taken): diverse dtypes and layouts, kept short so each parse is cheap
    ("openai-community/gpt2", 40),
    ("google-t5/t5-small", 30),
    ("google-bert/bert-base-uncased", 30),
    ("Qwen/Qwen3-8B-FP8", 40),  # F8_E4M3 + weight_scale_inv
    ("TheBloke/Llama-2-7B-AWQ", 40),  # qweight/qzeros/scales
    ("openai/gpt-oss-20b", 40),  # U8 MXFP4 blocks + scales
    ("state-spaces/mamba-2.8b-hf", 30),
    ("deepseek-ai/DeepSeek-V3", 40),
]
_TOKENS = [b'"', b"{", b"}", b"[", b"]", b",", b":", b"-1", b"1e999", b"\xff", b"\\u0000", b"null", b"9" * 30,
           b"-", b".5", b"true", b'"__metadata__"', b'"dtype"', b"\\", b"\x00", b"NaN", b"[[[[[[[["]  # fmt: skip
_ODD_VALUES = [-1, 0, 1, 2**31, 2**63, 2**64, 10**30, 1.5, 2.0, True, None, "3", "", [], {}, [1, 2, 3], "F16"]


def _seed_headers() -> list[tuple[bytes, dict, int]]:
    seeds = []
    for repo, count in _SEEDS:
        inv = load_inventory(repo)
        first_file = inv["tensors"][0][3]
        tensors = [(n, d, s) for n, d, s, f in inv["tensors"] if f == first_file][:count]
        raw = header_bytes(tensors, {"format": "pt"})
        total = sum(math.prod(s) * DTYPE_BITS[d] // 8 for _, d, s in tensors)
        seeds.append((raw, load_config(repo), total))
    return seeds


def _mutate_bytes(data: bytearray, rng: random.Random) -> None:
    kind = rng.randrange(7)
    pos = rng.randrange(len(data))
    if kind == 0:
        data[pos] ^= 1 << rng.randrange(8)
    elif kind == 1:
        data[pos : pos + 1] = rng.choice(_TOKENS)
    elif kind == 2:
        del data[pos : pos + rng.randrange(1, 64)]
    elif kind == 3:
        data[pos:pos] = rng.choice(_TOKENS)
    elif kind == 4:
        start = rng.randrange(len(data))
        data[pos:pos] = data[start : start + rng.randrange(1, 200)]
    elif kind == 5:
        del data[rng.randrange(len(data)) :]
    else:  # the length prefix
        (length,) = struct.unpack("<Q", bytes(data[:8]).ljust(8, b"\0"))
        choice = rng.choice([0, 1, 7, length - 1, length + 1, length * 2, 100_000_001, 2**64 - 1, rng.randrange(2**64)])
        data[:8] = struct.pack("<Q", max(0, min(choice, 2**64 - 1)))


def _mutate_structure(raw: bytes, rng: random.Random) -> bytes:
    """Decode the seed, break one entry the way a hostile writer would, re-encode with a correct prefix."""
    (length,) = struct.unpack("<Q", raw[:8])
    obj = json.loads(raw[8 : 8 + length])
    names = [k for k in obj if k != "__metadata__"]
    name = rng.choice(names)
    entry = obj[name]
    kind = rng.randrange(10)
    if kind == 0:
        entry["dtype"] = rng.choice([*DTYPE_BITS, "X", "", "f16", 5, None, "F8_E4M3FN"])
    elif kind == 1 and entry["shape"]:
        entry["shape"][rng.randrange(len(entry["shape"]))] = rng.choice(_ODD_VALUES)
    elif kind == 2:
        entry["shape"] = rng.choice([None, 3, "3", {}, [2**40] * 3, entry["shape"] * 2, [], [0]])
    elif kind == 3:
        begin, end = entry["data_offsets"]
        entry["data_offsets"] = rng.choice(
            [[begin, end + 1], [begin - 1, end], [end, begin], [begin], [begin, end, end], [float(begin), end], None, [-8, end]]
        )
    elif kind == 4:
        del entry[rng.choice(["dtype", "shape", "data_offsets"])]
    elif kind == 5:
        obj["__metadata__"] = rng.choice([{"a": 1}, [], "x", {"a": None}, {"format": "pt", "n": {"x": "y"}}, None, {}])
    elif kind == 6:
        obj[name] = rng.choice([None, [], "x", 1, {"dtype": "F16"}])
    elif kind == 7:  # scale one dimension, keep the offsets
        if entry["shape"]:
            entry["shape"][0] = entry["shape"][0] * rng.choice([2, 3]) + rng.choice([0, 1])
    elif kind == 8:
        obj = rng.choice([[obj], "header", 42, None])
    else:
        entry["extra"] = rng.choice([1, {"nested": [1, 2]}, "x"])
    text = json.dumps(obj, separators=(",", ":"))
    if rng.random() < 0.1 and len(names) > 1:  # a duplicate tensor name, which JSON objects cannot hold
        other = rng.choice([n for n in names if n != name])
        text = text.replace(json.dumps(other), json.dumps(name), 1)
    body = text.encode()
    return struct.pack("<Q", len(body)) + body


def run_mutation_fuzzer(cases: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    seeds = _seed_headers()
    outcome = {"accepted": 0, "rejected": 0}
    unexpected: list[str] = []
    for raw, config, total in seeds:  # controls: the unmutated seeds parse, exactly
        header = parse_file_bytes(raw, "model.safetensors", len(raw))
        assert sum(t.nbytes for t in header.tensors) == total
    for case in range(cases):
        raw, config, _ = seeds[case % len(seeds)]
        if rng.random() < 0.5:
            data = bytearray(raw)
            for _ in range(rng.randrange(1, 4)):
                if data:
                    _mutate_bytes(data, rng)
            blob = bytes(data)
        else:
            blob = _mutate_structure(raw, rng)
        try:
            header = parse_file_bytes(blob, "model.safetensors", len(blob))
            check_invariants(header)
            downstream(header, config)
            outcome["accepted"] += 1
        except MalformedHeader as exc:
            assert exc.message.startswith("model.safetensors") and "\n" not in exc.message
            outcome["rejected"] += 1
        except Exception:
            unexpected.append(f"case {case}: {blob[:200]!r}\n{traceback.format_exc(limit=4)}")
    assert not unexpected, f"{len(unexpected)} unexpected exceptions; first:\n" + unexpected[0]
    return outcome


def test_mutation_fuzzer_over_real_headers():
    outcome = run_mutation_fuzzer(MUTATIONS, seed=20240601)
    # Both sides are exercised: most mutations are caught, and some harmless ones (padding, metadata) pass.
    assert outcome["rejected"] > MUTATIONS * 0.5 and outcome["accepted"] > 50, outcome


@pytest.mark.slow
def test_mutation_fuzzer_big_budget():
    run_mutation_fuzzer(MUTATIONS * 20, seed=7)


# ------------------------------------------------------------------------------ property-based: headers (hypothesis)

_dtype = st.sampled_from(sorted(DTYPE_BITS))
_shape = st.lists(st.integers(min_value=0, max_value=5000), min_size=0, max_size=4)
_name = st.text("abcé.0_\"\\/\u2603", min_size=1, max_size=12)  # odd characters included: quote, backslash, non-ASCII
_tensors = st.lists(st.tuples(_name, _dtype, _shape), min_size=1, max_size=12, unique_by=lambda t: t[0])
DEFECTS = [None, None, None, "unknown_dtype", "missing_dtype", "missing_shape", "missing_offsets", "negative_dim",
           "float_dim", "bool_dim", "overflow", "offsets_mismatch", "gap", "overlap", "duplicate", "metadata_not_str",
           "not_object", "not_utf8", "not_json", "length_too_big", "length_past_file"]  # fmt: skip


def _layout(tensors):
    header, offset = {}, 0
    for name, dtype, shape in tensors:
        numel = math.prod(shape)
        bits = DTYPE_BITS[dtype]
        if numel * bits % 8:  # sub-byte dtypes (F4, F6) need whole bytes: pad the shape
            shape = [*shape, 8]
            numel *= 8
        size = numel * bits // 8
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    return header


@fast(HEADER_PROPERTIES)
@given(tensors=_tensors, metadata=st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
       defect=st.sampled_from(DEFECTS), pick=st.integers(min_value=0))  # fmt: skip
def test_header_properties(tensors, metadata, defect, pick):
    obj = _layout(tensors)
    if metadata is not None:
        obj["__metadata__"] = metadata
    names = [n for n in obj if n != "__metadata__"]
    victim = obj[names[pick % len(names)]]
    ordered = sorted(names, key=lambda n: obj[n]["data_offsets"])
    text = None
    if defect == "unknown_dtype":
        victim["dtype"] = "Q3_K"
    elif defect in ("missing_dtype", "missing_shape", "missing_offsets"):
        del victim[{"missing_dtype": "dtype", "missing_shape": "shape", "missing_offsets": "data_offsets"}[defect]]
    elif defect == "negative_dim":
        victim["shape"] = [*victim["shape"], -1]
    elif defect == "float_dim":
        victim["shape"] = [*victim["shape"], 1.0]
    elif defect == "bool_dim":
        victim["shape"] = [*victim["shape"], True]
    elif defect == "overflow":
        victim["shape"] = [2**32, 2**32, 2]
    elif defect == "offsets_mismatch":
        victim["data_offsets"][1] += 1
    elif defect == "gap":
        for n in ordered[ordered.index(names[pick % len(names)]) :]:
            obj[n]["data_offsets"] = [o + 8 for o in obj[n]["data_offsets"]]
    elif defect == "overlap":
        if len(ordered) < 2 or all(obj[n]["data_offsets"][0] == obj[n]["data_offsets"][1] for n in ordered):
            defect = "offsets_mismatch"  # nothing to overlap: degrade to a mismatch, which must fail too
            victim["data_offsets"][1] += 1
        else:
            for n in ordered[1:]:
                obj[n]["data_offsets"] = [max(0, o - 1) for o in obj[n]["data_offsets"]]
            first = obj[ordered[0]]
            if first["data_offsets"][0] == first["data_offsets"][1]:
                defect = "anything"  # zero-size first tensor: the shift may only make a mismatch; any error will do
    elif defect == "duplicate":
        text = json.dumps(obj)
        extra = json.dumps({names[0]: obj[names[0]]})[1:-1]
        text = text[:-1] + ", " + extra + "}"
    elif defect == "metadata_not_str":
        obj["__metadata__"] = {"format": 1}
    elif defect == "not_object":
        text = json.dumps([obj])
    elif defect == "not_json":
        text = json.dumps(obj)[:-1]
    body = text.encode() if text is not None else json.dumps(obj).encode()
    if defect == "not_utf8":
        body = body.replace(b"{", b"{\xff", 1) if b"\xff" not in body else body
    prefix = struct.pack("<Q", len(body))
    if defect == "length_too_big":
        prefix = struct.pack("<Q", 100_000_001)
    if defect == "length_past_file":
        prefix = struct.pack("<Q", len(body) + 1)
    blob = prefix + body

    end = max((e["data_offsets"][1] for n, e in obj.items() if n != "__metadata__" and "data_offsets" in e), default=0)
    if defect in (None, "unknown_dtype") and end > MAX_FILE_DATA_BYTES:
        with pytest.raises(MalformedHeader, match="beyond the 16 TiB"):  # no real file holds that much
            parse_file_bytes(blob, "x.safetensors", len(blob))
    elif defect in (None, "unknown_dtype"):
        header = parse_file_bytes(blob, "x.safetensors", len(blob))
        check_invariants(header)
        assert [t.name for t in header.tensors] == ordered
        assert sum(t.nbytes for t in header.tensors) == max(e["data_offsets"][1] for n, e in obj.items() if n != "__metadata__")
        assert header.metadata == (metadata or {})
        assert bool(header.warnings) == (defect == "unknown_dtype")
        downstream(header, {})
    else:
        with pytest.raises(MalformedHeader) as info:
            parse_file_bytes(blob, "x.safetensors", len(blob))
        assert info.value.message.startswith("x.safetensors")


# ------------------------------------------------------------------------------ property-based: configs (hypothesis)

_json_scalar = st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | st.text(max_size=6)
_json_value = st.recursive(_json_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
_FIELDS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
           "intermediate_size", "max_position_embeddings", "tie_word_embeddings", "model_type", "architectures",
           "torch_dtype", "sliding_window", "layer_types", "rope_scaling", "quantization_config", "text_config",
           "num_local_experts", "num_experts_per_tok", "kv_lora_rank", "qk_nope_head_dim", "auto_map", "use_sliding_window",
           "qk_rope_head_dim", "linear_num_key_heads", "full_attention_interval"]  # fmt: skip
_CONFIG_BASES = ["Qwen/Qwen2-0.5B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "openai-community/gpt2", "deepseek-ai/DeepSeek-V3",
                 "google/gemma-3-27b-it", "openai/gpt-oss-20b", "moonshotai/Kimi-Linear-48B-A3B-Instruct"]
_small_value = st.one_of(
    st.integers(min_value=-3, max_value=10**13), st.sampled_from([0, 1, 2, 7, 64, 10**12, -1, 2**63]), _json_value
)


def _small_header(repo: str) -> FileHeader:
    inv = load_inventory(repo)
    tensors = [(n, d, s) for n, d, s, _ in inv["tensors"][:20]]
    return parse_file_bytes(header_bytes(tensors), "model.safetensors")


_HEADERS: dict[str, FileHeader] = {}


@fast(CONFIG_PROPERTIES)
@given(base=st.sampled_from(_CONFIG_BASES), changes=st.dictionaries(st.sampled_from(_FIELDS), _small_value, min_size=1, max_size=4),
       nest=st.booleans(), ctx=st.sampled_from([None, "4k", "max", "1", "32k,128k"]))  # fmt: skip
def test_config_properties(base, changes, nest, ctx):
    """Hostile config values through the analysis and every memory section (KV cache, weights, plan)."""
    config = load_config(base)
    if nest and isinstance(config.get("text_config"), dict):
        config["text_config"].update(changes)
    else:
        config.update(changes)
    if base not in _HEADERS:
        _HEADERS[base] = _small_header(base)
    files = ModelFiles(repo="fuzz/model", revision=None, source="local", config=config, headers=[_HEADERS[base]])
    try:
        report = analyze_files(files)
        attach_sections(report, ctx=ctx, gpu="h100-80gb")
    except MalformedConfig as exc:
        assert exc.message.startswith("config.json") and "\n" not in exc.message
        return
    except HfmemError:
        return
    arch = report.architecture
    for value in (arch.num_layers, arch.hidden_size, arch.vocab_size):
        assert isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 10**9
    assert arch.num_layers <= 10_000
    assert arch.head_dim >= 0 and arch.num_kv_heads >= 0
    json.dumps(report.to_dict())


@pytest.mark.parametrize(
    "change, field",
    [
        ({"num_hidden_layers": 0}, "num_hidden_layers"),
        ({"num_hidden_layers": -2}, "num_hidden_layers"),
        ({"num_hidden_layers": 10**9}, "num_hidden_layers"),  # transformers would build a 10**9-entry layer_types
        ({"num_attention_heads": 0}, "num_attention_heads"),
        ({"num_attention_heads": -4}, "num_attention_heads"),
        ({"vocab_size": 10**12}, "vocab_size"),
        ({"hidden_size": "4096"}, "hidden_size"),
        ({"hidden_size": 4.5}, "hidden_size"),
        ({"tie_word_embeddings": "false"}, "tie_word_embeddings"),
        ({"architectures": "LlamaForCausalLM"}, "architectures"),
        ({"quantization_config": {"quant_method": "gptq", "bits": 0}}, "bits"),
        ({"text_config": {"num_hidden_layers": -1}}, "text_config.num_hidden_layers"),
        # found by the config fuzzer on gpt-oss (sliding layers): the roofline compared a list with the context
        ({"sliding_window": [None]}, "sliding_window"),
        ({"sliding_window": -4096}, "sliding_window"),
    ],
)
def test_absurd_config_values_name_the_field(change, field):
    config = {**load_config("Qwen/Qwen2-0.5B-Instruct"), **change}
    files = ModelFiles(repo="x", revision=None, source="local", config=config, headers=[_small_header("Qwen/Qwen2-0.5B-Instruct")])
    with pytest.raises(MalformedConfig, match=field.replace(".", r"\.")) as info:
        analyze_files(files)
    assert info.value.message.startswith("config.json")


def test_heads_not_dividing_hidden_without_head_dim():
    config = {k: v for k, v in load_config("Qwen/Qwen2-0.5B-Instruct").items() if k != "head_dim"}
    config["num_attention_heads"] = 7  # 896 / 7 = 128: divides; 5 does not
    config["num_key_value_heads"] = 1
    analyze_files(ModelFiles("x", None, "local", config, [_small_header("Qwen/Qwen2-0.5B-Instruct")]))
    config["num_attention_heads"] = 5
    with pytest.raises(MalformedConfig, match="not divisible"):
        analyze_files(ModelFiles("x", None, "local", config, [_small_header("Qwen/Qwen2-0.5B-Instruct")]))


# ------------------------------------------------------------------------------ property-based: JSON files


@fast(JSON_PROPERTIES)
@given(blob=st.binary(max_size=200) | _json_value.map(lambda v: json.dumps(v).encode()), depth=st.integers(0, 200_000))
def test_json_loader_properties(blob, depth):
    for data in (blob, b"[" * depth + b"]" * depth if depth % 7 == 0 else blob):
        try:
            obj = load_json_text(data, "config.json")
        except MalformedConfig as exc:
            assert exc.message.startswith("config.json") and "\n" not in exc.message
        else:
            assert isinstance(obj, dict)


def test_deeply_nested_json_is_a_clear_error():
    for text in ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"a": ' + '{"b": ' * 70 + "1" + "}" * 71):
        with pytest.raises(MalformedConfig, match="nested"):
            load_json_text(text, "config.json")
    with pytest.raises(MalformedHeader):
        parse_header_bytes(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "model.safetensors")


# ------------------------------------------------------------------------------ hostile headers served by the Hub

_HOSTILE = {
    "length_too_big": (200_000_000).to_bytes(8, "little") + b"{}",
    "not_json": b"\x10\0\0\0\0\0\0\0{not json at all",
    "not_object": b"\x04\0\0\0\0\0\0\0[{}]",
    "entry_not_object": b'\x0c\0\0\0\0\0\0\0{"w": [1,2]}',
    # A consistent file whose one entry lacks its dtype (the length prefix recomputed: speed's range path checks
    # the prefix against the file size first, so a stale prefix is reported as that, see "length_past_file").
    "missing_dtype": b"",  # filled below
    # The prefix still counts the removed '"dtype":"F16",' (56 > the 50-byte file).
    "length_past_file": header_bytes([("w", "F16", [4])]).replace(b'"dtype":"F16",', b""),
    "negative_dim": b"",  # filled below
    "offsets_mismatch": header_bytes([("w", "F16", [4]), ("v", "F16", [4])]).replace(b"[8,16]", b"[8,17]"),
    "short_file": header_bytes([("w", "F16", [4])])[:12],
}
_neg = b'{"w":{"dtype":"F16","shape":[-4],"data_offsets":[0,8]}}'
_HOSTILE["negative_dim"] = struct.pack("<Q", len(_neg)) + _neg
_no_dtype = header_bytes([("w", "F16", [4])])[8:].replace(b'"dtype":"F16",', b"")
_HOSTILE["missing_dtype"] = struct.pack("<Q", len(_no_dtype)) + _no_dtype


@pytest.mark.parametrize("kind", sorted(_HOSTILE))
def test_hostile_headers_from_the_hub_are_clear_errors(hub_env, tmp_path, kind):
    from hub_server import RepoSpec

    folder = tmp_path / kind
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(load_config("Qwen/Qwen2-0.5B-Instruct")))
    (folder / "model-00001-of-00001.safetensors").write_bytes(_HOSTILE[kind])
    index = {"metadata": {}, "weight_map": {"w": "model-00001-of-00001.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    spec = RepoSpec(root=folder)
    spec.revisions["v1"] = ("c" * 40, folder)
    hub_env.add_repo("evil/model", spec)
    import hfmem

    for revision in (None, "v1"):  # main: the one-shot endpoint (or its fallback); v1: range requests
        with pytest.raises(MalformedHeader) as info:
            hfmem.analyze("evil/model", revision=revision, timeout=30)
        assert "model-00001-of-00001.safetensors" in info.value.message or "safetensors" in info.value.message
        if kind == "missing_dtype":
            assert "'dtype'" in info.value.message


# ---------------------------------------------------------------------------------------------------------------
# The header digest cache: any edit of an entry (with or without a recomputed checksum) is a miss or an entry that
# obeys the fresh-header rules; never an exception, never an impossible tensor.

CACHE_MUTATIONS = 600


def _reseal(head: bytes, body: bytes) -> bytes:
    import hashlib

    return hashlib.sha256(head + b"\n" + body).hexdigest().encode() + b"\n" + head + b"\n" + body


def _mutate_json(value, rng: random.Random):
    """One random structural edit somewhere in a decoded JSON value."""
    junk = [None, True, -1, 2**70, 1.5, "x", "", [], {}, [1, "2"], {"a": 1}, float("nan")]
    if isinstance(value, list) and value and rng.random() < 0.7:
        i = rng.randrange(len(value))
        choice = rng.random()
        if choice < 0.6:
            value[i] = _mutate_json(value[i], rng)
        elif choice < 0.8:
            del value[i]
        else:
            value.insert(i, rng.choice(junk))
        return value
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(sorted(value))
        if rng.random() < 0.8:
            value[key] = _mutate_json(value[key], rng)
        else:
            del value[key]
        return value
    return rng.choice(junk)


def test_digest_entry_fuzzer(tmp_path, monkeypatch):
    from hfmem.hub import digest

    monkeypatch.setenv("HFMEM_CACHE", str(tmp_path))
    repo, sha = "org/fuzz", "a" * 40
    inventory = load_inventory("Qwen/Qwen2-0.5B-Instruct")
    tensors = [(n, d, s) for n, d, s, _ in inventory["tensors"]][:40]
    header = parse_file_bytes(header_bytes(tensors, {"format": "pt"}), "model.safetensors")
    digest.store(repo, sha, load_config("Qwen/Qwen2-0.5B-Instruct"), [header], {"total_size": 1}, ["w"])
    path = digest._digest_path(repo, sha)
    pristine = path.read_bytes()
    assert digest.load(repo, sha) is not None
    rng = random.Random(1234)
    for case in range(CACHE_MUTATIONS):
        _, head, body = pristine.split(b"\n", 2)
        if rng.random() < 0.5:
            columns = _mutate_json(json.loads(body), rng)
            body = json.dumps(columns, allow_nan=True).encode()
        else:
            meta = _mutate_json(json.loads(head), rng)
            head = json.dumps(meta, allow_nan=True).encode()
        raw = _reseal(head, body) if rng.random() < 0.9 else bytearray(pristine)
        if isinstance(raw, bytearray):  # an unsealed byte flip: the checksum must catch it
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
            raw = bytes(raw)
        path.write_bytes(raw)
        try:
            hit = digest.load(repo, sha)
        except Exception:
            pytest.fail(f"case {case}: digest.load raised\n{traceback.format_exc()}")
        if hit is not None:
            config, headers, _, warnings = hit
            assert isinstance(config, dict) and all(isinstance(w, str) for w in warnings)
            for h in headers:
                check_invariants(h)
# ---------------------------------------------------------------------- GGUF folders: local-path rules, never a hang

GGUF_FOLDERS = 40
# What a file in a GGUF folder can be, and what reading it must give: "ok" a report, "16" a LocalPathError,
# "ok|17" a report or a MalformedHeader (bytes the reader may or may not make sense of).
_GGUF_ENTRIES = {
    "valid": "ok", "link_inside": "ok", "truncated": "17", "mutated": "ok|17", "empty": "17",
    "fifo": "16", "directory": "16", "link_outside": "16", "link_dev_zero": "16", "broken_link": "16", "link_loop": "16",
}  # fmt: skip


def _make_gguf_entry(folder, outside, name: str, kind: str, rng: random.Random) -> None:
    import os

    from stubs import gguf_bytes

    path = folder / name
    data = gguf_bytes(n_tensors=rng.randint(1, 3))
    if kind == "valid":
        path.write_bytes(data)
    elif kind == "truncated":
        path.write_bytes(data[: rng.randrange(1, len(data))])
    elif kind == "mutated":
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        path.write_bytes(bytes(buf))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "link_inside":
        (folder / "blobs").mkdir(exist_ok=True)
        (folder / "blobs" / name).write_bytes(data)
        path.symlink_to(folder / "blobs" / name)
    elif kind == "link_outside":
        (outside / name).write_bytes(data)
        path.symlink_to(outside / name)
    elif kind == "link_dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "broken_link":
        path.symlink_to(folder / "gone.bin")
    elif kind == "link_loop":
        path.symlink_to(path)


def _bounded(fn, seconds: float = 20.0):
    """fn() in a thread: (value, error), or a failure if it does not return (a FIFO opened blocking hangs)."""
    import threading

    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(value=_catch(fn)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "hung"
    return box["value"]


def _catch(fn):
    try:
        return fn(), None
    except Exception as exc:  # the assertions say which errors are acceptable
        return None, exc


@fast(GGUF_FOLDERS)
@given(kinds=st.lists(st.sampled_from(sorted(_GGUF_ENTRIES)), min_size=1, max_size=4), seed=st.integers(0, 2**32 - 1))
def test_gguf_folder_properties(kinds, seed):
    import shutil
    import tempfile
    from pathlib import Path

    from hfmem.errors import LocalPathError
    from hfmem.gguf.model import read_gguf_report

    rng = random.Random(seed)
    base = Path(tempfile.mkdtemp(prefix="hfmem-gguf-fuzz-"))
    try:
        folder, outside = base / "model", base / "outside"
        folder.mkdir()
        outside.mkdir()
        names = [f"m{i}-Q4_K_M.gguf" for i in range(len(kinds))]
        for name, kind in zip(names, kinds):
            _make_gguf_entry(folder, outside, name, kind, rng)
        listing, error = _bounded(lambda: read_gguf_report(str(folder)))
        assert error is None or isinstance(error, (LocalPathError, MalformedHeader)), error
        for name, kind in zip(names, kinds):
            report, error = _bounded(lambda: read_gguf_report(str(folder), gguf_file=name))
            expected = _GGUF_ENTRIES[kind]
            if expected == "16":
                assert isinstance(error, LocalPathError) and error.exit_code == 16, (kind, error)
                assert "\n" not in error.message
            elif expected == "ok":
                assert error is None and report.header is not None and report.header.parameters > 0, (kind, error)
            elif expected == "17":
                assert isinstance(error, MalformedHeader), (kind, error)
            else:
                assert error is None or isinstance(error, MalformedHeader), (kind, error)
    finally:
        shutil.rmtree(base, ignore_errors=True)
