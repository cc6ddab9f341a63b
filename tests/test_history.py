"""gitmem.history and gitmem.revisions: log filters, diffs, blame, sessions, partial restore,
export/import, the revision and time syntax, and the streaming history walk."""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import gitmem
from gitmem import MemoryStore, history, parse_path
from gitmem import format as fmt
from gitmem.errors import NotAFile, NotFound, UsageError
from gitmem.format import Record
from gitmem.history import FileChange, ImportRefused
from gitmem.revisions import parse_time, split_revision

START = datetime(2025, 6, 1, 10, 0, tzinfo=timezone.utc)
MINUTE = 60 * 10**9


class FakeClock:
    """``time`` as gitmem.store sees it: each commit one minute after the previous one."""

    def __init__(self) -> None:
        self.ns = int(START.timestamp()) * 10**9 - MINUTE

    def time_ns(self) -> int:
        self.ns += MINUTE
        return self.ns

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def tool_for(repo: Path, key: str, session: str) -> Any:
    return gitmem.GitMemoryTool(repo, key=key, session=session)


def build_history(repo: Path, key: str) -> None:
    """Seven operations by three sessions, 10:00 to 10:06 UTC on 2025-06-01.

    1 alice create /memories/notes.md   2 alice str_replace   3 bob insert
    4 bob rename notes.md -> dir/n.md    5 bob create other.md
    6 carol str_replace dir/n.md         7 carol delete other.md
    """
    alice = tool_for(repo, key, "alice")
    alice.call(
        {"command": "create", "path": "/memories/notes.md", "file_text": "one\ntwo\nthree\n"}
    )
    alice.call(
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "two", "new_str": "TWO"}
    )
    bob = tool_for(repo, key, "bob")
    bob.call(
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 3, "insert_text": "four"}
    )
    bob.call(
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/dir/n.md"}
    )
    bob.call({"command": "create", "path": "/memories/other.md", "file_text": "x"})
    carol = tool_for(repo, key, "carol")
    carol.call(
        {"command": "str_replace", "path": "/memories/dir/n.md", "old_str": "one", "new_str": "ONE"}
    )
    carol.call({"command": "delete", "path": "/memories/other.md"})


def built_once(factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """:func:`build_history` in a private home, at fixed times; ``(repository, key)``.

    Writes are fsynced, so tests copy one built repository instead of building their own.
    """
    base = factory.mktemp("history")
    key = gitmem.generate_key()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "HOME": base / "home",
            "XDG_CONFIG_HOME": base / "home" / ".config",
            "XDG_STATE_HOME": base / "home" / ".state",
            "GITMEM_STATE_DIR": base / "state",
        }.items():
            patch.setenv(name, str(value))
        for name in ("GITMEM_KEY", "GITMEM_KEY_FILE", "GITMEM_CONFIG_DIR"):
            patch.delenv(name, raising=False)
        patch.setattr(gitmem.store, "time", FakeClock())
        build_history(base / "store.git", key)
    return base / "store.git", key


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return built_once(tmp_path_factory)


@pytest.fixture
def hist_key(built: tuple[Path, str]) -> str:
    return built[1]


@pytest.fixture
def hist(built: tuple[Path, str], tmp_path: Path, utc: None) -> MemoryStore:
    """A fresh copy of the seven-operation history, opened by session ``tester``."""
    target = tmp_path / "store.git"
    shutil.copytree(built[0], target)
    return MemoryStore.open(target, built[1], session="tester")


def ids(store: MemoryStore) -> list[str]:
    """Commit ids oldest first: ids(store)[0] is operation #1."""
    return [op.commit for op in store.log()][::-1]


# -- times and revisions ----------------------------------------------------------------------


def test_parse_time_forms(utc: None) -> None:
    now = datetime(2025, 6, 10, 12, 0, tzinfo=timezone.utc)
    assert parse_time("2025-06-01", now=now) == datetime(2025, 6, 1, tzinfo=timezone.utc)
    assert parse_time("2025-06-01T14:30:00Z", now=now) == datetime(
        2025, 6, 1, 14, 30, tzinfo=timezone.utc
    )
    assert parse_time("2025-06-01 14:30+02:00", now=now) == datetime(
        2025, 6, 1, 12, 30, tzinfo=timezone.utc
    )
    assert parse_time("90m", now=now) == now - timedelta(minutes=90)
    assert parse_time("2h", now=now) == now - timedelta(hours=2)
    assert parse_time(" 3d ", now=now) == now - timedelta(days=3)
    assert parse_time("1w", now=now) == now - timedelta(weeks=1)
    assert parse_time("3 days ago", now=now) == now - timedelta(days=3)
    assert parse_time("10 minutes ago", now=now) == now - timedelta(minutes=10)
    assert parse_time("now", now=now) == now
    assert parse_time("today", now=now) == datetime(2025, 6, 10, tzinfo=timezone.utc)
    assert parse_time("yesterday", now=now) == datetime(2025, 6, 9, tzinfo=timezone.utc)
    with pytest.raises(UsageError) as info:
        parse_time("soon")
    assert str(info.value) == (
        "invalid time 'soon': use ISO 8601 (2025-06-01, 2025-06-01T14:30:00Z) or a relative "
        "time (90m, 2h, 3d, 1w, '3 days ago', today, yesterday)"
    )
    with pytest.raises(UsageError):
        parse_time("3 fortnights")


def test_split_revision() -> None:
    assert split_revision("HEAD") == ("HEAD", 0)
    assert split_revision("HEAD~3") == ("HEAD", 3)
    assert split_revision("HEAD~") == ("HEAD", 1)
    assert split_revision("HEAD^^") == ("HEAD", 2)
    assert split_revision("abcd~2^") == ("abcd", 3)
    assert split_revision("session:a^b~2") == ("session:a^b", 2)
    assert split_revision("@{2h}~1") == ("@{2h}", 1)
    assert split_revision("@{2025-06-01T10:03:00Z}") == ("@{2025-06-01T10:03:00Z}", 0)
    assert split_revision("HEAD~x") == ("HEAD~x", 0)
    with pytest.raises(UsageError, match="without a closing"):
        split_revision("@{2h")
    with pytest.raises(UsageError, match="unknown revision"):
        split_revision("@{2h}x")


def test_resolve_session_and_time_revisions(hist: MemoryStore) -> None:
    c = ids(hist)
    assert hist.resolve("session:alice") == c[1]
    assert hist.resolve("session:bob") == c[4]
    assert hist.resolve("session:bob~2") == c[2]
    assert hist.resolve("@{2025-06-01T10:03:30Z}") == c[3]
    assert hist.resolve("@{2025-06-01T10:03:00Z}") == c[3]  # at counts
    assert hist.resolve("@{2025-06-01T10:03:30Z}^") == c[2]
    assert hist.resolve("@{1h}") == c[6]  # everything is older than an hour
    assert hist.resolve(c[2][:7]) == c[2]
    assert hist.resolve("HEAD~6") == c[0]
    cases = {
        "session:dave": "unknown revision 'session:dave': no operation of session 'dave'",
        "session:": "unknown revision 'session:': give a session name after 'session:'",
        "@{2025-06-01T09:00:00Z}": (
            "unknown revision '@{2025-06-01T09:00:00Z}': the memory has no operation that old"
        ),
        "HEAD~7": "unknown revision 'HEAD~7': history is not that long",
        "alice": "unknown revision 'alice'",
        "@{someday}": "invalid time 'someday': use ISO 8601 (2025-06-01, 2025-06-01T14:30:00Z) "
        "or a relative time (90m, 2h, 3d, 1w, '3 days ago', today, yesterday)",
    }
    for rev, message in cases.items():
        with pytest.raises(UsageError) as info:
            hist.resolve(rev)
        assert str(info.value) == message


def test_an_ambiguous_prefix_is_a_clear_error(
    hist: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ambiguous(prefix: str) -> str:
        raise ValueError(prefix)

    monkeypatch.setattr(hist.repo, "resolve_prefix", ambiguous)
    # Ambiguous among the objects: the history decides, and here it has none starting so...
    with pytest.raises(UsageError) as info:
        hist.resolve("abcd")
    assert str(info.value) == "unknown revision 'abcd'"
    # ...or two.
    twins = [SimpleNamespace(commit="abcd" + "0" * 36), SimpleNamespace(commit="abcd" + "1" * 36)]
    monkeypatch.setattr(hist, "log", lambda rev=None: iter(twins))
    with pytest.raises(UsageError) as info:
        hist.resolve("abcd")
    assert str(info.value) == "ambiguous revision 'abcd': give more digits"


# -- the history walk -----------------------------------------------------------------------


def _sealed_commit(store: MemoryStore, tree: str, parents: list[str], seq: int) -> str:
    record = Record(seq, time.time_ns(), "sync", "merge", (), "test", {})
    ad = fmt.record_ad(store.keys.store_id, tree, parents)
    message = fmt.encode_message(store.keys.seal_record(record.to_bytes(), ad))
    return store.repo.write_commit(tree, parents, message, time=seq)


def test_log_is_topological_over_merges_and_yields_each_commit_once(
    repo_path: Path, key: str
) -> None:
    store = MemoryStore.open(repo_path, key, create=True, session="s")
    a = store.create(parse_path("/memories/a.md"), "a")
    b = _sealed_commit(store, a.tree, [a.commit], 2)
    c = _sealed_commit(store, a.tree, [a.commit], 2)
    d = _sealed_commit(store, a.tree, [c], 3)
    merge = _sealed_commit(store, a.tree, [b, d], 4)
    store.repo.update_ref("refs/heads/main", merge, a.commit)
    order = [op.commit for op in store.log()]
    assert order[0] == merge and order[-1] == a.commit
    assert sorted(order) == sorted([merge, b, c, d, a.commit])
    assert order.index(d) < order.index(c)
    assert [op.seq for op in store.log()] == [4, 3, 2, 2, 1]


def test_log_streams_without_reading_the_whole_history(hist: MemoryStore) -> None:
    seen: list[str] = []
    real = hist.read_operation

    def counting(oid: str) -> Any:
        seen.append(oid)
        return real(oid)

    hist.read_operation = counting  # type: ignore[method-assign]
    first = next(iter(hist.log()))
    assert first.seq == 7
    assert len(seen) <= 2  # the head (and at most its parent), not all seven


# -- log filters ----------------------------------------------------------------------------


def test_log_path_filter_follows_renames(hist: MemoryStore) -> None:
    ops = history.log(hist, paths=[parse_path("/memories/dir/n.md")])
    assert [(op.seq, op.command) for op in ops] == [
        (6, "str_replace"),
        (4, "rename"),
        (3, "insert"),
        (2, "str_replace"),
        (1, "create"),
    ]
    # A directory filter matches what is below it, and what moved into it.
    assert [op.seq for op in history.log(hist, paths=[parse_path("/memories/dir")])] == [
        6,
        4,
        3,
        2,
        1,
    ]
    assert [op.seq for op in history.log(hist, paths=[parse_path("/memories/other.md")])] == [7, 5]
    assert [op.seq for op in history.log(hist, paths=[parse_path("/memories/nothing")])] == []


def test_log_session_command_time_and_count_filters(hist: MemoryStore) -> None:
    assert [op.seq for op in history.log(hist, session="bob")] == [5, 4, 3]
    assert [op.seq for op in history.log(hist, command="str_replace")] == [6, 2]
    since = datetime(2025, 6, 1, 10, 2, tzinfo=timezone.utc)
    until = datetime(2025, 6, 1, 10, 4, tzinfo=timezone.utc)
    assert [op.seq for op in history.log(hist, since=since, until=until)] == [5, 4, 3]
    assert [op.seq for op in history.log(hist, session="bob", max_count=2)] == [5, 4]
    assert list(history.log(hist, max_count=0)) == []
    assert [op.seq for op in history.log(hist, "HEAD~3")] == [4, 3, 2, 1]


# -- diffs ----------------------------------------------------------------------------------


def test_changes_of_each_operation(hist: MemoryStore) -> None:
    ops = {op.seq: op for op in hist.log()}
    create = history.changes(hist, ops[1])
    assert create == [FileChange("added", "/memories/notes.md", None, "one\ntwo\nthree\n")]
    assert create[0].patch_lines() == [
        "diff /memories/notes.md",
        "new file",
        "--- /dev/null",
        "+++ /memories/notes.md",
        "@@ -0,0 +1,3 @@",
        "+one",
        "+two",
        "+three",
    ]
    assert (create[0].added, create[0].removed) == (3, 0)
    edit = history.changes(hist, ops[2])[0]
    assert edit.status == "modified"
    assert edit.patch_lines() == [
        "diff /memories/notes.md",
        "--- /memories/notes.md",
        "+++ /memories/notes.md",
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+TWO",
        " three",
    ]
    rename = history.changes(hist, ops[4])
    assert [(c.status, c.old_path, c.path) for c in rename] == [
        ("renamed", "/memories/notes.md", "/memories/dir/n.md")
    ]
    assert rename[0].patch_lines() == [
        "diff /memories/notes.md -> /memories/dir/n.md",
        "rename from /memories/notes.md",
        "rename to /memories/dir/n.md",
    ]
    assert rename[0].to_json() == {
        "status": "renamed",
        "path": "/memories/dir/n.md",
        "old_path": "/memories/notes.md",
        "added": 0,
        "removed": 0,
    }
    no_newline = history.changes(hist, ops[7])[0]
    assert no_newline.patch_lines() == [
        "diff /memories/other.md",
        "deleted file",
        "--- /memories/other.md",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "-x",
        "\\ No newline at end of file",
    ]
    assert no_newline.to_json(with_diff=True)["diff"] == "\n".join(no_newline.patch_lines()) + "\n"


def test_diff_between_revisions_and_under_paths(hist: MemoryStore) -> None:
    changes = history.diff(hist, "HEAD~6")
    assert [(c.status, c.path, c.old_path) for c in changes] == [
        ("added", "/memories/dir/n.md", None),
        ("deleted", "/memories/notes.md", None),
    ]
    assert history.diff(hist, "HEAD~6", "HEAD") == changes
    # Moved without a change in between: one rename.
    moved = history.diff(hist, "HEAD~4", "HEAD~3")
    assert [(c.status, c.path, c.old_path) for c in moved] == [
        ("renamed", "/memories/dir/n.md", "/memories/notes.md")
    ]
    assert history.diff(hist, "HEAD", "HEAD") == []
    only = history.diff(hist, "HEAD~3", "HEAD~2", [parse_path("/memories/other.md")])
    assert [(c.status, c.path) for c in only] == [("added", "/memories/other.md")]
    assert history.diff(hist, "HEAD~3", "HEAD~2", [parse_path("/memories/dir")]) == []


# -- blame, view, cat, sessions -------------------------------------------------------------


def test_blame_follows_renames_to_the_line_author(hist: MemoryStore) -> None:
    c = ids(hist)
    lines = history.blame(hist, parse_path("/memories/dir/n.md"))
    assert [(b.number, b.text, b.operation.commit) for b in lines] == [
        (1, "ONE", c[5]),
        (2, "TWO", c[1]),
        (3, "three", c[0]),
        (4, "four", c[2]),
    ]
    assert lines[0].to_json() == {
        "line": 1,
        "text": "ONE",
        "commit": c[5],
        "seq": 6,
        "session": "carol",
        "command": "str_replace",
        "time": "2025-06-01T10:05:00Z",
    }
    old = history.blame(hist, parse_path("/memories/notes.md"), "HEAD~5")
    assert [(b.text, b.operation.session) for b in old] == [
        ("one", "alice"),
        ("TWO", "alice"),
        ("three", "alice"),
    ]
    with pytest.raises(NotFound, match=r"^/memories/notes.md does not exist$"):
        history.blame(hist, parse_path("/memories/notes.md"))
    with pytest.raises(NotAFile):
        history.blame(hist, parse_path("/memories/dir"))


def test_view_is_the_tools_view_and_cat_the_raw_text(hist: MemoryStore, hist_key: str) -> None:
    listing = history.view(hist, "/memories")
    assert listing == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items and node_modules:\n4K\t/memories\n4K\t/memories/dir/\n19B\t/memories/dir/n.md"
    )
    assert history.view(hist, "/memories/dir/n.md", view_range=[2, 3]) == (
        "Here's the content of /memories/dir/n.md with line numbers:\n     2\tTWO\n     3\tthree"
    )
    assert history.view(hist, "/memories/notes.md", "HEAD~4").startswith(
        "Here's the content of /memories/notes.md with line numbers:\n     1\tone\n"
    )
    tool = gitmem.GitMemoryTool(hist.path, key=hist_key)
    for path in ["/memories", "/memories/", "/memories/dir/n.md"]:
        assert history.view(hist, path) == tool.call({"command": "view", "path": path})
    with pytest.raises(NotFound) as info:
        history.view(hist, "/memories/notes.md")
    assert str(info.value) == (
        "The path /memories/notes.md does not exist. Please provide a valid path."
    )
    with pytest.raises(UsageError):
        history.view(hist, "/etc/passwd")
    assert history.cat(hist, parse_path("/memories/dir/n.md")) == "ONE\nTWO\nthree\nfour\n"
    assert history.cat(hist, parse_path("/memories/other.md"), "HEAD~1") == "x"
    with pytest.raises(NotFound, match=r"^/memories/other.md does not exist at HEAD~6$"):
        history.cat(hist, parse_path("/memories/other.md"), "HEAD~6")


def test_sessions_summaries(hist: MemoryStore) -> None:
    c = ids(hist)
    found = [s.to_json() for s in history.sessions(hist)]
    assert found == [
        {
            "session": "carol",
            "first": "2025-06-01T10:05:00Z",
            "last": "2025-06-01T10:06:00Z",
            "first_commit": c[5],
            "last_commit": c[6],
            "operations": 2,
            "commands": {"delete": 1, "str_replace": 1},
            "paths": ["/memories/dir/n.md", "/memories/other.md"],
        },
        {
            "session": "bob",
            "first": "2025-06-01T10:02:00Z",
            "last": "2025-06-01T10:04:00Z",
            "first_commit": c[2],
            "last_commit": c[4],
            "operations": 3,
            "commands": {"create": 1, "insert": 1, "rename": 1},
            "paths": ["/memories/dir/n.md", "/memories/notes.md", "/memories/other.md"],
        },
        {
            "session": "alice",
            "first": "2025-06-01T10:00:00Z",
            "last": "2025-06-01T10:01:00Z",
            "first_commit": c[0],
            "last_commit": c[1],
            "operations": 2,
            "commands": {"create": 1, "str_replace": 1},
            "paths": ["/memories/notes.md"],
        },
    ]


# -- restore --------------------------------------------------------------------------------


def test_partial_restore_is_one_commit_of_just_those_paths(hist: MemoryStore) -> None:
    c = ids(hist)
    before = hist.files()
    preview = history.restore_preview(hist, "HEAD~1", [parse_path("/memories/other.md")])
    assert [(p.status, p.path) for p in preview] == [("added", "/memories/other.md")]
    assert hist.head() == c[6]  # a preview writes nothing
    op = hist.restore("HEAD~1", [parse_path("/memories/other.md")])
    assert op is not None
    assert (op.command, op.paths, op.parents) == ("restore", ("/memories/other.md",), (c[6],))
    assert op.record.detail == {"from": c[5], "from_seq": 6, "paths": ["/memories/other.md"]}
    assert hist.files() == {**before, "/memories/other.md": "x"}
    # A path absent at the source is removed; a directory comes back whole.
    gone = hist.restore(c[0], [parse_path("/memories/dir"), parse_path("/memories/notes.md")])
    assert gone is not None
    assert gone.paths == ("/memories/dir/n.md", "/memories/notes.md")
    assert hist.files() == {"/memories/notes.md": "one\ntwo\nthree\n", "/memories/other.md": "x"}
    assert hist.directories() == []
    assert [op.seq for op in hist.log()][:2] == [9, 8]


def test_partial_restore_refusals(hist: MemoryStore) -> None:
    head = hist.head()
    with pytest.raises(NotFound) as info:
        hist.restore("HEAD~1", [parse_path("/memories/never.md")])
    assert str(info.value) == f"/memories/never.md exists neither at {ids(hist)[5][:10]} nor now"
    hist.delete(parse_path("/memories/dir"))
    hist.create(parse_path("/memories/dir"), "now a file")
    head = hist.head()
    with pytest.raises(UsageError) as blocked:
        hist.restore("HEAD~3", [parse_path("/memories/dir/n.md")])
    assert str(blocked.value) == (
        "cannot restore /memories/dir/n.md: /memories/dir is a file now; restore or delete it too"
    )
    assert hist.head() == head


def test_whole_restore_with_the_root_as_path(hist: MemoryStore) -> None:
    op = hist.restore("HEAD~6", [parse_path("/memories")])
    assert op is not None
    assert op.record.detail == {"from": ids(hist)[0], "from_seq": 1}
    assert hist.files() == {"/memories/notes.md": "one\ntwo\nthree\n"}


def test_a_restore_that_changes_nothing_makes_no_commit(hist: MemoryStore) -> None:
    # It made an empty `restore` commit in the audit log; the memory already matched.
    head = hist.head()
    assert hist.restore("HEAD") is None
    assert hist.restore("HEAD", [parse_path("/memories/dir")]) is None
    # HEAD~1 differs only in /memories/other.md: restoring anything else changes nothing.
    assert hist.restore("HEAD~1", [parse_path("/memories/dir/n.md")]) is None
    assert hist.head() == head
    # An empty directory is memory too: bringing one back is a change, even with no file.
    hist.create(parse_path("/memories/e/f.md"), "f\n")
    hist.delete(parse_path("/memories/e/f.md"))
    with_dir = hist.head()
    hist.delete(parse_path("/memories/e"))
    assert hist.directories() == ["/memories/dir"]
    op = hist.restore(with_dir or "")
    assert op is not None and op.paths == ()
    assert hist.directories() == ["/memories/dir", "/memories/e"]
    assert hist.restore(with_dir or "") is None


# -- export and import ----------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_export_writes_owner_only_files(hist: MemoryStore, tmp_path: Path) -> None:
    hist.create(parse_path("/memories/.hidden/a b.md"), "hidden but memory\n")
    out = tmp_path / "out"
    summary = history.export(hist, out)
    assert summary.to_json() == {
        "dir": str(out),
        "commit": hist.head(),
        "files": 2,
        "directories": 2,
    }
    assert (out / "dir" / "n.md").read_text() == "ONE\nTWO\nthree\nfour\n"
    assert (out / ".hidden" / "a b.md").read_text() == "hidden but memory\n"
    assert {_mode(p) for p in [out, out / "dir", out / ".hidden"]} == {0o700}
    assert {_mode(p) for p in [out / "dir" / "n.md", out / ".hidden" / "a b.md"]} == {0o600}
    with pytest.raises(UsageError) as info:
        history.export(hist, out)
    assert str(info.value) == f"{out} is not empty; pass --force to write into it anyway"
    old = history.export(hist, out, "HEAD~3", force=True)  # operation #5
    assert (old.files, old.commit, (out / "other.md").read_text()) == (2, ids(hist)[4], "x")
    assert (out / "dir" / "n.md").read_text() == "one\nTWO\nthree\nfour\n"


def test_export_never_follows_a_symlink(hist: MemoryStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "dir").symlink_to(outside)
    with pytest.raises(UsageError, match="it exists and is not a directory"):
        history.export(hist, out, force=True)
    assert list(outside.iterdir()) == []
    (out / "dir").unlink()
    (out / "dir").mkdir()
    (out / "dir" / "n.md").symlink_to(outside / "target")
    with pytest.raises(UsageError, match="cannot write"):
        history.export(hist, out, force=True)
    assert list(outside.iterdir()) == []


def test_export_then_import_round_trips(hist: MemoryStore, tmp_path: Path, hist_key: str) -> None:
    out = tmp_path / "out"
    history.export(hist, out)
    fresh = MemoryStore.open(tmp_path / "fresh.git", hist_key, create=True, session="importer")
    op = history.import_(fresh, out)
    assert op is not None
    assert (op.command, op.paths, op.record.detail) == (
        "import",
        ("/memories/dir/n.md",),
        {"files": 1, "replace": False},
    )
    assert fresh.files() == hist.files()
    assert [o.seq for o in fresh.log()] == [1]


def test_import_merges_or_replaces(hist: MemoryStore, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "empty").mkdir(parents=True)
    (src / "dir").mkdir()
    (src / "dir" / "n.md").write_text("ONE\nTWO\nthree\nfour\n")  # unchanged
    (src / "new.md").write_text("new\n")
    merged = history.import_(hist, src)
    assert merged is not None
    assert merged.paths == ("/memories/new.md",)
    assert sorted(hist.files()) == ["/memories/dir/n.md", "/memories/new.md"]
    assert hist.directories() == ["/memories/dir", "/memories/empty"]
    hist.create(parse_path("/memories/extra.md"), "not in src")
    replaced = history.import_(hist, src, replace=True)
    assert replaced is not None
    assert replaced.paths == ("/memories/extra.md",)
    assert sorted(hist.files()) == ["/memories/dir/n.md", "/memories/new.md"]


def test_an_import_that_changes_nothing_makes_no_commit(hist: MemoryStore, tmp_path: Path) -> None:
    src = tmp_path / "src"
    history.export(hist, src)
    head = hist.head()
    assert history.import_(hist, src) is None
    assert history.import_(hist, src, replace=True) is None
    (src / "empty").mkdir()  # a new empty directory is a change
    op = history.import_(hist, src)
    assert op is not None and op.paths == ()
    assert history.import_(hist, src) is None
    assert [o.commit for o in hist.log()][1] == head


def test_an_import_refusal_shows_the_names_escaped(hist: MemoryStore, tmp_path: Path) -> None:
    # A refused file's name was printed raw: a name from an untrusted source could drive the
    # terminal that shows the error.
    src = tmp_path / "src"
    src.mkdir()
    (src / "a\x1b[2Jb.md").write_text("x\n")
    (src / "bad\x07.md").write_bytes(b"\xff")
    with pytest.raises(history.ImportRefused) as info:
        history.import_(hist, src)
    assert info.value.problems == [
        "a\\x1b[2Jb.md: it contains a control character",
        "bad\\x07.md: it contains a control character",
    ]
    assert "\x1b" not in str(info.value) and "\x07" not in str(info.value)


def test_import_refuses_by_name_and_imports_nothing(hist: MemoryStore, tmp_path: Path) -> None:
    head = hist.head()
    src = tmp_path / "src"
    (src / "ok").mkdir(parents=True)
    (src / "ok" / "fine.md").write_text("fine\n")
    (src / "latin1.md").write_bytes("caf\xe9\n".encode("latin-1"))
    limit = hist.limits.max_file_bytes
    assert limit is not None
    (src / "big.md").write_text("x" * (limit + 1))
    (src / "link.md").symlink_to(src / "ok" / "fine.md")
    (src / ".GIT").mkdir()
    os.mkfifo(src / "pipe")
    with pytest.raises(ImportRefused) as info:
        history.import_(hist, src)
    size = (src / "big.md").stat().st_size
    assert info.value.problems == [
        ".GIT: '.git' components are not allowed",
        f"big.md: {size:,} bytes, over the {limit:,}-byte file limit",
        "latin1.md: not UTF-8 text",
        "link.md: a symbolic link",
        "pipe: not a regular file",
    ]
    assert str(info.value).startswith("nothing was imported: 5 files refused: .GIT: ")
    assert info.value.exit_code == 1
    assert hist.head() == head


def test_import_refuses_two_spellings_of_one_name(hist: MemoryStore, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "caf\u00e9.md").write_text("composed")
    (src / "cafe\u0301.md").write_text("decomposed")
    with pytest.raises(ImportRefused) as info:
        history.import_(hist, src)
    assert info.value.problems == ["caf\u00e9.md: the same memory path as cafe\u0301.md"]


def test_import_refuses_what_the_memory_has_in_the_way(hist: MemoryStore, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "dir" / "n.md").mkdir(parents=True)  # a directory where the memory has a file
    (src / "dir" / "n.md" / "x.md").write_text("x")
    head = hist.head()
    with pytest.raises(ImportRefused) as info:
        history.import_(hist, src)
    assert info.value.problems == [
        "/memories/dir/n.md: /memories/dir/n.md is a file in the memory",
        "/memories/dir/n.md/x.md: a directory or file in the memory is in the way",
    ]
    assert hist.head() == head


def test_import_applies_the_secret_policy(hist: MemoryStore, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "keys.md").write_text("aws = AKIAIOSFODNN7EXAMPLQ\n")
    (src / "fine.md").write_text("fine\n")
    head = hist.head()
    with pytest.raises(ImportRefused) as info:
        history.import_(hist, src)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("/memories/keys.md: ")
    assert "AKIA" not in str(info.value)
    assert hist.head() == head


# -- the benchmark's bulk builder makes real commits ----------------------------------------


def test_bench_builder_makes_authentic_commits(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location(
        "bench_log", Path(__file__).parent.parent / "benchmarks" / "bench_log.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "_COMMITS_PER_PACK", 40)
    path = tmp_path / "bench.git"
    bench.build_store(path, key, 130)
    store = MemoryStore.open(path, key)
    report = store.verify()
    assert report.ok, report.problems
    assert report.commits == 130
    assert [op.seq for op in store.log()] == list(range(130, 0, -1))
    assert {op.command for op in store.log()} == {"create", "insert", "rename", "str_replace"}
    # Four of the builder's, and the one init's checkpoint published the metadata blob in.
    assert len(list((path / "objects" / "pack").glob("*.pack"))) == 5


def test_log_time_bounds_must_be_aware_datetimes(hist: MemoryStore) -> None:
    # datetime(2025, 1, 1) or "2d" failed deep in the walk: "can't compare offset-naive and
    # offset-aware datetimes", "'<' not supported between ... 'str'".
    with pytest.raises(UsageError, match=r"^`since` must be a timezone-aware datetime"):
        list(history.log(hist, since=datetime(2025, 1, 1)))
    with pytest.raises(TypeError, match=r"^`until` must be a datetime \(gitmem.revisions"):
        list(history.log(hist, until="2d"))  # type: ignore[arg-type]
    aware = datetime(2025, 1, 1, tzinfo=timezone.utc)
    assert list(history.log(hist, since=aware)) == list(history.log(hist, since=aware))
