"""How a file's bytes are cut into chunks: the one place that decides chunk boundaries.

Boundaries are content-defined (FastCDC-style, with a gear hash over a 16-byte window) and keyed:
the gear table is derived from the store's chunker seed, so the positions of boundaries in a
known text cannot be computed without the key. ``docs/design.md`` ("Chunking") is the normative
description; this module and ``tests/test_chunking.py`` (a byte-at-a-time reference) follow it.

Speed without a compiled extension: the hash of every position is computed at once with
Python's big integers (one 32-bit lane per byte, the 16-term sum built by four shift-and-adds),
and candidate boundaries are then found with ``bytes.find``. An edit is cheaper still: given the
file's previous version and its boundaries, only the region around the change is rehashed and
the previous boundaries are reused before and after it (the result is the same as a fresh split).
"""

from __future__ import annotations

import hashlib
import threading
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import NamedTuple

# A boundary decision looks at the 16 bytes ending at the candidate position.
WINDOW = 16
_GEAR_INFO = b"gitmem/v2/chunker/gear-table"
# A mask of k bits is bits 16..15+k of the 32-bit sum, growing down from bit 16 past 15 bits
# (at most bits 13..30). Bits from 15 up depend on all 16 bytes of the window (bits 13 and 14
# on the last 14 and 15), and the sum modulo 2**31 is uniform when the table is, so k mask bits
# all hold with probability 2**-k. Masks are nested, and from 8 bits on they cover hash bits
# 16..23 entirely, which lets one byte of each lane find the candidates.
_MAX_MASK_BITS = 18
# The first rehash block of a lazy scan; later blocks double, so at most half the work is spent
# past the point where the scan could stop.
_FIRST_BLOCK = 4096
# Previous versions kept for incremental splits, per chunker: a few files, bounded in bytes.
_RECENT_FILES = 4
_RECENT_BYTES = 32 << 20


@dataclass(frozen=True)
class Params:
    """Chunk size limits: ``min_size`` <= chunk <= ``max_size``, aiming at ``avg_size``.

    ``avg_size`` is a power of two; below it a boundary needs ``log2(avg) + nc`` zero hash bits,
    from it on ``log2(avg) - nc`` (FastCDC's normalized chunking).
    """

    min_size: int
    avg_size: int
    max_size: int
    nc: int = 2

    def __post_init__(self) -> None:
        bits = self.avg_size.bit_length() - 1
        if self.avg_size != 1 << bits:
            raise ValueError("avg_size must be a power of two")
        if not WINDOW <= self.min_size <= self.avg_size <= self.max_size:
            raise ValueError("chunk sizes must satisfy 16 <= min <= avg <= max")
        if not (bits - self.nc >= 2 and bits + self.nc <= _MAX_MASK_BITS):
            raise ValueError("avg_size and nc give masks outside the usable hash bits")

    @property
    def mask_strict(self) -> int:
        """The mask tested for chunks shorter than ``avg_size``."""
        return _mask(self.avg_size.bit_length() - 1 + self.nc)

    @property
    def mask_loose(self) -> int:
        """The mask tested for chunks of ``avg_size`` and longer (a subset of the strict one)."""
        return _mask(self.avg_size.bit_length() - 1 - self.nc)


def _mask(bits: int) -> int:
    if bits <= 15:
        return ((1 << bits) - 1) << 16
    return ((1 << bits) - 1) << (31 - bits)


# Chunk sizes grow with the file, so that a large file is a few dozen blobs (reads stay close to
# one-blob speed) while small and medium files, where most edits land, keep small chunks (an
# edit rewrites little). See docs/design.md, "Chunking", for the measurements behind them.
TIERS: tuple[tuple[int, Params], ...] = ((0, Params(512, 2048, 8192)),)


def params_for(size: int) -> Params:
    """The chunk size limits for a file of ``size`` bytes."""
    chosen = TIERS[0][1]
    for threshold, params in TIERS:
        if size >= threshold:
            chosen = params
    return chosen


@lru_cache(maxsize=16)
def gear_tables(seed: bytes) -> tuple[bytes, bytes]:
    """The keyed gear table as two byte-translation tables (low and high byte of each entry).

    Entry ``b`` is the 16-bit little-endian integer at ``2*b`` of SHAKE-256(info || seed).
    """
    if len(seed) < 16:
        raise ValueError("the chunker seed is too short")
    stream = hashlib.shake_256(_GEAR_INFO + seed).digest(512)
    return stream[0::2], stream[1::2]


def gear_hash(data: bytes, pos: int, seed: bytes) -> int:
    """The 32-bit gear sum at ``pos``: sum of gear[data[pos - i]] << i for i < 16 (slow path)."""
    low, high = gear_tables(seed)
    total = 0
    for i in range(WINDOW):
        if pos - i < 0:
            break
        byte = data[pos - i]
        total += (low[byte] | high[byte] << 8) << i
    return total


class _Scan:
    """Lazily computed boundary candidates of ``data`` from position ``start`` on."""

    def __init__(self, data: bytes, start: int, tables: tuple[bytes, bytes], params: Params):
        self.data = data
        self.low, self.high = tables
        self.mask_loose = params.mask_loose
        self.mask_strict = params.mask_strict
        plane = (self.mask_loose >> 16) & 0xFF
        # The byte of each lane holding hash bits 16..23 is searched with bytes.find: zero bytes
        # are candidates when all eight bits are masked, else a table maps the masked bits first.
        self.plane_table = (
            None if plane == 0xFF else bytes(0 if b & plane == 0 else 1 for b in range(256))
        )
        self.done = start
        self.block = _FIRST_BLOCK
        # Cut offsets (one past the last byte of a chunk) whose hash passes the loose mask, and
        # those of them that also pass the strict one.
        self.loose: list[int] = []
        self.strict: set[int] = set()

    def ensure(self, end: int) -> None:
        """Make sure every candidate cut offset below ``end`` is known."""
        end = min(end, len(self.data) + 1)
        while self.done < end:
            stop = min(len(self.data) + 1, max(end, self.done + self.block))
            self._scan(self.done, stop)
            self.done = stop
            self.block *= 2

    def _scan(self, lo: int, hi: int) -> None:
        # Cut offset e is decided by the hash at position e - 1.
        plo, phi = max(lo - 1, 0), hi - 1
        if phi <= plo:
            return
        start = max(0, plo - WINDOW + 1)
        seg = self.data[start:phi]
        count = len(seg)
        buf = bytearray(4 * count)
        buf[0::4] = seg.translate(self.low)
        buf[1::4] = seg.translate(self.high)
        acc = int.from_bytes(buf, "little")
        # Lane q becomes sum(gear[seg[q - i]] << i, i < 16): each step doubles the terms summed,
        # and a lane never exceeds 32 bits ((2**16 - 1) * (2**16 - 1)), so no carry crosses.
        acc += acc << 33
        acc += acc << 66
        acc += acc << 132
        acc += acc << 264
        lanes = acc.to_bytes(4 * count + 64, "little")
        first = plo - start
        plane = lanes[4 * first + 2 : 4 * count : 4]
        if self.plane_table is not None:
            plane = plane.translate(self.plane_table)
        loose, strict = self.mask_loose, self.mask_strict
        find = plane.find
        j = find(0)
        while j >= 0:
            at = 4 * (first + j)
            value = int.from_bytes(lanes[at : at + 4], "little")
            if value & loose == 0:
                cut = plo + j + 1
                self.loose.append(cut)
                if value & strict == 0:
                    self.strict.add(cut)
            j = find(0, j + 1)

    def cut_from(self, start: int, params: Params) -> int:
        """The end of the chunk that starts at ``start``."""
        size = len(self.data)
        if size - start <= params.min_size:
            return size
        limit = min(start + params.max_size, size)
        self.ensure(limit + 1)
        loose = self.loose
        i = bisect_left(loose, start + params.min_size)
        normal = min(start + params.avg_size, limit)
        while i < len(loose) and loose[i] < normal:
            if loose[i] in self.strict:
                return loose[i]
            i += 1
        i = bisect_left(loose, normal, i)
        if i < len(loose) and loose[i] < limit:
            return loose[i]
        return limit


_COMPARE_BLOCK = 8192


def _common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (memcmp speed)."""
    limit = min(len(a), len(b))
    view = memoryview(b)
    lo, step = 0, _COMPARE_BLOCK  # a[:lo] == b[:lo]; blocks grow so that long runs cost little
    while lo < limit and a.startswith(view[lo : min(lo + step, limit)], lo):
        lo, step = lo + step, step * 2
    if lo >= limit:
        return limit
    hi = min(lo + step, limit)  # a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a.startswith(view[lo:mid], lo):
            lo = mid
        else:
            hi = mid
    return lo


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    """The length (at most ``limit``) of the longest common suffix of ``a`` and ``b``."""
    limit = min(len(a), len(b), limit)
    view = memoryview(b)
    na, nb = len(a), len(b)
    lo = 0  # the last lo bytes agree

    def same(k: int, j: int) -> bool:  # a[na-j : na-k] == b[nb-j : nb-k]
        return a.startswith(view[nb - j : nb - k], na - j)

    step = _COMPARE_BLOCK
    while lo < limit and same(lo, min(lo + step, limit)):
        lo, step = lo + step, step * 2
    if lo >= limit:
        return limit
    hi = min(lo + step, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if same(lo, mid):
            lo = mid
        else:
            hi = mid
    return lo


class Piece(NamedTuple):
    """One chunk of a split: its bytes and, when an identical chunk of a remembered file is
    known, the tag that was remembered with it (the caller's handle for the stored chunk)."""

    data: bytes
    tag: str | None


@dataclass(frozen=True)
class _Known:
    data: bytes
    cuts: tuple[int, ...]
    tags: tuple[str | None, ...]
    checked: bool = True


class Chunker:
    """The keyed content-defined chunker of one store; remembers a few recent files.

    Remembered files (data, cut offsets, a tag per chunk) let :meth:`pieces` rehash only around
    an edit and hand back the tags of chunks that did not change; the cuts never depend on
    them. Safe to share between threads.
    """

    def __init__(self, seed: bytes) -> None:
        self.tables = gear_tables(seed)
        self._recent: list[_Known] = []
        self._lock = threading.Lock()

    def split(self, data: bytes) -> list[bytes]:
        """Cut ``data`` into chunks; an empty file has none."""
        return [piece.data for piece in self.pieces(data)]

    def cuts(self, data: bytes) -> list[int]:
        """The end offset of every chunk of ``data``, in order (the last is ``len(data)``)."""
        return list(accumulate(len(piece.data) for piece in self.pieces(data)))

    def pieces(self, data: bytes) -> list[Piece]:
        """Cut ``data`` into chunks, each with the tag of an identical remembered chunk if any.

        ``data`` is remembered afterwards (without tags); :meth:`remember` adds them.
        """
        if not data:
            return []
        params = params_for(len(data))
        old, prefix, suffix = self._best_hint(data, params)
        cuts, tags = self._cuts(data, params, old, prefix, suffix)
        pieces = [Piece(data[b:e], t) for b, e, t in zip([0, *cuts], cuts, tags, strict=False)]
        self._note(_Known(data, tuple(cuts), (None,) * len(cuts)))
        return pieces

    def remember(self, data: bytes, cuts: Sequence[int], tags: Sequence[str | None]) -> None:
        """Note that ``data`` is stored as chunks ending at ``cuts``, known by ``tags``.

        A later :meth:`pieces` of an edited version rehashes only around the edit and returns
        these tags for chunks that did not change. Cut lists that this chunker would not make
        (files written before chunking, or with other parameters) are ignored.
        """
        if not data or len(cuts) != len(tags) or not cuts or cuts[-1] != len(data):
            return
        with self._lock:
            same = [k for k in self._recent if k.cuts == tuple(cuts) and k.data == data]
        if same and same[0].tags == tuple(tags):
            return
        # Cuts this chunker made itself need no check; others are checked if ever used.
        self._note(_Known(data, tuple(cuts), tuple(tags), checked=bool(same)))

    def forget(self) -> None:
        """Drop every remembered file."""
        with self._lock:
            self._recent = []

    def _note(self, known: _Known) -> None:
        if len(known.data) > _RECENT_BYTES:
            return
        with self._lock:
            recent, total = [known], len(known.data)
            for other in self._recent:
                total += len(other.data)
                if len(recent) >= _RECENT_FILES or total > _RECENT_BYTES:
                    break
                if other.data != known.data:
                    recent.append(other)
            self._recent = recent

    def _plausible(self, data: bytes, cuts: Sequence[int]) -> bool:
        params = params_for(len(data))
        if not cuts or cuts[-1] != len(data):
            return False
        start = 0
        low, high = self.tables
        for end in cuts[:-1]:
            length = end - start
            if not params.min_size <= length <= params.max_size:
                return False
            if length < params.max_size:
                total = 0
                for i in range(WINDOW):
                    byte = data[end - 1 - i]
                    total += (low[byte] | high[byte] << 8) << i
                mask = params.mask_strict if length < params.avg_size else params.mask_loose
                if total & mask:
                    return False
            start = end
        return len(data) - start <= params.max_size

    def _best_hint(self, data: bytes, params: Params) -> tuple[_Known, int, int]:
        best, best_prefix, best_suffix = _Known(b"", (), ()), 0, 0
        with self._lock:
            recent = list(self._recent)
        for known in recent:
            if params_for(len(known.data)) != params:
                continue
            prefix = _common_prefix(known.data, data)
            suffix = _common_suffix(known.data, data, min(len(known.data), len(data)) - prefix)
            if prefix + suffix > best_prefix + best_suffix:
                best, best_prefix, best_suffix = known, prefix, suffix
        if not best.checked and not self._plausible(best.data, best.cuts):
            return _Known(b"", (), ()), 0, 0
        return best, best_prefix, best_suffix

    def _cuts(
        self, data: bytes, params: Params, old: _Known, prefix: int, suffix: int
    ) -> tuple[list[int], list[str | None]]:
        cuts: list[int] = []
        tags: list[str | None] = []
        start = 0
        # A cut that ends a chunk before the edit was decided by bytes before the edit alone,
        # unless it was the end of the old file (a final cut depends on the length).
        for index, end in enumerate(old.cuts):
            if end > prefix or end == len(old.data):
                break
            cuts.append(end)
            tags.append(old.tags[index])
            start = end
        size = len(data)
        shift = size - len(old.data)
        tail = len(old.data) - suffix
        scan = _Scan(data, start, self.tables, params)
        while start < size:
            end = scan.cut_from(start, params)
            cuts.append(end)
            # A chunk cut afresh may still equal an old one (bytes unchanged, same cuts).
            if end <= prefix:
                tags.append(_old_tag(old, start, end))
            elif start - shift >= tail:
                tags.append(_old_tag(old, start - shift, end - shift))
            else:
                tags.append(None)
            start = end
            # From a start inside the unchanged tail that was also a start before, every later
            # decision reads the same bytes as before: the old cuts follow, shifted.
            if suffix and start >= size - suffix and start < size:
                index = bisect_left(old.cuts, start - shift)
                if start == shift or (index < len(old.cuts) and old.cuts[index] == start - shift):
                    first = 0 if start == shift else index + 1
                    cuts.extend(c + shift for c in old.cuts[first:])
                    tags.extend(old.tags[first:])
                    break
        return cuts, tags


def _old_tag(old: _Known, begin: int, end: int) -> str | None:
    """The tag of the old chunk spanning exactly ``[begin, end)``, if there is one."""
    index = bisect_left(old.cuts, end)
    found = index < len(old.cuts) and old.cuts[index] == end
    if found and (old.cuts[index - 1] if index else 0) == begin:
        return old.tags[index]
    return None


@lru_cache(maxsize=16)
def chunker(seed: bytes) -> Chunker:
    """The shared :class:`Chunker` for ``seed``."""
    return Chunker(seed)


def split(data: bytes, seed: bytes) -> list[bytes]:
    """Cut ``data`` into chunks (``seed`` keys the boundaries); an empty file has none."""
    return chunker(seed).split(data)
