"""A commit's author and committer time is its operation's sequence number (design.md,
"Commits"): times grow along the parents, so git's walks (what a push sends, what a fetch
brings) stop just past what is new instead of reading the whole history."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2
import pytest

import gitmem.git.repo as git_repo
from gitmem import MemoryStore, generate_key
from gitmem.git.objects import commit_bytes
from gitmem.git.refs import BRANCH, META_REF

SECRET = "4111 1111 1111 1111"


def p(name: str) -> str:
    return f"/memories/{name}"


def commit_times(store: MemoryStore) -> list[tuple[str, int, int, int, int, int]]:
    """(command, seq, author time and offset, committer time and offset) of each operation's
    commit, newest first, as git reads the commit."""
    store.checkpoint()  # the redo log's objects into the repository, where libgit2 reads
    git = pygit2.Repository(str(store.path))
    found: list[tuple[str, int, int, int, int, int]] = []
    for op in store.log():
        commit = git[op.commit]
        assert isinstance(commit, pygit2.Commit)
        author, committer = commit.author, commit.committer
        found.append(
            (op.command, op.seq, author.time, author.offset, committer.time, committer.offset)
        )
    return found


def bare(path: Path) -> Path:
    subprocess.run(["git", "init", "--bare", "-q", str(path)], check=True)
    return path


def test_every_writer_commits_at_its_seq(tmp_path: Path, key: str) -> None:
    origin = bare(tmp_path / "origin.git")
    a = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "sa", session="a")
    a.add_remote("origin", str(origin))
    a.create(p("notes.md"), f"one\ncard {SECRET}\ntwo\n")
    a.create(p("other.md"), "other\n")
    a.push()
    b = MemoryStore.clone(str(origin), tmp_path / "b.git", key, state_dir=tmp_path / "sb")
    b.str_replace(p("notes.md"), "two", "two and three")
    a.str_replace(p("other.md"), "other", "other, edited")
    a.str_replace(p("other.md"), "edited", "edited twice")
    a.push()
    assert b.pull().action == "merged"
    b.restore("HEAD~1")
    b.add_key(key=generate_key(), label="second")
    written = commit_times(b)
    assert [times for _, _, *times in written] == [[seq, 0, seq, 0] for _, seq, *_ in written]
    before = {op.commit for op in b.log()}
    b.redact(SECRET)  # writes every operation from #1 on again, and one more
    found = commit_times(b)
    assert {op.commit for op in b.log()} & before == set()
    assert [(command, seq) for command, seq, *_ in found] == [
        ("redact", 8),
        ("keys", 7),
        ("restore", 6),
        ("merge", 5),  # the larger parent's seq (a's #4) + 1
        ("str_replace", 4),
        ("str_replace", 3),
        ("str_replace", 3),
        ("create", 2),
        ("create", 1),
    ]
    assert [times for _, _, *times in found] == [[seq, 0, seq, 0] for _, seq, *_ in found]
    assert b.verify().ok


def test_history_written_at_time_zero_reads_and_syncs_as_before(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Commits written before commits carried their seq are at time 0: a store holding them
    # reads, verifies and syncs as before, and its new commits carry their seq.
    def at_time_zero(tree: str, parents: list[str], message: bytes, *, time: int) -> bytes:
        return commit_bytes(tree, parents, message, time=0)

    origin = bare(tmp_path / "origin.git")
    a = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "sa", session="a")
    a.add_remote("origin", str(origin))
    with monkeypatch.context() as older:
        older.setattr(git_repo, "commit_bytes", at_time_zero)
        a.create(p("notes.md"), "one\n")
        a.create(p("other.md"), "other\n")
        a.push()
    a.str_replace(p("notes.md"), "one", "one and two")
    a.push()
    assert [times for _, _, *times in commit_times(a)] == [[3, 0, 3, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    b = MemoryStore.clone(str(origin), tmp_path / "b.git", key, state_dir=tmp_path / "sb")
    assert b.read_text(p("notes.md")) == "one and two\n"
    assert a.verify().ok and b.verify().ok


def _tree_closure(repo: pygit2.Repository, oid: str, found: set[str]) -> None:
    if oid not in found:
        found.add(oid)
        tree = repo[oid]
        if isinstance(tree, pygit2.Tree):
            for entry in tree:
                _tree_closure(repo, str(entry.id), found)


def test_a_push_or_a_pull_of_one_operation_reads_no_old_history(tmp_path: Path, key: str) -> None:
    # Copies of a store's last few commits, everything older missing: a push, and a pull, of
    # one operation between them works only if git's walks of what to send stop near the
    # remote's head. With every commit at one time, they read on into the missing history.
    kept = 12  # the walk goes on 5 commits past the remote's head (git's and libgit2's slop)
    full = MemoryStore.init(tmp_path / "full.git", key, state_dir=tmp_path / "sf", session="s")
    for i in range(kept + 20):
        full.create(p(f"n{i}.md"), f"note {i}\n")
    full.checkpoint()
    git = pygit2.Repository(str(full.path))
    commits = [str(commit.id) for commit in git.walk(git.references[BRANCH].target)][:kept]
    new, old = commits[0], commits[1]
    meta = full.repo.ref(META_REF)
    assert meta is not None
    objects = set(commits) | {meta}
    for commit in (new, old):
        _tree_closure(git, str(git[commit].peel(pygit2.Tree).id), objects)

    def cut(name: str, head: str) -> Path:
        path = tmp_path / f"{name}.git"
        copy = pygit2.init_repository(str(path), bare=True)
        for oid in objects:
            copy.odb.write(*git.odb.read(oid))
        copy.references.create(BRANCH, head)
        copy.references.create(META_REF, meta)
        with pytest.raises(KeyError):  # the older history is really missing
            list(copy.walk(copy.references[BRANCH].target))
        return path

    ahead = MemoryStore.open(cut("ahead", new), key, accept_store=True, state_dir=tmp_path / "a")
    behind, pulling = cut("behind", old), cut("pulling", old)
    ahead.add_remote("behind", str(behind))
    assert ahead.push("behind").action == "pushed"
    assert str(pygit2.Repository(str(behind)).references[BRANCH].target) == new
    puller = MemoryStore.open(pulling, key, accept_store=True, state_dir=tmp_path / "p")
    puller.add_remote("ahead", str(ahead.path))
    assert puller.pull("ahead").action == "fast-forward"
    assert puller.head() == new
    assert puller.read_text(p(f"n{kept + 19}.md")) == f"note {kept + 19}\n"
