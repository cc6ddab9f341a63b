"""A child forked while another thread holds one of gitmem's locks uses the store all the same.

A forked child has only the thread that forked. Each case below has another thread hold one
lock (or be halfway through a flush) at the moment of the fork; the child then writes and reads
the store it inherited and opens it afresh, within a bound (a deadlocked child is killed and
the test fails), and the parent, once its thread lets go, finds its store as it should be.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2
import pytest
from helpers_proc import in_forked_child

from gitmem import GitMemoryTool, MemoryStore, highwater
from gitmem.git import flush as git_flush
from gitmem.git import handle as git_handle
from gitmem.git.repo import GitRepo

Holder = Callable[[MemoryStore], contextlib.AbstractContextManager[Callable[[], None]]]


@contextlib.contextmanager
def _held_by_a_thread(
    hold: Callable[[threading.Event, threading.Event], None],
) -> Iterator[Callable[[], None]]:
    """Run ``hold(held, release)`` on a thread until it has set ``held``; yield the function
    that sets ``release``; join the thread at the end."""
    held, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            hold(held, release)
        except BaseException as exc:  # reported below
            failures.append(exc)
            held.set()

    thread = threading.Thread(target=run)
    thread.start()
    held.wait()
    try:
        yield release.set
    finally:
        release.set()
        thread.join()
    assert not failures, failures


def _lock(get: Callable[[MemoryStore], threading.Lock]) -> Holder:
    def holder(store: MemoryStore) -> contextlib.AbstractContextManager[Callable[[], None]]:
        def hold(held: threading.Event, release: threading.Event) -> None:
            with get(store):
                held.set()
                release.wait()

        return _held_by_a_thread(hold)

    return holder


def _mid_flush(store: MemoryStore) -> contextlib.AbstractContextManager[Callable[[], None]]:
    """Another writer's flush, shared with this process's writers, under way at the fork."""
    repo = store.repo
    group = git_flush.group_sync(
        f"log:{repo.log.file}"
        if git_flush.default_mode().logged
        else f"dev:{os.stat(repo.path).st_dev}"
    )

    def hold(held: threading.Event, release: threading.Event) -> None:
        def flush() -> None:
            held.set()
            release.wait()

        group.sync(flush, group.ticket())

    return _held_by_a_thread(hold)


def _mid_open(store: MemoryStore) -> contextlib.AbstractContextManager[Callable[[], None]]:
    """Another thread opening a repository: the lock held, git's search paths emptied."""

    def hold(held: threading.Event, release: threading.Event) -> None:
        with git_handle.only_repository_config():
            held.set()
            release.wait()

    return _held_by_a_thread(hold)


@contextlib.contextmanager
def _mid_mark(store: MemoryStore) -> Iterator[Callable[[], None]]:
    """Another thread inside the high-water mark's advance, holding the mark file's flock:
    a file lock, which the child's copy of the descriptor would keep held."""
    marks = store.high_water
    assert marks is not None
    mark = marks.read()
    assert mark is not None
    real = highwater._slot_mark
    holding: list[threading.Thread] = []
    held, release = threading.Event(), threading.Event()

    def paused(slot: bytes) -> highwater.Mark | None:
        if threading.current_thread() in holding:
            held.set()
            release.wait()
        return real(slot)

    thread = threading.Thread(target=marks.advance, args=(mark,))
    holding.append(thread)
    highwater._slot_mark = paused  # type: ignore[assignment]
    try:
        thread.start()
        held.wait()
        yield release.set
    finally:
        release.set()
        thread.join()
        highwater._slot_mark = real


HOLDERS: dict[str, Holder] = {
    "the redo log reader's lock": _lock(lambda s: s.repo.log._view_lock),
    "a shared flush under way": _mid_flush,
    "the search-path lock, mid-open": _mid_open,
    "the high-water mark's file lock": _mid_mark,
    "the directory cache's lock": _lock(lambda s: s.codec._dirs._lock),
    "the chunker's lock": _lock(lambda s: s.codec.chunker._lock),
}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+: fork with threads running
@pytest.mark.parametrize("held", sorted(HOLDERS))
def test_a_child_forked_while_a_thread_holds_a_lock_uses_the_store(
    tool: GitMemoryTool, repo_path: Path, key: str, held: str
) -> None:
    store = tool.store
    store.create("/memories/a.md", "one\n")
    store.create("/memories/d/b.md", "two\n" * 2000)
    assert store.files()  # caches filled, the log followed
    search_paths = [pygit2.settings.search_path[level] for level in git_handle._OUTSIDE_CONFIG]

    def child() -> None:
        store.create("/memories/child.md", "from the child\n")
        store.insert("/memories/d/b.md", 0, "head\n")
        assert store.read_text("/memories/child.md") == "from the child\n"
        assert store.listing("/memories/d")
        fresh = MemoryStore.open(repo_path, key)
        assert fresh.read_text("/memories/d/b.md") == "head\n" + "two\n" * 2000
        now = [pygit2.settings.search_path[level] for level in git_handle._OUTSIDE_CONFIG]
        assert now == search_paths, now

    with HOLDERS[held](store) as release:
        outcome = in_forked_child(child, timeout=60.0, then=release)
    assert outcome == "ok", outcome
    # The parent: its thread let go; it sees the child's writes, writes, and verifies.
    assert store.read_text("/memories/child.md") == "from the child\n"
    store.create("/memories/parent.md", "after\n")
    assert store.files()["/memories/d/b.md"] == "head\n" + "two\n" * 2000
    assert store.verify().ok
    assert MemoryStore.open(repo_path, key).read_text("/memories/parent.md") == "after\n"


def test_a_forked_child_closes_its_copy_of_the_log_descriptor(
    store: MemoryStore, repo_path: Path, key: str
) -> None:
    """Kept, it would pin the log's file (replaced when resized) for the child's whole life."""
    store.create("/memories/a.md", "one\n")
    assert store.read_text("/memories/a.md") == "one\n"
    opened = store.repo.log._reading
    if opened is None:
        pytest.skip("no redo log on this platform")

    def child() -> None:
        with pytest.raises(OSError) as closed:
            os.fstat(opened.fd)
        assert closed.value.errno == errno.EBADF
        assert store.read_text("/memories/a.md") == "one\n"  # through a descriptor of its own

    assert in_forked_child(child, timeout=60.0) == "ok"
    assert os.fstat(opened.fd)  # the parent's is untouched
    assert store.read_text("/memories/a.md") == "one\n"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+: fork with threads running
def test_a_child_forked_while_the_push_policy_holds_its_lock_pushes_its_own_writes(
    tmp_path: Path, key: str
) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--bare", "-q", str(origin)], check=True)
    tool = GitMemoryTool(
        tmp_path / "a.git", key=key, state_dir=tmp_path / "sa", remote=str(origin), sync="push"
    )
    create = {"command": "create", "path": "/memories/a.md", "file_text": "one\n"}
    tool.call(create)
    assert tool.autosync.wait(60) and tool.autosync.last_error is None

    def child() -> None:
        tool.call({**create, "path": "/memories/child.md"})
        assert tool.autosync.wait(60), "the child's push did not end"
        assert tool.autosync.last_error is None, tool.autosync.last_error

    with _lock(lambda s: tool.autosync._lock)(tool.store) as release:
        outcome = in_forked_child(child, timeout=60.0, then=release)
    assert outcome == "ok", outcome
    tool.call({**create, "path": "/memories/parent.md"})
    assert tool.autosync.wait(60) and tool.autosync.last_error is None
    pushed = MemoryStore.clone(str(origin), tmp_path / "b.git", key, state_dir=tmp_path / "sb")
    assert set(pushed.files()) == {"/memories/a.md", "/memories/child.md", "/memories/parent.md"}


def test_a_child_does_not_keep_the_writer_lock_a_dead_parents_thread_held(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    """A parent killed while another of its threads held the writer lock: the lock goes with it,
    even though a child it forked meanwhile lives on (its copy of the lock's descriptor would
    otherwise keep the lock held for the child's whole life)."""
    MemoryStore.open(repo_path, key, create=True).close()
    child_pid = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import os, threading, time
        from gitmem.git.repo import GitRepo
        held = threading.Event()
        def hold():
            with GitRepo({str(repo_path)!r}).write_lock(10):
                held.set()
                time.sleep(600)
        threading.Thread(target=hold, daemon=True).start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            time.sleep(600)  # a long-lived child (a worker process)
            os._exit(0)
        with open({str(child_pid)!r}, "w") as out:
            out.write(str(pid))
        os._exit(0)  # the parent dies holding the lock, as if killed
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    child = int(child_pid.read_text())
    try:
        with GitRepo(repo_path).write_lock(5):
            pass
    finally:
        os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child, 0)
