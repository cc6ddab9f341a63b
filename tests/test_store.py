"""MemoryStore behaviour not covered by the tool contract: vanished stores, odd commits, restore."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers_repo import published

import gitmem
from gitmem import parse_path
from gitmem.cli import main

# Each test runs in every write mode of the platform (tests/conftest.py, write_mode).
pytestmark = pytest.mark.usefixtures("write_mode")


def git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(published(repo)), *args],
        input=stdin,
        capture_output=True,
        check=True,
    ).stdout


def test_a_deleted_store_is_not_silently_recreated(repo_path: Path, key: str) -> None:
    tool = gitmem.GitMemoryTool(repo_path, key=key)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "keep\n"})
    shutil.rmtree(repo_path)
    with pytest.raises(gitmem.RollbackDetected, match="is gone or was reset"):
        gitmem.GitMemoryTool(repo_path, key=key)
    assert not repo_path.exists()
    # A deliberate `gitmem init` at the same path starts a new store, which then opens.
    result = CliRunner().invoke(main, ["init", str(repo_path)], env={"GITMEM_KEY": key})
    assert result.exit_code == 0, result.output
    fresh = gitmem.GitMemoryTool(repo_path, key=key)
    assert fresh.store.files() == {}


def test_a_store_whose_refs_were_deleted_is_refused(repo_path: Path, key: str) -> None:
    tool = gitmem.GitMemoryTool(repo_path, key=key)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "keep\n"})
    git(repo_path, "update-ref", "-d", "refs/heads/main")
    git(repo_path, "update-ref", "-d", "refs/gitmem/meta")
    with pytest.raises(gitmem.RollbackDetected) as refused:
        gitmem.GitMemoryTool(repo_path, key=key)
    assert git(repo_path, "for-each-ref") == b""
    # The advice in the error works as given (issue 14: it once advised an init that failed).
    advised = str(refused.value).split("run `gitmem ", 1)[1].split("`", 1)[0].split()
    result = CliRunner().invoke(main, advised, env={"GITMEM_KEY": key})
    assert result.exit_code == 0, result.output
    assert gitmem.GitMemoryTool(repo_path, key=key).store.files() == {}


def test_a_commit_with_too_many_parents_is_an_integrity_error(repo_path: Path, key: str) -> None:
    tool = gitmem.GitMemoryTool(repo_path, key=key)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x\n"})
    head = git(repo_path, "rev-parse", "HEAD").decode().strip()
    tree = git(repo_path, "rev-parse", "HEAD^{tree}").decode().strip()
    body = f"tree {tree}\n" + f"parent {head}\n" * 300
    body += "author a <a@a> 0 +0000\ncommitter a <a@a> 0 +0000\n\nbogus\n"
    forged = (
        git(
            repo_path,
            "hash-object",
            "-t",
            "commit",
            "-w",
            "--stdin",
            "--literally",
            stdin=body.encode(),
        )
        .decode()
        .strip()
    )
    git(repo_path, "update-ref", "refs/heads/main", forged)
    store = gitmem.MemoryStore.open(repo_path, key, check_rollback=False)
    report = store.verify()
    assert not report.ok
    assert any("failed authentication" in p for p in report.problems)
    with pytest.raises(gitmem.IntegrityError):
        store.head()


def test_restore_is_one_new_commit_naming_its_source(store: gitmem.MemoryStore) -> None:
    a, b = parse_path("/memories/a.md"), parse_path("/memories/d/b.md")
    store.create(a, "one\n")
    first = store.head()
    assert first is not None
    store.create(b, "two\n")
    store.delete(a)
    op = store.restore(first)
    assert op is not None
    assert op.command == "restore"
    assert op.record.detail == {"from": first, "from_seq": 1}
    assert op.paths == ("/memories/a.md", "/memories/d/b.md")
    assert store.files() == {"/memories/a.md": "one\n"}
    assert [o.seq for o in store.log()] == [4, 3, 2, 1]
    # Restoring the state before the restore brings everything back, again as a commit.
    store.restore("HEAD~1")
    assert store.files() == {"/memories/d/b.md": "two\n"}
    assert store.verify().ok


def test_revisions(store: gitmem.MemoryStore) -> None:
    p = parse_path("/memories/a.md")
    store.create(p, "1\n")
    store.insert(p, 1, "2")
    store.insert(p, 2, "3")
    head = store.head()
    assert head is not None
    assert store.resolve("HEAD") == head
    assert store.resolve(head[:8]) == head
    assert store.read_text(p, rev="HEAD~2") == "1\n"
    assert store.read_text(p, rev="HEAD^^") == "1\n"
    for bad in ("HEAD~9", "nothing", "zz12", "HEAD~x"):
        with pytest.raises(gitmem.UsageError):
            store.resolve(bad)


def test_bidi_controls_are_refused_and_escaped_in_the_message(tool: gitmem.GitMemoryTool) -> None:
    from anthropic.lib.tools import ToolError

    with pytest.raises(ToolError) as err:
        tool.call({"command": "create", "path": "/memories/a\u202egpj.md", "file_text": "x"})
    assert str(err.value) == (
        "Error: The path /memories/a\\u202egpj.md is not allowed: it contains a bidirectional "
        "text control character"
    )
    assert tool.store.head() is None


def test_an_empty_view_range_shows_the_whole_file(tool: gitmem.GitMemoryTool) -> None:
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x\ny"})
    assert tool.call({"command": "view", "path": "/memories/a.md", "view_range": []}) == (
        "Here's the content of /memories/a.md with line numbers:\n     1\tx\n     2\ty"
    )


def test_a_truncated_commit_between_mark_and_head_fails_closed(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    """libgit2 <= 1.9 hangs on a truncated loose object; the rollback check must not reach it."""
    import threading

    from gitmem.highwater import HighWater, Mark

    state = tmp_path / "state"
    store = gitmem.MemoryStore.open(repo_path, key, create=True, state_dir=state)
    p = parse_path("/memories/a.md")
    store.create(p, "1\n")
    first = store.head()
    store.insert(p, 1, "2")
    middle = store.head()
    store.insert(p, 2, "3")
    assert first is not None and middle is not None
    HighWater(store.store_id, state, replica=repo_path).reset(Mark(first, 1))
    loose = published(repo_path) / "objects" / middle[:2] / middle[2:]
    loose.chmod(0o644)
    loose.write_bytes(loose.read_bytes()[:-8])

    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            gitmem.MemoryStore.open(repo_path, key, state_dir=state).read_text(p)
            outcome.append(None)
        except BaseException as exc:  # reported below
            outcome.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert outcome, "the read hung"
    assert isinstance(outcome[0], gitmem.IntegrityError)
    assert middle in str(outcome[0])


def test_paths_may_be_given_as_strings(tmp_path: Path, key: str) -> None:
    repo, state = str(tmp_path / "s.git"), str(tmp_path / "state")
    store = gitmem.MemoryStore.open(repo, key, create=True, state_dir=state)
    store.create(parse_path("/memories/a.md"), "x")
    again = gitmem.MemoryStore.open(repo, key, state_dir=state)
    assert again.read_text(parse_path("/memories/a.md")) == "x"
    assert any((tmp_path / "state").iterdir())  # the high-water mark went where it was told
    shutil.rmtree(repo)
    with pytest.raises(gitmem.RollbackDetected):
        gitmem.MemoryStore.open(repo, key, create=True, state_dir=state)


def test_the_cached_head_hides_no_rollback_behind_it(tmp_path: Path, key: str) -> None:
    """A store reuses the head it authenticated while the branch names it; a branch moved back
    behind it (by anyone) is read again and refused, and so is one moved under a writer."""
    repo, state = tmp_path / "s.git", tmp_path / "state"
    first = gitmem.MemoryStore.open(repo, key, create=True, state_dir=state)
    p = parse_path("/memories/a.md")
    one = first.create(p, "1")
    first.str_replace(p, "1", "2")
    assert first.read_text(p) == "2"  # the head is now cached by `first`
    other = gitmem.MemoryStore.open(repo, key, state_dir=state)
    other.str_replace(p, "2", "3")
    assert first.read_text(p) == "3"  # the branch moved: read again
    git(repo, "update-ref", "refs/heads/main", one.commit)
    with pytest.raises(gitmem.RollbackDetected):
        first.read_text(p)
    with pytest.raises(gitmem.RollbackDetected):
        first.create(parse_path("/memories/b.md"), "x")


def test_the_mark_is_recorded_again_after_the_state_directory_was_removed(
    tmp_path: Path, key: str
) -> None:
    """A store makes the mark's directory once; removed later, it is made again, not lost."""
    from gitmem.highwater import HighWater

    repo, state = tmp_path / "s.git", tmp_path / "state"
    store = gitmem.MemoryStore.open(repo, key, create=True, state_dir=state)
    p = parse_path("/memories/a.md")
    store.create(p, "1")
    shutil.rmtree(state)
    op = store.str_replace(p, "1", "2")[0]
    mark = HighWater(store.store_id, state, replica=repo).read()
    assert mark is not None and (mark.commit, mark.seq) == (op.commit, 2)
    assert (state / store.store_id).stat().st_mode & 0o777 == 0o700


def test_verify_reads_every_file_again_whatever_this_store_keeps(tmp_path: Path, key: str) -> None:
    """Files read or written lately are kept by tree id (a view reads no object), but verify
    authenticates every object on disk again: a chunk damaged since is reported."""
    store = gitmem.MemoryStore.open(tmp_path / "s.git", key, create=True)
    p = parse_path("/memories/a.md")
    store.create(p, "some text\n")
    assert store.read_text(p) == "some text\n"
    node = store.snapshot().lookup(p)
    assert node is not None
    chunk = store.repo.read_tree(node.oid)[0].oid
    loose = published(store.path) / "objects" / chunk[:2] / chunk[2:]
    loose.chmod(0o600)
    loose.unlink()
    assert store.read_text(p) == "some text\n"  # kept: the same tree id is the same content
    report = store.verify()
    assert not report.ok and any(chunk in problem for problem in report.problems)
    with pytest.raises(gitmem.IntegrityError):
        gitmem.MemoryStore.open(tmp_path / "s.git", key).read_text(p)
