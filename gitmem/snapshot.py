"""Reading one committed memory tree by path: lookups, file contents, listings, walks.

A :class:`Snapshot` holds a root tree id and a :class:`~gitmem.tree.TreeCodec`; every entry it
returns was authenticated by the codec as it was read. :func:`changed_file_nodes` compares two
snapshots without reading the subtrees they share.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from .errors import IntegrityError, NotADirectory, NotAFile, NotFound
from .format import KIND_DIR, KIND_FILE
from .paths import MEMORIES_ROOT, MemoryPath
from .tree import EXCLUDED_NAMES, Node, TreeCodec, as_node, plain_items


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
                    below = as_node(child)
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
