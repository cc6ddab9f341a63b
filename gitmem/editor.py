"""Editing a copy of a committed memory tree: :class:`TreeEditor`.

An editor opens directories as an edit reaches them (a split directory's entries one name at a
time until an edit needs them all), keeps the changes in memory, and :meth:`TreeEditor.write`
stores only the directory trees the edit touched, through the
:class:`~gitmem.tree.TreeCodec`. Nothing is written to the repository before ``write``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TypeVar, overload

from . import paths
from .errors import InvalidPath, NotADirectory, NotAFile, NotFound, PathExists
from .format import KIND_DIR, KIND_FILE
from .paths import MEMORIES_ROOT, MemoryPath
from .shardmap import evolved
from .tree import FoldIndex, LoadedDir, Node, TreeCodec, evolved_nodes

_D = TypeVar("_D")


class _Unloaded(Mapping[str, Node]):
    """The committed entries of a split directory an edit has not needed whole: each name is
    looked up by its sealings (:meth:`TreeCodec.find_sealed`); iterating or counting them
    loads the directory."""

    def __init__(self, codec: TreeCodec, oid: str, path: MemoryPath) -> None:
        self.codec = codec
        self.oid = oid
        self.path = path
        self.loaded: LoadedDir | None = None
        # What each name looked up was found as (None: nothing), with its sealed name.
        self.found: dict[str, tuple[Node, str] | None] = {}

    def load(self) -> LoadedDir:
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
    base: LoadedDir | None = None
    # A split directory opened without loading it (base None until something needs it).
    unloaded: _Unloaded | None = None

    def load(self) -> None:
        """Make ``base`` and ``sealed`` the whole committed directory's (if it was not loaded)."""
        if self.unloaded is not None and self.base is None:
            self.base = self.unloaded.load()
            self.sealed = self.base.sealed

    def twins(self, name: str) -> list[str]:
        """The entries whose :func:`gitmem.paths.twin_key` key is ``name``'s (``name`` too, if
        present): the base tree's from its fold index, plus those added since."""
        key = paths.twin_key(name)
        found = []
        # Every name of the directory is needed (a new name may fold onto any).
        self.load()
        if self.base is not None:
            found = [n for n in self.base.folded().names.get(key, ()) if n in self.nodes]
        found += [n for n in self.nodes.added if paths.twin_key(n) == key]
        return found

    def fold_index(self) -> FoldIndex | None:
        """The fold index of the entries as edited, derived from the base tree's when that
        one has been built (None: left to be built if ever needed)."""
        base = None if self.base is None else self.base.fold_index
        if base is None or base.fold is not paths.twin_key:
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
        return FoldIndex(base.fold, names)


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
        previous = existing.oid if existing is not None else None
        parent.nodes[path.name] = Node(KIND_FILE, self.codec.write_file(data, previous))
        if existing is not None:
            # Each write adds its version's size: the one it replaces goes, so a process that
            # keeps rewriting files keeps as many sizes as there are files.
            self.codec.forget_size(existing.oid)

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
        removed = parent.nodes.pop(path.name)
        if isinstance(removed, Node) and removed.kind == KIND_FILE:
            self.codec.forget_size(removed.oid)

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
