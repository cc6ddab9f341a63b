"""The memory tool's sync policy: pull when opened, push after writes, offline first."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitmem import GitMemoryTool, MemoryStore, UsageError


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    path = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--bare", "-q", str(path)], check=True)
    return path


def create(tool: GitMemoryTool, name: str, text: str) -> str:
    return tool.call({"command": "create", "path": f"/memories/{name}", "file_text": text})


def test_push_policy_carries_writes_to_another_machine(
    origin: Path, tmp_path: Path, key: str
) -> None:
    first = GitMemoryTool(
        tmp_path / "a.git", key=key, state_dir=tmp_path / "sa", remote=str(origin), sync="push"
    )
    create(first, "progress.md", "step 1 done\n")
    assert first.autosync.wait(60) and first.autosync.last_error is None
    # Another machine: a clone, then a tool that pulls when opened.
    MemoryStore.clone(str(origin), tmp_path / "b.git", key, state_dir=tmp_path / "sb")
    create(first, "more.md", "later\n")
    assert first.autosync.wait(60)
    second = GitMemoryTool(
        tmp_path / "b.git", key=key, state_dir=tmp_path / "sb", remote="origin", sync="pull"
    )
    view = second.call({"command": "view", "path": "/memories"})
    assert "progress.md" in view and "more.md" in view


def test_unreachable_remote_never_fails_or_delays_a_write(tmp_path: Path, key: str) -> None:
    nowhere = str(tmp_path / "missing.git")
    tool = GitMemoryTool(
        tmp_path / "a.git", key=key, state_dir=tmp_path / "sa", remote=nowhere, sync="push"
    )
    assert tool.autosync.last_error is not None  # the pull when opened went offline
    assert create(tool, "a.md", "kept\n") == "File created successfully at: /memories/a.md"
    assert tool.autosync.wait(60)
    assert tool.autosync.last_error is not None
    assert tool.store.files() == {"/memories/a.md": "kept\n"}
    # The next sync, once the remote exists, sends what was written offline.
    subprocess.run(["git", "init", "--bare", "-q", nowhere], check=True)
    assert tool.store.sync(nowhere).action == "pushed"


def test_policy_needs_a_remote_and_a_known_name(tmp_path: Path, key: str) -> None:
    with pytest.raises(UsageError, match="needs a remote"):
        GitMemoryTool(tmp_path / "a.git", key=key, sync="push")
    with pytest.raises(UsageError, match="unknown sync policy"):
        GitMemoryTool(tmp_path / "a.git", key=key, remote="x", sync="always")  # type: ignore[arg-type]
