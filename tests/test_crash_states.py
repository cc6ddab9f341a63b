"""The crash-state checker (benchmarks/crash_states.py): its model of what a power loss keeps.

The fast tests trace small programs whose durability is known and check the states the
checker builds from them; the slow test runs the checker on the store's real write path.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "crash_states", Path(__file__).parent.parent / "benchmarks" / "crash_states.py"
)
assert _SPEC is not None and _SPEC.loader is not None
cs: ModuleType = importlib.util.module_from_spec(_SPEC)
sys.modules["crash_states"] = cs  # dataclasses look their module up while it loads
_SPEC.loader.exec_module(cs)

# Three ways to write a file: durably (data and name flushed), with no flush at all, and in a
# new directory whose own name is never flushed (libgit2's objects/xx before gitmem fixed it).
PROGRAM = """
import os, sys
root = sys.argv[1]
def write(path, data, flush):
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    if flush:
        os.fsync(fd)
    os.close(fd)
    os.rename(path + ".tmp", path)
def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
write(root + "/safe", b"safe data", True)
fsync_dir(root)
os.access(root + "/ACK-1", os.F_OK)
write(root + "/unsafe", b"unsafe data", False)
os.access(root + "/ACK-2", os.F_OK)
os.mkdir(root + "/sub")
write(root + "/sub/inner", b"inner data", True)
fsync_dir(root + "/sub")
os.access(root + "/ACK-3", os.F_OK)
fd = os.open(root + "/old", os.O_WRONLY | os.O_APPEND)
os.write(fd, b" appended")
os.close(fd)
"""


def trace(tmp_path: Path, program: str) -> Any:
    """The recording of ``program`` run on a fresh root holding one durable file."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "old").write_bytes(b"old data")
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(program))
    out = tmp_path / "trace"
    before = cs._Model(root)
    command = ["strace", "-f", "-qq", "-y", "-xx", "-s", "65536", "-e"]
    command += [f"trace={cs._SYSCALLS}", "-o", str(out), sys.executable, str(script), str(root)]
    subprocess.run(command, check=True)
    return cs.record(out.read_text("latin-1"), root, before)


def final_states(rec: Any, random_subsets: int = 0) -> list[Any]:
    states = list(cs.crash_states(rec, random_subsets))
    last = max(s.event for s in states)
    return [s for s in states if s.event == last]


def test_only_flushed_data_and_names_survive_every_crash(tmp_path: Path) -> None:
    rec = trace(tmp_path, PROGRAM)
    assert [n for _, n in rec.acks] == [1, 2, 3]
    states = final_states(rec, random_subsets=10)
    assert all(s.acked == 3 for s in states)
    # Flushed data under a flushed name: in every state.
    assert all(s.files.get("safe") == b"safe data" for s in states)
    # The old file's unflushed append may be kept or lost, but nothing else.
    assert {s.files["old"] for s in states} == {b"old data", b"old data appended"}
    # A rename without flushes: the name may be missing, or present with its data lost.
    unsafe = {s.files.get("unsafe") for s in states}
    assert {None, b"", b"unsafe data"} <= unsafe
    # A directory flushed inside but never named durably can vanish with its flushed file.
    assert any("sub/" not in s.files for s in states)
    assert any(s.files.get("sub/inner") == b"inner data" for s in states)
    # With everything kept, the state is what the program left.
    everything = {s.how: s for s in states}["all"]
    assert everything.files == {
        "safe": b"safe data",
        "unsafe": b"unsafe data",
        "sub/": b"",
        "sub/inner": b"inner data",
        "old": b"old data appended",
    }


def test_a_crash_before_a_flush_keeps_only_what_earlier_flushes_made_durable(
    tmp_path: Path,
) -> None:
    rec = trace(tmp_path, PROGRAM)
    states = list(cs.crash_states(rec, 0))
    first = min(s.event for s in states)
    earliest = [s for s in states if s.event == first]
    # The first flush is of the safe file's data, before its rename: no state has the name yet,
    # and none lacks the old file, which was durable before the run.
    assert all(s.acked == 0 for s in earliest)
    assert all("safe" not in s.files and s.files["old"] == b"old data" for s in earliest)
    assert {s.files.get("safe.tmp") for s in earliest} == {None, b"", b"safe data"}
    # States are distinct.
    digests = [s.digest() + str(s.acked) for s in states]
    assert len(digests) == len(set(digests))


# The redo log's pattern: a record written with pwrite past the end of the file (extending it)
# or inside it, made durable by fdatasync alone.
LOG_PROGRAM = """
import os, sys
root = sys.argv[1]
fd = os.open(root + "/old", os.O_RDWR)
os.pwrite(fd, b"REC1", 12)
os.fdatasync(fd)
os.access(root + "/ACK-1", os.F_OK)
os.pwrite(fd, b"REC2", 2)
os.close(fd)
"""


def test_pwrite_inside_and_past_the_end_is_durable_after_fdatasync_only(tmp_path: Path) -> None:
    rec = trace(tmp_path, LOG_PROGRAM)
    states = final_states(rec, random_subsets=0)
    # The extending record survives every crash after its fdatasync; the later one may not.
    assert {s.files["old"] for s in states} == {
        b"old data\0\0\0\0REC1",
        b"olREC2ta\0\0\0\0REC1",
    }
    first = [s for s in cs.crash_states(rec, 0) if s.event == min(at for at, _ in rec.flushes)]
    assert {s.files["old"] for s in first} == {b"old data", b"old data\0\0\0\0REC1"}


def test_a_power_loss_while_writes_pack_loose_objects_loses_nothing(tmp_path: Path) -> None:
    # Checkpoints publish the log's objects as loose files; maintenance packs them, then
    # removes them unflushed. Its pack's names must be durable first, in both directories of
    # their renames: no write's syncfs covers them any more.
    result = cs.run(writes=2, random_subsets=0, base=tmp_path, maintain=True)
    assert result.flushes > 2  # the pack's fsyncs are in the trace
    assert result.failures == []


def test_the_checker_finds_the_losses_a_store_without_recovery_would_have(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem.git import flush as git_flush
    from gitmem.git.redo import RedoLog
    from gitmem.git.repo import GitRepo

    if not git_flush.default_mode().logged:
        pytest.skip("the redo log needs syncfs and a boot id (Linux)")
    # A gitmem that neither recovers after the (simulated) reboot nor reads the redo log (as an
    # older version, or plain git, would) loses acknowledged writes: the checker must see it.
    real_check = cs.check

    def blind_check(*args: Any) -> Any:
        with monkeypatch.context() as blind:
            blind.setattr(GitRepo, "recover", lambda self: None)
            blind.setattr(RedoLog, "view", lambda self, force=False: None)
            return real_check(*args)

    monkeypatch.setattr(cs, "check", blind_check)
    result = cs.run(writes=1, random_subsets=0, base=tmp_path)
    assert result.failures != []


def test_materialize_writes_the_state(tmp_path: Path) -> None:
    state = cs.CrashState(1, 0, {"a/": b"", "a/b": b"x", "c": b""}, "all")
    cs.materialize(state, tmp_path / "out")
    assert (tmp_path / "out" / "a" / "b").read_bytes() == b"x"
    assert (tmp_path / "out" / "c").read_bytes() == b""
    assert (tmp_path / "out" / "a").stat().st_mode & 0o777 == 0o700


def test_a_power_loss_at_any_moment_of_a_write_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    # Before the write path flushed objects/ itself, a new objects/xx directory could vanish
    # with the objects in it while the ref that names them survived. Since the redo log, the
    # objects and the ref are never flushed by a write: every state is recovered from the log.
    # Since its version 2 a write touches nothing else (a few states: the record kept or not).
    result = cs.run(writes=1, random_subsets=0, base=tmp_path)
    assert result.states >= 3
    assert result.failures == []


@pytest.mark.slow
def test_every_crash_state_of_the_write_path_is_clean(tmp_path: Path) -> None:
    result = cs.run(writes=5, random_subsets=10, base=tmp_path)
    print(f"{result.states} crash states checked, {len(result.failures)} failed")
    # Since redo log version 2 a write changes nothing but its record: few states per write.
    assert result.states > 20
    assert result.failures == []


@pytest.mark.slow
def test_a_power_loss_while_the_log_fills_and_is_resized_loses_nothing(tmp_path: Path) -> None:
    # A log of one block, checkpointed and resized every few writes. It found that rewriting an
    # object already loose (a rename over a durable file of an unflushed copy) could lose it.
    result = cs.run(writes=6, random_subsets=0, base=tmp_path, small=True)
    assert result.flushes > 6  # the checkpoints' flushes are in the trace
    assert result.failures == []
