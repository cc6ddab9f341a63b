"""push, pull, sync and clone through file paths: fast-forwards, merges, refusals.

The same scenarios over ``git daemon`` and smart HTTP are in ``test_sync_servers.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers_git_servers import git_daemon, pausing_proxy
from test_history import FakeClock

import gitmem.store
from gitmem import MemoryStore, RollbackDetected, WrongKey, generate_key, history
from gitmem.editor import TreeEditor
from gitmem.errors import (
    DifferentStore,
    IntegrityError,
    NotAStoreRemote,
    PushRejected,
    RemoteError,
    UsageError,
)
from gitmem.git.refs import BRANCH
from gitmem.git.remotes import Incoming
from gitmem.paths import parse
from gitmem.store import Change, Operation


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def write(store: MemoryStore, name: str, text: str) -> None:
    store.create(parse(f"/memories/{name}"), text, overwrite=True)


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    path = tmp_path / "origin.git"
    git("init", "--bare", "-q", str(path))
    return path


@pytest.fixture
def first(tmp_path: Path, key: str, origin: Path) -> MemoryStore:
    store = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state-a")
    write(store, "notes.md", "1\n2\n3\n4\n5\n")
    store.add_remote("origin", str(origin))
    assert store.push().action == "pushed"
    return store


def clone(first: MemoryStore, origin: Path, tmp_path: Path, key: str, name: str) -> MemoryStore:
    return MemoryStore.clone(
        str(origin), tmp_path / f"{name}.git", key, state_dir=tmp_path / f"state-{name}"
    )


def test_a_store_imported_alone_pushes_and_clones(tmp_path: Path, key: str, origin: Path) -> None:
    # Without gitmem.sync imported first (by gitmem.MemoryStore, the command line or the tool),
    # the store's replica methods were refused: "gitmem.sync is not loaded".
    code = (
        "import sys\n"
        "from gitmem.store import MemoryStore\n"
        "a, origin, b, key, state = sys.argv[1:]\n"
        "store = MemoryStore.init(a, key, state_dir=state)\n"
        "store.create('/memories/x.md', 'x')\n"
        "store.add_remote('origin', origin)\n"
        "print(store.push().action, 'gitmem.sync' in sys.modules)\n"
        "print(MemoryStore.clone(origin, b, key, state_dir=state).files())\n"
    )
    paths = [tmp_path / "a.git", origin, tmp_path / "b.git"]
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, paths), key, str(tmp_path / "state")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "pushed True\n{'/memories/x.md': 'x'}\n"


def test_clone_push_pull_fast_forward(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    second = clone(first, origin, tmp_path, key, "b")
    assert second.files() == first.files()
    assert second.remotes() == [("origin", str(origin))]
    write(second, "from-b.md", "b\n")
    assert second.push().action == "pushed"
    result = first.pull()
    assert result.action == "fast-forward"
    assert first.files() == second.files()
    assert first.pull().action == "up-to-date"
    assert first.verify().ok and second.verify().ok


def test_divergent_writes_merge_and_converge(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    second = clone(first, origin, tmp_path, key, "b")
    write(first, "a-only.md", "a\n")
    first.str_replace(parse("/memories/notes.md"), "1\n", "one\n")
    write(second, "b-only.md", "b\n")
    second.str_replace(parse("/memories/notes.md"), "5\n", "five\n")
    assert first.sync().action == "pushed"
    result = second.sync()
    assert result.action == "merged+pushed" and result.conflicts == []
    assert first.sync().action == "fast-forward"
    assert first.files() == second.files()
    assert first.read_text(parse("/memories/notes.md")) == "one\n2\n3\n4\nfive\n"
    assert set(first.files()) == {
        "/memories/notes.md",
        "/memories/a-only.md",
        "/memories/b-only.md",
    }
    merge = next(op for op in first.log() if op.command == "merge")
    assert len(merge.parents) == 2 and merge.record.detail["conflicts"] == []
    assert first.verify().ok and second.verify().ok


def test_same_line_conflict_keeps_both_as_siblings(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    second = clone(first, origin, tmp_path, key, "b")
    first.str_replace(parse("/memories/notes.md"), "3\n", "three from a\n")
    second.str_replace(parse("/memories/notes.md"), "3\n", "three from b\n")
    first.sync()
    result = second.sync()
    assert len(result.conflicts) == 1
    conflict = result.conflicts[0]
    assert conflict["path"] == "/memories/notes.md" and conflict["kind"] == "changed-both"
    assert conflict["sibling"].startswith("/memories/notes.conflict-")
    assert conflict["sibling"].endswith(".md")
    first.sync()
    files = first.files()
    assert files == second.files()
    texts = {files["/memories/notes.md"], files[conflict["sibling"]]}
    assert texts == {"1\n2\nthree from a\n4\n5\n", "1\n2\nthree from b\n4\n5\n"}
    assert first.verify().ok and second.verify().ok


def test_delete_against_edit_keeps_the_edit(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    second = clone(first, origin, tmp_path, key, "b")
    first.delete(parse("/memories/notes.md"))
    second.str_replace(parse("/memories/notes.md"), "2\n", "two\n")
    first.sync()
    result = second.sync()
    assert result.merge is not None
    assert result.merge.record.detail["kept"] == [
        {"path": "/memories/notes.md", "kind": "edit-kept"}
    ]
    first.sync()
    assert first.files() == second.files() == {"/memories/notes.md": "1\ntwo\n3\n4\n5\n"}


def test_push_never_discards_remote_commits(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    second = clone(first, origin, tmp_path, key, "b")
    write(second, "b.md", "b\n")
    second.push()
    write(first, "a.md", "a\n")
    before = git("--git-dir", str(origin), "rev-parse", "main")
    with pytest.raises(PushRejected):
        first.push()
    assert git("--git-dir", str(origin), "rev-parse", "main") == before


def test_rewound_remote_is_refused_on_pull(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    old = git("--git-dir", str(origin), "rev-parse", "main")
    write(first, "more.md", "x\n")
    first.push()
    git("--git-dir", str(origin), "update-ref", "refs/heads/main", old)
    local_head = first.head()
    with pytest.raises(RollbackDetected, match="rewound or force-pushed"):
        first.pull()
    assert first.head() == local_head
    assert list(first.path.glob("gitmem-fetch*")) == []


def test_unreachable_remote_changes_nothing(first: MemoryStore, tmp_path: Path) -> None:
    head = first.head()
    with pytest.raises(RemoteError):
        first.pull(str(tmp_path / "nowhere.git"))
    with pytest.raises(RemoteError):
        first.push(str(tmp_path / "nowhere.git"))
    assert first.head() == head


def test_remote_that_is_not_a_store(first: MemoryStore, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    git("init", "-q", str(plain))
    (plain / "f").write_text("x")
    git("-C", str(plain), "add", "f")
    git("-C", str(plain), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    with pytest.raises(NotAStoreRemote):
        first.pull(str(plain))
    with pytest.raises(NotAStoreRemote):
        first.push(str(plain))


def test_remote_holding_another_store(first: MemoryStore, tmp_path: Path, key: str) -> None:
    other = MemoryStore.init(tmp_path / "other.git", key, state_dir=tmp_path / "state-o")
    write(other, "x.md", "x\n")
    head = first.head()
    with pytest.raises(DifferentStore):
        first.pull(str(other.path))
    assert first.head() == head


@pytest.mark.parametrize("with_history", [False, True])
@pytest.mark.parametrize("same_key", [False, True])
def test_a_push_into_another_store_is_refused_and_changes_nothing(
    first: MemoryStore, tmp_path: Path, key: str, with_history: bool, same_key: bool
) -> None:
    # Into another, empty store the push went through, and that store then failed
    # authentication at its first read; into one with history it said "pull or sync first".
    other = MemoryStore.init(
        tmp_path / "other.git", key if same_key else generate_key(), state_dir=tmp_path / "so"
    )
    if with_history:
        write(other, "x.md", "x\n")
    other.checkpoint()  # its refs as a push finds them (it publishes a local remote's log)
    refs = dict(other.repo.list_remote(str(other.path)))
    with pytest.raises(DifferentStore, match="holds another gitmem store"):
        first.push(str(other.path))
    assert dict(other.repo.list_remote(str(other.path))) == refs
    assert other.verify().ok


def test_clone_with_wrong_key_leaves_nothing(
    first: MemoryStore, origin: Path, tmp_path: Path
) -> None:
    target = tmp_path / "wrong.git"
    with pytest.raises(WrongKey):
        MemoryStore.clone(str(origin), target, generate_key(), state_dir=tmp_path / "s")
    assert not target.exists()


def test_url_with_password_is_refused(first: MemoryStore) -> None:
    with pytest.raises(UsageError, match="password"):
        first.add_remote("forge", "https://me:secret@example.invalid/m.git")
    assert first.remotes() == [("origin", first.remotes()[0][1])]


def test_remote_add_list_remove(first: MemoryStore, tmp_path: Path) -> None:
    first.add_remote("backup", str(tmp_path / "b.git"))
    assert [n for n, _ in first.remotes()] == ["backup", "origin"]
    first.remove_remote("backup")
    assert [n for n, _ in first.remotes()] == ["origin"]
    with pytest.raises(UsageError):
        first.add_remote("bad name", "x")


def test_push_to_empty_remote_then_plain_clone_verifies(
    first: MemoryStore, tmp_path: Path, key: str
) -> None:
    backup = tmp_path / "backup.git"
    git("init", "--bare", "-q", str(backup))
    first.push(str(backup))
    assert git("--git-dir", str(backup), "rev-parse", "main") == first.repo.ref(BRANCH)
    copy = MemoryStore.open(backup, key, state_dir=tmp_path / "state-x")
    assert copy.verify().ok and copy.files() == first.files()


def test_log_show_blame_restore_understand_merges(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    from gitmem import history

    second = clone(first, origin, tmp_path, key, "b")
    edit_a = first.str_replace(parse("/memories/notes.md"), "1\n", "one\n")[0]
    edit_b = second.str_replace(parse("/memories/notes.md"), "5\n", "five\n")[0]
    first.sync()
    merge = second.sync().merge
    assert merge is not None and merge.parents == (edit_b.commit, first.head())
    # log lists both sides and the merge once each, newest first.
    commands = [op.command for op in second.log()]
    assert commands[0] == "merge" and sorted(commands[1:3]) == ["str_replace", "str_replace"]
    # show: the merge's change against its first parent.
    changes = history.changes(second, merge)
    assert [str(c.path) for c in changes] == ["/memories/notes.md"]
    # blame: each line keeps the author of the side it came from.
    owners = {
        line.text: line.operation.commit for line in history.blame(second, "/memories/notes.md")
    }
    assert owners["one"] == edit_a.commit and owners["five"] == edit_b.commit
    # restore to the first parent undoes what the merge brought in.
    second.restore(merge.parents[0])
    assert second.read_text(parse("/memories/notes.md")) == "1\n2\n3\n4\nfive\n"
    assert second.verify().ok


def test_each_fetch_has_its_own_scratch_repository(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    """Fetches take no lock: another fetch's scratch repository is left alone, a crashed one
    (an hour old) is removed."""
    import os

    second = clone(first, origin, tmp_path, key, "b")
    running = second.path / "gitmem-fetch-1-aaaaaaaa"
    crashed = second.path / "gitmem-fetch-2-bbbbbbbb"
    for scratch in (running, crashed):
        scratch.mkdir()
        (scratch / "HEAD").write_text("x")
    os.utime(crashed, (1, 1))
    write(first, "new.md", "n\n")
    first.push()
    assert second.pull().action == "fast-forward"
    assert running.exists() and not crashed.exists()


def test_ctrl_c_during_a_transfer_stops_it_and_leaves_nothing(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    # SIGINT arriving while libgit2 transfers is handled when libgit2 next calls back into
    # Python, at the entry of pygit2's callback wrapper: Python's KeyboardInterrupt raised there
    # escaped the wrapper's try, cffi printed and dropped it, and the clone went on to succeed.
    # The signal is placed there, not by a timer: a proxy holds the pack in mid-transfer, sends
    # SIGINT (caught on its own thread; Python runs the handler on the main thread at its next
    # chance) once the main thread waits in libgit2 for more, then lets the rest through.
    def many(head: Operation | None, tree: TreeEditor) -> Change[None]:
        for i in range(2000):
            tree.put_file(parse(f"/memories/d{i % 20}/f{i}.md"), f"{i}\n".encode() * 40)
        return Change(("/memories",), None)

    first.write("import", many)
    first.push()
    # Python's own handler, even where the tests run with SIGINT ignored (a background job).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.get_native_id()

    def interrupt() -> None:
        syscall = Path(f"/proc/self/task/{main}/syscall")
        deadline = time.monotonic() + 30
        # Until the main thread waits in libgit2 for the rest of the pack (read, poll, select,
        # recvfrom, ppoll), not in Python: a handler run in Python code within the callback
        # would not be the case this test is about. Where /proc cannot tell, just go on.
        while os.access(syscall, os.R_OK) and time.monotonic() < deadline:
            if syscall.read_text().split()[0] in ("0", "7", "23", "45", "270", "271"):
                break
            time.sleep(0.01)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    target = tmp_path / "c.git"
    try:
        with (
            git_daemon(tmp_path) as daemon,
            pausing_proxy(daemon, 64 * 1024, interrupt) as url,
            pytest.raises(KeyboardInterrupt),
        ):
            MemoryStore.clone(f"{url}/origin.git", target, key, state_dir=tmp_path / "s")
        assert not target.exists()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_push_to_a_project_repository_after_a_refused_pull_is_not_called_forged(
    first: MemoryStore, tmp_path: Path
) -> None:
    # A push that finds the remote's commit here (once left by a refused pull) or fetches it to
    # look at must not read a project commit as a gitmem record: "failed authentication
    # (forged, altered or spliced)".
    project = tmp_path / "project"
    git("init", "-q", "-b", "main", str(project))
    (project / "README").write_text("hello\n")
    git("-C", str(project), "add", "README")
    git("-C", str(project), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "x")
    head = first.head()
    for action in (first.pull, first.push, first.sync):
        with pytest.raises(NotAStoreRemote, match="is a git repository but not a gitmem store"):
            action(str(project))
    assert first.head() == head and first.verify().ok
    assert git("-C", str(project), "log", "--format=%s") == "x"


def _sigint_when_waiting(pid: int) -> Callable[[], None]:
    """A proxy pause that sends SIGINT to process ``pid`` once it waits in a read for more."""

    def interrupt() -> None:
        syscall = Path(f"/proc/{pid}/syscall")
        deadline = time.monotonic() + 30
        while os.access(syscall, os.R_OK) and time.monotonic() < deadline:
            with contextlib.suppress(OSError, IndexError):
                if syscall.read_text().split()[0] in ("0", "7", "23", "45", "270", "271"):
                    break
            time.sleep(0.01)
        os.kill(pid, signal.SIGINT)

    return interrupt


@pytest.mark.parametrize("command", ["clone", "pull"])
def test_ctrl_c_during_a_cli_transfer_says_interrupted(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str, command: str
) -> None:
    # cli.md: a Ctrl-C ends any command with "gitmem: error: interrupted", exit code 130.
    # libgit2's read cut short by the signal failed first with "Interrupted system call", which
    # was reported as an unreachable remote (exit 10).
    def many(head: Operation | None, tree: TreeEditor) -> Change[None]:
        for i in range(2000):
            tree.put_file(parse(f"/memories/d{i % 20}/f{i}.md"), f"{i}\n".encode() * 40)
        return Change(("/memories",), None)

    first.write("import", many)
    first.push()
    target = tmp_path / "c.git"
    env = {**os.environ, "GITMEM_KEY": key, "GITMEM_STATE_DIR": str(tmp_path / "s")}
    if command == "pull":
        empty = MemoryStore.init(tmp_path / "b.git", key, state_dir=tmp_path / "s")
        empty.close()
    pid: list[int] = []
    args = (
        ["clone", "URL/origin.git", str(target)]
        if command == "clone"
        else ["--repo", str(tmp_path / "b.git"), "pull", "URL/origin.git"]
    )
    with (
        git_daemon(tmp_path) as daemon,
        pausing_proxy(daemon, 64 * 1024, lambda: _sigint_when_waiting(pid[0])()) as url,
    ):
        proc = subprocess.Popen(
            [sys.executable, "-m", "gitmem", *(a.replace("URL", url) for a in args)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # Python's own SIGINT handler, even where the tests run with SIGINT ignored.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        pid.append(proc.pid)
        out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out, err) == (130, b"", b"gitmem: error: interrupted\n")
    if command == "clone":
        assert not target.exists()
    else:
        assert MemoryStore.open(tmp_path / "b.git", key, state_dir=tmp_path / "s").head() is None


def test_a_merged_history_reads_newest_first_by_time(
    origin: Path, tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The laptop works in the morning, the desktop in the afternoon, then the desktop merges:
    # by sequence number the two lines interleaved (4 laptop, 4 desktop, 3 laptop, ...).
    monkeypatch.setattr(gitmem.store, "time", FakeClock())
    laptop = MemoryStore.init(tmp_path / "l.git", key, state_dir=tmp_path / "sl", session="laptop")
    write(laptop, "base.md", "base\n")
    laptop.add_remote("origin", str(origin))
    laptop.push()
    desktop = MemoryStore.clone(
        str(origin), tmp_path / "d.git", key, state_dir=tmp_path / "sd", session="desktop"
    )
    for store, name in ((laptop, "l"), (desktop, "d")):
        for i in (1, 2, 3):
            write(store, f"{name}{i}.md", f"{i}\n")
    laptop.push()
    assert desktop.sync().action == "merged+pushed"
    ops = [(op.session, op.command, op.paths) for op in desktop.log()]
    assert ops == [
        ("desktop", "merge", tuple(f"/memories/l{i}.md" for i in (1, 2, 3))),
        *[("desktop", "create", (f"/memories/d{i}.md",)) for i in (3, 2, 1)],
        *[("laptop", "create", (f"/memories/l{i}.md",)) for i in (3, 2, 1)],
        ("laptop", "create", ("/memories/base.md",)),
    ], ops
    times = [op.record.time for op in desktop.log()]
    assert times[1:] == sorted(times[1:], reverse=True)
    # The merging replica's own line: its first parent at each merge.
    mine = [op.paths for op in desktop.log(first_parent=True)]
    assert mine == [
        ops[0][2],
        *[(f"/memories/d{i}.md",) for i in (3, 2, 1)],
        ("/memories/base.md",),
    ]
    assert [op.paths for op in history.log(desktop, first_parent=True)] == mine


def test_a_push_that_loses_a_race_is_a_rejection_that_sync_retries(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    # The remote's branch moves between this replica's listing of it and its push: libgit2
    # refuses the push itself, which read as an unreachable remote (RemoteError, exit 10).
    second = clone(first, origin, tmp_path, key, "b")
    write(first, "a.md", "a\n")
    write(second, "b.md", "b\n")
    real = first.repo.push
    pushed: list[str | None] = [None]

    def racing(url: str, specs: list[str], *args: float) -> None:
        if second.head() != pushed[-1]:  # the other replica pushes its new work first
            second.push()
            pushed.append(second.head())
        real(url, specs, *args)

    first.repo.push = racing  # type: ignore[method-assign, assignment]
    with pytest.raises(PushRejected, match="it has commits this replica lacks; pull or sync"):
        first.push()
    write(second, "b2.md", "b\n")
    assert first.sync().action == "merged+pushed"
    assert set(first.files()) >= {f"/memories/{n}.md" for n in ("a", "b", "b2")}


def test_another_process_pushing_during_a_pull_is_no_rollback(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    # Two agents on one machine share the state directory, so one's push moves the mark of the
    # remote between the other's fetch and its check: that was reported as a rewound remote.
    shared = tmp_path / "state-a"
    second = MemoryStore.clone(str(origin), tmp_path / "b.git", key, state_dir=shared)
    write(second, "b.md", "b\n")
    real = first.repo.fetching
    pushed: list[str | None] = [None]

    @contextlib.contextmanager
    def fetched_then_overtaken(
        url: str, refs: list[str], timeout: float = 30.0
    ) -> Iterator[Incoming]:
        with real(url, refs, timeout) as fetched:
            if second.head() != pushed[-1]:
                second.push()
                pushed.append(second.head())
            yield fetched

    first.repo.fetching = fetched_then_overtaken  # type: ignore[method-assign]
    for action in (first.pull, first.sync):
        action()
    assert "/memories/b.md" in first.files()


def test_names_a_write_would_refuse_are_not_made_by_a_merge(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    """Each side adds a name the other's would have refused beside it (a case twin, a
    look-alike, a directory's case twin): the first side's name stays, the second's moves to a
    conflict sibling, so no content is lost and both replicas converge."""
    second = clone(first, origin, tmp_path, key, "b")
    write(first, "Plan.md", "plan from a\n")
    write(second, "plan.md", "plan from b\n")
    write(first, "a.md", "latin\n")
    write(second, "\u0430.md", "cyrillic\n")
    write(first, "Dir/x.md", "x from a\n")
    write(second, "dir/y.md", "y from b\n")
    write(second, "dir/z/w.md", "w from b\n")
    write(first, "m.md", "m\n")
    write(second, "rn.md", "rn\n")  # two ASCII names are never look-alikes
    first.sync()
    result = second.sync()
    first.sync()
    assert first.files() == second.files()
    assert first.head() == second.head()
    merge = result.merge
    assert merge is not None
    _, theirs = sorted(merge.parents)
    tag = f".conflict-{theirs[:12]}"
    kinds = {c["kind"] for c in result.conflicts}
    assert kinds == {"twin-name"}
    files = first.files()
    # Whichever side's head id is smaller keeps its names; the other side's are moved aside.
    keeps_a = "/memories/Plan.md" in files and files["/memories/Plan.md"] == "plan from a\n"
    if keeps_a:
        assert files == {
            "/memories/notes.md": "1\n2\n3\n4\n5\n",
            "/memories/Plan.md": "plan from a\n",
            f"/memories/plan{tag}.md": "plan from b\n",
            "/memories/a.md": "latin\n",
            f"/memories/\u0430{tag}.md": "cyrillic\n",
            "/memories/Dir/x.md": "x from a\n",
            f"/memories/dir{tag}/y.md": "y from b\n",
            f"/memories/dir{tag}/z/w.md": "w from b\n",
            "/memories/m.md": "m\n",
            "/memories/rn.md": "rn\n",
        }
    else:
        assert files == {
            "/memories/notes.md": "1\n2\n3\n4\n5\n",
            "/memories/plan.md": "plan from b\n",
            f"/memories/Plan{tag}.md": "plan from a\n",
            "/memories/\u0430.md": "cyrillic\n",
            f"/memories/a{tag}.md": "latin\n",
            "/memories/dir/y.md": "y from b\n",
            "/memories/dir/z/w.md": "w from b\n",
            f"/memories/Dir{tag}/x.md": "x from a\n",
            "/memories/m.md": "m\n",
            "/memories/rn.md": "rn\n",
        }
    assert len(result.conflicts) == 3
    assert first.verify().ok and second.verify().ok


def _objects_on_disk(store: MemoryStore) -> tuple[list[str], int]:
    """Every object id in ``store``, and the bytes of its ``objects`` directory."""
    size = sum(f.stat().st_size for f in (store.path / "objects").rglob("*") if f.is_file())
    return sorted(store.repo.all_object_ids()), size


def _junk_head(repo: Path, parent: str | None, message: str) -> str:
    """A commit in ``repo`` whose tree holds 3 MiB of random blobs, with record ``message``."""
    entries = []
    for i in range(3):
        blob = (
            subprocess.run(
                ["git", "--git-dir", str(repo), "hash-object", "-w", "--stdin"],
                input=os.urandom(1 << 20),
                check=True,
                capture_output=True,
            )
            .stdout.decode()
            .strip()
        )
        entries.append(f"100644 blob {blob}\tjunk-{i}\n")
    tree = subprocess.run(
        ["git", "--git-dir", str(repo), "mktree"],
        input="".join(entries),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    parents = [] if parent is None else ["-p", parent]
    env = {**os.environ, "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x"}
    env.update(GIT_COMMITTER_NAME="x", GIT_COMMITTER_EMAIL="x@x")
    return subprocess.run(
        ["git", "--git-dir", str(repo), "commit-tree", tree, *parents, "-m", message],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()


@pytest.mark.parametrize("transport", ["local", "git-daemon"])
def test_a_refused_pull_keeps_none_of_the_objects_it_fetched(
    first: MemoryStore, origin: Path, transport: str
) -> None:
    # A forged head on top of the real one, carrying megabytes of junk: the pull is refused,
    # and the junk is deleted with it rather than kept in the store until gc's grace passes.
    forged = _junk_head(origin, first.head(), "gitmem record, forged")
    git("--git-dir", str(origin), "update-ref", "refs/heads/main", forged)
    before, head = _objects_on_disk(first), first.head()
    with contextlib.ExitStack() as stack:
        url = str(origin)
        if transport == "git-daemon":
            url = stack.enter_context(git_daemon(origin.parent)) + "/origin.git"
        for _ in range(3):
            with pytest.raises(IntegrityError, match="failed authentication"):
                first.pull(url)
            assert _objects_on_disk(first) == before
    assert first.head() == head and list(first.path.glob("gitmem-fetch*")) == []
    assert first.verify().ok


def test_a_pull_refused_for_another_store_or_a_project_keeps_nothing(
    first: MemoryStore, tmp_path: Path, key: str
) -> None:
    other = MemoryStore.init(tmp_path / "other.git", generate_key(), state_dir=tmp_path / "so")
    write(other, "theirs.md", "another store\n")
    project = tmp_path / "project.git"
    git("init", "--bare", "-q", str(project))
    git("--git-dir", str(project), "update-ref", "refs/heads/main", _junk_head(project, None, "x"))
    before = _objects_on_disk(first)
    with pytest.raises(DifferentStore):
        first.pull(str(other.path))
    with pytest.raises(NotAStoreRemote):
        first.pull(str(project))
    # A push looks at what the remote holds (fetched to identify it), and keeps none of it.
    with pytest.raises(NotAStoreRemote):
        first.push(str(project))
    assert _objects_on_disk(first) == before


def test_a_sync_that_loses_races_adds_one_merge(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    # Each refused attempt merged into the local branch, and the next attempt merged again on
    # top: two agents racing made a merge commit per attempt, all of them pushed in the end.
    second = clone(first, origin, tmp_path, key, "b")
    write(first, "a.md", "a\n")
    real = first.repo.push
    races = [0]

    def overtaken(url: str, specs: list[str], *args: float) -> None:
        if races[0] < 2:  # the other replica pushes new work first, twice
            races[0] += 1
            write(second, f"b{races[0]}.md", "b\n")
            second.sync()
        real(url, specs, *args)

    first.repo.push = overtaken  # type: ignore[method-assign, assignment]
    result = first.sync()
    assert (result.action, races[0]) == ("merged+pushed", 2)
    assert first.head() == result.head == git("--git-dir", str(origin), "rev-parse", "main")
    merges = [op for op in first.log() if op.record.command == "merge"]
    assert len(merges) == 1 and merges[0].commit == result.head
    assert set(first.files()) >= {f"/memories/{n}.md" for n in ("a", "b1", "b2")}
