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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from .crypto import name_envelope
from .errors import IntegrityError

# Writers split a tree holding more entries than this: 128 short entries are about 8 KB, so a
# write in a big directory logs and packs a few KB of trees, while directories of up to 128
# entries (the 100-directory benchmark's) stay one tree. See docs/performance.md, "Split
# directories", for 128 against 64 and 256. Readers do not require it: it is the writer's
# choice, and tests lower it.
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
    envelope = name_envelope(raw)
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
    entries below it. A written shape is shared between versions and never changed.
    """

    count: int
    oid: str | None = None
    keys: list[bytes] | None = None
    entries: list[bytes] | None = None
    buckets: dict[int, Shape] | None = None
    # A leaf read from the repository: its entry names, until ``keys`` is filled in.
    names: list[str] | None = None
    # ``oid`` as 20 bytes, once a parent tree has needed it.
    raw_id: bytes | None = None

    def id_bytes(self) -> bytes:
        """The written tree's id as git's tree entries hold it."""
        if self.raw_id is None:
            assert self.oid is not None
            self.raw_id = bytes.fromhex(self.oid)
        return self.raw_id

    def copy(self) -> Shape:
        """An unwritten copy that an edit may change."""
        return Shape(
            self.count,
            None,
            None if self.keys is None else list(self.keys),
            None if self.entries is None else list(self.entries),
            None if self.buckets is None else dict(self.buckets),
        )


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
        leaf.keys = [key for key, _ in pairs]
        leaf.entries = [entry for _, entry in pairs]


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
    added: Iterable[tuple[str, str]],
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
    copied = {id(top)}

    def leaf_for(raw: str) -> Shape:
        node, level = top, 0
        bits = -1
        while node.buckets is not None:
            if bits < 0:
                bits = entry_bits(raw)
            index = bucket_of(bits, level)
            child = node.buckets.get(index)
            if child is None:
                child = Shape(0, None, [], [])
            elif id(child) not in copied:
                if child.buckets is None:
                    _materialize(child, read_leaf)
                child = child.copy()
            copied.add(id(child))
            node.buckets[index] = child
            node, level = child, level + 1
        _materialize(node, read_leaf)
        return node

    for raw in removed:
        leaf = leaf_for(raw)
        assert leaf.keys is not None and leaf.entries is not None
        _remove(leaf.keys, leaf.entries, raw)
    for raw, oid in added:
        leaf = leaf_for(raw)
        assert leaf.keys is not None and leaf.entries is not None
        _insert(leaf.keys, leaf.entries, raw, oid)
    return _settle(top, 0, read_leaf)


def _remove(keys: list[bytes], entries: list[bytes], raw: str) -> None:
    """Sealed name ``raw``'s entry taken out of a leaf's ``keys``/``entries`` (if there)."""
    key = raw.encode("utf-8") + b"/"
    at = bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        del keys[at], entries[at]


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
    for index, child in [item for item in node.buckets.items() if item[1].oid is None]:
        before = child.count
        child = _settle(child, level + 1, read_leaf)
        node.count += child.count - before
        if child.count:
            node.buckets[index] = child
        else:
            del node.buckets[index]
    if node.count <= SPLIT_THRESHOLD:
        items = _items(node, read_leaf)
        return Shape(len(items), None, [k for k, _ in items], [e for _, e in items])
    return node


def store(
    shape: Shape, write_tree: Callable[[bytes], str], extra: tuple[bytes, bytes] | None = None
) -> str:
    """Write every unwritten tree of ``shape`` (children first) and return the top's id;
    ``extra`` (key, entry) is one more entry of the top tree (the root's metadata blob)."""
    if shape.buckets is None and shape.oid is None:
        # One tree: no walk (a small directory's write).
        assert shape.keys is not None and shape.entries is not None
        shape.oid = write_tree(_joined(shape.keys, shape.entries, extra))
        return shape.oid
    # Depth first by hand, though MAX_LEVELS bounds the depth: the order is children first.
    stack: list[tuple[Shape, bool]] = [(shape, False)]
    while stack:
        node, below_done = stack.pop()
        if node.oid is not None and node is not shape:
            continue
        if not below_done and node.buckets is not None:
            stack.append((node, True))
            stack.extend((child, False) for child in node.buckets.values() if child.oid is None)
            continue
        if node.buckets is None:
            assert node.keys is not None and node.entries is not None
            keys, parts = node.keys, node.entries
        else:
            order = sorted(node.buckets)
            keys = [_BUCKET_KEYS[index] for index in order]
            below = node.buckets
            parts = [_BUCKET_ENTRIES[index] + below[index].id_bytes() for index in order]
        node.oid = write_tree(_joined(keys, parts, extra if node is shape else None))
    assert shape.oid is not None
    return shape.oid


def _joined(keys: list[bytes], parts: list[bytes], extra: tuple[bytes, bytes] | None) -> bytes:
    """A tree's bytes: ``parts`` in the order of ``keys``, with ``extra`` (key, entry) put in
    its place."""
    if extra is not None:
        at = bisect_left(keys, extra[0])
        parts = [*parts[:at], extra[1], *parts[at:]]
    return b"".join(parts)


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
