"""``gitmem verify``: authenticate every commit of a store's history and decrypt every object
reachable from one, in bounded memory (design.md, "Verifying a store").

The walk goes newest first by sequence number, as ``log`` does: a commit is read when a child
names it, and checked against its parents when its turn comes, so only the commits between the
walk's front and its next turn are held (one for a linear history; the width of the history
where it branched). The trees and files of each commit are checked only where they differ from
the ones checked last: a bounded set of those recently checked skips what a commit shares with
the commit before it, so each version is decrypted once however long the history.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .cache import BoundedCache
from .errors import GitMemError, IntegrityError, RollbackDetected
from .format import KIND_DIR
from .git.refs import BRANCH
from .git.repo import GitRepo
from .limits import StoreSizer
from .operation import Operation
from .paths import MemoryPath
from .replica import FoundMeta
from .snapshot import decode_text
from .tree import TreeCodec

OLDER_EPOCH = (
    "it is sealed with an older key epoch than its parent (written with a key that a rotation "
    "retired)"
)
"""Why a commit sealed in an older key epoch than a parent is refused."""
# A merge takes in a head sealed in an epoch at least its first parent's: pulls refuse any other
# (design.md, "Epoch order"), which only a holder who never saw the rotation could write.
RETIRED_MERGED = (
    "it merged in commit {}, sealed in an older key epoch than its own first parent (written "
    "by a holder who had not seen a rotation, or by one whom it removed)"
)
"""Why a merge of a head sealed in an older epoch than its first parent is refused."""

FRESH_CACHES_EVERY = 1000
"""The walk reads through caches of its own, new every this many commits (see
:meth:`_Walk.fresh_caches`): they hold what was read since, at most."""
RECENT_OBJECTS = 1 << 16
"""How many directory versions, and how many file versions, the walk remembers having checked
(each set least recently used first): a version met again within that many is not decrypted
again. One commit's directories and files beyond that are checked again where met again."""


@dataclass
class VerifyReport:
    """What :meth:`MemoryStore.verify` checked and every problem it found."""

    commits: int = 0
    objects: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.problems


class Verified(Protocol):
    """What verification reads of a store (:class:`gitmem.MemoryStore` is one)."""

    @property
    def repo(self) -> GitRepo: ...

    @property
    def codec(self) -> TreeCodec: ...

    @property
    def sizer(self) -> StoreSizer: ...

    def read_operation(self, oid: str) -> Operation: ...

    def head_operation(self) -> Operation | None: ...

    def bound_meta(self, head: Operation | None) -> FoundMeta: ...


def verify_store(store: Verified, progress: Callable[[int], None] | None = None) -> VerifyReport:
    """Authenticate every commit of ``store`` and decrypt every object reachable from one;
    ``progress`` is called with the count of commits checked so far after each."""
    report = VerifyReport()
    repo = store.repo
    try:
        report.problems.extend(repo.foreign_ref_problems())
        head = repo.ref(BRANCH)
    except GitMemError as exc:
        report.problems.append(str(exc))
        return report
    if head is None:
        return report
    try:
        store.head_operation()
    except RollbackDetected as exc:
        report.problems.append(str(exc))
    except IntegrityError:
        pass  # reported below with the other commits
    walk = _Walk(store, report)
    head_op = walk.read(head)
    if head_op is not None:
        walk.queue(head_op)
    while walk.front:
        op = walk.next()
        if report.commits % FRESH_CACHES_EVERY == 0:
            walk.fresh_caches()
        report.commits += 1
        if progress is not None:
            progress(report.commits)
        parents = [walk.read(p) for p in op.parents]
        walk.check_order(op, parents)
        for parent in parents:
            if parent is not None:
                walk.queue(parent)
        _verify_dir(walk.codec, op.tree, MemoryPath(()), op.commit, walk, report)
        _verify_size(walk.sizer, op, report)
    if head_op is not None:
        try:
            store.bound_meta(head_op)
        except GitMemError as exc:
            report.problems.append(str(exc))
    report.objects += report.commits
    return report


class _Walk:
    """The commits read and not yet checked (newest sequence number first), and the directory
    and file versions checked lately."""

    def __init__(self, store: Verified, report: VerifyReport) -> None:
        self._store = store
        self._report = report
        self.front: list[tuple[int, str]] = []  # (-seq, commit) of the commits queued
        self._queued: dict[str, Operation] = {}
        # Commits already reported unreadable, and those reached again after their turn (only
        # through a parent numbered at or above its child, which is reported): each is read or
        # checked once. Both hold only what is damaged.
        self._unreadable: set[str] = set()
        self._done_early: set[str] = set()
        self._last_seq: int | None = None
        self.dirs: BoundedCache[tuple[str, MemoryPath], bool] = BoundedCache(RECENT_OBJECTS)
        self.files: BoundedCache[str, bool] = BoundedCache(RECENT_OBJECTS)
        self.codec = store.codec
        self.sizer = store.sizer

    def fresh_caches(self) -> None:
        """Read through a codec (and sizer) of the walk's own from now on, dropping the last
        one's caches: what they hold of old versions would not be read again, and the store's
        own caches are left as they were."""
        self.codec = TreeCodec(self._store.repo, self._store.codec.keys)
        self.sizer = StoreSizer(self.codec)

    def read(self, oid: str) -> Operation | None:
        """The operation of commit ``oid`` (already queued, or read now), or None when it
        cannot be read (reported once)."""
        queued = self._queued.get(oid)
        if queued is not None:
            return queued
        if oid in self._unreadable:
            return None
        try:
            return self._store.read_operation(oid)
        except GitMemError as exc:
            self._unreadable.add(oid)
            self._report.problems.append(f"commit {oid}: {exc}")
            return None

    def queue(self, op: Operation) -> None:
        """Queue ``op`` to be checked in its turn, unless it is queued or was checked."""
        if op.commit in self._queued or op.commit in self._done_early:
            return
        if self._last_seq is not None and op.seq >= self._last_seq:
            # Reached after commits numbered below it were checked: its number is wrong (which
            # its child's check reports). Checked once, now.
            self._done_early.add(op.commit)
        self._queued[op.commit] = op
        heapq.heappush(self.front, (-op.seq, op.commit))

    def next(self) -> Operation:
        """The queued operation of the highest sequence number, taken off the queue."""
        neg_seq, oid = heapq.heappop(self.front)
        self._last_seq = -neg_seq if self._last_seq is None else min(self._last_seq, -neg_seq)
        return self._queued.pop(oid)

    def check_order(self, op: Operation, parents: list[Operation | None]) -> None:
        """Report ``op`` if its sequence number does not follow its parents' (all readable),
        or its key epoch is older than a parent's, or it merged in an older epoch."""
        problems = self._report.problems
        known = [p for p in parents if p is not None]
        if len(known) == len(parents) and op.seq != max((p.seq for p in known), default=0) + 1:
            problems.append(f"commit {op.commit}: its sequence number does not follow its parents")
        epochs = [0 if p is None else p.epoch for p in parents]
        if any(epoch > op.epoch for epoch in epochs):
            problems.append(f"commit {op.commit}: {OLDER_EPOCH}")
        elif len(parents) == 2 and epochs[1] < epochs[0]:
            problems.append(f"commit {op.commit}: {RETIRED_MERGED.format(op.parents[1])}")


def _verify_size(sizer: StoreSizer, op: Operation, report: VerifyReport) -> None:
    """Report a record whose ``bytes`` is not the size of its tree."""
    stated = op.record.store_bytes
    if stated is None:
        return
    try:
        actual = sizer.tree_bytes(op.tree)
    except GitMemError:
        return  # the damage is reported by _verify_dir
    if actual != stated:
        report.problems.append(
            f"commit {op.commit}: its record states a memory of {stated:,} bytes, but its "
            f"files hold {actual:,}"
        )


def _verify_dir(
    codec: TreeCodec, oid: str, path: MemoryPath, commit: str, walk: _Walk, report: VerifyReport
) -> None:
    """Decrypt directory tree ``oid`` at ``path`` and everything below it that ``walk`` has not
    checked lately; report what fails, naming ``commit``."""
    # A stack, not recursion: how deep a tree goes is the data's (and an attacker's) choice.
    stack = [(oid, path)]
    while stack:
        dir_oid, at = stack.pop()
        if walk.dirs.get((dir_oid, at)) is not None:
            continue
        walk.dirs.put((dir_oid, at), True)
        report.objects += 1
        try:
            children = codec.load_dir(dir_oid, at).nodes
        except GitMemError as exc:
            report.problems.append(f"commit {commit[:12]}, directory {at}: {exc}")
            continue
        for name, child in children.items():
            child_path = at.child(name)
            if child.kind == KIND_DIR:
                stack.append((child.oid, child_path))
            elif walk.files.get(child.oid) is None:
                walk.files.put(child.oid, True)
                report.objects += 1
                try:
                    decode_text(codec.read_file(child.oid, fresh=True), child_path)
                except GitMemError as exc:
                    report.problems.append(f"commit {commit[:12]}, file {child_path}: {exc}")
