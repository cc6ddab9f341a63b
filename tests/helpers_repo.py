"""Handing a store's repository to another git tool: what gitmem's redo log holds is published
first (a checkpoint), as a user runs ``gitmem checkpoint`` before plain git; the checkpoint's
pack is then unpacked into loose objects, as gitmem before redo log version 2 left every write
(and ``git unpack-objects`` leaves a pack), so that tests damaging loose objects find them."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from pathlib import Path

import pygit2

from gitmem.git.maintenance import _pack_index_oids, _remove_pack
from gitmem.git.objects import _TYPE_NAMES
from gitmem.git.repo import GitRepo


def published(repo: Path) -> Path:
    """``repo``, after a checkpoint that publishes every write of its redo log (git refuses
    the repository while the log holds writes it lacks), its objects loose."""
    target = GitRepo(repo)
    with target.write_lock(5.0):
        checkpoint_loose(target)
    return repo


def checkpoint_loose(repo: GitRepo) -> None:
    """``repo.checkpoint(clear=True)`` (the caller holds the lock, or no one else writes),
    then the pack it wrote unpacked into loose objects."""
    packs = repo.path / "objects" / "pack"
    before = set(packs.glob("pack-*.idx"))
    repo.checkpoint(clear=True)
    unpack(repo.path, set(packs.glob("pack-*.idx")) - before)


def unpack(repo: Path, indexes: Iterable[Path]) -> None:
    """The packs of ``indexes`` (in ``repo``) made loose objects, and removed."""
    git = pygit2.Repository(str(repo))
    for idx in indexes:
        for oid in sorted(_pack_index_oids(idx)):
            path = repo / "objects" / oid[:2] / oid[2:]
            if path.exists():
                continue
            kind, data = git.odb.read(oid)
            path.parent.mkdir(mode=0o700, exist_ok=True)
            raw = b"%s %d\0" % (_TYPE_NAMES[int(kind)], len(data)) + data
            path.write_bytes(zlib.compress(raw))
            path.chmod(0o400)
        _remove_pack(idx)
