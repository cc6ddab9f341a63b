"""Merging two divergent heads of one store, path by path and line by line, losing nothing.

A file both sides changed is merged line by line; where that conflicts, each side's exact edits
are applied together (neighbouring lines ticked on two machines both stay ticked); only edits
of the same text on both sides make a conflict sibling.

The merge works on decrypted text in memory and writes its result through the tree codec like
any other write, so plaintext never reaches the object database. The rules (``docs/design.md``,
"Merge commits") depend only on the three states and the two head ids, never on which side is
local, so replicas that merge the same heads get the same tree and converge.
"""

from __future__ import annotations

import difflib
import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from merge3 import Merge3

from .editor import TreeEditor
from .format import KIND_DIR, KIND_FILE
from .paths import MemoryPath, name_clash, twin_key
from .snapshot import Snapshot, decode_text
from .tree import Node, TreeCodec


class _Op(Protocol):
    @property
    def commit(self) -> str: ...
    @property
    def parents(self) -> tuple[str, ...]: ...
    @property
    def seq(self) -> int: ...
    @property
    def tree(self) -> str: ...


def merge_base(ours: _Op, theirs: _Op, operation: Callable[[str], _Op]) -> _Op | None:
    """The common ancestor of greatest sequence number (ties: the smaller id), or None.

    Walks authenticated operations from both heads, highest ``seq`` first: every child has a
    higher ``seq`` than its parents, so when a commit is popped every path to it from either
    head has been seen, and the first commit reached from both sides is a best common ancestor.
    """
    flags: dict[str, int] = {ours.commit: 1}
    flags[theirs.commit] = flags.get(theirs.commit, 0) | 2
    ops = {ours.commit: ours, theirs.commit: theirs}
    heap = [(-op.seq, op.commit) for op in ops.values()]
    heapq.heapify(heap)
    found: _Op | None = None
    popped: set[str] = set()
    while heap:
        neg_seq, oid = heapq.heappop(heap)
        if oid in popped:
            continue
        popped.add(oid)
        if found is not None and -neg_seq < found.seq:
            break
        if flags[oid] == 3:
            # Equal seq pops in id order, so the first found is the smaller id.
            if found is None:
                found = ops[oid]
            continue
        for parent in ops[oid].parents:
            if parent not in ops:
                ops[parent] = operation(parent)
            flags[parent] = flags.get(parent, 0) | flags[oid]
            heapq.heappush(heap, (-ops[parent].seq, parent))
    return found


@dataclass
class MergeResult:
    """The merged root tree and what the merge commit's record says about it."""

    tree: str
    conflicts: list[dict[str, str]] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)

    def detail(self, merged: _Op, base: _Op | None) -> dict[str, Any]:
        """The ``detail`` of the merge record (``docs/design.md``, "Merge commits")."""
        return {
            "merged": merged.commit,
            "merged_seq": merged.seq,
            "base": None if base is None else base.commit,
            "conflicts": self.conflicts,
            "kept": self.kept,
        }


def sibling_name(name: str, commit: str, taken: Callable[[str], bool]) -> str:
    """``notes.md`` -> ``notes.conflict-<12 hex of commit>.md``, numbered if that is taken."""
    dot = name.rfind(".")
    stem, suffix = (name[:dot], name[dot:]) if dot > 0 else (name, "")
    tag = f".conflict-{commit[:12]}"
    # Keep within a component's 255 bytes: shorten the stem, never the tag.
    room = 255 - len((tag + suffix).encode("utf-8")) - 4
    while len(stem.encode("utf-8")) > room:
        stem = stem[:-1]
    candidate, number = f"{stem}{tag}{suffix}", 2
    while taken(candidate):
        candidate, number = f"{stem}{tag}-{number}{suffix}", number + 1
    return candidate


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def merge_text(base: str, first: str, second: str) -> str | None:
    """The three-way line merge of two edits of ``base``, or None on any conflicting region."""
    out: list[str] = []
    for group in Merge3(_lines(base), _lines(first), _lines(second)).merge_groups():
        if group[0] == "conflict":
            return None
        out.extend(group[1])
    return "".join(out)


@dataclass(frozen=True, order=True)
class _Edit:
    """One exact edit of the base's lines: ``base[start:end]`` becomes ``lines``."""

    start: int
    end: int
    side: int
    lines: tuple[str, ...]


def _edits(base: list[str], text: list[str], side: int) -> list[_Edit]:
    matcher = difflib.SequenceMatcher(None, base, text, autojunk=False)
    return [
        _Edit(i1, i2, side, tuple(text[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _clash(one: _Edit, other: _Edit) -> bool:
    """Whether two edits change the same base text (or one inserts inside the other's)."""
    if max(one.start, other.start) < min(one.end, other.end):
        return True
    for insert, edit in ((one, other), (other, one)):
        if insert.start == insert.end and edit.start < insert.start < edit.end:
            return True
    return False


def merge_edits(base: str, first: str, second: str) -> str | None:
    """Both sides' exact edits of ``base`` applied together, with no context lines, or None
    where an edit of one side changes text the other side changed too.

    A memory command is an exact edit (one line ticked, lines inserted after line N), so two
    edits of neighbouring lines, which a line merge calls a conflict, both apply. Insertions at
    the same place are both kept, ``first``'s first; an edit made identically on both sides
    is made once.
    """
    base_lines = _lines(base)
    mine, theirs = _edits(base_lines, _lines(first), 0), _edits(base_lines, _lines(second), 1)
    same = {(e.start, e.end, e.lines) for e in mine}
    theirs = [e for e in theirs if (e.start, e.end, e.lines) not in same]
    if any(_clash(one, other) for one in mine for other in theirs):
        return None
    out: list[str] = []
    at = 0
    # Insertions before a replacement that starts where they insert; the first side first.
    for edit in sorted(mine + theirs, key=lambda e: (e.start, e.end > e.start, e.side)):
        out.extend(base_lines[at : edit.start])
        out.extend(edit.lines)
        at = edit.end
    out.extend(base_lines[at:])
    return "".join(out)


def merge_trees(codec: TreeCodec, base: _Op | None, ours: _Op, theirs: _Op) -> MergeResult:
    """Merge ``theirs`` into ``ours`` over ``base``; the result is the same either way round."""
    first, second = sorted((ours, theirs), key=lambda op: op.commit)
    snaps = [Snapshot(codec, None if s is None else s.tree) for s in (base, first, second)]
    files = [s.files() for s in snaps]
    dirs = [{p for p, n in s.walk() if n.kind == KIND_DIR and not p.is_root} for s in snaps]
    b_files, a_files, c_files = files
    result: dict[MemoryPath, Node | bytes] = {}
    moved: list[tuple[MemoryPath, Node | bytes, str]] = []  # to a sibling: content and kind
    outcome = MergeResult("")

    def text_of(node: Node, path: MemoryPath) -> str:
        return decode_text(codec.read_file(node.oid), path)

    for path in sorted(set(b_files) | set(a_files) | set(c_files)):
        b, a, c = b_files.get(path), a_files.get(path), c_files.get(path)
        b_oid, a_oid, c_oid = (None if n is None else n.oid for n in (b, a, c))
        if a_oid == c_oid or c_oid == b_oid:
            if a is not None:
                result[path] = a
        elif a_oid == b_oid:
            if c is not None:
                result[path] = c
        elif a is None or c is None:
            # One side deleted what the other edited: the edit is kept.
            result[path] = c if a is None else a  # type: ignore[assignment]
            outcome.kept.append({"path": str(path), "kind": "edit-kept"})
        else:
            merged = None
            if b is not None:
                texts = [text_of(n, path) for n in (b, a, c)]
                merged = merge_text(*texts)
                if merged is None:
                    merged = merge_edits(*texts)
            if merged is not None:
                result[path] = merged.encode("utf-8")
            else:
                result[path] = a
                moved.append((path, c, "added-both" if b is None else "changed-both"))

    kept_dirs = {
        d
        for d in dirs[1] | dirs[2]
        if not (d in dirs[0] and (d not in dirs[1] or d not in dirs[2]))
    }
    for path in list(result):
        kept_dirs.update(p for p in _ancestors(path))
    # A file where the other side has a directory moves aside; the directory stays.
    for path in sorted(p for p in result if p in kept_dirs):
        moved.append((path, result.pop(path), "file-vs-directory"))

    # A name beside which the other side added its case twin or look-alike: the second side's
    # name moves aside, as a write would have refused it (a directory with all it holds).
    a_names, c_names = set(a_files) | dirs[1], set(c_files) | dirs[2]
    for path in _clashing_names(set(result) | kept_dirs, a_names, c_names):
        if path in result:
            moved.append((path, result.pop(path), "twin-name"))
            continue

        in_use = {str(p) for p in result} | {str(p) for p in kept_dirs}

        def dir_taken(name: str, parent: MemoryPath = path.parent, used: set[str] = in_use) -> bool:
            return str(parent.child(name)) in used

        aside = path.parent.child(sibling_name(path.name, second.commit, dir_taken))
        kept_dirs = {_rebase(d, path, aside) for d in kept_dirs}
        result = {_rebase(p, path, aside): content for p, content in result.items()}
        outcome.conflicts.append({"path": str(path), "sibling": str(aside), "kind": "twin-name"})

    occupied = {str(p) for p in result} | {str(p) for p in kept_dirs}
    for path, content, kind in moved:
        side = (
            second if kind != "file-vs-directory" else _owner(path, a_files, c_files, first, second)
        )
        parent = path.parent

        def taken(name: str, parent: MemoryPath = parent) -> bool:
            return str(parent.child(name)) in occupied

        name = sibling_name(path.name, side.commit, taken)
        target = parent.child(name)
        occupied.add(str(target))
        result[target] = content
        outcome.conflicts.append({"path": str(path), "sibling": str(target), "kind": kind})

    editor = TreeEditor(codec, None)
    for directory in sorted(kept_dirs, key=lambda p: len(p.parts)):
        editor.put_dir(directory)
    for path, content in sorted(result.items()):
        if isinstance(content, bytes):
            editor.put_file(path, content)
        else:
            editor.ensure_parent(path).nodes[path.name] = Node(KIND_FILE, content.oid)
    outcome.tree = editor.write()
    outcome.conflicts.sort(key=lambda c: (c["path"], c["sibling"]))
    return outcome


def _clashing_names(
    names: set[MemoryPath], a_names: set[MemoryPath], c_names: set[MemoryPath]
) -> list[MemoryPath]:
    """The names of the merged tree to move aside, so that it adds no pair of siblings that
    :func:`gitmem.paths.name_clash` refuses (pairs one side already held stay). In each
    directory, names are taken in order: the first side's, then the second's, then by name; one
    that clashes with a name taken before it moves aside, outermost directories first."""
    out: list[MemoryPath] = []
    by_key: dict[tuple[MemoryPath, str], list[MemoryPath]] = {}
    for path in sorted(names, key=lambda p: (len(p.parts), p not in a_names, p.parts)):
        if any(path.is_within(moved) for moved in out):
            continue  # moves with its directory
        kept = by_key.setdefault((path.parent, twin_key(path.name)), [])
        if any(
            name_clash(path.name, other.name) is not None
            and not ({path, other} <= a_names or {path, other} <= c_names)
            for other in kept
        ):
            out.append(path)
        else:
            kept.append(path)
    return out


def _rebase(path: MemoryPath, old: MemoryPath, new: MemoryPath) -> MemoryPath:
    """``path`` with its prefix ``old`` (a directory) replaced by ``new``."""
    if path != old and not path.is_within(old):
        return path
    for part in path.parts[len(old.parts) :]:
        new = new.child(part)
    return new


def _ancestors(path: MemoryPath) -> list[MemoryPath]:
    out, current = [], path.parent
    while not current.is_root:
        out.append(current)
        current = current.parent
    return out


def _owner(
    path: MemoryPath,
    a_files: dict[MemoryPath, Node],
    c_files: dict[MemoryPath, Node],
    first: _Op,
    second: _Op,
) -> _Op:
    """The side whose file at ``path`` collided with a directory (for the sibling's tag)."""
    return first if path in a_files else second
