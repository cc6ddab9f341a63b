"""The encrypted memory tree: reading a committed tree and editing a copy of it.

A directory is a git tree whose entries are encrypted names (kind + AES-SIV, the parent path
bound in). A file is a git tree holding an encrypted header blob (``h``) and its encrypted chunk
blobs (``c00000000``, ...). Nothing here trusts a tree it is handed: every name, mode and blob is
authenticated as it is read, and anything else is an :class:`IntegrityError`.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import (
    Callable,
    Container,
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate
from typing import NamedTuple, TypeVar, overload

from . import buckets, chunking, paths, workers
from .cache import BoundedCache
from .crypto import StoreKeys
from .errors import IntegrityError, InvalidPath, NotADirectory, NotAFile, NotFound, PathExists
from .format import (
    CHUNK_BLOB_OVERHEAD,
    COMPRESS_NONE,
    COMPRESS_ZLIB,
    HEADER_ENTRY,
    KIND_DIR,
    KIND_FILE,
    MAX_BLOB_BYTES,
    MAX_HEADER_BLOB_BYTES,
    META_ENTRY,
    ROLE_CHUNK,
    ROLE_HEADER,
    chunk_entry,
    decode_header,
    encode_header,
)
from .git.objects import BLOB_MODE, TREE_MODE, TreeEntry, parse_tree
from .git.repo import GitRepo
from .paths import MEMORIES_ROOT, MemoryPath
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
# Files this large inflate their chunks on several threads (see gitmem.workers). On two cores
# that took a read to 0.85x its one-thread time at 256 KiB and 0.75x at 1 MiB, but only 0.92x
# at 128 KiB and 1.09x at 16 KiB, where the hand-offs' CPU time buys little or nothing.
_PARALLEL_BYTES = 256 << 10
# Names that a listing (as Claude sees it) leaves out, besides dot-files.
EXCLUDED_NAMES = frozenset({"node_modules"})


_D = TypeVar("_D")


class Node(NamedTuple):
    """A committed entry: ``kind`` is ``f`` (file) or ``d`` (directory); ``oid`` its git tree."""

    kind: str
    oid: str


# A Node from the plain (kind, oid) tuple a NodeMap holds: about 0.1 µs (a frozen dataclass's
# __init__ cost several times that).
_as_node: Callable[[tuple[str, str]], Node] = partial(tuple.__new__, Node)


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
        return _as_node(self.packed[name])

    @overload
    def get(self, name: str, /) -> Node | None: ...
    @overload
    def get(self, name: str, default: Node | _D, /) -> Node | _D: ...
    def get(self, name: str, default: object = None, /) -> object:
        found = self.packed.get(name)
        return default if found is None else _as_node(found)

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
        return {name: _as_node(node) for name, node in plain.items()}
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
            yield from zip(shard, map(_as_node, shard.values()), strict=True)


@dataclass(frozen=True)
class _FoldIndex:
    """A directory's names by :func:`gitmem.paths.fold_name` key, and the fold that made it."""

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
class _Loaded:
    # Read-only once made (shared with later versions: see gitmem.shardmap).
    nodes: Mapping[str, Node]  # see version_nodes
    sealed: Mapping[str, str]
    # The directory's tree and its buckets (gitmem.buckets): the next version is edited from
    # it, so that one write of a big directory costs its changes and the buckets they touch.
    shape: buckets.Shape
    fold_index: _FoldIndex | None = None
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

    def folded(self) -> _FoldIndex:
        """The names by fold key, built on first use (one fold per name, once per tree)."""
        index = self.fold_index
        if index is None or index.fold is not paths.fold_name:
            names: dict[str, tuple[str, ...]] = {}
            for name in self.nodes:
                key = paths.fold_name(name)
                names[key] = (*names.get(key, ()), name)
            index = self.fold_index = _FoldIndex(paths.fold_name, frozen(names))
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
        self._dirs: BoundedCache[tuple[str, MemoryPath], _Loaded] = BoundedCache(_DIR_CACHE_ENTRIES)
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
        self._latest: BoundedCache[MemoryPath, _Loaded] = BoundedCache(_DIR_CACHE_ENTRIES)
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
        # Set when write_dir writes a split directory: the store's format must then be 4 (the
        # writer clears it before each edit; see MemoryStore.write).
        self.wrote_split = False

    def forget(self) -> None:
        """Drop everything cached (listings, sizes, remembered files): the next reads are cold."""
        self._dirs.clear()
        self._latest.clear()
        self._split.clear()
        self._buckets.clear()
        self._sizes.clear()
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

    def open_dir(self, oid: str, path: MemoryPath) -> _Loaded | None:
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
        self.wrote_split = True
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

    def load_dir(self, oid: str, path: MemoryPath, top: list[TreeEntry] | None = None) -> _Loaded:
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
        loaded = _Loaded(_from_plain(nodes), frozen(sealed), shape)
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

    def _remember(self, key: tuple[str, MemoryPath], loaded: _Loaded) -> None:
        self._dirs.put(key, loaded, len(loaded.nodes) + 1)
        self._latest.put(key[1], loaded, len(loaded.nodes) + 1)

    def write_dir(
        self,
        path: MemoryPath,
        nodes: Mapping[str, Node],
        sealed: Mapping[str, str],
        fold_index: _FoldIndex | None = None,
        base: tuple[_Loaded, set[str]] | None = None,
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
            # CPU's caches, rather than when the cache's bound evicts it many writes later
            # (freeing an evicted version of a 10,000-entry directory cost about 5 µs then,
            # 1 µs now). Reading it again (an older snapshot) reopens it from this version,
            # reading only the buckets that differ.
            assert loaded.shape.oid is not None  # a committed or written version
            self._dirs.discard((loaded.shape.oid, path))
        # A repointed shape is written already.
        oid = shape.oid or buckets.store(shape, self.repo.write_raw_tree, stamp)
        if shape.buckets is not None:
            self.wrote_split = True
        if meta is not None:
            self._stamped = (oid, meta)
        # The next write starts from this tree: remember what it holds, so that it is not read
        # back and every name in it decrypted again (sealing is deterministic, and the id is the
        # hash of exactly these entries, so this is what load_dir would find).
        self._remember((oid, path), _Loaded(version_nodes(nodes), names, shape, fold_index))
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

    def write_file(self, data: bytes) -> str:
        """Store ``data`` as a file tree (header + chunks) and return the tree id."""
        pieces = self.chunker.pieces(data)
        entries = [TreeEntry(HEADER_ENTRY, self._write_header(len(data), len(pieces)), BLOB_MODE)]
        oids = []
        for index, (chunk, known) in enumerate(pieces):
            # A chunk known from the file's previous version is that blob (sealing is
            # deterministic); it is rewritten only if it has gone (pruned garbage).
            chunk_oid = known if known is not None and self.repo.has(known) else None
            oids.append(chunk_oid or self._write_chunk(chunk))
            entries.append(TreeEntry(chunk_entry(index), oids[-1], BLOB_MODE))
        oid = self.repo.write_tree(entries)
        self._keep_file(oid, data, list(accumulate(map(len, (p.data for p in pieces)))), oids)
        self._sizes.put(oid, len(data))
        return oid

    def _write_header(self, size: int, chunks: int) -> str:
        sealed = self.keys.seal_blob(encode_header(size, chunks), ROLE_HEADER)
        return self.repo.write_blob(sealed)

    def _write_chunk(self, chunk: bytes) -> str:
        packed = zlib.compress(chunk, 6)
        body = (
            bytes([COMPRESS_ZLIB]) + packed
            if len(packed) < len(chunk)
            else bytes([COMPRESS_NONE]) + chunk
        )
        return self.repo.write_blob(self.keys.seal_blob(body, ROLE_CHUNK))

    def _file_entries(self, oid: str) -> tuple[int, list[TreeEntry]]:
        entries = self.repo.read_tree(oid)
        # Trees are read in git's order (gitrepo checks it), where the chunks come before "h".
        if (
            not entries
            or entries[-1].name != HEADER_ENTRY
            or any(e.mode != BLOB_MODE for e in entries)
        ):
            raise IntegrityError(f"file tree {oid} is malformed")
        header, chunks = entries[-1], entries[:-1]
        try:
            sealed = self.repo.read_blob(header.oid, MAX_HEADER_BLOB_BYTES)
            plain = self.keys.open_blob(sealed, ROLE_HEADER)
        except IntegrityError:
            raise IntegrityError(
                f"the header {header.oid} of file tree {oid} failed authentication"
            ) from None
        size, count = decode_header(plain)
        if count != len(chunks) or any(e.name != chunk_entry(i) for i, e in enumerate(chunks)):
            raise IntegrityError(f"file tree {oid} does not match its header")
        return size, chunks

    def file_size(self, oid: str) -> int:
        """The plaintext size of file tree ``oid``, from its header alone."""
        size = self._sizes.get(oid)
        if size is None:
            size, _ = self._file_entries(oid)
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
        size, chunks = self._file_entries(oid)
        # Authenticate every chunk first, then inflate them: inflating (most of a large file's
        # read) runs outside the GIL, so a large file's chunks inflate on several threads
        # without the threads contending for the GIL (see gitmem.workers).
        # No chunk is longer than the whole file (plus its envelope): the bound on what a
        # damaged or planted chunk object may inflate to.
        limit = min(size + CHUNK_BLOB_OVERHEAD, MAX_BLOB_BYTES)
        bodies = [(e.oid, self._open_chunk(e.oid, limit)) for e in chunks]
        parts = workers.map_ordered(_inflate, bodies, parallel=size >= _PARALLEL_BYTES)
        data = b"".join(parts)
        if len(data) != size:
            raise IntegrityError(f"file tree {oid} does not have the size its header states")
        self._keep_file(oid, data, list(accumulate(map(len, parts))), [e.oid for e in chunks])
        return data

    def _keep_file(self, oid: str, data: bytes, cuts: list[int], chunk_oids: list[str]) -> None:
        self.chunker.remember(data, cuts, chunk_oids)
        self._files.put(oid, (data, cuts, chunk_oids), len(data) + 1)

    def _open_chunk(self, oid: str, limit: int) -> bytes:
        try:
            return self.keys.open_blob(self.repo.read_blob(oid, limit), ROLE_CHUNK)
        except IntegrityError:
            raise IntegrityError(f"chunk {oid} failed authentication") from None


def _inflate(chunk: tuple[str, bytes]) -> bytes:
    """A chunk's bytes from its authenticated body (a compression method byte, then data)."""
    oid, body = chunk
    method = body[0] if body else -1
    if method == COMPRESS_ZLIB:
        try:
            # Sized for text (about 3:1): zlib otherwise grows its output buffer from 16 KiB
            # by copying, which makes a large chunk half again as slow to inflate.
            return zlib.decompress(memoryview(body)[1:], bufsize=max(4 * len(body), 16384))
        except zlib.error:
            raise IntegrityError(f"chunk {oid} does not decompress") from None
    if method == COMPRESS_NONE:
        return body[1:]
    raise IntegrityError(f"chunk {oid} has an unknown compression method")


def decode_text(data: bytes, path: MemoryPath) -> str:
    """A file's bytes as text; memory files are UTF-8 by construction."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise IntegrityError(f"{path} is not valid UTF-8") from None


@dataclass(frozen=True)
class ListEntry:
    """One row of a directory listing: path relative to the listed directory, kind, size."""

    relative: str
    kind: str
    size: int


class Snapshot:
    """A read-only view of one committed tree (``root`` None = the empty memory)."""

    def __init__(self, codec: TreeCodec, root: str | None) -> None:
        self.codec = codec
        self.root = root

    def lookup(self, path: MemoryPath) -> Node | None:
        """The node at ``path``, or None; the root always exists."""
        if self.root is None:
            return Node(KIND_DIR, "") if path.is_root else None
        node = Node(KIND_DIR, self.root)
        current = MemoryPath(())
        for name in path.parts:
            if node.kind != KIND_DIR:
                return None
            found = self.codec.find(node.oid, current, name)
            if found is None:
                return None
            node, current = found, current.child(name)
        return node

    def children(self, path: MemoryPath, node: Node) -> Mapping[str, Node]:
        """The entries of directory ``node`` at ``path``."""
        if not node.oid:
            return {}
        return self.codec.load_dir(node.oid, path).nodes

    def read_bytes(self, path: MemoryPath) -> bytes:
        """The content of file ``path``; :class:`NotFound` / :class:`NotAFile` otherwise."""
        node = self.lookup(path)
        if node is None:
            raise NotFound(str(path))
        if node.kind != KIND_FILE:
            raise NotAFile(str(path))
        return self.codec.read_file(node.oid)

    def read_text(self, path: MemoryPath) -> str:
        """The content of file ``path`` as text."""
        return decode_text(self.read_bytes(path), path)

    def listing(self, path: MemoryPath, depth: int = 2) -> list[ListEntry]:
        """Entries up to ``depth`` levels below directory ``path``, as Claude's ``view`` lists.

        Sorted by name within each directory, each directory followed by its contents; names
        starting with ``.`` and ``node_modules`` are left out with everything below them.
        """
        node = self.lookup(path)
        if node is None:
            raise NotFound(str(path))
        if node.kind != KIND_DIR:
            raise NotADirectory(str(path))
        rows: list[ListEntry] = []
        # A stack instead of recursion (as everywhere a tree is walked): depth is the data's.
        stack = self._visible_children(path, node, "", 1)
        while stack:
            # ``child`` is (kind, oid): a Node, or the plain tuple a NodeMap holds (no Node
            # made for each of a big directory's entries; see NodeMap).
            rel, child_path, child, level = stack.pop()
            if child[0] == KIND_DIR:
                rows.append(ListEntry(rel, KIND_DIR, 0))
                if level < depth:
                    below = _as_node(child)
                    stack.extend(self._visible_children(child_path, below, rel + "/", level + 1))
            else:
                rows.append(ListEntry(rel, KIND_FILE, self.codec.file_size(child[1])))
        return rows

    def _visible_children(
        self, path: MemoryPath, node: Node, prefix: str, level: int
    ) -> list[tuple[str, MemoryPath, tuple[str, str], int]]:
        """The listed entries of a directory, last first (the order a stack pops them in)."""
        return [
            (prefix + name, path.child(name), child, level)
            for name, child in sorted(plain_items(self.children(path, node)), reverse=True)
            if not name.startswith(".") and name not in EXCLUDED_NAMES
        ]

    def walk(self, path: MemoryPath = MEMORIES_ROOT) -> Iterator[tuple[MemoryPath, Node]]:
        """Every entry below ``path`` (depth first, sorted), hidden ones included."""
        node = self.lookup(path)
        if node is None or node.kind != KIND_DIR:
            return
        stack = [(path.child(n), c) for n, c in sorted(self.children(path, node).items())][::-1]
        while stack:
            child_path, child = stack.pop()
            yield child_path, child
            if child.kind == KIND_DIR:
                below = sorted(self.children(child_path, child).items(), reverse=True)
                stack.extend((child_path.child(n), c) for n, c in below)

    def files(self) -> dict[MemoryPath, Node]:
        """Every file in the snapshot, by path."""
        return {p: n for p, n in self.walk() if n.kind == KIND_FILE}


def changed_file_nodes(
    before: Snapshot, after: Snapshot, wanted: Sequence[MemoryPath] = ()
) -> list[tuple[MemoryPath, Node | None, Node | None]]:
    """Files that differ between two snapshots, depth first: ``(path, old node, new node)``.

    A side is None where the file does not exist. Subtrees with equal ids are skipped unread.
    With ``wanted``, only files at or below one of those paths count.
    """
    out: list[tuple[MemoryPath, Node | None, Node | None]] = []
    root = MEMORIES_ROOT
    stack = [(root, before.lookup(root), after.lookup(root))]
    while stack:
        path, a, b = stack.pop()
        if wanted and not any(path.is_within(w) or w.is_within(path) for w in wanted):
            continue
        if a is not None and b is not None and a == b:
            continue
        a_dir = a is not None and a.kind == KIND_DIR
        b_dir = b is not None and b.kind == KIND_DIR
        a_file = a if a is not None and not a_dir else None
        b_file = b if b is not None and not b_dir else None
        if (a_file or b_file) and (not wanted or any(path.is_within(w) for w in wanted)):
            out.append((path, a_file, b_file))
        a_children = before.children(path, a) if a is not None and a_dir else {}
        b_children = after.children(path, b) if b is not None and b_dir else {}
        for name in sorted(set(a_children) | set(b_children), reverse=True):
            stack.append((path.child(name), a_children.get(name), b_children.get(name)))
    return out


class _Unloaded(Mapping[str, Node]):
    """The committed entries of a split directory an edit has not needed whole: each name is
    looked up by its sealings (:meth:`TreeCodec.find_sealed`); iterating or counting them
    loads the directory."""

    def __init__(self, codec: TreeCodec, oid: str, path: MemoryPath) -> None:
        self.codec = codec
        self.oid = oid
        self.path = path
        self.loaded: _Loaded | None = None
        # What each name looked up was found as (None: nothing), with its sealed name.
        self.found: dict[str, tuple[Node, str] | None] = {}

    def load(self) -> _Loaded:
        """The whole directory (loaded once)."""
        if self.loaded is None:
            self.loaded = self.codec.load_dir(self.oid, self.path)
        return self.loaded

    def __getitem__(self, name: str) -> Node:
        if self.loaded is not None:
            return self.loaded.nodes[name]
        if name not in self.found:
            self.found[name] = self.codec.find_sealed(self.oid, self.path, name)
        found = self.found[name]
        if found is None:
            raise KeyError(name)
        return found[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self.load().nodes)

    def __len__(self) -> int:
        return len(self.load().nodes)


class _Entries(MutableMapping[str, "Node | _MutDir"]):
    """The entries of a directory being edited: the committed ones (``base``, never copied:
    a big directory's are shared, read-only) under the changes made since it was opened, with
    the names added and removed (so that the fold index of the tree it was opened from stays
    usable)."""

    __slots__ = ("_grown", "added", "base", "changed", "removed", "touched")

    def __init__(self, base: Mapping[str, Node] | None = None) -> None:
        self.base: Mapping[str, Node] = {} if base is None else base
        # The entries set or deleted since (None: deleted).
        self.changed: dict[str, Node | _MutDir | None] = {}
        # Entries added less entries removed: the length is the base's plus this (a base not
        # loaded is counted only if asked).
        self._grown = 0
        self.added: set[str] = set()
        self.removed: set[str] = set()
        # Every name set or deleted: where the entries may differ from the base's.
        self.touched: set[str] = set()

    def __getitem__(self, name: str) -> Node | _MutDir:
        if name in self.changed:
            found = self.changed[name]
            if found is None:
                raise KeyError(name)
            return found
        return self.base[name]

    @overload
    def get(self, name: str, /) -> Node | _MutDir | None: ...
    @overload
    def get(self, name: str, default: Node | _MutDir | _D, /) -> Node | _MutDir | _D: ...
    def get(self, name: str, default: object = None, /) -> object:
        # Not Mapping's: that one raises and catches KeyError for every missing name.
        if name in self.changed:
            found = self.changed[name]
            return default if found is None else found
        return self.base.get(name, default)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self.changed:
            return self.changed[name] is not None
        return name in self.base

    def __iter__(self) -> Iterator[str]:
        changed = self.changed
        yield from (name for name in self.base if name not in changed)
        yield from (name for name, child in changed.items() if child is not None)

    def __len__(self) -> int:
        return len(self.base) + self._grown

    def __setitem__(self, name: str, child: Node | _MutDir) -> None:
        self.touched.add(name)
        if name not in self:
            self._grown += 1
            if name in self.removed:
                self.removed.discard(name)
            else:
                self.added.add(name)
        self.changed[name] = child

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self.changed[name] = None
        self._grown -= 1
        self.touched.add(name)
        if name in self.added:
            self.added.discard(name)
        else:
            self.removed.add(name)


@dataclass
class _MutDir:
    path: MemoryPath
    nodes: _Entries = field(default_factory=_Entries)
    sealed: Mapping[str, str] = field(default_factory=dict)
    # The committed directory this one was opened from (None: a new directory).
    base: _Loaded | None = None
    # A split directory opened without loading it (base None until something needs it).
    unloaded: _Unloaded | None = None

    def load(self) -> None:
        """Make ``base`` and ``sealed`` the whole committed directory's (if it was not loaded)."""
        if self.unloaded is not None and self.base is None:
            self.base = self.unloaded.load()
            self.sealed = self.base.sealed

    def twins(self, name: str) -> list[str]:
        """The entries whose :func:`gitmem.paths.fold_name` key is ``name``'s (``name`` too, if
        present): the base tree's from its fold index, plus those added since."""
        key = paths.fold_name(name)
        found = []
        # Every name of the directory is needed (a new name may fold onto any).
        self.load()
        if self.base is not None:
            found = [n for n in self.base.folded().names.get(key, ()) if n in self.nodes]
        found += [n for n in self.nodes.added if paths.fold_name(n) == key]
        return found

    def fold_index(self) -> _FoldIndex | None:
        """The fold index of the entries as edited, derived from the base tree's when that
        one has been built (None: left to be built if ever needed)."""
        base = None if self.base is None else self.base.fold_index
        if base is None or base.fold is not paths.fold_name:
            return None
        if not (self.nodes.removed or self.nodes.added):
            # The same names (entries pointed at new trees: most writes of a directory above
            # the one written): the same index, not a new object of it.
            return base
        changes: dict[str, tuple[str, ...] | None] = {}

        def current(key: str) -> tuple[str, ...]:
            found = changes[key] if key in changes else base.names.get(key)
            return found or ()

        for name in self.nodes.removed:
            key = base.fold(name)
            changes[key] = tuple(n for n in current(key) if n != name) or None
        for name in self.nodes.added:
            key = base.fold(name)
            changes[key] = (*current(key), name)
        names = evolved(base.names, changes)
        return _FoldIndex(base.fold, names)


class TreeEditor:
    """A mutable copy of a committed tree; :meth:`write` stores the changed trees."""

    def __init__(self, codec: TreeCodec, root: str | None) -> None:
        self.codec = codec
        self._root = self._open(MemoryPath(()), root)

    def _open(self, path: MemoryPath, oid: str | None) -> _MutDir:
        if not oid:
            return _MutDir(path)
        loaded = self.codec.open_dir(oid, path)
        if loaded is None:
            # A split directory: its entries are looked up one by one until an edit needs
            # them all, so that replacing a file in a big directory costs that file's path.
            unloaded = _Unloaded(self.codec, oid, path)
            return _MutDir(path, _Entries(unloaded), unloaded=unloaded)
        return _MutDir(path, _Entries(loaded.nodes), loaded.sealed, loaded)

    def _descend(self, path: MemoryPath, *, create: bool) -> _MutDir | None:
        """The mutable directory at ``path``; missing ones are made when ``create``."""
        current = self._root
        for name in path.parts:
            child = current.nodes.get(name)
            if isinstance(child, _MutDir):
                current = child  # opened already: the common case of every later descent
                continue
            child_path = current.path.child(name)
            if child is None:
                if not create:
                    return None
                child = _MutDir(child_path)
                current.nodes[name] = child
            else:
                if child.kind != KIND_DIR:
                    if create:
                        raise NotADirectory(str(child_path))
                    return None
                child = self._open(child_path, child.oid)
                current.nodes[name] = child
            current = child
        return current

    def kind(self, path: MemoryPath) -> str | None:
        """``f``, ``d`` or None for what is at ``path`` in the edited tree."""
        if path.is_root:
            return KIND_DIR
        parent = self._descend(path.parent, create=False)
        if parent is None:
            return None
        child = parent.nodes.get(path.name)
        if child is None:
            return None
        return KIND_DIR if isinstance(child, _MutDir) else child.kind

    def _entry(self, path: MemoryPath) -> Node | _MutDir | None:
        parent = self._descend(path.parent, create=False)
        return None if parent is None else parent.nodes.get(path.name)

    def file_at(self, path: MemoryPath) -> Node | None:
        """The file node at ``path`` in the edited tree; None if nothing or a directory is there."""
        child = self._entry(path)
        return child if isinstance(child, Node) and child.kind == KIND_FILE else None

    def measure(self, path: MemoryPath, size: Callable[[Node, MemoryPath], int]) -> int:
        """The sum of ``size`` over what is at ``path`` in the edited tree (0: nothing there).

        Entries the edit has not opened are measured whole (``size`` of a directory node is
        its whole subtree's); directories it has opened are measured entry by entry.
        """
        child = self._entry(path)
        total = 0
        # A loop, not recursion: an edited tree may be deeper than Python's recursion limit.
        stack: list[tuple[Node | _MutDir, MemoryPath]] = [] if child is None else [(child, path)]
        while stack:
            item, at = stack.pop()
            if isinstance(item, Node):
                total += size(item, at)
            else:
                stack.extend((c, at.child(n)) for n, c in item.nodes.items())
        return total

    def read_bytes(self, path: MemoryPath) -> bytes:
        """The current content of file ``path`` in the edited tree."""
        child = self._entry(path)
        if child is None:
            raise NotFound(str(path))
        if isinstance(child, _MutDir) or child.kind != KIND_FILE:
            raise NotAFile(str(path))
        return self.codec.read_file(child.oid)

    def file_oid(self, path: MemoryPath) -> str | None:
        """The file tree id of file ``path`` in the edited tree (None when it is no file)."""
        parent = self._descend(path.parent, create=False)
        child = None if parent is None else parent.nodes.get(path.name)
        return child.oid if isinstance(child, Node) and child.kind == KIND_FILE else None

    def ensure_parent(self, path: MemoryPath) -> _MutDir:
        """Make every missing directory above ``path``; a file in the way is
        :class:`NotADirectory`."""
        parent = self._descend(path.parent, create=True)
        assert parent is not None
        return parent

    def put_file(self, path: MemoryPath, data: bytes) -> None:
        """Write ``data`` at ``path``, making parent directories, replacing any file there."""
        parent = self.ensure_parent(path)
        existing = parent.nodes.get(path.name)
        if isinstance(existing, _MutDir) or (existing is not None and existing.kind == KIND_DIR):
            raise PathExists(str(path))
        parent.nodes[path.name] = Node(KIND_FILE, self.codec.write_file(data))

    def graft(self, path: MemoryPath, node: Node) -> None:
        """Put the committed ``node`` at ``path``, where it was committed, replacing any entry.

        Names are sealed with their parent path, so a node is only valid at the path it was
        committed at (a restore's source). Missing parents are made.
        """
        self.ensure_parent(path).nodes[path.name] = node

    def put_dir(self, path: MemoryPath) -> None:
        """Make the directory ``path`` (and its parents) if it does not exist."""
        self._descend(path, create=True)

    def check_new_names(self, path: MemoryPath, moving: MemoryPath | None = None) -> None:
        """Refuse, with :class:`InvalidPath`, a write that would add to the edited tree a name
        :func:`gitmem.paths.check_new_entry` refuses: one of ``path``'s missing components, or
        ``path`` itself. Names already there are not checked (an older store's names stay
        usable). With ``moving`` (a rename's source), the result must also stay within
        :data:`~gitmem.paths.MAX_DEPTH`, and the source is not a sibling that could collide.
        """
        current: _MutDir | None = self._root
        parent = MEMORIES_ROOT
        for name in path.parts:
            child = None if current is None else current.nodes.get(name)
            if current is None or child is None:
                # Only the siblings that fold to the same key can collide: found through the
                # directory's fold index rather than by folding every sibling of a large one.
                siblings = [] if current is None else current.twins(name)
                if moving is not None and moving.parent == parent and moving.name in siblings:
                    siblings.remove(moving.name)
                paths.check_new_entry(parent, name, siblings)
                current = None
            elif isinstance(child, Node) and child.kind != KIND_DIR:
                return  # the write itself reports the file in the way
            else:
                current = self._descend(parent.child(name), create=False)
            parent = parent.child(name)
        if moving is not None:
            height = self.height(moving)
            if len(path.parts) + height > max(paths.MAX_DEPTH, len(moving.parts) + height):
                raise InvalidPath(
                    str(path),
                    f"what it moves would be {len(path.parts) + height} levels deep; new paths "
                    f"may have {paths.MAX_DEPTH}",
                )

    def height(self, path: MemoryPath) -> int:
        """How many levels the deepest entry below ``path`` lies under it (0: a file, an empty
        directory or nothing)."""
        parent = self._descend(path.parent, create=False)
        top = None if parent is None else parent.nodes.get(path.name)
        deepest = 0
        stack: list[tuple[Node | _MutDir, MemoryPath, int]] = []
        if top is not None:
            stack.append((top, path, 0))
        while stack:
            node, at, level = stack.pop()
            deepest = max(deepest, level)
            if isinstance(node, _MutDir):
                below: dict[str, Node | _MutDir] = dict(node.nodes)
            elif node.kind == KIND_DIR:
                below = dict(self.codec.load_dir(node.oid, at).nodes)
            else:
                continue
            stack.extend((child, at.child(name), level + 1) for name, child in below.items())
        return deepest

    def remove(self, path: MemoryPath) -> None:
        """Remove the file or directory at ``path`` (not the root)."""
        parent = self._descend(path.parent, create=False)
        if parent is None or path.name not in parent.nodes:
            raise NotFound(str(path))
        del parent.nodes[path.name]

    def move(self, old: MemoryPath, new: MemoryPath) -> None:
        """Move ``old`` to ``new`` (which must not exist), making ``new``'s parents."""
        parent = self._descend(old.parent, create=False)
        child = None if parent is None else parent.nodes.get(old.name)
        if parent is None or child is None:
            raise NotFound(str(old))
        if isinstance(child, _MutDir):
            oid = self._write(child)
            child = Node(KIND_DIR, oid)
        if child.kind == KIND_DIR:
            child = Node(KIND_DIR, self.codec.reseal_dir(child.oid, old, new))
        del parent.nodes[old.name]
        self.ensure_parent(new).nodes[new.name] = child

    def write(self) -> str:
        """Store every changed directory tree and return the new root tree id."""
        return self._write(self._root)

    def _write(self, top: _MutDir) -> str:
        # Children before parents, without recursion: a tree may be deeper than Python's stack.
        # Only the names an edit touched can differ from the directory it was opened from (a
        # new directory's names are all touched): the work is the edit's, not the directory's.
        written: dict[int, str] = {}
        stack: list[tuple[_MutDir, bool]] = [(top, False)]
        while stack:
            directory, below_done = stack.pop()
            entries = directory.nodes
            if not below_done:
                stack.append((directory, True))
                stack.extend(
                    (child, False)
                    for child in map(entries.get, entries.touched)
                    if isinstance(child, _MutDir)
                )
                continue
            changes: dict[str, Node | None] = {}
            for name in entries.touched:
                child = entries.get(name)
                changes[name] = (
                    Node(KIND_DIR, written.pop(id(child))) if isinstance(child, _MutDir) else child
                )
            replaced = self._replacements(directory, changes)
            if replaced is not None:
                unloaded = directory.unloaded
                assert unloaded is not None
                result = self.codec.replace_entries(unloaded.oid, directory.path, replaced)
                if result is not None:
                    written[id(directory)] = result
                    continue
            directory.load()
            base = directory.base
            nodes = evolved_nodes({} if base is None else base.nodes, changes)
            written[id(directory)] = self.codec.write_dir(
                directory.path,
                nodes,
                directory.sealed,
                directory.fold_index(),
                None if base is None else (base, entries.touched),
            )
        return written[id(top)]

    @staticmethod
    def _replacements(
        directory: _MutDir, changes: Mapping[str, Node | None]
    ) -> dict[str, str | None] | None:
        """For a split directory not loaded whose edit only pointed existing entries at new
        trees of the same kind or removed existing entries: the new tree ids (None: removed)
        by sealed entry name. None otherwise (the directory is then written from its whole
        listing: a new name can change its shape anywhere)."""
        unloaded = directory.unloaded
        if unloaded is None or unloaded.loaded is not None:
            return None
        replaced: dict[str, str | None] = {}
        for name, node in changes.items():
            before = unloaded.found.get(name)
            if before is None or (node is not None and before[0].kind != node.kind):
                return None
            replaced[before[1]] = None if node is None else node.oid
        return replaced
