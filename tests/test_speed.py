"""Speed: request counts and round trips against the local Hub, the header digest cache (hit, miss,
corrupt, offline, moved branch), start-up imports, and linear-time classification of a 139,644-tensor repo.

Round trips are checked from the hub's request log (which requests were in flight together), never by timing
the whole call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hfmem
from hfmem.hub import cachedir, prefetch, remote
from hfmem.hub import digest as cache
from hfmem.model import inventory, normalise
from hub_server import RepoSpec
from stubs import header_bytes

QWEN = "Qwen/Qwen2-7B-Instruct"  # 4 shards
SMALL = "Qwen/Qwen2-0.5B-Instruct"  # one model.safetensors, no index
LATENCY = 0.4


def _serve(hub, stub_repo, repo=QWEN, **spec):
    hub.add_repo(repo, RepoSpec(root=stub_repo(repo), **spec))
    return hub.repos[repo]


def _log(hub):
    return [(r.method, r.path.split("?")[0], r.range) for r in hub.requests]


def _waves(hub):
    """Group logged requests into round trips. With `LATENCY` injected per request, no answer leaves the hub before
    a wave's first request arrived + LATENCY, so a request arriving earlier cannot depend on that wave: it is part of
    it (however slowly a loaded machine spreads a burst of 64 requests)."""
    waves: list[list] = []
    for r in hub.requests:
        if waves and r.started < waves[-1][0].started + LATENCY:
            waves[-1].append(r)
        else:
            waves.append([r])
    return waves


def _many_shards(tmp_path: Path, n: int, tensors_per_shard: int = 3, name_pad: str = "") -> Path:
    root = tmp_path / f"shards{n}"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    weight_map = {}
    for s in range(n):
        file = f"model-{s + 1:05d}-of-{n:05d}.safetensors"
        tensors = [(f"model.layers.{s}.mlp.experts.{e}.{name_pad}down_proj.weight", "BF16", [8, 4]) for e in range(tensors_per_shard)]
        (root / file).write_bytes(header_bytes(tensors, {"format": "pt"}))
        weight_map.update({t[0]: file for t in tensors})
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return root


# ---------------------------------------------------------------------------------------------------------------
# Request counts and round trips


def test_main_sharded_is_three_concurrent_requests(hub_env, stub_repo):
    spec = _serve(hub_env, stub_repo)
    hub_env.latency_s = LATENCY
    report = hfmem.analyze(QWEN)
    assert report.parameters.total == 7_615_616_512 and report.revision == spec.sha
    # The index comes along because the one-shot answer lacks its weight_map, which decides what counts.
    assert sorted(_log(hub_env)) == sorted([
        ("GET", f"/api/models/{QWEN}/safetensors-metadata/model.safetensors.index.json", None),
        ("GET", f"/{QWEN}/resolve/main/model.safetensors.index.json", None),
        ("GET", f"/{QWEN}/resolve/main/config.json", None),
    ])
    assert len(_waves(hub_env)) == 1, "config, index and headers must be in flight together (one round trip)"


def test_single_file_main_is_two_round_trips(hub_env, stub_repo):
    spec = _serve(hub_env, stub_repo, SMALL)
    hub_env.latency_s = LATENCY
    assert hfmem.analyze(SMALL).parameters.total == 494_032_768
    log = _log(hub_env)
    assert len(log) == 4, log  # config || index (404) || metadata (404: not sharded), then one range at the commit
    ranged = [r for r in hub_env.requests if r.range]
    assert len(ranged) == 1 and ranged[0].status == 206 and spec.sha in ranged[0].path
    assert len(_waves(hub_env)) == 2


def test_other_revision_is_config_index_and_one_range_per_shard(hub_env, tmp_path):
    root = _many_shards(tmp_path, 64)
    hub_env.add_repo("org/moe", RepoSpec(root=root, revisions={"v1": ("b" * 40, root)}))
    hub_env.latency_s = LATENCY
    files = remote.read_hub("org/moe", revision="v1")
    assert files.revision == "b" * 40 and len(files.headers) == 64
    log = _log(hub_env)
    ranged = [r for r in hub_env.requests if r.range]
    assert len(log) == 2 + 64 and len(ranged) == 64, "config + index + exactly one range per shard"
    assert all(r.status == 206 and "b" * 40 in r.path for r in ranged), "shards are read at the resolved commit"
    assert not any("safetensors-metadata" in p for _, p, _ in log), "the one-shot endpoint only serves main"
    waves = _waves(hub_env)
    assert len(waves) == 2, [len(w) for w in waves]  # config || index, then all 64 shards together
    assert {r.path.rsplit("/", 1)[1] for r in waves[0]} == {"config.json", "model.safetensors.index.json"}


def test_hub_without_endpoint_is_three_round_trips(hub_env, stub_repo):
    _serve(hub_env, stub_repo, sharded_endpoint=False)
    hub_env.latency_s = LATENCY
    assert hfmem.analyze(QWEN).parameters.total == 7_615_616_512
    ranged = [r for r in hub_env.requests if r.range]
    assert len(hub_env.requests) == 3 + 4 and len(ranged) == 4
    assert len(_waves(hub_env)) == 2  # config || index || metadata (404), then 4 shards


def test_speculative_range_is_sized_from_the_index(hub_env, tmp_path):
    # 4 shards with ~200 kB headers each (long names): still one range per shard, none larger than needed x2.
    root = _many_shards(tmp_path, 4, tensors_per_shard=600, name_pad="x" * 200 + ".")
    hub_env.add_repo("org/long", RepoSpec(root=root, revisions={"v1": ("c" * 40, root)}))
    files = remote.read_hub("org/long", revision="v1")
    assert sum(len(h.tensors) for h in files.headers) == 2400
    ranged = [r for r in hub_env.requests if r.range]
    assert len(ranged) == 4
    for r in ranged:
        size = len((root / r.path.rsplit("/", 1)[1]).read_bytes())  # the stub file is exactly 8 + header
        assert size <= r.bytes_sent <= 2 * size + 8192


def test_second_range_only_for_a_header_beyond_the_first_read(hub_env, tmp_path):
    root = tmp_path / "big-single"
    root.mkdir()
    (root / "config.json").write_text('{"model_type": "llama"}')
    tensors = [(f"model.layers.{i}.self_attn.q_proj.{'y' * 300}.weight", "F16", [2, 2]) for i in range(1200)]
    raw = header_bytes(tensors)
    assert len(raw) > remote.SPECULATIVE_RANGE
    (root / "model.safetensors").write_bytes(raw + b"\0" * (1 << 20))  # with "weights" after the header
    hub_env.add_repo("org/big", RepoSpec(root=root))
    files = remote.read_hub("org/big")
    assert len(files.headers[0].tensors) == 1200
    ranged = [r for r in hub_env.requests if r.range]
    assert [r.range for r in ranged] == [f"bytes=0-{remote.SPECULATIVE_RANGE - 1}", f"bytes={remote.SPECULATIVE_RANGE}-{len(raw) - 1}"]
    assert sum(r.bytes_sent for r in ranged) == len(raw), "never a byte of the weights"


# ---------------------------------------------------------------------------------------------------------------
# The header digest cache


def test_repeat_run_is_one_request_and_identical(hub_env, stub_repo):
    _serve(hub_env, stub_repo)
    first = hfmem.analyze(QWEN).to_dict()
    hub_env.clear_log()
    second = hfmem.analyze(QWEN).to_dict()
    assert _log(hub_env) == [("GET", f"/{QWEN}/resolve/main/config.json", None)]
    assert second == first


def test_offline_repeat_is_zero_requests(hub_env, stub_repo, monkeypatch):
    from huggingface_hub import constants

    _serve(hub_env, stub_repo)
    first = hfmem.analyze(QWEN)
    hub_env.clear_log()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    again = hfmem.analyze(QWEN)
    assert hub_env.requests == []
    assert again.source == "cache" and again.revision == first.revision
    assert again.parameters.to_dict() == first.parameters.to_dict()


def test_full_sha_revision_hit_needs_no_request(hub_env, stub_repo):
    spec = _serve(hub_env, stub_repo)
    hfmem.analyze(QWEN)
    hub_env.clear_log()
    assert hfmem.analyze(QWEN, revision=spec.sha).parameters.total == 7_615_616_512
    assert hub_env.requests == []


def test_moved_branch_refetches_headers(hub_env, stub_repo, tmp_path):
    spec = _serve(hub_env, stub_repo)
    hfmem.analyze(QWEN)
    spec.sha = "d" * 40  # main now points at another commit
    hub_env.clear_log()
    files = remote.read_hub(QWEN)
    assert files.revision == "d" * 40
    assert sorted(p.rsplit("/", 1)[1] for _, p, _ in _log(hub_env)) == [
        "config.json", "model.safetensors.index.json", "model.safetensors.index.json"  # the file and the one-shot answer
    ]
    assert cache.read_ref(QWEN, None) == "d" * 40 and cache.load(QWEN, "d" * 40) is not None


def _cli(fork: bool):
    """The console script (its early Hub read in a forked child), or the CLI with that read in a thread."""
    from entry import run_cli

    return lambda args, env=None: run_cli(args, env=env, fork=fork)


@pytest.mark.parametrize("command", [[], ["check", "--gpu", "h100"], ["card"], ["plot", "--format", "json"]])
@pytest.mark.parametrize("fork", [True, False], ids=["forked-read", "thread-read"])
def test_each_cli_command_reads_once(hub_env, stub_repo, tmp_path, command, fork):
    """The CLI starts the Hub read early (hfmem/hub/prefetch.py) and the command takes it: still one read, the three
    requests of a first run on main, and one on a repeat, whichever command reads the model."""
    run_cli = _cli(fork)

    _serve(hub_env, stub_repo)
    args = (command[:1] + [QWEN] + command[1:]) if command else [QWEN, "--format", "json"]
    for home, requests in (("cold", 3), ("cold", 1)):
        hub_env.clear_log()
        out = run_cli(args, env={"HF_HOME": str(tmp_path / home)})
        assert out.returncode in (0, 1), out.stderr  # check: 1 = does not fit
        assert len(hub_env.requests) == requests, (command, _log(hub_env))


@pytest.mark.parametrize("fork", [True, False], ids=["forked-read", "thread-read"])
def test_cli_repeat_on_a_moved_branch_reports_the_new_commit(hub_env, stub_repo, fork):
    """The CLI analyses the digest entry of the commit main named last time while the request re-resolving main is
    in flight (hfmem/hub/prefetch.py): when main has moved to other files, that analysis must be discarded."""
    run_cli = _cli(fork)

    _serve(hub_env, stub_repo)
    first = run_cli([QWEN, "--format", "json", "--ctx", "4k"])
    assert first.returncode == 0, first.stderr
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(SMALL), sha="d" * 40))  # main now holds another model
    hub_env.clear_log()
    moved = run_cli([QWEN, "--format", "json", "--ctx", "4k"])
    assert moved.returncode == 0, moved.stderr
    _serve(hub_env, stub_repo, SMALL)
    small = run_cli([SMALL, "--format", "json", "--ctx", "4k"])
    assert small.returncode == 0, small.stderr
    got, want, old = json.loads(moved.stdout), json.loads(small.stdout), json.loads(first.stdout)
    assert got["revision"] == "d" * 40
    assert got["parameters"] == want["parameters"] != old["parameters"]
    assert got["kv_cache"] == want["kv_cache"] != old["kv_cache"]
    # check takes the same path: its verdict is the new commit's
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN), sha="e" * 40))
    assert run_cli(["check", QWEN, "--gpu", "8GB", "--ctx", "4k"]).returncode == 1  # a 7B does not fit 8 GB
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(SMALL), sha="f" * 40))
    verdict = run_cli(["check", QWEN, "--gpu", "8GB", "--ctx", "4k"])
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr  # the 0.5B the branch now holds does
    assert verdict.stdout.replace(QWEN, SMALL) == run_cli(["check", SMALL, "--gpu", "8GB", "--ctx", "4k"]).stdout


@pytest.mark.parametrize("change", ["gated", "gone"])
@pytest.mark.parametrize("fork", [True, False], ids=["forked-read", "thread-read"])
def test_cli_repeat_reports_the_hubs_error_not_the_cached_answer(hub_env, stub_repo, change, fork):
    """A repeat run still asks the Hub: a repo that became gated or was deleted is that error (exit code and
    message as a first run gets), even though the digest could have answered."""
    run_cli = _cli(fork)

    _serve(hub_env, stub_repo)
    assert run_cli([QWEN, "--format", "json"]).returncode == 0
    fresh_home = Path(os.environ["HF_HOME"]) / "fresh"
    if change == "gated":
        _serve(hub_env, stub_repo, gated=True)
    else:
        hub_env.repos.pop(QWEN)
    repeat = run_cli([QWEN, "--format", "json"])
    # a first run: no HF cache and no hfmem digest (HFMEM_CACHE is set per test, so it must move too)
    first = run_cli([QWEN, "--format", "json"], env={"HF_HOME": str(fresh_home), "HFMEM_CACHE": str(fresh_home / "hfmem")})
    assert repeat.returncode == first.returncode != 0, (repeat.stderr, first.stderr)
    assert repeat.stdout == ""
    assert repeat.stderr == first.stderr


def test_read_runs_in_a_child_only_where_nothing_else_asks_the_hub(hub_env, stub_repo):
    """A single-threaded CLI forks a repeat run's read (Linux); a first run's stays in a thread (the parent would only
    wait for it); `check --disk` asks the Hub for the file list itself, so its read stays in a thread and both share
    one HTTP client; a process with threads of its own never forks."""
    if not prefetch.FORK:
        pytest.skip("the read runs in a thread on this platform")
    from entry import run_cli

    _serve(hub_env, stub_repo)
    code = (
        "import sys, threading\nfrom hfmem.hub import prefetch\n"
        "prefetch.start(sys.argv[1], None, None, None, fork=sys.argv[2] == 'fork')\n"
        "if sys.argv[3] == 'threaded':\n    threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
        "    prefetch.start(sys.argv[1], 'main', None, None)\n"
        "print(sorted(type(r).__name__ for r in prefetch._pending.values()))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    kinds = {}
    for run, fork, threaded in (("first", "fork", "alone"), ("repeat", "fork", "alone"), ("repeat", "nofork", "alone"),
                                ("repeat", "nofork", "threaded")):
        if run == "repeat" and not kinds.get("seen"):
            assert run_cli([QWEN, "--format", "json"]).returncode == 0
            kinds["seen"] = True
        out = subprocess.run([sys.executable, "-c", code, QWEN, fork, threaded], capture_output=True, text=True,
                             env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        kinds[run, fork, threaded] = out.stdout.strip()
    assert kinds == {"seen": True, ("first", "fork", "alone"): "['_Read']", ("repeat", "fork", "alone"): "['_ForkedRead']",
                     ("repeat", "nofork", "alone"): "['_Read']", ("repeat", "nofork", "threaded"): "['_Read', '_Read']"}


@pytest.mark.parametrize("case", ["gated", "gone", "unreachable", "server error"])
def test_forked_read_fails_as_the_thread_does(hub_env, stub_repo, tmp_path, case):
    """A repeat run whose request fails: the error raised in the forked child reaches the user as the same one line
    and exit code as a read in a thread."""
    if not prefetch.FORK:
        pytest.skip("the read runs in a thread on this platform")
    _serve(hub_env, stub_repo)
    homes = {fork: str(tmp_path / str(fork)) for fork in (True, False)}
    for fork in (True, False):
        assert _cli(fork)([QWEN, "--format", "json"], env={"HF_HOME": homes[fork]}).returncode == 0
    env = {}
    if case == "gated":
        _serve(hub_env, stub_repo, gated=True)
    elif case == "gone":
        hub_env.repos.pop(QWEN)
    elif case == "unreachable":
        env = {"HF_ENDPOINT": "http://127.0.0.1:9"}
    else:
        hub_env.fail_rate, hub_env.fail_kinds = 1.0, ("500",)  # every request answers 500 (retried, then the error)
    got = {}
    for fork in (True, False):
        out = _cli(fork)([QWEN, "--format", "json", "--timeout", "3"], env={**env, "HF_HOME": homes[fork]})
        got[fork] = (out.returncode, out.stdout, out.stderr)
    assert got[True] == got[False]
    assert got[True][0] not in (0, 1) and got[True][2].count("\n") == 1 and "Traceback" not in got[True][2], got[True]


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b"\x00garbage"),
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),  # truncated
        lambda p: p.write_text(p.read_text().replace(f'"version":{cache.VERSION},', '"version":999,', 1)),  # another format
        lambda p: p.write_text(p.read_text().replace('"BF16"', '"F32"', 1)),  # tensor data altered after writing
        lambda p: p.write_text(p.read_text().replace('"sha":"', '"sha":"e', 1)),  # someone else's entry
    ],
    ids=["garbage", "truncated", "version", "inconsistent", "foreign"],
)
def test_corrupt_entry_is_ignored_and_rewritten(hub_env, stub_repo, damage):
    spec = _serve(hub_env, stub_repo)
    first = hfmem.analyze(QWEN).to_dict()
    entry = cachedir.cache_root() / f"models--{QWEN.replace('/', '--')}" / "digests" / f"{spec.sha}.json"
    assert entry.is_file()
    damage(entry)
    assert cache.load(QWEN, spec.sha) is None
    hub_env.clear_log()
    assert hfmem.analyze(QWEN).to_dict() == first
    assert any("safetensors-metadata" in p for _, p, _ in _log(hub_env)), "headers re-read from the Hub"
    assert cache.load(QWEN, spec.sha) is not None, "entry rewritten"


def _edit_entry(path: Path, edit) -> None:
    """Change an entry's tensors and recompute its checksum, as someone who can write the cache could. ``edit`` gets
    (kinds, files): the distinct [dtype, shape, nbytes] and per file [names, kind index per tensor]."""
    import hashlib

    _, head, body = path.read_bytes().split(b"\n", 2)
    kinds, files = json.loads(body)
    edit(kinds, files)
    body = json.dumps([kinds, files], separators=(",", ":")).encode()
    path.write_bytes(hashlib.sha256(head + b"\n" + body).hexdigest().encode() + b"\n" + head + b"\n" + body)


def _first_kind(files):  # the kind of the first file's first tensor
    return files[0][1][0]


@pytest.mark.parametrize(
    "edit",
    [
        lambda k, f: k[_first_kind(f)].__setitem__(1, ["152064", "3584"]),  # string shape: once an exit 1 on every later run
        lambda k, f: k[_first_kind(f)].__setitem__(1, [-152064, 3584]),  # negative dimension
        lambda k, f: k[_first_kind(f)].__setitem__(1, [152064.5, 3584]),  # float: once 1,409,375,422.5 parameters
        lambda k, f: k[_first_kind(f)].__setitem__(2, k[_first_kind(f)][2] * 2),  # bytes that do not match shape x dtype
        lambda k, f: k[_first_kind(f)].__setitem__(0, ["BF16"]),  # dtype not a string
        lambda k, f: f[0][0].__setitem__(0, 7),  # name not a string
        lambda k, f: f[0].__setitem__(1, f[0][1][:-1]),  # names and kinds of different lengths
        lambda k, f: f[0][1].__setitem__(0, len(k)),  # a kind that does not exist
        lambda k, f: f[0][1].__setitem__(0, -1),  # a negative kind (Python would take the last one)
        lambda k, f: f[0][1].__setitem__(0, True),  # a bool kind (Python would take kind 1)
        lambda k, f: f[0][1].__setitem__(0, 0.0),  # a float kind
        lambda k, f: k.append(["BF16", [2], 4, 1]),  # a kind of four fields
    ],
    ids=["str-shape", "negative", "float", "nbytes", "dtype", "name", "ragged", "kind-range", "kind-negative",
         "kind-bool", "kind-float", "kind-fields"],
)
def test_edited_entry_with_a_valid_checksum_is_validated_and_rewritten(hub_env, stub_repo, edit):
    spec = _serve(hub_env, stub_repo)
    first = hfmem.analyze(QWEN).to_dict()
    entry = cachedir.cache_root() / f"models--{QWEN.replace('/', '--')}" / "digests" / f"{spec.sha}.json"
    _edit_entry(entry, edit)
    assert cache.load(QWEN, spec.sha) is None
    # A commit-sha run consults the digest first: it must fetch again and get the honest figure.
    assert hfmem.analyze(QWEN, revision=spec.sha).to_dict()["parameters"] == first["parameters"]
    assert cache.load(QWEN, spec.sha) is not None, "entry rewritten"


def test_edited_config_without_a_new_checksum_is_a_miss(hub_env, stub_repo):
    spec = _serve(hub_env, stub_repo)
    hfmem.analyze(QWEN)
    entry = cachedir.cache_root() / f"models--{QWEN.replace('/', '--')}" / "digests" / f"{spec.sha}.json"
    entry.write_bytes(entry.read_bytes().replace(b'"num_key_value_heads":4', b'"num_key_value_heads":28', 1))
    assert cache.load(QWEN, spec.sha) is None


def test_atomic_write_leaves_old_entry_and_no_temp_files(hub_env, stub_repo, monkeypatch):
    spec = _serve(hub_env, stub_repo)
    hfmem.analyze(QWEN)
    digests = cachedir.cache_root() / f"models--{QWEN.replace('/', '--')}" / "digests"
    before = (digests / f"{spec.sha}.json").read_bytes()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cachedir.os, "replace", boom)
    hit = cache.load(QWEN, spec.sha)
    cache.store(QWEN, spec.sha, *hit)  # a failed write does not raise ...
    assert (digests / f"{spec.sha}.json").read_bytes() == before  # ... nor touch the old entry
    assert sorted(p.name for p in digests.iterdir()) == [f"{spec.sha}.json"]


_PLAIN_NAMES = ["model.embed_tokens.weight", "lm_head.weight", "model.layers.0.mlp.experts.7.w1.weight", " ~", ""]


# each name that must be escaped on its own among plain ones, so every check of the joined path is exercised
@pytest.mark.parametrize("names", [_PLAIN_NAMES, [], *([*_PLAIN_NAMES, odd] for odd in (
    'quote"d', 'x","y', "back\\slash", "tab\tand", "\x01", "del\x7f", "ünïcödé", "\u2028"))])
def test_digest_body_is_the_json_encoders(names):
    """The tensor names go into the entry joined as they are when no name needs escaping (digest._json_names); the
    bytes are those json.dumps writes, for every name (checked against the stdlib encoder, not our own)."""
    import hashlib

    from hfmem.hub.header import FileHeader, TensorEntry

    headers = [FileHeader("a.safetensors", tuple(TensorEntry(n, "BF16", (2, 3), 6, 12, "a.safetensors") for n in names), {}),
               FileHeader("b.safetensors", (TensorEntry("plain.weight", "F32", (4,), 4, 16, "b.safetensors"),), {"format": "pt"})]
    raw = cache._encode(QWEN, "a" * 40, {"model_type": "qwen2"}, headers, None, [])
    checksum, head, body = raw.split(b"\n")
    kind_of = {("BF16", (2, 3), 12): 0, ("F32", (4,), 16): 1} if names else {("F32", (4,), 16): 0}
    table = [[d, list(s), n] for d, s, n in kind_of]
    files = [[[t.name for t in h.tensors], [kind_of[(t.dtype, t.shape, t.nbytes)] for t in h.tensors]] for h in headers]
    assert body == json.dumps([table, files], separators=(",", ":")).encode()
    assert checksum == hashlib.sha256(head + b"\n" + body).hexdigest().encode()
    assert [[t.name for t in h.tensors] for h in cache._decode(raw, QWEN, "a" * 40)[1]] == [names, ["plain.weight"]]


def test_cache_can_be_disabled(hub_env, stub_repo, monkeypatch):
    _serve(hub_env, stub_repo)
    monkeypatch.setenv("HFMEM_DISABLE_CACHE", "1")
    hfmem.analyze(QWEN)
    hub_env.clear_log()
    hfmem.analyze(QWEN)
    assert len(hub_env.requests) == 3  # config, index, one-shot headers: nothing answered from a cache
    assert not any(cachedir.cache_root().rglob("*.json"))


def test_cache_location_follows_hf_home_or_hfmem_cache(hub_env, stub_repo, monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.delenv("HFMEM_CACHE")  # conftest gives every test a private one
    assert cachedir.cache_root() == Path(constants.HF_HOME) / "hfmem"
    monkeypatch.setenv("HFMEM_CACHE", str(tmp_path / "elsewhere"))
    _serve(hub_env, stub_repo)
    hfmem.analyze(QWEN)
    assert list((tmp_path / "elsewhere").glob("models--Qwen--Qwen2-7B-Instruct/digests/*.json"))
    assert (tmp_path / "elsewhere" / "models--Qwen--Qwen2-7B-Instruct" / "refs" / "main").read_text() == hub_env.repos[QWEN].sha


# ---------------------------------------------------------------------------------------------------------------
# Start-up and linear time


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_nothing_heavy(flag):
    code = (
        "import sys\nfrom hfmem.cli import main\ntry:\n    main([%r])\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('torch', 'transformers', 'huggingface_hub', 'httpx', 'httpx2', 'tabulate',"
        " 'hfmem.model.architecture', 'hfmem.memory.kv.estimate', 'hfmem.memory.planner', 'hfmem.api')"
        " if m in sys.modules))"
    ) % flag
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_analysis_modules_do_not_import_transformers_or_torch():
    code = "import sys, hfmem.api, hfmem.hub.remote, hfmem.hub.digest, hfmem.model.normalise, hfmem.render.text\nprint(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("repo", ["tiiuae/falcon-7b-instruct", "state-spaces/mamba-2.8b-hf", "google-t5/t5-small",
                                  "openai/whisper-large-v3"])
def test_local_run_of_newly_compiled_families_imports_no_transformers(repo, stub_repo):
    """Falcon and Mamba (read-only properties: head_dim / rotary, layer_types), T5 and Whisper (the legacy
    encoder-decoder text config) are in the compiled config table: a cold local run of a header-only stub imports no
    transformers, torch or numpy, and says nothing of importing them."""
    code = (
        "import sys, io, json, contextlib\nfrom hfmem.cli import main\nout = io.StringIO()\n"
        "try:\n    with contextlib.redirect_stdout(out): main([%r, '--format', 'json'])\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "print(json.dumps([sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules),"
        " [n for n in json.loads(out.getvalue())['notes'] if 'importing transformers' in n]]))"
    ) % str(stub_repo(repo))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), HFMEM_DISABLE_CACHE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [[], []]


def test_classification_runs_the_rules_once_per_name_pattern(monkeypatch):
    """Linear time on a 139,644-tensor MoE: the name rules run per name *pattern* (layer/expert numbers replaced),
    not per tensor. Counted through _is_tower, which the rules call for every name they classify (whichever
    memoisation lands: this branch's dict or an lru_cache)."""
    from stubs import load_inventory

    names = [t[0] for t in load_inventory("moonshotai/Kimi-K2-Instruct")["tensors"]]
    assert len(names) == 139_644
    for memo in ("_memo", "_classify_pattern"):
        target = getattr(inventory, memo, None)
        if isinstance(target, dict):
            monkeypatch.setattr(inventory, memo, {})
        elif hasattr(target, "cache_clear"):
            target.cache_clear()
    calls = []
    real = inventory._is_tower
    monkeypatch.setattr(inventory, "_is_tower", lambda n: calls.append(n) or real(n))
    got = [inventory.classify_component(n, 61) for n in names]
    assert len(calls) < 200, len(calls)  # a few dozen distinct patterns, not 139,644 tensors
    assert got.count("moe_experts") > 100_000 and "mtp" not in got
    layer3 = [n for n in names if ".layers.3." in n]
    assert layer3 and {inventory.classify_component(n, 3) for n in layer3} == {"mtp"}  # the layer-number rule holds


@pytest.mark.parametrize("fork", [True, False], ids=["forked-read", "thread-read"])
def test_cli_repeat_is_one_request_offline_zero_and_imports_no_transformers(hub_env, stub_repo, fork):
    if fork and not prefetch.FORK:
        pytest.skip("the read runs in a thread on this platform")
    _serve(hub_env, stub_repo)
    code = (
        "import sys, json\nfrom hfmem.hub import prefetch\nprefetch.FORK = %r\nfrom hfmem.cli import main\n"
        "try:\n    main([%r, '--format', 'json'])\nexcept SystemExit as e:\n"
        "    assert not e.code, e.code\nprint(json.dumps(sorted(m for m in ('torch', 'transformers', 'httpx', 'httpx2',"
        " 'huggingface_hub.utils') if m in sys.modules)))"
    ) % (fork, QWEN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cold = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert cold.returncode == 0, cold.stderr
    assert len(hub_env.requests) == 3, _log(hub_env)
    # qwen2 is in the compiled config table; the HTTP stack is imported to make requests only (a first run reads in
    # a thread), and a repeat run's forked read imports it in the child alone
    http = ["httpx2" if "httpx2" in cold.stdout else "httpx", "huggingface_hub.utils"]
    assert json.loads(cold.stdout.strip().splitlines()[-1]) == sorted(http)
    for extra, requests, imported in (({}, 1, [] if fork else sorted(http)), ({"HF_HUB_OFFLINE": "1"}, 0, [])):
        hub_env.clear_log()
        warm = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env | extra, timeout=120)
        assert warm.returncode == 0, warm.stderr
        assert len(hub_env.requests) == requests, (extra, _log(hub_env))
        assert json.loads(warm.stdout.strip().splitlines()[-1]) == imported, extra
        report = lambda out: {k: v for k, v in json.loads("".join(out.splitlines(True)[:-1])).items() if k != "source"}  # noqa: E731
        assert report(warm.stdout) == report(cold.stdout), "the same report"


def test_replayed_normalisation_equals_transformers_on_every_fixture_config(fixtures_dir, tmp_path, monkeypatch):
    from hfmem.model import architecture, fast_config

    monkeypatch.setenv("HFMEM_CACHE", str(tmp_path / "c"))
    monkeypatch.setattr(fast_config, "fast_normalise", lambda config: None)  # the fallback path, for every type
    replayed, not_stored = 0, []
    for path in sorted((fixtures_dir / "configs").glob("*/*/config.json")):
        config = json.loads(path.read_text())
        if normalise.load_normalised(config) is not None:
            continue  # the same config.json under two repo names
        try:
            live, live_notes = architecture.build_architecture(config)  # transformers; stored if replayable
        except Exception:
            continue
        if normalise.load_normalised(config) is None:
            if normalise._normalise_config(config)[2] == "transformers":
                not_stored.append(path.parent.name)  # transformers would run on every repeat
            continue
        again, again_notes = architecture.build_architecture(config)  # from the replay
        assert again.to_dict() == live.to_dict(), path
        assert again.text_config == live.text_config, path
        assert again_notes == live_notes, path
        replayed += 1
    # every config transformers normalises is replayed, composites (sub_configs_defaults) and heterogeneous
    # per-layer configs (Gemma 4) included
    assert not_stored == []
    assert replayed >= 60, replayed


@pytest.mark.parametrize("repo", ["google/gemma-4-31B-it", "Qwen/Qwen3-Omni-30B-A3B-Instruct", "moonshotai/Kimi-K2.5"])
def test_fallback_normalisation_leaves_the_config_as_read_and_replays(repo, fixtures_dir, tmp_path, monkeypatch):
    """transformers edits nested dicts of what it is given (RoPE parameters, sub-config dicts): it gets a copy, so
    the config.json as read, and with it the replay cache's key, is the same after the first run, and the repeat
    is a replay (it was a miss on every run for such configs). Gemma 4 is in the compiled table now, which must not
    edit it either; the import (and this cache) still serves it under a release the table was not verified under."""
    import copy

    from hfmem.model import fast_config

    monkeypatch.setenv("HFMEM_CACHE", str(tmp_path / "c"))
    config = json.loads((fixtures_dir / "configs" / repo / "config.json").read_text())
    as_read = copy.deepcopy(config)
    if fast_config.fast_normalise(config) is not None:
        assert config == as_read
    monkeypatch.setattr(fast_config, "fast_normalise", lambda c: None)  # the import fallback and its cache
    first = normalise.normalise_config(config)
    assert first[2] == "transformers"
    assert config == as_read
    assert normalise.load_normalised(config) is not None


def test_normalisation_cache_survives_corruption(tmp_path, monkeypatch, fixtures_dir):
    from hfmem.model import architecture, fast_config

    monkeypatch.setenv("HFMEM_CACHE", str(tmp_path / "c"))
    monkeypatch.setattr(fast_config, "fast_normalise", lambda config: None)  # the fallback path's cache
    config = json.loads((fixtures_dir / "configs" / "Qwen" / "Qwen2-7B-Instruct" / "config.json").read_text())
    first = architecture.build_architecture(config)[0].to_dict()
    [entry] = (tmp_path / "c" / "configs").glob("*.json")
    entry.write_bytes(entry.read_bytes()[:100])
    assert normalise.load_normalised(config) is None
    assert architecture.build_architecture(config)[0].to_dict() == first
    assert normalise.load_normalised(config) is not None  # rewritten


def test_bulk_phases_pause_cyclic_gc_and_restore_it(monkeypatch):
    """read_model / analyze_files / attach_sections run with the cyclic collector paused (one object per tensor,
    no cycles: its re-scans of 500k survivors were half the header parse on Kimi-K3), and always restore it."""
    import gc

    from hfmem import api

    seen = []
    real = api.read_local
    monkeypatch.setattr(api, "read_local", lambda ref: seen.append(gc.isenabled()) or real(ref))
    assert gc.isenabled()
    api.analyze("fixtures/models/Qwen/Qwen2-7B-Instruct", ctx=4096)
    assert seen == [False] and gc.isenabled()
    with pytest.raises(api.HfmemError):
        api.analyze("fixtures/models/no/such-model")
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that had it off keeps it off
        api.analyze("fixtures/models/Qwen/Qwen2-7B-Instruct")
        assert not gc.isenabled()
    finally:
        gc.enable()
