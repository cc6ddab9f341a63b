"""``MemoryStore``: the versioned, encrypted memory tree. The tool and the CLI both go through it.

Reads take no lock: they read the branch, authenticate the head commit's record (which binds
the tree id, so git's hashes authenticate everything below it) and compare it with the client's
high-water mark. Writes hold the store's OS lock, rebuild the changed trees from the head they
read, commit one encrypted record, and move the branch by compare-and-swap.
"""

from __future__ import annotations

import atexit
import contextlib
import heapq
import logging
import os
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import format as fmt
from . import keyadmin, keyslots
from ._version import __version__
from .crypto import KdfParams, StoreKeys, new_store_id
from .editor import TreeEditor
from .errors import (
    ConflictError,
    GitMemError,
    IntegrityError,
    KeyMissing,
    NoStore,
    NotAFile,
    NotFound,
    PathExists,
    RollbackDetected,
    StorageError,
    StoreReplaced,
    UsageError,
    WrongKey,
    file_system_refused,
    rollback_check_off,
    shown_repr,
)
from .format import KIND_DIR, KIND_FILE, Record, StoreMeta
from .fsutil import local_path
from .git import repo as git_repo
from .git.flush import Durability
from .git.lock import LOCK_FILE
from .git.maintenance import DEFAULT_GC_GRACE, GcReport
from .git.refs import BRANCH, META_REF
from .git.repo import GitRepo, publish_logged
from .highwater import HighWater, KnownStores, Mark, SlotHints, default_state_dir
from .idle import IdlePublisher
from .keyadmin import MetaChange
from .keyslots import Keyring, unlock
from .keysource import Credential, resolve_credential
from .limits import LimitedEditor, StoreSizer
from .operation import Operation
from .options import Settings, StoreOptions
from .paths import MEMORIES_ROOT, MemoryPath, MemoryPathLike, as_path, as_paths
from .redaction import Redaction
from .replica import FoundMeta, find_meta, meta_at, meta_in_tree
from .revisions import resolve_named, split_revision
from .secrets import Screened, SecretPolicy, screen
from .snapshot import ListEntry, Snapshot, changed_file_nodes, decode_text
from .strength import check_new_passphrase
from .syncresult import SyncResult
from .textops import Replacement, find_unique, insert_at, replace_at
from .tree import TreeCodec
from .verify import OLDER_EPOCH as _OLDER_EPOCH
from .verify import VerifyReport, verify_store

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .expiry import ExpiryResult

T = TypeVar("T")
_CAS_RETRIES = 5


@dataclass(frozen=True)
class Change(Generic[T]):
    """What a write's edit changed, to be committed as one operation.

    ``paths`` are the memory paths the commit record lists, ``result`` goes back to the caller,
    ``detail`` joins the record, ``tree`` is the new root tree when the edit built it
    itself (else the editor's tree is written), and ``merged`` the second parent of a merge.
    """

    paths: tuple[str, ...]
    result: T
    detail: Mapping[str, Any] = field(default_factory=dict)
    tree: str | None = None
    # For a merge: the head merged in, the commit's second parent.
    merged: Operation | None = None


@dataclass(frozen=True)
class NoChange(Generic[T]):
    """What a write's edit returns when there is nothing to do: no commit is made."""

    result: T


def new_session_label() -> str:
    """A unique session label: UTC date and time plus a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


# A write's edit: given the head (None: empty store) and an editor on its tree, what changed.
Edit = Callable[[Operation | None, TreeEditor], Change[T] | NoChange[T]]


# How many operations a log walks ahead of the one it shows next, at most (see MemoryStore.log).
_LOG_LOOKAHEAD = 1000


class MemoryStore:
    """An encrypted, versioned memory store in a bare git repository.

    Open one with :meth:`open` (or :meth:`init`). Every mutation is exactly one commit labelled
    with :attr:`session`; reads are of the branch head unless a revision is given.
    """

    def __init__(
        self,
        repo: GitRepo,
        keys: StoreKeys,
        options: StoreOptions | None = None,
        *,
        keyring: Keyring | None = None,
        **settings: Unpack[Settings],
    ) -> None:
        opts = StoreOptions.of(options, **settings)
        self.repo = repo
        self.keys = keys
        # The slot this store was opened with and its epoch keys; key management needs it.
        self.keyring = keyring
        self.codec = TreeCodec(repo, keys)
        self.options = opts
        self.session = opts.session if opts.session is not None else new_session_label()
        self.lock_timeout = opts.lock_timeout
        self.high_water: HighWater | None = (
            HighWater(keys.store_id.hex(), opts.state_dir, replica=repo.path)
            if opts.check_rollback
            else None
        )
        found = find_meta(repo)
        if found is not None and found.meta.store_id != keys.store_id:
            raise IntegrityError(f"the repository at {repo.path} holds another store")
        if found is not None and found.meta.format >= 2:
            self.codec.meta_blob = found.blob
        self._meta_blob = None if found is None else found.blob
        # The last metadata blob known to be of this version's format (see _upgrade_format).
        self._current_meta: str | None = None
        # The last (head commit, refs/gitmem/meta) checked by bound_meta, with its answer, and
        # the last metadata blob parsed.
        self._bound: tuple[tuple[str | None, str | None], FoundMeta] | None = None
        self._parsed_meta = None if found is None else (found.blob, found.meta)
        self._warned_rollback_off = False
        if opts.check_rollback:
            # A read-only state directory must not stop reading; it only records less, and says so.
            try:
                KnownStores(opts.state_dir).remember(repo.path, keys.store_id.hex())
            except OSError as exc:
                self._state_dir_refused(exc)
        self._head: Operation | None = None
        self._idle = (
            None
            if opts.publish_idle is None
            else IdlePublisher(opts.publish_idle, self._publish_idle, str(repo.path))
        )
        self.limits = opts.limits
        self.secrets: SecretPolicy = opts.secrets
        self.sizer = StoreSizer(self.codec)

    # -- opening --------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        key: str | bytes | None = None,
        *,
        create: bool = False,
        accept_store: bool = False,
        options: StoreOptions | None = None,
        passphrase: str | None = None,
        prompt: Callable[[], str] | None = None,
        allow_weak_passphrase: bool = False,
        **settings: Unpack[Settings],
    ) -> MemoryStore:
        """Open the store at ``path``; with ``create``, make it when nothing is there.

        The key is ``key``, else ``passphrase`` (which opens one of the store's key slots), else
        found as :func:`gitmem.keysource.resolve_credential` says; ``prompt`` asks for a
        passphrase when nothing else gave a key. A store created with a passphrase has one
        passphrase slot and no key file, and its passphrase must clear the strength bar
        (:func:`gitmem.strength.check_new_passphrase`) unless ``allow_weak_passphrase``.
        ``options`` (a :class:`~gitmem.options.StoreOptions`)
        and the keyword ``settings`` (``session``, ``lock_timeout``, ``state_dir``,
        ``check_rollback``, ``limits``, ``secrets``; each overrides ``options``) say how the
        store is used. Raises
        :class:`NoStore`, :class:`KeyMissing`, :class:`WrongKey`, :class:`WrongPassphrase`, or
        :class:`StorageError` when the file system refuses the path (one longer than it allows,
        a directory that cannot be read).
        """
        opts = StoreOptions.of(options, **settings)
        target = local_path(path, "store's path")
        try:
            return cls._open(
                target, key, create, accept_store, opts, passphrase, prompt, allow_weak_passphrase
            )
        except OSError as exc:
            raise file_system_refused(exc) from None

    @classmethod
    def _open(
        cls,
        target: Path,
        key: str | bytes | None,
        create: bool,
        accept_store: bool,
        opts: StoreOptions,
        passphrase: str | None,
        prompt: Callable[[], str] | None,
        allow_weak: bool,
    ) -> MemoryStore:
        if create and cls.vacant(target):
            cls._refuse_vanished(target, opts)
            try:
                credential = resolve_credential(key, passphrase, None)
            except KeyMissing as exc:
                # Most often a mistyped path: say first that nothing is there to open.
                raise KeyMissing(
                    f"no gitmem store at {target}, and no key to create one with: {exc}",
                    searched=exc.searched,
                    key_file=exc.key_file,
                ) from None
            return cls._create(target, credential, opts, allow_weak)
        if not GitRepo.exists(target):
            if create:
                raise NoStore(f"{target} exists and is not a gitmem store")
            if target.exists() and not target.is_dir():
                # A key file or an export given as --repo: say what is there, not just "none".
                raise NoStore(f"no gitmem store at {target}: it is a file, not a store directory")
            raise NoStore(f"no gitmem store at {target}")
        repo = GitRepo(target)
        meta = cls._read_meta(repo)
        if meta is None:
            raise NoStore(f"{target} is a git repository but not a gitmem store")
        if not accept_store:
            cls._refuse_replaced(target, meta.store_id.hex(), opts)
        credential = resolve_credential(
            key,
            passphrase,
            meta.store_id.hex(),
            prompt,
            passphrase_slots=any(slot.kind == fmt.SLOT_PASSPHRASE for slot in meta.slots),
        )
        try:
            keyring = cls._unlock(meta, credential, str(target), opts)
        except WrongKey as refused:
            # refs/gitmem/meta may have lost this holder's slot (by a hand other than gitmem's,
            # which the first read then reports): the slots the head carries are the ones that
            # count. Unauthenticated here too: the head's record is checked with what they give.
            try:
                carried = meta_at(repo, repo.ref(BRANCH), None)
            except GitMemError:
                carried = None
            if carried is None or carried.meta == meta or not meta.has_slots:
                raise refused from None
            meta = carried.meta
            keyring = cls._unlock(meta, credential, str(target), opts)
        return cls(repo, keyring.keys(meta.store_id), opts, keyring=keyring)

    @staticmethod
    def _unlock(meta: StoreMeta, credential: Credential, where: str, opts: StoreOptions) -> Keyring:
        """:func:`~gitmem.keyslots.unlock`; a passphrase tries first the slot it opened last
        (a hint kept beside the high-water marks, so not with ``check_rollback=False``)."""
        if credential.passphrase is None or not opts.check_rollback:
            return unlock(meta, credential, where)
        hints, store_id = SlotHints(opts.state_dir), meta.store_id.hex()
        hint = hints.slot_for(store_id)
        keyring = unlock(meta, credential, where, hint)
        if keyring.slot is not None and keyring.slot != hint:
            # Only an order: a state directory that cannot record it (read-only, full) is
            # reported by the high-water marks, which need it more.
            with contextlib.suppress(OSError):
                hints.remember(store_id, keyring.slot)
        return keyring

    @classmethod
    def _create(
        cls, target: Path, credential: Credential, options: StoreOptions, allow_weak: bool
    ) -> MemoryStore:
        if credential.key is not None:
            return cls.init(target, credential.key, options)
        return cls.init(
            target,
            None,
            options,
            passphrase=credential.passphrase,
            allow_weak_passphrase=allow_weak,
        )

    @staticmethod
    def vacant(path: str | os.PathLike[str]) -> bool:
        """Whether a new store may be made at ``path``, adopting what is there.

        True for nothing, an empty directory, and an empty git repository: one with no refs,
        as ``git init --bare`` leaves it, or as a gitmem init cut short between ``git init``
        and writing the metadata leaves it. ``open(create=True)`` and ``gitmem init`` both
        go by this rule; anything else (a store, a repository with history) is not vacant.
        """
        target = Path(path)
        if not target.exists():
            return True
        if not target.is_dir():
            return False
        if GitRepo.exists(target):
            try:
                return not GitRepo(target).has_refs()
            except NoStore:
                # libgit2's init makes the directories, then sets the config one key at a time
                # (each by a rename): a gitmem init killed in between leaves no config, or one
                # without `bare = true`, which libgit2 will not open (or opens as non-bare).
                # gitmem takes its lock file before `git init` and writes refs only after init
                # returns, so its lock file and no ref on disk mean an init cut short.
                return (target / LOCK_FILE).is_file() and not _refs_on_disk(target)
        # A directory holding only gitmem's lock file is an init killed before `git init`.
        return not any(target.iterdir()) or (target / LOCK_FILE).is_file()

    @classmethod
    def init(
        cls,
        path: str | os.PathLike[str],
        key: str | bytes | None,
        options: StoreOptions | None = None,
        *,
        passphrase: str | None = None,
        kdf: KdfParams | None = None,
        allow_weak_passphrase: bool = False,
        **settings: Unpack[Settings],
    ) -> MemoryStore:
        """Create a store at ``path`` (or open it if a racing process just did).

        With ``key``, a version 1 store that ``key`` opens; with ``passphrase`` instead, a store
        whose only way in is one passphrase slot (Argon2id with ``kdf``, RFC 9106's second
        recommended parameters by default), refused with :class:`WeakPassphrase` before
        anything is made unless it clears the strength bar or ``allow_weak_passphrase``.
        ``options`` and ``settings`` are as for :meth:`open`.
        """
        from .crypto import decode_key, generate_key

        opts = StoreOptions.of(options, **settings)
        path = local_path(path, "store's path")
        if opts.check_rollback and opts.state_dir is None:
            default_state_dir()  # a relative GITMEM_STATE_DIR is refused before anything is made
        raw = decode_key(generate_key() if key is None else key)
        credential = Credential("key=", key=raw)
        if key is None and passphrase is None:
            raise UsageError("a new store needs a key or a passphrase")
        if key is None and passphrase is not None:
            check_new_passphrase(passphrase, allow_weak=allow_weak_passphrase)
        made_here = False
        try:
            repo = GitRepo.init(path, opts.lock_timeout)
            with repo.write_lock(opts.lock_timeout):
                meta = cls._read_meta(repo)
                if meta is None:
                    made_here = True
                    store_id = new_store_id()
                    check = StoreKeys.derive(raw, store_id).check_value()
                    meta = StoreMeta(fmt.FORMAT_VERSION, store_id, check)
                    if key is None:
                        meta = keyslots.with_passphrase(meta, raw, passphrase or "", kdf)
                    repo.create_ref(META_REF, repo.write_blob(meta.to_bytes()))
        except OSError as exc:
            # A full disk or a read-only parent: what was made has no ref yet, so the same
            # command adopts it once the cause is gone (see vacant).
            raise StorageError(
                f"cannot create the store at {path}: {exc.strerror or exc}; nothing usable was "
                "written, and the same command can be run again once that is fixed"
            ) from None
        if key is None and passphrase is not None:
            credential = Credential("passphrase=", passphrase=passphrase)
        try:
            keyring = cls._unlock(meta, credential, str(path), opts)
        except WrongKey:
            if made_here:
                raise
            # Another creator won the race (two `gitmem init` at once): "the key does not
            # open the store" would be true, but not what happened.
            raise UsageError(
                f"{path} already holds a gitmem store, which this key does not open (another "
                "process may have just created it); nothing was written"
            ) from None
        return cls(repo, keyring.keys(meta.store_id), opts, keyring=keyring)

    @classmethod
    def _refuse_vanished(cls, target: Path, options: StoreOptions) -> None:
        """Refuse to create a store where this client has seen one: it was deleted or reset."""
        if not options.check_rollback:
            return
        known = KnownStores(options.state_dir).store_at(target)
        if known is not None:
            # Another creator of this client may have made (and remembered) the store since the
            # caller looked: that is the store we know, not a reset one.
            try:
                made = GitRepo.exists(target) and cls._read_meta(GitRepo(target))
            except GitMemError:
                made = None
            if made and made.store_id.hex() == known:
                return
            # `gitmem init` makes a store only where `vacant` allows: the advice must work.
            then = "run" if cls.vacant(target) else f"move {target} out of the way, then run"
            raise RollbackDetected(
                f"the gitmem store {known} that this client used at {target} is gone or was "
                f"reset; refusing to start an empty store in its place. If it was removed on "
                f"purpose, {then} `gitmem init {target}` to make a new store there"
            )

    @classmethod
    def _refuse_replaced(cls, target: Path, store_id: str, options: StoreOptions) -> None:
        """Refuse a store other than the one this client last used at ``target``.

        The store id comes from metadata anyone who can write the repository can replace, and
        the key is looked up by it: without this check, another store's refs copied into the
        repository would be read and written with that store's key, unnoticed. The record is
        per path, so replicas of one store at several paths each pass.
        """
        if not options.check_rollback:
            return
        known = KnownStores(options.state_dir).store_at(target)
        if known is not None and known != store_id:
            raise StoreReplaced(
                f"the repository at {target} now holds the gitmem store {store_id}, not the "
                f"store {known} this client used there: its refs were replaced, by someone "
                "who can write it or on purpose. Nothing was read or written. If you replaced "
                f"it on purpose, run `gitmem --repo {target} accept-store` (in Python: "
                "MemoryStore.open(path, accept_store=True))"
            )

    @staticmethod
    def _read_meta(repo: GitRepo) -> StoreMeta | None:
        found = find_meta(repo)
        return None if found is None else found.meta

    @property
    def path(self) -> Path:
        """The repository's directory."""
        return self.repo.path

    @property
    def store_id(self) -> str:
        """The store's random id (hex); it names the key file and the high-water mark."""
        return self.keys.store_id.hex()

    # -- the head -------------------------------------------------------------------------

    def read_operation(self, oid: str) -> Operation:
        """The authenticated operation of commit ``oid`` (a full id, not a revision).

        For ids found in the store's own history (a walk's parents); it says nothing about
        whether ``oid`` is in the branch's history. :class:`IntegrityError` if it fails
        authentication.
        """
        info = self.repo.read_commit(oid)
        for attempt in range(2):
            try:
                ad = fmt.record_ad(self.keys.store_id, info.tree, info.parents)
                sealed = fmt.decode_message(info.message)
                plain, epoch = self.keys.open_record_epoch(sealed, ad)
                return Operation(oid, info.parents, info.tree, fmt.open_plaintext(plain), epoch)
            except IntegrityError:
                # A commit of a key epoch newer than this store knows: another process rotated
                # the keys since it opened. Its slot opens the new epoch without a passphrase.
                if attempt or not self._refresh_keys():
                    raise IntegrityError(
                        f"commit {oid} failed authentication (forged, altered or spliced)"
                    ) from None
        raise AssertionError("unreachable")

    def head_operation(self) -> Operation | None:
        """The authenticated head of the branch, or None for an empty store.

        Raises :class:`IntegrityError` if it fails authentication and
        :class:`RollbackDetected` if it is behind what this client saw before.
        """
        # While the branch names the head this store last authenticated and checked against
        # the mark, that result stands: the same commit id is the same commit.
        cached = self._head
        if cached is not None and cached.commit == self.repo.ref(BRANCH):
            return cached
        # Otherwise the mark is read before the branch: writers move the branch first and the
        # mark after, so a mark read first is never ahead of an honest branch read after it,
        # even while other threads or processes write.
        mark = None if self.high_water is None else self.high_water.read()
        oid = self.repo.ref(BRANCH)
        if cached is not None and cached.commit == oid:
            return cached
        if oid is None:
            self._check_rollback(None, mark)
            return None
        op = self.read_operation(oid)
        self.check_epoch(op)
        self._check_rollback(op, mark)
        self.bound_meta(op)
        self._head = op
        return op

    def check_epoch(self, op: Operation) -> None:
        """Refuse a head sealed in an older key epoch than a parent (:class:`IntegrityError`):
        only a holder of a revoked key would write that, since every writer seals with the
        newest epoch it knows."""
        if op.epoch >= self.keys.epoch:
            return
        for parent in op.parents:
            if self.read_operation(parent).epoch > op.epoch:
                raise IntegrityError(f"commit {op.commit}: {_OLDER_EPOCH}")

    def head(self) -> str | None:
        """The id of the authenticated head commit, or None for an empty store."""
        op = self.head_operation()
        return None if op is None else op.commit

    def _check_rollback(self, op: Operation | None, mark: Mark | None) -> None:
        if self.high_water is None:
            return
        if mark is None:
            if op is not None:
                self._advance(Mark(op.commit, op.seq))
            return
        if op is None:
            raise RollbackDetected(
                f"the store's branch is gone, but this client has seen operation #{mark.seq} "
                f"({mark.commit[:12]}); if that is intended, run `gitmem accept-head`"
            )
        if op.commit == mark.commit:
            return
        behind = op.seq <= mark.seq
        if not behind:
            behind = not self._descends_from(op, mark)
        if behind:
            raise RollbackDetected(
                f"the store's branch is at operation #{op.seq} ({op.commit[:12]}), which does "
                f"not follow operation #{mark.seq} ({mark.commit[:12]}) that this client has "
                "already seen: the repository was rolled back or replaced; if that is "
                "intended, run `gitmem accept-head`"
            )
        self._advance(Mark(op.commit, op.seq))

    def _advance(self, mark: Mark) -> None:
        """Move the high-water mark up to ``mark``, if the state directory can be written.

        A read-only (or full) state directory must not stop reading: the head was checked
        against the mark already there, and the next read that can record it will.
        """
        assert self.high_water is not None
        try:
            self.high_water.advance(mark)
        except OSError as exc:
            self._state_dir_refused(exc)

    def _state_dir_refused(self, exc: OSError) -> None:
        """Warn (:class:`RollbackCheckOff`, once per store) that the state directory cannot
        record marks: a safeguard that lapses must say so, not stop the reads it protects."""
        if self._warned_rollback_off or self.high_water is None:
            return
        self._warned_rollback_off = True
        warnings.warn(rollback_check_off(self.high_water.dir, exc), stacklevel=2)

    def contains(self, head: Operation | None, commit: str, seq: int) -> bool:
        """True when ``commit`` (of sequence number ``seq``) is ``head`` or one of its ancestors.

        Every commit on the way is authenticated (see :meth:`_descends_from`).
        """
        if head is None:
            return False
        return head.commit == commit or (
            head.seq > seq and self._descends_from(head, Mark(commit, seq))
        )

    def _descends_from(self, op: Operation, mark: Mark) -> bool:
        """True when ``mark``'s commit is an ancestor of ``op``.

        The search reads only commits whose sequence number is above the mark's (a commit's
        number exceeds all its ancestors'), each through :meth:`read_operation`: every commit on
        the way is authenticated, and a damaged one is an IntegrityError, never a hang inside
        libgit2's own graph walk.
        """
        stack, seen = [op], set()
        while stack:
            current = stack.pop()
            if current.commit == mark.commit:
                return True
            if current.seq <= mark.seq or current.commit in seen:
                continue
            seen.add(current.commit)
            stack.extend(self.read_operation(parent) for parent in current.parents)
        return False

    def accept_head(self) -> Operation | None:
        """Trust the branch as it is now (after a deliberate rollback); returns the head.

        ``refs/gitmem/meta`` is pointed back at the metadata the head carries, if it names
        other metadata.
        """
        oid = self.repo.ref(BRANCH)
        op = None if oid is None else self.read_operation(oid)
        carried = None if op is None else meta_in_tree(self.repo, op.tree)
        if carried is not None:
            with self.repo.write_lock(self.lock_timeout):
                old = self.repo.ref(META_REF)
                if old != carried:
                    self.codec.meta_blob = carried
                    self.publish_meta(old)
        if self.high_water is not None:
            self.high_water.reset(None if op is None else Mark(op.commit, op.seq))
        self._head = op
        return op

    # -- reading --------------------------------------------------------------------------

    def snapshot(self, rev: str | None = None) -> Snapshot:
        """A read-only view of the memory at ``rev`` (default: the head)."""
        if rev is None:
            op = self.head_operation()
            return Snapshot(self.codec, None if op is None else op.tree)
        return Snapshot(self.codec, self.read_operation(self.resolve(rev)).tree)

    def kind(self, path: MemoryPathLike, rev: str | None = None) -> str | None:
        """``"f"``, ``"d"`` or None for what is at ``path``."""
        node = self.snapshot(rev).lookup(as_path(path))
        return None if node is None else node.kind

    def read_text(self, path: MemoryPathLike, rev: str | None = None) -> str:
        """The text of file ``path``; :class:`NotFound` or :class:`NotAFile` otherwise."""
        return self.snapshot(rev).read_text(as_path(path))

    def listing(
        self, path: MemoryPathLike, rev: str | None = None, depth: int = 2
    ) -> list[ListEntry]:
        """The rows Claude's ``view`` shows for directory ``path``."""
        return self.snapshot(rev).listing(as_path(path), depth)

    def files(self, rev: str | None = None) -> dict[str, str]:
        """Every file's text, by path (for export, tests and comparisons)."""
        snap = self.snapshot(rev)
        return {
            str(p): decode_text(self.codec.read_file(n.oid), p) for p, n in snap.files().items()
        }

    def directories(self, rev: str | None = None) -> list[str]:
        """Every directory's path (the root excluded)."""
        return [str(p) for p, n in self.snapshot(rev).walk() if n.kind == KIND_DIR]

    def store_bytes(self, rev: str | None = None) -> int:
        """The plaintext size of every file at ``rev`` (default: the head), from file headers."""
        return self.sizer.tree_bytes(self.snapshot(rev).root)

    # -- revisions and history ------------------------------------------------------------

    def resolve(self, rev: str) -> str:
        """The commit id ``rev`` names: ``HEAD``, a (prefix of a) commit id, ``session:NAME``
        (that session's newest operation) or ``@{TIME}`` (the newest at or before TIME), each
        optionally followed by ``~N`` / ``^`` (see :mod:`gitmem.revisions`).

        Only commits in the branch's history count. Raises :class:`UsageError` when ``rev``
        names nothing or more than one commit.
        """
        if rev == "":  # ("$REV" unset) never HEAD, which a restore would record as a no-op
            raise UsageError(
                "the revision is empty: give HEAD, HEAD~N, a commit id, session:NAME or @{TIME}"
            )
        head = self.head()
        if head is None:
            raise UsageError(f"unknown revision {shown_repr(rev)}: the store has no history yet")
        base, steps = split_revision(rev)
        commit = resolve_named(self, base, rev) or (
            head if base in ("HEAD", "@", "") else self._resolve_id(base, rev, head)
        )
        for _ in range(steps):
            parents = self.repo.read_commit(commit).parents
            if not parents:
                raise UsageError(f"unknown revision {rev!r}: history is not that long")
            commit = parents[0]
        return commit

    def _resolve_id(self, prefix: str, rev: str, head: str) -> str:
        """The commit of the branch's authenticated history whose id starts with ``prefix``.

        Refs are never consulted (a planted ``refs/tags/<prefix>`` must not redirect it): the
        object database names the candidate, which must then be an authentic commit that the
        head descends from. When the prefix is ambiguous in the object database (objects
        anyone can plant), the history itself is searched.
        """
        prefix = prefix.lower()
        if not (4 <= len(prefix) <= 40) or any(c not in "0123456789abcdef" for c in prefix):
            raise UsageError(f"unknown revision {rev!r}")
        try:
            commit = self.repo.resolve_prefix(prefix)
        except KeyError:
            raise UsageError(f"unknown revision {rev!r}") from None
        except ValueError:
            matches = [op.commit for op in self.log() if op.commit.startswith(prefix)][:2]
            if not matches:
                raise UsageError(f"unknown revision {rev!r}") from None
            if len(matches) > 1:
                raise UsageError(f"ambiguous revision {rev!r}: give more digits") from None
            return matches[0]
        if commit != head:
            try:
                target = self.read_operation(commit)
            except IntegrityError:
                # Not an authentic commit of this store (a tree, a blob, garbage): not history.
                raise UsageError(f"unknown revision {rev!r}: not in the memory's history") from None
            head_op = self.head_operation()
            if head_op is None or not (
                target.seq < head_op.seq
                and self._descends_from(head_op, Mark(target.commit, target.seq))
            ):
                raise UsageError(f"unknown revision {rev!r}: not in the memory's history")
        return commit

    def log(self, rev: str | None = None, *, first_parent: bool = False) -> Iterator[Operation]:
        """Every operation reachable from ``rev`` (default: the head), newest first.

        No operation comes before one that descends from it; otherwise the newest recorded time
        comes first, so that two replicas' merged work reads as it happened, not interleaved
        by sequence number. ``first_parent`` follows only each merge's first parent: the line
        of the replica that merged. Streams: the first operation comes as fast in a store of
        100,000 as in one of ten.
        """
        start = self.head() if rev is None else self.resolve(rev)
        if start is None:
            return
        # A record's sequence number is one more than its parents' highest, so when the
        # highest pending one is taken from `found`, every child it has in the walk has been
        # taken already: its count of children not yet shown is final. It is shown (from
        # `ready`, newest time first) once that count is zero and no line still being walked
        # is newer; an older line waits for the newer one to catch up.
        first = self.read_operation(start)
        found: list[tuple[int, str, Operation]] = [(-first.seq, start, first)]
        queued = {start}
        unshown: dict[str, int] = {}  # children taken from `found` and not yet shown
        held: dict[str, Operation] = {}  # taken from `found`, waiting for a child to be shown
        ready: list[tuple[float, int, str, Operation]] = []

        def parents(op: Operation) -> tuple[str, ...]:
            return op.parents[:1] if first_parent else op.parents

        def make_ready(oid: str, op: Operation) -> None:
            heapq.heappush(ready, (-op.record.time.timestamp(), -op.seq, oid, op))

        def queue(parent: str) -> None:
            if parent not in queued:
                queued.add(parent)
                parent_op = self.read_operation(parent)
                heapq.heappush(found, (-parent_op.seq, parent, parent_op))

        while found or ready:
            if found:
                _, oid, op = heapq.heappop(found)
                # Every child it has in the walk was taken before it: none can be queued again.
                queued.discard(oid)
                if not found and not ready and not held and len(parents(op)) <= 1:
                    # One line and nothing held: nothing to order it against, and its parent
                    # is read only when the caller wants the next operation.
                    unshown.pop(oid, None)
                    yield op
                    for parent in parents(op):
                        queue(parent)
                    continue
                for parent in parents(op):
                    unshown[parent] = unshown.get(parent, 0) + 1
                    queue(parent)
                if unshown.get(oid, 0) == 0:
                    unshown.pop(oid, None)
                    make_ready(oid, op)
                else:
                    held[oid] = op
            # As a key of `ready`: the newest time among the lines still being walked. A clock
            # set back could hold everything back for it: past _LOG_LOOKAHEAD operations taken
            # and not shown, the newest one that may be shown is.
            newest = min((-op.record.time.timestamp() for _, _, op in found), default=None)
            if ready and newest is not None and len(ready) + len(held) > _LOG_LOOKAHEAD:
                newest = max(newest, ready[0][0])
            while ready and (newest is None or ready[0][0] <= newest):
                _, _, oid, op = heapq.heappop(ready)
                yield op
                for parent in parents(op):
                    unshown[parent] -= 1
                    if unshown[parent] == 0 and parent in held:
                        del unshown[parent]
                        make_ready(parent, held.pop(parent))

    def operation(self, rev: str) -> Operation:
        """The authenticated operation ``rev`` names."""
        return self.read_operation(self.resolve(rev))

    # -- writing --------------------------------------------------------------------------

    def write(
        self, command: str, edit: Edit[T], *, detached: bool = False
    ) -> tuple[Operation | None, T]:
        """The one way the memory changes: run ``edit`` and commit what it changed as one op.

        Under the writer lock, ``edit`` gets the authenticated head (None for an empty store)
        and a :class:`~gitmem.limits.LimitedEditor` on its tree, and returns a :class:`Change`
        (committed as one operation named ``command``) or a :class:`NoChange` (nothing is
        written). If the branch moved under the write (only a non-gitmem process can move it
        while the lock is held), ``edit`` runs again on the new head, so it must not keep
        state between runs. Returns the new operation (None for no change) and the result.

        With ``detached``, the commit is written but the branch stays where it is (sync sends
        a merge to the remote before this replica takes it, see :func:`gitmem.sync.sync`).
        """
        with self.repo.writer(), self.repo.write_lock(self.lock_timeout):
            for _ in range(_CAS_RETRIES):
                meta_ref = self.repo.ref(META_REF)
                head = self.head_operation()
                # Seal with the newest key epoch and stamp the metadata the head carries (never
                # an unauthenticated ref): another process may have rotated since.
                self._use_meta(self.bound_meta(head))
                if head is not None and head.record.store_bytes is not None:
                    # The head's record says how big its tree is: the size check of the first
                    # write of a process then reads no header (design.md, "Records").
                    self.sizer.remember_tree_bytes(head.tree, head.record.store_bytes)
                editor = LimitedEditor(
                    self.codec, None if head is None else head.tree, self.limits, self.sizer
                )
                outcome = edit(head, editor)
                if isinstance(outcome, NoChange):
                    return None, outcome.result
                tree = editor.write() if outcome.tree is None else outcome.tree
                try:
                    self._upgrade_format()
                    op, durable = self._commit(
                        tree,
                        head,
                        command,
                        outcome.paths,
                        outcome.detail,
                        outcome.merged,
                        self.sizer.known_tree_bytes(tree),
                        detached=detached,
                    )
                except ConflictError:
                    # Redo the edit on whatever the other process left, which is checked like
                    # any other head.
                    continue
                if not detached:
                    # A detached commit is not the head: the ref follows it when the branch does.
                    self._bind(op, self.publish_meta(meta_ref))
                break
            else:
                raise ConflictError("the branch kept moving during the write; nothing was written")
        # The last flush outside the lock: writers that queued behind this one share it (group
        # commit). The write is reported only once it is durable, and the mark only follows
        # what is durable (design.md, "Writing", steps 7-8).
        self.repo.wait_durable(durable)
        if self.high_water is not None and not detached:
            # The commit is already durable: failing now (a full disk under the state directory)
            # would make the caller redo a write that happened. The next head read catches up.
            self._advance(Mark(op.commit, op.seq))
        if self._idle is not None and self.repo.logged_here():
            self._idle.touch()
        return op, outcome.result

    def _commit(
        self,
        tree: str,
        head: Operation | None,
        command: str,
        paths: Sequence[str],
        detail: Mapping[str, Any],
        merged: Operation | None = None,
        store_bytes: int | None = None,
        *,
        detached: bool = False,
    ) -> tuple[Operation, Durability]:
        """Write the commit and move the branch to it (unless ``detached``); durable once the
        ticket is waited for.

        For a merge, ``merged`` is the second parent; ``store_bytes`` is the tree's size when
        known, recorded for the next writer. The caller has made the store format 2
        (:meth:`_upgrade_format`) under the same lock.
        """
        parents: tuple[str, ...] = () if head is None else (head.commit,)
        seq = 1 if head is None else head.seq + 1
        if merged is not None:
            parents += (merged.commit,)
            seq = max(seq, merged.seq + 1)
        record = Record(
            seq=seq,
            time_ns=time.time_ns(),
            session=self.session,
            command=command,
            paths=tuple(paths),
            version=__version__,
            detail=dict(detail),
            store_bytes=store_bytes,
        )
        tree = self.codec.stamp_root(tree)
        ad = fmt.record_ad(self.keys.store_id, tree, parents)
        message = fmt.encode_message(self.keys.seal_record(fmt.seal_plaintext(record), ad))
        commit = self.repo.write_commit(tree, list(parents), message, time=seq)
        op = Operation(commit, parents, tree, record, self.keys.epoch)
        if detached:
            # With the redo log, objects no record names are dropped when the lock is let go:
            # published now, for libgit2 to send before any ref names the commit.
            self.repo.checkpoint()
            return op, None
        expected = None if head is None else head.commit
        durable = self.repo.update_ref(BRANCH, commit, expected, wait=False)
        self._head = op
        return op, durable

    def _upgrade_format(self) -> None:
        """Under the writer lock: make the store this version's format (6) with the commit
        being written (design.md, "Changes"): its record is compressed.

        The commit's root tree carries the metadata blob (a format 1 store gets one, with the
        same store id and key check; an older format keeps everything else, its key slots
        included), and every root tree from then on, so that copies of the branch made by
        plain git are complete stores and gitmem that reads only older formats refuses the
        store instead of misreading it; :meth:`publish_meta` then points the ref at it.
        """
        old = self.codec.meta_blob
        if old is None:
            meta = StoreMeta(fmt.FORMAT_VERSION, self.keys.store_id, self.keys.check_value())
            self.codec.meta_blob = self._current_meta = self.repo.write_blob(meta.to_bytes())
            return
        if old == self._current_meta:
            return  # known to be this format already: every write asks
        meta = self._parse_meta(old)
        if meta.format < fmt.FORMAT_VERSION:
            old = self.repo.write_blob(replace(meta, format=fmt.FORMAT_VERSION).to_bytes())
            self.codec.meta_blob = self._meta_blob = old
        self._current_meta = old

    def publish_meta(self, old: str | None) -> str | None:
        """Under the writer lock, after the branch moved: point ``refs/gitmem/meta`` (found at
        ``old``) at the metadata the new head carries; returns where it points.

        The branch moves first, so the ref never names metadata that no commit carries; a
        crash in between leaves it at an older head's, which :meth:`bound_meta` accepts.
        """
        blob = self.codec.meta_blob
        if blob is None or blob == old:
            return old
        try:
            if old is None:
                self.repo.create_ref(META_REF, blob)
            else:
                self.repo.update_ref(META_REF, blob, old)
        except ConflictError:
            return old  # moved by something other than gitmem: the next read checks it
        return blob

    def _bind(self, op: Operation, ref: str | None) -> None:
        """Remember that ``op``, just committed with the metadata blob it was stamped with, is
        bound to ``ref``: the next write reads neither its root tree nor that blob again."""
        blob = self.codec.meta_blob
        if blob is not None and ref == blob:
            self._bound = ((op.commit, ref), FoundMeta(self._parse_meta(blob), blob, True))

    def screen(self, before: str, after: str) -> Screened:
        """Apply the store's secrets policy to a write turning file text ``before`` into ``after``.

        Raises :class:`~gitmem.secrets.SecretRefused` under ``reject``; under ``redact`` the
        result's text has the findings replaced, and :meth:`Screened.record` says what for the
        commit record's ``detail["redacted"]``.
        """
        return screen(before, after, self.secrets)

    def _put_text(self, tree: TreeEditor, path: MemoryPath, before: str, after: str) -> Change[str]:
        """Screen and write ``after`` at ``path``: the change, whose result is the text stored."""
        screened = self.screen(before, after)
        tree.put_file(path, screened.text.encode("utf-8"))
        detail = {"redacted": screened.record()} if screened.redacted else {}
        return Change((str(path),), screened.text, detail)

    def create(self, path: MemoryPathLike, text: str, *, overwrite: bool = False) -> Operation:
        """Write a new file (parents made as needed); :class:`PathExists` if something is there."""
        target = as_path(path)

        def edit(_: Operation | None, tree: TreeEditor) -> Change[str]:
            existing = tree.kind(target)
            if existing == KIND_DIR or (existing == KIND_FILE and not overwrite):
                raise PathExists(str(target))
            tree.check_new_names(target)
            return self._put_text(tree, target, "", text)

        return self._write_one("create", edit)

    def str_replace(
        self, path: MemoryPathLike, old: str, new: str
    ) -> tuple[Operation, Replacement]:
        """Replace the one occurrence of ``old`` in file ``path`` by ``new``."""
        target = as_path(path)

        def search(snapshot: Snapshot) -> tuple[str, str, int]:
            node = snapshot.lookup(target)
            if node is None:
                raise NotFound(str(target))
            if node.kind != KIND_FILE:
                raise NotAFile(str(target))
            text = decode_text(self.codec.read_file(node.oid), target)
            return node.oid, text, find_unique(text, old)

        # The search runs before the writer lock: a refusal (not found, several matches) writes
        # nothing, so it needs no lock at all, and a large file never holds other writers up
        # while it is searched. Under the lock the match is reused if the file is still the same
        # file tree (trees are content-addressed), else redone. So the search starts from the
        # head this store last authenticated, without reading the branch (a ref read is a
        # system call or more, a real share of a small str_replace); a refusal is given only
        # once the branch is read and still names that head, else the search is redone on the
        # head as it is now.
        known = self._head
        try:
            searched, found, position = search(
                Snapshot(self.codec, None if known is None else known.tree)
            )
        except GitMemError:
            current = self.head_operation()
            if current is known:
                raise
            searched, found, position = search(
                Snapshot(self.codec, None if current is None else current.tree)
            )

        def edit(_: Operation | None, tree: TreeEditor) -> Change[Replacement]:
            if tree.file_oid(target) == searched:
                content, at = found, position
            else:
                content = decode_text(tree.read_bytes(target), target)
                at = find_unique(content, old)
            result = replace_at(content, at, old, new)
            change = self._put_text(tree, target, content, result.text)
            stored = Replacement(change.result, result.changed_line)
            return Change(change.paths, stored, change.detail)

        op, result = self.write("str_replace", edit)
        assert op is not None  # the edit always changes something or raises
        return op, result

    def insert(self, path: MemoryPathLike, line: int, text: str) -> Operation:
        """Insert ``text`` after line ``line`` of file ``path`` (0 = at the top)."""
        target = as_path(path)

        def edit(_: Operation | None, tree: TreeEditor) -> Change[str]:
            content = decode_text(tree.read_bytes(target), target)
            return self._put_text(tree, target, content, insert_at(content, line, text))

        return self._write_one("insert", edit)

    def delete(self, path: MemoryPathLike) -> Operation:
        """Delete file or directory ``path`` (recursively); the root cannot be deleted."""
        target = as_path(path)
        if target.is_root:
            raise UsageError("Cannot delete the /memories directory itself")

        def edit(_: Operation | None, tree: TreeEditor) -> Change[None]:
            tree.remove(target)
            return Change((str(target),), None)

        return self._write_one("delete", edit)

    def rename(self, old: MemoryPathLike, new: MemoryPathLike) -> Operation:
        """Move ``old`` to ``new`` (parents made as needed); never overwrites."""
        source, dest = as_path(old), as_path(new)
        if source.is_root:
            raise UsageError("Cannot rename the /memories directory itself")

        def edit(_: Operation | None, tree: TreeEditor) -> Change[None]:
            if tree.kind(dest) is not None:
                raise PathExists(str(dest))
            if tree.kind(source) is None:
                raise NotFound(str(source))
            if dest.is_within(source):
                raise UsageError(f"Cannot move {source} into itself")
            tree.check_new_names(dest, moving=source)
            tree.move(source, dest)
            return Change((str(source), str(dest)), None)

        return self._write_one("rename", edit)

    def _write_one(self, command: str, edit: Edit[Any]) -> Operation:
        """:meth:`write` for an edit that always changes something (or raises)."""
        op, _ = self.write(command, edit)
        assert op is not None
        return op

    def restore(self, rev: str, paths: Iterable[MemoryPathLike] | None = None) -> Operation | None:
        """Make the memory equal to its state at ``rev``, as one new commit (``restore``).

        With ``paths``, only those files and directories are put back as they were at ``rev``
        (removed if they did not exist then); the rest of the memory stays as it is. Returns the
        new operation, or None when the memory (those paths) already matches ``rev``: then no
        commit is made.
        """
        wanted = None if paths is None else sorted(set(as_paths(paths)))
        if wanted is not None and not wanted:
            raise UsageError("give at least one path to restore")
        target = self.operation(rev)
        detail: dict[str, Any] = {"from": target.commit, "from_seq": target.seq}
        whole = wanted is None or any(p.is_root for p in wanted)
        if not whole:
            detail["paths"] = [str(p) for p in wanted or ()]
        source = Snapshot(self.codec, target.tree)

        def edit(head: Operation | None, tree: TreeEditor) -> Change[None] | NoChange[None]:
            before = Snapshot(self.codec, None if head is None else head.tree)
            if whole:
                if same_memory(before, source):
                    return NoChange(None)
                return Change(tuple(changed_files(before, source)), None, detail, target.tree)
            for path in wanted or ():
                node = source.lookup(path)
                if tree.kind(path) is not None:
                    tree.remove(path)
                elif node is None:
                    raise NotFound(f"{path} exists neither at {target.commit[:10]} nor now")
                if node is not None:
                    try:
                        tree.graft(path, node)
                    except NotAFile as exc:
                        raise UsageError(
                            f"cannot restore {path}: {exc.path} is a file now; restore or "
                            "delete it too"
                        ) from None
            after = tree.write()
            restored = Snapshot(self.codec, after)
            if same_memory(before, restored):
                return NoChange(None)
            return Change(tuple(changed_files(before, restored)), None, detail, after)

        op, _ = self.write("restore", edit)
        return op

    def expire(
        self, older_than: timedelta, *, dry_run: bool = False, now: datetime | None = None
    ) -> ExpiryResult:
        """Remove every file untouched for longer than ``older_than`` as one ``expire`` commit.

        A file's last touch is the time of the newest commit that wrote it (see
        :mod:`gitmem.expiry`); reads never count. With ``dry_run`` nothing is written. When
        nothing is old enough no commit is made. The result's ``operation`` is the commit.
        """
        from .expiry import plan_expiry

        moment = datetime.now(timezone.utc) if now is None else now
        if dry_run:
            return plan_expiry(self, self.head_operation(), older_than, moment)

        def edit(
            head: Operation | None, tree: TreeEditor
        ) -> Change[ExpiryResult] | NoChange[ExpiryResult]:
            # Planned under the writer lock, so no write can touch a file between the decision
            # and the commit.
            plan = replace(plan_expiry(self, head, older_than, moment), dry_run=False)
            if not plan.expired:
                return NoChange(plan)
            for item in plan.expired:
                tree.remove(item.path)
            detail = {
                "older_than_seconds": older_than.total_seconds(),
                "cutoff": plan.cutoff.isoformat().replace("+00:00", "Z"),
            }
            return Change(tuple(str(f.path) for f in plan.expired), plan, detail)

        op, plan = self.write("expire", edit)
        return plan if op is None else replace(plan, operation=op)

    # -- verification ---------------------------------------------------------------------

    def verify(self, progress: Callable[[int], None] | None = None) -> VerifyReport:
        """Authenticate every commit and decrypt every object reachable from any of them, in
        bounded memory (see :func:`gitmem.verify.verify_store`).

        Refs other than gitmem's own are checked too, for what :meth:`gc` would trip on: an
        object behind one that is missing or damaged is a problem.
        """
        return verify_store(self, progress)

    # -- replicas (gitmem.sync) -----------------------------------------------------------
    # Replication sits a layer above the store (it writes its merges through write), so these
    # methods import gitmem.sync when they are called, never when this module is loaded: the
    # one import of the package that goes up a layer (tests/test_layers.py, UPWARD_CALLS).

    @classmethod
    def clone(
        cls,
        url: str,
        path: str | os.PathLike[str],
        key: str | bytes | None = None,
        *,
        options: StoreOptions | None = None,
        timeout: float | None = None,
        **settings: Unpack[Settings],
    ) -> MemoryStore:
        """A new replica at ``path`` of the store at ``url`` (its remote ``origin``), opened.

        ``options`` and ``settings`` are as for :meth:`open`; ``timeout`` as for :meth:`pull`.
        Raises :class:`RemoteError`, :class:`NotAStoreRemote`, :class:`WrongKey` or
        :class:`UsageError`; a failed clone leaves nothing at ``path``.
        """
        from . import sync as replication

        return replication.clone(url, path, key, StoreOptions.of(options, **settings), timeout)

    def pull(self, remote: str = "origin", *, timeout: float | None = None) -> SyncResult:
        """Fetch ``remote`` (a remote name or URL) and fast-forward or merge it in.

        ``timeout``: the seconds the remote has to let gitmem connect and to answer each read
        or write (default: ``options.network_timeout``, else ``GITMEM_NETWORK_TIMEOUT``, else
        30); a remote that stays silent longer is a :class:`RemoteError`.
        """
        from . import sync as replication

        return replication.pull(self, remote, timeout)

    def push(self, remote: str = "origin", *, timeout: float | None = None) -> SyncResult:
        """Send the branch to ``remote``; never forced (:class:`PushRejected` if it is ahead).
        ``timeout`` as for :meth:`pull`."""
        from . import sync as replication

        return replication.push(self, remote, timeout)

    def sync(self, remote: str = "origin", *, timeout: float | None = None) -> SyncResult:
        """Pull (merging divergent work), then push: afterwards both hold the same head.
        ``timeout`` as for :meth:`pull`."""
        from . import sync as replication

        return replication.sync(self, remote, timeout)

    def add_remote(self, name: str, url: str) -> None:
        """Configure remote ``name`` at ``url`` (kept in this replica's git config only)."""
        from . import sync as replication

        replication.add_remote(self, name, url)

    def remove_remote(self, name: str) -> None:
        """Remove remote ``name`` and this client's high-water mark of it."""
        from . import sync as replication

        replication.remove_remote(self, name)

    def remotes(self) -> list[tuple[str, str]]:
        """``(name, url)`` of every configured remote, sorted by name."""
        return self.repo.remote_names()

    # -- key slots (gitmem.keyadmin) ----------------------------------------------------

    def key_slots(self) -> list[dict[str, Any]]:
        """One JSON object per key slot (:func:`gitmem.keyadmin.key_slots`)."""
        return keyadmin.key_slots(self)

    def add_key(
        self,
        *,
        passphrase: str | None = None,
        key: str | bytes | None = None,
        label: str = "",
        kdf: KdfParams | None = None,
        allow_weak_passphrase: bool = False,
    ) -> str:
        """Add a key slot; returns its id (:func:`gitmem.keyadmin.add_key`)."""
        return keyadmin.add_key(
            self,
            passphrase=passphrase,
            key=key,
            label=label,
            kdf=kdf,
            allow_weak_passphrase=allow_weak_passphrase,
        )

    def remove_key(self, slot: str) -> int:
        """Remove a key slot and rotate; returns the new epoch
        (:func:`gitmem.keyadmin.remove_key`)."""
        return keyadmin.remove_key(self, slot)

    def rotate_keys(self) -> int:
        """Start a new key epoch; returns its number (:func:`gitmem.keyadmin.rotate_keys`)."""
        return keyadmin.rotate_keys(self)

    def check_passphrase_slot(self, slot: str) -> None:
        """Raise :class:`UsageError` unless ``slot`` is a passphrase slot of this store
        (:func:`gitmem.keyadmin.check_passphrase_slot`)."""
        keyadmin.check_passphrase_slot(self, slot)

    def change_passphrase(
        self,
        slot: str,
        passphrase: str,
        *,
        kdf: KdfParams | None = None,
        allow_weak_passphrase: bool = False,
    ) -> int:
        """Give a passphrase slot a new passphrase and rotate; returns the new epoch
        (:func:`gitmem.keyadmin.change_passphrase`)."""
        return keyadmin.change_passphrase(
            self, slot, passphrase, kdf=kdf, allow_weak_passphrase=allow_weak_passphrase
        )

    def keyring_slot(self) -> str | None:
        """The id of the key slot that opened this store (None: a version 1 store's key)."""
        return None if self.keyring is None else self.keyring.slot

    def bound_meta(self, head: Operation | None) -> FoundMeta:
        """The metadata this store may use and write: the one the authenticated ``head``'s root
        tree carries (its record binds it); with no head, or a format 1 head, what
        ``refs/gitmem/meta`` names, checked as far as the keys can (design.md, "Reading").

        Raises :class:`IntegrityError` when ``refs/gitmem/meta`` names metadata that neither
        ``head`` nor any commit before it carries (someone other than gitmem changed it), or
        slots that no holder sealed.
        """
        ref = self.repo.ref(META_REF)
        key = (None if head is None else head.commit, ref)
        if self._bound is not None and self._bound[0] == key:
            return self._bound[1]  # the same commit and blob ids: the same contents
        carried = None if head is None else meta_in_tree(self.repo, head.tree)
        if carried is None:
            if ref is None:
                raise IntegrityError(f"the metadata of the store at {self.path} is gone")
            found = FoundMeta(self._parse_meta(ref), ref, False)
            self._check_unbound(found.meta, head)
        else:
            assert head is not None
            if ref is not None and ref != carried:
                self._check_stale_ref(ref, carried, head)
            found = FoundMeta(self._parse_meta(carried), carried, True)
        self._bound = (key, found)
        return found

    def _parse_meta(self, blob: str) -> StoreMeta:
        parsed = self._parsed_meta
        if parsed is None or parsed[0] != blob:
            parsed = (blob, StoreMeta.from_bytes(self.repo.read_blob(blob, fmt.MAX_META_BYTES)))
            self._parsed_meta = parsed
        if parsed[1].store_id != self.keys.store_id:
            raise IntegrityError(f"the metadata of the store at {self.path} was replaced")
        return parsed[1]

    def _check_stale_ref(self, ref: str, carried: str, head: Operation) -> None:
        """Accept a ``refs/gitmem/meta`` other than the head's only when it is metadata an
        earlier commit carried (left by a crash between a branch move and the ref's, or by a
        replica that has not written since it fetched): never used, and replaced by the next
        write. Anything else was changed outside gitmem, and is refused."""
        meta = self._parse_meta(ref)
        head_meta = self._parse_meta(carried)
        if not meta.has_slots and not head_meta.has_slots and meta.key_check == head_meta.key_check:
            return  # format 1 metadata under the first format 2 commit: nothing but the key check
        stack, seen = list(head.parents), set()
        while stack:
            oid = stack.pop()
            if oid in seen:
                continue
            seen.add(oid)
            op = self.read_operation(oid)
            if meta_in_tree(self.repo, op.tree) == ref:
                return
            stack.extend(op.parents)
        raise IntegrityError(
            f"refs/gitmem/meta of the store at {self.path} names metadata ({ref[:12]}) that no "
            "commit of the branch carries: it was changed outside gitmem (key slots added or "
            "dropped by someone who can write the repository), so it is not used and nothing "
            f"was written. To point it back at the metadata the head carries ({carried[:12]}), "
            "run `gitmem accept-head`"
        )

    def _check_unbound(self, meta: StoreMeta, head: Operation | None) -> None:
        """Check metadata that no commit carries yet (an empty store's, or a format 1 store's):
        its key check is checked by every key; its slots, by their labels, which only a holder
        of the newest epoch key can seal (design.md, "Reading", step 1)."""
        if not meta.has_slots or self.keyring is None:
            return
        if head is not None:
            # A format 1 head: gitmem adds slots to it only with the commit that carries them.
            raise IntegrityError(
                f"refs/gitmem/meta of the store at {self.path} lists key slots that no commit "
                "carries: it was changed outside gitmem, so it is not used and nothing was "
                "written"
            )
        keyring = keyslots.reopen(meta, self.keyring, str(self.path))
        for slot in meta.slots:
            try:
                keyslots.slot_label(meta, keyring, slot)
            except IntegrityError:
                raise IntegrityError(
                    f"refs/gitmem/meta of the store at {self.path} lists a key slot "
                    f"({slot.slot}) that no holder of the store's keys made: it was changed "
                    "outside gitmem, so it is not used and nothing was written"
                ) from None

    def keyring_for(self, meta: StoreMeta) -> Keyring:
        """This store's keyring, brought up to date with ``meta`` (another process may have
        added, removed or rotated keys since this one opened the store)."""
        if self.keyring is None:
            raise UsageError("this store was opened without a keyring; reopen it to manage keys")
        self.keyring = keyslots.reopen(meta, self.keyring, str(self.path))
        return self.keyring

    def change_meta(self, action: str, change: MetaChange, *, rotate: bool = False) -> int:
        """Apply ``change`` to the metadata under the writer lock, move its ref, and commit it;
        with ``rotate``, also start a new key epoch. ``change`` returns the new metadata and
        the keyring to go on with. Returns the newest epoch.

        The commit (command ``keys``, the same memory) carries the new metadata blob in its
        root tree, so the slots travel with the branch to every replica; an empty store has
        only the ref until its first write. After a rotation it is sealed with the new epoch.
        """
        op = None
        with self.repo.writer(), self.repo.write_lock(self.lock_timeout):
            old = self.repo.ref(META_REF)
            head = self.head_operation()
            meta = self.bound_meta(head).meta
            keyring = self.keyring_for(meta)
            new, keyring = change(meta, keyring)
            if new.format < fmt.COMPACT_FORMAT_VERSION and head is not None:
                # The commit below has a compressed record (format 6).
                new = replace(new, format=fmt.COMPACT_FORMAT_VERSION)
            if rotate:
                new, keyring = keyslots.rotate(new, keyring)
            blob = self.repo.write_blob(new.to_bytes())
            self._use_keyring(keyring, new, blob)
            if head is not None:
                detail: dict[str, Any] = {"action": action}
                if rotate:
                    detail["epoch"] = keyring.epoch
                # The commit first, then the ref: the ref never names slots no commit carries.
                op, durable = self._commit(
                    head.tree, head, "keys", (), detail, None, head.record.store_bytes
                )
            self.codec.meta_blob = blob
            published = self.publish_meta(old)
            if op is not None:
                self._bind(op, published)
        if op is not None:
            self.repo.wait_durable(durable)
            if self.high_water is not None:
                self._advance(Mark(op.commit, op.seq))
        return keyring.epoch

    def _use_meta(self, found: FoundMeta) -> None:
        """Write with ``found`` (authenticated by :meth:`bound_meta`): its newest epoch's keys,
        opened through this store's slot, and its blob in every root tree."""
        if found.blob != self._meta_blob and self.keyring is not None:
            self._use_keyring(
                keyslots.reopen(found.meta, self.keyring, str(self.path)), found.meta, found.blob
            )
        elif found.meta.format >= 2:
            self.codec.meta_blob = found.blob

    def _use_keyring(self, keyring: Keyring, meta: StoreMeta | None, meta_blob: str | None) -> None:
        """Use ``keyring``'s newest epoch, and ``meta`` (at ``meta_blob``) in root trees; None
        for both: read with the keyring, and write nothing with it before :meth:`_use_meta`."""
        self.keyring = keyring
        self._meta_blob = meta_blob
        if keyring.epoch != self.keys.epoch:
            self.keys = keyring.keys(self.keys.store_id)
            # A fresh codec: new objects are sealed (and chunks cut) with the new epoch's keys.
            codec = TreeCodec(self.repo, self.keys)
            codec.meta_blob = self.codec.meta_blob
            self.codec = codec
            self.sizer = StoreSizer(self.codec)
        if meta is not None and meta_blob is not None and meta.format >= 2:
            self.codec.meta_blob = meta_blob

    def read_with(self, keyring: Keyring) -> None:
        """Open commits with ``keyring``: a pull's, whose epoch chain contains this store's.

        Nothing is written with it until :meth:`adopt_meta`: the next write binds the metadata
        again and seals in the epoch it names.
        """
        self._use_keyring(keyring, None, None)

    def adopt_meta(self, meta: StoreMeta, blob: str | None = None) -> str:
        """Under the writer lock: write with ``meta`` (``blob``, if already written), as a pull
        settles it, opened through this store's own slot; returns its blob.

        ``refs/gitmem/meta`` moves only after the branch (:meth:`publish_meta`).
        """
        if self.keyring is None:
            raise UsageError("this store was opened without a keyring; reopen it to pull")
        keyring = keyslots.reopen(meta, self.keyring, str(self.path))
        if blob is None:
            blob = self.repo.write_blob(meta.to_bytes())
        self._use_keyring(keyring, meta, blob)
        return blob

    def _refresh_keys(self) -> bool:
        """Catch up with key changes another process made; True when the epoch changed.

        The head carries them (a key change moves the branch before the ref), an empty store's
        ref does. Neither is authenticated yet: the keys they give must extend the ones held,
        and then open the head's record, which binds its metadata. Raises :class:`WrongKey`
        when this store's own slot was removed.
        """
        if self.keyring is None:
            return False
        held = self.keyring.epochs
        ref = self.repo.ref(META_REF)
        for found in (meta_at(self.repo, self.repo.ref(BRANCH), None), find_meta(self.repo)):
            if found is None or found.blob == self._meta_blob:
                continue
            try:
                if found.meta.store_id != self.keys.store_id:
                    raise IntegrityError(f"the metadata of the store at {self.path} was replaced")
                keyring = keyslots.reopen(found.meta, self.keyring, str(self.path))
            except (WrongKey, IntegrityError):
                if found.blob == ref:
                    raise  # this replica's own metadata no longer lets its slot in
                continue  # the head's: unauthenticated, so its failure is the head's to report
            if keyring.epochs[: len(held)] == held and len(keyring.epochs) > len(held):
                self._use_keyring(keyring, None, None)
                return True
        return False

    # -- garbage collection ---------------------------------------------------------------

    def redact(self, text: str, *, dry_run: bool = False) -> Redaction:
        """Replace ``text`` by ``[redacted]`` in every version of every file, past and current:
        the history is rewritten from the first version holding it and one ``redact`` operation
        appended (design.md, "Redaction"); ``push`` then replaces the remote's branch, and every
        replica adopts it on its next pull. With ``dry_run``, only say which operations wrote
        it and where. :class:`NotFound` when no version holds it, :class:`UsageError` when it
        cannot be redacted (empty, part of the marker, in a path or session label); nothing is
        written then. The old versions stay in the repository until the next :meth:`gc`, which
        prunes them at once whatever its grace period."""
        # Redaction sits above the store (it rewrites history through the store's reads and
        # writes): imported when called, as sync is.
        from . import redact as redacting

        return redacting.redact(self, text, dry_run)

    def use_head_meta(self, head: Operation | None) -> None:
        """Under the writer lock: seal with the newest key epoch and stamp the metadata ``head``
        carries, as :meth:`write` does (for commits written outside it: a redaction's)."""
        self._use_meta(self.bound_meta(head))

    def fresh_codec(self) -> None:
        """Read and write through a new codec, which has nothing cached (a redaction: no old
        version it read stays in memory)."""
        codec = TreeCodec(self.repo, self.keys)
        codec.meta_blob = self.codec.meta_blob
        self.codec = codec
        self.sizer = StoreSizer(codec)

    def gc(self, grace: float = DEFAULT_GC_GRACE) -> GcReport:
        """Pack the repository into one pack and prune objects that nothing references.

        An unreferenced object is removed only once it is older than ``grace`` seconds (two
        weeks by default), or at once by the first gc after a redaction. Holds the writer lock,
        so no write races it; readers may run meanwhile and keep working.
        """
        with self.repo.write_lock(self.lock_timeout):
            return self.repo.gc(grace)

    def checkpoint(self) -> None:
        """Publish every write the redo log holds into the git repository, durably, so that
        plain git (and any other git tool) can read it; holds the writer lock. A no-op where
        writes are not logged (design.md, "The redo log")."""
        with self.repo.write_lock(self.lock_timeout):
            self.repo.checkpoint(clear=True, rest=True)

    def close(self) -> None:
        """Publish the writes this process logged to the store (a :meth:`checkpoint`, taking
        the writer lock up to ``lock_timeout``), so that plain git reads it; nothing happens
        when there are none (a reader, a read-only store). The store may still be used after
        it: later writes are logged again, and published when the writer goes idle
        (``publish_idle``), at the next ``close`` or at exit."""
        if self._idle is not None:
            self._idle.cancel()
        if self.repo.logged_here():
            self.checkpoint()

    def _publish_idle(self) -> None:
        """The idle publisher's call: what :meth:`close` publishes, from its thread."""
        if self.repo.logged_here():
            self.checkpoint()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def same_memory(before: Snapshot, after: Snapshot, root: MemoryPath = MEMORIES_ROOT) -> bool:
    """Whether two snapshots hold the same memory (under ``root``): the same files with the
    same contents and the same directories, empty ones included (which :func:`changed_files`
    does not see).

    Subtrees with equal ids are skipped unread; the first difference ends the walk.
    """
    stack = [(root, before.lookup(root), after.lookup(root))]
    while stack:
        path, a, b = stack.pop()
        if a == b:
            continue
        if a is None or b is None or a.kind != KIND_DIR or b.kind != KIND_DIR:
            return False
        a_children, b_children = before.children(path, a), after.children(path, b)
        if a_children.keys() != b_children.keys():
            return False
        stack.extend(
            (path.child(name), node, b_children[name]) for name, node in a_children.items()
        )
    return True


def changed_files(before: Snapshot, after: Snapshot) -> list[str]:
    """Paths of the files that differ between two snapshots (added, removed or changed), sorted."""
    return sorted(str(path) for path, _, _ in changed_file_nodes(before, after))


__all__ = ["MemoryStore", "NotAFile", "NotFound", "Operation", "PathExists", "VerifyReport"]


def _refs_on_disk(repo: Path) -> bool:
    """Whether any ref file (loose or packed) exists in ``repo``, read without libgit2."""
    if os.path.lexists(repo / "packed-refs"):
        return True
    return any(files for _, _, files in os.walk(repo / "refs"))


# -- publishing at close and at exit (design.md, "The redo log") ------------------------------

_log = logging.getLogger("gitmem")


def unpublished_warning(
    path: str | os.PathLike[str], error: BaseException, *, at_exit: bool = False
) -> str:
    """The one wording of the warning that the writes a process logged to the store at ``path``
    could not be published for git as it closed the store (or exited): they are durable in the
    redo log, and gitmem reads them."""
    when = " at exit" if at_exit else ""
    return (
        f"the writes were not published{when} for git ({error}); gitmem reads them, and "
        f"`gitmem --repo {path} checkpoint` publishes them"
    )


def close_for_exit(store: MemoryStore) -> str | None:
    """:meth:`MemoryStore.close` for a process on its way out (a CLI command, the MCP server):
    the writes are durable in the log already, so a failure to publish them does not fail the
    process; it is returned as the warning to show (:func:`unpublished_warning`), None when
    the store was closed."""
    try:
        store.close()
    except (GitMemError, OSError) as exc:
        return unpublished_warning(store.path, exc)
    return None


@atexit.register
def _publish_at_exit() -> None:
    """At interpreter exit, best effort: publish what the stores this process wrote to left in
    their logs (:func:`publish_logged`); never raises, waits at most ``EXIT_LOCK_SECONDS`` for
    each lock (a killed process runs no exit handler: gitmem reads its log as ever)."""
    try:
        for path, exc in publish_logged(git_repo.EXIT_LOCK_SECONDS):
            _log.warning("gitmem: %s", unpublished_warning(path, exc, at_exit=True))
    except Exception:  # an exit handler must not fail the exit
        _log.warning("gitmem: publishing the redo log at exit failed", exc_info=True)
