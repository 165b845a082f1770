"""hfmem against the local Hub with injected faults: retries give exact answers, stalls time out on time,
truncation is an error (never a wrong number), 429s wait for Retry-After, and a 200-repo batch survives its failures.
"""

from __future__ import annotations

import json
import random
import shutil
import time

import pytest

import hfmem
from hfmem import errors
from hfmem.api import analyze_many
from hfmem.batch import InternalError, run_many
from hfmem.hub.retry import DeadlineExceeded, RetryPolicy, call_with_retries, is_transient
from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec

QWEN = "Qwen/Qwen2-7B-Instruct"  # sharded: 4 shards
SMALL = "Qwen/Qwen2-0.5B-Instruct"  # one model.safetensors
TOTALS = {QWEN: 7_615_616_512, SMALL: 494_032_768}  # Hub safetensors totals of the real repos


@pytest.fixture(autouse=True)
def settle_abandoned_attempts(request):
    """Attempts abandoned at a deadline (the point of it) keep running inside the client, which retries with sleeps
    of 1-8 s and calls close_session() on connection errors: that would break the *next* test's requests. After
    each test (autouse: torn down after hub_env, so the hub is stopped and they fail fast), make the client's sleeps
    short and wait for those threads to end."""
    yield
    if "hub_env" not in request.fixturenames:
        return
    import threading
    import types

    import huggingface_hub.file_download as file_download
    import huggingface_hub.utils._http as http

    fast = types.SimpleNamespace(sleep=lambda s: time.sleep(min(s, 0.02)))
    saved = http.time, file_download.time
    http.time = file_download.time = fast
    try:
        for thread in threading.enumerate():
            if thread.name == "hfmem-hub-call":
                thread.join(timeout=15)

    finally:
        http.time, file_download.time = saved


def _serve(hub, stub_repo, repo, name=None, **spec):
    name = name or repo
    hub.add_repo(name, RepoSpec(root=stub_repo(repo), **spec))
    return hub.repos[name]


# ---------------------------------------------------------------------------------------------------- retry unit


class _Status(Exception):
    def __init__(self, status, headers=None):
        super().__init__(f"HTTP {status}")
        self.response = type("R", (), {"status_code": status, "headers": headers or {}})()


def test_retry_backoff_is_bounded_and_honours_retry_after():
    waits, calls = [], []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise _Status(429, {"Retry-After": "3"})
        if len(calls) < 4:
            raise _Status(503)
        return "ok"

    policy = RetryPolicy(attempts=4, base_s=0.5, max_wait_s=0.8, jitter=0.0)
    assert call_with_retries(flaky, deadline_s=60, policy=policy, sleep=waits.append) == "ok"
    assert waits == [3.0, 0.8, 0.8]  # Retry-After exactly, then capped exponential backoff

    calls.clear()
    with pytest.raises(_Status):  # attempts are bounded: the 4th failure is raised
        call_with_retries(lambda: (calls.append(1), (_ for _ in ()).throw(_Status(500)))[1], deadline_s=60, policy=policy, sleep=lambda s: None)
    assert len(calls) == 4

    with pytest.raises(_Status):  # a 404 is an answer, not a hiccup: no retry
        call_with_retries(lambda: (_ for _ in ()).throw(_Status(404)), deadline_s=60, policy=policy, sleep=waits.append)


def test_retry_deadline_abandons_a_stalled_attempt():
    import threading

    release = threading.Event()
    start = time.monotonic()
    try:
        with pytest.raises(DeadlineExceeded):
            call_with_retries(lambda: release.wait(30), deadline_s=0.5)
        assert time.monotonic() - start < 2
    finally:
        release.set()  # let the abandoned attempt end


def test_transient_classification():
    import httpx2

    assert is_transient(httpx2.RemoteProtocolError("peer closed connection"))
    assert is_transient(httpx2.ConnectError("connection refused"))
    assert is_transient(httpx2.ReadTimeout("slow"))
    assert is_transient(_Status(502)) and is_transient(_Status(429))
    assert not is_transient(_Status(401)) and not is_transient(_Status(404))
    assert not is_transient(ValueError("bug"))


# ----------------------------------------------------------------------------------------- faults through the Hub


def test_twenty_percent_5xx_and_drops_still_give_exact_answers(hub_env, stub_repo, caplog):
    # LocalHub draws each request's fault on its own (hub_server.LocalHub._injected_fault), so a seed fixes which
    # requests fail, the same in every run. With 4 attempts an operation gives up when 4 draws in a row hit (0.2**4
    # each, about 1 seed in 10 over these ~60 operations: a real outcome, not a bug); under seed 20 none does, and
    # two requests only get through at their 4th and last attempt, so the whole retry budget is exercised.
    hub_env.fault_seed = 20
    refs = []
    for i in range(24):
        repo = (QWEN, SMALL)[i % 2]
        refs.append(f"faults{i}/{repo.split('/')[1]}")
        _serve(hub_env, stub_repo, repo, refs[-1])
    hub_env.fail_rate, hub_env.fail_kinds = 0.2, ("500", "drop")
    results = analyze_many(refs, jobs=6, timeout=60)
    for ref, result in zip(refs, results):
        assert not isinstance(result, Exception), str(result)  # the message starts with the ref already
        assert result.parameters.total == TOTALS[QWEN if "7B" in ref else SMALL]
        assert result.revision == hub_env.repos[ref].sha
    injected = [r.injected for r in hub_env.requests if r.injected]
    assert injected.count("500") >= 3 and injected.count("drop") >= 3, injected  # the faults really happened
    streak: dict[tuple, int] = {}  # faults in a row of each request (method, path, query, Range)
    longest = 0
    for r in hub_env.requests:
        key = (r.method, r.path, r.query, r.range)
        streak[key] = streak.get(key, 0) + 1 if r.injected else 0
        longest = max(longest, streak[key])
    assert longest == 3, longest  # some request failed 3 times and the 4th attempt answered
    per_repo = len(hub_env.requests) / len(refs)
    assert per_repo < 8, "retries are bounded"
    # The client's own "Retrying in 1s" warnings stay off stderr (one line per error is the contract).
    assert [r for r in caplog.records if r.name.startswith("huggingface_hub")] == []


def test_persistent_5xx_is_a_server_error_after_bounded_retries(hub_env, stub_repo):
    _serve(hub_env, stub_repo, QWEN)
    hub_env.fail_rate, hub_env.fail_kinds = 1.0, ("500",)
    start = time.monotonic()
    # huggingface_hub's own HEAD retries sleep 1, 2, 4, 8 s: the deadline cuts them short, the cause is kept.
    with pytest.raises(errors.ServerError, match="HTTP 500"):
        hfmem.analyze(QWEN, timeout=4)
    assert time.monotonic() - start < 4 + 1
    assert 2 <= len(hub_env.requests) <= 20


@pytest.mark.parametrize("path", ["config.json", "safetensors-metadata"])
def test_stalled_server_times_out_within_the_configured_time(hub_env, stub_repo, path):
    _serve(hub_env, stub_repo, QWEN)
    hub_env.stall_paths, hub_env.stall_s = {path}, 60
    start = time.monotonic()
    with pytest.raises(errors.NetworkError, match=r"timed out.*within 1.5 s"):
        hfmem.analyze(QWEN, timeout=1.5)
    elapsed = time.monotonic() - start
    assert 1.4 < elapsed < 1.5 + 3.0, elapsed  # slack for a loaded CI machine; the client alone would take 60 s+


def test_stall_through_the_cli_default_timeout_from_env(hub_env, stub_repo, cli):
    _serve(hub_env, stub_repo, QWEN)
    hub_env.stall_paths, hub_env.stall_s = {"config.json"}, 60
    start = time.monotonic()
    out = cli([QWEN], env={"HF_HUB_DOWNLOAD_TIMEOUT": "2"})
    assert out.returncode == 19 and "within 2 s" in out.stderr, out.stderr
    assert time.monotonic() - start < 2 + 8  # interpreter start-up included
    out = cli([QWEN, "--timeout", "1"])
    assert out.returncode == 19 and "within 1 s" in out.stderr


@pytest.mark.parametrize(
    "truncate, revision",
    [("safetensors-metadata", None), ("model-00001-of-00004.safetensors", "v1"), ("index.json", "v1")],
)
def test_truncated_responses_are_errors_not_wrong_numbers(hub_env, stub_repo, truncate, revision):
    spec = _serve(hub_env, stub_repo, QWEN)
    spec.revisions["v1"] = ("b" * 40, spec.root)
    hub_env.truncate_paths = {truncate}
    with pytest.raises(errors.HfmemError) as info:
        hfmem.analyze(QWEN, revision=revision, timeout=30)
    assert isinstance(info.value, (errors.NetworkError, errors.MalformedHeader)), info.value
    assert "truncated" in info.value.message or "incomplete" in info.value.message or "JSON" in info.value.message


def test_header_truncated_at_rest_is_a_malformed_header(hub_env, stub_repo, tmp_path):
    folder = tmp_path / "cut"
    shutil.copytree(stub_repo(SMALL), folder)
    raw = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(raw[: len(raw) // 2])
    hub_env.add_repo("cut/model", RepoSpec(root=folder))
    with pytest.raises(errors.MalformedHeader, match="model.safetensors"):
        hfmem.analyze("cut/model")
    with pytest.raises(errors.MalformedHeader, match="model.safetensors"):
        hfmem.analyze(str(folder))


def test_rate_limit_waits_for_retry_after(hub_env, stub_repo):
    _serve(hub_env, stub_repo, QWEN)
    hub_env.rate_limit_once = {"safetensors-metadata"}
    report = hfmem.analyze(QWEN, timeout=30)
    assert report.parameters.total == TOTALS[QWEN]
    meta = [r for r in hub_env.requests if "safetensors-metadata" in r.path]
    assert [r.status for r in meta] == [429, 200]
    assert meta[1].started - meta[0].started >= 0.95  # Retry-After: 1


def test_rate_limit_longer_than_the_deadline_is_reported(hub_env, stub_repo):
    _serve(hub_env, stub_repo, QWEN)
    hub_env.rate_limit_once = {"safetensors-metadata"}
    with pytest.raises(errors.RateLimited, match="429"):
        hfmem.analyze(QWEN, timeout=0.8)  # Retry-After 1 s does not fit in 0.8 s


def test_unreachable_hub_is_a_network_error_on_time(hub_env, stub_repo, monkeypatch):
    from huggingface_hub import constants

    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = f"http://127.0.0.1:{port}"
    monkeypatch.setattr(constants, "ENDPOINT", dead)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", dead + "/{repo_id}/resolve/{revision}/{filename}")
    from huggingface_hub import hf_api

    monkeypatch.setattr(hf_api.api, "endpoint", dead)
    start = time.monotonic()
    with pytest.raises(errors.NetworkError, match=f"127.0.0.1:{port}"):
        hfmem.analyze(QWEN, timeout=3)
    assert time.monotonic() - start < 3 + 1.5


def test_network_error_suggests_offline_mode_when_cached(hub_env, stub_repo, tmp_path, monkeypatch):
    from huggingface_hub import constants, snapshot_download

    _serve(hub_env, stub_repo, SMALL)
    snapshot_download(SMALL)  # the whole (header-only) repo into the cache
    hub_env.stall_paths, hub_env.stall_s = {"/"}, 60  # every request stalls
    with pytest.raises(errors.NetworkError, match="HF_HUB_OFFLINE=1"):
        hfmem.analyze(SMALL, timeout=1)
    hub_env.stall_paths = set()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub_env.clear_log()
    report = hfmem.analyze(SMALL)
    assert report.parameters.total == TOTALS[SMALL] and report.source == "cache"
    assert report.revision == hub_env.repos[SMALL].sha and report.repo == SMALL
    assert hub_env.requests == []  # offline means offline


# ------------------------------------------------------------------------------------------------------ batches


def test_batch_of_200_with_failing_repos(hub_env, stub_repo, tmp_path):
    rng = random.Random(7)
    broken = tmp_path / "broken"
    shutil.copytree(stub_repo(SMALL), broken)
    (broken / "model.safetensors").write_bytes((2**40).to_bytes(8, "little") + b"{}")
    nocfg = tmp_path / "nocfg"
    shutil.copytree(stub_repo(SMALL), nocfg)
    (nocfg / "config.json").unlink()
    badcfg = tmp_path / "badcfg"
    shutil.copytree(stub_repo(SMALL), badcfg)
    cfg = json.loads((badcfg / "config.json").read_text())
    (badcfg / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": -3}))
    failing = {
        "missing": (None, errors.RepoNotFound),
        "gated": ("gated", errors.GatedRepo),
        "header": (broken, errors.MalformedHeader),
        "noconfig": (nocfg, errors.NoConfig),
        "config": (badcfg, errors.MalformedConfig),
    }
    refs, expected = [], []
    for i in range(200):
        if i % 10 == 3:  # 10 % failing repos, of five kinds
            kind = list(failing)[(i // 10) % len(failing)]
            root, err = failing[kind]
            ref = f"fail{i}/{kind}"
            if root == "gated":
                _serve(hub_env, stub_repo, SMALL, ref, gated=True)
            elif root is not None:
                hub_env.add_repo(ref, RepoSpec(root=root))
            refs.append(ref)
            expected.append(err)
        else:
            repo = rng.choice((QWEN, SMALL))
            ref = f"ok{i}/{repo.split('/')[1]}"
            _serve(hub_env, stub_repo, repo, ref)
            refs.append(ref)
            expected.append(TOTALS[repo])
    hub_env.fail_rate = 0.05
    start = time.monotonic()
    results = analyze_many(refs, jobs=8, timeout=60)
    assert time.monotonic() - start < 120
    assert len(results) == 200
    for ref, want, got in zip(refs, expected, results):
        if isinstance(want, int):
            assert not isinstance(got, Exception), f"{ref}: {got}"
            assert got.parameters.total == want and got.repo == ref and got.revision == hub_env.repos[ref].sha
        else:
            assert type(got) is want, f"{ref}: {got!r}"
            assert ref in got.message


def test_analyze_many_keeps_order_and_contains_bugs():
    def fn(ref, **kw):
        time.sleep(0.01 * (5 - int(ref)))
        if ref == "2":
            raise ZeroDivisionError("boom hf_abcdefghijklmnopqrstuvwxyz")
        if ref == "3":
            raise errors.RepoNotFound("3 not found")
        return int(ref) * 10

    out = run_many(["0", "1", "2", "3", "4"], jobs=3, fn=fn)
    assert out[:2] == [0, 10] and out[4] == 40
    assert isinstance(out[2], InternalError) and out[2].exit_code == 1 and "hf_abc" not in out[2].message
    assert isinstance(out[3], errors.RepoNotFound)
    assert analyze_many([], jobs=4) == []
    with pytest.raises(ValueError):
        analyze_many(["x"], jobs=0)
