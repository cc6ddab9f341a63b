"""The memory's moves in and out of plain files: ``gitmem export`` writes a revision's memory as
a directory of files, ``gitmem import`` makes a directory of files one commit.

Both go through :class:`~gitmem.store.MemoryStore`: an export reads authenticated snapshots, an
import is one :meth:`~gitmem.store.MemoryStore.write` and so passes the store's safeguards
(size limits, secret policy) like any other write. ``gitmem.history`` re-exports these names.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import paths as memory_paths
from .editor import TreeEditor
from .errors import (
    GitMemError,
    InvalidPath,
    NotAFile,
    PathExists,
    StorageError,
    UsageError,
    shown,
    shown_list,
)
from .format import KIND_DIR, KIND_FILE
from .fsutil import DIR_MODE, is_within, local_path, make_private_dirs, open_private_file
from .paths import MEMORIES_ROOT, MemoryPath
from .render import plural
from .secrets import SecretRefused
from .snapshot import Snapshot
from .store import Change, MemoryStore, NoChange, Operation, changed_files, same_memory
from .tree import Node

# Called with (done, total) as a long operation advances.
Progress = Callable[[int, int], None]


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
    target = local_path(directory, "directory to export into")
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
