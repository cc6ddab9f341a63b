"""Blobs, trees, commits, refs, the writer lock and durability; the only module importing pygit2.

Object ids cross this module's boundary as 40-character hex strings so that nothing above it
depends on pygit2 types. One ``pygit2.Repository`` is kept per thread, since libgit2 repository
handles are not safe to share between threads.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import hashlib
import itertools
import logging
import os
import re
import shlex
import shutil
import signal
import stat
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import NamedTuple

import pygit2
from pygit2.enums import (
    ConfigLevel,
    CredentialType,
    FileMode,
    ObjectType,
    RepositoryOpenFlag,
)

from . import forksafe, knownhosts, wal
from .errors import (
    ConflictError,
    FormatLimitExceeded,
    GitMemError,
    IntegrityError,
    LockTimeout,
    NoStore,
    NotFound,
    PushRejected,
    RemoteError,
    StorageError,
    UsageError,
)
from .format import MAX_BLOB_BYTES, MAX_COMMIT_BYTES, MAX_TREE_BYTES
from .fsutil import (
    DIR_MODE,
    FILE_MODE,
    NEW_FILE_FLAGS,
    atomic_write,
    can_syncfs,
    fsync_dir,
    fsync_file,
    lock_held,
    make_private_dirs,
    open_lock_file,
    read_regular_file,
    release_lock,
    syncfs,
    write_all,
)
from .pack import CHECKPOINT_DEFLATE_MIN, PackMerge, write_pack, zlib_stored
from .pack import TMP_PREFIX as PACK_TMP_PREFIX

# gitmem acknowledges a write only once it is durable (design.md, "Writing", step 7). Where
# syncfs(2) exists, libgit2 writes without fsync: a write costs one fdatasync of the redo log
# (gitmem/wal.py), or, without a boot id to tell a power loss by, two flushes of the whole file
# system; elsewhere libgit2 fsyncs each file and the directory it is in.
_BATCHED = can_syncfs()
pygit2.settings.enable_fsync_gitdir(not _BATCHED)
# Refuse to write objects that do not parse, and check every object's hash on read, so a
# corrupted loose object is an error rather than silently different bytes.
pygit2.settings.enable_strict_object_creation(True)
pygit2.settings.enable_strict_hash_verification(True)
# While the redo log holds writes the repository does not, its config names this extension
# (design.md, "The redo log"): git and older gitmem refuse such a repository rather than read
# a stale one; this gitmem's libgit2 is told that it knows it.
LOG_EXTENSION = "gitmemlog"
pygit2.option(pygit2.enums.Option.SET_EXTENSIONS, [LOG_EXTENSION], 1)

BRANCH = "refs/heads/main"
META_REF = "refs/gitmem/meta"
_OWN = (BRANCH, META_REF)
LOCK_FILE = "gitmem.lock"
# The quarantine a fetch goes into (see GitRepo.fetching); removed when the fetch ends.
_FETCH_SCRATCH = "gitmem-fetch"
_STALE_SCRATCH_SECONDS = 3600
# The seconds a remote has to let a transfer connect and to answer each read or write, unless
# the caller gives its own (see _network_timeout).
NETWORK_TIMEOUT = 30.0
TREE_MODE = int(FileMode.TREE)
BLOB_MODE = int(FileMode.BLOB)
# A fixed, neutral identity at the epoch: the real author and time live in the encrypted record.
_SIGNATURE = pygit2.Signature("gitmem", "gitmem@invalid", 0, 0)
_LOCK_POLL_SECONDS = 0.005
# Loose objects written by gitmem itself (GitRepo._write_loose): the temporary file's prefix and
# the file mode git gives objects (read-only; owner-only, as every file gitmem makes).
_TMP_OBJECT = "tmp_obj_gitmem-"
_OBJECT_FILE_MODE = 0o400
_TMP_SEQ = itertools.count()


def _process_tag() -> str:
    # The process id and a random part (pids repeat: across containers sharing a volume, and
    # after a killed writer's temporary file was left behind), made once per process and again
    # in a forked child: os.getpid() and os.urandom() are each a system call.
    return f"{os.getpid()}-{os.urandom(4).hex()}"


_PROCESS = [_process_tag()]
# A file whose change time is at least this far in the past when it is checked cannot change
# again without its times changing: file-system timestamps are coarser than the clock, by up to
# a scheduler tick where they have sub-second parts (ext4, xfs, btrfs, tmpfs), by up to two
# seconds where they have none (FAT, old ext3). git's index uses the same "racy" rule.
_RACY_SECONDS = 2.0
_RACY_FINE_SECONDS = 0.05
_TYPE_NAMES = {
    int(ObjectType.COMMIT): b"commit",
    int(ObjectType.TREE): b"tree",
    int(ObjectType.BLOB): b"blob",
    int(ObjectType.TAG): b"tag",
}
_HEX = frozenset(b"0123456789abcdef")
# Whether loose objects' hashes are checked on read. Always on; tests turn it off (with
# libgit2's check) to stand in for a SHA-1 second preimage and reach the checks behind it.
_CHECK_LOOSE_HASHES = True
_OCTAL = frozenset(b"01234567")
# What an object reachable from some ref may be, for a reader that does not know its type.
_ANY_KIND = {
    b"commit": MAX_COMMIT_BYTES,
    b"tree": MAX_TREE_BYTES,
    b"blob": MAX_BLOB_BYTES,
    b"tag": MAX_COMMIT_BYTES,
}


class TreeEntry(NamedTuple):
    """One entry of a git tree: raw ``name``, ``oid`` (hex) and git ``mode``."""

    name: str
    oid: str
    mode: int


@dataclass(frozen=True)
class CommitInfo:
    """What a commit says: its id, tree id, parent ids and message bytes."""

    oid: str
    tree: str
    parents: tuple[str, ...]
    message: bytes


class _OpenLog:
    """The redo log, open for reading by one :class:`GitRepo` in one process, so that following
    it costs no ``open``: which file it is (device, inode), and its header as last read.

    A log resized is a new file renamed over the old one; one removed and written again is
    another file too: either shows as another inode at the path (:meth:`shows`), and while
    this one is open its inode cannot be reused. A checkpoint that keeps the file rewrites its
    header in place, with the next generation number: :meth:`header` sees other bytes.
    """

    def __init__(self, path: Path) -> None:
        self.fd = wal.open_log(path, write=False)
        self.owner = _PROCESS[0]
        info = os.fstat(self.fd)
        self.device, self.inode = info.st_dev, info.st_ino
        self._raw = b""
        self._header: wal.Header | None = None

    def shows(self, info: os.stat_result) -> bool:
        """True when ``info`` (an ``lstat`` of the log's path) is this file, in this process."""
        return (info.st_ino, info.st_dev) == (self.inode, self.device) and (
            self.owner is _PROCESS[0]
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
        self, process: list[str] = _PROCESS, close: Callable[[int], None] = os.close
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


class GitRepo:
    """A bare git repository, opened lazily once per thread."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._root = str(self.path)
        # The identity of the config file last found with reflogs off (see _no_reflogs), and
        # of each loose ref file read with the id it holds (see ref).
        self._clean_config: tuple[int, ...] | None = None
        self._refs: dict[str, tuple[tuple[int, ...], str]] = {}
        self._objects = str(self.path / "objects")
        self._local = threading.local()
        self._log = self.path / wal.LOG_NAME
        self._log_path = str(self._log)  # a str: os.fspath of a Path on every view costs
        # This repository in the registry of those to publish at exit (see publish_logged).
        self._exit_key = os.path.abspath(self._root)
        # The process that logged writes through this handle not yet published by it.
        self._logged_by: int | None = None
        # What this process knows of the redo log's current generation (its records' heads and
        # objects, which are nowhere else until a checkpoint; see _view), and the log kept open
        # to follow it, both guarded by _view_lock.
        self._tail: wal.Tail | None = None
        self._view_lock = threading.Lock()
        self._reading: _OpenLog | None = None
        # The objects written since the last record or checkpoint, which the next record
        # carries (see _publish_logged), and their payloads' total size.
        self._written: dict[str, tuple[bytes, bytes]] = {}
        self._pending_bytes = 0
        # The identity of the config file last found naming the log's extension.
        self._marked_config: tuple[int, ...] | None = None
        self._boot_checked = False
        # Once the log is seen started in this boot it stays so (only a reboot changes the
        # boot id), so a writer stops reading its header at every lock.
        self._this_boot = False
        forksafe.reset_in_child(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        # Another thread of the parent may have held the lock, halfway through following the
        # log: a fresh lock, and the log is followed again from its start, through a
        # descriptor of the child's own.
        self._view_lock = threading.Lock()
        self._tail = None
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.close_inherited()

    # -- opening --------------------------------------------------------------------------

    @classmethod
    def init(cls, path: str | os.PathLike[str], timeout: float = 30.0) -> GitRepo:
        """Create a bare repository at ``path`` (owner-only) and return it."""
        target = make_private_dirs(path)
        os.chmod(target, DIR_MODE)
        made = cls(target)
        # Racing creators take turns, and the lock file, made first, marks a half-initialized
        # directory as gitmem's own so that a creator killed mid-init does not wedge the next.
        # Only the flock: libgit2's init killed mid-way can leave a repository that does not open.
        with made.flock(timeout):
            for name in ("config.lock", "HEAD.lock"):
                with contextlib.suppress(FileNotFoundError):
                    (target / name).unlink()
            with _only_repository_config():
                repo = pygit2.init_repository(str(target), bare=True, initial_head="main")
            # No reflogs: they would record when and how often refs moved; nothing needs them.
            repo.config["core.logAllRefUpdates"] = "false"
            made.sync()
        return made

    @property
    def _git(self) -> pygit2.Repository:
        repo: pygit2.Repository | None = getattr(self._local, "repo", None)
        if repo is None:
            if not self._boot_checked:
                self._boot_checked = True
                self._recover_if_rebooted()
            repo = getattr(self._local, "repo", None) or self._open()
            self._local.repo = repo
        return repo

    @property
    def _packs(self) -> pygit2.Odb:
        """This thread's reader of the repository's own packs and nothing else (no loose
        objects, no alternates): see :meth:`_read_stored`. Made anew with the repository
        handle (after maintenance let go of removed packs)."""
        repo = self._git  # opened first: its checks refuse a pack directory file that blocks
        held: tuple[pygit2.Repository, pygit2.Odb] | None = getattr(self._local, "packs", None)
        if held is None or held[0] is not repo:
            odb = pygit2.Odb()
            odb.add_backend(pygit2.OdbBackendPack(self._objects), 1)
            held = self._local.packs = (repo, odb)
        return held[1]

    def _let_go(self) -> None:
        """Drop this thread's libgit2 handles, reopened on next use: they hold the files of
        packs maintenance has removed open (and mapped) as long as they live."""
        for handle in ("packs", "repo"):
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
            with _only_repository_config():
                repo = pygit2.Repository(str(self.path), RepositoryOpenFlag.NO_SEARCH)
        except pygit2.GitError as exc:
            raise NoStore(f"no git repository at {self.path}") from exc
        if not repo.is_bare:
            raise NoStore(f"{self.path} is not a bare git repository")
        # Should a reflog be written after all, it names no one.
        repo.set_ident(_SIGNATURE.name, _SIGNATURE.email)
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
            _require_file(self.path / name, name)
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
                _require_file(Path(entry.path), f"objects/pack/{entry.name}")

    @staticmethod
    def exists(path: str | os.PathLike[str]) -> bool:
        """True when ``path`` holds a git repository (gitmem's or not)."""
        # Not HEAD: gitmem does not use it, and recreates it when it is missing.
        return (Path(path) / "objects").is_dir() and (Path(path) / "refs").is_dir()

    # -- objects --------------------------------------------------------------------------

    def write_blob(self, data: bytes) -> str:
        """Store ``data`` as a blob and return its id."""
        _check_size("blob", len(data), MAX_BLOB_BYTES)
        return self._store(b"blob", data)

    def _store(self, kind: bytes, payload: bytes) -> str:
        """Write one object; every object gitmem writes goes through here.

        With the redo log (design.md, "Writing", step 7) nothing is written to the repository:
        the object is kept for the write's log record (readable by this process at once), and
        a checkpoint publishes it.
        """
        if _wal_on():
            oid = wal.object_id(kind, payload)
            if oid not in self._written:
                self._written[oid] = (kind, payload)
                self._pending_bytes += len(payload)
            return oid
        if _BATCHED:
            return self._write_loose(kind, payload)
        return str(self._git.odb.write(_TYPE_CODES[kind], payload))

    def _write_loose(self, kind: bytes, payload: bytes) -> str:
        """Store an object as a loose file, as git does, and return its id.

        Where writes are flushed by ``syncfs`` (see :meth:`sync`) nothing here is fsynced, and
        this takes four system calls: create a unique temporary file in ``objects/``, write the
        deflated object, close it, rename it to ``objects/xx/<rest of the id>`` (a fan-out
        directory missing is made, owner-only, and the rename tried again). libgit2 makes about
        fifteen for the same file (it first looks for the object, rescans the pack directory
        when it is missing, and links then unlinks). An object already there as a loose file is
        not written again (one ``stat``): replacing it, by a rename of a file not yet flushed,
        could let a power loss keep the rename and lose the data of an object that was durable
        (found by ``benchmarks/crash_states.py --small-log``).
        """
        oid = wal.object_id(kind, payload)
        if os.path.lexists(f"{self._objects}/{oid[:2]}/{oid[2:]}"):
            return oid
        data = zlib_stored(b"%s %d\0" % (kind, len(payload)) + payload)
        tmp = f"{self._objects}/{_TMP_OBJECT}{_PROCESS[0]}-{threading.get_ident()}-{next(_TMP_SEQ)}"
        fd = os.open(tmp, NEW_FILE_FLAGS, _OBJECT_FILE_MODE)  # O_EXCL: never another's file
        try:
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
            final = f"{self._objects}/{oid[:2]}/{oid[2:]}"
            try:
                os.rename(tmp, final)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(f"{self._objects}/{oid[:2]}", DIR_MODE)
                os.rename(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return oid

    def read_blob(self, oid: str, limit: int = MAX_BLOB_BYTES) -> bytes:
        """The bytes of blob ``oid``; :class:`IntegrityError` if missing, corrupt, not a blob,
        or declared longer than ``limit`` bytes (then nothing of it is inflated)."""
        return self._read(oid, b"blob", limit)

    def _read(self, oid: str, kind: bytes, limit: int) -> bytes:
        """The payload of object ``oid``, which must be of ``kind`` and at most ``limit`` bytes."""
        return self._read_any(oid, {kind: limit})[1]

    def _read_any(self, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes]:
        """``(type, payload)`` of object ``oid``, its hash checked.

        Every object gitmem reads comes through here. ``limits`` maps each acceptable type to
        the largest payload it may have: an object of another type, or declaring a larger size,
        is refused from its header, before it is inflated, so a planted decompression bomb
        costs nothing. A loose object is read, inflated and hash-checked in Python, never by
        libgit2 (up to 1.9 it loops forever inflating a truncated loose object: libgit2 issue
        #7342); a packed one is read by libgit2, which checks its hash (strict hash
        verification is on), once its header has passed. An object of the redo log (written by
        this process since its last record, or held by a record of the log's current
        generation) is taken from memory; its id was computed from its payload.
        """
        for attempt in range(2):
            logged = self._logged(oid)
            if logged is not None:
                _check_declared(oid, logged[0], len(logged[1]), limits)
                return logged
            stored = self._read_stored(oid, limits)
            if stored is not None:
                return stored
            if attempt or not _wal_on():
                break
            # Appended to the log, or published by a checkpoint, since the log was last read.
            self._view()
        raise IntegrityError(f"object {oid} is missing from the repository")

    def _read_stored(self, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes] | None:
        """:meth:`_read_any` from the object database alone; None when ``oid`` is not there.

        Packs first, as git reads, through a libgit2 database of the packs alone: libgit2's
        own database would look for the loose file at every read (``Odb.read`` reads by prefix,
        which asks every backend), and so would a loose read tried first, a failed ``open`` per
        object (a tenth of the cold load of a 10,000-entry directory, 3,800 trees). Then the
        loose file, read here; then, for a store that borrows objects (``alternates``), the
        whole database as before. A packed copy that fails to read (a damaged pack) gives way
        to a loose copy, as in git; without one its error stands.
        """
        try:
            found = self._read_packed(self._packs, oid, limits)
        except IntegrityError:
            loose = _read_loose(self._objects, oid, limits)
            if loose is None:
                raise
            return loose
        if found is not None:
            return found
        loose = _read_loose(self._objects, oid, limits)
        if loose is not None:
            return loose
        found = self._read_packed(self._git.odb, oid, limits)
        return found if found is not None else self._read_incoming(oid, limits)

    @staticmethod
    def _read_packed(
        odb: pygit2.Odb, oid: str, limits: Mapping[bytes, int]
    ) -> tuple[bytes, bytes] | None:
        """``(type, payload)`` of ``oid`` read by libgit2 from ``odb``, its header checked
        first; None when ``odb`` lacks it."""
        try:
            otype, size = odb.read_header(oid)
            found = _TYPE_NAMES.get(otype, b"")
            _check_declared(oid, found, size, limits)
            otype, data = odb.read(oid)
        except KeyError:
            return None
        except (ValueError, OSError, pygit2.GitError) as exc:
            # pygit2 raises OSError for libgit2's OS-class errors: a pack that is truncated,
            # unreadable or gone while a multi-pack index still names it.
            raise IntegrityError(f"object {oid} is corrupt: {exc}") from None
        if _TYPE_NAMES.get(otype, b"") != found or len(data) != size:
            raise IntegrityError(f"object {oid} is corrupt: it differs from its header")
        return found, data

    def has(self, oid: str) -> bool:
        """True when object ``oid`` is in the object database or the redo log."""
        if self._logged(oid) is not None or self._git.odb.exists(oid):
            return True
        return _wal_on() and self._view() is not None and self._logged(oid) is not None

    def _logged(self, oid: str) -> tuple[bytes, bytes] | None:
        """``(type, payload)`` of ``oid`` if it is in the redo log (or on its way there) as
        far as this process has read it, else None."""
        found = self._written.get(oid)
        if found is None:
            tail = self._tail
            found = None if tail is None else tail.objects.get(oid)
        return found

    def write_tree(self, entries: list[TreeEntry]) -> str:
        """Store a tree of ``entries`` and return its id.

        The tree is serialized here, in git's canonical form (what :func:`parse_tree` accepts),
        and written as raw bytes: libgit2's tree builder checks each entry's object exists on
        disk, a file-system lookup per entry that made writing the trees of a large directory
        the slowest part of a write; every entry here names an object this writer has just
        written or read from an authenticated tree.
        """
        return self.write_raw_tree(tree_bytes(entries))

    def write_raw_tree(self, data: bytes) -> str:
        """Store the already serialized tree ``data`` (git's canonical form, as
        :func:`tree_bytes` makes it) and return its id."""
        if len(data) > MAX_TREE_BYTES:  # the test first: a write stores a few trees a call
            _check_size("tree (a directory with this many entries)", len(data), MAX_TREE_BYTES)
        return self._store(b"tree", data)

    def read_tree(self, oid: str) -> list[TreeEntry]:
        """The entries of tree ``oid``; IntegrityError if missing, corrupt or not a tree."""
        return parse_tree(self.read_raw_tree(oid), oid)

    def read_raw_tree(self, oid: str) -> bytes:
        """The bytes of tree ``oid``, its hash checked but not parsed (see :func:`parse_tree`);
        IntegrityError if missing, corrupt or not a tree."""
        return self._read(oid, b"tree", MAX_TREE_BYTES)

    def empty_tree(self) -> str:
        """The id of the empty tree (written, so it exists in this repository)."""
        return self.write_tree([])

    def write_commit(self, tree: str, parents: list[str], message: bytes) -> str:
        """Store a commit with the neutral identity and time, moving no ref."""
        # tree, parent, author and committer lines take 48 + 48 per parent + 2 * 40 bytes.
        _check_size("commit", len(message) + 128 + 48 * len(parents), MAX_COMMIT_BYTES)
        # Serialized here, as libgit2's create_commit would (the same bytes, so the same id):
        # create_commit first looks the tree up, parsing every entry of the root directory,
        # which made a commit cost in proportion to the size of /memories.
        return self._store(b"commit", commit_bytes(tree, parents, message))

    def read_commit(self, oid: str) -> CommitInfo:
        """The commit ``oid``; :class:`IntegrityError` if missing, corrupt or not a commit."""
        return parse_commit(self._read(oid, b"commit", MAX_COMMIT_BYTES), oid)

    def resolve_prefix(self, prefix: str) -> str:
        """The full id of the unique object whose id starts with hex ``prefix``.

        Only the object database and the redo log are searched, never a ref: a ref named like
        an abbreviated id (``refs/tags/1a2b3c4d5e``) must not redirect a revision. Raises
        ``KeyError`` when no object matches and ``ValueError`` when several do.
        """
        wanted = prefix.lower()
        found = {oid for oid in self._log_object_ids() if oid.startswith(wanted)}
        try:
            found.add(str(self._git.expand_id(prefix)))
        except pygit2.AmbiguousError:
            raise ValueError(f"the revision {prefix} is ambiguous") from None
        except (KeyError, ValueError, pygit2.GitError):
            pass
        if len(found) > 1:
            raise ValueError(f"the revision {prefix} is ambiguous")
        if not found:
            raise KeyError(prefix)
        return found.pop()

    def all_object_ids(self) -> Iterator[str]:
        """Every object id in the object database or the redo log, reachable or not."""
        seen = set(self._log_object_ids())
        yield from seen
        for oid in self._git.odb:
            if str(oid) not in seen:
                yield str(oid)

    def _log_object_ids(self) -> set[str]:
        """The ids of the objects only the redo log may hold (read up to its end now)."""
        tail = self._view()
        return set(self._written) | (set(tail.objects) if tail is not None else set())

    # -- refs -----------------------------------------------------------------------------

    def ref(self, name: str) -> str | None:
        """The id ``name`` points at, or ``None`` when the ref does not exist.

        The branch is where the last record of the redo log's current generation moved it,
        when that generation has records (design.md, "The redo log"); else, and for every
        other ref, the ref file. A loose ref (every ref gitmem writes) is read here in four
        system calls, opened without following a link and without blocking, and refused unless
        it is a regular file; a missing one, or a symbolic link, goes through libgit2 (packed
        refs) as before. A ref file that has not changed costs one ``lstat``, a log with nothing
        new an ``lstat`` and two ``pread`` (see :meth:`_view`).
        """
        # Opened (once per thread) as before, though not used here: opening checks the files
        # that would block libgit2 (a FIFO as config, ...), which must be refused at once.
        self._git  # noqa: B018
        if name == BRANCH and _wal_on():
            tail = self._view()
            if tail is not None and tail.records:
                return tail.last
        return self._ref_file(name)

    def _ref_file(self, name: str) -> str | None:
        """Where the ref file of ``name`` (or libgit2's packed refs) points: :meth:`ref`
        without the redo log."""
        path = f"{self._root}/{name}"
        known = self._refs.get(name)
        if known is not None:
            # A ref file that has not changed for a while is known by its identity (one lstat):
            # see _no_reflogs for the rule; a ref moved since is a new file, with new times.
            with contextlib.suppress(OSError):
                if _identity(os.lstat(path)) == known[0]:
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
        if _settled(info, checked_at):
            self._refs[name] = (_identity(info), oid)
        return oid

    def _libgit2_ref(self, name: str) -> str | None:
        """:meth:`ref` through libgit2, for a packed ref or a symbolic link in the ref's place."""
        _require_file(self.path / name, name)
        _require_file(self.path / "packed-refs", "packed-refs")
        try:
            ref = self._git.references[name]
        except KeyError:
            return None
        except pygit2.GitError as exc:
            raise IntegrityError(f"the ref {name} is corrupt: {exc}") from None
        target = ref.target
        if not isinstance(target, pygit2.Oid):
            raise IntegrityError(f"the ref {name} is symbolic; gitmem refs point at objects")
        return str(target)

    def has_refs(self) -> bool:
        """True when any ref exists: a branch (in the redo log or a file), a tag, gitmem's
        metadata (HEAD aside)."""
        tail = self._view()
        if tail is not None and tail.records:
            return True
        try:
            return any(True for _ in self._git.references)
        except pygit2.GitError as exc:
            raise IntegrityError(f"the refs of {self.path} cannot be read: {exc}") from None

    def create_ref(self, name: str, oid: str) -> None:
        """Create ``name`` at ``oid`` durably; :class:`ConflictError` if it already exists."""
        self.wait_durable(self._publish(name, oid, None))

    def update_ref(
        self, name: str, new: str, expected: str | None, *, wait: bool = True
    ) -> Durability:
        """Move ``name`` to ``new`` only if it still points at ``expected`` (compare-and-swap).

        ``expected=None`` means the ref must not exist yet. Raises :class:`ConflictError` when
        the ref moved. Everything written before it (the objects it points at) reaches stable
        storage before the ref does. Durable on return, unless ``wait`` is false: the caller
        then passes the result to :meth:`wait_durable` before saying the write happened (after
        letting go of the writer lock, so that writers queued behind it share one flush).
        """
        ticket = self._publish(name, new, expected)
        # Without the redo log, about one write in AUTO_CHECK_EVERY looks at what needs packing
        # (the commit id decides, so it is spread evenly over writes and processes, and costs
        # nothing to decide); with it, loose objects appear only at checkpoints, which look.
        if not _wal_on() and name == BRANCH and int(new[:2], 16) % AUTO_CHECK_EVERY == 0:
            self._auto_maintain()
        if wait:
            self.wait_durable(ticket)
        return ticket

    def wait_durable(self, ticket: Durability) -> None:
        """Return once the ref move that gave ``ticket`` is on stable storage."""
        if ticket is None:
            return
        if _wal_on():
            log = self._log
            _group_sync(f"log:{log}").sync(lambda: wal.datasync(log), ticket, share=True)
        else:
            self._syncfs_group().sync(self._syncfs, ticket, share=True)

    def writer(self) -> contextlib.AbstractContextManager[None]:
        """Announce, for the block, a writer on its way to moving a ref (see
        :meth:`wait_durable`): writers of this process that are done wait a little for its
        flush rather than making their own."""
        if not _BATCHED:
            return contextlib.nullcontext()
        if _wal_on():
            return _group_sync(f"log:{self._log}").writer()
        return self._syncfs_group().writer()

    def _publish(self, name: str, new: str, expected: str | None) -> Durability:
        if _wal_on():
            if self._loggable(name, new, expected):
                return self._publish_logged(name, new, expected)
            # Any other move (a fast-forward, a merge, the metadata ref, a large write): the
            # log and the objects written are published durably first, then the ref is moved
            # and made durable, and a new generation of the log starts from it.
            self._checkpoint()
            self._swap_ref(name, new, expected, lambda: None)
            self._checkpoint()
            return None
        if _BATCHED:
            self._swap_ref(name, new, expected, self.sync)
            return self._syncfs_group().ticket()
        if expected is None:
            self.sync()  # objects/ itself: libgit2 fsyncs a new objects/xx but not its parent
            try:
                self._git.references.create(name, pygit2.Oid(hex=new))
            except (pygit2.AlreadyExistsError, ValueError) as exc:
                raise ConflictError(f"the ref {name} already exists") from exc
        else:
            self._set_ref(name, new, expected)
        self.sync()
        return None

    def _auto_maintain(self, written: int = 0) -> None:
        """Maintenance after a checkpoint that packed ``written`` bytes (or a write that was
        not logged), its pack merges bounded (see :data:`AUTO_MERGE_STEP`)."""
        if os.environ.get("GITMEM_GC_AUTO") == "0":
            return  # turned off, as git's gc.auto=0 does
        # The write is durable already: a failure here (a full disk) must not fail it; the next
        # write tries again, and so does `gitmem gc`.
        with contextlib.suppress(OSError, pygit2.GitError, GitMemError):
            self.maintain(budget=max(AUTO_MERGE_STEP, AUTO_MERGE_FACTOR * written))

    def _set_ref(self, name: str, new: str, expected: str) -> None:
        """Move a ref through libgit2, which fsyncs it (where syncfs is missing)."""
        try:
            ref = self._git.references[name]
        except KeyError:
            raise ConflictError(f"the ref {name} disappeared during the write") from None
        if str(ref.target) != expected:
            raise ConflictError(f"the ref {name} moved during the write")
        self.sync()
        try:
            ref.set_target(pygit2.Oid(hex=new))
        except pygit2.GitError as exc:
            raise ConflictError(f"the ref {name} moved during the write: {exc}") from exc

    def _swap_ref(
        self,
        name: str,
        new: str,
        expected: str | None,
        before_rename: Callable[[], None],
        *,
        check: bool = True,
    ) -> None:
        """Move (or create) a loose ref with git's ref protocol, ``before_rename`` in between.

        ``<ref>.lock`` is created exclusively (any git process that moves the ref takes the
        same lock), the ref is checked under it (unless not ``check``: a checkpoint publishing
        the log's head, or a torn ref being repaired), the new id written into it,
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
                current = self.ref(name) if check else expected
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

    def sync(self) -> None:
        """Make everything written to the repository so far durable.

        One ``syncfs`` where available. Elsewhere libgit2 has already fsynced each object, ref
        and the directory it is in; what it leaves out is the directory holding a new directory
        (``objects/`` when an ``objects/xx`` fan-out is new, ``refs/`` for a new ``refs/xx``),
        which this fsyncs.
        """
        if _BATCHED:
            group = self._syncfs_group()
            group.sync(self._syncfs, group.ticket())
            return
        for relative in ("objects", "refs", "refs/heads", "refs/gitmem", ""):
            with contextlib.suppress(FileNotFoundError):
                fsync_dir(self.path / relative)

    def _syncfs(self) -> None:
        syncfs(self.path)

    def _syncfs_group(self) -> _GroupSync:
        return _group_sync(f"dev:{os.stat(self.path).st_dev}")

    # -- the redo log (design.md, "The redo log") ------------------------------------------

    def _view(self) -> wal.Tail | None:
        """The redo log's current generation as far as it is written: its records' last head
        and objects (version 2), read from where this process last stopped; None when there is
        no log, it is of version 1 (all it names is in the repository), or its header is torn
        (recovery's business: readers then see the repository as it is).

        The log stays open (see :class:`_OpenLog`): a log with nothing new costs an ``lstat``
        (the same file?), a ``pread`` of the header (the same generation?) and a ``pread`` of
        the slot after the last record read (zeros, or a record of another generation).
        """
        if not _wal_on():
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
                    log = self._reading = _OpenLog(self._log)
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
        """Under ``_view_lock``: the view of the log open at ``fd`` (see :meth:`_view`)."""
        if header is None or header.version == 1:
            return None
        _check_log_version(header, self.path)
        return wal.follow(fd, header, self._tail, BRANCH, inode)

    def _loggable(self, name: str, new: str, expected: str | None) -> bool:
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

    def _publish_logged(self, name: str, new: str, expected: str | None) -> Durability:
        """Move the branch by appending its record to the log, with no flush and nothing
        written to the repository: the returned ticket makes the record durable (one
        ``fdatasync``), and a checkpoint publishes it."""
        self._append(name, new, expected, self._written)
        self._written, self._pending_bytes = {}, 0
        return _group_sync(f"log:{self._log}").ticket()

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
                fd = wal.open_log(self._log, write=True)
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
                    self._checkpoint()
                    continue
                with self._view_lock:
                    tail = self._tail = wal.follow(fd, header, self._tail, BRANCH)
                current = tail.last if tail.records else self._ref_file(BRANCH)
                if not tail.records and current != header.base:
                    if attempt:
                        raise StorageError(f"the redo log of {self.path} cannot be started")
                    self._checkpoint()
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
                    self._checkpoint(wal.next_capacity(size, tail.records))
                    continue
                if not tail.records:
                    self._mark_log_pending()
                offset = tail.offset
                if os.pwrite(fd, data, offset) != len(data):
                    raise OSError(errno.ENOSPC, "the redo log's record was cut short")
                _LOGGED[self._exit_key] = self._logged_by = os.getpid()
                with self._view_lock:
                    # Unless a reader of this process (another thread) has read the record
                    # since it was written: taking it in twice would put the tail past it.
                    if self._tail is tail and tail.seq == record.seq:
                        tail.add(record, offset + len(data), BRANCH, ids=tuple(objects))
                return
            finally:
                if fd >= 0:
                    os.close(fd)

    def _mark_log_pending(self) -> None:
        """Before the first record of a generation (under the writer lock): set
        ``core.repositoryformatversion = 1`` and ``extensions.gitmemlog = true``, durably, so
        that git and older gitmem refuse the repository while it alone is not whole.

        A config file known to carry the extension (same identity, settled, as in
        :meth:`_no_reflogs`) costs one ``lstat``.
        """
        checked_at = time.time()
        config_path = self._root + "/config"
        with contextlib.suppress(FileNotFoundError):
            if _identity(os.lstat(config_path)) == self._marked_config:
                return
        config = self._git.config
        if not (_config_true(config, _EXTENSION_KEY) and _config_int(config, _FORMAT_KEY) == 1):

            def mark(edited: pygit2.Config) -> None:
                edited[_FORMAT_KEY] = 1
                edited[_EXTENSION_KEY] = True

            self._edit_config(mark)
        info = os.lstat(config_path)
        self._marked_config = _identity(info) if _settled(info, checked_at) else None

    def checkpoint(self, *, clear: bool = False) -> None:
        """Under the writer lock: publish what the redo log holds and start a new generation.

        Every object of the log's current generation (and any written since its last record)
        goes into the object database as one pack, durably; the branch's ref file is moved to
        the log's head and made durable; and a new generation starts from that head.
        Afterwards plain git sees every acknowledged write. With ``clear``, the repository's
        config stops naming the log's extension (see :meth:`_mark_log_pending`), so git reads
        it again.
        :class:`StorageError` if it cannot be written (a full disk): the writes stay in the log.
        """
        self._publish_or_fail(clear=clear)

    def _publish_or_fail(self, *, clear: bool, maintain: bool = True) -> None:
        try:
            self._checkpoint(clear=clear, maintain=maintain)
        except OSError as exc:
            raise StorageError(
                f"cannot publish the redo log of {self.path} into the repository: "
                f"{exc.strerror or exc}; its writes stay in the log, and nothing was pruned"
            ) from None

    def _checkpoint(
        self, size: int | None = None, *, clear: bool = False, maintain: bool = True
    ) -> None:
        """:meth:`checkpoint`; ``size``: the log's preallocated size from now on (a new file
        when it changes; by default a new log is :data:`wal.MIN_CAPACITY` long and an existing
        one keeps its size). ``maintain``: look whether maintenance is due when a pack was
        written (see :meth:`maintain`)."""
        if not _wal_on():
            self.sync()
            return
        boot = wal.boot_id()
        assert boot is not None  # _wal_on
        try:
            fd = wal.open_log(self._log, write=True)
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
            # no delta chain; oldest first, they lay 1-19 deltas deep (performance.md, "the
            # cold load of a split directory").
            write_pack(
                ((oid, kind, payload) for oid, (kind, payload) in reversed(objects.items())),
                self.path / "objects" / "pack",
                self.path,
                deflate_min=CHECKPOINT_DEFLATE_MIN,
            )
            if tail is not None and tail.records:
                assert tail.last is not None
                self._swap_ref(BRANCH, tail.last, None, lambda: None, check=False)
            self.sync()
            if clear:
                self._clear_log_pending()
            head = self._ref_file(BRANCH)
            header = wal.Header(1 if old is None else old.generation + 1, boot, head)
            resize = old is not None and size is not None and size != os.fstat(fd).st_size
            if old is None or resize:
                # Missing, torn, or resized: a new file, so no stale record of an earlier
                # generation can ever be taken for one of this generation, and all of its zeros
                # are written (see wal.new_log).
                atomic_write(self._log, wal.new_log(header, size or wal.MIN_CAPACITY))
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
            self._auto_maintain(sum(len(payload) for _, payload in objects.values()))

    def _clear_log_pending(self) -> None:
        """After a checkpoint's flush (under the writer lock): the repository alone is whole
        again, so git may read it: the extension goes, and the format version is 0 again."""
        config = self._git.config
        if _config_true(config, _EXTENSION_KEY) or _config_int(config, _FORMAT_KEY) != 0:
            removed = []

            def clear(edited: pygit2.Config) -> None:
                with contextlib.suppress(KeyError):
                    edited.delete_multivar(_EXTENSION_KEY, ".*")
                    removed.append(True)
                edited[_FORMAT_KEY] = 0

            # libgit2 leaves the section header behind: gone too when gitmem's key was all of it.
            self._edit_config(
                clear, lambda data: _without_empty_extensions(data) if removed else data
            )
        self._marked_config = None
        _LOGGED.pop(self._exit_key, None)
        self._logged_by = None

    def logged_here(self) -> bool:
        """True when this process logged writes through this object that no checkpoint of the
        clearing kind through it has published since."""
        return self._logged_by == os.getpid()

    @staticmethod
    def log_pending_at(path: str | os.PathLike[str]) -> bool:
        """True when the repository at ``path`` names the redo log's extension in its config:
        its log may hold writes that git (and libgit2's transports) cannot see. Opens nothing
        but the config file; False when there is no readable config."""
        try:
            return _config_true(pygit2.Config(str(Path(path) / "config")), _EXTENSION_KEY)
        except (OSError, pygit2.GitError):
            return False

    def _edit_config(
        self, edit: Callable[[pygit2.Config], None], tidy: Callable[[bytes], bytes] = bytes
    ) -> None:
        """Change the repository's config durably: libgit2 edits a copy, ``tidy`` its bytes,
        which replace the config through :func:`atomic_write` (libgit2's own writer renames an
        unflushed file, so a power loss could leave an empty config, which no one opens)."""
        copy = self.path / f"config.gitmem-{_PROCESS[0]}"
        try:
            shutil.copyfile(self.path / "config", copy)
            edit(pygit2.Config(str(copy)))
            data = tidy(copy.read_bytes())
        finally:
            with contextlib.suppress(OSError):
                copy.unlink()
        atomic_write(self.path / "config", data)

    def _recover_if_rebooted(self) -> None:
        """On first use: if the log was last started in another boot, power may have been
        lost since; recover under the writer lock (a store that cannot be locked, being
        read-only, is read as it is: its readers follow the log as ever)."""
        if not self._rebooted():
            return
        if getattr(self._local, "locked", False):
            self.recover()
            return
        try:
            with self.write_lock(_RECOVERY_LOCK_SECONDS):
                pass  # write_lock recovers as it is taken
        except (StorageError, LockTimeout):
            return  # read what is there; the next writer recovers (or says why it cannot)

    def recover(self) -> None:
        """Under the writer lock: after a power loss, publish what the log holds; idempotent.

        Removes loose objects whose content does not match their id (torn by the power loss:
        only a checkpoint cut short, or a version 1 log's writes, wrote them unflushed). A
        version 1 log's valid records have their missing objects written again. The branch is
        pointed at the last record's head when the generation has records; else (and for a
        version 1 log) at it unless the ref file names a complete commit the log does not
        know (a move by something else). Then a checkpoint publishes the rest. Nothing happens
        if the log was started in this boot (another process recovered already).
        """
        if not self._rebooted():
            return
        header = wal.read_header(self._log)
        objects = self.path / "objects"
        with contextlib.suppress(FileNotFoundError):
            for oid in _loose_objects(objects):
                try:
                    _read_loose(self._objects, oid, _ANY_KIND)
                except IntegrityError:
                    with contextlib.suppress(OSError):
                        (objects / oid[:2] / oid[2:]).unlink()
        heads: list[str | None] = [None]
        if header is not None:
            fd = wal.open_log(self._log, write=False)
            try:
                found, heads = wal.replay_plan(fd, header, BRANCH)
            finally:
                os.close(fd)
            if header.version == 1:
                for record in found:
                    for _, kind, payload in wal.record_objects(record):
                        self._write_loose(kind, payload)
        last = heads[-1]
        logged = header is not None and header.version != 1 and len(heads) > 1
        try:
            current, readable = self._ref_file(BRANCH), True
        except IntegrityError:  # the rename reached the disk, the lock's content did not
            current, readable = None, False
        if not readable or (
            current != last and (logged or current in heads or not self._complete(current, heads))
        ):
            self._force_ref(BRANCH, last)
        self._checkpoint()

    def _rebooted(self) -> bool:
        """True when the log was last started in another boot (or its header is torn)."""
        if self._this_boot or not _wal_on():
            return False
        header = wal.read_header(self._log)
        if header is None:
            # No log (an older store, or a clone): every write it holds was flushed.
            return os.path.lexists(self._log)
        _check_log_version(header, self.path)
        self._this_boot = header.boot == wal.boot_id()
        return not self._this_boot

    def _complete(self, oid: str | None, heads: list[str | None]) -> bool:
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
            if not self.has(current):
                return False
            try:
                kind, data = self._read_any(current, _ANY_KIND)
            except IntegrityError:
                return False
            if kind == b"commit":
                commit = parse_commit(data, current)
                stack += [commit.tree, *commit.parents]
            elif kind == b"tree":
                stack += [e.oid for e in parse_tree(data, current) if e.mode != _GITLINK]
            elif kind == b"tag":
                stack.append(_tag_target(data, current))
        return True

    def _force_ref(self, name: str, oid: str | None) -> None:
        """Point ``name`` at ``oid`` (remove it for None), unflushed: recovery's checkpoint
        makes it durable."""
        path = self.path / name
        if oid is None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return
        make_private_dirs(path.parent)
        atomic_write(path, f"{oid}\n".encode(), durable=False)

    # -- locking --------------------------------------------------------------------------

    @contextlib.contextmanager
    def write_lock(self, timeout: float) -> Iterator[None]:
        """Hold the store's exclusive writer lock (an OS file lock) for the block.

        The kernel releases the lock when its holder dies, so while it is held no other gitmem
        writer can be mid-update: a ``<ref>.lock`` file libgit2 left behind is then provably
        stale and is removed.
        """
        with self.flock(timeout):
            self._local.locked = True
            # Objects a write that failed before its record left behind: not in any record,
            # they must not join the next one.
            self._written, self._pending_bytes = {}, 0
            try:
                self._clear_stale_ref_locks()
                self._no_reflogs()
                try:
                    self.recover()
                except OSError as exc:
                    raise StorageError(
                        f"cannot recover the store at {self.path} after a power loss: "
                        f"{exc.strerror or exc}; nothing was written"
                    ) from None
                yield
            finally:
                self._local.locked = False
                # The setting was put back to false above, under this lock; what a write
                # can still leave is a log file (another program's, while the lock was held).
                self._no_reflogs(config=False)

    @contextlib.contextmanager
    def flock(self, timeout: float) -> Iterator[None]:
        """The writer lock's ``flock`` alone, opening nothing of the repository (which
        :meth:`init` may find half made)."""
        lock_path = f"{self._root}/{LOCK_FILE}"
        # O_NOFOLLOW: a symlink planted in the repository must not redirect the lock elsewhere.
        try:
            fd = open_lock_file(lock_path)
        except OSError as exc:
            raise StorageError(
                f"cannot write the store at {self.path}: {exc.strerror or exc} (a read-only "
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
                            f"another writer held the lock on {self.path} for over {timeout:g}s"
                        ) from None
                    time.sleep(_LOCK_POLL_SECONDS)
            lock_held(fd)
            try:
                yield
            finally:
                release_lock(fd)
        finally:
            os.close(fd)

    def _no_reflogs(self, *, config: bool = True) -> None:
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
        identity = _identity(info)
        if identity == self._clean_config:
            return
        if self._reflogs_off() and _settled(info, checked_at):
            self._clean_config = identity

    def _reflogs_off(self) -> bool:
        """Put ``core.logAllRefUpdates`` back to false; True when it was false already."""
        config = self._git.config
        try:
            setting = str(config["core.logAllRefUpdates"])
        except KeyError:
            setting = "false"
        if setting.strip().lower() != "false":
            # The setting may be given several times (the last one counts): replace them all.
            config.delete_multivar("core.logAllRefUpdates", ".*")
            config["core.logAllRefUpdates"] = "false"
            # libgit2 caches the setting per repository handle: the next use reopens.
            with contextlib.suppress(AttributeError):
                del self._local.repo
            return False
        return True

    def _clear_stale_ref_locks(self) -> None:
        for name in (BRANCH, META_REF):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self._root}/{name}.lock")

    def fsync_dir(self, relative: str = "") -> None:
        """fsync a directory of the repository, for metadata written outside libgit2."""
        fsync_dir(self.path / relative)

    # -- remotes --------------------------------------------------------------------------

    def remote_names(self) -> list[tuple[str, str]]:
        """``(name, url)`` of every remote configured in this repository, sorted by name."""
        return sorted((str(r.name), str(r.url)) for r in self._git.remotes)

    def remote_url(self, name: str) -> str | None:
        """The URL of remote ``name``, or None when there is no such remote."""
        for remote_name, url in self.remote_names():
            if remote_name == name:
                return url
        return None

    def add_remote(self, name: str, url: str) -> None:
        """Configure remote ``name`` at ``url``; :class:`ConflictError` if the name is taken."""
        try:
            self._git.remotes.create(name, url)
        except (ValueError, pygit2.GitError) as exc:
            if self.remote_url(name) is not None:
                raise ConflictError(f"a remote named {name!r} already exists") from None
            raise UsageError(f"cannot add remote {name!r}: {exc}") from None

    def remove_remote(self, name: str) -> None:
        """Remove remote ``name``; :class:`NotFound` if there is none."""
        if self.remote_url(name) is None:
            raise NotFound(f"no remote named {name!r}")
        self._git.remotes.delete(name)

    def _anonymous(self, url: str) -> pygit2.Remote:
        try:
            return self._git.remotes.create_anonymous(url)
        except (ValueError, pygit2.GitError) as exc:
            raise RemoteError(f"{url}: not a usable git URL ({exc})") from None

    def list_remote(self, url: str, timeout: float = NETWORK_TIMEOUT) -> dict[str, str]:
        """The refs the remote at ``url`` advertises, ``{name: oid}``.

        Raises :class:`RemoteError` when it cannot be reached, refuses the credentials, or does
        not answer within ``timeout`` seconds (to connect, and at each read or write).
        """
        remote = self._anonymous(url)
        callbacks = _Callbacks(url)
        with _remote_errors(url, callbacks, timeout):
            heads = remote.list_heads(callbacks=callbacks)
        return {str(h.name): str(h.oid) for h in heads if not str(h.name).endswith("^{}")}

    def fetch(self, url: str, refs: list[str], timeout: float = NETWORK_TIMEOUT) -> dict[str, str]:
        """Fetch ``refs`` from ``url``; their objects join this repository, no ref moves here.
        Returns ``{ref: oid}`` for the refs fetched (see :meth:`fetching`)."""
        with self.fetching(url, refs, timeout) as incoming:
            incoming.accept()
            return incoming.refs

    @contextlib.contextmanager
    def fetching(
        self, url: str, refs: list[str], timeout: float = NETWORK_TIMEOUT
    ) -> Iterator[Incoming]:
        """Fetch ``refs`` from ``url`` into a quarantine, no ref moving here.

        While the block runs, this thread reads the fetched objects as if they were in this
        repository (no other thread sees them, so no writer can count on one); they join it
        only if the block calls :meth:`Incoming.accept`, and are deleted otherwise: what a
        refused pull fetched is not the user's, and never takes room in the store.

        libgit2 cannot fetch into a repository that has a ref pointing at a blob (its
        negotiation fails: "object is not a committish"), and ``refs/gitmem/meta`` is one; so
        the fetch goes into a scratch repository inside this one that borrows its objects
        (``objects/info/alternates``) and holds only the branch, for negotiation: that is the
        quarantine. Accepting moves its packs and loose objects here (durably, the index last);
        the scratch repository is removed when the block ends. Each fetch has its own
        (fetches take no lock, so two may run at once); one left by a crash is removed by a
        later fetch once it is an hour old.
        """
        for stale in self.path.glob(f"{_FETCH_SCRATCH}-*"):
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > _STALE_SCRATCH_SECONDS:
                    shutil.rmtree(stale, ignore_errors=True)
        scratch = self.path / f"{_FETCH_SCRATCH}-{os.getpid()}-{os.urandom(4).hex()}"
        outer: Incoming | None = getattr(self._local, "incoming", None)
        try:
            staging = pygit2.init_repository(str(scratch), bare=True)
            os.chmod(scratch, 0o700)
            (scratch / "objects" / "info" / "alternates").write_text(
                str(self.path.resolve() / "objects") + "\n", encoding="utf-8"
            )
            staging = pygit2.Repository(str(scratch))
            # The published head (the ref file): what the redo log holds is not in the
            # repository the scratch one borrows from; an older head negotiates as well.
            head = self._ref_file(BRANCH)
            if head is not None:
                staging.references.create(BRANCH, pygit2.Oid(hex=head))
            remote = staging.remotes.create_anonymous(url)
            callbacks = _Callbacks(url)
            specs = [f"+{ref}:refs/gitmem/fetched/{i}" for i, ref in enumerate(refs)]
            with _remote_errors(url, callbacks, timeout):
                remote.fetch(specs, callbacks=callbacks, message="gitmem")
            fetched = {}
            for i, ref in enumerate(refs):
                with contextlib.suppress(KeyError):
                    fetched[ref] = str(staging.references[f"refs/gitmem/fetched/{i}"].target)
            del staging, remote
            incoming = Incoming(scratch / "objects", fetched, self._adopt_objects)
            self._local.incoming = incoming
            yield incoming
        finally:
            self._local.incoming = outer
            shutil.rmtree(scratch, ignore_errors=True)

    def _read_incoming(self, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes] | None:
        """:meth:`_read_stored` from this thread's quarantine (:meth:`fetching`), if any."""
        incoming: Incoming | None = getattr(self._local, "incoming", None)
        if incoming is None or incoming.accepted:
            return None
        found = self._read_packed(incoming.packs, oid, limits)
        return found if found is not None else _read_loose(str(incoming.objects), oid, limits)

    def _adopt_objects(self, source: Path) -> None:
        """Move every pack and loose object under ``source`` into this repository, durably."""
        objects = self.path / "objects"
        packs = source / "pack"
        if packs.is_dir():
            names = sorted(packs.iterdir(), key=lambda f: (f.suffix == ".idx", f.name))
            for item in names:
                if item.suffix in (".pack", ".idx", ".rev"):
                    fsync_file(item)
                    os.replace(item, objects / "pack" / item.name)
            self.fsync_dir("objects/pack")
        for sub in source.iterdir():
            if len(sub.name) != 2 or not sub.is_dir():
                continue
            target = objects / sub.name
            target.mkdir(mode=0o755, exist_ok=True)
            for item in sub.iterdir():
                fsync_file(item)
                os.replace(item, target / item.name)
            self.fsync_dir(f"objects/{sub.name}")
        # libgit2 rescans objects/pack when it misses an object, so the new packs are seen.

    def push(
        self,
        url: str,
        refspecs: list[str],
        lock_timeout: float = 30.0,
        timeout: float = NETWORK_TIMEOUT,
    ) -> None:
        """Push ``refspecs`` (never forced) to ``url``, after a checkpoint (taking the writer
        lock for it, up to ``lock_timeout`` seconds, unless this thread holds it): libgit2
        sends what the repository holds.

        Raises :class:`PushRejected` when the remote refuses an update (it has commits this
        repository lacks), :class:`RemoteError` when it cannot be reached or does not answer
        within ``timeout`` seconds.
        """
        if any(spec.startswith("+") for spec in refspecs):
            raise ValueError("gitmem never force-pushes")
        self.publish(lock_timeout)
        remote = self._anonymous(url)
        callbacks = _Callbacks(url)
        with _remote_errors(url, callbacks, timeout):
            try:
                remote.push(refspecs, callbacks=callbacks)
            except pygit2.GitError as exc:
                # The remote's branch moved since it was listed (another replica pushed):
                # libgit2 refuses before sending, as the remote would have.
                if _NOT_FAST_FORWARD not in str(exc):
                    raise
                callbacks.rejected.append((BRANCH, "not a fast-forward"))
        if callbacks.rejected:
            ref, why = callbacks.rejected[0]
            raise PushRejected(
                f"{url} refused the update of {ref} ({why}): it has commits this replica lacks; "
                "pull or sync first"
            )

    # -- garbage collection ---------------------------------------------------------------

    def reachable(self, missing: list[str] | None = None) -> dict[str, str]:
        """Every object reachable from any ref, each with a name hint for delta packing.

        Raises :class:`IntegrityError` if an object reachable from gitmem's own refs is missing
        or unreadable, or one reachable from any ref is corrupt, so that a damaged store is
        never pruned. An object that only refs other than gitmem's reach and that is missing
        altogether has nothing to keep: it is left out and, when ``missing`` is given, a
        sentence naming it and the ref is appended there (else it raises too).
        """
        seen: dict[str, str] = {}
        for _ in self._reachable_objects(self._roots(missing), seen, missing):
            pass
        return seen

    def _roots(self, missing: list[str] | None) -> list[tuple[str, str, bool]]:
        """Where :meth:`reachable` starts: (ref, object id, whether the ref is gitmem's own),
        gitmem's own refs first (the branch as the redo log has it). A ref that cannot be
        resolved raises, or is reported in ``missing`` when given."""
        git = self._git
        roots: list[tuple[str, str, bool]] = []
        names = sorted(set(git.references) | {BRANCH, META_REF}, key=lambda n: n not in _OWN)
        for name in names:
            _require_file(self.path / name, name)
            if name in _OWN:
                found = self.ref(name)
                if found is not None:
                    roots.append((name, found, True))
                continue
            try:
                target = str(git.references[name].resolve().target)
            except (KeyError, pygit2.GitError) as exc:
                if missing is None:
                    raise IntegrityError(f"the ref {name} cannot be resolved: {exc}") from None
                missing.append(f"the ref {name} cannot be resolved: {exc}")
                continue
            roots.append((name, target, False))
        return roots

    def _reachable_objects(
        self, roots: list[tuple[str, str, bool]], seen: dict[str, str], missing: list[str] | None
    ) -> Iterator[tuple[str, bytes, bytes]]:
        """``(id, type, payload)`` of every object reachable from ``roots``, each read and
        hash-checked once, as :meth:`reachable` walks them (and adds them to ``seen``)."""
        for name, root, own in roots:
            yield from self._walk(root, seen, None if own else missing, name)

    def _walk(
        self, root: str, seen: dict[str, str], missing: list[str] | None, ref: str
    ) -> Iterator[tuple[str, bytes, bytes]]:
        stack: list[tuple[str, str]] = [(root, "")]
        while stack:
            oid, hint = stack.pop()
            if oid in seen:
                continue
            if missing is not None and not self.has(oid):
                missing.append(f"the ref {ref} reaches object {oid}, which is missing")
                continue
            seen[oid] = hint
            # Every object is read whole, blobs too: what is packed must be intact. gc packs
            # what is yielded here as it is, rather than reading it again.
            kind, data = self._read_any(oid, _ANY_KIND)
            yield oid, kind, data
            if kind == b"commit":
                commit = parse_commit(data, oid)
                # Its tree before its parents (the stack pops the last pushed): gc packs what
                # this yields in this order, so a tree's newest version comes first and is
                # stored whole, its older ones as deltas of newer ones, as git's gc does.
                stack.extend((p, "") for p in commit.parents)
                stack.append((commit.tree, ""))
            elif kind == b"tree":
                stack.extend((e.oid, e.name) for e in parse_tree(data, oid))
            elif kind == b"tag":
                stack.append((_tag_target(data, oid), ""))

    def publish(self, lock_timeout: float) -> None:
        """Checkpoint (the clearing kind) so that libgit2 and git see every write, under the
        writer lock (taken here, up to ``lock_timeout`` seconds, unless this thread holds it).
        A no-op where writes are not logged."""
        if not _wal_on():
            return
        if getattr(self._local, "locked", False):
            self._publish_or_fail(clear=True)
            return
        with self.write_lock(lock_timeout):
            self._publish_or_fail(clear=True)

    def foreign_ref_problems(self) -> list[str]:
        """What is missing or damaged behind refs other than gitmem's own, one sentence each.

        gitmem neither writes nor reads such refs, but garbage collection keeps what they
        reach; :meth:`gc` leaves out objects missing behind them and refuses corrupt ones.
        """
        missing: list[str] = []
        seen: dict[str, str] = {}
        for name in sorted(self._git.references):
            if name in (BRANCH, META_REF):
                continue
            try:
                _require_file(self.path / name, name)
                target = str(self._git.references[name].resolve().target)
                for _ in self._walk(target, seen, missing, name):
                    pass
            except (KeyError, pygit2.GitError) as exc:
                missing.append(f"the ref {name} cannot be resolved: {exc}")
            except IntegrityError as exc:
                missing.append(f"the ref {name} reaches a damaged object: {exc}")
        return missing

    def gc(self, grace: float, now: float | None = None) -> GcReport:
        """Pack every reachable object into one pack and prune what nothing references.

        The caller holds the writer lock. Loose objects that are packed are removed, and old
        packs whose objects are all in the new one; an unreachable object is removed only once
        it (its file, or its pack) is older than ``grace`` seconds, as are the leftovers of
        writers killed mid-write (temporary files, a pack without its index). Each reachable
        object is read once, by the walk, which streams it into the new pack. Readers need no
        lock: the new pack is complete and durable before anything is removed, and libgit2
        (like git) rescans the packs when an object it looked for has moved.
        """
        now = time.time() if now is None else now
        objects = self.path / "objects"
        pack_dir = objects / "pack"
        # What the redo log holds goes into the repository first: gc walks and packs it.
        self._publish_or_fail(clear=True, maintain=False)
        job = _MERGES.pop(str(self.path), None)
        if job is not None:
            job.abandon()  # gc packs everything: a merge under way would only copy it again
        report = GcReport(bytes_before=_tree_bytes(objects))
        for leftover in self.path.glob(_GC_TMP_PREFIX + "*"):
            shutil.rmtree(leftover, ignore_errors=True)  # from a gc that died; we hold the lock
        roots = self._roots(report.missing)
        old_packs = sorted(pack_dir.glob("pack-*.idx")) if pack_dir.is_dir() else []
        reachable: dict[str, str] = {}
        try:
            # Each object is read (and hash-checked) once, by the walk, and packed as read. A
            # missing or corrupt one raises from the walk, which abandons the pack unpublished.
            new_idx = write_pack(
                self._reachable_objects(roots, reachable, report.missing), pack_dir, self.path
            )
        except (OSError, pygit2.GitError) as exc:
            # A full disk, most likely: the old packs and loose objects are all still there.
            reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
            raise StorageError(
                f"gc could not write the new pack: {reason}; nothing was pruned"
            ) from None
        if new_idx is not None:
            packed = _pack_index_oids(new_idx)
            if not packed >= reachable.keys():
                raise IntegrityError("the new pack lacks reachable objects; nothing was pruned")
            report.packed = len(packed)
        # A multi-pack index may name packs removed below; readers fall back to the .idx files.
        with contextlib.suppress(FileNotFoundError):
            (pack_dir / "multi-pack-index").unlink()
        for idx in old_packs:
            if idx == new_idx or idx.with_suffix(".keep").exists():
                continue
            garbage = _pack_index_oids(idx) - reachable.keys()
            if garbage and now - idx.with_suffix(".pack").stat().st_mtime < grace:
                report.kept += len(garbage)
                continue
            report.pruned += len(garbage)
            report.removed_packs += 1
            _remove_pack(idx)
        for leftover in pack_dir.iterdir() if pack_dir.is_dir() else []:
            if _stale_pack_leftover(leftover, now, grace):
                report.temporaries += 1
        for fanout in objects.iterdir() if objects.is_dir() else []:
            if _stale_temporary(fanout, now, grace):
                report.temporaries += 1
            if len(fanout.name) != 2 or not fanout.is_dir():
                continue
            for loose in fanout.iterdir():
                if _stale_temporary(loose, now, grace):
                    report.temporaries += 1
                    continue
                oid = fanout.name + loose.name
                if len(oid) != 40 or any(c not in "0123456789abcdef" for c in oid):
                    continue
                if oid not in reachable:
                    try:
                        young = now - loose.stat().st_mtime < grace
                    except FileNotFoundError:
                        continue
                    if young:
                        report.kept += 1
                        continue
                    report.pruned += 1
                with contextlib.suppress(FileNotFoundError):
                    loose.unlink()
            with contextlib.suppress(OSError):
                fanout.rmdir()  # only succeeds when empty
        self._let_go()
        report.bytes_after = _tree_bytes(objects)
        return report

    def maintain(self, budget: int | None = None) -> MaintenanceReport:
        """Pack loose objects and merge small packs when there are enough of them, like
        ``git gc --auto`` (design.md, "Maintenance"). The caller holds the writer lock.

        Packs are merged geometrically (each pack merged is smaller than half the pack above
        it), so the work is proportional to what was written since the last time, amortized.
        With a ``budget``, a merge copies about that many bytes of pack entries and is carried
        on by the next calls of this process (``MaintenanceReport.deferred``) until it is done;
        without one it is done at once. Nothing is pruned: unreferenced objects are packed like
        the others and left to :meth:`gc`.
        """
        report = MaintenanceReport()
        objects = self.path / "objects"
        if _loose_estimate(objects) >= AUTO_PACK_LOOSE:
            loose = _loose_objects(objects)
            if loose:
                pack_dir = objects / "pack"
                idx = self._write_pack(dict.fromkeys(loose, ""), pack_dir)
                if not _pack_index_oids(idx) >= set(loose):
                    raise IntegrityError("the new pack lacks loose objects; nothing was removed")
                for oid in loose:
                    with contextlib.suppress(FileNotFoundError):
                        (objects / oid[:2] / oid[2:]).unlink()
                for fanout in {oid[:2] for oid in loose}:
                    with contextlib.suppress(OSError):
                        (objects / fanout).rmdir()  # only succeeds when empty
                report.packed_loose = len(loose)
        merged = self._merge_packs(objects / "pack", budget, report)
        merge = [] if merged else _packs_to_merge(objects / "pack")
        if merge:
            # Packs PackMerge cannot copy (an index of version 1): their objects read, checked
            # and written again, at once.
            wanted: dict[str, str] = {}
            for idx in merge:
                wanted.update(dict.fromkeys(_pack_index_oids(idx), ""))
            new_idx = self._write_pack(wanted, objects / "pack")
            if not _pack_index_oids(new_idx) >= wanted.keys():
                raise IntegrityError("the merged pack lacks objects; nothing was removed")
            with contextlib.suppress(FileNotFoundError):
                (objects / "pack" / "multi-pack-index").unlink()
            for idx in merge:
                if idx != new_idx:
                    _remove_pack(idx)
            report.merged_packs = len(merge)
        if report.packed_loose or report.merged_packs:
            self._let_go()
        return report

    def _merge_packs(self, pack_dir: Path, budget: int | None, report: MaintenanceReport) -> bool:
        """Carry on this process's merge of the repository's packs, or start one when enough
        packs are due (:func:`_packs_to_merge`), copying about ``budget`` bytes of entries (all
        of them if None); publish it and remove the packs it merged once it is done. False when
        there is nothing to merge this way."""
        key = str(self.path)
        job = _MERGES.pop(key, None)
        if job is not None and job.pid != os.getpid():
            job.abandon()  # the parent's, inherited by fork: its files are not this process's
            job = None
        if job is not None and not all(idx.exists() for idx in job.sources):
            # Another process merged some of these packs meanwhile (every pack is removed under
            # the writer lock, as this runs): its pack holds their objects, so this merge would
            # only publish a second copy of them.
            job.abandon()
            job = None
        if job is None:
            sources = _packs_to_merge(pack_dir)
            if not sources:
                return False
            try:
                job = PackMerge(sources, self.path)
            except ValueError:
                return False
        try:
            if not job.step(_UNBOUNDED if budget is None else budget):
                _MERGES[key] = job
                report.deferred = True
                return True
            new_idx = job.finish(pack_dir)
        except ValueError as exc:  # a damaged entry: nothing is published or removed
            job.abandon()
            raise IntegrityError(f"the packs of {self.path} cannot be merged: {exc}") from None
        except BaseException:
            job.abandon()
            raise
        # The new pack is durable and holds every object of the merged ones (a pack that another
        # process merged or gc removed meanwhile was read through the file kept open).
        with contextlib.suppress(FileNotFoundError):
            (pack_dir / "multi-pack-index").unlink()
        for idx in job.sources:
            if idx != new_idx:
                _remove_pack(idx)
        report.merged_packs = len(job.sources)
        return True

    def _write_pack(self, objects: Iterable[str], pack_dir: Path) -> Path:
        """Write one pack of ``objects`` (ids) durably into ``pack_dir``; return its index path.

        gitmem writes it (:func:`gitmem.pack.write_pack`), each object read and hash-checked
        by :meth:`_read_any`: libgit2's pack builder took about twice as long to pack loose
        objects, for packs of the same size (``benchmarks/bench_pack.py``).
        """
        idx = write_pack(
            ((oid, *self._read_any(oid, _ANY_KIND)) for oid in objects), pack_dir, self.path
        )
        if idx is None:
            raise ValueError("no objects to pack")  # the callers never ask for an empty pack
        return idx


Durability = int | None
"""What :meth:`GitRepo.update_ref` returns: a ticket for :meth:`GitRepo.wait_durable`."""


class Incoming:
    """What :meth:`GitRepo.fetching` fetched: ``refs`` (``{ref: oid}``), in quarantine until
    :meth:`accept`."""

    def __init__(self, objects: Path, refs: dict[str, str], adopt: Callable[[Path], None]) -> None:
        self.refs = refs
        self.objects = objects
        self.accepted = False
        self._adopt = adopt
        self._packs: pygit2.Odb | None = None

    @property
    def packs(self) -> pygit2.Odb:
        """A libgit2 reader of the quarantine's packs (its loose objects are read as gitmem
        reads any, see :meth:`GitRepo._read_any`)."""
        if self._packs is None:
            self._packs = pygit2.Odb()
            self._packs.add_backend(pygit2.OdbBackendPack(str(self.objects)), 1)
        return self._packs

    def accept(self) -> None:
        """Move the fetched objects into the repository, durably (before any ref may name
        them)."""
        if not self.accepted:
            self._packs = None
            self._adopt(self.objects)
            self.accepted = True


class _GroupSync:
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

_GROUPS: dict[str, _GroupSync] = {}
_GROUPS_LOCK = threading.Lock()


def _group_sync(key: str) -> _GroupSync:
    """The group sharing the flushes of ``key``: ``dev:N`` (a file system's ``syncfs``) or
    ``log:PATH`` (a redo log's ``fdatasync``); one per process."""
    with _GROUPS_LOCK:
        group = _GROUPS.get(key)
        if group is None:
            group = _GROUPS[key] = _GroupSync()
        return group


def _wal_on() -> bool:
    """Whether writes go through the redo log: Linux's ``syncfs`` and a boot id are needed."""
    return _BATCHED and wal.boot_id() is not None


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


# How long opening a store after a reboot waits for the writer lock to recover it.
_RECOVERY_LOCK_SECONDS = 30.0
_TYPE_CODES = {name: code for code, name in _TYPE_NAMES.items()}
_GITLINK = 0o160000


_HEAD_TEXT = b"ref: refs/heads/main\n"
# Files libgit2 reads with a blocking open when it opens the repository or reads gitmem's refs.
_CONTROL_FILES = ("config", "packed-refs", "commondir", "objects/info/alternates", wal.LOG_NAME)
_CONFIG_MAX = 1024 * 1024
# A section header [include] or [includeIf "..."], in any case, with any spacing.
_INCLUDE = re.compile(rb"^[ \t]*\[[ \t]*include", re.IGNORECASE | re.MULTILINE)
_OUTSIDE_CONFIG = (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM, ConfigLevel.PROGRAMDATA)
_SEARCH_PATH_LOCK = threading.Lock()
# The outside levels' search paths while an open has them emptied (see _only_repository_config).
_SAVED_SEARCH_PATHS: list[str] = []


@contextlib.contextmanager
def _only_repository_config() -> Iterator[None]:
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


# A loose ref is 41 bytes; libgit2 reads the whole file, and so does this up to here (more is
# not a ref gitmem or git writes, and is refused as corrupt).
_LOOSE_REF_MAX = 4096
_REF_OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


def _identity(info: os.stat_result) -> tuple[int, ...]:
    """What tells one version of a file from another: device, inode, size, modification and
    change times (trusted only for files changed well before they were looked at)."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _settled(info: os.stat_result, checked_at: float) -> bool:
    """True when the file ``info`` describes changed long enough before ``checked_at`` (the
    clock, read before the stat) that any later change must show in its identity."""
    fine = info.st_ctime_ns % 1_000_000_000 != 0  # whole seconds: a coarse file system
    return info.st_ctime < checked_at - (_RACY_FINE_SECONDS if fine else _RACY_SECONDS)


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


def _require_file(path: Path, name: str) -> None:
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


_GC_TMP_PREFIX = PACK_TMP_PREFIX
# Automatic maintenance (GitRepo.maintain): pack the loose objects once about this many have
# accumulated (about a dozen small writes; git's gc.auto is 6,700, but each loose object here is a
# few hundred bytes in a file-system block of 4 KiB) ...
AUTO_PACK_LOOSE = 64
# ... and merge packs once there are more than this many, the smallest first.
AUTO_PACK_LIMIT = 8
# How often (one write in this many) a write checks whether maintenance is due.
AUTO_CHECK_EVERY = 8
# A merge of packs copies at least this many bytes of pack entries per checkpoint (or unlogged
# write) that looks at maintenance, and at least AUTO_MERGE_FACTOR times what the checkpoint
# packed, then goes on at the next: no write waits for a merge of the whole history, and
# merging keeps up with writing (each byte is merged about log2(store / checkpoint) times).
AUTO_MERGE_STEP = 1 << 20
AUTO_MERGE_FACTOR = 8
_UNBOUNDED = 1 << 62
# This process's pack merge under way, by repository path (GitRepo._merge_packs).
_MERGES: dict[str, PackMerge] = {}


@atexit.register
def _finish_merges() -> None:
    """At interpreter exit (after publishing, which may have stepped a merge): finish each merge
    this process has under way, under the writer lock (waited for at most
    :data:`EXIT_LOCK_SECONDS`), so that a process that writes once (a CLI command) still merges
    packs, after its write was acknowledged; best effort, never raises. A merge that cannot be
    finished is dropped, its temporary files removed: its packs stay as they were."""
    pid = os.getpid()
    for path, job in list(_MERGES.items()):
        if job.pid != pid:
            continue  # a forked child's copy of its parent's merge: the parent's files
        try:
            repo = GitRepo(path)
            with repo.write_lock(EXIT_LOCK_SECONDS):
                repo.maintain()
        except Exception:  # an exit handler must not fail the exit
            _log.warning("gitmem: a merge of the packs of %s was left undone at exit", path)
        finally:
            left = _MERGES.pop(path, None)
            if left is not None:
                with contextlib.suppress(OSError):
                    left.abandon()


_HEX_NAMES = frozenset(f"{i:02x}" for i in range(256))


@dataclass
class MaintenanceReport:
    """What automatic maintenance did: loose objects packed, packs merged into one."""

    packed_loose: int = 0
    merged_packs: int = 0
    # True when a merge was carried on but not finished: the next call goes on with it.
    deferred: bool = False


def _loose_estimate(objects: Path) -> int:
    """About how many loose objects there are, from eight of the 256 fan-out directories."""
    seen = 0
    for fanout in _SAMPLED_FANOUTS:
        with contextlib.suppress(OSError):
            seen += len(os.listdir(f"{objects}/{fanout}"))
    return seen * (256 // len(_SAMPLED_FANOUTS))


_SAMPLED_FANOUTS = ("00", "20", "40", "60", "80", "a0", "c0", "e0")


def _loose_objects(objects: Path) -> list[str]:
    """Every loose object id (a name that is not one is left alone)."""
    found: list[str] = []
    for fanout in sorted(_HEX_NAMES & set(os.listdir(objects))):
        for name in os.listdir(objects / fanout):
            oid = fanout + name
            if len(oid) == 40 and set(oid) <= _HEX_TEXT:
                found.append(oid)
    return found


_HEX_TEXT = frozenset("0123456789abcdef")
# The temporary files an object writer killed mid-write leaves: gitmem's own (GitRepo._write_loose,
# in objects/) and libgit2's (in objects/ or a fan-out directory).
_TEMPORARY_OBJECT_PREFIXES = (_TMP_OBJECT, "tmp_object_git2_")


# What a pack writer killed mid-write leaves in objects/pack: libgit2's indexer writes a fetched
# pack as pack_git2_* and its index as pack-<id>.idx.lock, git's as tmp_pack_* and tmp_idx_*,
# before naming them.
_TEMPORARY_PACK_PREFIXES = ("pack_git2_", "tmp_pack_", "tmp_idx_")


def _stale_temporary(path: Path, now: float, grace: float) -> bool:
    """Remove ``path`` and return True if it is an object writer's temporary file older than
    ``grace`` seconds; a younger one may be a live writer's (gc's lock does not bind libgit2
    writers outside gitmem), so it stays, as does anything else."""
    if not path.name.startswith(_TEMPORARY_OBJECT_PREFIXES):
        return False
    return _remove_if_old(path, now, grace)


def _stale_pack_leftover(path: Path, now: float, grace: float) -> bool:
    """Remove ``path`` (in ``objects/pack``) and return True if it is what a pack writer killed
    mid-write leaves, older than ``grace`` seconds: a temporary pack or index of libgit2's or
    git's (an index's ``.lock`` file too), or a pack without its index (gitmem's and libgit2's
    writers rename the pack before the index, and no reader sees a pack without one). A pack
    whose index exists, or that has a ``.keep`` file, stays; so does a younger leftover, which
    may be a live writer's."""
    name = path.name
    if name.startswith(_TEMPORARY_PACK_PREFIXES) or (
        name.startswith("pack-") and name.endswith(".idx.lock")
    ):
        return _remove_if_old(path, now, grace)
    if not (name.startswith("pack-") and name.endswith(".pack")):
        return False
    if path.with_suffix(".idx").exists() or path.with_suffix(".keep").exists():
        return False
    return _remove_if_old(path, now, grace)


def _remove_if_old(path: Path, now: float, grace: float) -> bool:
    """Remove ``path`` and return True if it is a regular file older than ``grace`` seconds."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or now - info.st_mtime < grace:
            return False
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def _packs_to_merge(pack_dir: Path) -> list[Path]:
    """The packs to merge into one, or none while there are few enough.

    Geometric, as ``git repack --geometric=2``: sorted by size, the smallest packs up to the
    first pack at least twice as large as all smaller ones together are merged; larger packs,
    which hold most of the history, are left alone, so a merge costs about what was written
    since the previous one.
    """
    try:
        packs = [(p.with_suffix(".pack").stat().st_size, p) for p in pack_dir.glob("pack-*.idx")]
    except OSError:
        return []
    packs = [entry for entry in packs if not entry[1].with_suffix(".keep").exists()]
    if len(packs) <= AUTO_PACK_LIMIT:
        return []
    packs.sort()
    total, cut = 0, 0
    for i, (size, _) in enumerate(packs):
        if i >= 2 and size >= 2 * total:
            break
        total += size
        cut = i + 1
    return [path for _, path in packs[:cut]] if cut >= 2 else []


def _remove_pack(idx: Path) -> None:
    # The index goes first: a pack without one is invisible to new readers.
    for suffix in (".idx", ".pack", ".rev", ".bitmap", ".mtimes"):
        with contextlib.suppress(FileNotFoundError):
            idx.with_suffix(suffix).unlink()


# Unreferenced objects younger than this survive a gc (git's default gc.pruneExpire).
DEFAULT_GC_GRACE = 14 * 24 * 3600.0


@dataclass
class GcReport:
    """What a garbage collection did: objects packed, pruned and kept, bytes before and after."""

    packed: int = 0
    pruned: int = 0
    kept: int = 0
    removed_packs: int = 0
    # What writers killed mid-write left, removed once older than the grace: temporary object
    # files, and in objects/pack temporary packs and indexes, and packs without their index.
    temporaries: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    # Objects that refs other than gitmem's own reach but that are missing: nothing to keep.
    missing: list[str] = field(default_factory=list)


def commit_bytes(tree: str, parents: Sequence[str], message: bytes) -> bytes:
    """The raw git commit of ``tree`` with ``parents`` and ``message``, by gitmem's neutral
    identity at time 0 (author and committer), as :func:`parse_commit` reads it."""
    if b"\0" in message:
        raise ValueError("a commit message cannot hold a NUL byte")
    signature = b"%s <%s> 0 +0000" % (_SIGNATURE.name.encode(), _SIGNATURE.email.encode())
    lines = [b"tree " + _id_bytes(tree)] + [b"parent " + _id_bytes(p) for p in parents]
    lines += [b"author " + signature, b"committer " + signature]
    return b"\n".join(lines) + b"\n\n" + message


def tree_bytes(entries: list[TreeEntry]) -> bytes:
    """The raw git tree of ``entries``: sorted as git sorts (a tree's name as if it ended in
    ``/``), each entry ``MODE SP NAME NUL ID`` with the mode in octal without leading zeros. A
    name given twice keeps its last entry, as libgit2's tree builder does."""

    def order(entry: TreeEntry) -> bytes:
        name = entry.name.encode("utf-8")
        return name + b"/" if entry.mode == TREE_MODE else name

    return b"".join(
        b"%o %s\0%s" % (entry.mode, entry.name.encode("utf-8"), bytes.fromhex(entry.oid))
        for entry in sorted({entry.name: entry for entry in entries}.values(), key=order)
    )


class _Callbacks(pygit2.RemoteCallbacks):
    """Credentials from the environment only, and a record of refused ref updates.

    ssh: the key file named by ``GITMEM_SSH_KEY`` (passphrase ``GITMEM_SSH_PASSPHRASE``), else
    the ssh agent. https: the token in ``GITMEM_HTTPS_TOKEN`` as the password of
    ``GITMEM_HTTPS_USER`` (default ``x-access-token``). Each kind is offered once: libgit2 asks
    again after a refusal, and a second offer of the same would loop.
    """

    def __init__(self, url: str) -> None:
        super().__init__()
        self.rejected: list[tuple[str, str]] = []
        self._offered: set[str] = set()
        self.interrupted = False
        self._url = url
        # libgit2 reads ~/.ssh/known_hosts below the home it found when it started: make it
        # the one knownhosts reads, the user's home now.
        pygit2.settings.homedir = str(knownhosts.known_hosts_file().parent.parent)

    def certificate_check(self, certificate: None, valid: bool, host: bytes) -> bool:
        """ssh: the host key must be the one ``~/.ssh/known_hosts`` holds (libgit2 checks,
        ``valid``; pygit2 would accept any); https: the TLS library's verdict, as before."""
        if knownhosts.ssh_host(self._url) is None:
            raise pygit2.Passthrough
        if valid:
            return True
        why = knownhosts.refused(self._url)
        if why is not None:
            raise why
        return True

    # libgit2 calls these many times a second during a transfer: where an interrupt that
    # _interruptible noted stops it (raised here, inside pygit2's wrapper, it aborts libgit2's
    # operation and pygit2 raises it again when the operation returns).

    def transfer_progress(self, stats: pygit2.remotes.TransferProgress) -> None:
        self._stop_if_interrupted()

    def sideband_progress(self, string: str) -> None:
        self._stop_if_interrupted()

    def push_transfer_progress(
        self, objects_pushed: int, total_objects: int, bytes_pushed: int
    ) -> None:
        self._stop_if_interrupted()

    def _stop_if_interrupted(self) -> None:
        if self.interrupted:
            raise KeyboardInterrupt

    def credentials(
        self, url: str, username_from_url: str | None, allowed_types: CredentialType
    ) -> pygit2.Keypair | pygit2.KeypairFromAgent | pygit2.UserPass:
        user = username_from_url or "git"
        if allowed_types & CredentialType.SSH_KEY and "ssh" not in self._offered:
            self._offered.add("ssh")
            key_file = os.environ.get("GITMEM_SSH_KEY")
            if key_file:
                public = key_file + ".pub"
                return pygit2.Keypair(
                    user,
                    public if os.path.exists(public) else None,
                    key_file,
                    os.environ.get("GITMEM_SSH_PASSPHRASE", ""),
                )
            return pygit2.KeypairFromAgent(user)
        token = os.environ.get("GITMEM_HTTPS_TOKEN")
        if (
            allowed_types & CredentialType.USERPASS_PLAINTEXT
            and token
            and "token" not in self._offered
        ):
            self._offered.add("token")
            return pygit2.UserPass(os.environ.get("GITMEM_HTTPS_USER", "x-access-token"), token)
        raise pygit2.GitError(
            "no (more) credentials: set GITMEM_SSH_KEY, an ssh agent, or GITMEM_HTTPS_TOKEN"
        )

    def push_update_reference(self, refname: str, message: str | None) -> None:
        if message is not None:
            self.rejected.append((refname, message))


# libgit2's message for a push whose remote ref holds commits this repository lacks.
_NOT_FAST_FORWARD = "contains commits that are not present locally"


@contextlib.contextmanager
def _remote_errors(url: str, callbacks: _Callbacks, timeout: float) -> Iterator[None]:
    """libgit2's transport failures as one :class:`RemoteError` line naming the URL; Ctrl-C
    stops the transfer (:func:`_interruptible`); a remote silent for ``timeout`` seconds stops
    it too (:func:`_network_timeout`)."""
    try:
        with _network_timeout(timeout), _interruptible(callbacks):
            yield
    except (pygit2.GitError, OSError, KeyError, ValueError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if _TIMED_OUT.search(detail):
            raise RemoteError(
                f"the remote {url} did not answer within {timeout:g} s; try again later, or "
                "allow it longer with --timeout or GITMEM_NETWORK_TIMEOUT"
            ) from None
        raise RemoteError(f"cannot reach the remote {url}: {detail}") from None


# libgit2's words for a socket that stayed silent past its timeout: its own ("timed out"),
# libssh2's ("Timed out waiting on socket"), and OpenSSL's read of a socket whose receive
# timeout passed (EAGAIN, "Resource temporarily unavailable").
_TIMED_OUT = re.compile(r"timed out|resource temporarily unavailable", re.IGNORECASE)
_timeouts: list[float] = []  # of the transfers running now, guarded by _timeouts_lock
_timeouts_lock = threading.Lock()


@contextlib.contextmanager
def _network_timeout(seconds: float) -> Iterator[None]:
    """Have libgit2 give up on a remote that does not let it connect, or does not answer a
    read or a write, within ``seconds``: a host that accepts and never answers would otherwise
    hold the transfer forever. libgit2 honours this on every network transport (git://, ssh,
    http and https); it has one setting per process, so transfers that overlap each wait as
    long as the longest of their timeouts."""
    with _timeouts_lock:
        _timeouts.append(seconds)
        _set_libgit2_timeout(max(_timeouts))
    try:
        yield
    finally:
        with _timeouts_lock:
            _timeouts.remove(seconds)
            if _timeouts:
                _set_libgit2_timeout(max(_timeouts))


def _set_libgit2_timeout(seconds: float) -> None:
    # In milliseconds, as a C int; 0 would mean "wait forever".
    millis = min(max(1, round(seconds * 1000)), 2**31 - 1)
    pygit2.settings.server_connect_timeout = millis
    pygit2.settings.server_timeout = millis


@contextlib.contextmanager
def _interruptible(callbacks: _Callbacks) -> Iterator[None]:
    """Make SIGINT (Ctrl-C) stop a libgit2 transfer with :class:`KeyboardInterrupt`.

    A signal that arrives while libgit2 runs is handled when libgit2 next calls back into
    Python, at the first line of pygit2's callback wrapper, outside its ``try``: Python's own
    KeyboardInterrupt raised there is printed and dropped by cffi, and the transfer goes on.
    So, on the main thread and when SIGINT has Python's default handler, the signal only marks
    ``callbacks``, whose progress callbacks raise it where pygit2 passes it on.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def note(_signum: int, _frame: object) -> None:
        callbacks.interrupted = True

    signal.signal(signal.SIGINT, note)
    try:
        yield
    except Exception:
        # The signal also cuts short the system call libgit2 was waiting in, which libgit2
        # reports as its own failure ("Interrupted system call"): the Ctrl-C is the cause.
        if not callbacks.interrupted:
            raise
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if callbacks.interrupted:  # after the last callback: as if it came just after the transfer
        raise KeyboardInterrupt


# The modes git writes, by their text: an entry's mode is looked up here, and only another is
# checked digit by digit (parse_tree's loop is most of reading a big split directory's trees).
_MODES = {b"%o" % mode: mode for mode in (0o40000, 0o100644, 0o100755, 0o120000, 0o160000)}
_new_tree_entry: Callable[[tuple[str, str, int]], TreeEntry] = partial(tuple.__new__, TreeEntry)


def parse_tree(data: bytes, oid: str) -> list[TreeEntry]:
    """The entries of a raw git tree, checked as strictly as git's own writer makes them.

    Each entry is ``MODE SP NAME NUL ID`` (mode in octal without leading zeros, id as 20 raw
    bytes). Names must be UTF-8 without ``/``, each used once, in git's order (a tree's name
    sorts as if it ended in ``/``): one canonical form per content, as git fsck demands.
    """
    entries: list[TreeEntry] = []
    names: set[bytes] = set()
    previous = b""
    pos, end = 0, len(data)
    find = data.find
    while pos < end:
        space = find(b" ", pos, pos + 8)
        nul = find(b"\0", space + 1) if space > pos else -1
        name = data[space + 1 : nul]
        if nul < 0 or nul + 21 > end or not name or b"/" in name or name in names:
            raise IntegrityError(f"tree {oid} is malformed")
        mode_text = data[pos:space]
        mode = _MODES.get(mode_text)
        if mode is None:
            if mode_text[:1] == b"0" or not set(mode_text) <= _OCTAL:
                raise IntegrityError(f"tree {oid} is malformed")
            mode = int(mode_text, 8)
        key = name + b"/" if mode == TREE_MODE else name
        if key <= previous:
            raise IntegrityError(f"tree {oid} is malformed: its entries are out of order")
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            raise IntegrityError(f"tree {oid} is malformed: a name is not UTF-8") from None
        entries.append(_new_tree_entry((text, data[nul + 1 : nul + 21].hex(), mode)))
        names.add(name)
        previous = key
        pos = nul + 21
    return entries


def parse_commit(data: bytes, oid: str) -> CommitInfo:
    """What a raw git commit says: ``tree``, then ``parent`` lines, then author and committer
    (anything after them up to the blank line is ignored, as git does), then the message."""
    head, sep, message = data.partition(b"\n\n")
    lines = head.split(b"\n")
    if not sep or not lines[0].startswith(b"tree "):
        raise IntegrityError(f"commit {oid} is malformed")
    count = 1
    while count < len(lines) and lines[count].startswith(b"parent "):
        count += 1
    after = lines[count : count + 2]
    if [line.split(b" ", 1)[0] for line in after] != [b"author", b"committer"]:
        raise IntegrityError(f"commit {oid} is malformed")
    tree = _hex_id(lines[0][5:], oid)
    parents = tuple(_hex_id(line[7:], oid) for line in lines[1:count])
    return CommitInfo(oid=oid, tree=tree, parents=parents, message=message)


def _tag_target(data: bytes, oid: str) -> str:
    first = data.split(b"\n", 1)[0]
    if not first.startswith(b"object "):
        raise IntegrityError(f"tag {oid} is malformed")
    return _hex_id(first[7:], oid)


def _id_bytes(oid: str) -> bytes:
    """A full object id as written in a commit; ValueError for anything else."""
    value = oid.encode()
    if len(value) != 40 or not set(value) <= _HEX:
        raise ValueError(f"{oid!r} is not a full object id")
    return value


def _hex_id(value: bytes, oid: str) -> str:
    if len(value) != 40 or not set(value) <= _HEX:
        raise IntegrityError(f"object {oid} is malformed: {value[:48]!r} is not an object id")
    return value.decode()


def _check_size(what: str, size: int, limit: int) -> None:
    if size > limit:
        raise FormatLimitExceeded(
            f"refused to write a {what} of {size:,} bytes: the repository format allows at "
            f"most {limit:,}. Nothing was written."
        )


def _check_declared(oid: str, kind: bytes, size: int, limits: Mapping[bytes, int]) -> None:
    """Refuse an object, from its header alone, whose type or size ``limits`` does not allow."""
    limit = limits.get(kind)
    if limit is None:
        wanted = " or ".join(k.decode() for k in limits)
        raise IntegrityError(f"object {oid} should be a {wanted}")
    if size > limit:
        raise IntegrityError(
            f"object {oid} is corrupt: it declares {size:,} bytes, more than a gitmem "
            f"{kind.decode()} may have ({limit:,})"
        )


def _deflate_bound(size: int) -> int:
    """The longest zlib stream of ``size`` bytes (zlib's ``compressBound``, any level)."""
    return size + (size >> 12) + (size >> 14) + (size >> 25) + 13


# An object header is "<type> <decimal size>\0": "commit 67108864\0" is 16 bytes.
_HEADER_MAX = 32


def _read_loose(objects: str, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes] | None:
    """``(type, payload)`` of loose object ``oid``, hash-verified; None when it is not loose.

    Inflates only the header first; the rest only if its type and size are allowed, and never
    more than the size it declares.
    """
    largest = max(limits.values())
    try:
        data = read_regular_file(f"{objects}/{oid[:2]}/{oid[2:]}", _deflate_bound(largest + 32))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            wanted = " or ".join(k.decode() for k in limits)
            raise IntegrityError(
                f"object {oid} is corrupt: its loose file is longer than a gitmem {wanted} may be"
            ) from None
        raise IntegrityError(f"object {oid} cannot be read: {exc.strerror or exc}") from None
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, _HEADER_MAX)
        nul = raw.find(b"\0")
        kind, _, size_text = raw[: max(nul, 0)].partition(b" ")
        if nul < 0 or not size_text.isdigit() or len(size_text) > 20:
            raise IntegrityError(f"object {oid} is corrupt: its header is malformed")
        size = int(size_text)
        _check_declared(oid, kind, size, limits)
        total = nul + 1 + size
        if len(raw) <= total:
            # One byte more than declared: a longer object shows itself without inflating it.
            raw += inflater.decompress(inflater.unconsumed_tail, total + 1 - len(raw))
        if len(raw) == total and not inflater.eof:
            raw += inflater.decompress(inflater.unconsumed_tail, 1)  # reaches the checksum
    except zlib.error:
        raise IntegrityError(f"object {oid} is corrupt: it does not inflate") from None
    if len(raw) != total:
        raise IntegrityError(f"object {oid} is corrupt: its header is malformed")
    if not inflater.eof:
        raise IntegrityError(f"object {oid} is corrupt: its loose file is truncated")
    if _CHECK_LOOSE_HASHES and hashlib.sha1(raw).hexdigest() != oid:
        raise IntegrityError(f"object {oid} is corrupt: its content does not match its id")
    return kind, raw[nul + 1 :]


def _pack_index_oids(idx: Path) -> set[str]:
    """The object ids listed in a pack index (version 1 or 2)."""
    data = idx.read_bytes()
    if data[:4] == b"\xfftOc":
        (count,) = struct.unpack(">I", data[8 + 255 * 4 : 8 + 256 * 4])
        start = 8 + 256 * 4
        return {data[start + 20 * i : start + 20 * i + 20].hex() for i in range(count)}
    (count,) = struct.unpack(">I", data[255 * 4 : 256 * 4])
    start = 256 * 4
    return {data[start + 24 * i + 4 : start + 24 * i + 24].hex() for i in range(count)}


def _tree_bytes(root: Path) -> int:
    total = 0
    for path in root.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            if path.is_file():
                total += path.stat().st_size
    return total


# -- publishing when the process ends (design.md, "The redo log") ----------------------------

# How long publishing at interpreter exit waits for another writer's lock: an exit must not hang.
EXIT_LOCK_SECONDS = 2.0
# Repositories this process logged writes to that it has not published since, by absolute
# path, with the id of the process that logged them: a forked child inherits the dict, and must
# not publish (or wait on locks) for its parent. Paths only: no key, no object is kept alive.
_LOGGED: dict[str, int] = {}
_log = logging.getLogger("gitmem")


def publish_logged(lock_timeout: float = EXIT_LOCK_SECONDS) -> list[tuple[str, GitMemError]]:
    """Checkpoint (the clearing kind) every repository this process logged writes to and has
    not published since, so that plain git reads each; waits up to ``lock_timeout`` seconds for
    each one's writer lock. Never raises for a repository: returns ``(path, error)`` for those
    that could not be published (their writes stay in the log, durable and readable by
    gitmem). A repository whose directory is gone is skipped."""
    failed: list[tuple[str, GitMemError]] = []
    pid = os.getpid()
    for path, owner in list(_LOGGED.items()):
        if owner != pid:
            continue
        if not os.path.isdir(path):
            _LOGGED.pop(path, None)
            continue
        try:
            GitRepo(path).publish(lock_timeout)
        except GitMemError as exc:
            failed.append((path, exc))
        except OSError as exc:
            failed.append((path, StorageError(f"{exc.strerror or exc}")))
        finally:
            # Tried once: the exit handler must not try again what the CLI already reported.
            _LOGGED.pop(path, None)
    return failed


def _after_fork_in_child() -> None:
    """In a forked child, which has only the thread that forked: a process tag of its own, and
    fresh module locks (another thread may have held one at the fork). A flush another thread
    was running, or waiting for, never ends here: the child's groups start empty. An open that
    another thread had under way is undone (its search paths put back). ``_LOGGED`` is kept:
    its entries name the parent, so the child publishes nothing of the parent's at exit."""
    global _GROUPS, _GROUPS_LOCK, _SEARCH_PATH_LOCK
    _PROCESS[0] = _process_tag()
    _GROUPS, _GROUPS_LOCK = {}, threading.Lock()
    _SEARCH_PATH_LOCK = threading.Lock()
    if _SAVED_SEARCH_PATHS:
        _restore_search_paths()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _publish_at_exit() -> None:
    """Best effort at interpreter exit: never raises, waits at most :data:`EXIT_LOCK_SECONDS`
    for each lock (a killed process runs no exit handler: gitmem reads its log as ever)."""
    try:
        for path, exc in publish_logged(EXIT_LOCK_SECONDS):
            _log.warning(
                "gitmem: the writes in the redo log of %s were not published at exit (%s); "
                "gitmem reads them, and `gitmem --repo %s checkpoint` publishes them for git",
                path,
                exc,
                path,
            )
    except Exception:  # an exit handler must not fail the exit
        _log.warning("gitmem: publishing the redo log at exit failed", exc_info=True)
