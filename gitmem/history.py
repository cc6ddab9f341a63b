"""The memory's history as a person audits it: filtered logs, diffs, blame, sessions, and the
moves in and out of plain files (export, import). Each ``gitmem`` audit command is one call here.

Everything reads through :class:`~gitmem.store.MemoryStore`, so every commit is authenticated
before anything it says is used. Diffs are of files only (directories have no content), and a
file that moved without changing is recognised exactly: a file's git tree does not depend on
its name, so the same tree id at a new path is a rename.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import paths as memory_paths
from .errors import (
    GitMemError,
    InvalidPath,
    NotAFile,
    NotFound,
    PathExists,
    StorageError,
    UsageError,
    shown,
    shown_int,
    shown_list,
    shown_repr,
)
from .format import KIND_DIR, KIND_FILE
from .fsutil import DIR_MODE, is_within, make_private_dirs, open_private_file
from .paths import MEMORIES_ROOT, MemoryPath, MemoryPathLike, as_path, as_paths
from .render import plural
from .revisions import check_moment
from .secrets import SecretRefused
from .store import Change, MemoryStore, NoChange, Operation, changed_files, same_memory
from .tree import Node, Snapshot, TreeEditor, changed_file_nodes, decode_text
from .view import view_text

# Called with (done, total) as a long operation advances.
Progress = Callable[[int, int], None]


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
)
"""Every command an operation's record can name (``merge``: a pull or sync joining histories)."""


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

    def diff_lines(self) -> list[str]:
        """The unified diff of the content (3 lines of context), without file headers."""
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
    lines = decode_text(store.codec.read_file(node.oid), path).split("\n")
    if lines[-1] == "":
        lines.pop()
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


def _file_lines(store: MemoryStore, oid: str, path: MemoryPath) -> list[str]:
    found = decode_text(store.codec.read_file(oid), path).split("\n")
    if found[-1] == "":
        found.pop()
    return found


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
    found: dict[str, SessionSummary] = {}
    for op in store.log(rev):
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


# -- export and import ----------------------------------------------------------------------


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export` wrote: the commit exported (None: empty memory) and counts."""

    directory: Path
    commit: str | None
    files: int
    directories: int

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form."""
        return {
            "dir": str(self.directory),
            "commit": self.commit,
            "files": self.files,
            "directories": self.directories,
        }


def _make_private_dir(path: Path) -> bool:
    """Make ``path`` an owner-only directory; whether this call created it."""
    created = True
    try:
        path.mkdir(mode=DIR_MODE)
    except FileExistsError:
        created = False
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode):
            raise UsageError(
                f"cannot export into {path}: it exists and is not a directory"
            ) from None
    os.chmod(path, DIR_MODE, follow_symlinks=False)
    return created


def _refuse_colliding_names(entries: Sequence[tuple[MemoryPath, Node]], target: Path) -> None:
    """Refuse, before anything is written, an export where two names of one directory are one
    file on a case-insensitive or normalizing file system (Windows, macOS)."""
    seen: dict[tuple[MemoryPath, str], MemoryPath] = {}
    clashes: list[str] = []
    for path, _ in entries:
        key = (path.parent, memory_paths.fold_name(path.name))
        other = seen.setdefault(key, path)
        if other != path:
            clashes.append(f"{other} and {path}")
    if clashes:
        shown = "; ".join(clashes[:10]) + (
            f"; and {len(clashes) - 10} more" if len(clashes) > 10 else ""
        )
        raise UsageError(
            f"cannot export into {target}: {len(clashes)} pair(s) of names differ only in case "
            f"or Unicode form and would overwrite each other on Windows or macOS ({shown}); "
            "rename one of each pair first. Nothing was written."
        )


def _refuse_writing_into(
    repository: Path, entries: Sequence[tuple[MemoryPath, Node]], target: Path
) -> None:
    """Refuse, before anything is written, an export into a directory holding the store whose
    memory has a path that lands inside the store's own directory: the memory is whatever was
    written to it, and with ``--force`` such a file (``/memories/m.git/refs/heads/main``)
    would overwrite the store's branch."""
    if not is_within(repository, target):
        return
    for path, _ in entries:
        if is_within(target.joinpath(*path.parts), repository):
            raise UsageError(
                f"cannot export into {target}: {path} would be written inside the store's "
                f"repository {repository}; export somewhere else. Nothing was written."
            )


def _open_export_file(local: Path, force: bool) -> int:
    try:
        return open_private_file(local, overwrite=force)
    except FileExistsError:
        raise UsageError(
            f"cannot write {local}: something is already there (another name of this export "
            "may be the same file on this file system); nothing was overwritten"
        ) from None
    except OSError as exc:
        raise UsageError(f"cannot write {local}: {exc.strerror}") from None


def _claim(
    made: dict[tuple[int, int], MemoryPath], info: os.stat_result, path: MemoryPath, local: Path
) -> None:
    other = made.setdefault((info.st_dev, info.st_ino), path)
    if other != path:
        raise UsageError(
            f"cannot export {path}: this file system makes it the same file as {other} "
            f"(at {local}); the export stopped there, nothing was overwritten"
        )


def export(
    store: MemoryStore,
    directory: str | os.PathLike[str],
    rev: str | None = None,
    *,
    force: bool = False,
    progress: Progress | None = None,
) -> ExportSummary:
    """Write the memory at ``rev`` (default: the head) as plain files under ``directory``.

    ``/memories/a/b.md`` becomes ``DIR/a/b.md``. Directories are made owner-only (0700) and
    files 0600. A ``directory`` that is not empty is refused unless ``force``, which overwrites
    files in place (never following a symbolic link). Names that would be one file on a
    case-insensitive or normalizing file system are refused before anything is written.
    """
    target = Path(directory)
    commit = None
    if rev is not None:
        commit = store.resolve(rev)
        snapshot = Snapshot(store.codec, store.operation(commit).tree)
    else:
        head = store.head_operation()
        commit = None if head is None else head.commit
        snapshot = Snapshot(store.codec, None if head is None else head.tree)
    if target.is_symlink():
        raise UsageError(f"cannot export into {target}: it is a symbolic link")
    if is_within(target, store.path):
        # Plaintext beside the ciphertext: whoever copies or backs up the store gets both.
        raise UsageError(
            f"cannot export into {target}: it is inside the store's repository {store.path}; "
            "export somewhere outside it"
        )
    if target.exists():
        if not target.is_dir():
            raise UsageError(f"cannot export into {target}: it is not a directory")
        if any(target.iterdir()) and not force:
            raise UsageError(f"{target} is not empty; pass --force to write into it anyway")
    entries = list(snapshot.walk())
    _refuse_colliding_names(entries, target)
    _refuse_writing_into(store.path, entries, target)
    # Everything this export creates, in order: a failure (a full disk) or a Ctrl-C part way
    # removes it all, rather than leave a partial export that looks whole and that the same
    # command, run again, refuses as "not empty".
    created: list[Path] = []
    try:
        files, dirs = _write_export(store, entries, target, force, created, progress)
    except BaseException as exc:
        for made_path in reversed(created):
            with contextlib.suppress(OSError):
                if made_path.is_dir() and not made_path.is_symlink():
                    made_path.rmdir()
                else:
                    made_path.unlink()
        if isinstance(exc, OSError):
            kept = " (files it overwrote keep what it wrote)" if force else ""
            where = f" ({shown(os.fsdecode(exc.filename))})" if exc.filename else ""
            raise StorageError(
                f"the file system refused: {exc.strerror or exc}{where}; the export stopped and "
                f"removed what it had written{kept}"
            ) from None
        raise
    return ExportSummary(target, commit, files, dirs)


def _write_export(
    store: MemoryStore,
    entries: Sequence[tuple[MemoryPath, Node]],
    target: Path,
    force: bool,
    created: list[Path],
    progress: Progress | None,
) -> tuple[int, int]:
    """Write ``entries`` under ``target`` (for :func:`export`), adding to ``created`` each file
    and directory it creates as it creates it. Returns the files and directories written."""
    missing: list[Path] = []
    parent = target.parent
    while not os.path.lexists(parent) and parent.parent != parent:
        missing.append(parent)
        parent = parent.parent
    make_private_dirs(target.parent)
    created.extend(reversed(missing))
    if _make_private_dir(target):
        created.append(target)
    files = dirs = 0
    # Every file and directory this export made, by inode: meeting one again under another
    # name means the file system folds two memory names into one (a backstop for folding
    # rules beyond the ones _refuse_colliding_names knows).
    made: dict[tuple[int, int], MemoryPath] = {}
    for path, node in entries:
        local = target.joinpath(*path.parts)
        if node.kind == KIND_DIR:
            if _make_private_dir(local):
                created.append(local)
            _claim(made, os.lstat(local), path, local)
            dirs += 1
        else:
            data = store.codec.read_file(node.oid)
            new = not os.path.lexists(local)
            fd = _open_export_file(local, force)
            if new:
                created.append(local)
            with os.fdopen(fd, "wb") as handle:
                _claim(made, os.fstat(handle.fileno()), path, local)
                handle.truncate()
                handle.write(data)
            files += 1
        if progress is not None:
            progress(files + dirs, len(entries))
    return files, dirs


class ImportRefused(GitMemError):
    """Some files of an import cannot become memory files; nothing was imported.

    ``problems`` lists each refused file (by its name in the source directory) and why.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        # A source of thousands of refused files (a wrong directory) would fill the terminal:
        # the message names the first few, ``problems`` keeps them all.
        super().__init__(
            f"nothing was imported: {plural(len(self.problems), 'file')} refused: "
            + shown_list(self.problems, "; ")
        )


@dataclass(frozen=True)
class ImportPlan:
    """The files and directories an import will write, read and checked up front."""

    files: dict[MemoryPath, str]
    directories: list[MemoryPath]


def scan_import(source: str | os.PathLike[str], max_file_bytes: int | None) -> ImportPlan:
    """Read every file under ``source`` as it would be imported; raise :class:`ImportRefused`
    naming every file that cannot be (not UTF-8, over ``max_file_bytes``, a symbolic link or
    special file, a name memory paths refuse, two names that are one memory path)."""
    root = Path(source)
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory")
    problems: list[str] = []
    files: dict[MemoryPath, str] = {}
    origin: dict[MemoryPath, str] = {}
    directories: list[MemoryPath] = []

    # A stack of directories, not recursion: the source's depth is not ours to choose.
    pending: list[tuple[Path, tuple[str, ...]]] = [(root, ())]
    while pending:
        directory, relative = pending.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"{shown('/'.join(relative)) or '.'}: cannot be read ({exc.strerror})")
            continue
        below: list[tuple[Path, tuple[str, ...]]] = []
        for entry in entries:
            rel = (*relative, entry.name)
            # The names are the source directory's, which may come from anywhere: escaped in
            # messages, so that none can drive the terminal that shows the refusal.
            name = shown("/".join(rel))
            try:
                path = memory_paths.parse("/memories/" + "/".join(rel))
            except InvalidPath as exc:
                problems.append(f"{name}: {exc.reason}")
                continue
            if path in origin:
                problems.append(f"{name}: the same memory path as {origin[path]}")
                continue
            origin[path] = name
            if entry.is_symlink():
                problems.append(f"{name}: a symbolic link")
            elif entry.is_dir():
                directories.append(path)
                below.append((Path(entry.path), rel))
            elif not entry.is_file():
                problems.append(f"{name}: not a regular file")
            else:
                size = entry.stat().st_size
                if max_file_bytes is not None and size > max_file_bytes:
                    problems.append(
                        f"{name}: {size:,} bytes, over the {max_file_bytes:,}-byte file limit"
                    )
                    continue
                try:
                    data = Path(entry.path).read_bytes()
                except OSError as exc:
                    problems.append(f"{name}: cannot be read ({exc.strerror})")
                    continue
                try:
                    files[path] = data.decode("utf-8")
                except UnicodeDecodeError:
                    problems.append(f"{name}: not UTF-8 text")
        pending.extend(reversed(below))

    if problems:
        raise ImportRefused(problems)
    return ImportPlan(files, directories)


def import_(
    store: MemoryStore,
    source: str | os.PathLike[str],
    *,
    replace: bool = False,
    progress: Progress | None = None,
) -> Operation | None:
    """Import the files under ``source`` (``DIR/a.md`` -> ``/memories/a.md``) as one commit.

    Every file is read and checked first (:func:`scan_import`, with the store's file size
    limit); any refusal imports nothing. Files replace memory files at the same paths; with
    ``replace``, memory files and directories not in ``source`` are removed too. Writes pass
    the store's safeguards (size limits, secret policy) like any other. The commit's command is
    ``import`` and its paths are the files it added, changed or removed. Returns None, and
    makes no commit, when the memory already holds exactly what the import would make.
    """
    plan = scan_import(source, store.limits.max_file_bytes)

    def edit(head: Operation | None, tree: TreeEditor) -> Change[None] | NoChange[None]:
        before = Snapshot(store.codec, None if head is None else head.tree)
        if replace:
            root = before.lookup(MEMORIES_ROOT)
            for name in sorted(before.children(MEMORIES_ROOT, root) if root else {}):
                tree.remove(MEMORIES_ROOT.child(name))
        refused: list[str] = []
        redacted: list[dict[str, Any]] = []
        for directory in plan.directories:
            try:
                tree.check_new_names(directory)
                tree.put_dir(directory)
            except NotAFile as exc:
                refused.append(f"{directory}: {exc.path} is a file in the memory")
            except InvalidPath as exc:
                refused.append(f"{directory}: {exc.reason}")
        for done, (path, text) in enumerate(sorted(plan.files.items()), 1):
            old = tree.read_bytes(path).decode("utf-8") if tree.kind(path) == KIND_FILE else ""
            try:
                tree.check_new_names(path)
                screened = store.screen(old, text)
                tree.put_file(path, screened.text.encode("utf-8"))
                redacted.extend({"path": str(path), **r} for r in screened.record())
            except (PathExists, NotAFile):
                refused.append(f"{path}: a directory or file in the memory is in the way")
            except SecretRefused as exc:
                refused.append(f"{path}: {exc}")
            except InvalidPath as exc:
                refused.append(f"{path}: {exc.reason}")
            if progress is not None:
                progress(done, len(plan.files))
        if refused:
            raise ImportRefused(refused)
        after = tree.write()
        imported = Snapshot(store.codec, after)
        if same_memory(before, imported):
            return NoChange(None)
        detail: dict[str, Any] = {"files": len(plan.files), "replace": replace}
        if redacted:
            detail["redacted"] = redacted
        return Change(tuple(changed_files(before, imported)), None, detail, after)

    op, _ = store.write("import", edit)
    return op
