"""The redo log, ``<repository>/gitmem.wal``: one flush per write, published at checkpoints.

Every write appends one record holding every object it wrote and the branch's new head; the
record's ``fdatasync`` is the write's only flush. In version 2 a record's objects and head are
in the log alone until a checkpoint writes them into the repository (as SQLite's WAL mode
does): readers follow the log (:func:`follow`) and keep its objects in memory. design.md
("Writing", step 7, and "The redo log") gives the format; this module is its only reader and
writer. It knows nothing of libgit2: object ids are computed here with hashlib, from the type
and payload each record holds.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import uuid
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import IntegrityError

LOG_NAME = "gitmem.wal"
"""The log's file name in the repository."""
VERSION = 2
"""The log format version this gitmem writes (design.md, "The redo log"): in version 1 a
record's objects and ref were also written to the repository by the write itself; in version 2
they are there only once a checkpoint has published them."""
KNOWN_VERSIONS = (1, 2)
"""The versions this gitmem reads (a version 1 log is migrated by a checkpoint)."""
MAGIC = b"gitmemWL"
RECORD_MAGIC = b"GMWR"
HEADER_SIZE = 4096
"""Records start here: the header has its own block, so rewriting it never tears a record."""
MIN_CAPACITY = 64 << 10
"""A new log's preallocated size, and the smallest a full log shrinks to."""
MAX_CAPACITY = 1 << 20
"""The largest a full log grows to (a record larger than the log still extends it)."""
REST_CAPACITY = 16 << 10
"""The size a log is given when a writer is done with the store (it closes it, goes idle or
exits): a store at rest keeps no preallocated space beyond what a short session's few writes
fill; a session that writes more grows it again from :data:`MIN_CAPACITY`."""
GROW_BELOW = 64
"""A generation that fills the log with fewer records than this doubles the next one's size;
one that fills it with at least four times as many halves it (design.md, "The redo log")."""
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
"""Where the kernel names the current boot; the crash-state checker points it elsewhere."""

# magic, version, generation, boot id, has-base flag, base id; then a CRC-32 of all that.
_HEADER = struct.Struct(">8sIQ16sB20s")
# magic, generation, sequence number, body length; then a CRC-32 of these and the body.
_RECORD = struct.Struct(">4sQQI")
# The start of _RECORD: what the next record of a generation must begin with.
_RECORD_START = struct.Struct(">4sQQ")
_CRC = struct.Struct(">I")
_OBJECT = struct.Struct(">BI")
_TYPES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
_TYPE_CODES = {name: code for code, name in _TYPES.items()}
# A version 1 record's bound (that version logged writes of any size): a length beyond it is
# damage.
_MAX_BODY_V1 = 1 << 31
WRITE_LIMIT = 256 << 10
"""A write whose objects' payloads total more than this is not logged but published at once (a
checkpoint): the log, and the copy of its objects every reader keeps in memory, stay small."""
MAX_BODY = 2 * WRITE_LIMIT
"""The largest record body of a version 2 log: a logged write's payloads with their framing
(writers publish at once a write whose record would be larger); a longer one is refused."""
# Room in a body for its counts and one ref's name and id.
_FRAMING = 1024
HEADER_LENGTH = _HEADER.size + _CRC.size
"""How many bytes of the log's first block the header takes (the rest is zeros)."""
_boot_ids: dict[str, bytes | None] = {}


def boot_id() -> bytes | None:
    """The 16 bytes naming the running kernel's boot (read once per process), or None."""
    path = BOOT_ID_PATH
    if path not in _boot_ids:
        try:
            with open(path, "rb") as handle:
                _boot_ids[path] = uuid.UUID(handle.read(64).decode("ascii").strip()).bytes
        except (OSError, ValueError, UnicodeDecodeError):
            _boot_ids[path] = None
    return _boot_ids[path]


def object_id(kind: bytes, payload: bytes) -> str:
    """The git (SHA-1) id of an object of ``kind`` holding ``payload``."""
    digest = hashlib.sha1(b"%s %d\0" % (kind, len(payload)))
    digest.update(payload)
    return digest.hexdigest()


@dataclass(frozen=True)
class Header:
    """A generation's start: its number, the boot it began in, the branch head then, and the
    log format version it was written in (any version is parsed; callers decide what to do
    with one they do not know)."""

    generation: int
    boot: bytes
    base: str | None
    version: int = VERSION

    def to_bytes(self) -> bytes:
        raw = bytes.fromhex(self.base) if self.base else bytes(20)
        fixed = _HEADER.pack(MAGIC, self.version, self.generation, self.boot, bool(self.base), raw)
        return fixed + _CRC.pack(zlib.crc32(fixed))

    @classmethod
    def parse(cls, data: bytes) -> Header | None:
        """The header at the start of ``data``; None when it is absent or torn."""
        end = _HEADER.size
        if len(data) < end + _CRC.size or data[:8] != MAGIC:
            return None
        if _CRC.unpack_from(data, end)[0] != zlib.crc32(data[:end]):
            return None
        _, version, generation, boot, has_base, raw = _HEADER.unpack_from(data)
        return cls(generation, boot, raw.hex() if has_base else None, version)


@dataclass(frozen=True)
class Record:
    """One write: the refs it moved (``(name, new id)``) and every object it wrote."""

    generation: int
    seq: int
    refs: tuple[tuple[str, str], ...]
    objects: tuple[tuple[bytes, bytes], ...]

    def head(self, ref: str) -> str | None:
        """Where this record moved ``ref``, or None if it did not move it."""
        return next((new for name, new in self.refs if name == ref), None)

    def to_bytes(self) -> bytes:
        parts = [bytes([len(self.refs)])]
        for name, new in self.refs:
            encoded = name.encode("utf-8")
            parts += [struct.pack(">H", len(encoded)), encoded, bytes.fromhex(new)]
        parts.append(struct.pack(">I", len(self.objects)))
        for kind, payload in self.objects:
            parts += [_OBJECT.pack(_TYPE_CODES[kind], len(payload)), payload]
        body = b"".join(parts)
        fixed = _RECORD.pack(RECORD_MAGIC, self.generation, self.seq, len(body))
        return fixed + _CRC.pack(zlib.crc32(body, zlib.crc32(fixed))) + body


def _parse_body(generation: int, seq: int, body: bytes) -> Record | None:
    try:
        pos, refs = 1, []
        for _ in range(body[0]):
            (length,) = struct.unpack_from(">H", body, pos)
            name = body[pos + 2 : pos + 2 + length].decode("utf-8")
            pos += 2 + length
            if pos + 20 > len(body):
                return None
            refs.append((name, body[pos : pos + 20].hex()))
            pos += 20
        (count,) = struct.unpack_from(">I", body, pos)
        pos += 4
        objects = []
        for _ in range(count):
            code, size = _OBJECT.unpack_from(body, pos)
            pos += _OBJECT.size
            if code not in _TYPES or pos + size > len(body):
                return None
            objects.append((_TYPES[code], body[pos : pos + size]))
            pos += size
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    if pos != len(body):
        return None
    return Record(generation, seq, tuple(refs), tuple(objects))


def loggable(payloads: int, objects: int) -> bool:
    """Whether a write of ``objects`` objects whose payloads total ``payloads`` bytes goes
    through the log: at most :data:`WRITE_LIMIT` bytes, in a record of at most
    :data:`MAX_BODY`."""
    return payloads <= WRITE_LIMIT and _FRAMING + objects * _OBJECT.size + payloads <= MAX_BODY


def max_size() -> int:
    """The largest a version 2 log may be: :data:`MAX_CAPACITY`, or its header block and one
    record of :data:`MAX_BODY` (the first record of a generation extends a smaller log)."""
    return max(MAX_CAPACITY, HEADER_SIZE + _RECORD.size + _CRC.size + MAX_BODY)


def _read_record(
    fd: int, offset: int, header: Header, seq: int, size: int
) -> tuple[Record, int] | None:
    """The record ``seq`` of ``header``'s generation at ``offset`` and the offset after it, or
    None; ``size``: the log file's size. IntegrityError if it declares more than the format
    allows (checked before its body is read: a sparse file may declare gigabytes)."""
    generation = header.generation
    fixed_size = _RECORD.size + _CRC.size
    fixed = os.pread(fd, fixed_size, offset)
    if len(fixed) < fixed_size:
        return None
    magic, found_generation, found_seq, length = _RECORD.unpack_from(fixed)
    if (magic, found_generation, found_seq) != (RECORD_MAGIC, generation, seq):
        return None
    end = offset + fixed_size + length
    if header.version == 1:
        if length > _MAX_BODY_V1:
            return None
    elif length > MAX_BODY or end > max_size():
        raise IntegrityError(
            f"the redo log {LOG_NAME} is damaged: its record {seq} declares {length:,} bytes, "
            f"ending at offset {end:,}; a record holds at most {MAX_BODY:,} and the log at "
            f"most {max_size():,}, so gitmem wrote no such record (nothing of it was read)"
        )
    if end > size:
        return None  # cut short: torn, or extending the file when power was lost
    body = os.pread(fd, length, offset + fixed_size)
    (crc,) = _CRC.unpack_from(fixed, _RECORD.size)
    if len(body) < length or crc != zlib.crc32(body, zlib.crc32(fixed[: _RECORD.size])):
        return None
    parsed = _parse_body(generation, seq, body)
    return None if parsed is None else (parsed, offset + fixed_size + length)


def open_log(path: Path, *, write: bool) -> int:
    """Open the log, never through a link and never blocking; OSError if it is not a file."""
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(22, "the redo log is not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_header(path: Path) -> Header | None:
    """The log's header; None when the log is missing, not a file or torn."""
    try:
        fd = open_log(path, write=False)
    except OSError:
        return None
    try:
        return read_header_fd(fd)
    finally:
        os.close(fd)


def read_header_fd(fd: int) -> Header | None:
    """The header of the log open at ``fd``, as :func:`read_header`."""
    return Header.parse(os.pread(fd, HEADER_LENGTH, 0))


def records(
    fd: int, header: Header, offset: int = HEADER_SIZE, seq: int = 1
) -> Iterator[tuple[Record, int]]:
    """The valid records of ``header``'s generation from ``offset`` (record ``seq`` there), each
    with the offset after it; the first record that is torn, stale or out of order ends them.
    IntegrityError if a record of a version 2 log declares more than its format allows."""
    size = os.fstat(fd).st_size
    while True:
        found = _read_record(fd, offset, header, seq, size)
        if found is None:
            return
        yield found
        offset, seq = found[1], seq + 1


def next_capacity(size: int, records: int) -> int:
    """The preallocated size for the generation after one that filled a log of ``size`` bytes
    with ``records`` records: doubled when they were few (checkpoints would come often),
    halved when they were many, else kept; a multiple of :data:`HEADER_SIZE` within
    [:data:`MIN_CAPACITY`, :data:`MAX_CAPACITY`]."""
    if records < GROW_BELOW:
        size *= 2
    elif records >= 4 * GROW_BELOW:
        size //= 2
    size = -(-size // HEADER_SIZE) * HEADER_SIZE
    return max(MIN_CAPACITY, min(MAX_CAPACITY, size))


def new_log(header: Header, size: int = MIN_CAPACITY) -> bytes:
    """The bytes of a new log: ``header``, then zeros up to ``size`` bytes.

    The zeros are really written (not ``fallocate``'s unwritten extents): overwriting written
    blocks inside the file's size changes no metadata, so a record's ``fdatasync`` flushes
    data alone, without a journal commit.
    """
    first = header.to_bytes()
    return first + bytes(max(size, HEADER_SIZE) - len(first))


def write_header(fd: int, header: Header) -> None:
    """Start ``header``'s generation in an open log, durably (records after it are stale)."""
    os.pwrite(fd, header.to_bytes(), 0)
    os.fdatasync(fd)


def datasync(path: Path) -> None:
    """Flush the log's data (``fdatasync``): every record appended before the call is durable."""
    fd = open_log(path, write=True)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


@dataclass
class Tail:
    """What one process knows of a generation: where its next record goes, where its last
    record moved the branch, and every object its records hold (``{id: (type, payload)}``:
    in version 2 they are in no other place until a checkpoint)."""

    generation: int
    offset: int = HEADER_SIZE
    seq: int = 1
    last: str | None = None
    inode: int = 0
    objects: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)

    @property
    def records(self) -> int:
        """How many records of the generation have been seen."""
        return self.seq - 1

    def add(self, record: Record, end: int, ref: str, ids: Sequence[str] | None = None) -> None:
        """Take in ``record``, which ends at offset ``end``; ``ids``: its objects' ids, in
        order, when the caller has them (the writer computed them as it wrote: hashing a
        large directory's tree again would cost every write that time once more)."""
        if ids is None:
            ids = [oid for oid, _, _ in record_objects(record)]
        for oid, obj in zip(ids, record.objects, strict=True):
            self.objects[oid] = obj
        self.offset, self.seq = end, record.seq + 1
        self.last = record.head(ref) or self.last


def follow(fd: int, header: Header, tail: Tail | None, ref: str, inode: int | None = None) -> Tail:
    """The end of ``header``'s generation, scanning forward from ``tail`` if it is of the same
    generation (records other processes appended since), else from the first record (a new
    :class:`Tail`: the objects of another generation are dropped).

    ``Tail.last`` is where the generation's last record moved ``ref`` (the base if none did).
    A record of another generation ends the scan, so a checkpoint that starts a new one
    mid-scan leaves a consistent, possibly older, view (what the old generation held).
    ``inode``: the log's inode number, if the caller knows it (else one ``fstat``). When
    nothing was appended this costs one ``pread``: the slot after the tail holds zeros or a
    record of another generation.
    """
    if inode is None:
        inode = os.fstat(fd).st_ino
    # A log replaced by a new file (its header was torn) restarts at generation 1.
    if tail is None or (tail.generation, tail.inode) != (header.generation, inode):
        tail = Tail(header.generation, last=header.base, inode=inode)
    elif os.pread(fd, _RECORD_START.size, tail.offset) != _RECORD_START.pack(
        RECORD_MAGIC, tail.generation, tail.seq
    ):
        return tail  # the usual case, read at once: nothing was appended since
    for record, end in records(fd, header, tail.offset, tail.seq):
        tail.add(record, end, ref)
    return tail


def replay_plan(fd: int, header: Header, ref: str) -> tuple[list[Record], list[str | None]]:
    """The generation's valid records and the successive heads of ``ref``: the base first,
    then each record's."""
    found = [record for record, _ in records(fd, header)]
    heads: list[str | None] = [header.base]
    for record in found:
        moved = record.head(ref)
        if moved is not None:
            heads.append(moved)
    return found, heads


def record_objects(record: Record) -> Sequence[tuple[str, bytes, bytes]]:
    """``(id, type, payload)`` of each object in ``record``, the ids recomputed."""
    return [(object_id(kind, payload), kind, payload) for kind, payload in record.objects]
