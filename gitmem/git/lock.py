"""The store's writer lock: an OS file lock, which the kernel releases when its holder dies."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import LockTimeout, StorageError
from ..fsutil import lock_held, open_lock_file, release_lock

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
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"another writer held the lock on {path} for over {timeout:g}s"
                    ) from None
                time.sleep(_LOCK_POLL_SECONDS)
        lock_held(fd)
        try:
            yield
        finally:
            release_lock(fd)
    finally:
        os.close(fd)
