"""The store's writer lock: an OS file lock, which the kernel releases when its holder dies."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import LockTimeout, StorageError
from ..fsutil import open_lock_file, release_lock, take_flock

LOCK_FILE = "gitmem.lock"
_LOCK_POLL_SECONDS = 0.005


@contextlib.contextmanager
def flock(path: Path, timeout: float) -> Iterator[None]:
    """Hold the writer lock's ``flock`` of the repository at ``path`` for the block, opening
    nothing of the repository (which :meth:`GitRepo.init` may find half made)."""
    lock_path = f"{path}/{LOCK_FILE}"
    # O_NOFOLLOW: a symlink planted in the repository must not redirect the lock elsewhere.
    try:
        fd = open_lock_file(lock_path)
    except OSError as exc:
        raise StorageError(
            f"cannot write the store at {path}: {exc.strerror or exc} (a read-only "
            "store can still be read); nothing was written"
        ) from None
    try:
        if not take_flock(fd, time.monotonic() + timeout, _LOCK_POLL_SECONDS):
            raise LockTimeout(f"another writer held the lock on {path} for over {timeout:g}s")
        try:
            yield
        finally:
            release_lock(fd)
    finally:
        os.close(fd)
