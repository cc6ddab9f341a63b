"""Files and directories gitmem writes itself: owner-only whatever the umask, atomic, race-free."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import gitmem
from gitmem.errors import GitMemError
from gitmem.fsutil import DIR_MODE, FILE_MODE, atomic_write, make_private_dirs
from gitmem.keysource import write_key_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture(params=[0o022, 0o000], ids=["umask022", "umask000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Run the test under the default umask and under ``umask 0``."""
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_every_missing_parent_is_owner_only(tmp_path: Path, umask: int) -> None:
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    make_private_dirs(existing / "a" / "b" / "c")
    for made in (existing / "a", existing / "a" / "b", existing / "a" / "b" / "c"):
        assert mode(made) == DIR_MODE, made
    assert mode(existing) == 0o755  # directories that existed are left alone


def test_store_state_and_repository_parents_are_owner_only(
    tmp_path: Path, key: str, umask: int
) -> None:
    state = tmp_path / "state" / "gitmem"
    repo = tmp_path / "deep" / "er" / "store.git"
    tool = gitmem.GitMemoryTool(repo, key=key, state_dir=state)
    tool.store.create(gitmem.parse_path("/memories/a.md"), "x\n")
    for made in (
        tmp_path / "state",
        state,
        state / "paths",
        tmp_path / "deep",
        tmp_path / "deep" / "er",
        repo,
    ):
        assert mode(made) == DIR_MODE, made
    for written in [*state.glob("*.json"), *(state / "paths").glob("*.json")]:
        assert mode(written) == FILE_MODE, written


def test_default_state_directory_is_owner_only(
    tmp_path: Path, key: str, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    xdg = tmp_path / "xdg-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(xdg))
    gitmem.GitMemoryTool(tmp_path / "store.git", key=key)
    assert mode(xdg) == DIR_MODE
    assert mode(xdg / "gitmem") == DIR_MODE
    assert mode(xdg / "gitmem" / "paths") == DIR_MODE


def test_key_file_parents_are_owner_only(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "config" / "gitmem" / "keys" / "k.key"
    write_key_file(target, os.urandom(32))
    assert mode(target) == FILE_MODE
    for made in (tmp_path / "config", tmp_path / "config" / "gitmem", target.parent):
        assert mode(made) == DIR_MODE, made


def test_atomic_write_from_many_threads_never_fails(tmp_path: Path) -> None:
    target = tmp_path / "mark.json"
    problems: list[BaseException] = []
    barrier = threading.Barrier(8)

    def write(n: int) -> None:
        barrier.wait()
        for i in range(20):
            try:
                atomic_write(target, f"{n}-{i}".encode())
            except BaseException as exc:  # a thread cannot fail the test itself
                problems.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert mode(target) == FILE_MODE
    assert [p.name for p in tmp_path.iterdir()] == ["mark.json"]  # no temporary file left


def test_eight_threads_opening_with_a_fresh_state_directory(tmp_path: Path, key: str) -> None:
    repo = tmp_path / "store.git"
    gitmem.MemoryStore.open(repo, key, create=True, check_rollback=False)
    problems: list[str] = []
    for round_ in range(10):
        state = tmp_path / f"state{round_}"
        barrier = threading.Barrier(8)

        def open_store(state: Path = state, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                gitmem.MemoryStore.open(repo, key, state_dir=state).head()
            except GitMemError:
                pass  # a documented refusal is allowed; anything else escaping is the bug
            except BaseException as exc:
                problems.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=open_store) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert problems == []
