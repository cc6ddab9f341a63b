"""Decompression bombs: small loose object files that inflate far beyond what gitmem's format
allows an object of their kind (docs/design.md, "Sizes")."""

from __future__ import annotations

import functools
import hashlib
import zlib
from pathlib import Path

BOMB_BYTES = 256 * 1024 * 1024


@functools.cache
def bomb(kind: bytes, size: int = BOMB_BYTES) -> tuple[str, bytes]:
    """``(id, loose file)`` of a genuine object of ``kind``: ``size`` zero bytes (about 1/1000
    of that compressed)."""
    header = kind + b" %d\0" % size
    digest = hashlib.sha1(header)
    packer = zlib.compressobj(9)
    parts = [packer.compress(header)]
    block = bytes(1 << 20)
    for _ in range(size // len(block)):
        digest.update(block)
        parts.append(packer.compress(block))
    parts.append(packer.flush())
    return digest.hexdigest(), b"".join(parts)


def plant(repo: Path, kind: bytes, at: str | None = None) -> str:
    """Write a bomb into ``repo`` under its own id, or in place of object ``at``; its id."""
    oid, data = bomb(kind)
    target = oid if at is None else at
    path = repo / "objects" / target[:2] / target[2:]
    path.parent.mkdir(exist_ok=True)
    if path.exists():
        path.chmod(0o644)
    path.write_bytes(data)
    return target
