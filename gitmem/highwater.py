"""The client's high-water marks: the newest commit it has seen of each replica and remote.

An attacker who can write the repository can point the branch back at an older, authentic
commit; only state the repository does not hold can notice. Marks live in a per-user state
directory (``GITMEM_STATE_DIR``, else ``$XDG_STATE_HOME/gitmem``, else ``~/.local/state/gitmem``),
one owner-only JSON file per replica path and per remote URL of each store: a backup that is
behind the original is not a rollback, the same backup going backwards is.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .fsutil import (
    FILE_MODE,
    atomic_write,
    explicit_dir,
    fsync_dir,
    make_private_dirs,
    open_lock_file,
    read_regular_file,
    release_lock,
    take_flock,
    user_dir,
    write_all,
)

# A mark or a known-store record is a few hundred bytes; anything longer is not one.
_STATE_FILE_MAX = 64 * 1024


def default_state_dir() -> Path:
    """Where high-water marks live unless a caller says otherwise."""
    explicit = explicit_dir("GITMEM_STATE_DIR")
    if explicit is not None:
        return explicit
    return user_dir("XDG_STATE_HOME", os.path.join(".local", "state")) / "gitmem"


@dataclass(frozen=True)
class Mark:
    """The newest commit seen and its sequence number."""

    commit: str
    seq: int


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


class HighWater:
    """The high-water mark of one replica (a repository path) or one remote (a URL) of a store.

    With neither ``replica`` nor ``remote`` it is the single per-store mark of format 1
    clients, which the first replica opened adopts.

    Version 2 of the mark is one file updated in place (``<kind>-<digest>.mark``): two
    checksummed slots, the newer of which counts, so that a write torn by a crash (or read while
    it happens) leaves the other intact. Version 1 (``<kind>-<digest>.json``, replaced whole)
    is still read while no version 2 file exists.
    """

    def __init__(
        self,
        store_id: str,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        replica: str | os.PathLike[str] | None = None,
        remote: str | None = None,
    ) -> None:
        self.dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self._legacy = self.dir / f"{store_id}.json"
        if replica is not None:
            self.where = str(Path(replica).resolve())
            stem = f"replica-{_digest(self.where)}"
        elif remote is not None:
            self.where = remote
            stem = f"remote-{_digest(remote)}"
        else:
            self.where = ""
            stem = ""
        # The version 1 file (the format 1 client's per-store file when neither is given).
        self.path = self.dir / store_id / f"{stem}.json" if stem else self._legacy
        self.mark_path = str(self.dir / store_id / f"{stem}.mark") if stem else None
        self._turn_path = self.dir / store_id / f"{stem}.turn" if stem else None

    def read(self) -> Mark | None:
        """The recorded mark, or None when this client has never seen the replica or remote."""
        if self.mark_path is not None:
            try:
                data = read_regular_file(self.mark_path, _MARK_FILE_BYTES)
            except FileNotFoundError:
                data = b""  # never written by this version: the version 1 file, if any
            except OSError:
                return None  # a FIFO or a directory in its place: damaged, replaced when written
            if data:
                return _best_slot(data)
        return self._v1_mark()

    def _read_v1(self) -> Mark | None:
        """The mark in the version 1 file; FileNotFoundError when there is none."""
        try:
            body = json.loads(read_regular_file(self.path, _STATE_FILE_MAX))
            return Mark(str(body["commit"]), int(body["seq"]))
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            # A damaged mark (or a FIFO in its place, which must not block) protects nothing;
            # it is replaced by the next one seen.
            return None

    def _legacy_to_adopt(self) -> bool:
        return bool(self.where) and self.path.name.startswith("replica-") and self._legacy.exists()

    def _adopt_legacy(self) -> None:
        """Under the state directory's lock: make a format 1 per-store mark the (version 1) mark
        of this replica (the first to look wins)."""
        if not self._legacy_to_adopt() or self.path.exists():
            return
        with contextlib.suppress(FileNotFoundError):
            make_private_dirs(self.path.parent)
            os.replace(self._legacy, self.path)
            fsync_dir(self.path.parent)

    def _v1_mark(self) -> Mark | None:
        """The version 1 mark (adopting a format 1 client's, see :meth:`_adopt_legacy`)."""
        try:
            return self._read_v1()
        except FileNotFoundError:
            if not self._legacy_to_adopt():
                return None
        with _state_lock(self.dir):
            self._adopt_legacy()
        with contextlib.suppress(FileNotFoundError):
            return self._read_v1()
        return None

    def advance(self, mark: Mark) -> None:
        """Record ``mark`` unless a newer one is already recorded (other processes write too).

        Under an exclusive ``flock`` of the mark file: read both slots, and unless the newer
        holds ``mark``'s sequence number or more, write ``mark`` into the other one. Not
        flushed: every commit a mark names was durable before the mark was written, so the mark
        is never ahead of the stored branch; a power loss can only take back its latest
        advances, and the next read of the head re-advances it. The next write's flush of the
        file system (GitRepo.sync) makes it durable when the state directory shares the
        repository's file system.
        """
        if self.mark_path is None:
            raise ValueError("a format 1 per-store mark is only read, never advanced")
        fd = self._open_for_update()
        if fd is None:
            # Not a regular file in its place (a FIFO...): replaced whole by the new mark.
            self._replace(mark, durable=False)
            return
        try:
            take_flock(fd)
            data = os.pread(fd, _MARK_FILE_BYTES, 0)
            if not data:
                # A new file: it starts from the version 1 mark when that one is newer.
                carried = self._v1_mark()
                first = carried if carried is not None and carried.seq >= mark.seq else mark
                write_all(fd, _slot_bytes(first) * 2)
                return
            newest, newest_slot = None, 1  # with no valid slot, slot 0 is written
            for index in range(2):
                found = _slot_mark(data[index * _SLOT : (index + 1) * _SLOT])
                if found is not None and (newest is None or found.seq > newest.seq):
                    newest, newest_slot = found, index
            if newest is not None and newest.seq >= mark.seq:
                return
            # Into the other slot: torn, it leaves the newer one as it was.
            os.pwrite(fd, _slot_bytes(mark), (1 - newest_slot) * _SLOT)
        finally:
            release_lock(fd)  # a no-op when the flock itself failed
            os.close(fd)

    def _open_for_update(self) -> int | None:
        """The mark file opened for reading and writing (made owner-only if missing), or None
        when something other than a regular file is in its place."""
        assert self.mark_path is not None
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.mark_path, flags, FILE_MODE)
        except FileNotFoundError:
            make_private_dirs(self.path.parent)
            fd = os.open(self.mark_path, flags, FILE_MODE)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                return None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return fd

    @contextlib.contextmanager
    def turn(self, deadline: float) -> Iterator[None]:
        """Hold, for the block, this replica's or remote's turn: an exclusive ``flock`` of
        ``<kind>-<digest>.turn`` beside the mark, which the processes sharing this state
        directory take one at a time (the kernel releases it when its holder dies).

        Raises :class:`TimeoutError` when another process still holds it at ``deadline`` (a
        :func:`time.monotonic` time). Where the lock file cannot be made or opened (a read-only
        state directory, something other than a file in its place), the block runs without
        it: taking turns saves work, it protects nothing.
        """
        fd = None if self._turn_path is None else _open_turn(self._turn_path)
        if fd is None:
            yield
            return
        try:
            try:
                held = take_flock(fd, deadline, _TURN_POLL_SECONDS)
            except OSError:  # no flock on this file system: without a turn, as above
                yield
                return
            if not held:
                raise TimeoutError(f"{self._turn_path} is still held")
            try:
                yield
            finally:
                release_lock(fd)
        finally:
            os.close(fd)

    def reset(self, mark: Mark | None) -> None:
        """Replace the mark unconditionally (the user accepted the current branch)."""
        if self.mark_path is None:
            raise ValueError("a format 1 per-store mark is only read, never reset")
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a version 1 mark must not come back when the file is gone
        if mark is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.mark_path)
        else:
            self._replace(mark, durable=True)  # a user's decision: it must not be lost

    def _replace(self, mark: Mark, *, durable: bool) -> None:
        """Replace the mark file whole (both slots ``mark``), atomically."""
        assert self.mark_path is not None
        data = _slot_bytes(mark) * 2
        try:
            atomic_write(self.mark_path, data, durable=durable)
        except FileNotFoundError:  # the directory was removed since
            make_private_dirs(self.path.parent)
            atomic_write(self.mark_path, data, durable=durable)


def _open_turn(path: Path) -> int | None:
    """The turn file at ``path`` opened (made owner-only if missing, never through a symbolic
    link), or None when it cannot be, or something other than a regular file is there."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        make_private_dirs(path.parent)
        fd = os.open(path, flags, FILE_MODE)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


# How often a process waiting for a turn (HighWater.turn) looks whether it is free.
_TURN_POLL_SECONDS = 0.005

# A version 2 mark file: two slots of this many bytes, each one line of ASCII:
# "gitmem-mark 2 <seq> <commit> <crc32>" (the CRC-32 of what precedes it, 8 hex digits),
# padded with spaces, then a newline.
_SLOT = 128
_MARK_FILE_BYTES = 2 * _SLOT
_SLOT_TAG = b"gitmem-mark 2 "


def _slot_bytes(mark: Mark) -> bytes:
    body = _SLOT_TAG + f"{mark.seq} {mark.commit}".encode("ascii")
    line = body + b" %08x" % zlib.crc32(body)
    return line.ljust(_SLOT - 1) + b"\n"


# A pure function of the slot's bytes, called twice per advance (and per read) on slots that
# rarely change between calls: the last few parses are kept, so that an advance parses a slot
# only when it changed.
@functools.lru_cache(maxsize=8)
def _slot_mark(slot: bytes) -> Mark | None:
    """The mark in one slot, or None when it is empty, torn or damaged."""
    line = slot.rstrip(b" \n")
    body, _, check = line.rpartition(b" ")
    if len(slot) != _SLOT or not body.startswith(_SLOT_TAG):
        return None
    if check != b"%08x" % zlib.crc32(body):
        return None
    seq, _, commit = body[len(_SLOT_TAG) :].partition(b" ")
    if not seq.isdigit() or len(commit) != 40 or not _HEX.issuperset(commit):
        return None
    return Mark(commit.decode("ascii"), int(seq))


def _best_slot(data: bytes) -> Mark | None:
    """The newer of the two slots that hold a mark (None when neither does)."""
    marks = [_slot_mark(data[i * _SLOT : (i + 1) * _SLOT]) for i in range(2)]
    found = [m for m in marks if m is not None]
    return max(found, key=lambda m: m.seq) if found else None


_HEX = frozenset(b"0123456789abcdef")


@contextlib.contextmanager
def _state_lock(directory: Path) -> Iterator[None]:
    """Hold the exclusive lock of a state directory (made owner-only if missing)."""
    try:
        fd = open_lock_file(directory / ".lock")
    except FileNotFoundError:
        make_private_dirs(directory)
        fd = open_lock_file(directory / ".lock")
    try:
        take_flock(fd)
        try:
            yield
        finally:
            release_lock(fd)
    finally:
        os.close(fd)


class KnownStores:
    """Which store id this client last saw at each repository path.

    Without it, someone who deletes a store (or just its refs) would make the next
    ``GitMemoryTool`` silently start a new, empty store there, and no high-water mark would
    notice, since the new store has a new id.
    """

    def __init__(self, state_dir: str | os.PathLike[str] | None = None) -> None:
        self.dir = (Path(state_dir) if state_dir is not None else default_state_dir()) / "paths"

    def _file(self, repo: Path) -> Path:
        digest = hashlib.sha256(str(repo.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
        return self.dir / f"{digest[:32]}.json"

    def store_at(self, repo: Path) -> str | None:
        """The id of the store last seen at ``repo``, or None."""
        try:
            return str(json.loads(read_regular_file(self._file(repo), _STATE_FILE_MAX))["store_id"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None

    def remember(self, repo: Path, store_id: str) -> None:
        """Record that ``repo`` holds the store ``store_id``."""
        if self.store_at(repo) == store_id:
            return
        body = json.dumps({"path": str(repo.resolve()), "store_id": store_id})
        # Under the directory's lock, like the marks: concurrent openers take turns.
        with _state_lock(self.dir):
            atomic_write(self._file(repo), body.encode("utf-8"))


class SlotHints:
    """Which passphrase slot of each store this user's passphrase opened last: the slot an open
    with a passphrase tries first, so that slots planted ahead of it cost nothing.

    Nothing secret: slot ids are in the repository. A hint missing, damaged or naming a slot that
    is gone only means the usual order (cheapest first).
    """

    def __init__(self, state_dir: str | os.PathLike[str] | None = None) -> None:
        self.dir = Path(state_dir) if state_dir is not None else default_state_dir()

    def _file(self, store_id: str) -> Path:
        return self.dir / store_id / "passphrase-slot"

    def slot_for(self, store_id: str) -> str | None:
        """The slot id recorded for ``store_id``, or None."""
        try:
            text = read_regular_file(self._file(store_id), _STATE_FILE_MAX).decode("ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return text if len(text) == 8 and _HEX.issuperset(text.encode("ascii")) else None

    def remember(self, store_id: str, slot: str) -> None:
        """Record ``slot`` as the one to try first for ``store_id``."""
        if self.slot_for(store_id) == slot:
            return
        path = self._file(store_id)
        with _state_lock(self.dir):
            try:
                atomic_write(path, (slot + "\n").encode("ascii"), durable=False)
            except FileNotFoundError:
                make_private_dirs(path.parent)
                atomic_write(path, (slot + "\n").encode("ascii"), durable=False)
