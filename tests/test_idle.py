"""A store open for a long time is a plain git repository within moments of its last write:
its logged writes are published once the writer goes idle (gitmem/idle.py)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

import gitmem
from gitmem import MemoryStore
from gitmem.errors import UsageError
from gitmem.options import StoreOptions
from gitmem.paths import parse


def git_log(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "--git-dir", str(repo), "log", "--format=%H"], capture_output=True, text=True
    )


def until(check: object, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def idle_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("gitmem idle publish")]


@pytest.mark.needs_log
def test_plain_git_reads_an_open_store_soon_after_its_last_write(repo_path: Path, key: str) -> None:
    tool = gitmem.GitMemoryTool(repo_path, key=key, publish_idle=0.2)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "hello\n"})
    head = tool.store.head()
    # Until then plain git refuses it (the redo log holds the write); the tool stays open.
    assert until(lambda: git_log(repo_path).returncode == 0)
    assert git_log(repo_path).stdout.split() == [head]
    clone = subprocess.run(
        ["git", "clone", "-q", "--bare", str(repo_path), str(repo_path.parent / "copy.git")],
        capture_output=True,
        text=True,
    )
    assert clone.returncode == 0, clone.stderr
    assert until(lambda: not idle_threads())  # nothing pending: no thread left behind
    tool.call({"command": "create", "path": "/memories/b.md", "file_text": "again\n"})
    assert until(lambda: git_log(repo_path).stdout.split()[:1] == [tool.store.head()])
    tool.close()


@pytest.mark.needs_log
def test_a_burst_of_writes_is_published_once_after_it(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore.init(repo_path, key, publish_idle=0.5)
    published: list[float] = []
    real = store.checkpoint

    def counted() -> None:
        published.append(time.monotonic())
        real()

    monkeypatch.setattr(store, "checkpoint", counted)
    for i in range(20):
        store.create(parse(f"/memories/n{i}.md"), f"{i}\n")
    last = time.monotonic()
    assert until(lambda: bool(published))
    assert until(lambda: git_log(repo_path).returncode == 0)
    time.sleep(0.6)
    assert len(published) == 1 and published[0] >= last
    assert len(git_log(repo_path).stdout.split()) == 20


@pytest.mark.needs_log
def test_without_idle_publishing_writes_wait_for_close(repo_path: Path, key: str) -> None:
    store = MemoryStore.init(repo_path, key, publish_idle=None)
    store.create(parse("/memories/a.md"), "x\n")
    time.sleep(0.3)
    assert git_log(repo_path).returncode != 0
    assert not idle_threads()
    store.close()
    assert git_log(repo_path).returncode == 0


def test_the_delay_comes_from_the_environment_or_the_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GITMEM_PUBLISH_IDLE")
    assert StoreOptions().publish_idle == 1.0
    for text, value in (("2.5", 2.5), ("0", 0.0), ("off", None), ("OFF", None), (" ", 1.0)):
        monkeypatch.setenv("GITMEM_PUBLISH_IDLE", text)
        assert StoreOptions().publish_idle == value
    assert StoreOptions(publish_idle=3).publish_idle == 3
    for bad in ("soon", "-1", "inf", "nan"):
        monkeypatch.setenv("GITMEM_PUBLISH_IDLE", bad)
        with pytest.raises(UsageError, match="GITMEM_PUBLISH_IDLE must be a number of seconds"):
            StoreOptions()
    monkeypatch.setenv("GITMEM_PUBLISH_IDLE", "1")
    with pytest.raises(UsageError, match="publish_idle must be 0 or more seconds"):
        StoreOptions(publish_idle=-1)
    with pytest.raises(TypeError, match="publish_idle must be a number of seconds or None"):
        StoreOptions(publish_idle="1")  # type: ignore[arg-type]


def test_a_failed_idle_publish_is_a_warning_and_the_write_stays(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore.init(repo_path, key, publish_idle=0.05)

    def failing() -> None:
        raise gitmem.errors.StorageError("disk full")

    monkeypatch.setattr(store, "checkpoint", failing)
    store.create(parse("/memories/a.md"), "kept\n")
    assert until(lambda: "after they went idle failed (disk full)" in caplog.text)
    assert store.files() == {"/memories/a.md": "kept\n"}
