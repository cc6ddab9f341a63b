"""Split directories (format 4): a large directory's entries in bucket subtrees.

A directory tree holding more than :data:`SPLIT_THRESHOLD` entries is written split: its tree
holds bucket trees named ``b00`` ... ``b3f``, one per non-empty group of the entries' next six
bits of their synthetic IV, and a bucket holding more than the threshold is split again by the
next six bits, at most :data:`MAX_LEVELS` levels down (``docs/design.md``, "Split
directories"). A write then stores the buckets it touched and the directory's own tree, not a
tree of every entry.

The shape is canonical (it depends only on the entries), so a directory's content always has
one tree id. :class:`Shape` is one directory's tree with its buckets; a written shape is never
changed again (an edit copies what it changes), so versions share their unchanged buckets.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from .crypto import name_envelope
from .errors import IntegrityError

# Writers split a tree holding more entries than this: 128 short entries are about 8 KB, so a
# write in a big directory logs and packs a few KB of trees, while directories of up to 128
# entries stay one tree. A larger threshold makes each write of a big directory store larger
# buckets (the redo log fills and checkpoints sooner); a smaller one also splits directories of
# a hundred entries, whose writes then store more trees. Readers do not require it: it is the
# writer's choice, and tests lower it.
SPLIT_THRESHOLD = 128
# Bits of the synthetic IV per level: 64 buckets.
BUCKET_BITS = 6
FANOUT = 1 << BUCKET_BITS
# Bucket levels below a directory's own tree; the deepest buckets hold entries, however many.
# 24 bits: 16.7 million buckets, far beyond where a directory reaches the threshold.
MAX_LEVELS = 4
_USED_BITS = BUCKET_BITS * MAX_LEVELS
# A bucket's name: "b" and two lowercase hex digits. Entry names start with their kind (f or
# d), and the root's metadata entry is "gitmem": none of them can be read as a bucket.
BUCKET_PREFIX = "b"
_BUCKET_NAMES = {f"{BUCKET_PREFIX}{index:02x}": index for index in range(FANOUT)}
_TREE_ENTRY = b"40000 "
# Each bucket's sort key and the start of its tree entry (the id follows), made once.
_BUCKET_KEYS = [f"{BUCKET_PREFIX}{index:02x}/".encode() for index in range(FANOUT)]
_BUCKET_ENTRIES = [_TREE_ENTRY + key[:-1] + b"\0" for key in _BUCKET_KEYS]


# A bucket's whole entry in a tree: "40000 bXX", NUL, then its 20-byte id.
_ENTRY_BYTES = len(_BUCKET_ENTRIES[0]) + 20
_INDEX_OF_ENTRY = {entry: index for index, entry in enumerate(_BUCKET_ENTRIES)}
_NAMES = [f"{BUCKET_PREFIX}{index:02x}" for index in range(FANOUT)]


def read_buckets(data: bytes) -> dict[str, str] | None:
    """The buckets (name to tree id) of raw tree ``data`` if it holds buckets only, each a tree
    named as a bucket, in git's order: the trees writers make, read by slicing fixed-size
    entries rather than parsing entry by entry, since every lookup in a split directory reads
    them. None for any other tree, valid or not, which is then parsed and checked as a whole;
    a tree read here is one that would pass those checks with the same buckets."""
    size = len(data)
    if not size or size % _ENTRY_BYTES:
        return None
    found: dict[str, str] = {}
    last = -1
    step = _ENTRY_BYTES - 20
    for start in range(0, size, _ENTRY_BYTES):
        index = _INDEX_OF_ENTRY.get(data[start : start + step])
        if index is None or index <= last:
            return None
        found[_NAMES[index]] = data[start + step : start + _ENTRY_BYTES].hex()
        last = index
    return found


def bucket_name(index: int) -> str:
    """The tree entry name of bucket ``index`` (0-63)."""
    return f"{BUCKET_PREFIX}{index:02x}"


def bucket_index(name: str) -> int | None:
    """The bucket ``name`` names, or None when it is no bucket name."""
    return _BUCKET_NAMES.get(name)


def is_bucket_like(name: str) -> bool:
    """True for a name a reader must take as a bucket (or refuse): it starts with ``b``."""
    return name[:1] == BUCKET_PREFIX


def entry_bits(raw: str) -> int:
    """The first :data:`MAX_LEVELS` × 6 bits of the synthetic IV of sealed entry name ``raw``.

    ``raw`` is ``kind || base64url_nopad(0x01 || V || C)``, decoded the way the name envelope is
    opened; the bits are V's first three bytes, most significant bit first.
    """
    return envelope_bits(name_envelope(raw))


def envelope_bits(envelope: bytes) -> int:
    """:func:`entry_bits` of the name envelope ``envelope`` (as ``name_envelope`` decodes it)."""
    if len(envelope) < 18:
        raise IntegrityError("an entry name is not valid gitmem ciphertext")
    return int.from_bytes(envelope[1:4], "big")


def bucket_of(bits: int, level: int) -> int:
    """The bucket an entry with ``bits`` goes to in a tree ``level`` levels below its
    directory's (0: the directory's own tree)."""
    return (bits >> (_USED_BITS - BUCKET_BITS * (level + 1))) & (FANOUT - 1)


def prefix_of(bits: int, level: int) -> int:
    """The bucket indices of an entry's tree at ``level``, as one number (its bits above)."""
    return bits >> (_USED_BITS - BUCKET_BITS * level)


# At most this many buckets laid over an inner tree's shared base (:class:`Laid`) before a
# version gets a base of its own: bounds what the old buckets a base still holds can keep alive.
LAID_LIMIT = 16


def serialized(raw: str, oid: str) -> tuple[bytes, bytes]:
    """The sort key (name and ``/``: every memory entry is a tree) and git's bytes of a
    memory entry ``raw`` naming tree ``oid``."""
    name = raw.encode("utf-8")
    return name + b"/", _TREE_ENTRY + name + b"\0" + bytes.fromhex(oid)


# Slots: a store keeps many shapes in its caches, and each would otherwise carry a dict.
@dataclass(eq=False, slots=True)
class Shape:
    """One tree of a directory: a leaf holds memory entries (``keys``/``entries`` in git's
    order, or None until read back from ``oid``), an inner tree holds ``buckets``.

    ``oid`` is None while the tree is still to be written; ``count`` is the number of memory
    entries below it. A written shape is shared between versions and never changed: a leaf's
    ``keys``/``entries`` are lists only while it is unwritten, tuples once written or read.
    """

    count: int
    oid: str | None = None
    # Tuples, not lists, once the leaf is written or read: a 10,000-entry directory keeps about
    # 4,000 leaves, and CPython's collector stops tracking a tuple of bytes (or strs) after its
    # first pass, where it would traverse two lists per leaf in every full collection.
    keys: Sequence[bytes] | None = None
    entries: Sequence[bytes] | None = None
    # A dict, or (made by :func:`repointed`) a :class:`Laid`; an unwritten copy's is a dict.
    buckets: Mapping[int, Shape] | None = None
    # A leaf read from the repository: its entry names, until ``keys`` is filled in.
    names: tuple[str, ...] | None = None
    # ``oid`` as 20 bytes, once a parent tree has needed it.
    raw_id: bytes | None = None
    # An inner tree's bytes (git's, without a root's metadata entry), once written by this
    # process; in an unwritten copy, the bytes of the tree it was copied from. Its next version
    # is these with the entries of ``changed`` spliced in (fixed-size entries, in bucket order):
    # a directory's top tree and first-level buckets hold up to 64 entries each.
    data: bytes | None = None
    # In an unwritten copy of an inner tree: the buckets an edit changed (copied, added or
    # emptied), the only ones to settle and to write.
    changed: set[int] | None = None

    def id_bytes(self) -> bytes:
        """The written tree's id as git's tree entries hold it."""
        if self.raw_id is None:
            assert self.oid is not None
            self.raw_id = bytes.fromhex(self.oid)
        return self.raw_id

    def copy(self) -> Shape:
        """An unwritten copy that an edit may change."""
        below = self.buckets
        if below is not None:
            copied = below.merged() if type(below) is Laid else dict(below)
            # Positional: a copy is made on every write of a split directory, and keyword
            # arguments are a measurable part of so small a call.
            return Shape(self.count, None, None, None, copied, None, None, self.data, set())
        return Shape(
            self.count,
            None,
            None if self.keys is None else list(self.keys),
            None if self.entries is None else list(self.entries),
        )


class Laid(Mapping[int, Shape]):
    """An inner tree's buckets as :func:`repointed` makes them: ``base``, a dict shared with
    the versions before, with ``over``, the buckets repointed since ``base`` was made (at most
    :data:`LAID_LIMIT`, all of them keys of ``base``), laid over it. Never changed once made.

    A repointing write makes the next version of a 10,000-entry directory's top tree and one
    first-level bucket; copying their 64 and 58 buckets each time (and freeing the copies a
    write later) wrote the reference count of every bucket's Shape, memory last touched a
    command ago, where this copies the few buckets repointed lately.
    """

    __slots__ = ("base", "over")

    def __init__(self, base: dict[int, Shape], over: dict[int, Shape]) -> None:
        self.base = base
        self.over = over

    def __getitem__(self, index: int) -> Shape:
        found = self.over.get(index)
        return self.base[index] if found is None else found

    def get(self, index: int, default: Shape | None = None) -> Shape | None:  # type: ignore[override]
        found = self.over.get(index)
        return self.base.get(index, default) if found is None else found

    def __contains__(self, index: object) -> bool:
        return index in self.base

    def __iter__(self) -> Iterator[int]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)

    def values(self) -> list[Shape]:  # type: ignore[override]
        over = self.over
        return [over.get(index, child) for index, child in self.base.items()]

    def merged(self) -> dict[int, Shape]:
        """The buckets as one new dict."""
        return {**self.base, **self.over}


# Reads a leaf tree's memory entries back: (sealed name, tree id) pairs in git's order.
LeafReader = Callable[[str], list[tuple[str, str]]]


def _items(shape: Shape, read_leaf: LeafReader) -> list[tuple[bytes, bytes]]:
    """Every (key, entry) below ``shape``, in git's order."""
    if shape.buckets is None:
        _materialize(shape, read_leaf)
        assert shape.keys is not None and shape.entries is not None
        return list(zip(shape.keys, shape.entries, strict=True))
    items: list[tuple[bytes, bytes]] = []
    for index in sorted(shape.buckets):
        items.extend(_items(shape.buckets[index], read_leaf))
    items.sort()
    return items


def _materialize(leaf: Shape, read_leaf: LeafReader) -> None:
    if leaf.keys is None:
        assert leaf.oid is not None
        pairs = [serialized(raw, oid) for raw, oid in read_leaf(leaf.oid)]
        leaf.keys = tuple([key for key, _ in pairs])
        leaf.entries = tuple([entry for _, entry in pairs])


def _key_bits(key: bytes) -> int:
    return entry_bits(key[:-1].decode("utf-8"))


def build(items: Iterable[tuple[bytes, bytes]], level: int = 0) -> Shape:
    """The canonical, unwritten shape of a tree ``level`` levels below its directory's holding
    the memory entries ``items`` (key, entry), in any order."""
    ordered = sorted(items)
    if len(ordered) <= SPLIT_THRESHOLD or level >= MAX_LEVELS:
        return Shape(len(ordered), None, [k for k, _ in ordered], [e for _, e in ordered])
    groups: dict[int, list[tuple[bytes, bytes]]] = {}
    for key, entry in ordered:
        groups.setdefault(bucket_of(_key_bits(key), level), []).append((key, entry))
    buckets = {index: build(group, level + 1) for index, group in groups.items()}
    return Shape(len(ordered), None, None, None, buckets)


def edit(
    shape: Shape,
    removed: Iterable[str],
    added: Collection[tuple[str, str]],
    read_leaf: LeafReader,
) -> Shape:
    """``shape`` (written, canonical) without the sealed names ``removed`` and with the
    ``added`` (sealed name, tree id) entries, canonical again; only the trees on the paths to
    the changed entries are copied (and are to be written)."""
    # A leaf read lazily is filled in before it is copied (the copy has no id to read it by).
    if shape.buckets is None:
        _materialize(shape, read_leaf)
        assert shape.keys is not None and shape.entries is not None
        # One tree (every directory up to the threshold): splice its entry lists directly,
        # without the walk down buckets below (a small directory's write, the common case).
        keys, entries = list(shape.keys), list(shape.entries)
        for raw in removed:
            _remove(keys, entries, raw)
        for raw, oid in added:
            _insert(keys, entries, raw, oid)
        if len(keys) > SPLIT_THRESHOLD:
            return build(zip(keys, entries, strict=True))
        return Shape(len(keys), None, keys, entries)
    top = shape.copy()

    def leaf_for(raw: str) -> tuple[list[bytes], list[bytes]]:
        """The keys and entries of the leaf ``raw`` goes to, in this edit's copy."""
        node, shift, bits = top, _USED_BITS, entry_bits(raw)
        while (below := node.buckets) is not None:
            assert isinstance(below, dict)  # every inner tree on the path is a copy
            shift -= BUCKET_BITS
            index = (bits >> shift) & (FANOUT - 1)  # bucket_of, one level down each time
            child = below.get(index)
            if child is None:
                child = Shape(0, None, [], [])
            elif child.oid is None:
                node = child  # copied already by an earlier change
                continue
            else:
                # Written, so shared with the version edited: copied (a leaf read first).
                if child.buckets is None and child.keys is None:
                    _materialize(child, read_leaf)
                child = child.copy()
            below[index] = child
            assert node.changed is not None  # every inner tree on the path is a copy
            node.changed.add(index)
            node = child
        if node.keys is None:
            _materialize(node, read_leaf)
        # Every leaf reached here is this edit's copy (a written one's data is never changed).
        assert isinstance(node.keys, list) and isinstance(node.entries, list)
        return node.keys, node.entries

    # A name both removed and added is an entry pointing at a new tree (a write below it, the
    # common case): replaced in place, so no count changes and nothing is settled.
    gone = set(removed)
    resized = False
    for raw in gone.difference(raw for raw, _ in added):
        _remove(*leaf_for(raw), raw)
        resized = True
    for raw, oid in added:
        keys, entries = leaf_for(raw)
        if raw not in gone or not _replace(keys, entries, raw, oid):
            _insert(keys, entries, raw, oid)
            resized = True
    return _settle(top, 0, read_leaf) if resized else top


def _remove(keys: list[bytes], entries: list[bytes], raw: str) -> None:
    """Sealed name ``raw``'s entry taken out of a leaf's ``keys``/``entries`` (if there)."""
    key = raw.encode("utf-8") + b"/"
    at = bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        del keys[at], entries[at]


def _replace(keys: list[bytes], entries: list[bytes], raw: str, oid: str) -> bool:
    """Point sealed name ``raw``'s entry in a leaf at tree ``oid``; False if it is not there."""
    key, entry = serialized(raw, oid)
    at = bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        entries[at] = entry
        return True
    return False


def _insert(keys: list[bytes], entries: list[bytes], raw: str, oid: str) -> None:
    """The entry of ``raw`` naming tree ``oid`` put into a leaf's ``keys``/``entries``."""
    key, entry = serialized(raw, oid)
    at = bisect_left(keys, key)
    keys.insert(at, key)
    entries.insert(at, entry)


def _settle(node: Shape, level: int, read_leaf: LeafReader) -> Shape:
    """Unwritten ``node`` made canonical: its counts recomputed, a tree of at most the
    threshold merged into one leaf, a leaf over it split (written subtrees are canonical)."""
    if node.buckets is None:
        assert node.keys is not None
        node.count = len(node.keys)
        if node.count > SPLIT_THRESHOLD and level < MAX_LEVELS:
            return build(_items(node, read_leaf), level)
        return node
    # Only the buckets an edit copied changed (a copy keeps the count it was made with): the
    # total follows from theirs, without a pass over all 64.
    below = node.buckets
    # An inner tree settled is an edit's copy.
    assert node.changed is not None and isinstance(below, dict)
    for index in node.changed:
        child = below.get(index)
        if child is None or child.oid is not None:
            continue
        before = child.count
        child = _settle(child, level + 1, read_leaf)
        node.count += child.count - before
        if child.count:
            below[index] = child
        else:
            del below[index]
    if node.count <= SPLIT_THRESHOLD:
        items = _items(node, read_leaf)
        return Shape(len(items), None, [k for k, _ in items], [e for _, e in items])
    return node


def store(
    shape: Shape, write_tree: Callable[[bytes], str], extra: tuple[bytes, bytes] | None = None
) -> str:
    """Write every unwritten tree of ``shape`` (children first) and return the top's id;
    ``extra`` (key, entry) is one more entry of the top tree (the root's metadata blob)."""
    return _write(shape, write_tree, extra)


def _write(
    node: Shape, write_tree: Callable[[bytes], str], extra: tuple[bytes, bytes] | None = None
) -> str:
    """Write unwritten tree ``node`` (with ``extra`` as in :func:`store`), its unwritten trees
    first, and return its id."""
    below = node.buckets
    if below is None:
        # One tree (a small directory's write, or a leaf).
        assert node.keys is not None and node.entries is not None
        node.oid = write_tree(_joined(node.keys, node.entries, extra))
        _freeze(node)
        return node.oid
    data = _inner_bytes(node, below, write_tree)
    node.oid = write_tree(data if extra is None else _with(data, extra))
    # Only now, the tree written: a failed write leaves the copy as it was.
    node.data, node.changed = data, None
    return node.oid


def repointed(
    shape: Shape,
    pointed: Collection[tuple[str, str]],
    read_leaf: LeafReader,
    write_tree: Callable[[bytes], str],
    extra: tuple[bytes, bytes] | None = None,
) -> Shape | None:
    """Split ``shape`` (written, canonical, with buckets) with its entries ``pointed`` (sealed
    name, tree id) pointed at those trees, written as :func:`store` writes (``extra`` too); None
    when one of the names is not there (then use :func:`edit` and :func:`store`; trees already
    written for the other names are left unreferenced).

    :func:`edit` then :func:`store` in one walk for the common write of a big directory (every
    write below it only points its entry at a new tree): no count or bucket changes, so the new
    version is made written, with no unwritten copies to settle and freeze, and a leaf's keys
    are shared with the version it was made from.
    """
    assert shape.buckets is not None  # one tree: edit() splices its lists directly
    changes = [(entry_bits(raw), raw, oid) for raw, oid in pointed]
    return _repointed(shape, changes, _USED_BITS, read_leaf, write_tree, extra)


def _repointed(
    node: Shape,
    changes: list[tuple[int, str, str]],
    shift: int,
    read_leaf: LeafReader,
    write_tree: Callable[[bytes], str],
    extra: tuple[bytes, bytes] | None,
) -> Shape | None:
    """:func:`repointed` for ``node``, ``shift`` bits above its entries' bucket bits; recursive,
    at most :data:`MAX_LEVELS` deep. ``extra`` is the top tree's (an inner one)."""
    below = node.buckets
    if below is None:
        if node.keys is None:
            _materialize(node, read_leaf)
        keys, entries = node.keys, node.entries
        assert keys is not None and entries is not None
        changed = list(entries)
        for _, raw, oid in changes:
            key, entry = serialized(raw, oid)
            at = bisect_left(keys, key)
            if at == len(keys) or keys[at] != key:
                return None
            changed[at] = entry
        frozen = tuple(changed)
        return Shape(node.count, write_tree(b"".join(frozen)), keys, frozen)
    shift -= BUCKET_BITS
    groups: dict[int, list[tuple[int, str, str]]] = {}
    for change in changes:
        groups.setdefault((change[0] >> shift) & (FANOUT - 1), []).append(change)
    # The new buckets are laid over the base's (see Laid): the few repointed lately copied,
    # not all 64.
    if type(below) is Laid:
        base, over = below.base, dict(below.over)
    else:
        assert isinstance(below, dict)  # a Laid or a dict, never another mapping
        base, over = below, {}
    for index, group in groups.items():
        child = over.get(index) or base.get(index)
        if child is None:
            return None
        new = _repointed(child, group, shift, read_leaf, write_tree, None)
        if new is None:
            return None
        over[index] = new
    written: Mapping[int, Shape]
    if len(over) > LAID_LIMIT:
        # A base of its own, so that the base's old buckets (and what they hold) are freed.
        written = over = {**base, **over}
    else:
        written = Laid(base, over)
    data = node.data
    if data is None:
        merged = {**base, **over}
        data = b"".join([_BUCKET_ENTRIES[i] + merged[i].id_bytes() for i in sorted(merged)])
    else:
        data = _spliced(data, groups, over)
    oid = write_tree(data if extra is None else _with(data, extra))
    return Shape(node.count, oid, None, None, written, None, None, data)


def _freeze(leaf: Shape) -> None:
    """A leaf just written: its entry lists made tuples (it is never changed again)."""
    assert leaf.keys is not None and leaf.entries is not None
    leaf.keys, leaf.entries = tuple(leaf.keys), tuple(leaf.entries)


def _inner_bytes(
    node: Shape, below: Mapping[int, Shape], write_tree: Callable[[bytes], str]
) -> bytes:
    """The bytes of inner tree ``node`` (holding ``below``), its unwritten buckets written;
    recursive, at most :data:`MAX_LEVELS` deep."""
    # An edit's copy changed no bucket but those it lists.
    for index in below if node.changed is None else node.changed:
        child = below.get(index)
        if child is not None and child.oid is None:
            _write(child, write_tree)
    data = node.data
    if data is None:
        return b"".join([_BUCKET_ENTRIES[i] + below[i].id_bytes() for i in sorted(below)])
    if node.changed:
        return _spliced(data, node.changed, below)
    return data


def _joined(
    keys: Sequence[bytes], parts: Sequence[bytes], extra: tuple[bytes, bytes] | None
) -> bytes:
    """A tree's bytes: ``parts`` in the order of ``keys``, with ``extra`` (key, entry) put in
    its place."""
    if extra is not None:
        at = bisect_left(keys, extra[0])
        parts = [*parts[:at], extra[1], *parts[at:]]
    return b"".join(parts)


# An inner tree's entry: "40000 bXX\0" and the bucket's 20-byte id, the name's hex digits at
# _HEX_AT. Lowercase hex sorts as the numbers do, so entries in bucket order are git's order.
_INNER_ENTRY = len(_BUCKET_ENTRIES[0]) + 20
_NAME_AT = len(_TREE_ENTRY)
_HEX_AT = _NAME_AT + len(BUCKET_PREFIX)
_BUCKET_HEX = [key[len(BUCKET_PREFIX) : -1] for key in _BUCKET_KEYS]


def _spliced(old: bytes, changed: Collection[int], buckets: Mapping[int, Shape]) -> bytes:
    """Inner tree bytes ``old`` with the entries of buckets ``changed`` made what ``buckets``
    holds now: replaced, added in their place, or dropped (no longer in ``buckets``)."""
    parts = []
    pos, end = 0, len(old)
    count = end // _INNER_ENTRY
    for index in sorted(changed) if len(changed) > 1 else changed:
        # Bucket ``index``'s entry, or where it goes: after at least ``index`` minus the number
        # of buckets missing, and at most ``index``, entries (in a full tree, exactly
        # ``index``); a binary search between.
        hexed = _BUCKET_HEX[index]
        lo, hi = max(pos // _INNER_ENTRY, index - FANOUT + count), min(index, count)
        while lo < hi:
            mid = (lo + hi) >> 1
            at = mid * _INNER_ENTRY + _HEX_AT
            if old[at : at + 2] < hexed:
                lo = mid + 1
            else:
                hi = mid
        at = lo * _INNER_ENTRY
        parts.append(old[pos:at])
        pos = at
        if at < end and old[at + _HEX_AT : at + _HEX_AT + 2] == hexed:
            pos += _INNER_ENTRY
        child = buckets.get(index)
        if child is not None:
            parts += (_BUCKET_ENTRIES[index], child.id_bytes())
    parts.append(old[pos:])
    return b"".join(parts)


def _with(data: bytes, extra: tuple[bytes, bytes]) -> bytes:
    """Inner tree bytes ``data`` with ``extra`` (key, entry) put in its place."""
    key, entry = extra
    if key > _BUCKET_KEYS[-1]:
        return data + entry  # after every bucket: the root's metadata entry, "gitmem"

    def key_at(index: int) -> bytes:
        at = index * _INNER_ENTRY + _NAME_AT
        return data[at : at + _HEX_AT + 2 - _NAME_AT] + b"/"

    lo, hi = 0, len(data) // _INNER_ENTRY
    while lo < hi:
        mid = (lo + hi) // 2
        if key_at(mid) < key:
            lo = mid + 1
        else:
            hi = mid
    at = lo * _INNER_ENTRY
    return b"".join((data[:at], entry, data[at:]))


def raw_names(shape: Shape) -> Iterator[str]:
    """The sealed names of every memory entry below ``shape`` (read or written)."""
    stack = [shape]
    while stack:
        node = stack.pop()
        if node.buckets is not None:
            stack.extend(node.buckets.values())
        elif node.keys is not None:
            yield from (key[:-1].decode("utf-8") for key in node.keys)
        else:
            assert node.names is not None
            yield from node.names


def recount(shape: Shape) -> int:
    """Set ``count`` of every inner tree of ``shape`` from its leaves'; returns the total."""
    if shape.buckets is not None:
        shape.count = sum(recount(child) for child in shape.buckets.values())
    return shape.count
