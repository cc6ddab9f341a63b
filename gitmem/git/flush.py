"""How a store's writes reach stable storage: its write mode, chosen when it is opened, and the
group commit that lets writers of one process share a flush."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

from ..fsutil import can_syncfs, fsync_dir, syncfs
from . import wal


@dataclass(frozen=True)
class WriteMode:
    """How a store makes a write durable before acknowledging it (design.md, "Writing", step 7).

    ``batched``: libgit2 writes without fsync and one ``syncfs`` flushes the file system (Linux);
    else libgit2 fsyncs each file and the directory it is in. ``logged``: a write is a record of
    the redo log (``gitmem/git/wal.py``), one ``fdatasync``, published into the repository by a
    checkpoint; this needs ``batched`` and a boot id to tell a power loss by.
    """

    name: str
    batched: bool
    logged: bool

    def __str__(self) -> str:
        return self.name


LOGGED = WriteMode("logged", batched=True, logged=True)
SYNCFS = WriteMode("syncfs", batched=True, logged=False)
FSYNC = WriteMode("fsync", batched=False, logged=False)


def platform_modes() -> list[WriteMode]:
    """The write modes this machine can use, the default first."""
    modes = [FSYNC]
    if can_syncfs():
        modes[:0] = [SYNCFS]
        if wal.boot_id() is not None:
            modes[:0] = [LOGGED]
    return modes


def default_mode() -> WriteMode:
    """The write mode a store opened here uses: the first of :func:`platform_modes`."""
    return platform_modes()[0]


# libgit2's fsync setting is process-wide. Where syncfs(2) exists libgit2 writes without fsync
# (a syncfs flushes what it wrote); a store opened in a mode that is not batched turns it on
# (see use), which only adds flushes to the other stores of the process.
pygit2.settings.enable_fsync_gitdir(not can_syncfs())


def use(mode: WriteMode) -> None:
    """Make libgit2 flush as ``mode`` needs, before a store in that mode writes."""
    if not mode.batched:
        pygit2.settings.enable_fsync_gitdir(True)


def sync(path: Path, mode: WriteMode) -> None:
    """Make everything written to the repository at ``path`` so far durable.

    One ``syncfs`` where the mode is batched. Elsewhere libgit2 has already fsynced each object,
    ref and the directory it is in; what it leaves out is the directory holding a new directory
    (``objects/`` when an ``objects/xx`` fan-out is new, ``refs/`` for a new ``refs/xx``),
    which this fsyncs.
    """
    if mode.batched:
        group = syncfs_group(path)
        group.sync(partial_syncfs(path), group.ticket())
        return
    for relative in ("objects", "refs", "refs/heads", "refs/gitmem", ""):
        with contextlib.suppress(FileNotFoundError):
            fsync_dir(path / relative)


def partial_syncfs(path: Path) -> Callable[[], None]:
    """A flush of the file system holding ``path``."""
    return lambda: syncfs(path)


def syncfs_group(path: Path) -> GroupSync:
    """The group sharing the ``syncfs`` of the file system holding ``path``."""
    return group_sync(f"dev:{os.stat(path).st_dev}")


def log_group(log: Path) -> GroupSync:
    """The group sharing the ``fdatasync`` of the redo log ``log``."""
    return group_sync(f"log:{log}")


Durability = int | None
"""What :meth:`GitRepo.update_ref` returns: a ticket for :meth:`GitRepo.wait_durable`."""


class GroupSync:
    """Group commit: threads that need the same file system flushed share one ``syncfs``.

    A ticket is taken once the writes it must cover are issued; any ``syncfs`` that starts after
    that covers them. A thread waiting for its ticket either starts a flush (covering every
    ticket taken so far) or, when one is already running, waits for it and then, if that flush
    started too early for its ticket, for the next one. A writer whose ref has moved waits a
    little (``_SHARE_SECONDS`` at most) while other writers of this process are on their way:
    the flush the next one makes before moving its own ref covers this one's too, so N writers
    queued on the lock make N + 1 flushes instead of 2N.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._issued = 0
        self._done = 0
        self._running = False
        self._writers = 0

    @contextlib.contextmanager
    def writer(self) -> Iterator[None]:
        """Announce a writer on its way to a flush for the duration of the block."""
        with self._cond:
            self._writers += 1
        try:
            yield
        finally:
            with self._cond:
                self._writers -= 1
                self._cond.notify_all()

    def ticket(self) -> int:
        with self._cond:
            self._issued += 1
            return self._issued

    def sync(self, flush: Callable[[], None], ticket: int, *, share: bool = False) -> None:
        """Return once a ``flush()`` (of the group's file system or log) has covered ``ticket``."""
        deadline = time.monotonic() + _SHARE_SECONDS
        with self._cond:
            while self._done < ticket:
                if self._running:
                    self._cond.wait()
                    continue
                left = deadline - time.monotonic()
                if share and self._writers and left > 0:
                    self._cond.wait(left)
                    continue
                self._running = True
                covers = self._issued
                self._cond.release()
                try:
                    flush()
                finally:
                    self._cond.acquire()
                    self._running = False
                    self._cond.notify_all()
                self._done = max(self._done, covers)


# How long a writer whose ref has moved waits for another writer's flush to cover it.
_SHARE_SECONDS = 0.02

_GROUPS: dict[str, GroupSync] = {}
_GROUPS_LOCK = threading.Lock()


def group_sync(key: str) -> GroupSync:
    """The group sharing the flushes of ``key``: ``dev:N`` (a file system's ``syncfs``) or
    ``log:PATH`` (a redo log's ``fdatasync``); one per process."""
    with _GROUPS_LOCK:
        group = _GROUPS.get(key)
        if group is None:
            group = _GROUPS[key] = GroupSync()
        return group


def _after_fork_in_child() -> None:
    """In a forked child, which has only the thread that forked: fresh groups and lock. A flush
    another thread was running, or waiting for, never ends here."""
    global _GROUPS, _GROUPS_LOCK
    _GROUPS, _GROUPS_LOCK = {}, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
