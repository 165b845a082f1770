import time, pytest, hfmem
from hub_server import RepoSpec
from hfmem import errors
QWEN = "Qwen/Qwen2-7B-Instruct"

@pytest.mark.parametrize("kind", ["500", "drop"])
def test_explore(hub_env, stub_repo, kind):
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN)))
    hub_env.fail_rate = 0.2
    hub_env.fail_kinds = (kind,)
    ok = bad = 0
    t = time.monotonic()
    for i in range(15):
        try:
            r = hfmem.analyze(QWEN, timeout=30)
            assert r.parameters.total == 7_615_616_512
            ok += 1
        except errors.HfmemError as e:
            bad += 1; print("ERR", type(e).__name__, e.message)
        # fresh cache each time? not needed
    print(kind, ok, bad, time.monotonic() - t, len(hub_env.requests), sum(1 for r in hub_env.requests if r.injected))

def test_stall(hub_env, stub_repo):
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN)))
    hub_env.stall_paths = {"config.json"}
    t = time.monotonic()
    with pytest.raises(errors.NetworkError) as ei:
        hfmem.analyze(QWEN, timeout=2)
    print("stall", time.monotonic() - t, ei.value.message)

def test_truncate(hub_env, stub_repo):
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN)))
    hub_env.truncate_paths = {"safetensors-metadata"}
    t = time.monotonic()
    with pytest.raises(errors.HfmemError) as ei:
        hfmem.analyze(QWEN, timeout=10)
    print("trunc", time.monotonic() - t, type(ei.value).__name__, ei.value.message)

def test_429(hub_env, stub_repo):
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN)))
    hub_env.rate_limit_once = {"safetensors-metadata", "config.json"}
    t = time.monotonic()
    r = hfmem.analyze(QWEN, timeout=10)
    print("429", time.monotonic() - t, [(x.method, x.path[-30:], x.status, round(x.started-t,2)) for x in hub_env.requests])
