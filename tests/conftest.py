"""Hermetic test setup: no user git config, no user state, a fresh key and store per test."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

import gitmem
import gitmem.git.redo
from gitmem.git import flush as git_flush

# Automatic maintenance off for the whole session, module-scoped fixtures included (the hermetic
# fixture below sets it again for each test): see hermetic.
os.environ["GITMEM_GC_AUTO"] = "0"
# Publishing after a writer goes idle off likewise: many tests look at what the redo log holds
# before a checkpoint, which a background publish would move at moments that depend on load.
# tests/test_idle.py turns it on.
os.environ["GITMEM_PUBLISH_IDLE"] = "off"


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blank git's global/system config and keep gitmem's per-user state inside the test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    # Many tests find, corrupt or count loose objects: automatic packing would move them at
    # moments that depend on object ids. The tests of maintenance turn it back on.
    monkeypatch.setenv("GITMEM_GC_AUTO", "0")
    monkeypatch.setenv("GITMEM_PUBLISH_IDLE", "off")
    for name in (
        "GITMEM_KEY",
        "GITMEM_KEY_FILE",
        "GITMEM_PASSPHRASE",
        "GITMEM_REPO",
        "GITMEM_STATE_DIR",
        "GITMEM_CONFIG_DIR",
        "ANTHROPIC_API_KEY",
        "NO_COLOR",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def no_publish_at_exit() -> Iterator[None]:
    """The stores a test writes die with its temporary directory: the pytest process must not
    publish hundreds of them when it exits (tests/test_publish.py checks exits in subprocesses)."""
    yield
    gitmem.git.redo.LOGGED.clear()


# The write modes this platform uses, its default first: a test that takes the ``write_mode``
# fixture (or a module with ``pytestmark = pytest.mark.usefixtures("write_mode")``) runs once in
# each, so that a Linux run also covers the paths of stores without the redo log.
WRITE_MODES = git_flush.platform_modes()
# Put first on the PYTHONPATH of the processes a test starts, so that they use its mode too.
_WRITE_MODE_HOOK = str(Path(__file__).parent / "write_mode_hook")
_NO_LOG = "the redo log needs syncfs and a boot id (Linux)"


@pytest.fixture(params=WRITE_MODES, ids=str)
def write_mode(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> git_flush.WriteMode:
    """The write mode every store the test opens uses, here and in the processes it starts."""
    mode: git_flush.WriteMode = request.param
    if request.node.get_closest_marker("needs_log") and not mode.logged:
        pytest.skip(_NO_LOG)
    monkeypatch.setattr(git_flush, "default_mode", lambda: mode)
    monkeypatch.setenv("GITMEM_TEST_WRITE_MODE", mode.name)
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([_WRITE_MODE_HOOK, *([path] if path else [])]))
    return mode


def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.needs_log``: skipped where the store's write mode has no redo log."""
    if item.get_closest_marker("needs_log") and not WRITE_MODES[0].logged:
        pytest.skip(_NO_LOG)


@pytest.fixture
def key() -> str:
    """A fresh store key."""
    return gitmem.generate_key()


@pytest.fixture
def repo_path(tmp_path: Path) -> Path:
    """Where the test's store lives (not created yet)."""
    return tmp_path / "store.git"


@pytest.fixture
def tool(repo_path: Path, key: str) -> Iterator[gitmem.GitMemoryTool]:
    """A GitMemoryTool on a fresh store."""
    yield gitmem.GitMemoryTool(repo_path, key=key, session="test-session")


@pytest.fixture
def store(tool: gitmem.GitMemoryTool) -> gitmem.MemoryStore:
    """The MemoryStore behind ``tool``."""
    return tool.store


@pytest.fixture
def fast_git() -> Iterator[None]:
    """No fsync in libgit2, the redo log, the high-water mark or the SDK's reference backend.

    For tests about semantics rather than durability: with fsync each write costs several disk
    flushes and the long generated runs would not fit the default budget.
    """
    real_fsync, real_fdatasync = os.fsync, os.fdatasync
    os.fsync = os.fdatasync = lambda fd: None
    pygit2.settings.enable_fsync_gitdir(False)
    try:
        yield
    finally:
        os.fsync, os.fdatasync = real_fsync, real_fdatasync
        pygit2.settings.enable_fsync_gitdir(True)  # gitmem's own setting (gitmem/git/flush.py)


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC, so printed times are exact."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
