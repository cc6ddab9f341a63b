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
from itertools import accumulate
from typing import NamedTuple

from . import forksafe

# A boundary decision looks at the 16 bytes ending at the candidate position.
WINDOW = 16
_GEAR_INFO = b"gitmem/v1/chunker/gear-table"
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


# A file's body is cut into chunks of about size/32 bytes (a power of two from 2 KiB to 128 KiB),
# so that reading a large file touches a few dozen blobs, not hundreds, while an edit in a small
# or medium file rewrites little. Its tail (what the last body chunk would be) is cut finer, an
# eighth of the body's average but at least 2 KiB, so that appending to a long log rewrites a
# small chunk, not a large one. docs/design.md ("Chunking") gives the measurements.
SMALLEST = Params(512, 2048, 8192)
_CHUNKS_PER_FILE = 32
_TAIL_DIVISOR = 8
_MAX_AVG = 1 << 17


def _sized(avg: int, *, body: bool = False) -> Params:
    if avg <= SMALLEST.avg_size:
        return SMALLEST
    # Body chunks use the strongest normalization the 18 mask bits allow: edits land in body
    # chunks, and an edit costs about the size-biased chunk length, which a tighter spread
    # lowers (docs/design.md, "Why these sizes"). Tails keep nc = 2.
    nc = 3 if body and avg <= 1 << 15 else 2 if avg <= 1 << 16 else 1
    return Params(avg // 4, avg, avg * 4, nc)


def params_for(size: int) -> Params:
    """The parameters for the body of a file of ``size`` bytes (see :func:`tail_params`).

    The average is the power of two nearest to ``size / 32``, from 2 KiB to 128 KiB.
    """
    avg = SMALLEST.avg_size
    # Doubling is right while size/32 >= avg * sqrt(2), i.e. size**2 >= 2 * (32 * avg)**2.
    while avg < _MAX_AVG and size * size >= 2 * (_CHUNKS_PER_FILE * avg) ** 2:
        avg *= 2
    return _sized(avg, body=True)


def tail_params(body: Params) -> Params:
    """The parameters for the tail of a file whose body uses ``body``."""
    return _sized(body.avg_size // _TAIL_DIVISOR)


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
    """Lazily computed cut candidates of ``data`` from offset ``start`` on (only where a chunk
    can end: none closer than ``min_size`` to the start of the chunk being decided).

    A candidate is a cut offset whose hash passes ``mask`` (the loosest mask in use; masks are
    nested, so every stricter test only needs the candidates' hash values).
    """

    def __init__(
        self, data: bytes, start: int, tables: tuple[bytes, bytes], mask: int, min_size: int
    ):
        self.data = data
        # The smallest min_size of the params :meth:`decide` is given: no cut lies closer than
        # that to the start of its chunk, so the hashes before it are never needed.
        self.min_size = min_size
        self.low, self.high = tables
        self.mask = mask
        plane = (mask >> 16) & 0xFF
        # The byte of each lane holding hash bits 16..23 is searched with bytes.find: zero bytes
        # are candidates when all eight bits are masked, else a table maps the masked bits first.
        self.plane_table = (
            None if plane == 0xFF else bytes(0 if b & plane == 0 else 1 for b in range(256))
        )
        self.done = start
        self.block = _FIRST_BLOCK
        self.cuts: list[int] = []
        self.values: list[int] = []

    def ensure(self, end: int) -> None:
        """Make sure every candidate cut offset below ``end`` is known."""
        end = min(end, len(self.data) + 1)
        while self.done < end:
            stop = min(len(self.data) + 1, max(end, self.done + self.block))
            self._scan(self.done, stop)
            self.done = stop
            self.block *= 2

    def _scan(self, lo: int, hi: int) -> None:
        # Cut offset e is decided by the hash at position e - 1; this block covers e in [lo, hi).
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
        mask, cuts, values = self.mask, self.cuts, self.values
        find = plane.find
        j = find(0)
        while j >= 0:
            at = 4 * (first + j)
            value = int.from_bytes(lanes[at : at + 4], "little")
            if value & mask == 0:
                cuts.append(plo + j + 1)
                values.append(value)
            j = find(0, j + 1)

    def decide(self, start: int, params: Params) -> int:
        """The end of the chunk that starts at ``start``, cut with ``params``."""
        size = len(self.data)
        if size - start <= params.min_size:
            return size
        limit = min(start + params.max_size, size)
        # Chunks start at 0 or at an earlier chunk's end, never before an earlier start: no
        # later call needs a candidate below this chunk's smallest possible end, so the scan
        # skips the bytes before it (for a small file, most of the file).
        self.done = max(self.done, start + self.min_size)
        self.ensure(limit + 1)
        cuts, values = self.cuts, self.values
        i, count = bisect_left(cuts, start + params.min_size), len(cuts)
        normal = min(start + params.avg_size, limit)
        strict, loose = params.mask_strict, params.mask_loose
        while i < count and cuts[i] < normal:
            if values[i] & strict == 0:
                return cuts[i]
            i += 1
        while i < count and cuts[i] < limit:
            if values[i] & loose == 0:
                return cuts[i]
            i += 1
        return limit


_COMPARE_BLOCK = 8192
_FIRST_COMPARE = 32


def common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (memcmp speed)."""
    limit = min(len(a), len(b))
    head = min(limit, 16)
    if a[:head] != b[:head]:  # most files differ early: count the equal bytes one by one
        at = 0
        while a[at] == b[at]:
            at += 1
        return at
    view = memoryview(b)
    # a[:lo] == b[:lo]. Blocks start small (files that differ early, as most do, bisect a few
    # bytes) and grow, so that long runs cost little.
    lo, step = 0, _FIRST_COMPARE
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


def common_suffix(a: bytes, b: bytes, limit: int) -> int:
    """The length (at most ``limit``) of the longest common suffix of ``a`` and ``b``."""
    limit = min(len(a), len(b), limit)
    if limit <= _COMPARE_BLOCK:
        if limit <= 0:
            return 0
        # Short tails at once: XOR them as little-endian integers; the equal bytes at the end
        # are the zero bytes at the top (one integer operation, where the search below makes
        # several Python calls).
        diff = int.from_bytes(a[len(a) - limit :], "little") ^ int.from_bytes(
            b[len(b) - limit :], "little"
        )
        return limit - (diff.bit_length() + 7) // 8
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
        forksafe.reset_in_child(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        # A fresh lock (another thread of the parent may have held it), and no remembered
        # file: that thread may have left the list half changed, and the cuts never depend on it.
        self._lock = threading.Lock()
        self._recent = []

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
        """A cheap check that ``cuts`` could be this chunker's: sizes, and each cut's hash."""
        size, body = len(data), params_for(len(data))
        if not cuts or cuts[-1] != size:
            return False
        start = 0
        for end in cuts[:-1]:
            # The tail lies in the last body.max_size bytes; a cut before it is a body cut.
            modes = (body,) if end <= size - body.max_size else (body, tail_params(body))
            if not any(self._cut_fits(data, start, end, p) for p in modes):
                return False
            start = end
        return size - start <= body.max_size

    def _cut_fits(self, data: bytes, start: int, end: int, params: Params) -> bool:
        length = end - start
        if not params.min_size <= length <= params.max_size:
            return False
        if length == params.max_size:
            return True
        low, high = self.tables
        total = 0
        for i in range(WINDOW):
            byte = data[end - 1 - i]
            total += (low[byte] | high[byte] << 8) << i
        mask = params.mask_strict if length < params.avg_size else params.mask_loose
        return total & mask == 0

    def _best_hint(self, data: bytes, params: Params) -> tuple[_Known, int, int]:
        best, best_prefix, best_suffix = _Known(b"", (), ()), 0, 0
        with self._lock:
            recent = list(self._recent)
        for known in recent:
            if params_for(len(known.data)) != params:
                continue
            prefix = common_prefix(known.data, data)
            suffix = common_suffix(known.data, data, min(len(known.data), len(data)) - prefix)
            if prefix + suffix > best_prefix + best_suffix:
                best, best_prefix, best_suffix = known, prefix, suffix
        if not best.checked and not self._plausible(best.data, best.cuts):
            return _Known(b"", (), ()), 0, 0
        return best, best_prefix, best_suffix

    def _cuts(
        self, data: bytes, body: Params, old: _Known, prefix: int, suffix: int
    ) -> tuple[list[int], list[str | None]]:
        """Cut ``data``: body chunks while the body cut would not reach the end, then the rest
        (the tail) with :func:`tail_params`. ``old`` (equal to ``data`` for its first ``prefix`` and
        last ``suffix`` bytes) lends the cuts that the same bytes decide in both."""
        size, old_size = len(data), len(old.data)
        tail_cut = tail_params(body)
        single = body == tail_cut
        # The tail starts within the last body.max_size bytes, so a cut at or before that
        # point ends a body chunk in either version (with one level, any cut but the last).
        settled = old_size - (0 if single else body.max_size)
        cuts: list[int] = []
        tags: list[str | None] = []
        start = 0
        for index, end in enumerate(old.cuts):
            # A body cut is decided by the bytes before it: reusable if they did not change.
            if end > prefix or end >= size or end >= settled:
                break
            cuts.append(end)
            tags.append(old.tags[index])
            start = end
        shift = size - old_size
        tail_from = old_size - suffix
        min_size = min(body.min_size, tail_cut.min_size)
        scan = _Scan(data, start, self.tables, tail_cut.mask_loose, min_size)
        tail = single
        while start < size:
            end = scan.decide(start, tail_cut if tail else body)
            if end == size and not tail:
                tail = True  # the body chunk would be the last: cut the rest as the tail
                continue
            cuts.append(end)
            # A chunk cut afresh may still equal an old one (bytes unchanged, same cuts).
            if end <= prefix:
                tags.append(_old_tag(old, start, end))
            elif start - shift >= tail_from:
                tags.append(_old_tag(old, start - shift, end - shift))
            else:
                tags.append(None)
            start = end
            # From a start inside the unchanged end that was also a start before, and a body
            # start in both (or any start with one level), every later decision reads the
            # same bytes as before: the old cuts follow, shifted.
            was = start - shift
            if (
                suffix
                and size - suffix <= start < size
                and (single or (was < settled and not tail))
            ):
                index = bisect_left(old.cuts, was)
                if was == 0 or (index < len(old.cuts) and old.cuts[index] == was):
                    first = 0 if was == 0 else index + 1
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


def split(data: bytes, seed: bytes) -> list[bytes]:
    """Cut ``data`` into chunks (``seed`` keys the boundaries); an empty file has none."""
    # A fresh chunker: nothing derived from the key or the content outlives the call.
    return Chunker(seed).split(data)
