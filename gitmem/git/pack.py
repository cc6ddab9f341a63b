"""Git packs written by gitmem itself: a version-2 pack and its version-2 index, made durable
and then published, as git's ``Documentation/gitformat-pack`` describes them; no libgit2.

A pack is written from objects the caller already has (the redo log's, or ones it read), with
no object database lookups. Blobs (ciphertext) and commits (a sealed record) are stored whole;
a tree may be stored as a delta of another version of it (see :class:`_TreeBases`), which
keeps packs as small as libgit2's pack builder makes them, at a fraction of its time.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import itertools
import os
import shutil
import struct
import sys
import tempfile
import zlib
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..chunking import common_prefix, common_suffix
from ..fsutil import NEW_FILE_FLAGS, fsync_dir, fsync_file, make_private_dirs, write_all
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
DELTA_DEPTH = 50
"""The longest chain of deltas a tree is stored in (git's and libgit2's default depth)."""

_OFS_DELTA = 6
# Trees kept as delta bases: so many under each key (of their first entries; of their path),
# and at most so many bytes in all.
_BASES_PER_KEY = 8
_VERSIONS_KEPT = 2
# A tree entry name this long names one path (a sealed name binds its parent's path), and the
# path key of a commit's tree; at most so many trees named and not yet packed are remembered.
_NAME_MIN = 16
_ROOT = b"/"
_NAMES_MAX = 1 << 18
# Git's tree entry modes, each with the space after it; and an entry's bytes besides its name.
_MODES = (b"40000 ", b"100644 ", b"100755 ", b"120000 ", b"160000 ")
_ENTRY_FIXED = 27  # a tree entry "40000 <name>\0<id>" is its name and this many bytes
_BASES_BYTES = 32 << 20
_BASE_OVERHEAD = 512  # a kept tree's lists, keys and dict entries, besides its bytes
# A delta stored must be at most this share of its tree: the rest is not worth a chain.
_DELTA_SHARE = 0.5
# A delta inserting at most this many bytes (an entry with a long name) ends the search.
_GOOD_DELTA = 128
# An entry delta (see _entry_delta) searches the base's bytes for so many entries, then
# indexes its entries; and compares a run of shared bytes so many at a time.
_ENTRY_SEARCHES = 8
_RUN_BLOCK = 4096
# A tree or commit larger than this is stored, not deflated (see _deflate).
_DEFLATE_LIMIT = 64 << 10
CHECKPOINT_DEFLATE_MIN = 160
"""In a checkpoint's pack (``write_pack(..., deflate_min=...)``), trees, commits and deltas
smaller than this are stored, not deflated: see :func:`_deflate`."""

_STORED_BLOCK = 65535
_BUFFER = 1 << 20
_IDX_MAGIC = b"\xfftOc"


def zlib_stored(data: bytes) -> bytes:
    """``data`` as a zlib stream of stored (uncompressed) deflate blocks, as level 0 writes it.

    For ciphertext, which does not compress: building the stream here copies the bytes once,
    where ``zlib.compress`` sets up a deflate state of some 256 KiB per call, which for a small
    object costs more than the rest of its write. Any zlib reader (git, libgit2,
    ``zlib.decompress``) reads it.
    """
    parts = [b"\x78\x01"]  # deflate, 32 KiB window, no dictionary, "fastest" (31 | 0x7801)
    for start in range(0, max(len(data), 1), _STORED_BLOCK):
        block = data[start : start + _STORED_BLOCK]
        final = start + _STORED_BLOCK >= len(data)
        parts += (struct.pack("<BHH", final, len(block), len(block) ^ 0xFFFF), block)
    parts.append(struct.pack(">I", zlib.adler32(data)))
    return b"".join(parts)


def _deflate(kind: bytes, payload: bytes, deflate_min: int = 0) -> bytes:
    """The zlib stream of an entry's ``payload``: an object of ``kind``, or b"delta" data;
    stored blocks for a blob, or for a payload under ``deflate_min`` bytes."""
    if kind == b"blob":
        return zlib_stored(payload)  # ciphertext: deflate would only add its own overhead
    if len(payload) < deflate_min:
        # Setting up a deflater costs the same whatever the payload, and a small one is mostly
        # ids and sealed names, which do not compress: a delta of one changed entry, or a
        # 2-entry file tree, comes out of deflate no smaller (often larger) than it went in.
        # Storing what is under CHECKPOINT_DEFLATE_MIN saves that set-up for a few bytes.
        return zlib_stored(payload)
    if len(payload) > _DEFLATE_LIMIT:
        # A large tree (a directory of over a thousand entries) costs milliseconds to deflate,
        # and a checkpoint would write it again at every write that changes the directory: it
        # is stored whole once per delta chain, its versions as deltas.
        return zlib_stored(payload)
    # Trees and commits do shrink at level 1: their text (modes, headers, hex ids, the encoding
    # of sealed names and records) is not random, and the bytes saved stay on disk while the
    # time is spent once. A 4 KiB window and memLevel 4 (rather than 32 KiB and 8) compress
    # them about as well with far less state to set up per object (a store of the workload of
    # benchmarks/bench_history_size.py shows both).
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


def write_pack(
    objects: Iterable[PackObject],
    pack_dir: Path,
    work_dir: Path,
    *,
    deflate_min: int = 0,
    packed: set[bytes] | None = None,
) -> Path | None:
    """Write ``objects`` as one pack in ``pack_dir``, durably; return its ``.idx`` path.

    The pack holds each distinct object once, in the order first given, zlib compressed, a
    tree possibly as a delta of an earlier one (in chains at most ``DELTA_DEPTH`` long); it is
    named ``pack-<SHA-1 of its content>`` as git names packs, and the same objects in the same
    order give the same pack. It is written in a temporary directory made in ``work_dir`` (the
    repository: the same file system); both files are fsynced, renamed into ``pack_dir`` (made
    owner-only if missing), the pack first and the index last since the index makes the pack
    visible, and both directories are fsynced. A killed writer leaves only the temporary
    directory. Nothing at all is written for no objects (then None is returned). An id given
    with an object is trusted, not checked. Trees, commits and deltas under ``deflate_min``
    bytes are stored rather than deflated (a checkpoint passes
    :data:`CHECKPOINT_DEFLATE_MIN`: it writes at every few writes, and its packs are merged
    as they are, so this trades a little disk until ``gitmem gc`` for its time). ``packed``:
    the set the writer records each written object's (20-byte) id in, and skips objects
    already there; gc passes the set its walk checks, so that one set holds every id.
    """
    stream = iter(objects)
    first = next(stream, None)
    if first is None:
        return None
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=work_dir))
    try:
        pack_path, entries, checksum = _write_pack_file(
            itertools.chain((first,), stream),
            tmp / "pack",
            deflate_min,
            set() if packed is None else packed,
        )
        return _publish(tmp, pack_path, entries, checksum, pack_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish(
    tmp: Path,
    pack_path: Path,
    entries: Entries,
    checksum: bytes,
    pack_dir: Path,
) -> Path:
    """Write the index of the finished pack at ``pack_path`` (in ``tmp``) and publish both
    durably in ``pack_dir``; return the index's path there."""
    idx_path = tmp / "idx"
    _write_index(idx_path, entries, checksum)
    fsync_file(pack_path)  # the pack's data and the index's before either name is published
    fsync_file(idx_path)
    made = [d for d in (pack_dir, *pack_dir.parents) if not d.is_dir()]
    make_private_dirs(pack_dir)
    target = pack_dir / f"pack-{checksum.hex()}.idx"
    os.replace(pack_path, target.with_suffix(".pack"))
    os.replace(idx_path, target)
    # Both directories of the renames: only then are the new names durable whatever the
    # file system (ext4 alone orders a rename after its source's data), and a caller may
    # remove the loose objects the pack now holds. And the parent of each directory made
    # here, which holds its name.
    fsync_dir(tmp)
    fsync_dir(pack_dir)
    for directory in made:
        fsync_dir(directory.parent)
    return target


def read_index(idx: Path) -> tuple[bytes, array[int], array[int]]:
    """The entries of a version-2 pack index, in its (id) order: their ids (20 bytes each, one
    after another), CRC-32s and pack offsets; ``ValueError`` for an index of another version or
    a damaged one."""
    data = idx.read_bytes()
    if data[:8] != _IDX_MAGIC + struct.pack(">I", 2) or len(data) < 8 + 1024 + 40:
        raise ValueError(f"{idx.name} is not a version-2 pack index")
    (count,) = struct.unpack_from(">I", data, 8 + 255 * 4)
    ids = 8 + 1024
    crcs = ids + 20 * count
    offsets = crcs + 4 * count
    large = offsets + 4 * count
    if len(data) < large + 40:
        raise ValueError(f"{idx.name} is truncated")
    small = _big_endian("I", data[offsets:large])
    wide = array("Q", small)
    for at, offset in enumerate(small):
        if offset & 0x80000000:
            (wide[at],) = struct.unpack_from(">Q", data, large + 8 * (offset & 0x7FFFFFFF))
    return data[ids:crcs], _big_endian("I", data[crcs:offsets]), wide


def _big_endian(code: str, data: bytes) -> array[int]:
    """``data``'s big-endian integers of ``array`` type ``code``."""
    values = array(code, data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


ENTRY_COST = 256
"""What copying one pack entry counts for against a merge step's budget, in bytes, at least:
the work per entry (a read, a CRC, a header) weighs more than its bytes when it is small."""


class _Source:
    """A pack being merged: its file, kept open, and its index's entries in arrays (no Python
    object per entry: a merge of a long history's packs holds every entry of them, about 60
    bytes each this way, several hundred as lists and dicts of ints and ids).

    Entries are numbered in the index's (id) order; ``order`` lists them in pack order, beside
    their ``offsets``. ``placed`` is where each went in the new pack (-1: not yet, or never for
    one ``dup``, whose id an earlier source holds), ``crcs_out`` its CRC-32 there."""

    def __init__(self, idx: Path) -> None:
        self.ids, self.crcs, offsets = read_index(idx)
        self.fd = os.open(idx.with_suffix(".pack"), os.O_RDONLY | os.O_CLOEXEC)
        self.count = len(self.crcs)
        self.order = array("I", sorted(range(self.count), key=offsets.__getitem__))
        self.offsets = array("Q", (offsets[i] for i in self.order))
        # The last entry runs to the pack's trailing checksum.
        self.end = os.fstat(self.fd).st_size - 20
        self.placed = array("q", [-1]) * self.count
        self.crcs_out = array("I", [0]) * self.count
        self.dup = bytearray(self.count)
        self._window = b""
        self._window_at = 0

    def oid(self, i: int) -> bytes:
        """The id of entry ``i``."""
        return self.ids[20 * i : 20 * i + 20]

    def find(self, oid: bytes) -> int:
        """The entry whose id is ``oid``, or -1."""
        low, high = 0, self.count
        while low < high:
            mid = (low + high) // 2
            if self.ids[20 * mid : 20 * mid + 20] < oid:
                low = mid + 1
            else:
                high = mid
        return low if low < self.count and self.oid(low) == oid else -1

    def sorted_ids(self, source: int) -> Iterator[tuple[bytes, int, int]]:
        """``(id, source, entry)`` of each entry, in id order."""
        return ((self.oid(i), source, i) for i in range(self.count))

    def read(self, start: int, stop: int) -> bytes:
        """The pack's bytes from ``start`` to ``stop``, read ahead :data:`_BUFFER` at a time
        (entries are copied in pack order: one ``pread`` serves many small ones)."""
        at = start - self._window_at
        if at < 0 or stop - self._window_at > len(self._window):
            self._window = os.pread(self.fd, max(_BUFFER, stop - start), start)
            self._window_at, at = start, 0
        return self._window[at : at + stop - start]


class PackMerge:
    """One pack holding every object of ``sources`` (their ``.idx`` paths), made by copying
    each entry as it is stored (whole or a delta, compressed), a bounded number of bytes at a
    time: :meth:`step` until it returns True, then :meth:`finish`, or :meth:`abandon`.

    Nothing is inflated, deflated or searched for deltas: an entry is checked against the
    CRC-32 its source index holds and copied, an offset delta's distance to its base rewritten
    (its base, earlier in the same source, is earlier in the new pack too). The source packs
    stay open from the start, so one removed meanwhile (by another process's merge, or gc) is
    still read. The new pack is written in a temporary directory in ``work_dir`` and published
    as :func:`write_pack` publishes. ``ValueError`` when a source cannot be read this way (an
    index of version 1, a damaged entry): the caller merges those another way.
    """

    def __init__(self, sources: Iterable[Path], work_dir: Path) -> None:
        self.sources = list(sources)
        self.pid = os.getpid()
        self._packs: list[_Source] = []
        self._tmp: Path | None = None
        self._fd = -1
        try:
            for idx in self.sources:
                self._packs.append(_Source(idx))
            self._tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=work_dir))
            self._fd = os.open(self._tmp / "pack", NEW_FILE_FLAGS, PACK_FILE_MODE)
        except BaseException:
            self.abandon()
            raise
        # An id in several sources is copied from the first of them.
        self._count = 0
        last = None
        for oid, source, i in self._in_id_order(skip_dups=False):
            if oid == last:
                self._packs[source].dup[i] = 1
            else:
                self._count += 1
            last = oid
        head = b"PACK" + struct.pack(">II", 2, self._count)
        self._digest = hashlib.sha1()
        self._parts = [head]
        self._pending = self._offset = len(head)
        self._copied = 0
        self._cursor = (0, 0)

    def _in_id_order(self, *, skip_dups: bool) -> Iterator[tuple[bytes, int, int]]:
        """``(id, source, entry)`` of every entry of every source in id order (of one id, the
        first source's first); with ``skip_dups``, each id once."""
        merged = heapq.merge(*(p.sorted_ids(k) for k, p in enumerate(self._packs)))
        if not skip_dups:
            return merged
        return (entry for entry in merged if not self._packs[entry[1]].dup[entry[2]])

    @property
    def total(self) -> int:
        """The bytes of entries of every source (an object in two sources counted twice)."""
        return sum(source.end - source.offsets[0] for source in self._packs if source.count)

    def step(self, budget: int) -> bool:
        """Copy entries until at least ``budget`` bytes are copied (each entry counted as at
        least :data:`ENTRY_COST`) or none are left; True when every entry is in the new
        pack."""
        copied = 0
        pack, at = self._cursor
        while pack < len(self._packs):
            source = self._packs[pack]
            while at < source.count:
                if copied >= budget:
                    self._cursor = (pack, at)
                    self._flush()
                    return False
                i, offset = source.order[at], source.offsets[at]
                at += 1
                stop = source.offsets[at] if at < source.count else source.end
                if source.dup[i]:
                    continue  # also in an earlier source
                raw = source.read(offset, stop)
                if len(raw) != stop - offset or zlib.crc32(raw) != source.crcs[i]:
                    raise ValueError(
                        f"pack entry {source.oid(i).hex()} does not match its index's CRC"
                    )
                self._copy(raw, offset, pack, i)
                copied += max(len(raw), ENTRY_COST)
            pack, at = pack + 1, 0
        self._cursor = (pack, at)
        self._flush()
        return True

    def _placed(self, pack: int, offset: int) -> int:
        """Where the entry at ``offset`` of source ``pack`` is in the new pack, or -1."""
        source = self._packs[pack]
        at = bisect.bisect_left(source.offsets, offset)
        if at == source.count or source.offsets[at] != offset:
            return -1
        i = source.order[at]
        if source.dup[i]:
            oid = source.oid(i)
            for earlier in self._packs[:pack]:
                j = earlier.find(oid)
                if j >= 0 and not earlier.dup[j]:
                    return earlier.placed[j]
        return source.placed[i]

    def _copy(self, raw: bytes, offset: int, pack: int, i: int) -> None:
        pos = 1
        while raw[pos - 1] & 0x80:  # the entry header's size continues
            pos += 1
        if (raw[0] >> 4) & 7 == _OFS_DELTA:
            distance = raw[pos] & 0x7F
            end = pos + 1
            while raw[end - 1] & 0x80:
                distance = ((distance + 1) << 7) | (raw[end] & 0x7F)
                end += 1
            base = self._placed(pack, offset - distance)
            if base < 0:
                oid = self._packs[pack].oid(i)
                raise ValueError(f"pack entry {oid.hex()} is a delta of no entry before it")
            raw = raw[:pos] + _ofs_distance(self._offset - base) + raw[end:]
        source = self._packs[pack]
        source.placed[i] = self._offset
        source.crcs_out[i] = zlib.crc32(raw)
        self._copied += 1
        self._parts.append(raw)
        self._offset += len(raw)
        self._pending += len(raw)
        if self._pending >= _BUFFER:
            self._flush()

    def _flush(self) -> None:
        data = b"".join(self._parts)
        self._digest.update(data)
        write_all(self._fd, data)
        self._parts, self._pending = [], 0

    def finish(self, pack_dir: Path) -> Path:
        """Publish the new pack (every :meth:`step` done) durably in ``pack_dir``; return its
        index's path. The sources are left for the caller to remove."""
        assert self._tmp is not None and self._cursor[0] == len(self._packs)
        try:
            if self._copied != self._count:
                raise ValueError("the merged pack does not hold every object of its sources")
            checksum = self._digest.digest()
            write_all(self._fd, checksum)
            entries = Entries()
            for oid, pack, i in self._in_id_order(skip_dups=True):
                source = self._packs[pack]
                entries.append(oid, source.crcs_out[i], source.placed[i])
            return _publish(self._tmp, self._tmp / "pack", entries, checksum, pack_dir)
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Close every file and remove the temporary directory (a published pack stays)."""
        for source in self._packs:
            os.close(source.fd)
        self._packs = []
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._tmp is not None and self.pid == os.getpid():
            shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp = None


def _write_pack_file(
    objects: Iterable[PackObject], path: Path, deflate_min: int, seen: set[bytes]
) -> tuple[Path, Entries, bytes]:
    """Write the pack at ``path``; return it, its entries, and its checksum. The objects are
    streamed: one is held at a time, whatever the pack's size; what stays of each is its
    entry and its id in ``seen``. ``deflate_min``, ``seen``: as :func:`write_pack`'s
    ``deflate_min`` and ``packed``."""
    entries = Entries()
    bases = _TreeBases(seen)
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
            if kind == b"tree":
                name = bases.path_of(oid)
                keys = _keys(payload)
                delta = bases.delta(payload, keys, name)
            else:
                delta = None
                if kind == b"commit":
                    bases.name_root(payload)
            if delta is None:
                header = _entry_header(TYPE_CODES[kind], len(payload))
                body = _deflate(kind, payload, deflate_min)
                depth = 0
            else:
                base_offset, depth, data, _, _ = delta
                header = _entry_header(_OFS_DELTA, len(data)) + _ofs_distance(offset - base_offset)
                body = _deflate(b"delta", data, deflate_min)
            if kind == b"tree":
                bases.add(payload, keys, offset, depth, name, delta)
            entries.append(oid, zlib.crc32(body, zlib.crc32(header)), offset)
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


# A tree's delta as _TreeBases.delta chooses it: the base's pack offset, the delta's chain depth,
# the git delta data, and the bytes the tree shares with its base at its beginning and its end.
# A plain tuple: a NamedTuple cost half a microsecond a delta.
_Delta = tuple[int, int, bytes, int, int]


class _TreeBases:
    """Trees already written that a later tree may be stored as a delta of.

    Trees are whole lists of entries: a write changes one entry of each directory above the
    file, so a version of a directory tree shares its beginning and its end with the version
    before, and a delta of one copy, one insert and one copy holds only what changed. An edit
    of a file may change entries in several places of its tree (a chunk, and its header at
    the end): when the common ends leave more than ``_GOOD_DELTA`` bytes between them, the
    delta copies each run of entries the base holds in the same order (:func:`_entry_delta`)
    and inserts only the entries that changed. gitmem's blobs (ciphertext) and commits (a
    sealed record) share nothing and are stored whole.

    **By path first.** A tree's other versions are looked for first under its path, as git
    sorts objects by path before it searches: the entry name an earlier tree of the pack gave
    it (``_NAME_MIN`` bytes or more: gitmem's sealed names, which bind the parent's path, so
    one name is one path) or, for a commit's tree, the root. The writers give a tree after the
    tree or commit naming it (newest first, and gc walks down from commits), so a tree's
    older version is a delta of its newer one. A tree with no other version of its path among
    the trees kept (its path's newest in the pack) may be a delta only of a tree stored whole:
    a delta of another path's tree that is itself a delta chains unrelated trees, and a memory
    file's tree shares its header entry (same size, same header blob) with other notes', so
    such deltas would chain every note's current tree through unrelated ones, dozens deep
    (performance.md, "Shallow delta chains for file trees").

    **By first entries otherwise.** A tree with no name (a split directory's buckets
    ``b00``…, or a pack whose objects come in another order) is found by its first two
    entries, each with its id: a write changes one entry, so at least one of them is unchanged
    (or, when the first is added or removed, the first of one version is the second of the
    other). Not by a first name alone: a split directory's top tree and its 64 first-level
    buckets all begin with bucket ``b00``, and under one name they pushed each other's
    versions out of the few kept (most first-level buckets then found only other buckets'
    trees, sharing nothing).
    """

    def __init__(self, packed: set[bytes]) -> None:
        self.keyed: dict[bytes, list[tuple[bytes, int, int]]] = {}
        # Each tree kept, oldest first, by pack offset: its size and the keys it is listed
        # under; and the bytes they take, with what keeping each costs besides its bytes.
        self.added: dict[int, tuple[int, tuple[bytes, ...]]] = {}
        self.kept = 0
        self.packed = packed  # ids already in the pack: they need no name
        self.names: dict[bytes, bytes] = {}  # tree id -> its path key, until it is packed

    def path_of(self, oid: bytes) -> bytes | None:
        """The path key of the tree ``oid`` (given by a tree or commit packed before it)."""
        return self.names.pop(oid, None)

    def name_root(self, commit: bytes) -> None:
        """Name the tree of ``commit`` (a commit's payload begins ``tree <hex id>``)."""
        if not commit.startswith(b"tree "):
            return
        try:
            oid = bytes.fromhex(commit[5:45].decode("ascii"))
        except ValueError:
            return  # not a well-formed commit: its tree just goes unnamed
        if oid not in self.packed:
            self.names.setdefault(oid, _ROOT)

    def delta(self, tree: bytes, keys: tuple[bytes, ...], path: bytes | None) -> _Delta | None:
        """The delta ``tree`` (whose first entries are ``keys``) is stored as, or None to store
        it whole: against another version of ``path`` where one is kept, else against a kept
        tree sharing one of its first two entries (one stored whole if ``path`` is known)."""
        if path is not None:
            versions = self.keyed.get(path)
            if versions:
                found = self._best(tree, versions, DELTA_DEPTH)
                if found is not None:
                    return found
            depth_limit = 1
        else:
            depth_limit = DELTA_DEPTH
        keyed = self.keyed
        candidates = itertools.chain.from_iterable(keyed.get(k, ()) for k in keys)
        return self._best(tree, candidates, depth_limit)

    def _best(
        self,
        tree: bytes,
        candidates: Iterable[tuple[bytes, int, int]],
        depth_limit: int,
    ) -> _Delta | None:
        """The smallest delta of ``tree`` against a candidate less than ``depth_limit`` deep;
        None when no delta is small enough. Candidates rank by the bytes of ``tree`` their
        delta copies: their common beginning and end when those leave little between, else
        every run of entries :func:`_entry_delta` finds in them."""
        best: tuple[int, int, int, int, int, bytes | None, bytes] | None = None
        tried: set[int] = set()
        for base, base_offset, depth in candidates:
            if depth >= depth_limit or min(len(base), len(tree)) <= (best[0] if best else 0):
                continue  # too deep, or cannot match more than the best so far
            if base_offset in tried:
                continue  # kept under both keys: compared already
            tried.add(base_offset)
            prefix = common_prefix(base, tree)
            suffix = common_suffix(base, tree, min(len(base), len(tree)) - prefix)
            if len(tree) - prefix - suffix <= _GOOD_DELTA:
                # One changed entry or so: one copy, one insert, one copy is as small as any,
                # and the search costs more than it could save.
                if best is None or prefix + suffix > best[0]:
                    best = (prefix + suffix, base_offset, depth + 1, prefix, suffix, None, base)
                break
            data: bytes | None = None
            copied = prefix + suffix
            found = _entry_delta(base, tree, prefix, suffix)
            if found is not None and found[1] > copied:  # (the ends may cut an entry it inserts)
                data, copied = found
            if best is None or copied > best[0]:
                best = (copied, base_offset, depth + 1, prefix, suffix, data, base)
                if len(tree) - copied <= _GOOD_DELTA:
                    break  # several changed entries, each a small insert: good enough
        if best is None:
            return None
        matched, base_offset, depth, prefix, suffix, data, base = best
        if len(tree) - matched > _DELTA_SHARE * len(tree):
            return None  # what it inserts alone is too much: no need to build it
        if data is None:
            data = _delta_data(base, tree, prefix, suffix)
        if len(data) > _DELTA_SHARE * len(tree):
            return None
        return base_offset, depth, data, prefix, suffix

    def add(
        self,
        tree: bytes,
        keys: tuple[bytes, ...],
        offset: int,
        depth: int,
        path: bytes | None,
        delta: _Delta | None,
    ) -> None:
        """Keep ``tree`` (first entries ``keys``), written at ``offset`` at chain ``depth``
        (under ``path`` if known, as ``delta`` if one), as a base for later ones, and name the
        trees it lists."""
        if not keys:
            return  # the empty tree (or no tree at all): nothing to share, nothing listed
        entry = (tree, offset, depth)
        keyed = self.keyed
        for key in keys:
            kept = keyed.setdefault(key, [])
            kept.insert(0, entry)
            if len(kept) > _BASES_PER_KEY:
                kept.pop()
        if path is not None:
            kept = keyed.setdefault(path, [])
            kept.insert(0, entry)
            if len(kept) > _VERSIONS_KEPT:
                kept.pop()
            keys = (*keys, path)
        self.added[offset] = (len(tree), keys)
        self.kept += len(tree) + _BASE_OVERHEAD
        while self.kept > _BASES_BYTES:
            self._forget_oldest()
        if len(keys[0]) < _ENTRY_FIXED + _NAME_MIN:
            return  # a short first name (buckets b00..., a file's chunks): no names to give
        if delta is None:
            start, stop = 0, len(tree)
        else:
            # What it shares with its base lists the same trees under the same names (whole
            # entries, name and id), named when the base was: only the entries between are
            # read.
            start, stop = delta[3], len(tree) - delta[4]
        self._name_entries(tree, start, stop)

    def _forget_oldest(self) -> None:
        """Drop the tree kept longest from every list it is in: memory stays bounded, and the
        trees a later one may be a delta of (its path's last versions, the trees just written)
        stay, where dropping them all at once would store the next version of every path
        whole."""
        offset, (size, keys) = next(iter(self.added.items()))
        del self.added[offset]
        self.kept -= size + _BASE_OVERHEAD
        keyed = self.keyed
        for key in keys:
            kept = keyed.get(key)
            if kept is None:
                continue
            kept[:] = [entry for entry in kept if entry[1] != offset]
            if not kept:
                del keyed[key]

    def _name_entries(self, tree: bytes, start: int, stop: int) -> None:
        """Name each tree not yet packed that an entry of ``tree`` (mode ``40000``, a name of
        at least ``_NAME_MIN`` bytes) lists, of the entries beginning before ``stop`` from
        an entry boundary at or before ``start`` on."""
        names, packed = self.names, self.packed
        if len(names) >= _NAMES_MAX:
            names.clear()  # bounded memory; trees not yet packed go unnamed
        pos = _boundary_before(tree, start) if start else 0
        find, startswith = tree.find, tree.startswith
        while pos < stop:
            nul = find(b"\0", pos)
            if nul < 0:
                return  # malformed: nothing more to name (the pack stores it as given)
            if nul - pos >= _NAME_MIN + 6 and startswith(b"40000 ", pos):
                oid = tree[nul + 1 : nul + 21]
                if oid not in packed:
                    names.setdefault(oid, tree[pos + 6 : nul])
            pos = nul + 21


def _keys(tree: bytes) -> tuple[bytes, ...]:
    """The tree's first two entries (mode, name and id), or as many as it has."""
    first = tree.find(b"\0") + 21
    if first < 21:
        return ()  # the empty tree: nothing to share
    second = tree.find(b"\0", first) + 21
    return (tree[:first],) if second < 21 else (tree[:first], tree[first:second])


def _boundary_before(tree: bytes, limit: int) -> int:
    """A position at or before ``limit`` where an entry of ``tree`` begins (0 if none is
    found at once). An entry begins 21 bytes after the NUL ending the name before it (its
    id follows the NUL); an id may hold a NUL byte too, so a position counts only when a mode
    and a space begin there (a sealed name holds neither)."""
    nul = tree.rfind(b"\0", 0, max(limit - 20, 0))
    for _ in range(4):
        if nul < 0:
            return 0
        if tree.startswith(_MODES, nul + 21):
            return nul + 21
        nul = tree.rfind(b"\0", 0, nul)
    return 0


def _delta_data(base: bytes, target: bytes, prefix: int, suffix: int) -> bytes:
    """git delta data making ``target`` from ``base``, which share their first ``prefix`` and
    last ``suffix`` bytes: copy the prefix, insert the middle, copy the suffix."""
    out = bytearray(_varint(len(base)) + _varint(len(target)))
    _copy(out, 0, prefix)
    _insert(out, target[prefix : len(target) - suffix])
    _copy(out, len(base) - suffix, suffix)
    return bytes(out)


def _entry_delta(base: bytes, target: bytes, prefix: int, suffix: int) -> tuple[bytes, int] | None:
    """git delta data making ``target`` from ``base`` entry by entry, and how many bytes of
    ``target`` it copies; None once it would insert more than ``_DELTA_SHARE`` of ``target``
    (too large to keep). ``base`` and ``target`` share their first ``prefix`` and last
    ``suffix`` bytes; between them, each run of ``target``'s entries that lie one after
    another in ``base`` too is one copy, and the entries ``base`` lacks are inserted. So a
    tree changed in several places (a file tree's chunk, a base entry inserted in sorted
    order and its header) costs those entries, where a copy of the common ends would insert
    all that lies between them.

    Only the entries between the common ends are walked, and looked for in the base between
    them: the first few with a search of its bytes, then in an index of its entries (a search
    for each entry of a large tree would read the tree once for each). Any cut of the bytes
    into "entries" makes a correct delta, since each copy is of bytes found equal: a
    malformed tree only copies less."""
    start = _boundary_before(target, prefix) if prefix else 0
    base_stop = len(base) - suffix
    out = bytearray(_varint(len(base)) + _varint(len(target)))
    # The copy being extended (base offset and size; its first bytes are those of the common
    # beginning) and where the bytes to insert began in target, if any.
    copy_from, copy_size, insert_from = 0, start, -1
    copied = inserted = searches = 0
    index: dict[bytes, int] | None = None
    too_much = _DELTA_SHARE * len(target)
    startswith, find = base.startswith, target.find
    end = len(target) - suffix
    pos = start
    while pos < end:
        nul = find(b"\0", pos)
        stop = len(target) if nul < 0 else min(nul + 21, len(target))
        entry = target[pos:stop]
        if copy_size and startswith(entry, copy_from + copy_size):
            copy_size += stop - pos
        else:
            if index is not None:
                at = index.get(entry, -1)
            elif searches < _ENTRY_SEARCHES:
                searches += 1
                at = base.find(entry, start, base_stop)
            else:
                index = _entry_index(base, start, base_stop)
                at = index.get(entry, -1)
            if at < 0:
                if insert_from < 0:
                    _copy(out, copy_from, copy_size)
                    copied += copy_size
                    copy_size, insert_from = 0, pos
                if inserted + stop - insert_from > too_much:
                    return None
            else:
                if insert_from >= 0:
                    _insert(out, target[insert_from:pos])
                    inserted += pos - insert_from
                    insert_from = -1
                else:
                    _copy(out, copy_from, copy_size)
                    copied += copy_size
                copy_from, copy_size = at, stop - pos
        pos = stop
        if copy_size:
            # The copy goes on over every byte the two share from here, to the start of the
            # entry where they differ (at memcmp speed: runs of unchanged entries are long).
            run = _shared_run(target, pos, base, copy_from + copy_size)
            if pos + run == len(target):
                copy_size, pos = copy_size + run, len(target)
            elif run > _ENTRY_FIXED:
                boundary = _boundary_before(target, pos + run)
                if boundary > pos:
                    copy_size, pos = copy_size + boundary - pos, boundary
    # What is left of target, from an entry's start, lies in the common end.
    tail = len(target) - pos
    tail_from = len(base) - tail
    if insert_from >= 0:
        _insert(out, target[insert_from:pos])
    elif copy_from + copy_size == tail_from:
        tail += copy_size
        tail_from = copy_from
    else:
        _copy(out, copy_from, copy_size)
        copied += copy_size
    _copy(out, tail_from, tail)
    return bytes(out), copied + tail


def _entry_index(tree: bytes, start: int, stop: int) -> dict[bytes, int]:
    """Where each entry of ``tree`` beginning from ``start`` and before ``stop`` begins (its
    first place, for an entry listed twice)."""
    index: dict[bytes, int] = {}
    find = tree.find
    pos = start
    while pos < stop:
        nul = find(b"\0", pos)
        end = len(tree) if nul < 0 else min(nul + 21, len(tree))
        index.setdefault(tree[pos:end], pos)
        pos = end
    return index


def _shared_run(a: bytes, a_at: int, b: bytes, b_at: int) -> int:
    """How many bytes ``a`` from ``a_at`` and ``b`` from ``b_at`` share, compared a block at
    a time (so a short run reads no more than a block of a large tree)."""
    run = 0
    while True:
        block = common_prefix(
            a[a_at + run : a_at + run + _RUN_BLOCK], b[b_at + run : b_at + run + _RUN_BLOCK]
        )
        run += block
        if block < _RUN_BLOCK:
            return run


def _insert(out: bytearray, data: bytes) -> None:
    """Append insert instructions for ``data``: each holds at most 127 bytes."""
    for start in range(0, len(data), 0x7F):
        piece = data[start : start + 0x7F]
        out.append(len(piece))
        out += piece


def _copy(out: bytearray, offset: int, size: int) -> None:
    """Append copy instructions for ``size`` bytes of the base from ``offset``: each copies at
    most 64 KiB, as git writes them; only the nonzero bytes of offset and size are stored."""
    while size > 0:
        step = min(size, 0x10000)
        command = 0x80
        operands = bytearray()
        for i in range(4):
            byte = (offset >> (8 * i)) & 0xFF
            if byte:
                command |= 1 << i
                operands.append(byte)
        for i in range(3):
            byte = (step >> (8 * i)) & 0xFF
            if byte:
                command |= 1 << (4 + i)
                operands.append(byte)
        out.append(command)
        out += operands
        offset += step
        size -= step


def _varint(value: int) -> bytes:
    """A delta's size encoding: 7 bits a byte, low first, the top bit saying another follows."""
    out = bytearray()
    while value >= 0x80:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def _ofs_distance(distance: int) -> bytes:
    """An ofs-delta's distance back to its base: 7 bits a byte, high first, each byte but the
    last with its top bit set, and one added per continuation (gitformat-pack's offset
    encoding)."""
    out = [distance & 0x7F]
    distance >>= 7
    while distance:
        distance -= 1
        out.append(0x80 | (distance & 0x7F))
        distance >>= 7
    return bytes(reversed(out))


class Entries:
    """A pack's entries as its index lists them, in pack order: each object's 20-byte id,
    the CRC-32 of its entry and its offset, in flat arrays: 32 bytes an entry, where a tuple
    of Python objects would take about 150."""

    def __init__(self) -> None:
        self.ids = bytearray()
        self.crcs = array("I")
        self.offsets = array("Q")

    def append(self, oid: bytes, crc: int, offset: int) -> None:
        self.ids += oid
        self.crcs.append(crc)
        self.offsets.append(offset)

    def __len__(self) -> int:
        return len(self.crcs)

    def id_order(self) -> array[int]:
        """The entries' positions, sorted by id: each of the 256 groups of a first byte sorted
        in turn, so that sorting holds a key per entry of one group only."""
        ids = self.ids
        groups = [array("I") for _ in range(256)]
        for i in range(len(self)):
            groups[ids[20 * i]].append(i)
        order = array("I")
        for group in groups:
            order.extend(sorted(group, key=lambda i: ids[20 * i : 20 * i + 20]))
        return order


# The index is written this many entries at a time.
_INDEX_CHUNK = 1 << 14


def _write_index(path: Path, entries: Entries, pack_checksum: bytes) -> None:
    """Write the version-2 index of a pack with ``entries`` at ``path``, a chunk of entries at
    a time (its memory is its entries' order, 4 bytes an entry, besides one chunk)."""
    order = entries.id_order()
    ids, crcs, offsets = entries.ids, entries.crcs, entries.offsets
    count = len(order)
    fanout = [0] * 256
    for i in order:
        fanout[ids[20 * i]] += 1
    total = 0
    for i, n in enumerate(fanout):
        total += n
        fanout[i] = total
    starts = range(0, count, _INDEX_CHUNK)
    large: list[int] = []
    digest = hashlib.sha1()
    fd = os.open(path, NEW_FILE_FLAGS, PACK_FILE_MODE)
    try:

        def put(data: bytes) -> None:
            digest.update(data)
            write_all(fd, data)

        put(_IDX_MAGIC + struct.pack(">I", 2) + struct.pack(">256I", *fanout))
        for at in starts:
            put(b"".join(ids[20 * i : 20 * i + 20] for i in order[at : at + _INDEX_CHUNK]))
        for at in starts:
            put(_network_bytes(array("I", (crcs[i] for i in order[at : at + _INDEX_CHUNK]))))
        for at in starts:
            small = array("I")
            for i in order[at : at + _INDEX_CHUNK]:
                offset = offsets[i]
                if offset >= LARGE_OFFSET:
                    small.append(0x80000000 | len(large))
                    large.append(offset)
                else:
                    small.append(offset)
            put(_network_bytes(small))
        put(struct.pack(f">{len(large)}Q", *large) + pack_checksum)
        write_all(fd, digest.digest())
    finally:
        os.close(fd)


def _network_bytes(values: array[int]) -> bytes:
    """The bytes of ``values`` (4-byte unsigned integers) in network order."""
    if sys.byteorder == "little":
        values.byteswap()
    return values.tobytes()
