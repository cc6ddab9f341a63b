"""Maintenance: packing loose objects and merging packs as writes accumulate (design.md,
"Maintenance"), and garbage collection. It reads objects through a :class:`Reader` (the
repository, which knows where each object is); what the redo log holds is published before gc
by the repository, which decides the order."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from .. import forksafe
from ..errors import GitMemError, IntegrityError, StorageError
from .files import require_file
from .handle import Handle
from .objects import (
    ANY_KIND,
    TEMPORARY_OBJECT_PREFIXES,
    Reader,
    loose_objects,
    parse_commit,
    parse_tree,
    tag_target,
)
from .pack import TMP_PREFIX as PACK_TMP_PREFIX
from .pack import PackMerge, write_pack
from .refs import BRANCH, META_REF

_OWN = (BRANCH, META_REF)
_GC_TMP_PREFIX = PACK_TMP_PREFIX
# Automatic maintenance (Maintenance.maintain): pack the loose objects once about this many have
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
# This process's pack merge under way, by repository path (Maintenance._merge_packs).
_MERGES: dict[str, PackMerge] = {}


def finish_merges(maintain: Callable[[str], None]) -> None:
    """At interpreter exit: ``maintain(path)`` (under the writer lock) each repository this
    process has a merge of packs under way in, so that a process that writes once (a CLI
    command) still merges packs, after its write was acknowledged; a merge that cannot be
    finished is dropped, its temporary files removed: its packs stay as they were."""
    pid = os.getpid()
    for path, job in list(_MERGES.items()):
        if job.pid != pid:
            continue  # a forked child's copy of its parent's merge: the parent's files
        try:
            maintain(path)
        finally:
            left = _MERGES.pop(path, None)
            if left is not None:
                with contextlib.suppress(OSError):
                    left.abandon()


class Maintenance:
    """Maintenance and gc of the repository ``handle`` opens, reading through ``reader``."""

    def __init__(self, handle: Handle, reader: Reader) -> None:
        self._handle = handle
        self.path = handle.path
        self._reader = reader

    def reachable(self, missing: list[str] | None = None) -> set[str]:
        """The id of every object reachable from any ref.

        Raises :class:`IntegrityError` if an object reachable from gitmem's own refs is missing
        or unreadable, or one reachable from any ref is corrupt, so that a damaged store is
        never pruned. An object that only refs other than gitmem's reach and that is missing
        altogether has nothing to keep: it is left out and, when ``missing`` is given, a
        sentence naming it and the ref is appended there (else it raises too).
        """
        seen: set[bytes] = set()
        for _ in self._reachable_objects(self._roots(missing), seen, missing):
            pass
        return {oid.hex() for oid in seen}

    def _roots(self, missing: list[str] | None) -> list[tuple[str, str, bool]]:
        """Where :meth:`reachable` starts: (ref, object id, whether the ref is gitmem's own),
        gitmem's own refs first (the branch as the redo log has it). A ref that cannot be
        resolved raises, or is reported in ``missing`` when given."""
        git = self._handle.git
        roots: list[tuple[str, str, bool]] = []
        names = sorted(set(git.references) | {BRANCH, META_REF}, key=lambda n: n not in _OWN)
        for name in names:
            require_file(self.path / name, name)
            if name in _OWN:
                found = self._reader.ref(name)
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
        self, roots: list[tuple[str, str, bool]], seen: set[bytes], missing: list[str] | None
    ) -> Iterator[tuple[str, bytes, bytes]]:
        """``(id, type, payload)`` of every object reachable from ``roots`` and not in
        ``seen``, each read and hash-checked once, as :meth:`reachable` walks them; each id
        (20 bytes) is added to ``seen`` once the consumer has taken its object."""
        for name, root, own in roots:
            yield from self._walk(root, seen, None if own else missing, name)

    def _walk(
        self, root: str, seen: set[bytes], missing: list[str] | None, ref: str
    ) -> Iterator[tuple[str, bytes, bytes]]:
        # What is held besides ``seen`` is the ids of the walk's front: the entries of the trees
        # on the path being walked and a parent per commit on it.
        stack: list[str] = [root]
        while stack:
            oid = stack.pop()
            raw = bytes.fromhex(oid)
            if raw in seen:
                continue
            if missing is not None and not self._reader.has(oid):
                missing.append(f"the ref {ref} reaches object {oid}, which is missing")
                continue
            # Every object is read whole, blobs too: what is packed must be intact. gc packs
            # what is yielded here as it is, rather than reading it again.
            kind, data = self._reader.read_any(oid, ANY_KIND)
            yield oid, kind, data
            # Added once taken: gc's pack writer records it in this same set (one copy of
            # each id), and skips an object already there.
            seen.add(raw)
            if kind == b"commit":
                commit = parse_commit(data, oid)
                # Its tree before its parents (the stack pops the last pushed): gc packs what
                # this yields in this order, so a tree's newest version comes first and is
                # stored whole, its older ones as deltas of newer ones, as git's gc does.
                stack.extend(commit.parents)
                stack.append(commit.tree)
            elif kind == b"tree":
                stack.extend(e.oid for e in parse_tree(data, oid))
            elif kind == b"tag":
                stack.append(tag_target(data, oid))

    def foreign_ref_problems(self) -> list[str]:
        """What is missing or damaged behind refs other than gitmem's own, one sentence each.

        gitmem neither writes nor reads such refs, but garbage collection keeps what they
        reach; :meth:`gc` leaves out objects missing behind them and refuses corrupt ones.
        """
        missing: list[str] = []
        seen: set[bytes] = set()
        for name in sorted(self._handle.git.references):
            if name in (BRANCH, META_REF):
                continue
            try:
                require_file(self.path / name, name)
                target = str(self._handle.git.references[name].resolve().target)
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
        object is read once, by the walk, which streams it into the new pack. When no object
        of the old packs is pruned and the new pack is not smaller than what it would replace,
        it is dropped and the old packs stay: gc never grows a store it prunes nothing from.
        Readers need no lock: the new pack is complete and durable before anything is removed,
        and libgit2 (like git) rescans the packs when an object it looked for has moved.
        Memory: see design.md, "Garbage collection".
        """
        now = time.time() if now is None else now
        objects = self.path / "objects"
        pack_dir = objects / "pack"
        job = _MERGES.pop(str(self.path), None)
        if job is not None:
            job.abandon()  # gc packs everything: a merge under way would only copy it again
        report = GcReport(bytes_before=_tree_bytes(objects))
        for leftover in self.path.glob(_GC_TMP_PREFIX + "*"):
            shutil.rmtree(leftover, ignore_errors=True)  # from a gc that died; we hold the lock
        roots = self._roots(report.missing)
        old_packs = sorted(pack_dir.glob("pack-*.idx")) if pack_dir.is_dir() else []
        # Every reachable id, 20 bytes each, in one set the walk and the pack writer share.
        reachable: set[bytes] = set()
        try:
            # Each object is read (and hash-checked) once, by the walk, and packed as read. A
            # missing or corrupt one raises from the walk, which abandons the pack unpublished.
            with object_cache_limited():
                new_idx = write_pack(
                    self._reachable_objects(roots, reachable, report.missing),
                    pack_dir,
                    self.path,
                    packed=reachable,
                )
        except (OSError, pygit2.GitError) as exc:
            # A full disk, most likely: the old packs and loose objects are all still there.
            reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
            raise StorageError(
                f"gc could not write the new pack: {reason}; nothing was pruned"
            ) from None
        if new_idx is not None:
            if _count_listed(new_idx, reachable) != len(reachable):
                raise IntegrityError("the new pack lacks reachable objects; nothing was pruned")
            report.packed = len(reachable)
        # What the new pack replaces: each old pack, removed whole once its objects are all
        # reachable (now in the new pack) or it is older than the grace; an old pack that holds
        # young garbage keeps only that: its reachable objects are in the new pack, and
        # keeping the whole pack would store them twice (a large merged pack with one young
        # unreachable object in it would double the store).
        replaced: list[Path] = []
        young_in: dict[Path, set[str]] = {}
        pruned_packed = 0
        for idx in old_packs:
            if idx == new_idx or idx.with_suffix(".keep").exists():
                continue
            listed = garbage = 0
            for oid in _index_ids(idx):
                listed += 1
                garbage += oid not in reachable
            if garbage and now - idx.with_suffix(".pack").stat().st_mtime < grace:
                report.kept += garbage
                if garbage < listed:
                    young_in[idx] = {o.hex() for o in _index_ids(idx) if o not in reachable}
                continue
            pruned_packed += garbage
            replaced.append(idx)
        young_idx = self._repack_young_garbage(young_in, pack_dir) if young_in else None
        if young_idx is not None:
            replaced += [idx for idx in young_in if idx != young_idx]
        # The new packs are kept if they prune something from the old ones, or are smaller
        # than what they replace: the old packs and the space of the loose objects the new
        # one holds (the same pack as an old one, written again, replaces nothing of itself).
        publish = pruned_packed > 0 or (
            new_idx is not None
            and (
                new_idx in old_packs
                or _pack_bytes(new_idx) + (_pack_bytes(young_idx) if young_idx else 0)
                < sum(_pack_bytes(idx) for idx in replaced) + _loose_bytes(objects, reachable)
            )
        )
        if publish:
            # A multi-pack index may name packs removed below; readers fall back to the .idx.
            with contextlib.suppress(FileNotFoundError):
                (pack_dir / "multi-pack-index").unlink()
            report.pruned += pruned_packed
            report.removed_packs += len(replaced)
            for idx in replaced:
                _remove_pack(idx)
        else:
            # Not smaller and pruning nothing: the store stays as it was (its reachable loose
            # objects too); only loose garbage and leftovers go, below.
            report.packed = 0
            for written in (new_idx, young_idx):
                if written is not None and written not in old_packs:
                    _remove_pack(written)
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
                loose_id = _loose_id(fanout.name, loose.name)
                if loose_id is None:
                    continue
                if loose_id in reachable:
                    if not publish:
                        continue  # in no pack
                else:
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
        self._handle.let_go()
        report.bytes_after = _tree_bytes(objects)
        return report

    def _repack_young_garbage(self, young: dict[Path, set[str]], pack_dir: Path) -> Path | None:
        """Write the unreachable objects ``young`` lists (by the old pack holding them) into
        one pack dated as the newest of those packs; return its index, or None if an object
        cannot be read (then the packs are kept whole: nothing is lost, only space). The caller
        removes those packs. The date is what the grace counts from: the objects are pruned no
        sooner than their packs would have been, and no later than the grace after that (every
        pack here is younger than it). A pack of garbage alone is not rewritten again, so a
        later gc does not move that date."""
        wanted = sorted(set().union(*young.values()))
        try:
            idx = self._write_pack(wanted, pack_dir)
        except (GitMemError, OSError, pygit2.GitError, ValueError):
            return None
        if not _pack_index_oids(idx) >= set(wanted):
            raise IntegrityError("the pack of young garbage lacks objects; nothing was removed")
        dated = max(source.with_suffix(".pack").stat().st_mtime for source in young)
        for path in (idx.with_suffix(".pack"), idx):
            os.utime(path, (dated, dated))
        return idx

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
            loose = loose_objects(objects)
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
            self._handle.let_go()
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

        gitmem writes it (:func:`pack.write_pack`), each object read and hash-checked through
        the reader (:meth:`GitRepo.read_any`): libgit2's pack builder is slower at packing
        loose objects into packs of the same size (``benchmarks/bench_pack.py`` compares the
        two).
        """
        idx = write_pack(
            ((oid, *self._reader.read_any(oid, ANY_KIND)) for oid in objects), pack_dir, self.path
        )
        if idx is None:
            raise ValueError("no objects to pack")  # the callers never ask for an empty pack
        return idx


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


# What a pack writer killed mid-write leaves in objects/pack: libgit2's indexer writes a fetched
# pack as pack_git2_* and its index as pack-<id>.idx.lock, git's as tmp_pack_* and tmp_idx_*,
# before naming them.
_TEMPORARY_PACK_PREFIXES = ("pack_git2_", "tmp_pack_", "tmp_idx_")


def _stale_temporary(path: Path, now: float, grace: float) -> bool:
    """Remove ``path`` and return True if it is an object writer's temporary file older than
    ``grace`` seconds; a younger one may be a live writer's (gc's lock does not bind libgit2
    writers outside gitmem), so it stays, as does anything else."""
    if not path.name.startswith(TEMPORARY_OBJECT_PREFIXES):
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


_PACK_SUFFIXES = (".idx", ".pack", ".rev", ".bitmap", ".mtimes")


def _remove_pack(idx: Path) -> None:
    # The index goes first: a pack without one is invisible to new readers.
    for suffix in _PACK_SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            idx.with_suffix(suffix).unlink()


# Unreferenced objects younger than this survive a gc (git's default gc.pruneExpire).
DEFAULT_GC_GRACE = 14 * 24 * 3600.0


@dataclass
class GcReport:
    """What a garbage collection did: objects packed, pruned and kept, bytes before and after."""

    # Objects in the new pack; 0 when gc kept the old packs, its own being no smaller.
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


def _pack_index_oids(idx: Path) -> set[str]:
    """The object ids listed in a pack index (version 1 or 2)."""
    return {oid.hex() for oid in _index_ids(idx)}


def _index_ids(idx: Path) -> Iterator[bytes]:
    """The object ids (20 bytes each) a pack index (version 1 or 2) lists, in its order."""
    data = idx.read_bytes()
    if data[:4] == b"\xfftOc":
        (count,) = struct.unpack(">I", data[8 + 255 * 4 : 8 + 256 * 4])
        start = 8 + 256 * 4
        for at in range(start, start + 20 * count, 20):
            yield data[at : at + 20]
        return
    (count,) = struct.unpack(">I", data[255 * 4 : 256 * 4])
    start = 256 * 4
    for at in range(start + 4, start + 24 * count, 24):
        yield data[at : at + 20]


def _count_listed(idx: Path, ids: set[bytes]) -> int:
    """How many of ``ids`` the pack index ``idx`` lists (each once: its ids must be sorted)."""
    listed, last = 0, b""
    for oid in _index_ids(idx):
        if oid <= last:
            return -1  # unsorted or repeated: not an index to trust
        last = oid
        listed += oid in ids
    return listed


def _pack_bytes(idx: Path) -> int:
    """The bytes of the pack of ``idx``: its files, as :func:`_remove_pack` removes them."""
    total = 0
    for suffix in _PACK_SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            total += idx.with_suffix(suffix).stat().st_size
    return total


def _loose_id(fanout: str, name: str) -> bytes | None:
    """The id of the loose object file ``objects/<fanout>/<name>``; None for another file."""
    oid = fanout + name
    if len(oid) != 40 or any(c not in "0123456789abcdef" for c in oid):
        return None
    return bytes.fromhex(oid)


def _loose_bytes(objects: Path, ids: set[bytes]) -> int:
    """The space the loose object files of ``ids`` in ``objects`` take: their file-system
    blocks (a small object's file takes a block, which packing it saves)."""
    total = 0
    for fanout in objects.iterdir() if objects.is_dir() else []:
        if len(fanout.name) != 2 or not fanout.is_dir():
            continue
        for loose in fanout.iterdir():
            if _loose_id(fanout.name, loose.name) in ids:
                with contextlib.suppress(FileNotFoundError):
                    total += loose.stat().st_blocks * 512
    return total


# libgit2's cache of the objects read, while gc runs (pygit2.settings.cache_max_size; libgit2's
# default is 256 MiB): the walk reads each object once, so the cache would only hold memory.
GC_OBJECT_CACHE = 0


class _ObjectCacheLimit:
    """libgit2's object cache bound, which is process-wide, lowered to :data:`GC_OBJECT_CACHE`
    while any thread's gc runs and restored when the last one ends (of two at once, the first
    to end must not restore it under the other)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0
        forksafe.reset_in_child(self._after_fork_in_child)

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if not self._users:
                self._saved = pygit2.settings.cached_memory[1]
                pygit2.settings.cache_max_size(GC_OBJECT_CACHE)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if not self._users:
                    pygit2.settings.cache_max_size(self._saved)

    def _after_fork_in_child(self) -> None:
        # The gc that lowered it runs in a thread the child does not have.
        self._lock = threading.Lock()
        if self._users:
            pygit2.settings.cache_max_size(self._saved)
        self._users = 0


object_cache_limited = _ObjectCacheLimit()
"""``with object_cache_limited():`` libgit2's object cache bounded while the block runs."""


def _tree_bytes(root: Path) -> int:
    total = 0
    for path in root.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            if path.is_file():
                total += path.stat().st_size
    return total


# -- publishing when the process ends (design.md, "The redo log") ----------------------------
