"""Opening a repository with libgit2: one handle per thread, after checking what libgit2 would
block on, without git configuration from outside the repository."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2
from pygit2.enums import ConfigLevel, RepositoryOpenFlag

from ..errors import IntegrityError, NoStore
from ..fsutil import atomic_write, read_regular_file
from . import wal
from .files import require_file

# Refuse to write objects that do not parse, and check every object's hash on read, so a
# corrupted loose object is an error rather than silently different bytes.
pygit2.settings.enable_strict_object_creation(True)
pygit2.settings.enable_strict_hash_verification(True)
# While the redo log holds writes the repository does not, its config names this extension
# (design.md, "The redo log"): git and older gitmem refuse such a repository rather than read
# a stale one; this gitmem's libgit2 is told that it knows it.
LOG_EXTENSION = "gitmemlog"
pygit2.option(pygit2.enums.Option.SET_EXTENSIONS, [LOG_EXTENSION], 1)

# A fixed, neutral identity: the real author and time live in the encrypted record. A commit's
# time is its operation's sequence number (objects.commit_bytes), not this signature's.
SIGNATURE = pygit2.Signature("gitmem", "gitmem@invalid", 0, 0)

_HEAD_TEXT = b"ref: refs/heads/main\n"
# Files libgit2 reads with a blocking open when it opens the repository or reads gitmem's refs.
_CONTROL_FILES = ("config", "packed-refs", "commondir", "objects/info/alternates", wal.LOG_NAME)
_CONFIG_MAX = 1024 * 1024
# A section header [include] or [includeIf "..."], in any case, with any spacing.
_INCLUDE = re.compile(rb"^[ \t]*\[[ \t]*include", re.IGNORECASE | re.MULTILINE)
_OUTSIDE_CONFIG = (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM, ConfigLevel.PROGRAMDATA)
_SEARCH_PATH_LOCK = threading.Lock()
# The outside levels' search paths while an open has them emptied (see only_repository_config).
_SAVED_SEARCH_PATHS: list[str] = []


class Handle:
    """libgit2's view of the repository at ``path``, opened lazily once per thread.

    ``on_first_open`` runs before the first handle of this object is made (the repository
    checks, after a reboot, whether its redo log needs recovering).
    """

    def __init__(self, path: Path, on_first_open: Callable[[], None]) -> None:
        self.path = path
        self._objects = str(self.path / "objects")
        self._local = threading.local()
        self._on_first_open = on_first_open
        self._boot_checked = False

    @property
    def git(self) -> pygit2.Repository:
        """This thread's libgit2 repository."""
        repo: pygit2.Repository | None = getattr(self._local, "repo", None)
        if repo is None:
            if not self._boot_checked:
                self._boot_checked = True
                self._on_first_open()
            repo = getattr(self._local, "repo", None) or self._open()
            self._local.repo = repo
            self._local.held = _Held(repo)
        return repo

    @property
    def packs(self) -> pygit2.Odb:
        """This thread's reader of the repository's own packs and nothing else (no loose
        objects, no alternates): see :meth:`Objects.read_stored`. Made anew with the repository
        handle (after maintenance let go of removed packs)."""
        repo = self.git  # opened first: its checks refuse a pack directory file that blocks
        held: tuple[pygit2.Repository, pygit2.Odb] | None = getattr(self._local, "packs", None)
        if held is None or held[0] is not repo:
            odb = pygit2.Odb()
            odb.add_backend(pygit2.OdbBackendPack(self._objects), 1)
            held = self._local.packs = (repo, odb)
        return held[1]

    def let_go(self) -> None:
        """Drop this thread's libgit2 handles, reopened on next use: they hold the files of
        packs maintenance has removed open (and mapped) as long as they live."""
        with contextlib.suppress(AttributeError):
            del self._local.packs
        self.reopen()

    def reopen(self) -> None:
        """Drop this thread's repository handle (libgit2 caches settings per handle)."""
        for handle in ("repo", "held"):  # the holder last: it frees the repository
            with contextlib.suppress(AttributeError):
                delattr(self._local, handle)

    def _open(self) -> pygit2.Repository:
        """Open the repository with libgit2, after checking what libgit2 would block on.

        git's configuration from outside the repository (global, XDG, system) is not read: it
        could turn reflogs on, or include a FIFO that blocks every open. gitmem does not use
        ``HEAD`` (git needs the file to recognise a repository), so a missing one is recreated.
        """
        self._restore_head()
        self._check_files()
        try:
            with only_repository_config():
                repo = pygit2.Repository(str(self.path), RepositoryOpenFlag.NO_SEARCH)
        except pygit2.GitError as exc:
            raise NoStore(f"no git repository at {self.path}") from exc
        if not repo.is_bare:
            raise NoStore(f"{self.path} is not a bare git repository")
        # Should a reflog be written after all, it names no one.
        repo.set_ident(SIGNATURE.name, SIGNATURE.email)
        return repo

    def _restore_head(self) -> None:
        head = self.path / "HEAD"
        with contextlib.suppress(OSError):  # missing, or a symlink loop: replaced below
            if stat.S_ISREG(head.stat().st_mode):
                return
        if not (self.path / "objects").is_dir():
            return  # not a repository at all; opening says so
        try:
            atomic_write(head, _HEAD_TEXT)
        except OSError as exc:
            raise NoStore(
                f"{self.path} has no usable HEAD file, which git needs (gitmem does not use "
                f"it), and it cannot be recreated ({exc.strerror or exc}); recreate it with: "
                f"printf 'ref: refs/heads/main\\n' > {self.path}/HEAD"
            ) from None

    def _check_files(self) -> None:
        """Refuse files libgit2 would block on or follow: FIFOs, devices, config includes."""
        for name in _CONTROL_FILES:
            require_file(self.path / name, name)
        try:
            config = read_regular_file(self.path / "config", _CONFIG_MAX)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise IntegrityError(
                f"the repository's config cannot be read: {exc.strerror or exc}"
            ) from None
        if _INCLUDE.search(config):
            raise IntegrityError(
                "the repository's config includes other files (include.path or includeIf), "
                f"which a gitmem store never does; remove those sections from {self.path}/config"
            )
        pack_dir = self.path / "objects" / "pack"
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for entry in os.scandir(pack_dir):
                require_file(Path(entry.path), f"objects/pack/{entry.name}")


class _Held:
    """Frees a thread's repository when the thread lets it go or ends.

    A pygit2 ``Repository`` is in reference cycles with its collections, so dropping it frees
    nothing until the cycle collector finds it, and until then it keeps its packs open and
    mapped (removed ones too) and its caches allocated: a writer that merges packs, or a server
    whose calls run on short-lived threads, would hold more of them the longer it runs.
    """

    __slots__ = ("repo",)

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo

    def __del__(self) -> None:
        self.repo.free()


@contextlib.contextmanager
def only_repository_config() -> Iterator[None]:
    """Open or create repositories in the block without git config from outside them.

    libgit2 reads every level of configuration when it opens a repository and keeps it for
    that handle's life, so emptying the search paths of the outside levels for the duration of
    the open is enough. The paths are process-wide; they are put back at once, under a lock
    so that concurrent opens do not restore each other's empty paths.
    """
    with _SEARCH_PATH_LOCK:
        _SAVED_SEARCH_PATHS[:] = [pygit2.settings.search_path[level] for level in _OUTSIDE_CONFIG]
        for level in _OUTSIDE_CONFIG:
            pygit2.settings.search_path[level] = ""
        try:
            yield
        finally:
            _restore_search_paths()


def _restore_search_paths() -> None:
    for level, path in zip(_OUTSIDE_CONFIG, _SAVED_SEARCH_PATHS, strict=True):
        pygit2.settings.search_path[level] = path
    _SAVED_SEARCH_PATHS.clear()


def _after_fork_in_child() -> None:
    """In a forked child: a fresh lock (another thread may have held it at the fork), and an
    open that another thread had under way undone (its search paths put back)."""
    global _SEARCH_PATH_LOCK
    _SEARCH_PATH_LOCK = threading.Lock()
    if _SAVED_SEARCH_PATHS:
        _restore_search_paths()


os.register_at_fork(after_in_child=_after_fork_in_child)
