"""A large local folder's shards are parsed half in a forked child (hfmem.hub.split_read): the files read, and the
first error with its message and exit code, must be exactly those of the serial read, whichever shard fails and
whatever the child does."""

from __future__ import annotations

import json
import os
import struct

import pytest
from stubs import fixture_repo_ids, load_inventory

from hfmem.errors import HfmemError
from hfmem.hub import forked, local, split_read

pytestmark = pytest.mark.skipif(not split_read.FORK, reason="the child is forked on Linux only")

# every sharded fixture of under 40k tensors (the larger ones only make this slower, not different)
def _sharded(repo_id: str) -> bool:
    tensors = load_inventory(repo_id)["tensors"]
    return len({t[3] for t in tensors}) > 1 and len(tensors) < 40_000


SHARDED = [r for r in fixture_repo_ids() if _sharded(r)]


@pytest.fixture(autouse=True)
def _two_cpus(monkeypatch):
    """The split read runs (correctly, if not faster) wherever these tests do, a one-CPU runner included, and in a
    test process that earlier tests left with idle daemon threads (local hubs waiting on their sockets), which would
    otherwise keep it serial: the child only parses shard headers and pickles them, taking no lock those threads hold."""
    monkeypatch.setattr(split_read, "_cores", lambda: 2)
    monkeypatch.setattr(split_read.threading, "active_count", lambda: 1)


@pytest.fixture
def modes(monkeypatch):
    """read(folder, split): read_local serially, or with every index large enough to fork; split reads record what
    their child answered (headers, or None for a failure)."""
    answers: list[object] = []
    real = split_read.ShardChild.result

    def result(self):
        got = real(self)
        answers.append(got)
        return got

    monkeypatch.setattr(split_read.ShardChild, "result", result)

    def read(folder, split: bool):
        monkeypatch.setattr(split_read, "FORK", split)
        monkeypatch.setattr(split_read, "MIN_INDEX_BYTES", 0 if split else 10**12)
        try:
            return local.read_local(str(folder))
        finally:
            monkeypatch.setattr(split_read, "FORK", True)

    read.answers = answers  # type: ignore[attr-defined]
    return read


def _outcome(read, folder, split: bool):
    try:
        return ("files", read(folder, split))
    except HfmemError as exc:
        return ("error", type(exc), str(exc), exc.exit_code)


def test_many_sharded_fixtures_qualify():
    assert len(SHARDED) >= 25


@pytest.mark.parametrize("repo_id", SHARDED)
def test_split_read_gives_the_serial_files(repo_id, stub_repo, modes):
    folder = stub_repo(repo_id)
    serial = modes(folder, False)
    assert modes.answers == []
    split = modes(folder, True)
    assert len(modes.answers) == 1 and modes.answers[0], "the child did not answer with headers"
    assert split == serial
    # the child's entries are rebuilt with the same values, not merely equal objects in a different order
    assert [[(t.name, t.dtype, t.shape, t.numel, t.nbytes, t.file) for t in h.tensors] for h in split.headers] == [
        [(t.name, t.dtype, t.shape, t.numel, t.nbytes, t.file) for t in h.tensors] for h in serial.headers]


def _copy(src, dest):
    dest.mkdir()
    for p in src.iterdir():
        (dest / p.name).write_bytes(p.read_bytes())
    return dest


def _shards(folder):
    return sorted(p.name for p in folder.glob("*.safetensors"))


def _break(path, how: str):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    if how == "json":
        path.write_bytes(data[:8] + b"{" * n)
    elif how == "offsets":
        name = next(k for k in header if k != "__metadata__")
        header[name]["data_offsets"][1] += 1
        raw = json.dumps(header).encode()
        path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    elif how == "truncated":
        path.write_bytes(data[: 8 + n // 2])
    elif how == "missing":
        path.unlink()
    elif how == "directory":
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize("how", ["json", "offsets", "truncated", "missing", "directory"])
@pytest.mark.parametrize("where", ["parent", "child", "both", "last"])
def test_a_malformed_shard_fails_as_in_the_serial_read(tmp_path, stub_repo, modes, how, where):
    folder = _copy(stub_repo("Qwen/Qwen3-32B"), tmp_path / "m")
    shards = _shards(folder)
    child_from = split_read._split_point(folder, shards)
    assert 2 < child_from < len(shards) - 4
    picks = {"parent": [1], "child": [child_from + 2], "both": [child_from + 3, 2], "last": [len(shards) - 1]}[where]
    for i in picks:
        _break(folder / shards[i], how)
    serial = _outcome(modes, folder, False)
    split = _outcome(modes, folder, True)
    assert serial[0] == "error" and split == serial
    assert serial[3] in (14, 16, 17)
    if where in ("child", "last") and how != "missing":  # (a missing shard changes the listing: no child)
        assert modes.answers == [None]  # the child failed, and its shards were read again here
    # the error named is the first broken shard in order, wherever it was read
    assert shards[min(picks)] in serial[2]


def test_a_listing_other_than_the_index_reads_serially(tmp_path, stub_repo, modes):
    folder = _copy(stub_repo("Qwen/Qwen3-32B"), tmp_path / "m")
    extra = folder / "consolidated.safetensors"
    extra.write_bytes((folder / _shards(folder)[0]).read_bytes())
    serial = modes(folder, False)
    split = modes(folder, True)
    assert split == serial  # (the index does not name the extra file, so neither read opens it)
    assert modes.answers == []  # the child's answer was not taken


def test_a_child_that_dies_is_read_again_here(tmp_path, stub_repo, modes, monkeypatch):
    folder = stub_repo("Qwen/Qwen3-32B")
    serial = modes(folder, False)

    def die(fd, fn, quiet_stderr):
        os._exit(3)

    monkeypatch.setattr(forked, "_child", die)
    split = modes(folder, True)
    assert modes.answers == [None]
    assert split == serial


def test_a_child_error_is_read_again_here(tmp_path, stub_repo, modes, monkeypatch):
    """The child's failure is never raised from its pickle: the parent's own serial read raises it (filled in by
    read_local like any other)."""
    folder = _copy(stub_repo("Qwen/Qwen3-32B"), tmp_path / "m")
    shards = _shards(folder)
    _break(folder / shards[-1], "offsets")
    serial = _outcome(modes, folder, False)
    split = _outcome(modes, folder, True)
    assert modes.answers == [None] and split == serial


def test_no_fork_with_other_threads(stub_repo, modes, monkeypatch):
    monkeypatch.setattr(split_read.threading, "active_count", lambda: 2)
    folder = stub_repo("Qwen/Qwen3-8B")
    assert modes(folder, True) == modes(folder, False)
    assert modes.answers == []


def test_no_fork_on_one_cpu(stub_repo, modes, monkeypatch):
    monkeypatch.setattr(split_read, "_cores", lambda: 1)
    folder = stub_repo("Qwen/Qwen3-8B")
    assert modes(folder, True) == modes(folder, False)
    assert modes.answers == []


def test_the_child_is_reaped(stub_repo, modes, monkeypatch):
    pids = []
    real = split_read.ShardChild.close

    def close(self):
        pids.append(self.pid)
        real(self)

    monkeypatch.setattr(split_read.ShardChild, "close", close)
    modes(stub_repo("Qwen/Qwen3-8B"), True)
    assert pids
    for pid in pids:
        with pytest.raises(ChildProcessError):  # no such child any more: reaped, not a zombie
            os.waitpid(pid, os.WNOHANG)
