"""Git packs written by gitmem itself: a version-2 pack of whole (undeltified) objects and its
version-2 index, made durable and then published, as git's ``Documentation/gitformat-pack``
describes them; no libgit2.

A pack is written from objects the caller already has (the redo log's, or ones it read): no
object database lookups and no delta search, which libgit2's pack builder spends most of a
small pack's time on and which gitmem's blobs, ciphertext, never reward.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import struct
import tempfile
import zlib
from collections.abc import Iterable
from pathlib import Path

from .fsutil import NEW_FILE_FLAGS, fsync_dir, fsync_file, make_private_dirs, write_all
from .wal import object_id

PackObject = tuple[bytes, bytes] | tuple[str, bytes, bytes]
"""An object to pack: ``(kind, payload)``, or ``(oid, kind, payload)`` when its id is known."""

TYPE_CODES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
"""The pack's type number of each object kind."""
TMP_PREFIX = "gitmem-gc-"
"""Name prefix of the temporary directory a pack is written in, inside the repository; one
left by a killed writer is removed by ``gitmem gc``."""
LARGE_OFFSET = 1 << 31
"""Entries at this pack offset or beyond are indexed through the index's 8-byte offset table
(a 4-byte offset's top bit marks it). A constant so that tests can lower it."""
PACK_FILE_MODE = 0o400
"""Mode of pack and index files: read-only, as git makes them, and owner-only."""

_STORED_BLOCK = 65535
_BUFFER = 1 << 20
_IDX_MAGIC = b"\xfftOc"


def zlib_stored(data: bytes) -> bytes:
    """``data`` as a zlib stream of stored (uncompressed) deflate blocks, as level 0 writes it.

    For ciphertext, which does not compress: building the stream here costs a few
    microseconds, where ``zlib.compress`` sets up a deflate state of some 256 KiB per call (a
    tenth of a millisecond or more, most of a small object's write). Any zlib reader (git,
    libgit2, ``zlib.decompress``) reads it.
    """
    parts = [b"\x78\x01"]  # deflate, 32 KiB window, no dictionary, "fastest" (31 | 0x7801)
    for start in range(0, max(len(data), 1), _STORED_BLOCK):
        block = data[start : start + _STORED_BLOCK]
        final = start + _STORED_BLOCK >= len(data)
        parts += (struct.pack("<BHH", final, len(block), len(block) ^ 0xFFFF), block)
    parts.append(struct.pack(">I", zlib.adler32(data)))
    return b"".join(parts)


def _deflate(kind: bytes, payload: bytes) -> bytes:
    if kind == b"blob":
        return zlib_stored(payload)  # ciphertext: deflate would only add its own overhead
    # Trees and commits do shrink at level 1: by about a quarter and a fifth in a store of the
    # progress-log workload (benchmarks/bench_history_size.py): their text (modes, headers,
    # hex ids, the encoding of sealed names and records) is not random. That costs about 10 µs
    # an object against 1.5 for stored blocks, a few milliseconds for a few hundred objects,
    # and those bytes stay on disk. A 4 KiB window and memLevel 4 (rather than 32 KiB and 8)
    # compressed that store's trees and commits within 0.1% of the same size, with a sixth of
    # the state to set up: 10 µs rather than 16 for a median tree.
    deflater = zlib.compressobj(1, zlib.DEFLATED, 12, 4)
    return deflater.compress(payload) + deflater.flush()


def _entry_header(code: int, size: int) -> bytes:
    # Type in bits 4-6 of the first byte with the size's low 4 bits; then 7 bits a byte, low
    # first, the top bit of each byte saying another follows.
    out = bytearray()
    byte = (code << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def write_pack(objects: Iterable[PackObject], pack_dir: Path, work_dir: Path) -> Path | None:
    """Write ``objects`` as one pack in ``pack_dir``, durably; return its ``.idx`` path.

    The pack holds each distinct object once, in the order first given, whole and zlib
    compressed; it is named ``pack-<SHA-1 of its content>`` as git names packs. It is written
    in a temporary directory made in ``work_dir`` (the repository: the same file system),
    both files are fsynced, renamed into ``pack_dir`` (made owner-only if missing) pack first
    and index last, since the index makes the pack visible, and both directories are fsynced.
    Nothing is written for no objects (returns None). An id given with an object is trusted.
    """
    stream = iter(objects)
    first = next(stream, None)
    if first is None:
        return None
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=work_dir))
    try:
        pack_path, entries, checksum = _write_pack_file(
            itertools.chain((first,), stream), tmp / "pack"
        )
        idx_path = tmp / "idx"
        _write_file(idx_path, _index_bytes(entries, checksum))
        fsync_file(pack_path)  # the pack's data and the index's before either name is published
        fsync_file(idx_path)
        make_private_dirs(pack_dir)
        target = pack_dir / f"pack-{checksum.hex()}.idx"
        os.replace(pack_path, target.with_suffix(".pack"))
        os.replace(idx_path, target)
        # Both directories of the renames: only then are the new names durable whatever the
        # file system (ext4 alone orders a rename after its source's data), and a caller may
        # remove the loose objects the pack now holds.
        fsync_dir(tmp)
        fsync_dir(pack_dir)
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_pack_file(
    objects: Iterable[PackObject], path: Path
) -> tuple[Path, list[tuple[bytes, int, int]], bytes]:
    """Write the pack at ``path``; return it, its entries as (id, CRC-32, offset), and its
    checksum. The objects are streamed: one is held at a time, whatever the pack's size."""
    entries: list[tuple[bytes, int, int]] = []
    seen: set[bytes] = set()
    fd = os.open(path, NEW_FILE_FLAGS, PACK_FILE_MODE)
    try:
        # The header's count is known only at the end: a placeholder now, the real count
        # written over it last, and the checksum taken over the finished file.
        parts = [b"PACK" + struct.pack(">II", 2, 0)]
        offset = pending = len(parts[0])
        for item in objects:
            if len(item) == 3:
                oid_hex, kind, payload = item
            else:
                kind, payload = item
                oid_hex = object_id(kind, payload)
            oid = bytes.fromhex(oid_hex)
            if oid in seen:
                continue
            seen.add(oid)
            header = _entry_header(TYPE_CODES[kind], len(payload))
            body = _deflate(kind, payload)
            entries.append((oid, zlib.crc32(body, zlib.crc32(header)), offset))
            parts += (header, body)
            offset += len(header) + len(body)
            pending += len(header) + len(body)
            if pending >= _BUFFER:
                write_all(fd, b"".join(parts))
                parts, pending = [], 0
        write_all(fd, b"".join(parts))
        os.pwrite(fd, struct.pack(">I", len(entries)), 8)
        digest = hashlib.sha1()
        with open(path, "rb") as reader:
            while chunk := reader.read(_BUFFER):
                digest.update(chunk)
        checksum = digest.digest()
        write_all(fd, checksum)
    finally:
        os.close(fd)
    return path, entries, checksum


def _index_bytes(entries: list[tuple[bytes, int, int]], pack_checksum: bytes) -> bytes:
    """The version-2 index of a pack with these (id, CRC-32, offset) entries."""
    ordered = sorted(entries)
    fanout = [0] * 256
    for oid, _, _ in ordered:
        fanout[oid[0]] += 1
    total = 0
    for i, count in enumerate(fanout):
        total += count
        fanout[i] = total
    small: list[int] = []
    large: list[int] = []
    for _, _, offset in ordered:
        if offset >= LARGE_OFFSET:
            small.append(0x80000000 | len(large))
            large.append(offset)
        else:
            small.append(offset)
    count = len(ordered)
    body = b"".join(
        (
            _IDX_MAGIC,
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            b"".join(oid for oid, _, _ in ordered),
            struct.pack(f">{count}I", *(crc for _, crc, _ in ordered)),
            struct.pack(f">{count}I", *small),
            struct.pack(f">{len(large)}Q", *large),
            pack_checksum,
        )
    )
    return body + hashlib.sha1(body).digest()


def _write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, NEW_FILE_FLAGS, PACK_FILE_MODE)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
