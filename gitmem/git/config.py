"""The repository's config: keeping reflogs off, and naming the redo log's extension while the
log holds writes the repository does not (design.md, "The redo log")."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pygit2

from ..fsutil import atomic_write
from . import files
from .files import PROCESS
from .handle import LOG_EXTENSION, Handle

_EXTENSION_KEY = f"extensions.{LOG_EXTENSION}"
_FORMAT_KEY = "core.repositoryformatversion"


_EXTENSIONS_HEADER = re.compile(rb"[ \t]*\[extensions\][ \t]*\r?\n?", re.IGNORECASE)


def _without_empty_extensions(config: bytes) -> bytes:
    """``config`` without its ``[extensions]`` sections that hold nothing (blank lines at most:
    a key, or a comment, keeps its section)."""
    lines = config.splitlines(keepends=True)
    kept: list[bytes] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        end = index + 1
        if _EXTENSIONS_HEADER.fullmatch(line):
            while end < len(lines) and not lines[end].strip():
                end += 1
            if end == len(lines) or lines[end].lstrip().startswith(b"["):
                index = end  # an empty section: the header and its blank lines go
                continue
        kept.append(line)
        index += 1
    return b"".join(kept)


def _config_true(config: pygit2.Config, key: str) -> bool:
    try:
        return config.get_bool(key)
    except (KeyError, ValueError, pygit2.GitError):
        return False


def _config_int(config: pygit2.Config, key: str) -> int | None:
    try:
        return config.get_int(key)
    except (KeyError, ValueError, pygit2.GitError):
        return None


class Config:
    """The config of the repository ``handle`` opens; the identity of the config file last found
    with reflogs off (see :meth:`no_reflogs`), and last found naming the log's extension."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self.path = handle.path
        self._root = str(handle.path)
        self._clean_config: tuple[int, ...] | None = None
        self._marked_config: tuple[int, ...] | None = None

    def mark_log_pending(self) -> None:
        """Before the first record of a generation (under the writer lock): set
        ``core.repositoryformatversion = 1`` and ``extensions.gitmemlog = true``, durably, so
        that git and older gitmem refuse the repository while it alone is not whole.

        A config file known to carry the extension (same identity, settled, as in
        :meth:`no_reflogs`) costs one ``lstat``.
        """
        checked_at = time.time()
        config_path = self._root + "/config"
        with contextlib.suppress(FileNotFoundError):
            if files.identity(os.lstat(config_path)) == self._marked_config:
                return
        config = self._handle.git.config
        if not (_config_true(config, _EXTENSION_KEY) and _config_int(config, _FORMAT_KEY) == 1):

            def mark(edited: pygit2.Config) -> None:
                edited[_FORMAT_KEY] = 1
                edited[_EXTENSION_KEY] = True

            self.edit(mark)
        info = os.lstat(config_path)
        self._marked_config = files.identity(info) if files.settled(info, checked_at) else None

    def clear_log_pending(self) -> None:
        """After a checkpoint's flush (under the writer lock): the repository alone is whole
        again, so git may read it: the extension goes, and the format version is 0 again."""
        config = self._handle.git.config
        if _config_true(config, _EXTENSION_KEY) or _config_int(config, _FORMAT_KEY) != 0:
            removed = []

            def clear(edited: pygit2.Config) -> None:
                with contextlib.suppress(KeyError):
                    edited.delete_multivar(_EXTENSION_KEY, ".*")
                    removed.append(True)
                edited[_FORMAT_KEY] = 0

            # libgit2 leaves the section header behind: gone too when gitmem's key was all of it.
            self.edit(clear, lambda data: _without_empty_extensions(data) if removed else data)
        self._marked_config = None

    @staticmethod
    def log_pending_at(path: str | os.PathLike[str]) -> bool:
        """True when the repository at ``path`` names the redo log's extension in its config:
        its log may hold writes that git (and libgit2's transports) cannot see. Opens nothing
        but the config file; False when there is no readable config."""
        try:
            return _config_true(pygit2.Config(str(Path(path) / "config")), _EXTENSION_KEY)
        except (OSError, pygit2.GitError):
            return False

    def edit(
        self, edit: Callable[[pygit2.Config], None], tidy: Callable[[bytes], bytes] = bytes
    ) -> None:
        """Change the repository's config durably: libgit2 edits a copy, ``tidy`` its bytes,
        which replace the config through :func:`atomic_write` (libgit2's own writer renames an
        unflushed file, so a power loss could leave an empty config, which no one opens)."""
        copy = self.path / f"config.gitmem-{PROCESS[0]}"
        try:
            shutil.copyfile(self.path / "config", copy)
            edit(pygit2.Config(str(copy)))
            data = tidy(copy.read_bytes())
        finally:
            with contextlib.suppress(OSError):
                copy.unlink()
        atomic_write(self.path / "config", data)

    def no_reflogs(self, *, config: bool = True) -> None:
        """Keep reflogs out of the repository, whatever its config says (under the lock).

        A reflog records who moved a ref and exactly when. libgit2 writes one when
        ``core.logAllRefUpdates`` is on (a config copied from a ``git clone --mirror`` backup)
        or when the ref's log file exists already; so the setting is put back to false (with
        ``config``), and the ``logs`` directory is removed before and after every write.

        The config is parsed again only when its file is not the one last found clean: same
        device, inode, size, modification and change times, and changed long enough before it
        was checked that any later change must show in those times (git's "racy" rule).
        """
        logs = self._root + "/logs"
        try:
            mode = os.lstat(logs).st_mode
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISDIR(mode):
                shutil.rmtree(logs)
            else:
                os.unlink(logs)
        if not config:
            return
        checked_at = time.time()
        try:
            info = os.lstat(self._root + "/config")
        except FileNotFoundError:
            return
        identity = files.identity(info)
        if identity == self._clean_config:
            return
        if self._reflogs_off() and files.settled(info, checked_at):
            self._clean_config = identity

    def _reflogs_off(self) -> bool:
        """Put ``core.logAllRefUpdates`` back to false; True when it was false already."""
        config = self._handle.git.config
        try:
            setting = str(config["core.logAllRefUpdates"])
        except KeyError:
            setting = "false"
        if setting.strip().lower() != "false":
            # The setting may be given several times (the last one counts): replace them all.
            config.delete_multivar("core.logAllRefUpdates", ".*")
            config["core.logAllRefUpdates"] = "false"
            # libgit2 caches the setting per repository handle: the next use reopens.
            self._handle.reopen()
            return False
        return True
