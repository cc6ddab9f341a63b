"""The encrypted memory tree's codec: the bytes of directory and file trees, read and written.

:class:`TreeCodec` seals and opens entry names, writes and reads file trees (a header and its
chunks) and directory trees (whole or split into buckets), and caches what it derived by tree
id. Reading a committed tree by path is :mod:`gitmem.snapshot`'s; editing a copy of one and
writing the changed trees is :mod:`gitmem.editor`'s.

A directory is a git tree whose entries are encrypted names (kind + AES-SIV, the parent path
bound in). A file is a git tree holding an encrypted header blob (``h``) and its encrypted chunk
blobs (``c00000000``, ...). Nothing here trusts a tree it is handed: every name, mode and blob is
authenticated as it is read, and anything else is an :class:`IntegrityError`.
"""

from __future__ import annotations

import itertools
import zlib
from bisect import bisect_right
from collections.abc import (
    Callable,
    Container,
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import dataclass
from functools import partial
from itertools import accumulate
from typing import NamedTuple, TypeVar, overload

from . import buckets, chunking, paths, workers
from .cache import BoundedCache
from .chunking import common_prefix, common_suffix
from .crypto import StoreKeys
from .errors import IntegrityError
from .format import (
    CHUNK_BLOB_OVERHEAD,
    CHUNK_ENTRY_PREFIX,
    COMPRESS_DELTA,
    COMPRESS_NONE,
    COMPRESS_ZLIB,
    HEADER_ENTRY,
    KIND_DIR,
    KIND_FILE,
    MAX_BLOB_BYTES,
    MAX_DELTA_DEPTH,
    MAX_HEADER_BLOB_BYTES,
    META_ENTRY,
    ROLE_CHUNK,
    ROLE_HEADER,
    base_entry,
    chunk_entry,
    decode_header,
    encode_header,
)
from .git.objects import BLOB_MODE, TREE_MODE, TreeEntry, parse_tree
from .git.repo import GitRepo
from .paths import MemoryPath
from .shardmap import SMALL, ShardedMap, evolved, frozen

# Directory listings are cached by (tree id, path): git trees are immutable, so an entry never
# goes stale, and repeated `view`s of an unchanged store skip all name decryption. The bound
# counts entries (a listing weighs its entry count): about 40 MB at most.
_DIR_CACHE_ENTRIES = 1 << 17
# File sizes, by file tree id: enough for every file of a store far past its default size limit
# (64 MiB of 1 KiB notes), so that listing a large store does not reread every header.
_SIZE_CACHE_ENTRIES = 1 << 17
# Split directory versions whose names a codec remembers looking up (weighed by entries).
_SPLIT_CACHE_ENTRIES = 1 << 14
# Plaintext bytes of recently read or written files kept by tree id (a file view then costs no
# object read); larger files are not kept.
_FILE_CACHE_BYTES = 8 << 20
# Files this large inflate their chunks on several threads (see gitmem.workers): below it the
# hand-offs between threads cost about what the parallel inflating saves, or more.
_PARALLEL_BYTES = 256 << 10
# Files smaller than this (most memory files: a few chunks) are stored whole, never as deltas:
# an edit of one saves a few KiB at most, and each delta chunk costs a read of its bases.
DELTA_MIN_FILE = 8192
# The longest chain of deltas a writer makes (a delta of a delta ...), and the most bases a
# delta may need in all, its bases' bases included: a read of a chunk inflates at most so many
# more objects. A longer one is made a delta of the whole chunks its chain started from, or is
# stored whole.
DELTA_CHAIN = 8
_MAX_CLOSURE = 32
# The most bases one delta chunk names (the old chunks its bytes were made from).
_MAX_BASES = 8
# A chunk is stored as a delta only when that is at most this share of it stored whole: a
# delta costs a read of its bases, and one that saves little is not worth it.
_DELTA_SHARE = 0.75
# What each chunk read or written needs (its bases, chain depth), by chunk id: what a later
# edit needs to store deltas of it.
_LINK_CACHE_ENTRIES = 1 << 16
_ROOT_CACHE_BYTES = 8 << 20
# Names that a listing (as Claude sees it) leaves out, besides dot-files.
EXCLUDED_NAMES = frozenset({"node_modules"})


_D = TypeVar("_D")


class Node(NamedTuple):
    """A committed entry: ``kind`` is ``f`` (file) or ``d`` (directory); ``oid`` its git tree."""

    kind: str
    oid: str


# A Node from the plain ``(kind, oid)`` tuple a NodeMap holds, made on every read of a big
# directory's entries: tuple.__new__ directly, without NamedTuple's argument handling.
as_node: Callable[[tuple[str, str]], Node] = partial(tuple.__new__, Node)


class NodeMap(Mapping[str, Node]):
    """A big directory version's entries: a read-only mapping of names to Nodes, held as plain
    ``(kind, oid)`` tuples (``packed``) and made Nodes when read.

    A store keeps one entry per name of each directory it has loaded (10,000 for a directory
    of 10,000 files), shared by its later versions. CPython's cyclic collector stops tracking
    an exact tuple of strs, and a dict holding only such tuples, after its first pass; a Node
    (an object of a class, a NamedTuple too) is tracked as long as it lives, and every full
    collection would traverse each (docs/performance.md, "The collector's share"). A directory
    of fewer than :data:`gitmem.shardmap.SMALL` entries keeps a plain dict of Nodes instead
    (:func:`version_nodes`): its lookups then cost no Python call, and it holds few objects.
    """

    __slots__ = ("packed",)

    def __init__(self, packed: Mapping[str, tuple[str, str]]) -> None:
        self.packed = packed

    def __getitem__(self, name: str) -> Node:
        return as_node(self.packed[name])

    @overload
    def get(self, name: str, /) -> Node | None: ...
    @overload
    def get(self, name: str, default: Node | _D, /) -> Node | _D: ...
    def get(self, name: str, default: object = None, /) -> object:
        found = self.packed.get(name)
        return default if found is None else as_node(found)

    def __contains__(self, name: object) -> bool:
        return name in self.packed

    def __iter__(self) -> Iterator[str]:
        return iter(self.packed)

    def __len__(self) -> int:
        return len(self.packed)

    def items(self) -> ItemsView[str, Node]:
        # Pair by pair from the packed map: Mapping's would look every name up again.
        return _NodeItems(self)


def _plain(node: Node) -> tuple[str, str]:
    """``node`` as the exact tuple a NodeMap keeps (a Node is a tuple subclass)."""
    return (node[0], node[1])


def plain_items(nodes: Mapping[str, Node]) -> Iterable[tuple[str, tuple[str, str]]]:
    """Each entry's name and (kind, oid), without making a Node of those a NodeMap holds."""
    if isinstance(nodes, NodeMap):
        packed = nodes.packed
        return packed.pairs() if isinstance(packed, ShardedMap) else packed.items()
    return nodes.items()


def version_nodes(nodes: Mapping[str, Node]) -> Mapping[str, Node]:
    """``nodes`` as a directory version keeps them (the caller no longer changes them): a
    dict of Nodes when small, else a :class:`NodeMap` (itself if it is one)."""
    if isinstance(nodes, NodeMap) or (isinstance(nodes, dict) and len(nodes) < SMALL):
        return nodes
    if len(nodes) < SMALL:
        return dict(nodes)
    return _from_plain({name: _plain(node) for name, node in nodes.items()})


def _from_plain(plain: Mapping[str, tuple[str, str]]) -> Mapping[str, Node]:
    """A directory version's entries from their plain (kind, oid) tuples: a NodeMap of a
    sharded map, or when small (not sharded) a dict of Nodes."""
    if isinstance(plain, ShardedMap):
        return NodeMap(plain)
    if len(plain) < SMALL:
        return {name: as_node(node) for name, node in plain.items()}
    return NodeMap(ShardedMap.of(plain))


def evolved_nodes(
    base: Mapping[str, Node], changes: Mapping[str, Node | None]
) -> Mapping[str, Node]:
    """A directory version's entries ``base`` with ``changes`` applied (None removes the
    name), sharing what they do not touch; ``base`` is not changed."""
    if not changes:
        return base
    if isinstance(base, NodeMap):
        plain = {name: None if node is None else _plain(node) for name, node in changes.items()}
        return _from_plain(evolved(base.packed, plain))  # a dict when it shrank below SMALL
    return version_nodes(evolved(base, changes))


class _NodeItems(ItemsView[str, Node]):
    def __init__(self, owner: NodeMap) -> None:
        super().__init__(owner)
        self._owner = owner

    def __iter__(self) -> Iterator[tuple[str, Node]]:
        # The names and their Nodes zipped in C, shard by shard: a Python step per entry cost
        # a listing of 10,000 about as much again as making the Nodes.
        packed = self._owner.packed
        for shard in packed.shards() if isinstance(packed, ShardedMap) else (packed,):
            yield from zip(shard, map(as_node, shard.values()), strict=True)


@dataclass(frozen=True)
class FoldIndex:
    """A directory's names by :func:`gitmem.paths.twin_key` key, and the fold that made it."""

    fold: Callable[[str], str]
    names: Mapping[str, tuple[str, ...]]


# A tree of a directory still to be read by load_dir: its shape, entries, level, bucket prefix,
# and the previous version's tree at the same place.
_Pending = tuple["buckets.Shape", list[TreeEntry], int, int, "buckets.Shape | None"]


# What a name was found as in one directory version (None: nothing): (node, sealed name).
_Found = tuple[Node, str] | None

# Names a directory version remembers having looked up; then it forgets them all (a reader
# of many names of a big directory does not keep one tuple per name of it).
_LOOKUPS_KEPT = 256


# A name not looked up yet in a version (compared by identity: None is "not there").
_UNKNOWN: tuple[Node, str] = (Node("", ""), "")


class _Lookups:
    """The names looked up in one directory version (a tree id at a path) and what each was
    found as. A tree id is the hash of its entries, so an answer holds for as long as the
    version is asked: nothing in it can go stale, and each was authenticated when first found.
    A lookup of a name read before then costs one dict lookup, the same in a directory of
    10,000 entries (whose entry maps are sharded, read through several Python calls) as in a
    small one.

    ``top``: a split directory's own tree, its buckets checked (bucket name to tree id; None
    for a directory loaded whole)."""

    __slots__ = ("found", "top")

    def __init__(self, top: dict[str, str] | None = None) -> None:
        self.found: dict[str, _Found] = {}
        self.top = top

    def keep(self, name: str, found: _Found) -> _Found:
        """Remember ``found`` for ``name``; returns it."""
        if len(self.found) >= _LOOKUPS_KEPT:
            self.found.clear()
        self.found[name] = found
        return found


@dataclass
class LoadedDir:
    """One committed directory version as read: its entries, their sealed names and its shape."""

    # Read-only once made (shared with later versions: see gitmem.shardmap).
    nodes: Mapping[str, Node]  # see version_nodes
    sealed: Mapping[str, str]
    # The directory's tree and its buckets (gitmem.buckets): the next version is edited from
    # it, so that one write of a big directory costs its changes and the buckets they touch.
    shape: buckets.Shape
    fold_index: FoldIndex | None = None
    _by_sealed: dict[str, str] | None = None
    # Names looked up in this version (see _Lookups), made by the first lookup: a write makes
    # a version it may never look a name up in.
    lookups: _Lookups | None = None

    def by_sealed(self) -> dict[str, str]:
        """The names by their sealed entry names (built on first use)."""
        inverse = self._by_sealed
        if inverse is None:
            inverse = self._by_sealed = {raw: name for name, raw in self.sealed.items()}
        return inverse

    def folded(self) -> FoldIndex:
        """The names by fold key, built on first use (one fold per name, once per tree)."""
        index = self.fold_index
        if index is None or index.fold is not paths.twin_key:
            names: dict[str, tuple[str, ...]] = {}
            for name in self.nodes:
                key = paths.twin_key(name)
                names[key] = (*names.get(key, ()), name)
            index = self.fold_index = FoldIndex(paths.twin_key, frozen(names))
        return index


# The root tree's metadata entry as git writes it (its 20-byte id follows): a blob named
# "gitmem", after every bucket in git's order.
_META_HEAD = b"%o %s\0" % (BLOB_MODE, META_ENTRY.encode())


def _without_meta(data: bytes) -> bytes:
    """Raw root tree ``data`` without its metadata entry, if it ends with one."""
    cut = len(data) - len(_META_HEAD) - 20
    if cut >= 0 and data[cut : cut + len(_META_HEAD)] == _META_HEAD:
        return data[:cut]
    return data


class TreeCodec:
    """Encrypts and decrypts directory and file trees of one store."""

    def __init__(self, repo: GitRepo, keys: StoreKeys) -> None:
        self.repo = repo
        self.keys = keys
        self._dirs: BoundedCache[tuple[str, MemoryPath], LoadedDir] = BoundedCache(
            _DIR_CACHE_ENTRIES
        )
        self._sizes: BoundedCache[str, int] = BoundedCache(_SIZE_CACHE_ENTRIES)
        # Plaintext, chunk ends and chunk ids of files lately read or written, by file tree id.
        self._files: BoundedCache[str, tuple[bytes, list[int], list[str]]] = BoundedCache(
            _FILE_CACHE_BYTES
        )
        # The last root tree write_dir wrote with the metadata blob: stamp_root need not read
        # it back (its id is the hash of exactly those entries).
        self._stamped: tuple[str, str] | None = None
        # The newest listing loaded or written at each path: a new version of the directory
        # (another process wrote) is opened from it, one lookup per unchanged entry.
        self._latest: BoundedCache[MemoryPath, LoadedDir] = BoundedCache(_DIR_CACHE_ENTRIES)
        # Split directories looked up in without loading them, by (tree id, path): their
        # names looked up, and their own tree's buckets checked.
        self._split: BoundedCache[tuple[str, MemoryPath], _Lookups] = BoundedCache(
            _SPLIT_CACHE_ENTRIES
        )
        # The trees below a split directory's own tree that lookups went through, checked as
        # _find_sealed checks them, by (tree id, directory path, bucket level, bucket prefix):
        # for a bucket tree, True and its buckets (name to tree id); for a leaf, False and its
        # entries (sealed name to tree id), every name opened. What a check finds depends on
        # nothing else, and a tree id names its content: a new version of the directory
        # (another process wrote) reuses those of its buckets that did not change.
        self._buckets: BoundedCache[tuple[str, str, int, int], tuple[bool, dict[str, str]]] = (
            BoundedCache(_DIR_CACHE_ENTRIES)
        )
        # Remembers the files last read or written, so that writing an edited version rehashes
        # only around the edit and reuses the blobs of unchanged chunks.
        self.chunker = chunking.Chunker(keys.chunker_seed)
        # The metadata blob every root tree this codec writes carries (format 2); None for a
        # format 1 store until its first write upgrades it.
        self.meta_blob: str | None = None
        self._links: BoundedCache[str, _Link] = BoundedCache(_LINK_CACHE_ENTRIES)
        # The bytes of whole chunks of files with deltas, by id: a chain grown too long is
        # re-rooted on them (see _write_chunk).
        self._roots: BoundedCache[str, bytes] = BoundedCache(_ROOT_CACHE_BYTES)

    def forget(self) -> None:
        """Drop everything cached (listings, sizes, remembered files): the next reads are cold."""
        self._dirs.clear()
        self._latest.clear()
        self._split.clear()
        self._buckets.clear()
        self._sizes.clear()
        self._links.clear()
        self._roots.clear()
        self._stamped = None
        self.chunker.forget()

    # -- directories ----------------------------------------------------------------------

    def find(self, oid: str, path: MemoryPath, name: str) -> Node | None:
        """The entry ``name`` of directory tree ``oid`` found at ``path``, or None.

        A split directory (format 4) is not loaded whole: ``name`` is sealed (for each kind and
        key epoch) and each sealing looked up along the one bucket path its synthetic IV names,
        so the cost is the path's, not the directory's. Every tree read on the way is checked
        as :meth:`load_dir` checks it, the names of the bucket reached decrypted too, so what
        is read is authenticated whole; a directory of one tree is loaded (and cached).
        """
        found = self.find_sealed(oid, path, name)
        return None if found is None else found[0]

    def find_sealed(self, oid: str, path: MemoryPath, name: str) -> tuple[Node, str] | None:
        """:meth:`find`'s node with the sealed entry name it was found under."""
        key = (oid, path)
        loaded = self._dirs.get(key)
        if loaded is None:
            lookups = self._split.get(key)
            if lookups is None:
                data = self.repo.read_raw_tree(oid)
                top = buckets.read_buckets(_without_meta(data) if path.is_root else data)
                if top is None:
                    entries = self._dir_entries(oid, path, data)
                    if not entries or not buckets.is_bucket_like(entries[0].name):
                        loaded = self.load_dir(oid, path, entries)
                    else:
                        top = self._checked_buckets(entries, 0, str(path), oid)
                if top is not None:
                    lookups = _Lookups(top)
                    self._split.put(key, lookups, len(top) + 1)
        if loaded is not None:
            lookups = loaded.lookups
            if lookups is None:
                lookups = loaded.lookups = _Lookups()
            hit = lookups.found.get(name, _UNKNOWN)
            if hit is not _UNKNOWN:
                return hit
            node = loaded.nodes.get(name)
            return lookups.keep(name, None if node is None else (node, loaded.sealed[name]))
        assert lookups is not None and lookups.top is not None
        hit = lookups.found.get(name, _UNKNOWN)
        if hit is not _UNKNOWN:
            return hit
        parent = str(path)
        found: tuple[Node, str] | None = None
        for kind in (KIND_FILE, KIND_DIR):
            for raw in self.keys.name_sealings(name, parent, kind):
                entry = self._find_sealed(oid, parent, lookups.top, raw).get(raw)
                if entry is None:
                    continue
                if found is not None:
                    # As load_dir refuses two entries opening to one name.
                    raise IntegrityError(f"directory {parent} holds an invalid entry (tree {oid})")
                found = Node(kind, entry), raw
        return lookups.keep(name, found)

    def open_dir(self, oid: str, path: MemoryPath) -> LoadedDir | None:
        """Directory tree ``oid`` at ``path`` loaded, if it is cached or one tree (loaded
        then); None for a split directory not loaded (see :meth:`find`)."""
        loaded = self._dirs.get((oid, path))
        if loaded is None:
            top = self._dir_entries(oid, path)
            if not top or not buckets.is_bucket_like(top[0].name):
                loaded = self.load_dir(oid, path, top)
        return loaded

    def replace_entries(
        self, oid: str, path: MemoryPath, changes: Mapping[str, str | None]
    ) -> str | None:
        """Split directory tree ``oid`` at ``path`` with the entries sealed as the keys of
        ``changes`` (each found there by :meth:`find_sealed`) naming the trees its values name,
        or removed where the value is None; None (nothing written) when a removal leaves a
        tree of the directory at or under the threshold, whose buckets must then merge (the
        caller writes the directory from its whole listing).

        Only the trees on those entries' bucket paths are rewritten, and a bucket emptied is
        dropped: the shape depends on the names alone, so it stays but for that, and the result
        is the tree :meth:`write_dir` would write. Whether a tree keeps more than the threshold
        is read from its buckets' entry counts, and only as far as needed.
        """
        by_bits = [(buckets.entry_bits(raw), raw, new) for raw, new in changes.items()]
        result = self._replaced(oid, 0, by_bits, path)
        if result is None:
            return None
        if path.is_root and self.meta_blob is not None:
            self._stamped = (result, self.meta_blob)
        return result

    def _replaced(
        self, tree: str, level: int, changes: list[tuple[int, str, str | None]], path: MemoryPath
    ) -> str | None:
        """Tree ``tree`` (``level`` bucket levels below its directory's) with ``changes``
        (bits, sealed name, new tree id or None to remove) made below it: its new id, "" when
        nothing is left in it, None when it must merge. Recursion, as nowhere else: its depth
        is at most MAX_LEVELS, which every read of these trees (find) has checked."""
        if level > buckets.MAX_LEVELS:
            raise IntegrityError(f"directory {path} nests buckets too deep (tree {tree})")
        entries = self.repo.read_tree(tree)
        if level == 0 and path.is_root:
            # As write_dir: every root tree this codec writes carries the current metadata.
            entries = [e for e in entries if e.name != META_ENTRY]
        if any(buckets.is_bucket_like(e.name) for e in entries):
            removals = sum(new is None for _, _, new in changes)
            if removals and not self._holds_more(entries, buckets.SPLIT_THRESHOLD + removals):
                return None
            groups: dict[str, list[tuple[int, str, str | None]]] = {}
            for change in changes:
                name = buckets.bucket_name(buckets.bucket_of(change[0], level))
                groups.setdefault(name, []).append(change)
            rewritten: list[TreeEntry] = []
            for entry in entries:
                if entry.name not in groups:
                    rewritten.append(entry)
                    continue
                below = self._replaced(entry.oid, level + 1, groups[entry.name], path)
                if below is None:
                    return None
                if below:
                    rewritten.append(TreeEntry(entry.name, below, entry.mode))
            entries = rewritten
        else:
            new = {raw: oid for _, raw, oid in changes}
            kept: list[TreeEntry] = []
            for entry in entries:
                if entry.name not in new:
                    kept.append(entry)
                elif (replacement := new[entry.name]) is not None:
                    kept.append(TreeEntry(entry.name, replacement, entry.mode))
            entries = kept
            if not entries:
                return ""  # an emptied bucket (a split directory's own tree keeps others)
        if level == 0 and path.is_root and self.meta_blob is not None:
            entries.append(TreeEntry(META_ENTRY, self.meta_blob, BLOB_MODE))
        return self.repo.write_tree(entries)

    def _holds_more(self, entries: list[TreeEntry], count: int) -> bool:
        """Whether the buckets ``entries`` (of a canonical split tree) hold more than ``count``
        entries: a bucket split again holds more than the threshold, a leaf as many as its
        tree lists; buckets are read only until the total is known to pass ``count``."""
        total = 0
        for entry in entries:
            below = self.repo.read_tree(entry.oid)
            if below and buckets.is_bucket_like(below[0].name):
                total += buckets.SPLIT_THRESHOLD + 1
            else:
                total += len(below)
            if total > count:
                return True
        return False

    def _find_sealed(self, oid: str, parent: str, top: dict[str, str], raw: str) -> dict[str, str]:
        """The entries (tree ids by sealed name) of the bucket of split directory tree ``oid``
        at ``parent`` (its buckets ``top``, checked) that sealed name ``raw`` belongs in, empty
        if there is none. Each tree on the way is read and checked once (see ``_buckets``)."""
        bits = buckets.entry_bits(raw)
        inner, level = top, 0
        while True:
            if level >= buckets.MAX_LEVELS:
                raise IntegrityError(f"directory {parent} nests buckets too deep (tree {oid})")
            below = inner.get(buckets.bucket_name(buckets.bucket_of(bits, level)))
            if below is None:
                return {}
            level += 1
            prefix = buckets.prefix_of(bits, level)
            key = (below, parent, level, prefix)
            checked = self._buckets.get(key)
            if checked is None:
                data = self.repo.read_raw_tree(below)
                fast = buckets.read_buckets(data)
                if fast is not None:
                    if level >= buckets.MAX_LEVELS:
                        raise IntegrityError(
                            f"directory {parent} nests buckets too deep (tree {oid})"
                        )
                    checked = True, fast
                else:
                    entries = parse_tree(data, below)
                    if not entries:
                        raise IntegrityError(
                            f"directory {parent} holds an empty bucket (tree {oid})"
                        )
                    if buckets.is_bucket_like(entries[0].name):
                        checked = True, self._checked_buckets(entries, level, parent, oid)
                    else:
                        self._checked_leaf(entries, level, prefix, (), {}, parent, oid)
                        checked = False, {entry.name: entry.oid for entry in entries}
                self._buckets.put(key, checked, len(checked[1]) + 1)
            is_inner, inner = checked
            if not is_inner:
                return inner

    @staticmethod
    def _checked_buckets(
        entries: list[TreeEntry], level: int, parent: str, oid: str
    ) -> dict[str, str]:
        """The buckets of a split directory's tree ``level`` bucket levels below its own
        (``entries``, the first bucket-like), by name: each a tree with a bucket's name, or
        IntegrityError (as load_dir checks them)."""
        if level >= buckets.MAX_LEVELS:
            raise IntegrityError(f"directory {parent} nests buckets too deep (tree {oid})")
        found: dict[str, str] = {}
        for entry in entries:
            if buckets.bucket_index(entry.name) is None or entry.mode != TREE_MODE:
                raise IntegrityError(f"directory {parent} holds a malformed bucket (tree {oid})")
            found[entry.name] = entry.oid
        return found

    def _checked_leaf(
        self,
        entries: list[TreeEntry],
        level: int,
        prefix: int,
        seen: Container[str],
        known: Mapping[str, str],
        parent: str,
        oid: str,
    ) -> list[tuple[str, str]]:
        """The name and kind of each memory entry of ``entries``, a leaf ``level`` bucket levels
        below directory ``parent``'s tree ``oid`` (``prefix``: the bucket indices that led
        there), with every check a reader makes of each: a tree, an authentic name of a file or
        a directory in neither ``seen`` nor earlier in the leaf, in its bucket. ``known`` holds
        names opened already at this path, by sealed name (sealing is deterministic and binds
        the parent path). One loop for the leaf: a cold load of a big directory runs it for
        every name."""
        opened: list[tuple[str, str]] = []
        here: set[str] = set()
        open_name = self.keys.open_name
        for entry in entries:
            raw = entry.name
            if entry.mode != TREE_MODE:
                raise IntegrityError(f"directory {parent} holds an entry that is not a tree")
            name = known.get(raw)
            envelope = None
            if name is not None:
                kind = raw[:1]
            else:
                try:
                    name, kind, envelope = open_name(raw, parent)
                except IntegrityError:
                    raise IntegrityError(
                        f"an entry name in directory {parent} failed authentication (tree {oid})"
                    ) from None
            if (
                kind not in (KIND_FILE, KIND_DIR)
                or not name
                or "/" in name
                or name in seen
                or name in here
            ):
                raise IntegrityError(f"directory {parent} holds an invalid entry (tree {oid})")
            if level:
                # The envelope decoded to open the name gives its bits (a known name's is
                # decoded for them).
                bits = (
                    buckets.entry_bits(raw) if envelope is None else buckets.envelope_bits(envelope)
                )
                if buckets.prefix_of(bits, level) != prefix:
                    raise IntegrityError(
                        f"directory {parent} holds an entry in the wrong bucket (tree {oid})"
                    )
            here.add(name)
            opened.append((name, kind))
        return opened

    def _dir_entries(
        self, oid: str, path: MemoryPath, data: bytes | None = None
    ) -> list[TreeEntry]:
        """The entries of directory tree ``oid`` at ``path`` (``data``: its bytes, when read
        already), the root's metadata blob left out (and checked to be a blob)."""
        top = self.repo.read_tree(oid) if data is None else parse_tree(data, oid)
        if not path.is_root:
            return top
        for entry in top:
            # The store's metadata, not a memory entry (format 2).
            if entry.name == META_ENTRY and entry.mode != BLOB_MODE:
                raise IntegrityError(f"the root tree {oid} holds a gitmem entry that is no blob")
        return [entry for entry in top if entry.name != META_ENTRY]

    def load_dir(self, oid: str, path: MemoryPath, top: list[TreeEntry] | None = None) -> LoadedDir:
        """Decrypt every entry of directory tree ``oid`` found at ``path`` (``top``: its
        entries, when read already)."""
        key = (oid, path)
        cached = self._dirs.get(key)
        if cached is not None:
            return cached
        parent = str(path)
        nodes: dict[str, tuple[str, str]] = {}  # plain tuples, as a NodeMap keeps them
        sealed: dict[str, str] = {}
        # Entry names already opened at this path, by sealed name: sealing is deterministic
        # and binds the parent path, so an identical sealed name under the same parent opens
        # to the same name and kind (it was authenticated when first opened).
        previous = self._latest.get(path)
        known = {} if previous is None else previous.by_sealed()
        if top is None:
            top = self._dir_entries(oid, path)
        shape = buckets.Shape(0, oid)
        # The directory's tree, then its buckets (at most MAX_LEVELS deep): (tree, its
        # entries, how deep, the bucket indices that led there as one number, the previous
        # version's tree at the same place). A bucket with the same id as there is the same
        # entries, read and checked already: taken over unread.
        stack: list[_Pending] = [(shape, top, 0, 0, None if previous is None else previous.shape)]
        reused: list[buckets.Shape] = []
        while stack:
            node, entries, level, prefix, before = stack.pop()
            if entries and buckets.is_bucket_like(entries[0].name):
                node.buckets = self._read_buckets(
                    entries, (level, prefix, before), parent, oid, stack, reused
                )
                continue
            checked = self._checked_leaf(entries, level, prefix, nodes, known, parent, oid)
            for entry, (name, kind) in zip(entries, checked, strict=True):
                nodes[name] = (kind, entry.oid)
                sealed[name] = entry.name
            node.count = len(entries)
            node.names = tuple([entry.name for entry in entries])
        if reused:
            assert previous is not None
            for raw in itertools.chain.from_iterable(map(buckets.raw_names, reused)):
                name = known[raw]
                if name in nodes:
                    raise IntegrityError(f"directory {parent} holds an invalid entry (tree {oid})")
                nodes[name] = _plain(previous.nodes[name])
                sealed[name] = raw
        buckets.recount(shape)
        loaded = LoadedDir(_from_plain(nodes), frozen(sealed), shape)
        self._remember(key, loaded)
        return loaded

    def _read_buckets(
        self,
        entries: list[TreeEntry],
        where: tuple[int, int, buckets.Shape | None],
        parent: str,
        oid: str,
        stack: list[_Pending],
        reused: list[buckets.Shape],
    ) -> dict[int, buckets.Shape]:
        """The buckets of a split directory's tree (format 4) at ``where`` (level, bucket
        prefix, the previous version's tree there), each queued on ``stack`` to be read or,
        unchanged since that version, added to ``reused``; anything but non-empty, well-named
        buckets above the deepest level is refused."""
        level, prefix, before = where
        if level >= buckets.MAX_LEVELS:
            raise IntegrityError(f"directory {parent} nests buckets too deep (tree {oid})")
        known = None if before is None else before.buckets
        found: dict[int, buckets.Shape] = {}
        for entry in entries:
            index = buckets.bucket_index(entry.name)
            if index is None or entry.mode != TREE_MODE:
                raise IntegrityError(f"directory {parent} holds a malformed bucket (tree {oid})")
            old = None if known is None else known.get(index)
            if old is not None and old.oid == entry.oid:
                found[index] = old
                reused.append(old)
                continue
            below = self.repo.read_tree(entry.oid)
            if not below:
                raise IntegrityError(f"directory {parent} holds an empty bucket (tree {oid})")
            child = found[index] = buckets.Shape(0, entry.oid)
            stack.append((child, below, level + 1, (prefix << buckets.BUCKET_BITS) | index, old))
        return found

    def _leaf_entries(self, oid: str) -> list[tuple[str, str]]:
        """The memory entries of a leaf tree already read (and checked) by :meth:`load_dir`."""
        return [(e.name, e.oid) for e in self.repo.read_tree(oid) if e.mode == TREE_MODE]

    def _remember(self, key: tuple[str, MemoryPath], loaded: LoadedDir) -> None:
        self._dirs.put(key, loaded, len(loaded.nodes) + 1)
        self._latest.put(key[1], loaded, len(loaded.nodes) + 1)

    def write_dir(
        self,
        path: MemoryPath,
        nodes: Mapping[str, Node],
        sealed: Mapping[str, str],
        fold_index: FoldIndex | None = None,
        base: tuple[LoadedDir, set[str]] | None = None,
    ) -> str:
        """Write a directory tree; ``sealed`` holds known entry names to reuse, ``fold_index``
        (when known) the names of ``nodes`` by fold key, and ``base`` the directory it was
        edited from with the names whose entries may differ from it (``nodes`` equals the
        base's entries elsewhere)."""
        parent: str | None = None  # made when a name is sealed (most writes reuse theirs)

        def seal(name: str, node: Node) -> str:
            nonlocal parent
            raw = sealed.get(name)
            if raw is None or raw[:1] != node.kind:
                parent = str(path) if parent is None else parent
                raw = self.keys.seal_name(name, parent, node.kind)
            return raw

        meta = self.meta_blob if path.is_root else None
        stamp = None
        if meta is not None:
            key = META_ENTRY.encode()
            stamp = (key, b"%o %s\0%s" % (BLOB_MODE, key, bytes.fromhex(meta)))
        names: Mapping[str, str]
        shape: buckets.Shape | None = None
        if base is None:
            fresh = {name: seal(name, node) for name, node in nodes.items()}
            shape = buckets.build(
                buckets.serialized(raw, nodes[name].oid) for name, raw in fresh.items()
            )
            names = frozen(fresh)
        else:
            # Edit the base's shape: only the buckets holding touched names are rewritten.
            loaded, touched = base
            changes: dict[str, str | None] = {}
            removed: list[str] = []
            added: list[tuple[str, str]] = []
            # The names to reuse are the base's (as a rule): each looked up once, not again
            # by seal() (a big directory's are a sharded map, read through Python calls).
            same = sealed is loaded.sealed
            for name in touched:
                old = loaded.sealed.get(name)
                if old is not None:
                    removed.append(old)
                node = nodes.get(name)
                if node is None:
                    if old is not None:
                        changes[name] = None
                else:
                    raw = old if same and old is not None and old[:1] == node.kind else None
                    raw = raw or seal(name, node)
                    if raw != old:
                        changes[name] = raw
                    added.append((raw, node.oid))
            split = loaded.shape.buckets is not None
            if split and not changes and len(removed) == len(added) == len(touched):
                # Only entries pointed at new trees (every write below a big directory): edited
                # and written in one walk.
                shape = buckets.repointed(
                    loaded.shape, added, self._leaf_entries, self.repo.write_raw_tree, stamp
                )
            if shape is None:
                shape = buckets.edit(loaded.shape, removed, added, self._leaf_entries)
            # An entry pointed at a new tree keeps its sealed name (the common write): the
            # names are then the base's, not a copy of them.
            names = evolved(loaded.sealed, changes) if changes else loaded.sealed
            # The version edited is superseded: dropped now, while its memory is still in the
            # CPU's caches, rather than when the cache's bound evicts it many writes later, when
            # freeing it would touch memory gone cold. Reading it again (an older snapshot)
            # reopens it from this version, reading only the buckets that differ.
            assert loaded.shape.oid is not None  # a committed or written version
            self._dirs.discard((loaded.shape.oid, path))
        # A repointed shape is written already.
        oid = shape.oid or buckets.store(shape, self.repo.write_raw_tree, stamp)
        if meta is not None:
            self._stamped = (oid, meta)
        # The next write starts from this tree: remember what it holds, so that it is not read
        # back and every name in it decrypted again (sealing is deterministic, and the id is the
        # hash of exactly these entries, so this is what load_dir would find).
        self._remember((oid, path), LoadedDir(version_nodes(nodes), names, shape, fold_index))
        return oid

    def stamp_root(self, oid: str) -> str:
        """Root tree ``oid`` carrying this store's metadata blob (rewritten only if it lacks it).

        A restore reuses an old root tree, which may predate format 2 or an update of the
        metadata; every commit written must carry the current metadata.
        """
        if self.meta_blob is None or self._stamped == (oid, self.meta_blob):
            return oid  # no metadata yet, or a root tree just written with it
        entries = self.repo.read_tree(oid)
        kept = [e for e in entries if e.name != META_ENTRY]
        if len(kept) == len(entries) - 1 and any(
            e.name == META_ENTRY and e.oid == self.meta_blob and e.mode == BLOB_MODE
            for e in entries
        ):
            return oid
        return self.repo.write_tree([*kept, TreeEntry(META_ENTRY, self.meta_blob, BLOB_MODE)])

    def reseal_dir(self, oid: str, old: MemoryPath, new: MemoryPath) -> str:
        """Rewrite directory ``oid`` from ``old`` to ``new``: names bind their parent path."""
        if old == new:
            return oid
        # Depth first without recursion (a tree may be deeper than Python's stack): a directory
        # is written once every directory below it has been, from their new ids.
        written: dict[MemoryPath, str] = {}
        stack: list[tuple[str, MemoryPath, MemoryPath, bool]] = [(oid, old, new, False)]
        while stack:
            dir_oid, source, target, below_done = stack.pop()
            loaded = self.load_dir(dir_oid, source)
            if not below_done:
                stack.append((dir_oid, source, target, True))
                stack.extend(
                    (node.oid, source.child(name), target.child(name), False)
                    for name, node in loaded.nodes.items()
                    if node.kind == KIND_DIR
                )
                continue
            nodes = {
                name: Node(KIND_DIR, written.pop(target.child(name)))
                if node.kind == KIND_DIR
                else node
                for name, node in loaded.nodes.items()
            }
            written[target] = self.write_dir(target, nodes, {})
        return written[new]

    # -- files ----------------------------------------------------------------------------

    def write_file(self, data: bytes, previous: str | None = None, *, deltas: bool = True) -> str:
        """Store ``data`` as a file tree (chunks, base chunks, header) and return the tree id.

        ``previous`` is the file tree of the version ``data`` replaces, if any: a changed
        chunk may then be stored as a delta of the chunks it overlapped there (format 6).
        Without ``deltas`` every chunk is stored whole and the tree has no bases (a
        redaction's rewrite: no earlier bytes stay reachable through it).
        """
        pieces = self.chunker.pieces(data)
        old = self._old_version(previous, data) if deltas else None
        oids: list[str] = []
        links: list[_Link] = []
        start = 0
        for chunk, known in pieces:
            end = start + len(chunk)
            # A chunk known from the file's previous version is that blob (sealing is
            # deterministic), with the bases it needs; it is rewritten only if it has gone
            # (pruned garbage) or its bases are not known.
            link = None if known is None else self._links.get(known)
            if (
                known is not None
                and link is not None
                and (deltas or not link.bases)
                and self.repo.has(known)
            ):
                oids.append(known)
            else:
                bases = old.bases(start, end) if old else []
                known, link = self._write_chunk(chunk, bases, len(data))
                oids.append(known)
            links.append(link)
            start = end
        needed = sorted(frozenset().union(*(link.closure for link in links)))
        # In git's order: chunks, then bases, then the header.
        entries = [TreeEntry(chunk_entry(i), o, BLOB_MODE) for i, o in enumerate(oids)]
        entries += [TreeEntry(base_entry(b), b, BLOB_MODE) for b in needed]
        entries.append(TreeEntry(HEADER_ENTRY, self._write_header(len(data), len(oids)), BLOB_MODE))
        oid = self.repo.write_tree(entries)
        self._keep_file(oid, data, list(accumulate(len(p.data) for p in pieces)), oids, links)
        self._sizes.put(oid, len(data))
        return oid

    def _old_version(self, previous: str | None, new: bytes) -> _OldVersion | None:
        """What an edit of file tree ``previous`` into ``new`` may store deltas against, if
        the writer knows that version (an edit reads it first)."""
        if previous is None or len(new) < DELTA_MIN_FILE:
            return None
        known = self._files.get(previous)
        if known is None:
            return None
        data, cuts, chunk_oids = known
        links = [self._links.get(o) for o in chunk_oids]
        return _OldVersion(data, cuts, chunk_oids, links, new)

    def _write_header(self, size: int, chunks: int) -> str:
        sealed = self.keys.seal_blob(encode_header(size, chunks), ROLE_HEADER)
        return self.repo.write_blob(sealed)

    def _write_chunk(self, chunk: bytes, bases: list[_Base], size: int) -> tuple[str, _Link]:
        """Seal and store ``chunk`` of a file of ``size`` bytes, as a delta of ``bases`` (or
        of their chains' roots, when the chain would grow too long) when that is much smaller
        than the chunk stored whole; its id and what it needs."""
        packed = zlib.compress(chunk, 6)
        body = (
            bytes([COMPRESS_ZLIB]) + packed
            if len(packed) < len(chunk)
            else bytes([COMPRESS_NONE]) + chunk
        )
        link = _WHOLE
        if bases:
            found = _link_of(tuple(b.oid for b in bases), [b.link for b in bases])
            if found.depth > DELTA_CHAIN or len(found.closure) > _MAX_CLOSURE:
                # A chain too long: a delta of the whole chunks it started from instead, which
                # is small while the chunk has not drifted far from them.
                bases = self._chain_roots(bases, size)
                if bases:
                    found = _link_of(tuple(b.oid for b in bases), [_WHOLE] * len(bases))
            if bases:
                compressor = zlib.compressobj(
                    9, zlib.DEFLATED, -15, zdict=b"".join(b.data for b in bases)
                )
                delta = compressor.compress(chunk) + compressor.flush()
                head = bytes([COMPRESS_DELTA, len(bases)]) + b"".join(
                    bytes.fromhex(b.oid) for b in bases
                )
                if len(head) + len(delta) <= _DELTA_SHARE * len(body):
                    body, link = head + delta, found
        oid = self.repo.write_blob(self.keys.seal_blob(body, ROLE_CHUNK))
        self._links.put(oid, link)
        if not link.bases and size >= DELTA_MIN_FILE:
            self._roots.put(oid, chunk, len(chunk) + 1)
        return oid, link

    def _chain_roots(self, bases: list[_Base], size: int) -> list[_Base]:
        """The whole chunks the chains of ``bases`` start from, with their bytes; none when
        there are too many, one is longer than ``size`` or its bytes are not known."""
        ids = list(
            dict.fromkeys(
                root for b in bases for root in (sorted(b.link.roots) if b.link.bases else [b.oid])
            )
        )
        if len(ids) > _MAX_BASES:
            return []
        known = {b.oid: b.data for b in bases if not b.link.bases}
        roots = []
        for root in ids:
            data = known.get(root) or self._roots.get(root)
            if data is None or len(data) > size:
                return []
            roots.append(_Base(root, data, _WHOLE))
        return roots

    def _file_entries(self, oid: str) -> tuple[int, list[TreeEntry], list[TreeEntry]]:
        """The size, chunk entries and base entries of file tree ``oid``, checked."""
        entries = self.repo.read_tree(oid)
        # Trees are read in git's order (gitrepo checks it): chunks, then bases, then "h".
        if (
            not entries
            or entries[-1].name != HEADER_ENTRY
            or any(e.mode != BLOB_MODE for e in entries)
        ):
            raise IntegrityError(f"file tree {oid} is malformed")
        header = entries[-1]
        count = 0
        for entry in entries:
            if not entry.name.startswith(CHUNK_ENTRY_PREFIX):
                break
            count += 1
        chunks, bases = entries[:count], entries[count:-1]
        try:
            sealed = self.repo.read_blob(header.oid, MAX_HEADER_BLOB_BYTES)
            plain = self.keys.open_blob(sealed, ROLE_HEADER)
        except IntegrityError:
            raise IntegrityError(
                f"the header {header.oid} of file tree {oid} failed authentication"
            ) from None
        size, stated = decode_header(plain)
        if stated != len(chunks) or any(e.name != chunk_entry(i) for i, e in enumerate(chunks)):
            raise IntegrityError(f"file tree {oid} does not match its header")
        if any(e.name != base_entry(e.oid) for e in bases):
            raise IntegrityError(f"file tree {oid} is malformed")
        return size, chunks, bases

    def forget_size(self, oid: str) -> None:
        """Forget the size of file tree ``oid``: an edit replaced or removed that version, so
        only a view of history asks for it again (and reads its header)."""
        self._sizes.discard(oid)

    def file_size(self, oid: str) -> int:
        """The plaintext size of file tree ``oid``, from its header alone."""
        size = self._sizes.get(oid)
        if size is None:
            size, _, _ = self._file_entries(oid)
            self._sizes.put(oid, size)
        return size

    def read_file(self, oid: str, *, fresh: bool = False) -> bytes:
        """The plaintext of file tree ``oid``, authenticated chunk by chunk.

        Files read or written lately are kept by tree id (an id names one content, so an entry
        never goes stale); ``fresh`` reads and authenticates every object again (verify).
        """
        if not fresh:
            known = self._files.get(oid)
            if known is not None:
                data, cuts, chunk_oids = known
                # As a read would: the next edit of this file rehashes only around the edit.
                self.chunker.remember(data, cuts, chunk_oids)
                return data
        size, chunks, base_entries = self._file_entries(oid)
        # Authenticate every chunk and base first, then inflate them: inflating (most of a
        # large file's read) runs outside the GIL, so a large file's whole chunks inflate on
        # several threads without the threads contending for the GIL (see gitmem.workers).
        # No chunk is longer than the whole file (plus its envelope): the bound on what a
        # damaged or planted chunk object may inflate to. Writers keep bases within it too.
        limit = min(size + CHUNK_BLOB_OVERHEAD, MAX_BLOB_BYTES)
        bodies = {
            e.oid: self._open_chunk(e.oid, limit) for e in itertools.chain(chunks, base_entries)
        }
        whole = [(o, b) for o, b in bodies.items() if b[:1] != _DELTA_METHOD]
        plains = dict(
            zip(
                (o for o, _ in whole),
                workers.map_ordered(_inflate, whole, parallel=size >= _PARALLEL_BYTES),
                strict=True,
            )
        )
        links = dict.fromkeys(plains, _WHOLE)
        if len(plains) < len(bodies):
            resolver = _Deltas(oid, size, bodies, plains, links)
            for entry in chunks:
                resolver.resolve(entry.oid, 0)
        parts = [plains[e.oid] for e in chunks]
        data = b"".join(parts)
        if len(data) != size:
            raise IntegrityError(f"file tree {oid} does not have the size its header states")
        if base_entries:
            # A whole chunk of a file with deltas may start a chain a later edit re-roots.
            for whole_oid, _ in whole:
                self._roots.put(whole_oid, plains[whole_oid], len(plains[whole_oid]) + 1)
        cuts = list(accumulate(map(len, parts)))
        self._keep_file(oid, data, cuts, [e.oid for e in chunks], [links[e.oid] for e in chunks])
        return data

    def _keep_file(
        self, oid: str, data: bytes, cuts: list[int], chunk_oids: list[str], links: list[_Link]
    ) -> None:
        self.chunker.remember(data, cuts, chunk_oids)
        self._files.put(oid, (data, cuts, chunk_oids), len(data) + 1)
        for chunk, link in zip(chunk_oids, links, strict=True):
            self._links.put(chunk, link)

    def _open_chunk(self, oid: str, limit: int) -> bytes:
        try:
            return self.keys.open_blob(self.repo.read_blob(oid, limit), ROLE_CHUNK)
        except IntegrityError:
            raise IntegrityError(f"chunk {oid} failed authentication") from None


_DELTA_METHOD = bytes([COMPRESS_DELTA])


class _Link(NamedTuple):
    """What a stored chunk needs besides itself: the bases it names (none when it is stored
    whole), its delta chain's depth, every base it needs (its bases' bases included), and the
    whole chunks among them."""

    bases: tuple[str, ...]
    depth: int
    closure: frozenset[str]
    roots: frozenset[str]


_WHOLE = _Link((), 0, frozenset(), frozenset())


def _link_of(named: tuple[str, ...], links: list[_Link]) -> _Link:
    """What a delta of the bases ``named`` (whose own links are ``links``) needs."""
    return _Link(
        named,
        1 + max(link.depth for link in links),
        frozenset(named).union(*(link.closure for link in links)),
        frozenset().union(
            *(link.roots if link.bases else {base} for base, link in zip(named, links, strict=True))
        ),
    )


class _Base(NamedTuple):
    """A chunk of a file's previous version that a new chunk may be a delta of."""

    oid: str
    data: bytes
    link: _Link


class _OldVersion:
    """The version of a file an edit replaces, as deltas of the edit's chunks need it."""

    def __init__(
        self,
        data: bytes,
        cuts: list[int],
        chunk_oids: list[str],
        links: list[_Link | None],
        new: bytes,
    ) -> None:
        self.data, self.cuts, self.chunk_oids, self.links = data, cuts, chunk_oids, links
        self.size = len(new)  # no base may be longer (the readers' bound on a chunk)
        # The edit changed old[prefix : len(old) - suffix] into new[prefix : len(new) - suffix].
        self.prefix = common_prefix(data, new)
        self.suffix = common_suffix(data, new, min(len(data), len(new)) - self.prefix)

    def _old_offset(self, at: int, end: bool) -> int:
        """Where offset ``at`` of the new version was in the old one: the same bytes before
        the edit and after it; inside it, the edit's start (``end`` false) or end."""
        if at <= self.prefix:
            return at
        if at >= self.size - self.suffix:
            return at - self.size + len(self.data)
        return len(self.data) - self.suffix if end else self.prefix

    def bases(self, start: int, end: int) -> list[_Base]:
        """The old chunks a new chunk at ``[start, end)`` may be a delta of: those holding
        the bytes it was made from, at most ``_MAX_BASES``, in file order."""
        low, high = self._old_offset(start, False), self._old_offset(end, True)
        if high <= low:  # all of it new (inserted by the edit): the old chunks around it
            low, high = max(low - 1, 0), min(low + 1, len(self.data))
        found: list[_Base] = []
        index = bisect_right(self.cuts, low)
        begin = self.cuts[index - 1] if index else 0
        for cut in self.cuts[index:]:
            if begin >= high or len(found) == _MAX_BASES:
                break
            link = self.links[index]
            if link is not None and cut - begin <= self.size:
                found.append(_Base(self.chunk_oids[index], self.data[begin:cut], link))
            begin = cut
            index += 1
        return found


class _Deltas:
    """Resolves a file tree's delta chunks against its bases, each once, bases first."""

    def __init__(
        self,
        tree: str,
        size: int,
        bodies: Mapping[str, bytes],
        plains: dict[str, bytes],
        links: dict[str, _Link],
    ) -> None:
        self.tree, self.size = tree, size
        self.bodies, self.plains, self.links = bodies, plains, links

    def resolve(self, oid: str, depth: int) -> bytes:
        """The bytes of chunk ``oid``, reached through ``depth`` deltas."""
        plain = self.plains.get(oid)
        if plain is not None:
            return plain
        if depth > MAX_DELTA_DEPTH:
            raise IntegrityError(
                f"chunk {oid} of file tree {self.tree} is a delta more than {MAX_DELTA_DEPTH} deep"
            )
        body = self.bodies[oid]
        count = body[1] if len(body) > 1 else 0
        if count == 0 or len(body) < 2 + 20 * count:
            raise IntegrityError(f"chunk {oid} is malformed")
        named = tuple(body[2 + 20 * i : 22 + 20 * i].hex() for i in range(count))
        if any(b not in self.bodies or b == oid for b in named):
            raise IntegrityError(
                f"chunk {oid} names a base that file tree {self.tree} does not hold"
            )
        zdict = b"".join(self.resolve(b, depth + 1) for b in named)
        try:
            inflater = zlib.decompressobj(-15, zdict=zdict)
            plain = inflater.decompress(memoryview(body)[2 + 20 * count :], self.size + 1)
        except zlib.error:
            raise IntegrityError(f"chunk {oid} does not decompress") from None
        if not inflater.eof or inflater.unused_data or len(plain) > self.size:
            raise IntegrityError(f"chunk {oid} does not decompress")
        self.links[oid] = _link_of(named, [self.links[b] for b in named])
        self.plains[oid] = plain
        return plain


def _inflate(chunk: tuple[str, bytes]) -> bytes:
    """A chunk's bytes from its authenticated body (a compression method byte, then data)."""
    oid, body = chunk
    method = body[0] if body else -1
    if method == COMPRESS_ZLIB:
        try:
            # Sized for text (about 3:1): zlib otherwise grows its output buffer from 16 KiB
            # by copying, again and again for a large chunk.
            return zlib.decompress(memoryview(body)[1:], bufsize=max(4 * len(body), 16384))
        except zlib.error:
            raise IntegrityError(f"chunk {oid} does not decompress") from None
    if method == COMPRESS_NONE:
        return body[1:]
    raise IntegrityError(f"chunk {oid} has an unknown compression method")
