"""Files and directories gitmem writes outside libgit2: owner-only, atomic and durable.

Every file gitmem writes itself (high-water marks, known stores, key files, exports, packs) and
every directory it creates goes through here, so the modes, the temporary names and the fsyncs
cannot drift apart between callers.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import stat
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from .crypto import KEY_TEXT
from .errors import UsageError, shown_repr

FILE_MODE = 0o600
"""Mode of every file gitmem creates: read and write for its owner only."""
DIR_MODE = 0o700
"""Mode of every directory gitmem creates: its owner only."""
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
"""``os.open`` flags for a file that must not exist yet, never through a symbolic link."""

_PathLike = str | os.PathLike[str]


def user_dir(variable: str, fallback: str) -> Path:
    """``$variable`` (an XDG base directory) when it is an absolute path, else ``~/fallback``.

    The XDG spec has a relative value ignored; and a home directory that is not absolute is
    refused (:class:`UsageError`): a key or a high-water mark kept relative to the working
    directory would not be found from any other one.
    """
    value = os.environ.get(variable, "")
    if os.path.isabs(value):
        return Path(value)
    # Python takes an empty HOME for "/", which is no one's home either.
    home = os.path.expanduser("~") if os.environ.get("HOME") != "" else ""
    if not os.path.isabs(home):
        raise UsageError(
            f"the home directory {shown_repr(home)} is not an absolute path: set HOME (or "
            f"{variable}) to one"
        )
    return Path(home) / fallback


def refuse_key_text(value: _PathLike, what: str, kind: str = "path") -> None:
    """Refuse (:class:`UsageError`) a ``value`` given as ``what`` (a ``kind``: path or URL)
    that holds gitmem key text: a key in the wrong place would be echoed in errors, used as a
    name or written to a config. The message never shows ``value``."""
    if KEY_TEXT.search(os.fspath(value)):
        raise UsageError(
            f"{what} holds a gitmem store key (key text, 'gitmem-key-...') where a {kind} "
            "belongs: refused, and not shown here. Give a key as a key (GITMEM_KEY, or an "
            "owner-only file named by --key-file or GITMEM_KEY_FILE), never as a path or URL"
        )


def explicit_dir(variable: str) -> Path | None:
    """``$variable`` (gitmem's own ``GITMEM_CONFIG_DIR``, ``GITMEM_STATE_DIR``) when set, else
    None. A relative value is refused (:class:`UsageError`), as a relative home is."""
    value = os.environ.get(variable, "")
    if not value:
        return None
    refuse_key_text(value, variable)
    if not os.path.isabs(value):
        raise UsageError(
            f"{variable} is {shown_repr(value)}, which is not an absolute path: what gitmem "
            "keeps there would not be found from another working directory; set it to an "
            "absolute path"
        )
    return Path(value)


def local_path(path: _PathLike, what: str) -> Path:
    """``path`` as a :class:`Path`; an empty string is refused (:class:`UsageError`), since
    ``Path("")`` is ``.``: a variable left unset would name the working directory; and so is
    key text (:func:`refuse_key_text`)."""
    if os.fspath(path) == "":
        raise UsageError(f"an empty string is not a path: give the {what}")
    refuse_key_text(path, f"the {what}")
    return Path(path)


def make_private_dirs(path: _PathLike) -> Path:
    """Create ``path`` and every missing parent, each owner-only whatever the umask.

    ``Path.mkdir(mode=..., parents=True)`` gives the mode to the last directory only; the
    parents get the umask's default (0755, or 0777 under ``umask 0``). Directories that exist
    already are left as they are. Returns ``path``.
    """
    target = Path(path)
    missing: list[Path] = []
    current = target
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            # mkdir applies the umask, which can only remove bits from 0700: never wider.
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue  # a racing creator made it (and sets its mode itself)
        os.chmod(directory, DIR_MODE)
    return target


def is_within(path: _PathLike, directory: _PathLike) -> bool:
    """Whether ``path`` is ``directory`` or below it, symbolic links resolved (neither need
    exist)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(directory))


def _fsync(path: _PathLike, flags: int) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: _PathLike) -> None:
    """fsync the file at ``path``."""
    _fsync(path, 0)


def fsync_dir(path: _PathLike) -> None:
    """fsync the directory at ``path``, making the names created or renamed in it durable."""
    _fsync(path, os.O_DIRECTORY)


def _load_syncfs() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function: Callable[[int], int] = libc.syncfs
    except (OSError, AttributeError):
        return None  # not Linux (or a libc without it)
    return function


_SYNCFS = _load_syncfs()


def can_syncfs() -> bool:
    """True when :func:`syncfs` is available (Linux)."""
    return _SYNCFS is not None


def syncfs(path: _PathLike) -> None:
    """Make everything written to the file system holding ``path`` durable, in one call.

    Linux's ``syncfs(2)``: every file's data and every directory entry written on that file
    system before the call is on stable storage when it returns (one journal commit and one
    cache flush, however many files were written). Raises :class:`OSError` on a write-back
    error, and when :func:`can_syncfs` is false.
    """
    if _SYNCFS is None:
        raise OSError(errno.ENOSYS, "syncfs is not available on this system")
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _SYNCFS(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
    finally:
        os.close(fd)


def _temp_name(target: Path) -> Path:
    # Unique per process, thread and call: threads of one process must never share a temporary
    # file, or one renames the other's half-written file away (FileNotFoundError).
    tag = f"{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}"
    return target.with_name(f".{target.name}.tmp-{tag}")


def atomic_write(path: _PathLike, data: bytes, *, durable: bool = True) -> None:
    """Replace the file at ``path`` by ``data`` (mode 0600), all or nothing.

    The data goes to a unique temporary file beside ``path``, which is fsynced, renamed over
    ``path``, and then the directory is fsynced: a crash leaves the old file or the new one.
    The parent directory must exist. With ``durable=False`` nothing is fsynced: readers see
    the old file or the new one, but a power loss may leave the old one, or an empty file, until
    a later flush of the file system (:func:`syncfs`) covers the write.
    """
    target = Path(path)
    tmp = _temp_name(target)
    fd = os.open(tmp, NEW_FILE_FLAGS, FILE_MODE)
    try:
        try:
            # Not a buffered file object: that costs three more system calls (fstat, ioctl,
            # lseek), a good part of writing a high-water mark.
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        fsync_dir(target.parent)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_new_file(path: _PathLike, data: bytes) -> None:
    """Write ``data`` to a new owner-only file at ``path``, durably; never overwrites.

    Raises :class:`FileExistsError` when ``path`` exists. Missing parents are made owner-only.
    """
    target = Path(path)
    make_private_dirs(target.parent)
    fd = os.open(target, NEW_FILE_FLAGS, FILE_MODE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    fsync_dir(target.parent)


def open_lock_file(path: _PathLike) -> int:
    """Open (creating owner-only) the lock file at ``path``, never through a symbolic link."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE)


# Descriptors holding an flock in this process, by the thread holding it (see lock_held).
_HELD: dict[int, int] = {}


def lock_held(fd: int) -> None:
    """Note that this thread holds an ``flock`` on ``fd`` until :func:`release_lock`. A child
    that another thread forks meanwhile closes its copy of ``fd`` at once: kept, the copy would
    hold the lock for the child's whole life once this process let go of it or died."""
    _HELD[fd] = threading.get_ident()


def take_flock(fd: int, deadline: float | None = None, poll: float = 0.005) -> bool:
    """Take an exclusive ``flock`` of ``fd`` and note it (:func:`lock_held`): waiting as long as
    it takes, or with ``deadline`` (a :func:`time.monotonic` time) polling every ``poll``
    seconds until then. True once held, False when another holder still has it at the deadline;
    :class:`OSError` where the file system has no ``flock``."""
    if deadline is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        lock_held(fd)
        return True
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)
        else:
            lock_held(fd)
            return True


def release_lock(fd: int) -> None:
    """Release the ``flock`` on ``fd`` explicitly (closing alone would leave it held through a
    forked child's copy of the descriptor); the caller still closes ``fd``."""
    _HELD.pop(fd, None)
    fcntl.flock(fd, fcntl.LOCK_UN)


def _after_fork_in_child() -> None:
    # The holders of the other descriptors are not in the child, and never release them here;
    # the forking thread's own stay (its code goes on in the child and releases them).
    me = threading.get_ident()
    for fd, holder in list(_HELD.items()):
        if holder != me:
            del _HELD[fd]
            with contextlib.suppress(OSError):
                os.close(fd)


os.register_at_fork(after_in_child=_after_fork_in_child)


def open_private_file(path: _PathLike, *, overwrite: bool) -> int:
    """Open the file at ``path`` for writing, mode 0600, never through a link; return its fd.

    For exports. A new file is created exclusively (``O_EXCL``). An existing one is
    ``FileExistsError`` unless ``overwrite``; then it is opened only if it is a regular file
    (``OSError`` with ``EISDIR``/``ELOOP``/... otherwise, never blocking on a FIFO), and the
    caller truncates it once it has checked what it opened.
    """
    try:
        return os.open(path, NEW_FILE_FLAGS, FILE_MODE)
    except FileExistsError:
        if not overwrite:
            raise
    # Non-blocking: opening a FIFO left there for writing would wait for a reader forever.
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(path: _PathLike, max_bytes: int) -> bytes:
    """The whole content of the regular file at ``path``, in four system calls.

    Never blocks and never reads without bound: a FIFO, device or directory in its place (a
    local trick that would hang a plain ``open``) raises ``OSError(EINVAL)`` without a read,
    and a file longer than ``max_bytes`` raises ``OSError(EFBIG)``. On a hot path (a large
    memory file is a few dozen chunk objects) ``open().read()`` costs more than the read
    itself: a buffered reader, and three more system calls (fstat, lseek, a read at the end).
    """
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        size = info.st_size
        if size > max_bytes:
            raise OSError(errno.EFBIG, f"longer than {max_bytes:,} bytes", str(path))
        data = os.read(fd, size)
        if len(data) < size:  # a short read (not seen on regular files): finish the file
            parts = [data]
            while part := os.read(fd, size):
                parts.append(part)
            data = b"".join(parts)
        if len(data) > max_bytes:  # it grew since the fstat
            raise OSError(errno.EFBIG, f"longer than {max_bytes:,} bytes", str(path))
        return data
    finally:
        os.close(fd)
