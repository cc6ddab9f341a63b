"""The store's Python surface: paths as text or MemoryPath, and one write primitive for all."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import gitmem
from gitmem import history, parse_path
from gitmem.editor import TreeEditor
from gitmem.errors import (
    ConflictError,
    InvalidPath,
    NotADirectory,
    NotAFile,
    NotFound,
    StorageError,
)
from gitmem.git.flush import Durability
from gitmem.git.refs import BRANCH
from gitmem.git.repo import GitRepo
from gitmem.store import Change, NoChange, Operation
from gitmem.textops import TextNotFound


def test_every_path_method_takes_text_or_a_memory_path(store: gitmem.MemoryStore) -> None:
    for as_given in (str, parse_path):
        store.create(as_given("/memories/d/a.md"), "one\ntwo\n", overwrite=True)
        assert store.kind(as_given("/memories/d/a.md")) == "f"
        assert store.kind(as_given("/memories/d")) == "d"
        assert store.read_text(as_given("/memories/d/a.md")) == "one\ntwo\n"
        assert [row.relative for row in store.listing(as_given("/memories/d"))] == ["a.md"]
        store.str_replace(as_given("/memories/d/a.md"), "two", "three")
        store.insert(as_given("/memories/d/a.md"), 0, "zero")
        store.rename(as_given("/memories/d/a.md"), as_given("/memories/d/b.md"))
        assert history.cat(store, as_given("/memories/d/b.md")) == "zero\none\nthree\n"
        assert [line.text for line in history.blame(store, as_given("/memories/d/b.md"))] == [
            "zero",
            "one",
            "three",
        ]
        logged = list(history.log(store, paths=[as_given("/memories/d/b.md")]))
        assert [op.command for op in logged][:3] == ["rename", "insert", "str_replace"]
        first = logged[-1].commit
        assert [c.path for c in history.diff(store, first, paths=[as_given("/memories/d")])]
        assert history.restore_preview(store, first, [as_given("/memories/d")])
        store.restore(first, paths=[as_given("/memories/d")])
        assert store.kind(as_given("/memories/d/b.md")) is None
        store.delete(as_given("/memories/d"))
        assert store.kind("/memories/d") is None


def test_a_path_that_is_neither_text_nor_memory_path_is_a_type_error(
    store: gitmem.MemoryStore,
) -> None:
    store.create("/memories/a.md", "x\n")
    for call in (
        lambda: store.read_text(Path("/memories/a.md")),  # type: ignore[arg-type]
        lambda: store.kind(b"/memories/a.md"),  # type: ignore[arg-type]
        lambda: store.create(None, "x"),  # type: ignore[arg-type]
        lambda: history.cat(store, 3),  # type: ignore[arg-type]
        lambda: store.restore("HEAD", paths="/memories/a.md"),
        lambda: list(history.log(store, paths=parse_path("/memories/a.md"))),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError, match="memory path"):
            call()
    with pytest.raises(InvalidPath):
        store.read_text("/etc/passwd")
    assert store.files() == {"/memories/a.md": "x\n"}


def intrude_once(store: gitmem.MemoryStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make another writer (not gitmem, so not under its lock) move the branch once, just
    before the store's next compare-and-swap; returns the list its commit id is put in."""
    other = gitmem.MemoryStore(GitRepo(store.path), store.keys, check_rollback=False)
    real = GitRepo.update_ref
    moved: list[str] = []

    def update_ref(
        self: GitRepo, name: str, new: str, expected: str | None, *, wait: bool = True
    ) -> Durability:
        if name == BRANCH and not moved:
            moved.append("")  # the intruder's own ref update below passes straight through
            head = other.head_operation()
            editor = TreeEditor(other.codec, None if head is None else head.tree)
            editor.put_file(parse_path("/memories/intruder.md"), b"in\n")
            op, durable = other._commit(editor.write(), head, "create", [], {})
            other.repo.wait_durable(durable)
            moved[0] = op.commit
        return real(self, name, new, expected, wait=wait)

    monkeypatch.setattr(GitRepo, "update_ref", update_ref)
    return moved


@pytest.mark.parametrize("paths", [None, ["/memories/a.md"]], ids=["whole", "paths"])
def test_restore_retries_when_the_branch_moves(
    store: gitmem.MemoryStore, monkeypatch: pytest.MonkeyPatch, paths: list[str] | None
) -> None:
    first = store.create("/memories/a.md", "old\n")
    store.str_replace("/memories/a.md", "old", "new")
    moved = intrude_once(store, monkeypatch)
    op = store.restore(first.commit, paths=paths)
    assert op is not None
    assert moved and op.parents == (moved[0],)  # redone on top of the intruder's commit
    assert store.read_text("/memories/a.md") == "old\n"
    assert op.seq == 4


def test_every_write_retries_when_the_branch_moves(
    store: gitmem.MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create("/memories/a.md", "a\n")
    writes: list[Any] = [
        lambda: store.create("/memories/b.md", "b\n"),
        lambda: store.str_replace("/memories/a.md", "a", "A"),
        lambda: store.insert("/memories/a.md", 1, "z"),
        lambda: store.rename("/memories/b.md", "/memories/c.md"),
        lambda: store.delete("/memories/c.md"),
        lambda: store.expire(timedelta(seconds=1), now=datetime.now(timezone.utc) + timedelta(1)),
    ]
    for write in writes:
        moved = intrude_once(store, monkeypatch)
        write()
        monkeypatch.undo()
        assert moved and store.repo.read_commit(store.head() or "").parents == (moved[0],)


def test_str_replace_searches_the_head_it_knows_and_refuses_only_on_the_current_one(
    store: gitmem.MemoryStore, repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = gitmem.MemoryStore.open(repo_path, key)  # another writer (another process)
    store.create("/memories/a.md", "one\n")
    # The search before the lock starts from the head this store authenticated last: the
    # branch is read only under the lock (the metadata ref and the branch), not before it.
    reads: list[str] = []
    real_ref = GitRepo.ref

    def counting(repo: GitRepo, name: str) -> str | None:
        reads.append(name)
        return real_ref(repo, name)

    monkeypatch.setattr(GitRepo, "ref", counting)
    store.str_replace("/memories/a.md", "one", "two")
    assert reads.count(BRANCH) == 1
    # Its head went stale: the other writer changed the file. Text only the new version has
    # is found there (the refusal is never given from the stale head) ...
    other.str_replace("/memories/a.md", "two", "three")
    assert store.str_replace("/memories/a.md", "three", "four")[1].text == "four\n"
    # ... and text only the stale version has is refused on the current one, writing nothing.
    other.str_replace("/memories/a.md", "four", "five")
    head = store.repo.ref(BRANCH)
    with pytest.raises(TextNotFound):
        store.str_replace("/memories/a.md", "four", "six")
    other.delete("/memories/a.md")  # gone from the current head, still in the known one
    with pytest.raises(NotFound):
        store.str_replace("/memories/a.md", "five", "six")
    assert store.repo.ref(BRANCH) == other.head() != head
    assert other.files() == {}


def test_an_edit_with_nothing_to_do_commits_nothing(store: gitmem.MemoryStore) -> None:
    store.create("/memories/a.md", "a\n")
    before = store.head()

    def nothing(head: Operation | None, tree: TreeEditor) -> NoChange[str]:
        return NoChange("nothing")

    assert store.write("custom", nothing) == (None, "nothing")
    assert store.head() == before

    def add(head: Operation | None, tree: TreeEditor) -> Change[int]:
        tree.put_file(parse_path("/memories/b.md"), b"b\n")
        return Change(("/memories/b.md",), 7, {"why": "test"})

    op, result = store.write("custom", add)
    assert result == 7 and op is not None
    assert (op.command, op.paths, op.record.detail) == (
        "custom",
        ("/memories/b.md",),
        {"why": "test"},
    )


def test_a_branch_that_never_stops_moving_is_a_conflict(
    store: gitmem.MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create("/memories/a.md", "a\n")
    store.create("/memories/b.md", "b\n")

    def always_moved(
        self: GitRepo, name: str, new: str, expected: str | None, *, wait: bool = True
    ) -> Durability:
        raise ConflictError("moved")

    monkeypatch.setattr(GitRepo, "update_ref", always_moved)
    with pytest.raises(ConflictError, match="kept moving"):
        store.restore("HEAD~1")


def test_one_options_object_reaches_the_store(repo_path: Path, key: str, tmp_path: Path) -> None:
    limits = gitmem.Limits(max_file_bytes=10)
    options = gitmem.StoreOptions(
        session="s1",
        lock_timeout=2.0,
        state_dir=tmp_path / "state",
        limits=limits,
        secrets="redact",
    )
    tool = gitmem.GitMemoryTool(repo_path, key=key, options=options)
    store = tool.store
    assert (store.session, store.lock_timeout, store.limits, store.secrets) == (
        "s1",
        2.0,
        limits,
        "redact",
    )
    assert store.options == options
    marks = tmp_path / "state" / store.store_id
    assert list(marks.glob("replica-*.mark")) == []  # nothing seen yet
    store.create("/memories/a.md", "x\n")
    assert len(list(marks.glob("replica-*.mark"))) == 1
    with pytest.raises(gitmem.LimitExceeded):
        store.create("/memories/b.md", "much more than ten bytes\n")
    # Keyword settings override the options object's fields; limits=None means the defaults.
    again = gitmem.MemoryStore.open(
        repo_path, key, options=options, session="s2", limits=None, check_rollback=False
    )
    assert (again.session, again.lock_timeout, again.secrets) == ("s2", 2.0, "redact")
    assert again.limits == gitmem.Limits() and again.high_water is None
    assert options.session == "s1"  # the object given is never changed


def test_the_keyword_settings_still_work(repo_path: Path, key: str) -> None:
    tool = gitmem.AsyncGitMemoryTool(repo_path, key=key, session="kw", secrets="allow")
    assert (tool.store.session, tool.store.secrets) == ("kw", "allow")
    assert tool.store.options == gitmem.StoreOptions(session="kw", secrets="allow")


def test_a_bad_secrets_policy_is_refused_before_anything_is_created(
    repo_path: Path, key: str
) -> None:
    with pytest.raises(gitmem.UsageError, match="secrets must be one of"):
        gitmem.StoreOptions(secrets="maybe")  # type: ignore[arg-type]
    with pytest.raises(gitmem.UsageError, match="secrets must be one of"):
        gitmem.GitMemoryTool(repo_path, key=key, secrets="maybe")  # type: ignore[arg-type]
    assert not repo_path.exists()


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"session": ""}, gitmem.UsageError, "session must not be empty"),
        ({"session": 5}, TypeError, "session must be a str or None, not int"),
        (
            {"session": "s" * 100_000},
            gitmem.UsageError,
            "the session label is 100,000 characters long; at most 256 are allowed",
        ),
        ({"session": "é" * 257}, gitmem.UsageError, "is 257 characters long; at most 256"),
        (
            {"session": "a\nb"},
            gitmem.UsageError,
            r"the session label 'a\\nb' contains '\\n', which is not printable text",
        ),
        ({"session": "s\udcff"}, gitmem.UsageError, r"contains '\\udcff', which is not printable"),
        ({"session": "\x1b[31mred"}, gitmem.UsageError, r"contains '\\x1b'"),
        ({"lock_timeout": -1}, gitmem.UsageError, "lock_timeout must be 0 or more seconds"),
        ({"lock_timeout": float("nan")}, gitmem.UsageError, "lock_timeout must be 0 or more"),
        ({"lock_timeout": "30"}, TypeError, "lock_timeout must be a number of seconds, not str"),
        # Accepted, these failed every later memory command ("gitmem failed unexpectedly
        # (AttributeError)"), read "no" as true, or put the state files in the working directory.
        (
            {"limits": {"max_file_bytes": 5}},
            TypeError,
            r"limits must be a gitmem\.Limits, not dict",
        ),
        ({"check_rollback": "no"}, TypeError, "check_rollback must be True or False, not str"),
        ({"state_dir": ""}, gitmem.UsageError, "an empty string is not a path: give the state"),
        ({"remote": 5}, TypeError, "remote must be a str or None, not int"),
    ],
)
def test_a_bad_session_or_lock_timeout_is_refused_before_anything_is_created(
    repo_path: Path, key: str, settings: dict[str, Any], error: type[Exception], message: str
) -> None:
    # An empty label made commits no `log --session` can name, and a label of any length went
    # into every commit's record; a negative or NaN timeout was
    # taken as given, and a string one failed at the first write with "unsupported operand".
    with pytest.raises(error, match=message):
        gitmem.StoreOptions(**settings)
    with pytest.raises(error, match=message):
        gitmem.GitMemoryTool(repo_path, key=key, **settings)
    assert not repo_path.exists()


def test_options_that_are_not_store_options_are_refused(repo_path: Path, key: str) -> None:
    # An AttributeError ('dict' object has no attribute 'check_rollback') before.
    with pytest.raises(
        TypeError, match=r"options must be a gitmem\.StoreOptions or None, not dict"
    ):
        gitmem.GitMemoryTool(repo_path, key=key, options={"session": "x"})  # type: ignore[arg-type]
    assert not repo_path.exists()


def test_an_empty_store_path_is_refused_not_taken_for_the_working_directory(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "" is ".": GitMemoryTool("") said ". exists and is not a gitmem store", and in an empty
    # working directory (a fresh container) made the store there.
    monkeypatch.chdir(tmp_path)
    message = "an empty string is not a path: give the store's path"
    for make in (
        lambda: gitmem.GitMemoryTool("", key=key),
        lambda: gitmem.MemoryStore.open("", key, create=True),
        lambda: gitmem.MemoryStore.init("", key),
        lambda: gitmem.init_store(""),
    ):
        with pytest.raises(gitmem.UsageError, match=message):
            make()
    assert list(tmp_path.iterdir()) == []


def test_a_session_label_of_printable_text_is_kept_as_given(repo_path: Path, key: str) -> None:
    label = "wörker 2 — ünïcode 🎉 " + "x" * 200
    store = gitmem.MemoryStore.open(repo_path, key, create=True, session=label)
    store.create("/memories/a.md", "a\n")
    assert [op.session for op in store.log()] == [label]


def test_history_view_needs_no_tool_and_takes_either_path(store: gitmem.MemoryStore) -> None:
    store.create("/memories/d/a.md", "one\n")
    assert history.view(store, parse_path("/memories/d/a.md")) == history.view(
        store, "/memories/d/a.md"
    )
    assert history.view(store, "/memories/d/").startswith("Here're the files and directories")
    with pytest.raises(gitmem.NotFound) as missing:
        history.view(store, "/memories/nope.md")
    assert str(missing.value) == (
        "The path /memories/nope.md does not exist. Please provide a valid path."
    )


def test_a_path_of_the_wrong_kind_is_named_as_what_it_is(store: gitmem.MemoryStore) -> None:
    # Both ways round: a directory where a file is needed, and a file where a directory is
    # (its listing, or a parent of a new path); each message says which the path is.
    store.create("/memories/a.md", "a\n")
    store.create("/memories/d/b.md", "b\n")
    head = store.head()
    with pytest.raises(NotAFile, match=r"^/memories/d is a directory, not a file$"):
        store.read_text("/memories/d")
    with pytest.raises(NotADirectory, match=r"^/memories/a.md is a file, not a directory$"):
        store.listing("/memories/a.md")
    with pytest.raises(NotADirectory, match=r"^/memories/a.md is a file, not a directory$"):
        store.create("/memories/a.md/x.md", "x")
    with pytest.raises(NotADirectory, match=r"^/memories/a.md is a file, not a directory$"):
        store.rename("/memories/d/b.md", "/memories/a.md/b.md")
    assert store.head() == head
    # One except clause still catches both: a NotADirectory is a NotAFile.
    assert issubclass(NotADirectory, NotAFile) and NotADirectory.exit_code == 1


@pytest.mark.parametrize("name", ["a/" * 2500, "b" * 300, "c" * 300 + "/store.git"])
@pytest.mark.parametrize("how", ["open", "create", "tool"])
def test_a_path_the_file_system_refuses_is_a_storage_error(
    tmp_path: Path, key: str, name: str, how: str
) -> None:
    # A 5,000-character path, or a component over 255 bytes: the CLI said so in one line, the
    # Python API raised the OSError from a stat() of the path.
    path = tmp_path / name
    with pytest.raises(StorageError, match="the file system refused: File name too long") as err:
        if how == "open":
            gitmem.MemoryStore.open(path, key)
        elif how == "create":
            gitmem.MemoryStore.open(path, key, create=True)
        else:
            gitmem.GitMemoryTool(path, key=key)
    assert err.value.exit_code == 1
    assert len(str(err.value)) < 2300  # the path shown cut, as every error shows one
    assert not any(tmp_path.iterdir())  # nothing made


def test_a_file_given_as_the_store_is_said_to_be_a_file(tmp_path: Path) -> None:
    # A key file or an export passed where the store belongs was only "no gitmem store at".
    given = tmp_path / "memory.key"
    given.write_text("not a store\n")
    with pytest.raises(gitmem.errors.NoStore, match="it is a file, not a store directory"):
        gitmem.MemoryStore.open(given, gitmem.generate_key())
    assert given.read_text() == "not a store\n"
    with pytest.raises(gitmem.errors.NoStore, match=r"no gitmem store at \S+none$"):
        gitmem.MemoryStore.open(tmp_path / "none", gitmem.generate_key())
