"""push, pull, sync and clone through file paths: fast-forwards, merges, refusals.

The same scenarios over ``git daemon`` and smart HTTP are in ``test_sync_servers.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers_git_servers import git_daemon, pausing_proxy

from gitmem import MemoryStore, RollbackDetected, WrongKey, generate_key
from gitmem.errors import DifferentStore, NotAStoreRemote, PushRejected, RemoteError, UsageError
from gitmem.git.refs import BRANCH
from gitmem.paths import parse
from gitmem.store import Change, Operation
from gitmem.tree import TreeEditor


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
    # A refused pull leaves the remote's objects here (inert); the push then read the remote's
    # project commit as a gitmem record: "failed authentication (forged, altered or spliced)".
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
