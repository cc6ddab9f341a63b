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
    of that compressed), ``size`` a multiple of 1 MiB."""
    header = kind + b" %d\0" % size
    block = bytes(1 << 20)
    blocks = size // len(block)
    digest, adler = hashlib.sha1(header), zlib.adler32(header)
    for _ in range(blocks):
        digest.update(block)
        adler = zlib.adler32(block, adler)
    # Raw deflate, each block after a full flush, which starts the compressor afresh: every
    # block compresses to the same bytes, so one is compressed and repeated.
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = packer.compress(header) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    body = first + again * blocks + packer.flush()
    # The zlib stream git reads: its header (maximum compression), the deflate, the checksum.
    return digest.hexdigest(), b"\x78\xda" + body + adler.to_bytes(4, "big")


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
