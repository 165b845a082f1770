"""Which tensors count is decided by the index, the same way on main (one-shot answer), at a commit (range reads) and
from a local folder; a checkpoint that disagrees with its index is a warning or exit 17, never a silent change.

Every case runs the installed CLI against the local Hub (the real huggingface_hub client) and a local copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec
from stubs import header_bytes

REPO = "org/agree"
CONFIG = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 512,
    "max_position_embeddings": 256, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip
H, I, V = 64, 128, 512
TENSORS_A = [
    ("model.embed_tokens.weight", "BF16", [V, H]),
    ("model.layers.0.input_layernorm.weight", "BF16", [H]),
    ("model.layers.0.self_attn.q_proj.weight", "BF16", [H, H]),
    ("model.layers.0.self_attn.k_proj.weight", "BF16", [H, H]),
    ("model.layers.0.self_attn.v_proj.weight", "BF16", [H, H]),
    ("model.layers.0.self_attn.o_proj.weight", "BF16", [H, H]),
]
TENSORS_B = [
    ("model.layers.0.post_attention_layernorm.weight", "BF16", [H]),
    ("model.layers.0.mlp.gate_proj.weight", "BF16", [I, H]),
    ("model.layers.0.mlp.up_proj.weight", "BF16", [I, H]),
    ("model.layers.0.mlp.down_proj.weight", "BF16", [H, I]),
    ("model.norm.weight", "BF16", [H]),
    ("lm_head.weight", "BF16", [V, H]),
]
SHARD_A, SHARD_B = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
HONEST_TOTAL = 2 * V * H + 4 * H * H + 3 * I * H + 3 * H  # 90,304


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _write(folder: Path, a=TENSORS_A, b=TENSORS_B, index_map=None, extra_files=()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / SHARD_A).write_bytes(header_bytes(a, {"format": "pt"}))
    (folder / SHARD_B).write_bytes(header_bytes(b, {"format": "pt"}))
    for name, tensors in extra_files:
        (folder / name).write_bytes(header_bytes(tensors, {"format": "pt"}))
    if index_map is None:
        index_map = {n: SHARD_A for n, _, _ in TENSORS_A} | {n: SHARD_B for n, _, _ in TENSORS_B}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": index_map}))
    return folder


def _three_ways(hub_env, cli, folder: Path, **spec):
    """(main, --revision <sha>, local folder) CLI results; each from a fresh hfmem cache, so none answers another."""
    hub_env.add_repo(REPO, RepoSpec(root=folder, **spec))
    sha = hub_env.repos[REPO].sha
    out = []
    for n, args in enumerate(([REPO], [REPO, "--revision", sha], [str(folder)])):
        out.append(cli([*args, "--format", "json"], env={"HFMEM_CACHE": str(folder.parent / f"cache{n}")}))
    return out


def _total(result) -> int:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["parameters"]["total"]


def _warnings(result) -> str:
    return " ".join(json.loads(result.stdout)["warnings"])


def test_honest_repo_agrees_three_ways(hub_env, cli, tmp_path):
    results = _three_ways(hub_env, cli, _write(tmp_path / "repo"))
    assert [_total(r) for r in results] == [HONEST_TOTAL] * 3
    assert all("index" not in _warnings(r) for r in results)


def test_unindexed_tensor_in_a_shard_is_not_counted_anywhere(hub_env, cli, tmp_path):
    extra = ("model.layers.0.self_attn.rotary_emb.inv_freq_copy", "F32", [1_000_000])
    results = _three_ways(hub_env, cli, _write(tmp_path / "repo", a=[*TENSORS_A, extra]))
    assert [_total(r) for r in results] == [HONEST_TOTAL] * 3
    for r in results:
        assert "1 stored tensor(s) that model.safetensors.index.json does not name were not counted" in _warnings(r)


def _end(header: dict) -> int:
    return max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)


def test_hostile_one_shot_answer_cannot_add_tensors_or_files(hub_env, cli, tmp_path):
    def hostile(body):
        shard = body["headers"][SHARD_A]
        end = _end(shard)  # a well-formed entry, contiguous with the others: only the index can refuse it
        shard["injected.weight"] = {"dtype": "BF16", "shape": [1_000_000_000], "data_offsets": [end, end + 2_000_000_000]}
        body["headers"]["consolidated.safetensors"] = {
            "big.weight": {"dtype": "BF16", "shape": [1000, 1000], "data_offsets": [0, 2_000_000]}
        }
        return body

    folder = _write(tmp_path / "repo")
    hub_env.add_repo(REPO, RepoSpec(root=folder, sharded_answer=hostile))
    sha = hub_env.repos[REPO].sha
    main = cli([REPO, "--format", "json"])
    assert _total(main) == HONEST_TOTAL
    assert "'consolidated.safetensors'" in _warnings(main) and "'injected.weight'" in _warnings(main)
    # The digest stored by that run answers a later --revision run: the same figure.
    again = cli([REPO, "--revision", sha, "--format", "json"])
    assert _total(again) == HONEST_TOTAL


def test_one_shot_answer_without_an_indexed_shard_is_exit_17(hub_env, cli, tmp_path):
    def drop_b(body):
        del body["headers"][SHARD_B]
        return body

    hub_env.add_repo(REPO, RepoSpec(root=_write(tmp_path / "repo"), sharded_answer=drop_b))
    r = cli([REPO])
    assert r.returncode == 17 and "names 6 of 12 tensors that no shard stores" in r.stderr, r.stderr


def test_tensor_in_another_shard_than_indexed_is_counted_where_stored(hub_env, cli, tmp_path):
    # lm_head.weight is stored in shard A, while the index says shard B (today's stubs drop it: "no lm_head").
    lm_head = TENSORS_B[-1]
    folder = _write(tmp_path / "repo", a=[*TENSORS_A, lm_head], b=TENSORS_B[:-1])
    results = _three_ways(hub_env, cli, folder)
    assert [_total(r) for r in results] == [HONEST_TOTAL] * 3
    for r in results:
        assert "1 tensor(s) are stored in another shard" in _warnings(r) and "lm_head.weight" in _warnings(r)
        assert "no lm_head" not in _warnings(r)


@pytest.mark.parametrize("drop", ["one", "all"])
def test_indexed_tensor_that_no_shard_stores_is_exit_17(hub_env, cli, tmp_path, drop):
    if drop == "one":
        folder = _write(tmp_path / "repo", b=TENSORS_B[:-1])  # lm_head.weight indexed, stored nowhere
        needle = "names 1 of 12 tensors that no shard stores (first: 'lm_head.weight'"
    else:
        index_map = {f"ghost.{n}": SHARD_A for n in range(5)}
        folder = _write(tmp_path / "repo", index_map=index_map)
        needle = "names 5 of 5 tensors that no shard stores"
    for r in _three_ways(hub_env, cli, folder):
        assert r.returncode == 17, (r.returncode, r.stderr)
        assert needle in r.stderr and r.stderr.count("\n") == 1


def test_header_with_no_tensors_is_exit_17(tmp_path, cli):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "model.safetensors").write_bytes(header_bytes([], {"format": "pt"}))
    r = cli([str(folder)])
    assert r.returncode == 17 and "hold no tensors" in r.stderr, r.stderr
