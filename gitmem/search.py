"""Searching the memory and its history: ``gitmem grep`` (lines that match, at one revision) and
``gitmem log -S``/``-G`` (the operations where a text was learned or forgotten), as git's
``grep`` and pickaxe do.

Patterns are Python regular expressions (:mod:`re`). The pickaxe decrypts only the files an
operation changed, in the two versions it compares, and each version once per call: a file's
git tree id names its content, so what was measured of one id holds wherever it appears.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import NotFound, UsageError, shown_repr
from .format import KIND_DIR, KIND_FILE
from .history import FileChange, log, text_lines
from .paths import MEMORIES_ROOT, MemoryPath, MemoryPathLike, as_paths
from .snapshot import Snapshot, changed_file_nodes, decode_text
from .store import MemoryStore, Operation
from .tree import Node


def compile_pattern(
    pattern: str, *, fixed_strings: bool = False, ignore_case: bool = False
) -> re.Pattern[str]:
    """``pattern`` as a compiled Python regular expression (``fixed_strings``: matching itself
    literally); one that does not compile is a :class:`UsageError` saying why."""
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, not {type(pattern).__name__}")
    source = re.escape(pattern) if fixed_strings else pattern
    try:
        return re.compile(source, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        where = "" if exc.pos is None else f" at position {exc.pos}"
        raise UsageError(
            f"invalid regular expression {shown_repr(pattern)}: {exc.msg}{where} (patterns are "
            "Python regular expressions; -F matches the text as it is)"
        ) from None


def _compiled(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        if not isinstance(pattern.pattern, str):
            raise TypeError("the pattern must match text (str), not bytes")
        return pattern
    return compile_pattern(pattern)


# -- grep -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GrepMatch:
    """Line ``line`` (1-based) of file ``path``, whose ``text`` matched."""

    path: str
    line: int
    text: str

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form: path, line, text."""
        return {"path": self.path, "line": self.line, "text": self.text}


def grep(
    store: MemoryStore,
    pattern: str | re.Pattern[str],
    rev: str | None = None,
    *,
    paths: Iterable[MemoryPathLike] = (),
) -> Iterator[GrepMatch]:
    """The lines of the memory at ``rev`` (default: the head) that ``pattern`` matches, file by
    file in path order (hidden files included), each file's in line order.

    ``pattern`` is a regular expression (a str is compiled by :func:`compile_pattern`). With
    ``paths``, only files at or below one of them; a path that does not exist at ``rev`` is
    :class:`NotFound`, raised before any match is yielded.
    """
    compiled = _compiled(pattern)
    snapshot = store.snapshot(rev)
    wanted = as_paths(paths)
    roots: list[tuple[MemoryPath, Node]] = []
    for path in wanted or [MEMORIES_ROOT]:
        node = snapshot.lookup(path)
        if node is None:
            raise NotFound(f"{path} does not exist" + ("" if rev is None else f" at {rev}"))
        roots.append((path, node))
    return _grep(store, snapshot, compiled, roots)


def _grep(
    store: MemoryStore,
    snapshot: Snapshot,
    pattern: re.Pattern[str],
    roots: list[tuple[MemoryPath, Node]],
) -> Iterator[GrepMatch]:
    files: dict[MemoryPath, Node] = {}
    for path, node in roots:
        if node.kind == KIND_DIR:
            files.update((p, n) for p, n in snapshot.walk(path) if n.kind == KIND_FILE)
        else:
            files[path] = node
    for path in sorted(files, key=lambda p: p.parts):
        text = decode_text(store.codec.read_file(files[path].oid), path)
        for number, line in enumerate(text_lines(text), 1):
            if pattern.search(line):
                yield GrepMatch(str(path), number, line)


# -- the pickaxe ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PickaxeHit:
    """An operation the pickaxe found, and its ``changes``: only the files that matched."""

    operation: Operation
    changes: list[FileChange]


def pickaxe(
    store: MemoryStore,
    rev: str | None = None,
    *,
    text: str | None = None,
    regex: str | re.Pattern[str] | None = None,
    paths: Iterable[MemoryPathLike] = (),
    session: str | None = None,
    command: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    max_count: int | None = None,
    first_parent: bool = False,
) -> Iterator[PickaxeHit]:
    """Operations reachable from ``rev``, newest first, whose change matches, as git's pickaxe.

    Give one of ``text`` (``git log -S``: the operation changed how many times ``text`` occurs
    in some file: it was learned there, or forgotten) and ``regex`` (``git log -G``: the diff
    of some file adds or removes a line the regular expression matches). A file that only
    moved changes neither; merges (``merge``, which join two histories whose operations are
    walked too) are left out, as git leaves them out. The other filters are
    :func:`gitmem.history.log`'s; ``max_count`` counts the operations found.
    """
    if (text is None) == (regex is None):
        raise UsageError("give one of text (-S) and regex (-G)")
    if text is not None:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        if not text:
            raise UsageError("give the text to look for: -S with an empty text matches nothing")
    if max_count is not None and max_count < 0:
        raise UsageError(f"max_count must be 0 or more, not {max_count}")
    compiled = _compiled(regex) if regex is not None else None
    # Raises at once for a bad filter, as log does.
    ops = log(
        store,
        rev,
        paths=paths,
        session=session,
        command=command,
        since=since,
        until=until,
        first_parent=first_parent,
    )
    return _pickaxe(store, ops, _Measure(store, text, compiled), max_count)


def _pickaxe(
    store: MemoryStore, ops: Iterator[Operation], measure: _Measure, max_count: int | None
) -> Iterator[PickaxeHit]:
    found = 0
    if max_count == 0:
        return
    for op in ops:
        if len(op.parents) > 1:
            continue
        parent = store.repo.read_commit(op.parents[0]).tree if op.parents else None
        changes = [c for c in _file_changes(store, parent, op.tree) if measure.matches(c)]
        if changes:
            yield PickaxeHit(op, [c.change(store) for c in changes])
            found += 1
            if max_count is not None and found >= max_count:
                return


@dataclass(frozen=True)
class _Pair:
    """A file's two versions in one operation (None: absent); a moved file is no pair."""

    path: MemoryPath
    before: str | None
    after: str | None

    def change(self, store: MemoryStore) -> FileChange:
        def text(oid: str | None) -> str | None:
            return None if oid is None else decode_text(store.codec.read_file(oid), self.path)

        status = "added" if self.before is None else "deleted" if self.after is None else ""
        return FileChange(status or "modified", str(self.path), text(self.before), text(self.after))


def _file_changes(store: MemoryStore, old_tree: str | None, new_tree: str | None) -> list[_Pair]:
    """The files that differ between two trees, without the ones that only moved: a file gone
    from one path whose content appeared at another is a rename, paired as
    :func:`gitmem.history.diff_trees` pairs them."""
    nodes = changed_file_nodes(Snapshot(store.codec, old_tree), Snapshot(store.codec, new_tree))
    gone: dict[str, list[MemoryPath]] = {}
    came: dict[str, list[MemoryPath]] = {}
    for path, a, b in nodes:
        if a is not None and b is None:
            gone.setdefault(a.oid, []).append(path)
        elif a is None and b is not None:
            came.setdefault(b.oid, []).append(path)
    moved: set[MemoryPath] = set()
    for oid, sources in gone.items():
        targets = sorted(came.get(oid, []))
        pairs = min(len(sources), len(targets))
        moved.update(sorted(sources)[:pairs])
        moved.update(targets[:pairs])
    return [
        _Pair(path, None if a is None else a.oid, None if b is None else b.oid)
        for path, a, b in nodes
        if path not in moved
    ]


class _Measure:
    """Whether a file's change matches, with what is measured of each version kept by tree id
    for the call: an operation's new version is usually the next one's old version."""

    def __init__(self, store: MemoryStore, text: str | None, regex: re.Pattern[str] | None):
        self.store = store
        self.text = text
        self.regex = regex
        self.known: dict[str, int | Counter[str]] = {}

    def _of(self, oid: str | None, path: MemoryPath) -> int | Counter[str]:
        if oid is None:
            return 0 if self.text is not None else Counter()
        known = self.known.get(oid)
        if known is None:
            content = decode_text(self.store.codec.read_file(oid), path)
            if self.text is not None:
                known = content.count(self.text)
            else:
                assert self.regex is not None
                known = Counter(line for line in text_lines(content) if self.regex.search(line))
            self.known[oid] = known
        return known

    def matches(self, pair: _Pair) -> bool:
        before, after = self._of(pair.before, pair.path), self._of(pair.after, pair.path)
        if self.text is not None or before != after:
            return before != after
        # The same matching lines on both sides: a diff may still remove one and add it back
        # elsewhere (a moved line), which git's -G shows; only the diff itself can tell.
        if not before:
            return False
        assert self.regex is not None
        diff = pair.change(self.store).diff_lines()
        return any(
            line[:1] in "+-" and self.regex.search(line[1:])
            for line in diff
            if line and not line.startswith("@@")
        )


__all__ = ["GrepMatch", "PickaxeHit", "compile_pattern", "grep", "pickaxe"]
