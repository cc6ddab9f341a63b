"""Replicas through git remotes: clone, pull, push, sync (``docs/design.md``, "Replicas").

Only libgit2 touches the wire (``gitrepo``); only ciphertext objects and gitmem's refs go over
it. A pull fetches into a quarantine and changes nothing (and keeps nothing it fetched) until
the incoming head has been identified as this store, authenticated, and checked against this
client's mark of that remote; a push is never forced.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

from . import redact
from .crypto import StoreKeys
from .editor import TreeEditor
from .errors import (
    ConflictError,
    DifferentStore,
    GitMemError,
    IntegrityError,
    LockTimeout,
    NoStore,
    NotAStoreRemote,
    PushRejected,
    RemoteError,
    RollbackDetected,
    StorageError,
    UsageError,
)
from .fsutil import local_path, refuse_key_text
from .git.refs import BRANCH, META_REF
from .git.repo import GitRepo
from .highwater import HighWater, Mark
from .keymerge import merge_meta, reading_keyring
from .merge import merge_base, merge_trees
from .operation import Operation
from .options import StoreOptions, network_timeout
from .replica import FoundMeta, carried_meta, find_meta, meta_at
from .snapshot import Snapshot
from .store import Change, MemoryStore, NoChange, changed_files
from .syncresult import SyncResult

DEFAULT_REMOTE = "origin"
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?[^/:]+:(?!//)")
_SYNC_RETRIES = 3
# How long sync keeps starting again while other replicas push between its fetch and its push
# (each attempt succeeds only when no other push lands in its own window, so with N replicas
# pushing at once an attempt succeeds about one time in N), and its pauses: random, up to
# _BACKOFF_BASE * 2**attempt seconds and at most _BACKOFF_CAP, so the replicas spread out
# (a longer cap lets a replica that just pushed, and syncs again at once, win every race).
SYNC_PATIENCE = 60.0
_BACKOFF_BASE = 0.05
_BACKOFF_CAP = 0.5


def check_url(url: str) -> str:
    """``url`` normalised for git (local paths made absolute); refuses embedded passwords and
    key text."""
    refuse_key_text(url, "the remote URL", "URL")
    if not url or url != url.strip() or any(ord(ch) < 0x20 for ch in url):
        raise UsageError(f"not a usable remote URL: {url!r}")
    if "://" in url:
        parts = urlsplit(url)
        if parts.password is not None:
            raise UsageError(
                "the remote URL contains a password; give the token in GITMEM_HTTPS_TOKEN "
                "instead, so that it is never written to the repository's config"
            )
        return url
    if _SCP_LIKE.match(url):
        return url
    return str(Path(url).expanduser().resolve())


def check_remote_name(name: str) -> str:
    """``name`` if it is a valid remote name (letters, digits, ``.``, ``_``, ``-``)."""
    if not _REMOTE_NAME.match(name) or name.endswith(".lock") or ".." in name:
        raise UsageError(f"invalid remote name {name!r}: use letters, digits, '.', '_' or '-'")
    return name


def resolve_remote(repo: GitRepo, remote: str) -> tuple[str, str]:
    """``(label, url)`` for a configured remote name or a URL."""
    url = repo.remote_url(remote) if _REMOTE_NAME.match(remote) else None
    if url is not None:
        return remote, check_url(url)
    if _REMOTE_NAME.match(remote) and not Path(remote).exists():
        raise UsageError(f"no remote named {remote!r} (add one with `gitmem remote add`)")
    return remote, check_url(remote)


def publish_local_remote(url: str, lock_timeout: float) -> None:
    """Before a local repository at ``url`` (a path or ``file://``) is read as a remote: when it
    is a gitmem store whose redo log holds writes (design.md, "The redo log"), publish them
    under its writer lock, since libgit2's transport reads only the published branch.

    Raises :class:`RemoteError` when there is no directory at that path (libgit2 would call it
    an "unsupported URL protocol"), or when the writes cannot be published (a read-only store,
    its lock held past ``lock_timeout``): reading the remote then would silently miss its
    latest writes.
    """
    path = _local_path(url)
    if path is not None and not path.is_dir():
        raise RemoteError(f"cannot reach the remote {url}: no git repository there")
    if path is None or not GitRepo.log_pending_at(path):
        return
    try:
        GitRepo(path).publish(lock_timeout)
    except (StorageError, LockTimeout, NoStore) as exc:
        raise RemoteError(
            f"the remote {url} is a gitmem store whose latest writes are only in its redo log, "
            f"and they cannot be published from here ({exc}); run `gitmem --repo {path} "
            "checkpoint` there, then try again; nothing was written"
        ) from None


def _local_path(url: str) -> Path | None:
    """The directory a local URL (a path or ``file://``) names; None for a network URL."""
    if "://" in url:
        parts = urlsplit(url)
        return Path(unquote(parts.path)) if parts.scheme == "file" else None
    return None if _SCP_LIKE.match(url) else Path(url)


def _remote_mark(store: MemoryStore, url: str) -> HighWater | None:
    if store.high_water is None:
        return None
    return HighWater(store.store_id, store.options.state_dir, remote=url)


def _seen(marks: HighWater | None) -> Mark | None:
    """This client's mark of a remote, read before this process asks the remote anything.

    Other processes of this client (sharing its state directory) advance the mark as they
    push and pull, at any moment: compared with the mark read after the fetch, the head this
    process fetched would look rewound when another one had pushed meanwhile.
    """
    return None if marks is None else marks.read()


def _check_remote_head(
    store: MemoryStore, mark: Mark | None, op: Operation | None, url: str
) -> None:
    """Refuse a remote head that went back from ``mark``, what this client had seen of that
    remote before this process fetched it (see :func:`_seen`)."""
    if mark is None or (op is not None and op.commit == mark.commit):
        return
    if op is None or op.seq <= mark.seq or not store.contains(op, mark.commit, mark.seq):
        where = "is gone" if op is None else f"is at operation #{op.seq} ({op.commit[:12]})"
        raise RollbackDetected(
            f"the remote {url} {where}, which does not follow operation #{mark.seq} "
            f"({mark.commit[:12]}) that this client saw there: it was rewound or force-pushed; "
            "nothing was changed locally"
        )


def _identify(store: MemoryStore, head: str | None, meta_blob: str | None, url: str) -> None:
    found = carried_meta(store.repo, head, meta_blob)
    if found is None:
        raise NotAStoreRemote(f"the remote {url} is a git repository but not a gitmem store")
    if found.meta.store_id != store.keys.store_id:
        raise DifferentStore(
            f"the remote {url} holds another gitmem store ({found.meta.store_id.hex()}), "
            f"not {store.store_id}"
        )
    # Epoch 0's key check, which every rotation keeps (the newest epoch's keys check otherwise).
    ring = store.keyring
    first = store.keys if ring is None else StoreKeys.derive(ring.epochs[0], store.keys.store_id)
    anchor = first.check_value()
    if found.meta.key_check != anchor:
        raise DifferentStore(f"the remote {url} holds store {store.store_id} under another key")


def pull(
    store: MemoryStore, remote: str = DEFAULT_REMOTE, timeout: float | None = None
) -> SyncResult:
    """Fetch ``remote``'s branch and fast-forward or merge it into this replica.

    ``timeout``: the seconds the remote has to answer (:func:`~gitmem.options.network_timeout`).

    The network part takes no lock (a local write never waits on it); fetched objects stay in
    a quarantine (:meth:`GitRepo.fetching`), deleted if the pull is refused. Only after the
    incoming head is identified as this store, authenticated and checked against this client's
    mark of the remote are they kept, and the branch moves, under the writer lock.
    """
    with _fetched(store, remote, timeout) as incoming:
        if isinstance(incoming, SyncResult):
            return incoming
        result = incoming.integrate(store)
    incoming.seen()
    return result


@dataclass(frozen=True)
class _Incoming:
    """A remote's head, fetched, identified as this store, authenticated and checked against
    this client's mark of the remote (``theirs`` is None when it has only metadata);
    ``accept`` keeps the fetched objects (see :meth:`GitRepo.fetching`)."""

    label: str
    url: str
    theirs: Operation | None
    meta: FoundMeta | None
    marks: HighWater | None
    remote_has_meta: bool
    accept: Callable[[], None]
    seconds: float
    # The redaction of the remote this pull adopted before integrating (redact.adopt), if any.
    adopted: Operation | None = None

    def integrate(self, store: MemoryStore, *, detached: bool = False) -> SyncResult:
        """:func:`_integrate` of this remote head into ``store``."""
        return _integrate(
            store,
            self.label,
            self.url,
            self.theirs,
            self.meta,
            self.accept,
            detached=detached,
            adopted=self.adopted,
        )

    def seen(self) -> None:
        """Advance this client's mark of the remote to the head fetched."""
        if self.marks is not None and self.theirs is not None:
            self.marks.advance(Mark(self.theirs.commit, self.theirs.seq))


@contextlib.contextmanager
def _fetched(
    store: MemoryStore, remote: str, timeout: float | None
) -> Iterator[_Incoming | SyncResult]:
    """The network half of a pull: the remote's head, checked, its objects in quarantine for
    the block (kept only if it calls ``accept``); an ``empty`` result when the remote holds
    nothing. Nothing local changes."""
    label, url = resolve_remote(store.repo, remote)
    seconds = network_timeout(store.options, timeout)
    marks = _remote_mark(store, url)
    seen = _seen(marks)
    repo = store.repo
    publish_local_remote(url, store.lock_timeout)
    heads = repo.list_remote(url, seconds)
    if not heads:
        yield SyncResult(label, url, "empty", store.head(), None)
        return
    if BRANCH not in heads and META_REF not in heads:
        raise NotAStoreRemote(f"the remote {url} is a git repository but not a gitmem store")
    wanted = [ref for ref in (BRANCH, META_REF) if ref in heads]
    # Fetched into a quarantine: what a refused pull brought is deleted, never kept here.
    with repo.fetching(url, wanted, seconds) as fetched:
        incoming = fetched.refs.get(BRANCH)
        _identify(store, incoming, fetched.refs.get(META_REF), url)
        # The metadata the incoming head carries (bound by its record, checked when it is read).
        their_meta = None if incoming is None else meta_at(repo, incoming, None)
        _read_incoming(store, their_meta, url)
        theirs = None if incoming is None else store.read_operation(incoming)
        if theirs is not None:
            # As for a local head: refused before it can become the branch or a merge's parent.
            store.check_epoch(theirs)
        adopted = None
        try:
            _check_remote_head(store, seen, theirs, url)
        except RollbackDetected:
            # Unless an authenticated redaction rewrote all this client saw there: then this
            # replica's history moves onto the rewritten one first (gitmem.redact.adopt).
            if seen is None or theirs is None:
                raise
            adopted = redact.adopt(store, seen, theirs, url, fetched.accept)
            if adopted is None:
                raise
        yield _Incoming(
            label,
            url,
            theirs,
            their_meta,
            marks,
            META_REF in heads,
            fetched.accept,
            seconds,
            adopted,
        )


def _read_incoming(store: MemoryStore, incoming: FoundMeta | None, url: str) -> None:
    """Let ``store`` open the incoming commits when they are sealed in an epoch it does not know
    yet: through its own slot (WrongKey when it was removed there), and only if the incoming
    epoch chain contains the one it holds. Nothing is written here."""
    if incoming is None or store.keyring is None:
        return
    local = find_meta(store.repo)
    if local is None or local.blob == incoming.blob:
        return
    keyring = reading_keyring(incoming.meta, store.keyring, str(store.path), url)
    if keyring.epoch > store.keys.epoch:
        store.read_with(keyring)


def _refuse_retired_epoch(store: MemoryStore, theirs: Operation, url: str) -> None:
    """Refuse an incoming head, not yet in this replica's history, sealed in an older key
    epoch than the newest this replica holds (its own, or one the incoming metadata brought).

    Every current holder seals in the newest epoch it knows, and a pull merges in it, so work
    made in an older epoch reaches a replica that has the newer one only merged by a holder of
    it. A head still in the older epoch may be a removed holder's, written from a copy taken
    before the removal (design.md, "Epoch order"): nothing of it is taken.
    """
    if theirs.epoch < store.keys.epoch:
        raise IntegrityError(
            f"the remote {url} is at commit {theirs.commit[:12]}, sealed in key epoch "
            f"{theirs.epoch}, older than this replica's newest ({store.keys.epoch}): it was "
            "written with keys a rotation retired, by a holder who has not seen the rotation "
            "or by one who was removed; nothing was changed locally. If a current holder wrote "
            "it, pull this replica's history there first (that merge is sealed in the new "
            "epoch), then pull again"
        )


def _settle_meta(
    store: MemoryStore,
    ours: Operation | None,
    base: str | None,
    incoming: FoundMeta | None,
    url: str,
    accept: Callable[[], None],
) -> None:
    """Under the writer lock, before the branch moves: write with the metadata after the pull
    (this replica's, the incoming one, or both sides' slots; ``base`` is the merge base's
    commit). ``refs/gitmem/meta`` follows the branch (:meth:`MemoryStore.publish_meta`).
    ``accept`` keeps the fetched objects, called once the metadata is known to unite (else the
    pull is refused)."""
    if incoming is None or store.keyring is None:
        return
    # This replica's metadata as its head authenticates it (an empty replica: its ref, checked).
    local = store.bound_meta(ours)
    if local.blob == incoming.blob:
        store.adopt_meta(local.meta, local.blob)
        return
    # An empty replica has no history of its own: its metadata counts as unchanged.
    found = local if base is None else meta_at(store.repo, base, None)
    merged = merge_meta(None if found is None else found.meta, local.meta, incoming.meta, url)
    accept()
    if merged == local.meta:
        store.adopt_meta(local.meta, local.blob)
    else:
        store.adopt_meta(merged, incoming.blob if merged == incoming.meta else None)


def _integrate(
    store: MemoryStore,
    label: str,
    url: str,
    theirs: Operation | None,
    their_meta: FoundMeta | None,
    accept: Callable[[], None],
    *,
    detached: bool = False,
    adopted: Operation | None = None,
) -> SyncResult:
    """Make the local branch include ``theirs``: nothing, a fast-forward, or a merge commit.

    The metadata is settled first (``_settle_meta``), so a merge commit is sealed in the newest
    epoch and carries the metadata both sides agree on. ``accept`` keeps the fetched objects:
    called before the branch or the metadata can name them, after every refusal. With
    ``detached``, a merge commit is written but the branch does not move to it (the result's
    ``merge``; see :func:`sync`). ``adopted``: the remote's redaction the pull adopted before
    (the result's ``redaction``, as is one adopted here).
    """
    if theirs is None:
        return SyncResult(label, url, "up-to-date", store.head(), None, redaction=adopted)
    remote_head = theirs.commit
    # Written on a history a redaction here rewrote: its copy on the new one is taken instead.
    theirs, adopted_here = redact.onto_redaction(store, theirs, url, accept)
    result = _bring_in(store, label, url, theirs, remote_head, their_meta, accept, detached)
    adopted = adopted or adopted_here
    return result if adopted is None else replace(result, redaction=adopted)


def _bring_in(
    store: MemoryStore,
    label: str,
    url: str,
    theirs: Operation,
    remote_head: str,
    their_meta: FoundMeta | None,
    accept: Callable[[], None],
    detached: bool,
) -> SyncResult:
    """:func:`_integrate`'s fast-forward or merge of ``theirs`` (the remote's ``remote_head``,
    or its copy on a history a redaction here rewrote)."""
    for _ in range(_SYNC_RETRIES):
        with store.repo.write_lock(store.lock_timeout):
            # Again under the lock: a local key change may have happened since the fetch.
            _read_incoming(store, their_meta, url)
            ours = store.head_operation()
            # A history a redaction here rewrote has nothing to give: merged, it would bring
            # the text back (the push replaces it).
            if store.contains(ours, theirs.commit, theirs.seq) or redact.supersedes(
                store, ours, theirs
            ):
                assert ours is not None
                return SyncResult(label, url, "up-to-date", ours.commit, remote_head)
            _refuse_retired_epoch(store, theirs, url)
            forward = ours is None or store.contains(theirs, ours.commit, ours.seq)
            if forward:
                old_meta = store.repo.ref(META_REF)
                _settle_meta(
                    store, ours, None if ours is None else ours.commit, their_meta, url, accept
                )
                accept()
                store.repo.update_ref(BRANCH, theirs.commit, None if ours is None else ours.commit)
                store.publish_meta(old_meta)
                if store.high_water is not None:
                    # Proven above: theirs descends from ours, which passed the rollback check,
                    # so the mark may follow without walking the new commits a second time.
                    store.high_water.advance(Mark(theirs.commit, theirs.seq))
                head = store.head_operation()
                assert head is not None
                return SyncResult(label, url, "fast-forward", head.commit, remote_head)

        def edit(head: Operation | None, tree: TreeEditor) -> Change[str] | NoChange[str]:
            # The write bound this replica's own metadata: read the incoming epochs again.
            _read_incoming(store, their_meta, url)
            if (
                head is None
                or store.contains(head, theirs.commit, theirs.seq)
                or store.contains(theirs, head.commit, head.seq)
            ):
                return NoChange("again")  # the branch moved since we looked: decide afresh
            base = merge_base(head, theirs, store.read_operation)
            if base is None:
                raise ConflictError(
                    f"the remote {url} has a history unrelated to this replica's; "
                    "nothing was merged"
                )
            # The merge commit carries the settled metadata and is sealed in the newest epoch
            # (the write moves refs/gitmem/meta after the branch).
            _refuse_retired_epoch(store, theirs, url)
            _settle_meta(store, head, base.commit, their_meta, url, accept)
            # Before the merge commit can name them.
            accept()
            merged = merge_trees(store.codec, base, head, theirs)
            # Even when the merged tree equals ours, the merge commit records that theirs is
            # included (else the next push would be refused as lacking the remote's commits).
            before, after = Snapshot(store.codec, head.tree), Snapshot(store.codec, merged.tree)
            paths = tuple(changed_files(before, after))
            detail = merged.detail(theirs, base)
            return Change(paths, "merged", detail, tree=merged.tree, merged=theirs)

        op, _ = store.write("merge", edit, detached=detached)
        if op is not None:
            return SyncResult(label, url, "merged", op.commit, remote_head, op)
    raise ConflictError("the branch kept moving during the pull; nothing was merged, pull again")


def push(
    store: MemoryStore, remote: str = DEFAULT_REMOTE, timeout: float | None = None
) -> SyncResult:
    """Send this replica's branch to ``remote`` (never forced; the local store is not locked);
    ``timeout`` as for :func:`pull`."""
    label, url = resolve_remote(store.repo, remote)
    seconds = network_timeout(store.options, timeout)
    marks = _remote_mark(store, url)
    seen = _seen(marks)
    repo = store.repo
    head = store.head_operation()
    # The ref a push may send must name authentic metadata (a cached head skipped the check).
    store.bound_meta(head)
    # A push into a local store moves its ref file, which its unpublished log would override.
    publish_local_remote(url, store.lock_timeout)
    heads = repo.list_remote(url, seconds)
    if heads and BRANCH not in heads and META_REF not in heads:
        raise NotAStoreRemote(f"the remote {url} is a git repository but not a gitmem store")
    remote_meta = heads.get(META_REF)
    if remote_meta is not None and remote_meta != repo.ref(META_REF):
        # Metadata other than ours: another store's (an empty one has no branch to check, and
        # pushing ours into it would break it), or ours changed on that replica (key slots).
        # Only looked at: the fetched blob is dropped (a pull brings it in).
        with repo.fetching(url, [META_REF], seconds) as fetched:
            _identify(store, None, fetched.refs.get(META_REF), url)
    remote_head = heads.get(BRANCH)
    theirs = None
    rewritten = False
    if remote_head is not None:
        if META_REF not in heads:
            # Its store is named in its head's tree, or it is no gitmem store (whose commit
            # would fail authentication as if forged); a head not here is fetched to be looked
            # at, and dropped.
            if repo.has(remote_head):
                _identify(store, remote_head, None, url)
            else:
                with repo.fetching(url, [BRANCH], seconds) as fetched:
                    _identify(store, fetched.refs.get(BRANCH), None, url)
        if repo.has(remote_head):
            theirs = store.read_operation(remote_head)
        else:
            if redact.redacted(store, head):
                # Gone from here after a redaction and gc, or commits this replica lacks.
                with repo.fetching(url, [BRANCH], seconds) as fetched:
                    theirs = store.read_operation(fetched.refs[BRANCH])
                    _check_remote_head(store, seen, theirs, url)
                    rewritten = redact.supersedes(store, head, theirs)
            if not rewritten:
                raise PushRejected(
                    f"the remote {url} has commits this replica lacks; pull or sync first"
                )
    if not rewritten:
        _check_remote_head(store, seen, theirs, url)
    # The one forced update: of a history an authenticated redaction here rewrote.
    forced = rewritten
    if (
        not rewritten
        and theirs is not None
        and head is not None
        and not store.contains(head, theirs.commit, theirs.seq)
    ):
        if not redact.supersedes(store, head, theirs):
            raise PushRejected(
                f"the remote {url} has commits this replica lacks; pull or sync first"
            )
        forced = True
    specs = []
    if head is not None and (theirs is None or theirs.commit != head.commit):
        specs.append(f"{'+' if forced else ''}{BRANCH}:{BRANCH}")
    if META_REF not in heads and repo.ref(META_REF) is not None:
        specs.append(f"{META_REF}:{META_REF}")
    if not specs:
        return SyncResult(
            label, url, "up-to-date", None if head is None else head.commit, remote_head
        )
    if forced:
        assert theirs is not None
        repo.push(url, specs, store.lock_timeout, seconds, lease=theirs.commit)
    else:
        repo.push(url, specs, store.lock_timeout, seconds)
    if marks is not None and head is not None:
        marks.advance(Mark(head.commit, head.seq))
    return SyncResult(label, url, "pushed", None if head is None else head.commit, remote_head)


def sync(
    store: MemoryStore, remote: str = DEFAULT_REMOTE, timeout: float | None = None
) -> SyncResult:
    """Pull (merging if needed), then push what the remote lacks; ``timeout`` as for
    :func:`pull`.

    Processes sharing this client's state directory sync with one remote one at a time (each
    waits for its turn). When another replica pushes between the pull and the push, the push
    is refused and sync starts again after a random pause (doubling with each attempt, up to
    half a second); after :data:`SYNC_PATIENCE` seconds in all, :class:`PushRejected`. A
    merge commit reaches this replica's branch only once the remote took it (or could not be
    reached): a refused attempt leaves no merge behind to be merged again.
    """
    deadline = time.monotonic() + SYNC_PATIENCE
    with _taking_turns(store, remote, deadline):
        return _sync_until(store, remote, timeout, deadline)


@contextlib.contextmanager
def _taking_turns(store: MemoryStore, remote: str, deadline: float) -> Iterator[None]:
    """Hold this client's turn to sync with ``remote`` (:meth:`HighWater.turn`), waiting for it
    until ``deadline``: processes sharing a state directory (agents on one machine) sync with
    one remote one at a time, instead of racing for its branch. Each attempt of a race costs a
    fetch and a merge, and all but one are refused: many agents on one machine spent their
    shared processors on attempts that were refused, and ran out of patience."""
    marks = _remote_mark(store, resolve_remote(store.repo, remote)[1])
    if marks is None:
        yield
        return
    held = False
    try:
        with marks.turn(deadline):
            held = True
            yield
    except TimeoutError:
        if held:
            raise
        raise PushRejected(
            f"other processes of this client kept syncing with the remote {marks.where} for "
            f"{SYNC_PATIENCE:g} seconds; nothing was lost, sync again"
        ) from None


def _sync_until(
    store: MemoryStore, remote: str, timeout: float | None, deadline: float
) -> SyncResult:
    """:func:`sync`'s attempts, until one succeeds or ``deadline`` passes."""
    attempt = 0
    fetched: list[str | None] = []
    # A redaction adopted by an attempt that was refused stays adopted: the result says so.
    adopted: list[Operation] = []
    while True:
        try:
            result = _sync_once(store, remote, timeout, fetched, adopted)
            return result if not adopted else replace(result, redaction=adopted[-1])
        except PushRejected:
            if len(fetched) > 1 and fetched[-1] == fetched[-2]:
                raise  # refused though the remote did not move (a hook, a protected branch)
            # Another replica pushed between our fetch and our push: fetch again.
            attempt += 1
            pause = random.uniform(0, min(_BACKOFF_CAP, _BACKOFF_BASE * 2**attempt))
            if time.monotonic() + pause > deadline:
                raise PushRejected(
                    f"the remote kept moving during sync ({attempt} attempts in "
                    f"{SYNC_PATIENCE:.0f} seconds); nothing was lost, sync again"
                ) from None
            time.sleep(pause)


def _sync_once(
    store: MemoryStore,
    remote: str,
    timeout: float | None,
    fetched: list[str | None],
    adopted: list[Operation],
) -> SyncResult:
    """One attempt of :func:`sync`; the remote head it fetched is appended to ``fetched``, and
    the remote's redaction it adopted, if any, to ``adopted``."""
    with _fetched(store, remote, timeout) as incoming:
        if isinstance(incoming, SyncResult):
            fetched.append(incoming.remote_head)
            pulled = incoming
        else:
            fetched.append(None if incoming.theirs is None else incoming.theirs.commit)
            pulled = incoming.integrate(store, detached=True)
            if pulled.redaction is not None:
                adopted.append(pulled.redaction)
    if isinstance(incoming, _Incoming):
        incoming.seen()
        if pulled.action == "merged":
            assert pulled.merge is not None and incoming.theirs is not None
            return _push_merge(store, incoming, pulled.merge)
    pushed = push(store, remote, timeout)
    action = (
        pulled.action
        if pushed.action == "up-to-date"
        else ("pushed" if pulled.action in ("up-to-date", "empty") else f"{pulled.action}+pushed")
    )
    return SyncResult(
        pulled.remote, pulled.url, action, pushed.head, pushed.remote_head, pulled.merge
    )


def _nothing_fetched() -> None:
    """``accept`` for a commit this replica made itself: there is nothing in quarantine."""


def _push_merge(store: MemoryStore, incoming: _Incoming, merge: Operation) -> SyncResult:
    """Send ``merge`` (of this replica's head and the remote's, not on the branch yet), then
    make the branch include it: a fast-forward, or a merge when a local write came meanwhile.
    Refused (PushRejected), the merge is left to garbage collection."""
    # The remote was identified and its head checked by the fetch just made: the push lists it
    # no second time, which would only widen the window in which another replica's push makes
    # this one a non-fast-forward (libgit2 refuses that before sending: PushRejected).
    # A push into a local store moves its ref file, which its unpublished log would override.
    publish_local_remote(incoming.url, store.lock_timeout)
    assert incoming.theirs is not None
    # A merge of the copy of a head written on the history a redaction here rewrote replaces it.
    forced = redact.supersedes(store, merge, incoming.theirs)
    specs = [f"{'+' if forced else ''}{merge.commit}:{BRANCH}"]
    if not incoming.remote_has_meta and store.repo.ref(META_REF) is not None:
        specs.append(f"{META_REF}:{META_REF}")
    try:
        if forced:
            store.repo.push(
                incoming.url,
                specs,
                store.lock_timeout,
                incoming.seconds,
                lease=incoming.theirs.commit,
            )
        else:
            store.repo.push(incoming.url, specs, store.lock_timeout, incoming.seconds)
    except PushRejected:
        raise
    except RemoteError:
        # Unreachable: the pull's merge is kept locally, as a pull would, for the next sync.
        _integrate(store, incoming.label, incoming.url, merge, None, _nothing_fetched)
        raise
    if incoming.marks is not None:
        incoming.marks.advance(Mark(merge.commit, merge.seq))
    # The metadata was settled when the merge was made (it carries the settled one).
    _integrate(store, incoming.label, incoming.url, merge, None, _nothing_fetched)
    assert incoming.theirs is not None
    return SyncResult(
        incoming.label,
        incoming.url,
        "merged+pushed",
        merge.commit,
        incoming.theirs.commit,
        merge,
    )


def clone(
    url: str,
    path: str | os.PathLike[str],
    key: str | bytes | None = None,
    options: StoreOptions | None = None,
    timeout: float | None = None,
) -> MemoryStore:
    """Make a new replica at ``path`` of the store at ``url`` and return it opened.

    ``path`` must not exist or be an empty directory. On any failure the new replica is removed.
    ``timeout`` as for :func:`pull`.
    """
    clean = check_url(url)
    target = local_path(path, "clone's path")
    seconds = network_timeout(options, timeout)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} already exists; clone into a new path")
    made = not target.exists()
    try:
        repo = GitRepo.init(target)
        publish_local_remote(clean, StoreOptions.of(options).lock_timeout)
        heads = repo.list_remote(clean, seconds)
        if not heads:
            raise NotAStoreRemote(f"the remote {clean} is empty: nothing to clone")
        if BRANCH not in heads and META_REF not in heads:
            raise NotAStoreRemote(f"the remote {clean} is a git repository but not a gitmem store")
        # The metadata the fetched head carries (its record is authenticated when the store is
        # opened below); the host's refs/gitmem/meta only for a store with no head.
        fetched = repo.fetch(clean, [ref for ref in (BRANCH, META_REF) if ref in heads], seconds)
        found = carried_meta(repo, fetched.get(BRANCH), fetched.get(META_REF))
        if found is None:
            raise NotAStoreRemote(f"the remote {clean} is a git repository but not a gitmem store")
        repo.create_ref(META_REF, found.blob)
        if BRANCH in fetched:
            repo.create_ref(BRANCH, fetched[BRANCH])
        # A clone into a missing or empty path is the user saying what belongs there: a store
        # this client once knew at that path was deleted, and is not the one to insist on.
        store = MemoryStore.open(target, key, options=options, accept_store=True)
        head = store.head_operation()
        repo.add_remote(DEFAULT_REMOTE, clean)
        marks = _remote_mark(store, clean)
        if marks is not None and head is not None:
            marks.advance(Mark(head.commit, head.seq))
        return store
    except BaseException:
        if made:
            shutil.rmtree(target, ignore_errors=True)
        else:
            for child in target.iterdir():
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink()
        raise


def add_remote(store: MemoryStore, name: str, url: str) -> None:
    """Configure remote ``name`` at ``url`` in this replica."""
    store.repo.add_remote(check_remote_name(name), check_url(url))


def remove_remote(store: MemoryStore, name: str) -> None:
    """Remove remote ``name`` and this client's mark of it (a re-added remote starts afresh)."""
    url = store.repo.remote_url(check_remote_name(name))
    store.repo.remove_remote(name)
    if url is not None:
        marks = _remote_mark(store, check_url(url))
        if marks is not None:
            marks.reset(None)


def list_remotes(store: MemoryStore) -> list[tuple[str, str]]:
    """``(name, url)`` of every configured remote, sorted by name."""
    return store.repo.remote_names()


__all__ = [
    "DEFAULT_REMOTE",
    "GitMemError",
    "SyncResult",
    "add_remote",
    "clone",
    "list_remotes",
    "pull",
    "push",
    "remove_remote",
    "sync",
]
