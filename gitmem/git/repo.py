"""The repository: composes the storage layers of this package and decides their order.

Objects (``objects.py``) and refs (``refs.py``) know nothing of the redo log (``redo.py``),
which sits over them; maintenance (``maintenance.py``) reads through this repository; the write
mode (``flush.py``) is chosen when a store is opened. This module decides, for each operation,
which layers it takes and in what order: the log's objects before the object database's, a
checkpoint before maintenance and before gc, the writer lock before recovery.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pygit2

from .. import forksafe
from ..errors import GitMemError, IntegrityError, LockTimeout, StorageError
from ..format import MAX_BLOB_BYTES, MAX_COMMIT_BYTES, MAX_TREE_BYTES
from ..fsutil import DIR_MODE, fsync_dir, make_private_dirs
from . import flush, lock, maintenance, wal
from .config import Config
from .flush import Durability, WriteMode
from .handle import Handle, only_repository_config
from .maintenance import GcReport, Maintenance, MaintenanceReport
from .objects import (
    CommitInfo,
    Objects,
    TreeEntry,
    check_declared,
    check_size,
    commit_bytes,
    parse_commit,
    parse_tree,
    tree_bytes,
)
from .redo import LOGGED, RedoLog
from .refs import BRANCH, Refs
from .remotes import NETWORK_TIMEOUT, Incoming, Remotes

# How long opening a store after a reboot waits for the writer lock to recover it.
_RECOVERY_LOCK_SECONDS = 30.0
# In the repository while the next gc must prune every unreferenced object (see prune_next_gc).
PRUNE_NOW = "gitmem.prune-now"


class GitRepo:
    """A bare git repository, opened lazily once per thread, writing in ``mode`` (the
    platform's default, :func:`flush.default_mode`, unless given)."""

    def __init__(self, path: str | os.PathLike[str], mode: WriteMode | None = None) -> None:
        self.path = Path(path)
        self.mode = flush.default_mode() if mode is None else mode
        flush.use(self.mode)
        self.handle = Handle(self.path, self._recover_if_rebooted)
        self.objects = Objects(self.handle)
        self.refs = Refs(self.handle)
        self.config = Config(self.handle)
        self.log = RedoLog(
            self.path,
            self.objects,
            self.refs,
            self.config,
            self.sync,
            self._auto_maintain,
            enabled=self.mode.logged,
        )
        self.maintenance = Maintenance(self.handle, self)
        self.remotes = Remotes(self.handle, self.refs)
        # Whether this thread holds the writer lock.
        self._local = threading.local()
        forksafe.reset_in_child(self.log.after_fork_in_child)

    # -- opening --------------------------------------------------------------------------

    @classmethod
    def init(
        cls, path: str | os.PathLike[str], timeout: float = 30.0, mode: WriteMode | None = None
    ) -> GitRepo:
        """Create a bare repository at ``path`` (owner-only) and return it."""
        target = make_private_dirs(path)
        os.chmod(target, DIR_MODE)
        made = cls(target, mode)
        # Racing creators take turns, and the lock file, made first, marks a half-initialized
        # directory as gitmem's own so that a creator killed mid-init does not wedge the next.
        # Only the flock: libgit2's init killed mid-way can leave a repository that does not open.
        with made.flock(timeout):
            for name in ("config.lock", "HEAD.lock"):
                with contextlib.suppress(FileNotFoundError):
                    (target / name).unlink()
            with only_repository_config():
                repo = pygit2.init_repository(str(target), bare=True, initial_head="main")
            # No reflogs: they would record when and how often refs moved; nothing needs them.
            repo.config["core.logAllRefUpdates"] = "false"
            made.sync()
        return made

    @staticmethod
    def exists(path: str | os.PathLike[str]) -> bool:
        """True when ``path`` holds a git repository (gitmem's or not)."""
        # Not HEAD: gitmem does not use it, and recreates it when it is missing.
        return (Path(path) / "objects").is_dir() and (Path(path) / "refs").is_dir()

    # -- objects: the redo log's first, then the object database ---------------------------

    def write_blob(self, data: bytes) -> str:
        """Store ``data`` as a blob and return its id."""
        check_size("blob", len(data), MAX_BLOB_BYTES)
        return self._store(b"blob", data)

    def _store(self, kind: bytes, payload: bytes) -> str:
        """Write one object; every object gitmem writes goes through here.

        With the redo log (design.md, "Writing", step 7) nothing is written to the repository:
        the object is kept for the write's log record (readable by this process at once), and
        a checkpoint publishes it.
        """
        if self.mode.logged:
            return self.log.add(kind, payload)
        if self.mode.batched:
            return self.objects.write_loose(kind, payload)
        return self.objects.write_odb(kind, payload)

    def read_blob(self, oid: str, limit: int = MAX_BLOB_BYTES) -> bytes:
        """The bytes of blob ``oid``; :class:`IntegrityError` if missing, corrupt, not a blob,
        or declared longer than ``limit`` bytes (then nothing of it is inflated)."""
        return self._read(oid, b"blob", limit)

    def _read(self, oid: str, kind: bytes, limit: int) -> bytes:
        """The payload of object ``oid``, which must be of ``kind`` and at most ``limit`` bytes."""
        return self.read_any(oid, {kind: limit})[1]

    def read_any(self, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes]:
        """``(type, payload)`` of object ``oid``, its hash checked.

        Every object gitmem reads comes through here. ``limits`` maps each acceptable type to
        the largest payload it may have: an object of another type, or declaring a larger size,
        is refused from its header, before it is inflated, so a planted decompression bomb
        costs nothing (see :meth:`Objects.read_stored`). An object of the redo log (written by
        this process since its last record, or held by a record of the log's current
        generation) is taken from memory; its id was computed from its payload.
        """
        for attempt in range(2):
            logged = self.log.logged(oid)
            if logged is not None:
                check_declared(oid, logged[0], len(logged[1]), limits)
                return logged
            stored = self.objects.read_stored(oid, limits)
            if stored is None:
                stored = self.remotes.read_incoming(oid, limits)
            if stored is not None:
                return stored
            if attempt or not self.mode.logged:
                break
            # Appended to the log, or published by a checkpoint, since the log was last read.
            self.log.view()
        raise IntegrityError(f"object {oid} is missing from the repository")

    def has(self, oid: str) -> bool:
        """True when object ``oid`` is in the object database or the redo log."""
        if self.log.logged(oid) is not None or self.objects.exists(oid):
            return True
        return self.mode.logged and self.log.view() is not None and self.log.logged(oid) is not None

    def write_tree(self, entries: list[TreeEntry]) -> str:
        """Store a tree of ``entries`` and return its id.

        The tree is serialized here, in git's canonical form (what :func:`parse_tree` accepts),
        and written as raw bytes: libgit2's tree builder checks each entry's object exists on
        disk, a file-system lookup per entry; every entry here names an object this writer has
        just written or read from an authenticated tree.
        """
        return self.write_raw_tree(tree_bytes(entries))

    def write_raw_tree(self, data: bytes) -> str:
        """Store the already serialized tree ``data`` (git's canonical form, as
        :func:`tree_bytes` makes it) and return its id."""
        if len(data) > MAX_TREE_BYTES:  # the test first: a write stores a few trees a call
            check_size("tree (a directory with this many entries)", len(data), MAX_TREE_BYTES)
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

    def write_commit(self, tree: str, parents: list[str], message: bytes, *, time: int) -> str:
        """Store a commit with the neutral identity at ``time`` (the operation's sequence
        number, design.md "Commits"), moving no ref."""
        # Serialized here, as libgit2's create_commit would (the same bytes, so the same id):
        # create_commit first looks the tree up, parsing every entry of the root directory,
        # which would make a commit cost in proportion to the size of /memories.
        data = commit_bytes(tree, parents, message, time=time)
        check_size("commit", len(data), MAX_COMMIT_BYTES)
        return self._store(b"commit", data)

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
        found = {oid for oid in self.log.object_ids() if oid.startswith(wanted)}
        try:
            found.add(str(self.handle.git.expand_id(prefix)))
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
        seen = set(self.log.object_ids())
        yield from seen
        for oid in self.handle.git.odb:
            if str(oid) not in seen:
                yield str(oid)

    # -- refs: the branch as the redo log has it, else the ref file -------------------------

    def ref(self, name: str) -> str | None:
        """The id ``name`` points at, or ``None`` when the ref does not exist.

        The branch is where the last record of the redo log's current generation moved it,
        when that generation has records (design.md, "The redo log"); else, and for every
        other ref, the ref file (see :meth:`Refs.ref_file`). A log with nothing new costs an
        ``lstat`` and two ``pread`` (see :meth:`RedoLog.view`).
        """
        # Opened (once per thread) as before, though not used here: opening checks the files
        # that would block libgit2 (a FIFO as config, ...), which must be refused at once.
        self.handle.git  # noqa: B018
        if name == BRANCH and self.mode.logged:
            tail = self.log.view()
            if tail is not None and tail.records:
                return tail.last
        return self.refs.ref_file(name)

    def has_refs(self) -> bool:
        """True when any ref exists: a branch (in the redo log or a file), a tag, gitmem's
        metadata (HEAD aside)."""
        tail = self.log.view()
        if tail is not None and tail.records:
            return True
        return bool(self.refs.names())

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
        check_every = maintenance.AUTO_CHECK_EVERY
        if not self.mode.logged and name == BRANCH and int(new[:2], 16) % check_every == 0:
            self._auto_maintain()
        if wait:
            self.wait_durable(ticket)
        return ticket

    def wait_durable(self, ticket: Durability) -> None:
        """Return once the ref move that gave ``ticket`` is on stable storage."""
        if ticket is None:
            return
        if self.mode.logged:
            log = self.log.file
            flush.log_group(log).sync(lambda: wal.datasync(log), ticket, share=True)
        else:
            flush.syncfs_group(self.path).sync(flush.partial_syncfs(self.path), ticket, share=True)

    def writer(self) -> contextlib.AbstractContextManager[None]:
        """Announce, for the block, a writer on its way to moving a ref (see
        :meth:`wait_durable`): writers of this process that are done wait a little for its
        flush rather than making their own."""
        if not self.mode.batched:
            return contextlib.nullcontext()
        if self.mode.logged:
            return flush.log_group(self.log.file).writer()
        return flush.syncfs_group(self.path).writer()

    def _publish(self, name: str, new: str, expected: str | None) -> Durability:
        if self.mode.logged:
            if self.log.loggable(name, new, expected):
                return self.log.publish_logged(name, new, expected)
            # Any other move (a fast-forward, a merge, the metadata ref, a large write): the
            # log and the objects written are published durably first, then the ref is moved
            # and made durable, and a new generation of the log starts from it.
            self._checkpoint()
            self.refs.swap_ref(name, new, expected, lambda: None, check=self.ref)
            self._checkpoint()
            return None
        if self.mode.batched:
            self.refs.swap_ref(name, new, expected, self.sync, check=self.ref)
            return flush.syncfs_group(self.path).ticket()
        if expected is None:
            self.sync()  # objects/ itself: libgit2 fsyncs a new objects/xx but not its parent
            self.refs.create(name, new)
        else:
            self.refs.set_ref(name, new, expected, self.sync)
        self.sync()
        return None

    def sync(self) -> None:
        """Make everything written to the repository so far durable (see :func:`flush.sync`)."""
        flush.sync(self.path, self.mode)

    def fsync_dir(self, relative: str = "") -> None:
        """fsync a directory of the repository, for metadata written outside libgit2."""
        fsync_dir(self.path / relative)

    # -- the redo log: checkpoints, then maintenance ---------------------------------------

    def checkpoint(self, *, clear: bool = False, rest: bool = False) -> None:
        """Under the writer lock: publish what the redo log holds and start a new generation.

        Every object of the log's current generation (and any written since its last record)
        goes into the object database as one pack, durably; the branch's ref file is moved to
        the log's head and made durable; and a new generation starts from that head.
        Afterwards plain git sees every acknowledged write. With ``clear``, the repository's
        config stops naming the log's extension (see :meth:`Config.mark_log_pending`), so git
        reads it again. With ``rest`` (a writer done with the store), the new generation's log
        is :data:`wal.REST_CAPACITY` long.
        :class:`StorageError` if it cannot be written (a full disk): the writes stay in the log.
        """
        self._publish_or_fail(clear=clear, size=wal.REST_CAPACITY if rest else None)

    def scrub_log(self) -> None:
        """Under the writer lock: publish the redo log (a checkpoint), then overwrite every
        stale record it still holds with zeros (see :meth:`RedoLog.scrub`)."""
        self._publish_or_fail(clear=True, maintain=False)
        self.log.scrub()

    def _publish_or_fail(
        self, *, clear: bool, maintain: bool = True, size: int | None = None
    ) -> None:
        try:
            self._checkpoint(size, clear=clear, maintain=maintain)
        except OSError as exc:
            raise StorageError(
                f"cannot publish the redo log of {self.path} into the repository: "
                f"{exc.strerror or exc}; its writes stay in the log, and nothing was pruned"
            ) from None

    def _checkpoint(
        self, size: int | None = None, *, clear: bool = False, maintain: bool = True
    ) -> None:
        """:meth:`RedoLog.checkpoint`, which, when ``maintain`` and it packed objects, has
        maintenance look whether it is due (:meth:`_auto_maintain`)."""
        self.log.checkpoint(size, clear=clear, maintain=maintain)

    def _auto_maintain(self, written: int = 0) -> None:
        """Maintenance after a checkpoint that packed ``written`` bytes (or a write that was
        not logged), its pack merges bounded (see :data:`maintenance.AUTO_MERGE_STEP`)."""
        if os.environ.get("GITMEM_GC_AUTO") == "0":
            return  # turned off, as git's gc.auto=0 does
        # The write is durable already: a failure here (a full disk) must not fail it; the next
        # write tries again, and so does `gitmem gc`.
        budget = max(maintenance.AUTO_MERGE_STEP, maintenance.AUTO_MERGE_FACTOR * written)
        with contextlib.suppress(OSError, pygit2.GitError, GitMemError):
            self.maintain(budget=budget)

    def logged_here(self) -> bool:
        """True when this process logged writes through this object that no checkpoint of the
        clearing kind through it has published since."""
        return self.log.logged_here()

    @staticmethod
    def log_pending_at(path: str | os.PathLike[str]) -> bool:
        """True when the repository at ``path`` names the redo log's extension in its config:
        its log may hold writes that git (and libgit2's transports) cannot see. Opens nothing
        but the config file; False when there is no readable config."""
        return Config.log_pending_at(path)

    def publish(self, lock_timeout: float, *, rest: bool = False) -> None:
        """Checkpoint (the clearing kind) so that libgit2 and git see every write, under the
        writer lock (taken here, up to ``lock_timeout`` seconds, unless this thread holds it);
        ``rest`` as for :meth:`checkpoint`. A no-op where writes are not logged."""
        if not self.mode.logged:
            return
        if getattr(self._local, "locked", False):
            self.checkpoint(clear=True, rest=rest)
            return
        with self.write_lock(lock_timeout):
            self.checkpoint(clear=True, rest=rest)

    def _recover_if_rebooted(self) -> None:
        """On first use: if the log was last started in another boot, power may have been
        lost since; recover under the writer lock (a store that cannot be locked, being
        read-only, is read as it is: its readers follow the log as ever)."""
        if not self.log.rebooted():
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
        """Under the writer lock: after a power loss, publish what the log holds; idempotent
        (see :meth:`RedoLog.recover`)."""
        self.log.recover(self)

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
            self.log.discard_written()
            try:
                self.refs.clear_stale_locks()
                self.config.no_reflogs()
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
                self.config.no_reflogs(config=False)

    def flock(self, timeout: float) -> contextlib.AbstractContextManager[None]:
        """The writer lock's ``flock`` alone, opening nothing of the repository (which
        :meth:`init` may find half made)."""
        return lock.flock(self.path, timeout)

    # -- remotes --------------------------------------------------------------------------

    def remote_names(self) -> list[tuple[str, str]]:
        """``(name, url)`` of every remote configured in this repository, sorted by name."""
        return self.remotes.remote_names()

    def remote_url(self, name: str) -> str | None:
        """The URL of remote ``name``, or None when there is no such remote."""
        return self.remotes.remote_url(name)

    def add_remote(self, name: str, url: str) -> None:
        """Configure remote ``name`` at ``url``; :class:`ConflictError` if the name is taken."""
        self.remotes.add_remote(name, url)

    def remove_remote(self, name: str) -> None:
        """Remove remote ``name``; :class:`NotFound` if there is none."""
        self.remotes.remove_remote(name)

    def list_remote(self, url: str, timeout: float = NETWORK_TIMEOUT) -> dict[str, str]:
        """The refs the remote at ``url`` advertises, ``{name: oid}``, within ``timeout``
        seconds (see :meth:`Remotes.list_remote`)."""
        return self.remotes.list_remote(url, timeout)

    def fetch(self, url: str, refs: list[str], timeout: float = NETWORK_TIMEOUT) -> dict[str, str]:
        """Fetch ``refs`` from ``url``; their objects join this repository, no ref moves here
        (see :meth:`Remotes.fetch`). Returns ``{ref: oid}`` for the refs fetched."""
        return self.remotes.fetch(url, refs, timeout)

    def fetching(
        self, url: str, refs: list[str], timeout: float = NETWORK_TIMEOUT
    ) -> contextlib.AbstractContextManager[Incoming]:
        """Fetch ``refs`` from ``url`` into a quarantine that this thread reads as part of the
        repository until the block ends; they join it only if the block calls
        :meth:`Incoming.accept` (see :meth:`Remotes.fetching`)."""
        return self.remotes.fetching(url, refs, timeout)

    def push(
        self,
        url: str,
        refspecs: list[str],
        lock_timeout: float = 30.0,
        timeout: float = NETWORK_TIMEOUT,
        *,
        lease: str | None = None,
    ) -> None:
        """Push ``refspecs`` to ``url``, after publishing the redo log (taking the writer lock
        for it, up to ``lock_timeout`` seconds, unless this thread holds it): libgit2 sends
        what the repository holds (see :meth:`Remotes.push`); a remote silent for ``timeout``
        seconds is a :class:`RemoteError`. Never forced, except with a ``lease``: the one
        forced update, of a branch an authenticated redaction rewrote (gitmem.redact), made
        only while the remote's branch is at commit ``lease`` (:meth:`Remotes.push`)."""
        self.remotes.push(url, refspecs, lock_timeout, self.publish, timeout, lease=lease)

    # -- maintenance: after the redo log is published --------------------------------------

    def reachable(self, missing: list[str] | None = None) -> set[str]:
        """The id of every object reachable from any ref (see :meth:`Maintenance.reachable`)."""
        return self.maintenance.reachable(missing)

    def foreign_ref_problems(self) -> list[str]:
        """What is missing or damaged behind refs other than gitmem's own, one sentence each
        (see :meth:`Maintenance.foreign_ref_problems`)."""
        return self.maintenance.foreign_ref_problems()

    def gc(self, grace: float, now: float | None = None) -> GcReport:
        """Pack every reachable object into one pack and prune what nothing references (see
        :meth:`Maintenance.gc`); after :meth:`prune_next_gc`, whatever ``grace`` says, every
        unreferenced object. The caller holds the writer lock."""
        # What the redo log holds goes into the repository first: gc walks and packs it.
        self._publish_or_fail(clear=True, maintain=False)
        marker = self.path / PRUNE_NOW
        pending = marker.is_file()
        report = self.maintenance.gc(0.0 if pending else grace, now)
        if pending:
            marker.unlink()
        return report

    def prune_next_gc(self) -> None:
        """Under the writer lock: make the next :meth:`gc` prune every unreferenced object,
        whatever its grace period (after a redaction, whose old versions nothing references;
        the file ``gitmem.prune-now`` says so until that gc has run)."""
        marker = self.path / PRUNE_NOW
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.close(fd)
        self.fsync_dir()

    def maintain(self, budget: int | None = None) -> MaintenanceReport:
        """Pack loose objects and merge small packs when there are enough of them (see
        :meth:`Maintenance.maintain`). The caller holds the writer lock."""
        return self.maintenance.maintain(budget)


# -- publishing when the process ends (design.md, "The redo log") ----------------------------

# How long publishing at interpreter exit waits for another writer's lock: an exit must not hang.
EXIT_LOCK_SECONDS = 2.0
_log = logging.getLogger("gitmem")


def _finish_merge(path: str) -> None:
    try:
        repo = GitRepo(path)
        with repo.write_lock(EXIT_LOCK_SECONDS):
            repo.maintain()
    except Exception:  # an exit handler must not fail the exit
        _log.warning("gitmem: a merge of the packs of %s was left undone at exit", path)


@atexit.register
def _finish_merges() -> None:
    """At interpreter exit (after publishing, which may have stepped a merge): finish each merge
    this process has under way, under the writer lock (waited for at most
    :data:`EXIT_LOCK_SECONDS`); best effort, never raises."""
    maintenance.finish_merges(_finish_merge)


def publish_logged(lock_timeout: float = EXIT_LOCK_SECONDS) -> list[tuple[str, GitMemError]]:
    """Checkpoint (the clearing kind) every repository this process logged writes to and has
    not published since, so that plain git reads each; waits up to ``lock_timeout`` seconds for
    each one's writer lock. Never raises for a repository: returns ``(path, error)`` for those
    that could not be published (their writes stay in the log, durable and readable by
    gitmem). A repository whose directory is gone is skipped."""
    failed: list[tuple[str, GitMemError]] = []
    pid = os.getpid()
    for path, owner in list(LOGGED.items()):
        if owner != pid:
            continue
        if not os.path.isdir(path):
            LOGGED.pop(path, None)
            continue
        try:
            GitRepo(path).publish(lock_timeout, rest=True)
        except GitMemError as exc:
            failed.append((path, exc))
        except OSError as exc:
            failed.append((path, StorageError(f"{exc.strerror or exc}")))
        finally:
            # Tried once: the exit handler must not try again what the CLI already reported.
            LOGGED.pop(path, None)
    return failed
