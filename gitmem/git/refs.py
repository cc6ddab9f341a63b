"""Refs: reading a loose ref in a few system calls, moving one with git's lock protocol."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable

import pygit2

from ..errors import ConflictError, IntegrityError
from ..fsutil import FILE_MODE, NEW_FILE_FLAGS, atomic_write, make_private_dirs
from . import files
from .files import require_file
from .handle import Handle

BRANCH = "refs/heads/main"
META_REF = "refs/gitmem/meta"
# A loose ref is 41 bytes; libgit2 reads the whole file, and so does this up to here (more is
# not a ref gitmem or git writes, and is refused as corrupt).
_LOOSE_REF_MAX = 4096
_REF_OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


class Refs:
    """The refs of the repository ``handle`` opens, each loose ref file remembered by its
    identity with the id it holds (see :meth:`ref_file`)."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self.path = handle.path
        self._root = str(handle.path)
        self._refs: dict[str, tuple[tuple[int, ...], str]] = {}

    def ref_file(self, name: str) -> str | None:
        """Where the ref file of ``name`` (or libgit2's packed refs) points: :meth:`GitRepo.ref`
        without the redo log."""
        path = f"{self._root}/{name}"
        known = self._refs.get(name)
        if known is not None:
            # A ref file that has not changed for a while is known by its identity (one lstat):
            # see Config.no_reflogs for the rule; a ref moved since is a new file, with new times.
            with contextlib.suppress(OSError):
                if files.identity(os.lstat(path)) == known[0]:
                    return known[1]
        checked_at = time.time()
        try:
            fd = os.open(path, _REF_OPEN_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            return self._libgit2_ref(name)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symbolic link: checked where it leads, below
                return self._libgit2_ref(name)
            raise IntegrityError(
                f"{name} in the repository cannot be read: {exc.strerror}"
            ) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise IntegrityError(
                    f"{name} in the repository is not a regular file (a FIFO or device there "
                    f"would block every reader); remove {self.path / name}"
                )
            data = os.read(fd, _LOOSE_REF_MAX)
        finally:
            os.close(fd)
        oid = _parse_loose_ref(name, data)
        if files.settled(info, checked_at):
            self._refs[name] = (files.identity(info), oid)
        return oid

    def _libgit2_ref(self, name: str) -> str | None:
        """:meth:`ref_file` through libgit2, for a packed ref or a symbolic link in its place."""
        require_file(self.path / name, name)
        require_file(self.path / "packed-refs", "packed-refs")
        try:
            ref = self._handle.git.references[name]
        except KeyError:
            return None
        except pygit2.GitError as exc:
            raise IntegrityError(f"the ref {name} is corrupt: {exc}") from None
        target = ref.target
        if not isinstance(target, pygit2.Oid):
            raise IntegrityError(f"the ref {name} is symbolic; gitmem refs point at objects")
        return str(target)

    def names(self) -> list[str]:
        """Every ref libgit2 sees (loose and packed)."""
        try:
            return list(self._handle.git.references)
        except pygit2.GitError as exc:
            raise IntegrityError(f"the refs of {self.path} cannot be read: {exc}") from None

    def create(self, name: str, new: str) -> None:
        """Create ``name`` at ``new`` through libgit2 (which fsyncs it where the write mode
        asks); :class:`ConflictError` if it exists."""
        try:
            self._handle.git.references.create(name, pygit2.Oid(hex=new))
        except (pygit2.AlreadyExistsError, ValueError) as exc:
            raise ConflictError(f"the ref {name} already exists") from exc

    def set_ref(self, name: str, new: str, expected: str, sync: Callable[[], None]) -> None:
        """Move a ref through libgit2, which fsyncs it (where syncfs is missing)."""
        try:
            ref = self._handle.git.references[name]
        except KeyError:
            raise ConflictError(f"the ref {name} disappeared during the write") from None
        if str(ref.target) != expected:
            raise ConflictError(f"the ref {name} moved during the write")
        sync()
        try:
            ref.set_target(pygit2.Oid(hex=new))
        except pygit2.GitError as exc:
            raise ConflictError(f"the ref {name} moved during the write: {exc}") from exc

    def swap_ref(
        self,
        name: str,
        new: str,
        expected: str | None,
        before_rename: Callable[[], None],
        *,
        check: Callable[[str], str | None] | None,
    ) -> None:
        """Move (or create) a loose ref with git's ref protocol, ``before_rename`` in between.

        ``<ref>.lock`` is created exclusively (any git process that moves the ref takes the
        same lock), the ref is checked under it, read by ``check`` (unless None: a checkpoint
        publishing the log's head, or a torn ref being repaired), the new id written into it,
        ``before_rename`` called (a flush), and the lock renamed over the ref.
        """
        path = self.path / name
        lock = self.path / (name + ".lock")
        if not os.path.isdir(path.parent):
            make_private_dirs(path.parent)
        try:
            fd = os.open(lock, NEW_FILE_FLAGS, FILE_MODE)
        except FileExistsError:
            raise ConflictError(
                f"the ref {name} is locked by another process ({lock.name} exists)"
            ) from None
        try:
            try:
                current = expected if check is None else check(name)
                if current != expected:
                    what = "already exists" if expected is None else "moved during the write"
                    raise ConflictError(f"the ref {name} {what}")
                os.write(fd, f"{new}\n".encode())
            finally:
                os.close(fd)
            before_rename()
            os.replace(lock, path)
        except BaseException:
            with contextlib.suppress(OSError):
                lock.unlink()
            raise

    def force_ref(self, name: str, oid: str | None) -> None:
        """Point ``name`` at ``oid`` (remove it for None), unflushed: recovery's checkpoint
        makes it durable."""
        path = self.path / name
        if oid is None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return
        make_private_dirs(path.parent)
        atomic_write(path, f"{oid}\n".encode(), durable=False)

    def clear_stale_locks(self) -> None:
        """Remove ``<ref>.lock`` files of gitmem's refs (under the writer lock: a dead writer's)."""
        for name in (BRANCH, META_REF):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self._root}/{name}.lock")


def _parse_loose_ref(name: str, data: bytes) -> str:
    """The object id in a loose ref file's bytes, parsed as libgit2 parses it.

    Forty hex digits, then nothing or whitespace (and whatever follows it); ``ref: `` is a
    symbolic ref, which gitmem never writes.
    """
    if data.startswith(b"ref: "):
        raise IntegrityError(f"the ref {name} is symbolic; gitmem refs point at objects")
    oid = data[:40]
    if (
        len(oid) != 40
        or not _HEX_DIGITS.issuperset(oid)
        or (len(data) > 40 and not data[40:41].isspace())
        or len(data) >= _LOOSE_REF_MAX
    ):
        raise IntegrityError(f"the ref {name} is corrupt: it holds no object id")
    return oid.decode("ascii").lower()
