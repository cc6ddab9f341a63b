"""Expiry: what "untouched" means, one restorable commit, dry runs, the walk's early stop, CLI."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import gitmem
import gitmem.store
from gitmem import GitMemoryTool, MemoryStore, parse_duration
from gitmem.cli import main
from gitmem.expiry import last_touches

EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)


class FakeTime:
    """``time`` as gitmem.store sees it, with a settable wall clock for commit records."""

    def __init__(self) -> None:
        self.ns = 0

    def set(self, moment: datetime) -> None:
        self.ns = int(moment.timestamp()) * 10**9

    def time_ns(self) -> int:
        self.ns += 1_000_000  # successive commits stay in order, 1 ms apart
        return self.ns

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    fake.set(EPOCH)
    monkeypatch.setattr(gitmem.store, "time", fake)
    return fake


def run(tool: GitMemoryTool, command: str, **fields: Any) -> str:
    return tool.call({"command": command, **fields})


def paths_of(store: MemoryStore) -> list[str]:
    return sorted(store.files())


def test_parse_duration() -> None:
    assert parse_duration("90d") == timedelta(days=90)
    assert parse_duration(" 2W ") == timedelta(weeks=2)
    assert parse_duration("1d12h") == timedelta(hours=36)
    assert parse_duration("30m") == timedelta(minutes=30)
    assert parse_duration("45s") == timedelta(seconds=45)
    for bad in ("", "90", "d", "1.5d", "-1d", "90x", "1d 2h"):
        with pytest.raises(gitmem.UsageError):
            parse_duration(bad)
    with pytest.raises(gitmem.UsageError) as info:
        parse_duration("90x")
    assert str(info.value) == (
        "invalid duration '90x': use a number and a unit, e.g. 90d, 12h, 2w or 1d12h "
        "(units: s, m, h, d, w)"
    )


def test_last_touch_is_the_newest_commit_writing_the_file(
    tool: GitMemoryTool, clock: FakeTime
) -> None:
    for name in ("a.md", "b.md", "c.md", "dir/x.md"):
        run(tool, "create", path=f"/memories/{name}", file_text=f"{name}\n")
    clock.set(EPOCH + 10 * DAY)
    run(tool, "str_replace", path="/memories/a.md", old_str="a", new_str="A")
    clock.set(EPOCH + 20 * DAY)
    run(tool, "rename", old_path="/memories/c.md", new_path="/memories/c2.md")
    run(tool, "rename", old_path="/memories/dir", new_path="/memories/dir2")
    clock.set(EPOCH + 30 * DAY)
    run(tool, "view", path="/memories/b.md")  # reads never count
    run(tool, "create", path="/memories/gone.md", file_text="")
    run(tool, "delete", path="/memories/gone.md")
    run(tool, "insert", path="/memories/c2.md", insert_line=0, insert_text="top")
    store = tool.store
    ages = {str(p): a.last_touched for p, a in last_touches(store, store.head_operation()).items()}
    assert {p: (t - EPOCH).days for p, t in ages.items()} == {
        "/memories/a.md": 10,
        "/memories/b.md": 0,
        "/memories/c2.md": 30,
        "/memories/dir2/x.md": 20,
    }

    head = store.head()
    assert head is not None
    plan = store.expire(timedelta(days=15), now=EPOCH + 30 * DAY, dry_run=True)
    assert store.head() == head, "a dry run wrote"
    assert plan.dry_run and plan.operation is None
    assert [str(f.path) for f in plan.expired] == ["/memories/b.md", "/memories/a.md"]
    assert (plan.cutoff, plan.kept) == (EPOCH + 15 * DAY, 2)

    before = store.files()
    result = store.expire(timedelta(days=15), now=EPOCH + 30 * DAY)
    assert not result.dry_run and result.expired == plan.expired
    op = result.operation
    assert op is not None and op.parents == (head,)
    assert [o.commit for o in store.log()][:2] == [op.commit, head]
    assert (op.command, op.paths, op.session) == (
        "expire",
        ("/memories/b.md", "/memories/a.md"),
        "test-session",
    )
    assert op.record.detail == {
        "older_than_seconds": 15 * 86400.0,
        "cutoff": "2025-01-16T00:00:00Z",
    }
    assert paths_of(store) == ["/memories/c2.md", "/memories/dir2/x.md"]
    assert store.directories() == ["/memories/dir2"]
    assert result.to_json()["expired"][0] == {
        "path": "/memories/b.md",
        "last_touched": "2025-01-01T00:00:00.002000Z",
        "commit": plan.expired[0].commit,
    }

    # One restore of the parent brings back exactly what expired.
    store.restore(head)
    assert store.files() == before
    assert store.verify().ok


def test_nothing_to_expire_makes_no_commit(tool: GitMemoryTool, clock: FakeTime) -> None:
    empty = tool.store.expire(timedelta(days=1), now=EPOCH)
    assert (empty.expired, empty.kept, empty.operation, empty.dry_run) == ((), 0, None, False)
    run(tool, "create", path="/memories/a.md", file_text="a")
    head = tool.store.head()
    result = tool.store.expire(timedelta(days=1), now=EPOCH + DAY)
    assert (result.expired, result.kept, result.operation) == ((), 1, None)
    assert tool.store.head() == head


def test_restore_touches_only_what_it_changed(tool: GitMemoryTool, clock: FakeTime) -> None:
    run(tool, "create", path="/memories/a.md", file_text="a")
    run(tool, "create", path="/memories/b.md", file_text="b")
    clock.set(EPOCH + 5 * DAY)
    run(tool, "str_replace", path="/memories/a.md", old_str="a", new_str="A")
    clock.set(EPOCH + 10 * DAY)
    tool.store.restore("HEAD~1")
    result = tool.store.expire(timedelta(days=5), now=EPOCH + 12 * DAY)
    assert [str(f.path) for f in result.expired] == ["/memories/b.md"]
    assert paths_of(tool.store) == ["/memories/a.md"]


def test_walk_stops_once_every_file_is_dated(
    tool: GitMemoryTool, clock: FakeTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(tool, "create", path="/memories/log.md", file_text="")
    for i in range(25):
        run(tool, "insert", path="/memories/log.md", insert_line=i, insert_text=f"entry {i}")
    run(tool, "create", path="/memories/new.md", file_text="")
    store = tool.store
    pulled: list[str] = []
    real_log = store.log

    def counting_log(rev: str | None = None) -> Iterator[gitmem.Operation]:
        for op in real_log(rev):
            pulled.append(op.command)
            yield op

    monkeypatch.setattr(store, "log", counting_log)
    store.expire(timedelta(days=1), now=EPOCH, dry_run=True)
    assert pulled == ["create", "insert"]


def test_bad_arguments(tool: GitMemoryTool) -> None:
    with pytest.raises(gitmem.UsageError) as info:
        tool.store.expire(timedelta(0))
    assert str(info.value) == "the expiry age must be a positive duration"
    with pytest.raises(gitmem.UsageError) as info:
        tool.store.expire(DAY, now=datetime(2025, 1, 1))
    assert str(info.value) == "`now` must be a timezone-aware datetime"
    # "90d" as on the command line, or seconds: said to be not "a positive duration".
    for wrong in ("90d", 3600):
        with pytest.raises(TypeError) as wrong_type:
            tool.store.expire(wrong, dry_run=True)  # type: ignore[arg-type]
        assert str(wrong_type.value) == (
            "older_than must be a datetime.timedelta (gitmem.parse_duration('90d') gives one), "
            f"not {type(wrong).__name__}"
        )


def test_cli_expire(repo_path: Path, key: str, clock: FakeTime) -> None:
    tool = GitMemoryTool(repo_path, key=key, session="agent")
    clock.set(datetime.now(timezone.utc) - 200 * DAY)
    run(tool, "create", path="/memories/old.md", file_text="old")
    clock.set(datetime.now(timezone.utc) - 10 * DAY)
    run(tool, "create", path="/memories/recent.md", file_text="recent")
    old = tool.store.head_operation()
    assert old is not None
    runner = CliRunner()
    env = {"GITMEM_KEY": key}
    base = ["--repo", str(repo_path), "expire", "--older-than", "90d"]

    dry = runner.invoke(main, [*base, "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    first = next(iter(tool.store.log(old.parents[0])))
    when = first.record.time.strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = dry.output.splitlines()
    assert lines[0] == f"would remove  /memories/old.md  (last written {when}, {first.commit[:10]})"
    assert lines[1].startswith("Dry run: 1 of 2 files untouched since ")
    assert lines[1].endswith(" UTC; nothing was written.")
    assert tool.store.head() == old.commit

    as_json = runner.invoke(main, [*base, "--dry-run", "--json"], env=env)
    body = json.loads(as_json.output)
    assert (body["dry_run"], body["commit"], body["kept"]) == (True, None, 1)
    assert [e["path"] for e in body["expired"]] == ["/memories/old.md"]
    assert body["older_than_seconds"] == 90 * 86400.0

    done = runner.invoke(main, base, env=env)
    assert done.exit_code == 0, done.output
    op = next(tool.store.log())
    assert (op.command, op.paths, op.session) == ("expire", ("/memories/old.md",), "cli")
    lines = done.output.splitlines()
    assert lines[0] == f"removed  /memories/old.md  (last written {when}, {first.commit[:10]})"
    assert lines[1].startswith("Removed 1 of 2 files untouched since ")
    assert lines[1].endswith(
        f" in commit {op.commit[:10]}; `gitmem restore {old.commit[:10]}` brings them back."
    )
    assert paths_of(tool.store) == ["/memories/recent.md"]

    again = runner.invoke(main, base, env=env)
    assert again.output.startswith("Nothing to expire: the 1 file was written since ")

    back = runner.invoke(main, ["--repo", str(repo_path), "restore", old.commit[:10]], env=env)
    assert back.exit_code == 0, back.output
    assert paths_of(tool.store) == ["/memories/old.md", "/memories/recent.md"]

    bad = runner.invoke(main, ["--repo", str(repo_path), "expire", "--older-than", "soon"], env=env)
    assert bad.exit_code == 2
    assert bad.output == (
        "gitmem: error: invalid duration 'soon': use a number and a unit, e.g. 90d, 12h, 2w or "
        "1d12h (units: s, m, h, d, w)\n"
    )
