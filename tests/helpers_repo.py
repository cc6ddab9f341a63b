"""Handing a store's repository to another git tool: what gitmem's redo log holds is published
first (a checkpoint), as a user runs ``gitmem checkpoint`` before plain git."""

from __future__ import annotations

from pathlib import Path

from gitmem.gitrepo import GitRepo


def published(repo: Path) -> Path:
    """``repo``, after a checkpoint that publishes every write of its redo log (git refuses
    the repository while the log holds writes it lacks)."""
    target = GitRepo(repo)
    with target.write_lock(5.0):
        target.checkpoint(clear=True)
    return repo
