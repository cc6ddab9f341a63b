"""Crashes and full disks: a killed writer loses no acknowledged write and wedges nobody.

Workers are separate processes (see ``helpers_proc``); the tests SIGKILL them at random moments
or at fault-injection points, then check the store with a tool in the test's own process.
Run the long variants with ``pytest -m slow -s tests/test_durability.py`` (``-s`` shows the
counts).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import helpers_proc as hp
import pygit2
import pytest
from anthropic.lib.tools import ToolError
from helpers_repo import published

import gitmem
from gitmem import MemoryStore
from gitmem.crypto import KdfParams
from gitmem.errors import ConflictError, IntegrityError, NoStore, StorageError
from gitmem.git import config as git_config
from gitmem.git import files as git_files
from gitmem.git import flush as git_flush
from gitmem.git import objects as git_objects
from gitmem.git import wal
from gitmem.git.lock import LOCK_FILE
from gitmem.git.redo import RedoLog
from gitmem.git.refs import BRANCH, META_REF
from gitmem.git.repo import GitRepo
from gitmem.highwater import HighWater
from gitmem.limits import Limits
from gitmem.paths import parse

# Each test runs in every write mode of the platform (tests/conftest.py, write_mode).
pytestmark = pytest.mark.usefixtures("write_mode")

NO_SPACE = (
    "Error: gitmem's storage failed (No space left on device); the memory is unchanged "
    "unless a later view shows otherwise"
)
_TIMEOUT = 60.0


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = _TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


def sigkill(process: BaseProcess) -> int | None:
    process.kill()  # SIGKILL, unless it has already exited
    process.join(_TIMEOUT)
    return process.exitcode


def errors(acks: list[str]) -> list[str]:
    return [line for line in acks if line.startswith("error ")]


# -- a writer killed at random moments -----------------------------------------------------


@dataclass
class KillRun:
    """What the kill loop did."""

    kills: int = 0
    acked: set[int] = field(default_factory=set)
    in_flight: set[int] = field(default_factory=set)
    before_first_write: int = 0
    stale_ref_locks: int = 0


def kill_loop(repo: Path, key: str, tmp: Path, kills: int, rng: random.Random) -> KillRun:
    ctx, env, run = hp.context(), hp.worker_env(key), KillRun()
    for r in range(kills):
        ack_path = tmp / f"acks-{r}"
        first = 1000 * (r + 1)
        process = ctx.Process(
            target=hp.writer, args=(str(repo), env, str(ack_path), first, 999), daemon=True
        )
        process.start()
        if r % 2 == 0:
            # Half the kills land mid-stream, after this writer has shown that writing works
            # again after the previous kill...
            started = str(first)
            wait_for(
                lambda: started in hp.read_acks(ack_path),  # noqa: B023 (called right here)
                f"run {r}'s first write",
            )
            time.sleep(rng.uniform(0.0, 0.25))
        else:
            # ...the other half at any moment from the start, opening the store included.
            time.sleep(rng.uniform(0.0, 0.4))
        code = sigkill(process)
        acks = hp.read_acks(ack_path)
        assert not errors(acks), (r, errors(acks))
        assert code == -signal.SIGKILL, (r, code, acks[-3:])
        done = [int(line) for line in acks if line.isdigit()]
        assert done == list(range(first, first + len(done))), r
        run.kills += 1
        run.acked.update(done)
        run.in_flight.add(first + len(done))
        run.before_first_write += not done
        run.stale_ref_locks += (repo / (BRANCH + ".lock")).exists()
    return run


def check_after_kills(tool: gitmem.GitMemoryTool, run: KillRun) -> set[int]:
    """Check the store against what the writers acknowledged; the writes present."""
    files = tool.store.files()
    log = files.pop(hp.LOG).splitlines()
    entries = [int(line.removeprefix("entry ")) for line in log]
    assert log == [f"entry {i}" for i in entries]
    made = {int(Path(p).stem) for p in files}
    for i in made:
        assert files.pop(f"/memories/w/{i}.md") == hp.stream_text(i), i
    assert files == {}
    assert len(entries) == len(set(entries)), "an insert landed twice"
    assert entries == sorted(entries, reverse=True), "the log lost its order"
    assert all(i % 2 == 0 for i in made) and all(i % 2 == 1 for i in entries)
    present = made | set(entries)
    assert not run.acked - present, f"acknowledged writes lost: {sorted(run.acked - present)}"
    assert not present - run.acked - run.in_flight, "a write no one attempted"
    ops = list(tool.store.log())
    assert len(ops) == 1 + len(present), "not one commit per write"  # 1: the log's creation
    assert [op.seq for op in ops] == list(range(len(ops), 0, -1))
    assert all(op.parents == (parent.commit,) for op, parent in itertools.pairwise(ops))
    report = tool.store.verify()
    assert report.ok, report.problems
    assert report.commits == len(ops)
    return present


def kill_test(repo: Path, key: str, tmp: Path, kills: int) -> None:
    seed = random.randrange(1 << 32)
    tool = gitmem.GitMemoryTool(repo, key=key, session="parent")
    tool.call({"command": "create", "path": hp.LOG, "file_text": ""})
    try:
        run = kill_loop(repo, key, tmp, kills, random.Random(seed))
        present = check_after_kills(tool, run)
        # The next write after the last kill works too.
        assert tool.call(hp.stream_command(0)) == "File created successfully at: /memories/w/0.md"
        assert tool.store.verify().ok
    except AssertionError as exc:
        raise AssertionError(f"kill test with seed {seed}: {exc}") from exc
    print(
        f"\nkill test (seed {seed}): {run.kills} SIGKILLs, {len(run.acked)} acknowledged "
        f"writes, 0 lost; {len(present)} writes present, of which "
        f"{len(present - run.acked)} in flight at a kill landed whole; "
        f"{run.before_first_write} kills before a writer's first write; "
        f"{run.stale_ref_locks} kills left {BRANCH}.lock behind"
    )


def test_a_writer_killed_at_random_moments_loses_no_acknowledged_write(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    kill_test(repo_path, key, tmp_path, kills=6)


@pytest.mark.slow
def test_a_writer_killed_thirty_times_loses_no_acknowledged_write(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    kill_test(repo_path, key, tmp_path, kills=30)


# -- leftovers of a killed writer ----------------------------------------------------------


@pytest.mark.parametrize("ref", [BRANCH, META_REF])
def test_a_ref_lock_file_left_by_a_killed_writer_does_not_wedge_the_next_write(
    tool: gitmem.GitMemoryTool, repo_path: Path, ref: str
) -> None:
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    head = tool.store.head()
    assert head is not None
    # What libgit2 leaves when killed between writing the lock file and renaming it over the ref.
    lock = repo_path / (ref + ".lock")
    lock.write_text("0" * 40 + "\n")
    if ref == BRANCH:
        # Outside gitmem's writer lock the leftover does block a ref update...
        with pytest.raises((ConflictError, OSError), match=r"main\.lock"):
            GitRepo(repo_path).update_ref(BRANCH, head, head)
    # ...but a gitmem writer holds the OS lock, so it knows the file is stale and removes it.
    assert tool.call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"}) == (
        "File created successfully at: /memories/b.md"
    )
    assert not lock.exists()
    assert [op.seq for op in tool.store.log()] == [2, 1]
    assert tool.store.files() == {"/memories/a.md": "a\n", "/memories/b.md": "b\n"}
    assert tool.store.verify().ok


def test_a_killed_lock_holder_does_not_wedge_the_next_write(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    tool = gitmem.GitMemoryTool(repo_path, key=key, lock_timeout=0.3)
    ack_path = tmp_path / "acks"
    process = hp.context().Process(target=hp.holder, args=(str(repo_path), str(ack_path)))
    process.start()
    wait_for(lambda: hp.read_acks(ack_path) == ["locked"], "the holder to lock")
    with pytest.raises(ToolError) as refused:
        tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    assert str(refused.value) == (
        f"Error: another writer held the lock on {repo_path} for over 0.3s"
    )
    assert tool.store.head() is None
    assert sigkill(process) == -signal.SIGKILL
    assert (repo_path / "gitmem.lock").exists()  # the file stays; the kernel dropped the lock
    assert tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}) == (
        "File created successfully at: /memories/a.md"
    )


# -- kills at fault-injection points --------------------------------------------------------


def run_fault(repo: Path, key: str, tmp: Path, point: str) -> str:
    """Run stream write 1 in a worker that SIGKILLs itself at ``point``; the commit it made."""
    ack_path = tmp / f"acks-{point}"
    process = hp.context().Process(
        target=hp.fault, args=(str(repo), hp.worker_env(key), str(ack_path), point, 1)
    )
    process.start()
    process.join(_TIMEOUT)
    acks = hp.read_acks(ack_path)
    assert process.exitcode == -signal.SIGKILL, acks
    assert len(acks) == 1 and acks[0].startswith(f"{point} "), acks
    return acks[0].split()[1]


def test_a_kill_between_the_object_writes_and_the_ref_update_leaves_the_old_state(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    tool = gitmem.GitMemoryTool(repo_path, key=key, session="parent")
    tool.call({"command": "create", "path": hp.LOG, "file_text": "first\n"})
    head = tool.store.head()
    orphan = run_fault(repo_path, key, tmp_path, "before-ref")
    # The branch never moved to the dead writer's commit. With the redo log its objects were
    # never written anywhere (only its record would have held them); without it, they are
    # on disk, unreferenced.
    if git_flush.default_mode().logged:
        assert not GitRepo(repo_path).has(orphan)
    else:
        assert GitRepo(repo_path).read_commit(orphan).parents == (head,)
    assert tool.store.head() == head
    assert tool.store.files() == {hp.LOG: "first\n"}
    assert tool.store.verify().ok
    assert tool.call(hp.stream_command(3)) == f"The file {hp.LOG} has been edited."
    assert tool.store.files() == {hp.LOG: "entry 3\nfirst\n"}
    assert [op.seq for op in tool.store.log()] == [2, 1]
    assert tool.store.verify().ok


def test_a_kill_right_after_the_ref_update_leaves_the_new_state(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    tool = gitmem.GitMemoryTool(repo_path, key=key, session="parent")
    tool.call({"command": "create", "path": hp.LOG, "file_text": "first\n"})
    commit = run_fault(repo_path, key, tmp_path, "after-ref")
    # Unacknowledged but complete; the high-water mark the writer never advanced is no rollback.
    assert tool.store.head() == commit
    assert tool.store.files() == {hp.LOG: "entry 1\nfirst\n"}
    assert tool.store.verify().ok
    assert tool.call(hp.stream_command(3)) == f"The file {hp.LOG} has been edited."
    assert [op.seq for op in tool.store.log()] == [3, 2, 1]
    assert [op.session for op in tool.store.log()] == ["parent", "fault-after-ref", "parent"]


def test_an_init_killed_before_git_wrote_its_config_does_not_wedge_the_store(
    tmp_path: Path, key: str
) -> None:
    # The state a kill inside libgit2's init can leave (test_a_creator_killed_mid_way... hits
    # it by chance): gitmem's lock file and git's directories, but no `config` yet.
    repo = tmp_path / "store.git"
    for name in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (repo / name).mkdir(parents=True)
    (repo / LOCK_FILE).touch()
    assert MemoryStore.vacant(repo)
    tool = gitmem.GitMemoryTool(repo, key=key)
    assert tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}) == (
        "File created successfully at: /memories/a.md"
    )
    assert tool.store.verify().ok


@pytest.mark.parametrize(
    "config",
    [
        "",
        "[core]\n\trepositoryformatversion = 0\n",
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n",
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n",
    ],
)
def test_an_init_killed_while_git_wrote_its_config_does_not_wedge_the_store(
    tmp_path: Path, key: str, config: str
) -> None:
    # libgit2's init sets the config one key at a time, each by a rename: a kill between two
    # leaves a config without `bare = true`, which libgit2 opens as a non-bare repository
    # (test_a_creator_killed_mid_way... hit this about one run in six).
    repo = tmp_path / "store.git"
    for name in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (repo / name).mkdir(parents=True)
    (repo / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "config").write_text(config)
    (repo / LOCK_FILE).touch()
    assert MemoryStore.vacant(repo)
    tool = gitmem.GitMemoryTool(repo, key=key)
    assert tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}) == (
        "File created successfully at: /memories/a.md"
    )
    assert tool.store.verify().ok
    assert gitmem.GitMemoryTool(repo, key=key).store.files() == {"/memories/a.md": "a\n"}


def test_a_non_bare_repository_with_refs_is_not_adopted(tmp_path: Path, key: str) -> None:
    repo = tmp_path / "store.git"
    for name in ("objects/info", "objects/pack", "refs/heads"):
        (repo / name).mkdir(parents=True)
    (repo / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    (repo / "refs" / "heads" / "main").write_text("0" * 40 + "\n")
    (repo / LOCK_FILE).touch()
    assert not MemoryStore.vacant(repo)
    with pytest.raises(NoStore):
        gitmem.GitMemoryTool(repo, key=key)


def test_a_repository_without_config_and_without_gitmem_lock_is_not_adopted(
    tmp_path: Path, key: str
) -> None:
    repo = tmp_path / "store.git"
    for name in ("objects/info", "refs/heads"):
        (repo / name).mkdir(parents=True)
    assert not MemoryStore.vacant(repo)
    with pytest.raises(NoStore):
        gitmem.GitMemoryTool(repo, key=key)


def creation_state(repo: Path, acks: list[str]) -> str:
    """How far a killed creator got."""
    if acks == ["start", "open"]:
        return "finished"
    if not repo.exists():
        return "nothing made"
    if not GitRepo.exists(repo):
        return "half-made directory"
    if not (repo / META_REF).exists():
        return "repository without metadata"
    return "store made"


def killed_creation_test(tmp: Path, key: str, rounds: int) -> None:
    ctx, env, rng = hp.context(), hp.worker_env(key), random.Random()
    # Time one creation that is left alone, so that the kills spread over the whole of one.
    calibration = ctx.Process(target=hp.creator, args=(str(tmp / "c.git"), env, str(tmp / "c")))
    calibration.start()
    wait_for(lambda: hp.read_acks(tmp / "c") == ["start"], "the creator to start")
    started = time.monotonic()
    wait_for(lambda: hp.read_acks(tmp / "c") == ["start", "open"], "the creator to finish")
    window = time.monotonic() - started
    calibration.join(_TIMEOUT)
    states: Counter[str] = Counter()
    for r in range(rounds):
        repo, ack_path = tmp / f"store-{r}.git", tmp / f"acks-{r}"
        process = ctx.Process(target=hp.creator, args=(str(repo), env, str(ack_path)))
        process.start()
        wait_for(
            lambda: hp.read_acks(ack_path) != [],  # noqa: B023 (called right here)
            "the creator to start",
        )
        time.sleep(rng.uniform(0.0, 1.2 * window))
        sigkill(process)
        acks = hp.read_acks(ack_path)
        assert not errors(acks), acks
        states[creation_state(repo, acks)] += 1
        tool = gitmem.GitMemoryTool(repo, key=key)
        assert tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}) == (
            "File created successfully at: /memories/a.md"
        ), r
        assert tool.store.verify().ok
    print(
        f"\nkilled store creation ({window * 1000:.0f} ms each): {rounds} rounds, "
        f"{dict(states)}, 0 wedged"
    )


def test_a_creator_killed_mid_way_does_not_wedge_the_store(tmp_path: Path, key: str) -> None:
    killed_creation_test(tmp_path, key, rounds=4)


@pytest.mark.slow
def test_creators_killed_mid_way_twenty_times(tmp_path: Path, key: str) -> None:
    killed_creation_test(tmp_path, key, rounds=20)


# -- a full disk ----------------------------------------------------------------------------

COMMANDS: dict[str, dict[str, Any]] = {
    "create": {"command": "create", "path": "/memories/new.md", "file_text": "new\n"},
    "str_replace": {
        "command": "str_replace",
        "path": "/memories/a.md",
        "old_str": "alpha",
        "new_str": "gamma",
    },
    "insert": {"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "x"},
    "rename": {"command": "rename", "old_path": "/memories/d/b.md", "new_path": "/memories/e.md"},
    "delete": {"command": "delete", "path": "/memories/d"},
}


def no_space(*_: object, **__: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# rename and delete write no blob: names live in the (re-encrypted) trees. Every tree is
# written through write_raw_tree (directories directly, file trees through write_tree).
FULL_DISK_CASES = [
    (command, point)
    for command in COMMANDS
    for point in ("write_blob", "write_raw_tree", "write_commit", "update_ref")
    if not (point == "write_blob" and command in ("rename", "delete"))
]


@pytest.mark.parametrize(("command", "point"), FULL_DISK_CASES)
def test_a_full_disk_refuses_the_write_clearly_and_leaves_the_ref_unmoved(
    tool: gitmem.GitMemoryTool, monkeypatch: pytest.MonkeyPatch, point: str, command: str
) -> None:
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "alpha\nbeta\n"})
    tool.call({"command": "create", "path": "/memories/d/b.md", "file_text": "b\n"})
    head, files = tool.store.head(), tool.store.files()
    with monkeypatch.context() as patched:
        patched.setattr(GitRepo, point, no_space)
        with pytest.raises(ToolError) as refused:
            tool.call(COMMANDS[command])
    assert str(refused.value) == NO_SPACE
    assert tool.store.head() == head
    assert tool.store.files() == files
    assert tool.store.verify().ok
    # Once there is space again, the same command goes through as one commit.
    tool.call(COMMANDS[command])
    assert [op.seq for op in tool.store.log()] == [3, 2, 1]


@pytest.mark.parametrize("point", ["write_blob", "create_ref"])
def test_a_full_disk_while_creating_a_store_is_a_clear_error_and_the_same_call_works_after(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    repo = tmp_path / "store.git"
    with monkeypatch.context() as patched:
        patched.setattr(GitRepo, point, no_space)
        with pytest.raises(StorageError) as refused:
            gitmem.GitMemoryTool(repo, key=key)
    assert str(refused.value) == (
        f"cannot create the store at {repo}: No space left on device; nothing usable was "
        "written, and the same command can be run again once that is fixed"
    )
    assert MemoryStore.vacant(repo)
    tool = gitmem.GitMemoryTool(repo, key=key)
    assert tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"}) == (
        "File created successfully at: /memories/a.md"
    )
    assert tool.store.verify().ok


def test_a_full_disk_under_the_high_water_mark_does_not_fail_a_committed_write(
    tool: gitmem.GitMemoryTool, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    with monkeypatch.context() as patched:
        patched.setattr(HighWater, "advance", no_space)
        # The commit is durable before the mark is written: reporting a failure would make
        # Claude redo an insert that happened. The lapse of the check is said, once.
        with pytest.warns(gitmem.RollbackCheckOff):
            assert tool.call(
                {
                    "command": "insert",
                    "path": "/memories/a.md",
                    "insert_line": 0,
                    "insert_text": "z",
                }
            ) == ("The file /memories/a.md has been edited.")
    assert tool.store.files() == {"/memories/a.md": "z\na\n"}
    assert [op.seq for op in tool.store.log()] == [2, 1]
    reopened = gitmem.GitMemoryTool(tool.store.path, key=key, session="again")
    assert reopened.store.head() == tool.store.head()


def user_namespaces_unavailable(mount: Path) -> str | None:
    """Why a private tmpfs cannot be mounted here, or None when it can."""
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return "needs Linux and unshare(1)"
    probe = subprocess.run(
        ["unshare", "-r", "-m", "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$1"', "sh", mount],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"unprivileged user and mount namespaces are unavailable: {probe.stderr.strip()}"
    return None


@pytest.mark.slow
def test_a_real_full_filesystem(tmp_path: Path) -> None:
    mount = tmp_path / "mnt"
    mount.mkdir()
    reason = user_namespaces_unavailable(mount)
    if reason is not None:
        pytest.skip(f"no small real filesystem ({reason}); the simulated ENOSPC tests cover it")
    # A 1 MiB tmpfs in a private mount namespace: no privileges needed, nothing left mounted.
    script = 'mount -t tmpfs -o size=1m,mode=700 tmpfs "$1" && exec "$2" "$3" full-disk "$1"'
    helper = Path(hp.__file__)
    done = subprocess.run(
        ["unshare", "-r", "-m", "sh", "-c", script, "sh", mount, sys.executable, helper],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    # Which writer meets the full disk first (libgit2's, or gitmem's own object, tree, ref and
    # log writes) decides the words inside the parentheses, not the shape of the message.
    storage_failed = re.compile(
        r"Error: gitmem's storage failed \((failed to write out file: )?No space left on "
        r"device\); the memory is unchanged unless a later view shows otherwise"
    )
    # With the redo log (version 2) a write creates no file: while its record fits in the
    # preallocated log it succeeds whole on a full disk; what needs new blocks (a checkpoint)
    # is refused with the branch unmoved.
    for outcome in report["results"]:
        if "error" in outcome:
            assert storage_failed.fullmatch(outcome["error"]), outcome
            assert outcome["head_unmoved"], outcome
        else:
            assert not outcome["head_unmoved"], outcome
    full_writes = sum("output" in o for o in report["results"])
    if git_flush.default_mode().logged:
        assert full_writes > 0
    else:
        assert full_writes == 0 and report["files_unchanged"]
    assert report["verify_while_full"] == []
    # With 0..15 pages free the write fails at every step of the way, or succeeds whole.
    sweep = report["sweep"]
    for outcome in sweep:
        if "error" in outcome:
            error = outcome["error"]
            assert storage_failed.fullmatch(error), outcome
            assert (outcome["new_commits"], outcome["head_moved"]) == (0, False), outcome
        else:
            assert outcome["output"].startswith("File created successfully"), outcome
            assert (outcome["new_commits"], outcome["head_moved"]) == (1, True), outcome
            assert outcome["content_ok"], outcome
    assert any("output" in o for o in sweep)
    # Without the log a write needs new pages at several steps; with it, only a checkpoint.
    assert git_flush.default_mode().logged or any("error" in o for o in sweep)
    assert report["write_after"] == "File created successfully at: /memories/after.md"
    assert report["verify_after"] == []
    assert report["commits"] == 3 + full_writes + sum("output" in o for o in sweep)
    print(
        f"\nreal full filesystem: {full_writes} of {len(report['results'])} commands whole, "
        f"the others refused with the ref unmoved; sweep of {len(sweep)} free-space levels: "
        f"{sum('error' in o for o in sweep)} refused cleanly, "
        f"{sum('output' in o for o in sweep)} whole"
    )


# -- power loss: the redo log rebuilds what the page cache lost (design.md, "The redo log") ----

needs_log = pytest.mark.needs_log


def reboot(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the next process sees after a power loss: another boot id."""
    source = tmp / f"boot-{uuid.uuid4().hex}"
    source.write_text(f"{uuid.uuid4()}\n")
    monkeypatch.setattr(wal, "BOOT_ID_PATH", str(source))


def last_record(repo: Path) -> tuple[wal.Record, int, int]:
    """The log's last valid record, with its start and end offsets."""
    header = wal.read_header(repo / wal.LOG_NAME)
    assert header is not None
    fd = wal.open_log(repo / wal.LOG_NAME, write=False)
    try:
        start, found = wal.HEADER_SIZE, []
        for record, end in wal.records(fd, header):
            found.append((record, start, end))
            start = end
    finally:
        os.close(fd)
    return found[-1]


def drop_loose(repo: Path, oids: list[str]) -> int:
    """Remove the loose files of ``oids`` (what a power loss does to unflushed objects)."""
    dropped = 0
    for oid in oids:
        with contextlib.suppress(FileNotFoundError):
            (repo / "objects" / oid[:2] / oid[2:]).unlink()
            dropped += 1
    return dropped


def drop_record(repo: Path, record: wal.Record) -> int:
    """Remove the loose files of the objects ``record`` holds."""
    return drop_loose(repo, [oid for oid, _, _ in wal.record_objects(record)])


def after_reboot(
    repo: Path, key: str, tmp: Path, monkeypatch: pytest.MonkeyPatch, state: str = "state"
) -> MemoryStore:
    """The store as the first process after a power loss opens it."""
    reboot(tmp, monkeypatch)
    return MemoryStore.open(repo, key, state_dir=tmp / state)


def two_writes(repo: Path, key: str, tmp: Path) -> MemoryStore:
    store = MemoryStore.open(repo, key, create=True, state_dir=tmp / "state")
    store.create(parse("/memories/a.md"), "first\n")
    store.create(parse("/memories/b/c.md"), "second\n")
    return store


@needs_log
def test_one_write_is_one_flush_of_the_log(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    flushes: list[str] = []
    real_fdatasync = os.fdatasync
    monkeypatch.setattr(os, "fsync", lambda fd: flushes.append("fsync"))
    monkeypatch.setattr(git_flush, "syncfs", lambda path: flushes.append("syncfs"))

    def fdatasync(fd: int) -> None:
        flushes.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    for n in range(3):
        store.create(parse(f"/memories/d{n}/e.md"), f"{n}\n")
        assert flushes == [str(repo_path.resolve() / wal.LOG_NAME)]
        flushes.clear()


@needs_log
def test_an_acknowledged_write_whose_objects_the_power_loss_took_is_rebuilt_from_the_log(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    expected = store.files()
    record, _, _ = last_record(repo_path)
    written = [oid for oid, _, _ in wal.record_objects(record)]
    # The write put its objects in its record alone (a checkpoint publishes them).
    assert drop_loose(repo_path, written) == 0
    # One object is there torn (a checkpoint cut short): recovery removes it and writes it
    # again.
    torn = repo_path / "objects" / record.head(BRANCH)[:2] / record.head(BRANCH)[2:]  # type: ignore[index]
    torn.parent.mkdir(exist_ok=True)
    torn.write_bytes(b"\0" * 10)
    again = after_reboot(repo_path, key, tmp_path, monkeypatch)
    assert again.files() == expected
    assert again.verify().ok


@needs_log
def test_a_ref_that_reached_the_disk_without_its_objects_is_moved_back(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    first_head = list(store.log())[1].commit
    record, start, end = last_record(repo_path)
    # The second write was never acknowledged: its record and its objects were lost, its
    # ref rename was not.
    with open(repo_path / wal.LOG_NAME, "r+b") as handle:
        handle.seek(start)
        handle.write(bytes(end - start))
    drop_record(repo_path, record)
    reboot(tmp_path, monkeypatch)
    assert GitRepo(repo_path).ref(BRANCH) == first_head
    again = MemoryStore.open(repo_path, key, state_dir=tmp_path / "fresh-state")
    assert again.files() == {"/memories/a.md": "first\n"}
    assert again.verify().ok


@needs_log
def test_an_unreadable_ref_is_pointed_at_the_last_record(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    expected = store.files()
    (repo_path / BRANCH).write_bytes(b"")  # the rename survived, the lock's content did not
    again = after_reboot(repo_path, key, tmp_path, monkeypatch)
    assert again.files() == expected


@needs_log
def test_recovering_twice_changes_nothing_more(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    expected = store.files()
    record, _, _ = last_record(repo_path)
    drop_record(repo_path, record)
    reboot(tmp_path, monkeypatch)
    repo = GitRepo(repo_path)
    with repo.write_lock(5.0):
        pass
    header = wal.read_header(repo_path / wal.LOG_NAME)
    assert header is not None and header.boot == wal.boot_id()
    files = sorted(str(p.relative_to(repo_path)) for p in repo_path.rglob("*") if p.is_file())
    log = (repo_path / wal.LOG_NAME).read_bytes()
    with repo.write_lock(5.0):
        repo.recover()  # same boot: nothing to do
    assert (repo_path / wal.LOG_NAME).read_bytes() == log
    # Interrupted before its checkpoint, then another power loss: it runs again, the same way.
    again = after_reboot(repo_path, key, tmp_path, monkeypatch)
    assert again.files() == expected
    assert (
        sorted(str(p.relative_to(repo_path)) for p in repo_path.rglob("*") if p.is_file()) == files
    )
    newer = wal.read_header(repo_path / wal.LOG_NAME)
    assert newer is not None and newer.generation == header.generation + 1
    assert newer.base == header.base


@needs_log
def test_a_complete_ref_move_the_log_does_not_know_is_kept(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    store.checkpoint()  # another tool sees the writes only once they are published
    head = next(iter(store.log()))
    git = pygit2.Repository(str(repo_path))
    sig = pygit2.Signature("other", "other@invalid", 0, 0)
    tree = git.TreeBuilder(head.tree)
    tree.insert("extra", git.create_blob(b"made by another tool"), pygit2.enums.FileMode.BLOB)
    foreign = str(
        git.create_commit(None, sig, sig, "x", tree.write(), [pygit2.Oid(hex=head.commit)])
    )
    (repo_path / BRANCH).write_text(foreign + "\n")
    reboot(tmp_path, monkeypatch)
    assert GitRepo(repo_path).ref(BRANCH) == foreign
    # The same move with an object missing is undone.
    missing = str(git.create_commit(None, sig, sig, "y", tree.write(), [pygit2.Oid(hex=foreign)]))
    blob = git.create_blob(b"lost in the power loss")
    tree.insert("lost", blob, pygit2.enums.FileMode.BLOB)
    incomplete = str(
        git.create_commit(None, sig, sig, "z", tree.write(), [pygit2.Oid(hex=missing)])
    )
    drop_loose(repo_path, [str(blob)])
    (repo_path / BRANCH).write_text(incomplete + "\n")
    reboot(tmp_path, monkeypatch)
    assert GitRepo(repo_path).ref(BRANCH) == foreign


@needs_log
def test_every_ref_move_outside_the_log_starts_a_new_generation(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    store = two_writes(repo_path, key, tmp_path)

    def generation() -> tuple[int, str | None]:
        header = wal.read_header(repo_path / wal.LOG_NAME)
        assert header is not None
        return header.generation, header.base

    start, _ = generation()
    store.gc(0.0)
    assert generation() == (start + 1, GitRepo(repo_path).ref(BRANCH))
    store.add_key(
        passphrase="the test passphrase", kdf=KdfParams(64, 1, 1)
    )  # moves refs/gitmem/meta
    # The metadata moved outside the log, after the commit recording it (design.md, "Which
    # metadata counts"): that move published the commit and started a generation from it.
    assert generation()[0] > start + 1
    keys_commit = next(store.log())
    assert keys_commit.command == "keys"
    assert generation()[1] == keys_commit.commit == GitRepo(repo_path).ref(BRANCH)


def test_without_syncfs_there_is_no_log(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_flush, "default_mode", lambda: git_flush.FSYNC)
    two_writes(repo_path, key, tmp_path)
    assert not (repo_path / wal.LOG_NAME).exists()
    assert MemoryStore.open(repo_path, key, state_dir=tmp_path / "state").files() == {
        "/memories/a.md": "first\n",
        "/memories/b/c.md": "second\n",
    }


@needs_log
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_log_that_is_not_a_file_is_refused_without_blocking(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    two_writes(repo_path, key, tmp_path)
    log = repo_path / wal.LOG_NAME
    log.unlink()
    if kind == "fifo":
        os.mkfifo(log)
    else:
        log.mkdir()
    for rebooted in (False, True):
        if rebooted:
            reboot(tmp_path, monkeypatch)
        with pytest.raises(IntegrityError, match=wal.LOG_NAME):
            MemoryStore.open(repo_path, key, state_dir=tmp_path / "state").files()


@needs_log
def test_records_of_two_processes_interleave_and_all_are_replayed(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two store instances keep separate views of the log's end, as two processes do.
    first = two_writes(repo_path, key, tmp_path)
    second = MemoryStore.open(repo_path, key, state_dir=tmp_path / "state")
    for n in range(3):
        first.create(parse(f"/memories/first{n}.md"), f"{n}\n")
        second.create(parse(f"/memories/second{n}.md"), f"{n}\n")
    expected = second.files()
    header = wal.read_header(repo_path / wal.LOG_NAME)
    assert header is not None
    fd = wal.open_log(repo_path / wal.LOG_NAME, write=False)
    try:
        records, heads = wal.replay_plan(fd, header, BRANCH)
    finally:
        os.close(fd)
    assert heads[-1] == GitRepo(repo_path).ref(BRANCH)
    assert len(records) >= 6
    # The power loss took every object written since the generation started.
    for record in records:
        drop_record(repo_path, record)
    again = after_reboot(repo_path, key, tmp_path, monkeypatch)
    assert again.files() == expected
    assert again.verify().ok


@needs_log
def test_a_full_log_starts_a_new_generation(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_writes(repo_path, key, tmp_path)
    store = MemoryStore.open(repo_path, key, state_dir=tmp_path / "state")
    start = wal.read_header(repo_path / wal.LOG_NAME)
    assert start is not None
    rng = random.Random(7)
    for n in range(4):  # records of about 100 KB: the 64 KiB log holds one at a time
        store.create(parse(f"/memories/big{n}.md"), text(rng, 100_000))
    header = wal.read_header(repo_path / wal.LOG_NAME)
    assert header is not None and header.generation > start.generation
    # The checkpoint published the generations before: the ref file is where they ended.
    assert GitRepo(repo_path).refs.ref_file(BRANCH) == header.base
    expected = store.files()
    assert after_reboot(repo_path, key, tmp_path, monkeypatch).files() == expected


@needs_log
def test_a_large_write_is_published_at_once_instead_of_logged(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    two_writes(repo_path, key, tmp_path)
    store = MemoryStore.open(
        repo_path, key, state_dir=tmp_path / "state", limits=Limits(max_file_bytes=None)
    )
    log = repo_path / wal.LOG_NAME
    start = wal.read_header(log)
    assert start is not None
    store.create(parse("/memories/huge.md"), text(random.Random(5), 2_000_000))
    header = wal.read_header(log)
    assert header is not None and header.generation > start.generation
    # Not in the log (which keeps its size, and has no record): in the repository, durably.
    assert log.stat().st_size == wal.MIN_CAPACITY
    fd = wal.open_log(log, write=False)
    try:
        assert list(wal.records(fd, header)) == []
    finally:
        os.close(fd)
    head = store.head()
    assert head is not None
    assert GitRepo(repo_path).refs.ref_file(BRANCH) == head == header.base
    assert pygit2.Repository(str(repo_path)).get(head) is not None


def text(rng: random.Random, size: int) -> str:
    """Base64 of random bytes (compressed, about 3/4 of ``size``)."""
    return base64.b64encode(rng.randbytes(size * 3 // 4)).decode()


@needs_log
def test_the_log_starts_small_grows_when_few_records_fill_it_and_shrinks_back(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = repo_path / wal.LOG_NAME
    store = two_writes(repo_path, key, tmp_path)
    assert log.stat().st_size == wal.MIN_CAPACITY
    rng = random.Random(3)
    sizes = []
    for n in range(12):  # records of about 12 KiB: a few fill 64 KiB
        store.create(parse(f"/memories/big{n}.md"), base64.b64encode(rng.randbytes(9000)).decode())
        sizes.append(log.stat().st_size)
    assert sizes[0] == wal.MIN_CAPACITY and sizes[-1] == 2 * wal.MIN_CAPACITY
    assert log.stat().st_blocks * 512 >= 2 * wal.MIN_CAPACITY  # its zeros are written
    expected = store.files()
    record, _, _ = last_record(repo_path)
    drop_record(repo_path, record)
    store = after_reboot(repo_path, key, tmp_path, monkeypatch)
    assert store.files() == expected
    # Many records to a generation (here: four or more) halve the log again.
    monkeypatch.setattr(wal, "GROW_BELOW", 1)
    for n in range(300):
        store.str_replace(parse("/memories/a.md"), f"first{'!' * n}\n", f"first{'!' * (n + 1)}\n")
        if log.stat().st_size == wal.MIN_CAPACITY:
            break
    assert log.stat().st_size == wal.MIN_CAPACITY
    assert store.verify().ok


@needs_log
def test_a_store_at_rest_keeps_a_small_log(repo_path: Path, key: str, tmp_path: Path) -> None:
    log = repo_path / wal.LOG_NAME
    store = two_writes(repo_path, key, tmp_path)
    rng = random.Random(4)
    for n in range(12):  # records of about 12 KiB: the log grows past its first size
        store.create(parse(f"/memories/big{n}.md"), base64.b64encode(rng.randbytes(9000)).decode())
    assert log.stat().st_size == 2 * wal.MIN_CAPACITY
    expected = store.files()
    store.close()
    # Done with the store: every write published, and no space kept for writes to come.
    assert log.stat().st_size == wal.REST_CAPACITY
    assert log.stat().st_blocks * 512 <= wal.REST_CAPACITY + 4096
    assert GitRepo(repo_path).refs.ref_file(BRANCH) == store.head()
    # The next session writes and grows it again, losing nothing.
    again = MemoryStore.open(repo_path, key, state_dir=tmp_path / "state")
    for n in range(6):
        again.create(parse(f"/memories/more{n}.md"), base64.b64encode(rng.randbytes(9000)).decode())
    assert log.stat().st_size >= wal.MIN_CAPACITY
    assert {k: v for k, v in again.files().items() if "more" not in k} == expected
    assert again.verify().ok
    # A process that ends without closing the store rests it too (its exit publishes).
    script = (
        "import sys\n"
        "from gitmem import MemoryStore\n"
        "from gitmem.paths import parse\n"
        "s = MemoryStore.open(sys.argv[1], sys.argv[2], state_dir=sys.argv[3])\n"
        "s.create(parse('/memories/exit.md'), 'x' * 40000)\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(repo_path), key, str(tmp_path / "state2")], check=True
    )
    assert log.stat().st_size == wal.REST_CAPACITY
    assert again.read_text(parse("/memories/exit.md")) == "x" * 40000


@needs_log
def test_a_torn_header_gets_a_new_log_and_loses_nothing(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    expected = store.files()
    # A checkpoint rewrites the header only once what the log held is durably published.
    store.checkpoint()
    with open(repo_path / wal.LOG_NAME, "r+b") as handle:
        handle.write(b"\0" * 16)  # the power loss tore a checkpoint's header rewrite
    again = after_reboot(repo_path, key, tmp_path, monkeypatch)
    assert again.files() == expected
    header = wal.read_header(repo_path / wal.LOG_NAME)
    assert header is not None and header.boot == wal.boot_id() and header.generation == 1
    again.create(parse("/memories/after.md"), "after\n")
    assert last_record(repo_path)[0].head(BRANCH) == GitRepo(repo_path).ref(BRANCH)


@needs_log
def test_a_recovery_cut_short_runs_again_at_the_next_open(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    expected = store.files()
    record, _, _ = last_record(repo_path)
    drop_record(repo_path, record)
    reboot(tmp_path, monkeypatch)
    real = RedoLog.checkpoint

    def power_loss(self: RedoLog, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(RedoLog, "checkpoint", power_loss)
    with pytest.raises(StorageError, match="cannot recover"):
        MemoryStore.open(repo_path, key, state_dir=tmp_path / "state").create(
            parse("/memories/refused.md"), "refused\n"
        )
    monkeypatch.setattr(RedoLog, "checkpoint", real)
    header = wal.read_header(repo_path / wal.LOG_NAME)
    assert header is not None and header.boot != wal.boot_id()  # still to recover
    again = MemoryStore.open(repo_path, key, state_dir=tmp_path / "state")
    assert again.files() == expected
    header = wal.read_header(repo_path / wal.LOG_NAME)
    assert header is not None and header.boot == wal.boot_id()


# -- the redo log, version 2: objects and head in the log until a checkpoint ----------------


@needs_log
def test_a_reader_in_another_process_sees_a_logged_write_before_any_checkpoint(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    header = wal.read_header(repo_path / wal.LOG_NAME)
    assert header is not None
    # Neither the ref file nor any loose object knows the writes: only the log.
    assert GitRepo(repo_path).refs.ref_file(BRANCH) == header.base != store.head()
    code = (
        "import json, sys\n"
        "from gitmem import MemoryStore\n"
        "store = MemoryStore.open(sys.argv[1], sys.argv[2], state_dir=sys.argv[3])\n"
        "print(json.dumps([store.head(), store.files()]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(repo_path), key, str(tmp_path / "reader-state")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(out) == [store.head(), store.files()]


@needs_log
def test_a_reader_follows_the_log_across_a_new_generation(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    writer = two_writes(repo_path, key, tmp_path)
    reader = MemoryStore.open(repo_path, key, state_dir=tmp_path / "reader")
    assert reader.files() == writer.files()
    seen = reader.repo.log._tail
    assert seen is not None and seen.records == 2 and seen.objects
    writer.checkpoint()
    writer.create(parse("/memories/later.md"), "after the checkpoint\n")
    assert reader.files() == writer.files()
    now = reader.repo.log._tail
    assert now is not None and now.generation == seen.generation + 1
    # The old generation's objects were dropped: they are in the repository now.
    assert now.records == 1 and not set(seen.objects) <= set(now.objects)


def test_a_scan_that_meets_a_new_generation_stops_at_the_old_one(tmp_path: Path) -> None:
    """A checkpoint that starts a new generation while a reader scans: the reader, holding
    the old header, ends at the first record of the new one (a consistent, older view)."""
    log = tmp_path / wal.LOG_NAME
    boot = uuid.uuid4().bytes
    old = wal.Header(4, boot, "a" * 40)
    first = wal.Record(4, 1, ((BRANCH, "b" * 40),), ((b"blob", b"one"),))
    log.write_bytes(wal.new_log(old))
    fd = wal.open_log(log, write=True)
    try:
        os.pwrite(fd, first.to_bytes(), wal.HEADER_SIZE)
        seen = wal.follow(fd, old, None, BRANCH)
        # Meanwhile: a checkpoint, and the new generation's first two records.
        wal.write_header(fd, wal.Header(5, boot, "b" * 40))
        offset = wal.HEADER_SIZE
        for seq, head in ((1, "c" * 40), (2, "d" * 40)):
            data = wal.Record(5, seq, ((BRANCH, head),), ((b"blob", head.encode()),)).to_bytes()
            os.pwrite(fd, data, offset)
            offset += len(data)
        stale = wal.follow(fd, old, seen, BRANCH)  # the reader read the old header
        assert (stale.records, stale.last) == (1, "b" * 40)
        assert set(stale.objects) == {wal.object_id(b"blob", b"one")}
    finally:
        os.close(fd)


@needs_log
def test_objects_of_a_write_that_failed_are_in_no_later_record(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    orphan = ""
    with pytest.raises(RuntimeError), store.repo.write_lock(5.0):
        orphan = store.repo.write_blob(b"written by a write that then failed")
        assert store.repo.has(orphan)
        raise RuntimeError("the write fails before its record")
    store.create(parse("/memories/next.md"), "the next write\n")
    record, _, _ = last_record(repo_path)
    assert orphan not in {oid for oid, _, _ in wal.record_objects(record)}
    assert not store.repo.has(orphan)


@needs_log
def test_an_overlay_commit_resolves_from_a_prefix(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    head = store.head()
    assert head is not None
    reader = GitRepo(repo_path)
    assert reader.resolve_prefix(head[:8]) == head
    assert head in set(reader.all_object_ids())
    assert set(store.snapshot(head[:10]).files()) == set(store.snapshot().files())
    with pytest.raises(KeyError):
        reader.resolve_prefix("0000000000")
    # A prefix that an object of the log and one of the repository share is ambiguous.
    published = reader.refs.ref_file(META_REF)
    assert published is not None
    twin = next(
        payload
        for n in itertools.count()
        if wal.object_id(b"blob", payload := b"twin %d" % n)[:4] == published[:4]
    )
    assert reader.write_blob(twin)[:4] == published[:4]
    with pytest.raises(ValueError, match="ambiguous"):
        reader.resolve_prefix(published[:4])


def v1_log(repo: Path, store: MemoryStore, boot: bytes | None) -> tuple[wal.Record, str]:
    """Rewrite the store's log as gitmem before version 2 left it: its last write's objects
    loose and the branch's ref file moved (unflushed), and the write's record in a version 1
    log. Returns the record and the head before it."""
    published(repo)  # everything published: the ref file and loose objects
    last, before = list(store.log())[:2]
    repo_objects = [
        (oid, kind, payload)
        for oid in [last.commit, last.tree]
        for kind, payload in [store.repo.read_any(oid, git_objects.ANY_KIND)]
    ]
    record = wal.Record(7, 1, ((BRANCH, last.commit),), tuple((k, p) for _, k, p in repo_objects))
    header = wal.Header(7, boot or bytes(16), before.commit, version=1)
    log = repo / wal.LOG_NAME
    log.write_bytes(wal.new_log(header))
    with open(log, "r+b") as handle:
        handle.seek(wal.HEADER_SIZE)
        handle.write(record.to_bytes())
    return record, before.commit


@needs_log
def test_a_version_1_log_of_this_boot_is_migrated_by_a_checkpoint(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    expected = store.files()
    v1_log(repo_path, store, wal.boot_id())
    again = MemoryStore.open(repo_path, key, state_dir=tmp_path / "state")
    assert again.files() == expected  # read from the repository: the log adds nothing
    again.create(parse("/memories/after.md"), "after\n")
    header = wal.read_header(repo_path / wal.LOG_NAME)
    assert header is not None and header.version == 2 and header.generation == 8
    assert header.base == list(again.log())[1].commit
    assert again.verify().ok


@needs_log
def test_a_version_1_log_after_a_reboot_is_replayed_then_migrated(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    expected = store.files()
    record, _ = v1_log(repo_path, store, uuid.uuid4().bytes)
    # The power loss took the loose objects the version 1 write had not flushed.
    assert drop_record(repo_path, record) == len(record.objects)
    again = after_reboot(repo_path, key, tmp_path, monkeypatch)
    assert again.files() == expected
    header = wal.read_header(repo_path / wal.LOG_NAME)
    assert header is not None and header.version == 2 and header.boot == wal.boot_id()
    assert again.verify().ok


@needs_log
def test_a_log_of_a_newer_version_is_refused(repo_path: Path, key: str, tmp_path: Path) -> None:
    two_writes(repo_path, key, tmp_path)
    log = repo_path / wal.LOG_NAME
    header = wal.read_header(log)
    assert header is not None
    fd = wal.open_log(log, write=True)
    try:
        wal.write_header(fd, wal.Header(header.generation, header.boot, header.base, version=3))
    finally:
        os.close(fd)
    before = log.read_bytes()
    with pytest.raises(IntegrityError, match="newer gitmem"):
        store = MemoryStore.open(repo_path, key, state_dir=tmp_path / "state")
        store.create(parse("/memories/refused.md"), "refused\n")
    assert log.read_bytes() == before


@needs_log
def test_a_log_of_a_newer_version_gives_advice_that_keeps_its_writes(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_writes(repo_path, key, tmp_path)
    log = repo_path / wal.LOG_NAME
    header = wal.read_header(log)
    assert header is not None
    fd = wal.open_log(log, write=True)
    try:
        wal.write_header(fd, wal.Header(header.generation, header.boot, header.base, version=3))
    finally:
        os.close(fd)
    from click.testing import CliRunner

    from gitmem.cli import main as cli_main

    assert extension(repo_path) == (True, 1)  # the writes are in the log alone
    with pytest.raises(IntegrityError) as refused:
        MemoryStore.open(repo_path, key, state_dir=tmp_path / "other").files()
    assert str(refused.value) == (
        "the redo log gitmem.wal is of version 3, written by a newer gitmem (this one reads "
        "versions 1 and 2); it holds that gitmem's acknowledged writes, which are in no other "
        "place, so keep it: publish them with that gitmem, run "
        f"`gitmem --repo {repo_path} checkpoint` with it, and this one opens the store"
    )
    # The advice, run by a gitmem that reads log version 3 (this one, told it does).
    advised = str(refused.value).split("run `gitmem ", 1)[1].split("`", 1)[0].split()
    with monkeypatch.context() as newer:
        newer.setattr(wal, "KNOWN_VERSIONS", (1, 2, 3))
        result = CliRunner().invoke(
            cli_main, advised, env={"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(tmp_path / "s")}
        )
    assert result.exit_code == 0, result.output
    assert extension(repo_path) == (False, 0)
    store = MemoryStore.open(repo_path, key, state_dir=tmp_path / "other")
    assert store.files() == {"/memories/a.md": "first\n", "/memories/b/c.md": "second\n"}


def git_log(repo: Path) -> subprocess.CompletedProcess[str]:
    """``git log`` of the branch, by the git binary (which knows nothing of the redo log)."""
    return subprocess.run(
        ["git", "--git-dir", str(repo), "log", "--format=%H", BRANCH],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent)},
    )


def extension(repo: Path) -> tuple[bool, int]:
    """Whether the repository's config names the log's extension, and its format version."""
    config = pygit2.Config(str(repo / "config"))
    named = git_config._config_true(config, git_config._EXTENSION_KEY)
    return named, git_config._config_int(config, git_config._FORMAT_KEY) or 0


@needs_log
def test_the_repository_names_the_log_extension_while_the_log_holds_writes(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from gitmem.cli import main

    store = MemoryStore.open(repo_path, key, create=True, state_dir=tmp_path / "state")
    assert extension(repo_path) == (False, 0)
    store.create(parse("/memories/a.md"), "first\n")
    assert extension(repo_path) == (True, 1)
    # git refuses the repository rather than read a branch the log has moved past.
    refused = git_log(repo_path)
    assert refused.returncode != 0 and "gitmemlog" in refused.stderr
    store.create(parse("/memories/b.md"), "second\n")
    result = CliRunner().invoke(
        main, ["--repo", str(repo_path), "checkpoint"], env={"GITMEM_KEY": key}
    )
    assert result.exit_code == 0, result.output
    assert extension(repo_path) == (False, 0)
    assert git_log(repo_path).stdout.split() == [op.commit for op in store.log()]
    # The next write names it again; a checkpoint of a full log keeps it.
    store.create(parse("/memories/c.md"), "third\n")
    assert extension(repo_path) == (True, 1)
    with store.repo.write_lock(5.0):
        store.repo._checkpoint()
    assert extension(repo_path) == (True, 1)
    store.gc(0.0)  # gc clears it, as push does
    assert extension(repo_path) == (False, 0)
    assert git_log(repo_path).returncode == 0


@needs_log
def test_the_extension_is_set_once_per_generation(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_writes(repo_path, key, tmp_path)
    # Every file counts as settled: the config's identity is remembered.
    monkeypatch.setattr(git_files, "_RACY_FINE_SECONDS", -60.0)
    monkeypatch.setattr(git_files, "_RACY_SECONDS", -60.0)
    store.checkpoint()
    store.create(parse("/memories/d.md"), "x\n")  # names the extension again
    looked: list[str] = []
    real = git_config._config_true

    def counted(config: pygit2.Config, key: str) -> bool:
        looked.append(key)
        return real(config, key)

    monkeypatch.setattr(git_config, "_config_true", counted)
    for n in range(3):
        with store.repo.write_lock(5.0):
            store.repo._checkpoint()  # a full log's checkpoint: the extension stays
        store.create(parse(f"/memories/e{n}.md"), "y\n")  # the first record of a generation
    assert looked == []  # the config, unchanged, was not read again
    assert extension(repo_path) == (True, 1)
