"""The redo log as a layer over objects and refs (design.md, "The redo log"): a write is a
record of the log, made durable by one ``fdatasync``; a checkpoint publishes what the log holds
into the repository (one pack, the branch's ref file) and starts a new generation; after a
power loss, recovery publishes what the log kept. The log's file format is ``wal.py``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from ..errors import ConflictError, IntegrityError, StorageError
from ..fsutil import atomic_write
from . import flush, wal
from .config import Config
from .files import PROCESS
from .flush import Durability
from .objects import (
    ANY_KIND,
    GITLINK,
    Objects,
    Reader,
    loose_objects,
    parse_commit,
    parse_tree,
    read_loose,
    tag_target,
)
from .pack import CHECKPOINT_DEFLATE_MIN, write_pack
from .refs import BRANCH, Refs

# Repositories this process logged writes to that it has not published since, by absolute
# path, with the id of the process that logged them: a forked child inherits the dict, and must
# not publish (or wait on locks) for its parent. Paths only: no key, no object is kept alive.
LOGGED: dict[str, int] = {}


class _OpenLog:
    """The redo log, open for reading by one :class:`RedoLog` in one process, so that following
    it costs no ``open``: which file it is (device, inode), and its header as last read.

    A log resized is a new file renamed over the old one; one removed and written again is
    another file too: either shows as another inode at the path (:meth:`shows`), and while
    this one is open its inode cannot be reused. A checkpoint that keeps the file rewrites its
    header in place, with the next generation number: :meth:`header` sees other bytes.
    """

    def __init__(self, path: Path) -> None:
        self.fd = wal.open_log(path, write=False)
        self.owner = PROCESS[0]
        info = os.fstat(self.fd)
        self.device, self.inode = info.st_dev, info.st_ino
        self._raw = b""
        self._header: wal.Header | None = None

    def shows(self, info: os.stat_result) -> bool:
        """True when ``info`` (an ``lstat`` of the log's path) is this file, in this process."""
        return (info.st_ino, info.st_dev) == (self.inode, self.device) and (
            self.owner is PROCESS[0]
        )

    def close_inherited(self) -> None:
        """In a child just forked, before it opens anything: close its copy of the descriptor
        (which still names this log; kept, it would pin a replaced log's file for the child's
        life), and never close that number again."""
        self.owner = ""
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def header(self) -> wal.Header | None:
        """The header as it is now (one ``pread``; parsed again only when its bytes changed)."""
        raw = os.pread(self.fd, wal.HEADER_LENGTH, 0)
        if raw != self._raw:
            self._raw, self._header = raw, wal.Header.parse(raw)
        return self._header

    def __del__(
        self, process: list[str] = PROCESS, close: Callable[[int], None] = os.close
    ) -> None:
        # Closed only by the process that opened it: a forked child's copy of the number may
        # name another file by now (the child inherits it and forgets it, see shows). The
        # process tag and os.close are bound here: at interpreter exit the module's globals
        # may already be gone when this runs.
        if getattr(self, "owner", None) is process[0]:
            try:  # noqa: SIM105 - not contextlib.suppress: that global may be gone too
                close(self.fd)
            except OSError:
                pass


class RedoLog:
    """The redo log of the repository at ``path``, over its ``objects``, ``refs`` and ``config``.

    ``sync`` makes what was written to the repository durable; ``after_pack`` is told the bytes
    a checkpoint packed (the repository looks whether maintenance is due).
    """

    def __init__(
        self,
        path: Path,
        objects: Objects,
        refs: Refs,
        config: Config,
        sync: Callable[[], None],
        after_pack: Callable[[int], None],
        *,
        enabled: bool,
    ) -> None:
        # Whether the write mode logs: else the log is never read, and a checkpoint is a flush.
        self.enabled = enabled
        self.path = path
        self._objects_dir = str(path / "objects")
        self._objects = objects
        self._refs = refs
        self._config = config
        self._sync = sync
        self._after_pack = after_pack
        self.file = self.path / wal.LOG_NAME
        self._log_path = str(self.file)  # a str: os.fspath of a Path on every view costs
        # This repository in the registry of those to publish at exit (see LOGGED).
        self._exit_key = os.path.abspath(str(path))
        # The process that logged writes through this handle not yet published by it.
        self._logged_by: int | None = None
        # What this process knows of the redo log's current generation (its records' heads and
        # objects, which are nowhere else until a checkpoint; see view), and the log kept open
        # to follow it, both guarded by _view_lock.
        self._tail: wal.Tail | None = None
        self._view_lock = threading.Lock()
        self._reading: _OpenLog | None = None
        # The objects written since the last record or checkpoint, which the next record
        # carries (see publish_logged), and their payloads' total size.
        self._written: dict[str, tuple[bytes, bytes]] = {}
        self._pending_bytes = 0
        # Once the log is seen started in this boot it stays so (only a reboot changes the
        # boot id), so a writer stops reading its header at every lock.
        self._this_boot = False

    def after_fork_in_child(self) -> None:
        # Another thread of the parent may have held the lock, halfway through following the
        # log: a fresh lock, and the log is followed again from its start, through a
        # descriptor of the child's own.
        self._view_lock = threading.Lock()
        self._tail = None
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.close_inherited()

    def add(self, kind: bytes, payload: bytes) -> str:
        """Keep an object for the next record (readable by this process at once); its id."""
        oid = wal.object_id(kind, payload)
        if oid not in self._written:
            self._written[oid] = (kind, payload)
            self._pending_bytes += len(payload)
        return oid

    def discard_written(self) -> None:
        """Forget objects a write that failed before its record left behind: not in any record,
        they must not join the next one."""
        self._written, self._pending_bytes = {}, 0

    def logged(self, oid: str) -> tuple[bytes, bytes] | None:
        """``(type, payload)`` of ``oid`` if it is in the redo log (or on its way there) as
        far as this process has read it, else None."""
        found = self._written.get(oid)
        if found is None:
            tail = self._tail
            found = None if tail is None else tail.objects.get(oid)
        return found

    def object_ids(self) -> set[str]:
        """The ids of the objects only the redo log may hold (read up to its end now)."""
        tail = self.view()
        return set(self._written) | (set(tail.objects) if tail is not None else set())

    def view(self) -> wal.Tail | None:
        """The redo log's current generation as far as it is written: its records' last head
        and objects (version 2), read from where this process last stopped; None when there is
        no log, it is of version 1 (all it names is in the repository), or its header is torn
        (recovery's business: readers then see the repository as it is).

        The log stays open (see :class:`_OpenLog`): a log with nothing new costs an ``lstat``
        (the same file?), a ``pread`` of the header (the same generation?) and a ``pread`` of
        the slot after the last record read (zeros, or a record of another generation).
        """
        if not self.enabled:
            return None
        with self._view_lock:
            try:
                info = os.lstat(self._log_path)
            except (FileNotFoundError, NotADirectoryError):
                self._tail, self._reading = None, None
                return None
            except OSError as exc:
                raise IntegrityError(f"{wal.LOG_NAME} cannot be read: {exc.strerror}") from None
            log = self._reading
            if log is None or not log.shows(info):
                # None yet, or opened by the parent of this process (its descriptor may have
                # been closed and its number reused since), or a new file (a log that was
                # resized, or removed and written again): open the one the path names now.
                try:
                    log = self._reading = _OpenLog(self.file)
                except FileNotFoundError:
                    self._tail, self._reading = None, None
                    return None
                except OSError as exc:
                    raise IntegrityError(
                        f"{wal.LOG_NAME} in the repository cannot be read: {exc.strerror or exc}"
                    ) from None
            header = log.header()
            self._tail = self._follow(log.fd, header, log.inode)
            return self._tail

    def _follow(
        self, fd: int, header: wal.Header | None, inode: int | None = None
    ) -> wal.Tail | None:
        """Under ``_view_lock``: the view of the log open at ``fd`` (see :meth:`view`)."""
        if header is None or header.version == 1:
            return None
        _check_log_version(header, self.path)
        return wal.follow(fd, header, self._tail, BRANCH, inode)

    def loggable(self, name: str, new: str, expected: str | None) -> bool:
        """True when the move extends the branch by one commit this process just wrote, and
        what it wrote is small enough for the log (:func:`wal.loggable`).

        Only such a move goes through the log: everything its commit reaches is then in this
        record, in an earlier record of the generation, or in what the generation started from.
        """
        written = self._written.get(new)
        if name != BRANCH or written is None or written[0] != b"commit":
            return False
        if not wal.loggable(self._pending_bytes, len(self._written)):
            return False
        parents = parse_commit(written[1], new).parents
        return parents == (() if expected is None else (expected,))

    def publish_logged(self, name: str, new: str, expected: str | None) -> Durability:
        """Move the branch by appending its record to the log, with no flush and nothing
        written to the repository: the returned ticket makes the record durable (one
        ``fdatasync``), and a checkpoint publishes it."""
        self._append(name, new, expected, self._written)
        self._written, self._pending_bytes = {}, 0
        return flush.log_group(self.file).ticket()

    def _append(
        self,
        name: str,
        new: str,
        expected: str | None,
        objects: Mapping[str, tuple[bytes, bytes]],
    ) -> None:
        """Under the writer lock: append the record of a move of ``name`` to ``new`` from
        ``expected``, holding ``objects`` (``(type, payload)`` by id). The compare-and-swap of
        design.md, "Writing", step 6: the log's head, or the ref file when the generation has
        no record, must be ``expected``. Checkpoints first when the log is missing, full, of
        another version or boot, or when the ref file moved since the generation started
        (something else moved the branch)."""
        for attempt in range(2):
            try:
                fd = wal.open_log(self.file, write=True)
            except FileNotFoundError:
                fd = -1
            try:
                header = None if fd < 0 else wal.read_header_fd(fd)
                if header is not None:
                    _check_log_version(header, self.path)
                usable = header is not None and header.version == wal.VERSION
                if not usable or header is None or header.boot != wal.boot_id():
                    if attempt:
                        raise StorageError(f"the redo log of {self.path} cannot be started")
                    self.checkpoint()
                    continue
                with self._view_lock:
                    tail = self._tail = wal.follow(fd, header, self._tail, BRANCH)
                current = tail.last if tail.records else self._refs.ref_file(BRANCH)
                if not tail.records and current != header.base:
                    if attempt:
                        raise StorageError(f"the redo log of {self.path} cannot be started")
                    self.checkpoint()
                    continue
                if current != expected:
                    what = "already exists" if expected is None else "moved during the write"
                    raise ConflictError(f"the ref {name} {what}")
                record = wal.Record(
                    header.generation, tail.seq, ((name, new),), tuple(objects.values())
                )
                data = record.to_bytes()
                size = os.fstat(fd).st_size
                end = tail.offset + len(data)
                if (end > size or end > wal.max_size()) and tail.records:
                    if attempt:
                        raise StorageError(f"the redo log of {self.path} cannot be started")
                    # A full log is sized again from how many records this generation held.
                    self.checkpoint(wal.next_capacity(size, tail.records))
                    continue
                if not tail.records:
                    self._config.mark_log_pending()
                offset = tail.offset
                if os.pwrite(fd, data, offset) != len(data):
                    raise OSError(errno.ENOSPC, "the redo log's record was cut short")
                LOGGED[self._exit_key] = self._logged_by = os.getpid()
                with self._view_lock:
                    # Unless a reader of this process (another thread) has read the record
                    # since it was written: taking it in twice would put the tail past it.
                    if self._tail is tail and tail.seq == record.seq:
                        tail.add(record, offset + len(data), BRANCH, ids=tuple(objects))
                return
            finally:
                if fd >= 0:
                    os.close(fd)

    def checkpoint(
        self, size: int | None = None, *, clear: bool = False, maintain: bool = True
    ) -> None:
        """Under the writer lock: publish what the log holds and start a new generation (see
        :meth:`GitRepo.checkpoint`); without the log, flush the repository.

        ``size``: the log's preallocated size from now on (a new file when it changes; by
        default a new log is :data:`wal.MIN_CAPACITY` long and an existing one keeps its size).
        ``clear``: the config stops naming the log's extension. ``maintain``: tell
        ``after_pack`` what a pack was written of."""
        if not self.enabled:
            self._sync()
            return
        boot = wal.boot_id()
        assert boot is not None  # the write mode logs only where there is a boot id
        try:
            fd = wal.open_log(self.file, write=True)
        except FileNotFoundError:
            fd = -1
        try:
            old = None if fd < 0 else wal.read_header_fd(fd)
            with self._view_lock:
                tail = None if fd < 0 else self._follow(fd, old)
            objects = dict(tail.objects) if tail is not None else {}
            objects.update(self._written)
            # One pack of them all, durable (fsynced, renamed, both directories fsynced) before
            # the ref below can name what it holds. Newest first, as git's gc orders a pack: a
            # tree's newest version is then stored whole and its older ones as deltas of newer
            # ones (a delta's base comes before it), so a cold read of the current trees pays
            # no delta chain; oldest first, the current ones would lie at the ends of the
            # chains (performance.md, "the cold load of a split directory").
            write_pack(
                ((oid, kind, payload) for oid, (kind, payload) in reversed(objects.items())),
                self.path / "objects" / "pack",
                self.path,
                deflate_min=CHECKPOINT_DEFLATE_MIN,
            )
            if tail is not None and tail.records:
                assert tail.last is not None
                self._refs.swap_ref(BRANCH, tail.last, None, lambda: None, check=None)
            self._sync()
            if clear:
                self.clear_log_pending()
            head = self._refs.ref_file(BRANCH)
            header = wal.Header(1 if old is None else old.generation + 1, boot, head)
            resize = old is not None and size is not None and size != os.fstat(fd).st_size
            if old is None or resize:
                # Missing, torn, or resized: a new file, so no stale record of an earlier
                # generation can ever be taken for one of this generation, and all of its zeros
                # are written (see wal.new_log).
                atomic_write(self.file, wal.new_log(header, size or wal.MIN_CAPACITY))
            else:
                wal.write_header(fd, header)
        finally:
            if fd >= 0:
                os.close(fd)
        with self._view_lock:
            self._tail = None
        self._written, self._pending_bytes = {}, 0
        if objects and maintain:
            # One more pack: enough of them are merged, a bounded amount of it each time.
            self._after_pack(sum(len(payload) for _, payload in objects.values()))

    def scrub(self) -> None:
        """Under the writer lock, right after a checkpoint (the generation has no record): write
        zeros over every byte of the log past its header, in place, and flush them, so that no
        stale record of an earlier generation keeps the objects it carried (a redaction's old
        versions). In place, not a new file renamed over it, so the blocks that held them are
        overwritten on file systems that write in place (see docs/security.md)."""
        if not self.enabled:
            return
        try:
            fd = wal.open_log(self.file, write=True)
        except FileNotFoundError:
            return
        try:
            size = os.fstat(fd).st_size
            step = 1 << 20
            for offset in range(wal.HEADER_SIZE, size, step):
                os.pwrite(fd, bytes(min(step, size - offset)), offset)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        with self._view_lock:
            self._tail = None

    def clear_log_pending(self) -> None:
        """After a checkpoint's flush (under the writer lock): the repository alone is whole
        again, so git may read it (see :meth:`Config.clear_log_pending`), and this process has
        nothing left to publish there."""
        self._config.clear_log_pending()
        LOGGED.pop(self._exit_key, None)
        self._logged_by = None

    def logged_here(self) -> bool:
        """True when this process logged writes through this object that no checkpoint of the
        clearing kind through it has published since."""
        return self._logged_by == os.getpid()

    def recover(self, reader: Reader) -> None:
        """Under the writer lock: after a power loss, publish what the log holds; idempotent.

        Removes loose objects whose content does not match their id (torn by the power loss:
        only a checkpoint cut short, or a version 1 log's writes, wrote them unflushed). A
        version 1 log's valid records have their missing objects written again. The branch is
        pointed at the last record's head when the generation has records; else (and for a
        version 1 log) at it unless the ref file names a complete commit the log does not
        know (a move by something else). Then a checkpoint publishes the rest. Nothing happens
        if the log was started in this boot (another process recovered already).
        """
        if not self.rebooted():
            return
        header = wal.read_header(self.file)
        objects = self.path / "objects"
        with contextlib.suppress(FileNotFoundError):
            for oid in loose_objects(objects):
                try:
                    read_loose(self._objects_dir, oid, ANY_KIND)
                except IntegrityError:
                    with contextlib.suppress(OSError):
                        (objects / oid[:2] / oid[2:]).unlink()
        heads: list[str | None] = [None]
        if header is not None:
            fd = wal.open_log(self.file, write=False)
            try:
                found, heads = wal.replay_plan(fd, header, BRANCH)
            finally:
                os.close(fd)
            if header.version == 1:
                for record in found:
                    for _, kind, payload in wal.record_objects(record):
                        self._objects.write_loose(kind, payload)
        last = heads[-1]
        logged = header is not None and header.version != 1 and len(heads) > 1
        try:
            current, readable = self._refs.ref_file(BRANCH), True
        except IntegrityError:  # the rename reached the disk, the lock's content did not
            current, readable = None, False
        if not readable or (
            current != last
            and (logged or current in heads or not self._complete(reader, current, heads))
        ):
            self._refs.force_ref(BRANCH, last)
        self.checkpoint()

    def rebooted(self) -> bool:
        """True when the log was last started in another boot (or its header is torn)."""
        if self._this_boot or not self.enabled:
            return False
        header = wal.read_header(self.file)
        if header is None:
            # No log (an older store, or a clone): every write it holds was flushed.
            return os.path.lexists(self.file)
        _check_log_version(header, self.path)
        self._this_boot = header.boot == wal.boot_id()
        return not self._this_boot

    def _complete(self, reader: Reader, oid: str | None, heads: list[str | None]) -> bool:
        """True when every object ``oid`` reaches is present, down to the log's heads."""
        if not oid:
            return False
        stop = {head for head in heads if head}
        stack, seen = [oid], set()
        while stack:
            current = stack.pop()
            if current in seen or current in stop:
                continue
            seen.add(current)
            if not reader.has(current):
                return False
            try:
                kind, data = reader.read_any(current, ANY_KIND)
            except IntegrityError:
                return False
            if kind == b"commit":
                commit = parse_commit(data, current)
                stack += [commit.tree, *commit.parents]
            elif kind == b"tree":
                stack += [e.oid for e in parse_tree(data, current) if e.mode != GITLINK]
            elif kind == b"tag":
                stack.append(tag_target(data, current))
        return True


def _check_log_version(header: wal.Header, repo: Path) -> None:
    """Refuse a redo log written by a newer gitmem: its records may hold writes this version
    cannot read, and a checkpoint of its own would throw them away; that gitmem publishes them."""
    if header.version not in wal.KNOWN_VERSIONS:
        known = " and ".join(map(str, wal.KNOWN_VERSIONS))
        raise IntegrityError(
            f"the redo log {wal.LOG_NAME} is of version {header.version}, written by a newer "
            f"gitmem (this one reads versions {known}); it holds that gitmem's acknowledged "
            "writes, which are in no other place, so keep it: publish them with that gitmem, "
            f"run `gitmem --repo {shlex.quote(str(repo))} checkpoint` with it, and this one "
            "opens the store"
        )
