"""What the storage layers share about the files they read: which process wrote a temporary
file, and when a file is known not to have changed since it was last read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import IntegrityError


def _process_tag() -> str:
    # The process id and a random part (pids repeat: across containers sharing a volume, and
    # after a killed writer's temporary file was left behind), made once per process and again
    # in a forked child: os.getpid() and os.urandom() are each a system call.
    return f"{os.getpid()}-{os.urandom(4).hex()}"


# This process's tag, in a list so that code holding the list sees a forked child's new one.
PROCESS = [_process_tag()]
# A file whose change time is at least this far in the past when it is checked cannot change
# again without its times changing: file-system timestamps are coarser than the clock, by up to
# a scheduler tick where they have sub-second parts (ext4, xfs, btrfs, tmpfs), by up to two
# seconds where they have none (FAT, old ext3). git's index uses the same "racy" rule.
_RACY_SECONDS = 2.0
_RACY_FINE_SECONDS = 0.05


def identity(info: os.stat_result) -> tuple[int, ...]:
    """What tells one version of a file from another: device, inode, size, modification and
    change times (trusted only for files changed well before they were looked at)."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def settled(info: os.stat_result, checked_at: float) -> bool:
    """True when the file ``info`` describes changed long enough before ``checked_at`` (the
    clock, read before the stat) that any later change must show in its identity."""
    fine = info.st_ctime_ns % 1_000_000_000 != 0  # whole seconds: a coarse file system
    return info.st_ctime < checked_at - (_RACY_FINE_SECONDS if fine else _RACY_SECONDS)


def require_file(path: Path, name: str) -> None:
    """Refuse ``path`` unless it is absent or a regular file (never opening it)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise IntegrityError(f"{name} in the repository cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise IntegrityError(
            f"{name} in the repository is not a regular file (a FIFO or device there would "
            f"block every reader); remove {path}"
        )


def _after_fork_in_child() -> None:
    PROCESS[0] = _process_tag()


os.register_at_fork(after_in_child=_after_fork_in_child)
