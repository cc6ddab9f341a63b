"""The memory's history as a person audits it: filtered logs, diffs, blame, sessions and restore
previews. Each ``gitmem`` audit command is one call here; the moves in and out of plain files
(export, import) are :mod:`gitmem.transfer`'s, and their names are re-exported here.

Everything reads through :class:`~gitmem.store.MemoryStore`, so every commit is authenticated
before anything it says is used. Diffs are of files only (directories have no content), and a
file that moved without changing is recognised exactly: a file's git tree does not depend on
its name, so the same tree id at a new path is a rename.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from . import paths as memory_paths
from .errors import (
    InvalidPath,
    NotAFile,
    NotFound,
    UsageError,
    shown,
    shown_int,
    shown_list,
    shown_repr,
)
from .format import KIND_FILE
from .paths import MEMORIES_ROOT, MemoryPath, MemoryPathLike, as_path, as_paths
from .revisions import check_moment
from .snapshot import Snapshot, changed_file_nodes, decode_text
from .store import MemoryStore, Operation, same_memory

# Export and import, by the names they had when they lived here (``gitmem.history.export``).
from .transfer import ExportSummary as ExportSummary
from .transfer import ImportPlan as ImportPlan
from .transfer import ImportRefused as ImportRefused
from .transfer import Progress as Progress
from .transfer import export as export
from .transfer import import_ as import_
from .transfer import scan_import as scan_import
from .tree import Node
from .view import view_text


def iso_time(moment: datetime) -> str:
    """``moment`` as ISO 8601 in UTC with a ``Z``, as every JSON ``time`` field is written."""
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


# -- log ------------------------------------------------------------------------------------


def _related(a: MemoryPath, b: MemoryPath) -> bool:
    return a.is_within(b) or b.is_within(a)


def _parse_recorded(raw: str) -> MemoryPath | None:
    try:
        return memory_paths.parse(raw)
    except InvalidPath:
        return None


def _follow(op: Operation, tracked: list[MemoryPath]) -> tuple[bool, list[MemoryPath]]:
    """Whether ``op`` touched a tracked path, and the tracked paths as they were before it."""
    recorded = [p for p in map(_parse_recorded, op.paths) if p is not None]
    touched = any(_related(p, t) for p in recorded for t in tracked)
    if op.command != "rename" or len(recorded) != 2:
        return touched, tracked
    old, new = recorded
    before: list[MemoryPath] = []
    for t in tracked:
        if t.is_within(new):
            before.append(MemoryPath(old.parts + t.parts[len(new.parts) :]))
        else:
            before.append(t)
            if new.is_within(t) and old not in before:
                before.append(old)  # what moved into a tracked directory brings its history
    return touched, before


COMMANDS = (
    "create",
    "str_replace",
    "insert",
    "delete",
    "rename",
    "restore",
    "import",
    "expire",
    "keys",
    "merge",
    "redact",
)
"""Every command an operation's record can name (``merge``: a pull or sync joining histories;
``redact``: a redaction, on the history it rewrote)."""


def log(
    store: MemoryStore,
    rev: str | None = None,
    *,
    paths: Iterable[MemoryPathLike] = (),
    session: str | None = None,
    command: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    max_count: int | None = None,
    first_parent: bool = False,
) -> Iterator[Operation]:
    """Operations reachable from ``rev`` (default: the head), newest first, filtered.

    Newest first is by recorded time, never a parent before its child (see
    :meth:`MemoryStore.log`); ``first_parent`` follows only each merge's first parent.

    ``paths`` keeps operations touching one of them (or anything below or above them) and
    follows renames: before an operation that moved a tracked path (or moved something into a
    tracked directory), the old name is tracked.
    ``since``/``until`` bound the recorded time (both inclusive); ``max_count`` stops after
    that many matches (a negative one is a :class:`UsageError`). Streams: nothing waits for the
    end of the history.

    A filter that can match nothing is a :class:`UsageError`, as in a revision: a ``command``
    that is not one of :data:`COMMANDS` (raised at once), and a ``session`` with no operation
    reachable from ``rev`` (raised when the walk ends having found none).
    """
    if command is not None and command not in COMMANDS:
        raise UsageError(f"unknown command {shown_repr(command)}: one of {', '.join(COMMANDS)}")
    if max_count is not None and max_count < 0:
        raise UsageError(f"max_count must be 0 or more, not {shown_int(max_count)}")
    since = None if since is None else check_moment("since", since)
    until = None if until is None else check_moment("until", until)
    ops = store.log(rev, first_parent=first_parent)
    return _log(ops, as_paths(paths), session, command, since, until, max_count)


def _log(
    ops: Iterator[Operation],
    tracked: list[MemoryPath],
    session: str | None,
    command: str | None,
    since: datetime | None,
    until: datetime | None,
    max_count: int | None,
) -> Iterator[Operation]:
    if max_count is not None and max_count <= 0:
        return
    shown = 0
    session_seen = session is None
    for op in ops:
        session_seen = session_seen or op.session == session
        if tracked:
            touched, tracked = _follow(op, tracked)
            if not touched:
                continue
        if session is not None and op.session != session:
            continue
        if command is not None and op.command != command:
            continue
        when = op.record.time
        if (since is not None and when < since) or (until is not None and when > until):
            continue
        yield op
        shown += 1
        if max_count is not None and shown >= max_count:
            return
    if not session_seen:
        raise UsageError(f"no operation of session {shown_repr(session)}")


# -- diffs ----------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


@dataclass
class FileChange:
    """One file's change between two memory states.

    ``status`` is ``added``, ``deleted``, ``modified`` or ``renamed`` (same content, new path;
    ``old_path`` is where it was). ``before``/``after`` are the texts (None when absent).
    """

    status: str
    path: str
    before: str | None
    after: str | None
    old_path: str | None = None
    _counts: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    _diff: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def diff_lines(self) -> list[str]:
        """The unified diff of the content (3 lines of context), without file headers."""
        # Kept: the line counts, the patch and a report all read it, and on a long file the
        # diff is most of what listing a change costs.
        if self._diff is None:
            self._diff = tuple(self._unified_diff())
        return list(self._diff)

    def _unified_diff(self) -> list[str]:
        old = _lines(self.before or "")
        new = _lines(self.after or "")
        out: list[str] = []
        diff = difflib.unified_diff(old, new, lineterm="\n", n=3)
        for index, line in enumerate(diff):
            if index < 2:
                continue  # the ---/+++ lines; the caller writes its own
            if line.endswith("\n"):
                out.append(line[:-1])
            else:
                out.extend([line, "\\ No newline at end of file"])
        return out

    @property
    def added(self) -> int:
        """Lines added."""
        return self._line_counts()[0]

    @property
    def removed(self) -> int:
        """Lines removed."""
        return self._line_counts()[1]

    def _line_counts(self) -> tuple[int, int]:
        if self._counts is None:
            body = [line for line in self.diff_lines() if not line.startswith("@@")]
            self._counts = (
                sum(1 for line in body if line.startswith("+")),
                sum(1 for line in body if line.startswith("-")),
            )
        return self._counts

    def patch_lines(self) -> list[str]:
        """The change as a patch: a ``diff`` header, the status, ``---``/``+++`` and hunks."""
        if self.status == "renamed":
            head = [f"diff {self.old_path} -> {self.path}"]
            head += [f"rename from {self.old_path}", f"rename to {self.path}"]
        else:
            head = [f"diff {self.path}"]
        if self.status == "added":
            head.append("new file")
        elif self.status == "deleted":
            head.append("deleted file")
        hunks = self.diff_lines()
        if not hunks:
            return head
        old_name = "/dev/null" if self.before is None else (self.old_path or self.path)
        new_name = "/dev/null" if self.after is None else self.path
        return [*head, f"--- {old_name}", f"+++ {new_name}", *hunks]

    def to_json(self, *, with_diff: bool = False) -> dict[str, Any]:
        """The documented JSON form: status, path, old_path, added, removed (and diff)."""
        body: dict[str, Any] = {
            "status": self.status,
            "path": self.path,
            "old_path": self.old_path,
            "added": self.added,
            "removed": self.removed,
        }
        if with_diff:
            body["diff"] = "".join(line + "\n" for line in self.patch_lines())
        return body


def diff_trees(
    store: MemoryStore,
    old_tree: str | None,
    new_tree: str | None,
    paths: Iterable[MemoryPathLike] = (),
) -> list[FileChange]:
    """The file changes from tree ``old_tree`` to ``new_tree`` (None = empty), sorted by path.

    With ``paths``, only files at or below one of them count. A file that disappeared at one
    path and appeared unchanged at another is one ``renamed`` change.
    """
    before, after = Snapshot(store.codec, old_tree), Snapshot(store.codec, new_tree)
    nodes = changed_file_nodes(before, after, as_paths(paths))
    gone = {path: a for path, a, b in nodes if a is not None and b is None}
    came = {path: b for path, a, b in nodes if a is None and b is not None}
    renamed_from: dict[MemoryPath, MemoryPath] = {}
    by_content: dict[str, list[MemoryPath]] = {}
    for path, node in sorted(gone.items()):
        by_content.setdefault(node.oid, []).append(path)
    for path, node in sorted(came.items()):
        sources = by_content.get(node.oid)
        if sources:
            renamed_from[path] = sources.pop(0)
    moved = set(renamed_from.values())

    def text(node: Node | None, path: MemoryPath) -> str | None:
        return None if node is None else decode_text(store.codec.read_file(node.oid), path)

    changes: list[FileChange] = []
    for path, a, b in nodes:
        if path in moved:
            continue
        if path in renamed_from:
            content = text(b, path)
            old = str(renamed_from[path])
            changes.append(FileChange("renamed", str(path), content, content, old_path=old))
        elif a is None:
            changes.append(FileChange("added", str(path), None, text(b, path)))
        elif b is None:
            changes.append(FileChange("deleted", str(path), text(a, path), None))
        else:
            changes.append(FileChange("modified", str(path), text(a, path), text(b, path)))
    return changes


def _tree_of(store: MemoryStore, rev: str | None) -> str | None:
    if rev is None:
        head = store.head_operation()
        return None if head is None else head.tree
    return store.operation(rev).tree


def diff(
    store: MemoryStore,
    rev: str,
    rev2: str | None = None,
    paths: Iterable[MemoryPathLike] = (),
) -> list[FileChange]:
    """The file changes from ``rev`` to ``rev2`` (default: the head)."""
    return diff_trees(store, _tree_of(store, rev), _tree_of(store, rev2), paths)


def changes(
    store: MemoryStore, op: Operation, paths: Iterable[MemoryPathLike] = ()
) -> list[FileChange]:
    """What operation ``op`` changed: its tree against its first parent's."""
    parent = store.repo.read_commit(op.parents[0]).tree if op.parents else None
    return diff_trees(store, parent, op.tree, paths)


def operation_json(
    store: MemoryStore, op: Operation, *, stat: bool = False, patch: bool = False
) -> dict[str, Any]:
    """``op`` in its documented JSON form; with ``stat`` or ``patch``, plus its ``changes``
    (each with its ``diff`` when ``patch``), as ``gitmem log --json`` and ``show --json`` print.
    """
    body = op.to_json()
    if stat or patch:
        body["changes"] = [c.to_json(with_diff=patch) for c in changes(store, op)]
    return body


# -- reading one file -----------------------------------------------------------------------


def view(
    store: MemoryStore,
    path: MemoryPathLike,
    rev: str | None = None,
    view_range: Sequence[int] = (),
) -> str:
    """Exactly the text Claude's ``view`` returns for ``path`` (at ``rev``, default: the head).

    A path that is not allowed is :class:`InvalidPath`; a missing one is :class:`NotFound`
    carrying the tool's message, as is any other refusal (a :class:`GitMemError`).
    """
    target = as_path(path)
    shown = path if isinstance(path, str) else str(path)
    snapshot = store.snapshot(rev)
    return view_text(snapshot, shown, target, list(view_range) or None, store.limits.max_view_chars)


def cat(store: MemoryStore, path: MemoryPathLike, rev: str | None = None) -> str:
    """The raw text of file ``path`` at ``rev`` (default: the head)."""
    path = as_path(path)
    snapshot = store.snapshot(rev)
    node = snapshot.lookup(path)
    if node is None:
        raise _missing_file(snapshot, path, rev)
    if node.kind != KIND_FILE:
        raise NotAFile(str(path))
    return decode_text(store.codec.read_file(node.oid), path)


def similar_file(snapshot: Snapshot, path: MemoryPath) -> MemoryPath | None:
    """The file of ``snapshot`` whose path most resembles ``path`` (a typo's target), if any."""
    # Compared below /memories/, whose shared prefix would make any two paths look alike.
    files = {str(p).removeprefix("/memories/"): p for p in snapshot.files()}
    wanted = str(path).removeprefix("/memories/")
    close = difflib.get_close_matches(wanted, list(files), n=1, cutoff=0.8)
    return files[close[0]] if close else None


def _missing_file(snapshot: Snapshot, path: MemoryPath, rev: str | None) -> NotFound:
    where = "" if rev is None else f" at {rev}"
    near = similar_file(snapshot, path)
    hint = "" if near is None else f" (did you mean {near}?)"
    return NotFound(f"{path} does not exist{where}{hint}")


# -- blame ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlameLine:
    """Line ``number`` (1-based) of a file, its ``text``, and the operation that last wrote it."""

    number: int
    text: str
    operation: Operation

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form."""
        op = self.operation
        return {
            "line": self.number,
            "text": self.text,
            "commit": op.commit,
            "seq": op.seq,
            "session": op.session,
            "command": op.command,
            "time": iso_time(op.record.time),
        }


def blame(store: MemoryStore, path: MemoryPathLike, rev: str | None = None) -> list[BlameLine]:
    """For each line of file ``path`` at ``rev``, the operation that last wrote it.

    Walks parents back, following renames of the file (or of a directory above it); a line is
    the work of the newest operation whose change introduced it. At a merge, a line is followed
    into the parent whose version holds it (the first parent first), so merged lines keep
    their authors and only lines the merge itself made are the merge's.
    """
    path = as_path(path)
    start = store.head() if rev is None else store.resolve(rev)
    if start is None:
        raise NotFound(f"{path} does not exist: the memory is empty")
    op = store.operation(start)
    snapshot = Snapshot(store.codec, op.tree)
    node = snapshot.lookup(path)
    if node is None:
        raise _missing_file(snapshot, path, rev)
    if node.kind != KIND_FILE:
        raise NotAFile(str(path))
    lines = _file_lines(store, node.oid, path)
    owner: list[Operation | None] = [None] * len(lines)
    # Each item: an operation, the file's path and node there, its lines, and which of them are
    # still unexplained (line index in that version -> line index in the final file). A merge
    # hands each line to the parent whose version holds it: the first parent first.
    work = [(op, path, node, lines, {i: i for i in range(len(lines))})]
    while work:
        op, current_path, current_node, current_lines, pending = work.pop()
        for number, parent_commit in enumerate(op.parents):
            if not pending:
                break
            parent_path = current_path
            if number == 0 and op.command == "rename" and len(op.paths) == 2:
                old, new = (_parse_recorded(p) for p in op.paths)
                if old is not None and new is not None and current_path.is_within(new):
                    parent_path = MemoryPath(old.parts + current_path.parts[len(new.parts) :])
            parent_tree = store.repo.read_commit(parent_commit).tree
            parent_node = Snapshot(store.codec, parent_tree).lookup(parent_path)
            if parent_node is None or parent_node.kind != KIND_FILE:
                continue
            parent_op = store.read_operation(parent_commit)  # an id from the walk: no lookup
            if parent_node.oid == current_node.oid:
                carried, parent_lines = dict(pending), current_lines
            else:
                parent_lines = _file_lines(store, parent_node.oid, parent_path)
                matcher = difflib.SequenceMatcher(None, parent_lines, current_lines, False)
                carried = {}
                for tag, i1, _, j1, j2 in matcher.get_opcodes():
                    if tag == "equal":
                        for offset in range(j2 - j1):
                            if j1 + offset in pending:
                                carried[i1 + offset] = pending[j1 + offset]
            explained = set(carried.values())
            pending = {k: v for k, v in pending.items() if v not in explained}
            if carried:
                work.append((parent_op, parent_path, parent_node, parent_lines, carried))
        for final in pending.values():
            owner[final] = op
    return [
        BlameLine(i + 1, text, who)
        for i, (text, who) in enumerate(zip(lines, owner, strict=True))
        if who is not None
    ]


def text_lines(text: str) -> list[str]:
    """The lines of a file's text, without their newlines (a final newline starts no line)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _file_lines(store: MemoryStore, oid: str, path: MemoryPath) -> list[str]:
    return text_lines(decode_text(store.codec.read_file(oid), path))


# -- sessions -------------------------------------------------------------------------------


@dataclass
class SessionSummary:
    """One session's activity: its first and last operation, counts by command, paths."""

    session: str
    first: Operation
    last: Operation
    commands: Counter[str] = field(default_factory=Counter)
    paths: set[str] = field(default_factory=set)

    @property
    def operations(self) -> int:
        """How many operations the session made."""
        return sum(self.commands.values())

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form."""
        return {
            "session": self.session,
            "first": iso_time(self.first.record.time),
            "last": iso_time(self.last.record.time),
            "first_commit": self.first.commit,
            "last_commit": self.last.commit,
            "operations": self.operations,
            "commands": dict(sorted(self.commands.items())),
            "paths": sorted(self.paths),
        }


def sessions(store: MemoryStore, rev: str | None = None) -> list[SessionSummary]:
    """Every session in the history up to ``rev``, most recently active first."""
    return session_summaries(store.log(rev))


def session_summaries(ops: Iterable[Operation]) -> list[SessionSummary]:
    """The sessions of ``ops`` (newest first, as :func:`log` yields them), most recently
    active first."""
    found: dict[str, SessionSummary] = {}
    for op in ops:
        summary = found.get(op.session)
        if summary is None:
            summary = found[op.session] = SessionSummary(op.session, op, op)
        summary.first = op
        summary.commands[op.command] += 1
        summary.paths.update(op.paths)
    return list(found.values())


# -- restore --------------------------------------------------------------------------------


def restore_preview(
    store: MemoryStore, rev: str, paths: Iterable[MemoryPathLike] = ()
) -> list[FileChange]:
    """The file changes ``store.restore(rev, paths or None)`` would make; writes nothing."""
    asked = as_paths(paths)
    target = store.operation(rev)
    head = store.head_operation()
    wanted = [] if any(p.is_root for p in asked) else asked
    if wanted:
        source, now = Snapshot(store.codec, target.tree), store.snapshot()
        for path in wanted:
            if source.lookup(path) is None and now.lookup(path) is None:
                raise NotFound(f"{path} exists neither at {target.commit[:10]} nor now")
    return diff_trees(store, None if head is None else head.tree, target.tree, wanted)


def restore_matches(store: MemoryStore, rev: str, paths: Iterable[MemoryPathLike] = ()) -> bool:
    """Whether the memory (or only ``paths``) already matches ``rev``, the same files, contents
    and directories: ``store.restore(rev, paths or None)`` would then make no commit."""
    asked = as_paths(paths)
    source = Snapshot(store.codec, store.operation(rev).tree)
    now = store.snapshot()
    roots = [MEMORIES_ROOT] if not asked or any(p.is_root for p in asked) else asked
    return all(same_memory(now, source, root) for root in roots)


def nothing_to_restore(
    commit: str, paths: Iterable[MemoryPathLike] = (), *, dry_run: bool = False
) -> str:
    """What ``gitmem restore`` and the MCP server's ``memory_restore`` say when the memory (or
    ``paths``) already matches ``commit``, for a restore (no commit made) or its dry run."""
    asked = list(dict.fromkeys(as_paths(paths)))
    what = "the memory" if not asked else shown_list([shown(str(p)) for p in asked])
    verb = "matches" if len(asked) <= 1 else "match"
    outcome = "nothing would change" if dry_run else "no commit made"
    return f"Nothing to restore: {what} already {verb} {commit[:10]}; {outcome}."
