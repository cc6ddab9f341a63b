"""docs/sync.md's examples run as written: the Python block and the backup commands, with the
forge and the backup disk replaced by local paths and ``HOME`` by a scratch directory."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import gitmem

ROOT = Path(__file__).resolve().parent.parent
SYNC = (ROOT / "docs" / "sync.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", SYNC, flags=re.S)


@pytest.fixture
def home(tmp_path: Path, key: str) -> dict[str, str]:
    """A home with ~/memory.git (remote origin: a local bare repository), and its env."""
    home = tmp_path / "home"
    home.mkdir()
    forge = tmp_path / "forge.git"
    subprocess.run(["git", "init", "--bare", "-q", str(forge)], check=True)
    store = gitmem.MemoryStore.init(home / "memory.git", key)
    store.create("/memories/notes.md", "one\n")
    store.add_remote("origin", str(forge))
    store.close()
    return {**os.environ, "HOME": str(home), "GITMEM_KEY": key}


def test_the_python_block_opens_the_store_in_the_home_directory(
    home: dict[str, str], tmp_path: Path
) -> None:
    (python,) = blocks("python")
    script = python + (
        "\nprint(memory.store.path)"
        "\nprint(memory.call({'command': 'view', 'path': '/memories/notes.md'}))"
        "\nmemory.close()\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=work, env=home, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == str(Path(home["HOME"]) / "memory.git")
    assert "     1\tone" in run.stdout
    assert list(work.iterdir()) == []  # no directory named "~"


def test_the_backup_commands(home: dict[str, str], tmp_path: Path) -> None:
    backup = [b for b in blocks("sh") if "/mnt/backup" in b]
    assert len(backup) == 1
    for line in backup[0].splitlines():
        command = line.split("  #")[0].replace("/mnt/backup", str(tmp_path / "backup"))
        args = shlex.split(command.replace("~", home["HOME"]))
        if args[0] == "gitmem":
            args[0] = str(Path(sys.executable).with_name("gitmem"))
        run = subprocess.run(args, env=home, capture_output=True, text=True)
        assert run.returncode == 0, (line, run.stderr)
    assert "ok" in run.stdout  # the last one: verify
