"""Redaction: a text replaced by ``[redacted]`` in every version of every file, past and current,
on every replica (``docs/design.md``, "Redaction").

The history is rewritten from the first operation whose tree holds the text: each file version
holding it is written again with the text replaced (chunked as any write, so its other chunks
stay the same blobs), every tree above it again, and every commit from there on again, its
record the same but for the commit ids it names and its store size; records are sealed with
nonces derived from what they seal, so two replicas redacting the same history with the same
text write the same commits. One ``redact`` operation then says which head was rewritten,
how many versions and operations, and which paths; never the text. Its record is sealed under
the store's key like every record, so only a key holder can make one.

A replica adopts a rewritten remote on its next pull (:func:`adopt`) only when the remote's
head carries such an operation and its history holds, record for record, every operation this
client had seen of that remote; anything else is refused as a rollback, as before.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from . import format as fmt
from ._version import __version__
from .errors import ConflictError, IntegrityError, NotFound, UsageError
from .format import Record
from .git.objects import TREE_MODE, TreeEntry
from .git.refs import BRANCH, META_REF
from .highwater import Mark
from .operation import Operation
from .paths import MemoryPath
from .redaction import COMMAND, MARKER, Holding, Redaction
from .replica import meta_at
from .snapshot import Snapshot, changed_file_nodes
from .store import MemoryStore

# An operation as it reads after any rewrite: everything its record says but the commit ids and
# store size a rewrite changes (and the nonce).
Identity = tuple[int, int, str, str, tuple[str, ...]]
# Trees a redaction keeps parsed while it walks the history (a few MB).
_TREES_KEPT = 512


def identity(op: Operation) -> Identity:
    """What a redaction keeps of an operation's record, by which a replica finds the rewritten
    copy of an operation it saw."""
    r = op.record
    return (r.seq, r.time_ns, r.session, r.command, r.paths)


def check_text(text: str) -> bytes:
    """``text`` as the bytes searched for; :class:`UsageError` when it cannot be redacted."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    if text == "":
        raise UsageError("the text to redact is empty; nothing was changed")
    if text in MARKER:
        raise UsageError(
            f"the text to redact is part of the marker {MARKER} that replaces it; give a "
            "longer text; nothing was changed"
        )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("the text to redact is not valid Unicode; nothing was changed") from None


def history(store: MemoryStore, start: str) -> list[Operation]:
    """Every operation reachable from commit ``start``, each authenticated, parents first (by
    sequence number: a commit's is above all its ancestors')."""
    seen: dict[str, Operation] = {}
    stack = [start]
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        op = store.read_operation(oid)
        seen[oid] = op
        stack.extend(p for p in op.parents if p not in seen)
    return sorted(seen.values(), key=lambda op: op.seq)


class TreeMap:
    """Writes trees again with some file trees replaced (``file_map``: a file tree's id to its
    replacement's and the change in size), and every tree above one again; entry names, modes
    and the root's metadata entry stay as they are, so a rewritten tree has the shape of the
    one it replaces. Each tree is mapped once, by id (a tree's id names its content)."""

    def __init__(
        self,
        store: MemoryStore,
        file_map: Callable[[str], tuple[str, int]],
        read_tree: Callable[[str], list[TreeEntry]] | None = None,
    ) -> None:
        self.repo = store.repo
        self.read_tree = store.repo.read_tree if read_tree is None else read_tree
        self.file_map = file_map
        self.trees: dict[str, tuple[str, int]] = {}

    def tree(self, oid: str) -> tuple[str, int]:
        """The replacement of tree ``oid`` and the change in the size of the files it holds."""
        if oid in self.trees:
            return self.trees[oid]
        # An explicit stack: a tree's depth is the data's (design.md, "Writing", step 4).
        listed: dict[str, list[TreeEntry]] = {}
        stack = [oid]
        while stack:
            current = stack[-1]
            if current in self.trees:
                stack.pop()
                continue
            entries = listed.get(current)
            if entries is None:
                entries = listed[current] = self.read_tree(current)
                below = [e.oid for e in entries if _holds_entries(e) and e.oid not in self.trees]
                if below:
                    stack.extend(below)
                    continue
            stack.pop()
            out, delta = [], 0
            for entry in entries:
                new = entry.oid
                if entry.mode == TREE_MODE and entry.name.startswith(fmt.KIND_FILE):
                    new, change = self.file_map(entry.oid)
                    delta += change
                elif _holds_entries(entry):
                    new, change = self.trees[entry.oid]
                    delta += change
                out.append(TreeEntry(entry.name, new, entry.mode))
            changed = any(a.oid != b.oid for a, b in zip(entries, out, strict=True))
            self.trees[current] = (self.repo.write_tree(out) if changed else current, delta)
            del listed[current]
        return self.trees[oid]


def _holds_entries(entry: TreeEntry) -> bool:
    """True for a directory's or a bucket's entry: a tree of memory entries."""
    return entry.mode == TREE_MODE and (
        entry.name.startswith(fmt.KIND_DIR) or (len(entry.name) == 3 and entry.name[0] == "b")
    )


def rewrite_commits(
    store: MemoryStore,
    ops: Iterable[Operation],
    trees: TreeMap,
    commits: dict[str, str],
    *,
    reseal: bool = False,
) -> list[Operation]:
    """Commit ``ops`` (parents first) again with their trees mapped and their parents replaced
    as ``commits`` says, which gains each one's new id; an operation whose tree and parents
    stay the same keeps its commit, unless ``reseal``. Returns the operations committed again,
    as rewritten."""
    written = []
    for op in ops:
        parents = tuple(commits.get(p, p) for p in op.parents)
        tree, delta = trees.tree(op.tree)
        if not reseal and parents == op.parents and tree == op.tree:
            commits[op.commit] = op.commit
            continue
        size = op.record.store_bytes
        record = replace(
            op.record,
            detail=_mapped_detail(op.record.detail, commits),
            store_bytes=None if size is None else size + delta,
        )
        ad = fmt.record_ad(store.keys.store_id, tree, parents)
        sealed = store.keys.seal_record_derived(fmt.seal_plaintext(record), ad)
        commit = store.repo.write_commit(
            tree, list(parents), fmt.encode_message(sealed), time=record.seq
        )
        commits[op.commit] = commit
        written.append(Operation(commit, parents, tree, record, store.keys.epoch))
    return written


def _mapped_detail(detail: Mapping[str, Any], commits: Mapping[str, str]) -> dict[str, Any]:
    """A record's detail with the commit ids it names (a restore's ``from``, a merge's
    ``merged`` and ``base``) replaced by their rewritten ids."""
    out = dict(detail)
    for name in ("from", "merged", "base"):
        value = out.get(name)
        if isinstance(value, str) and value in commits:
            out[name] = commits[value]
    return out


class _Finder:
    """Which file versions hold the text, and what each becomes."""

    def __init__(self, store: MemoryStore, text: str) -> None:
        self.store = store
        self.text = text
        self.needle = check_text(text)
        self.versions: dict[str, tuple[str, int]] = {}
        # The chunk and base blobs of the versions holding the text (set after the survey): a
        # version that keeps one as a base (format 6) is written again too, whole, so that no
        # rewritten tree reaches it.
        self.tainted: frozenset[str] = frozenset()

    def holds(self, oid: str) -> bool:
        return self.needle in self.store.codec.read_file(oid)

    def redacted(self, oid: str) -> tuple[str, int]:
        """File tree ``oid`` with the text replaced, and the change in size (itself, 0, when it
        does not hold the text)."""
        known = self.versions.get(oid)
        if known is not None:
            return known
        data = self.store.codec.read_file(oid)
        if self.needle not in data:
            bases = self.store.repo.read_tree(oid) if self.tainted else []
            if not any(_is_base(e) and e.oid in self.tainted for e in bases):
                self.versions[oid] = (oid, 0)
                return oid, 0
            self.versions[oid] = (self.store.codec.write_file(data, deltas=False), 0)
            return self.versions[oid]
        try:
            text = data.decode("utf-8").replace(self.text, MARKER)
        except UnicodeDecodeError:
            raise IntegrityError(f"file tree {oid} is not UTF-8 text") from None
        if self.text in text:
            raise UsageError(
                f"replacing the text with {MARKER} leaves it in a file (it overlaps the marker); "
                "give a longer text; nothing was changed"
            )
        new = text.encode("utf-8")
        result = (self.store.codec.write_file(new, deltas=False), len(new) - len(data))
        self.versions[oid] = result
        return result


def _survey(
    store: MemoryStore,
    ops: list[Operation],
    finder: _Finder,
    read_tree: Callable[[str], list[TreeEntry]],
) -> tuple[list[Holding], set[str]]:
    """The operations that wrote a version holding the text, with its path, oldest first, and
    the distinct versions (file tree ids) holding it.

    Refused (UsageError) when the text is in a record (a path, a session label, a detail): a
    redaction replaces file contents, and a record it left holding the text would keep it."""
    by_commit = {op.commit: op for op in ops}
    found, versions = [], set()
    for op in ops:
        _refuse_in_record(op, finder.text)
        parent = by_commit[op.parents[0]] if op.parents else None
        # Names are decrypted only where a version holding the text was written: a diff of
        # the raw trees finds the new versions first.
        written = _new_versions(read_tree, None if parent is None else parent.tree, op.tree)
        if not any(finder.holds(oid) for oid in written):
            continue
        before = Snapshot(store.codec, None if parent is None else parent.tree)
        after = Snapshot(store.codec, op.tree)
        others = [Snapshot(store.codec, by_commit[p].tree) for p in op.parents[1:]]
        for path, _, node in changed_file_nodes(before, after):
            if node is None or not finder.holds(node.oid):
                continue
            versions.add(node.oid)
            if any(_version(other, path) == node.oid for other in others):
                continue  # a merge taking a version the other side wrote: listed there
            found.append(Holding(op, str(path)))
    return found, versions


def _new_versions(
    read_tree: Callable[[str], list[TreeEntry]], old: str | None, new: str
) -> list[str]:
    """The file trees of tree ``new`` that are not at the same place in tree ``old``, found
    on the raw trees (no name decrypted); the sealed names of an entry are the same wherever
    its path is the same, so equal names are the same path."""
    found = []
    stack: list[tuple[str | None, str]] = [(old, new)]
    while stack:
        a, b = stack.pop()
        if a == b:
            continue
        before = {} if a is None else {e.name: e for e in read_tree(a)}
        for entry in read_tree(b):
            was = before.get(entry.name)
            if was is not None and was.oid == entry.oid:
                continue
            if entry.mode == TREE_MODE and entry.name.startswith(fmt.KIND_FILE):
                found.append(entry.oid)
            elif _holds_entries(entry):
                below = was.oid if was is not None and _holds_entries(was) else None
                stack.append((below, entry.oid))
    return found


def _version(snapshot: Snapshot, path: MemoryPath) -> str | None:
    node = snapshot.lookup(path)
    return None if node is None or node.kind != fmt.KIND_FILE else node.oid


def _refuse_in_record(op: Operation, text: str) -> None:
    record = op.record
    fields = [record.session, *record.paths, json.dumps(record.detail, ensure_ascii=False)]
    if any(text in field for field in fields):
        raise UsageError(
            f"the text is in the record of operation #{op.seq} ({op.commit[:12]}): in a path, "
            "the session label or the detail; gitmem redact replaces text in file contents "
            "only; nothing was changed"
        )


def redact(store: MemoryStore, text: str, dry_run: bool = False) -> Redaction:
    """Replace ``text`` by ``[redacted]`` in every version of every file (see the module's
    docstring); with ``dry_run``, only say where it is. :class:`NotFound` when no version
    holds it, :class:`UsageError` when it cannot be redacted; nothing is written then."""
    finder = _Finder(store, text)
    if text in store.session:
        raise UsageError(
            "the text is in this session's label, which the redact operation's record would "
            "carry; open the store with another session label; nothing was changed"
        )
    repo = store.repo
    with repo.writer(), repo.write_lock(store.lock_timeout):
        meta_ref = repo.ref(META_REF)
        head = store.head_operation()
        if head is None:
            raise NotFound("the store is empty: no version holds the text; nothing was changed")
        ops = history(store, head.commit)
        # Each operation's root tree is read by the survey (as a parent, then as a child) and
        # by the rewrite; consecutive operations share them.
        read_tree = functools.lru_cache(maxsize=_TREES_KEPT)(store.repo.read_tree)
        holding, held = _survey(store, ops, finder, read_tree)
        if not holding:
            raise NotFound("no version of any file holds the text; nothing was changed")
        finder.tainted = frozenset(_chunks(store, dict.fromkeys(held)))
        # After a key rotation the whole history is sealed again, in the newest epoch: a merge
        # rewritten in it whose other parent stayed in an older epoch would break the epoch
        # order (design.md, "Epoch order").
        first = 1 if store.keys.epoch > 0 else holding[0].operation.seq
        rewritten = [op for op in ops if op.seq >= first]
        paths = tuple(sorted({h.path for h in holding}))
        versions = len(held)
        if dry_run:
            return Redaction(tuple(holding), versions, len(rewritten), paths)
        # Sealed in the newest epoch, and stamped with the metadata the head carries.
        store.use_head_meta(head)
        commits: dict[str, str] = {}
        trees = TreeMap(store, finder.redacted, read_tree)
        rewrite_commits(store, rewritten, trees, commits, reseal=store.keys.epoch > 0)
        new_head = store.read_operation(commits[head.commit])
        op = _commit_redaction(store, head, new_head, paths, versions, len(rewritten))
        repo.update_ref(BRANCH, op.commit, head.commit)
        store.publish_meta(meta_ref)
        forget_old_history(store, op)
    return Redaction(tuple(holding), versions, len(rewritten), paths, op)


def _commit_redaction(
    store: MemoryStore,
    old_head: Operation,
    new_head: Operation,
    paths: tuple[str, ...],
    versions: int,
    operations: int,
) -> Operation:
    """Write the ``redact`` operation on ``new_head`` (the rewritten ``old_head``), its root
    tree stamped with the store's metadata at format ``COMPACT_FORMAT_VERSION``, marked
    redacted."""
    codec = store.codec
    meta = store.bound_meta(old_head).meta
    if meta.format < fmt.COMPACT_FORMAT_VERSION or not meta.redacted or codec.meta_blob is None:
        # Its records are compressed (format 6), where the metadata says it was redacted.
        upgraded = replace(meta, format=max(meta.format, fmt.COMPACT_FORMAT_VERSION), redacted=True)
        codec.meta_blob = store.repo.write_blob(upgraded.to_bytes())
    tree = codec.stamp_root(new_head.tree)
    record = Record(
        seq=new_head.seq + 1,
        time_ns=time.time_ns(),
        session=store.session,
        command=COMMAND,
        paths=paths,
        version=__version__,
        detail={
            "rewrote": old_head.commit,
            "rewrote_seq": old_head.seq,
            "versions": versions,
            "operations": operations,
        },
        store_bytes=new_head.record.store_bytes,
    )
    parents = (new_head.commit,)
    ad = fmt.record_ad(store.keys.store_id, tree, parents)
    message = fmt.encode_message(store.keys.seal_record(fmt.seal_plaintext(record), ad))
    commit = store.repo.write_commit(tree, list(parents), message, time=record.seq)
    return Operation(commit, parents, tree, record, store.keys.epoch)


def forget_old_history(store: MemoryStore, head: Operation) -> None:
    """Under the writer lock, after the branch moved to ``head`` (a rewritten history): the
    redo log keeps no stale record of the old one, the next ``gitmem gc`` prunes the old
    objects at once, and this client's mark of the replica moves to the new history."""
    store.repo.scrub_log()
    store.repo.prune_next_gc()
    # Nothing read of the old history stays in memory either (the codec keeps files it read).
    store.fresh_codec()
    if store.high_water is not None:
        store.high_water.reset(Mark(head.commit, head.seq))
    store.head_operation()


def history_above(store: MemoryStore, start: Operation, seq: int) -> list[Operation]:
    """The operations reachable from ``start`` whose sequence number is ``seq`` or more."""
    seen = {start.commit: start}
    stack = [start]
    while stack:
        op = stack.pop()
        for parent in op.parents:
            if parent not in seen:
                found = store.read_operation(parent)
                seen[parent] = found
                if found.seq > seq:
                    stack.append(found)
    return sorted((op for op in seen.values() if op.seq >= seq), key=lambda op: op.seq)


def redacted(store: MemoryStore, head: Operation | None) -> bool:
    """True when ``head``'s history may hold a redaction (its metadata says so; checked before
    walking any history for one)."""
    return head is not None and store.bound_meta(head).meta.redacted


def supersedes(store: MemoryStore, head: Operation | None, theirs: Operation) -> bool:
    """True when ``theirs`` is not in ``head``'s history but a redaction rewrote it: ``head``'s
    history (a redacted one) holds another commit with its identity, a copy of it and, by
    construction, of its history. A pull then has nothing to take (merging it would bring the
    text back), and a push may replace it."""
    if head is None or head.seq <= theirs.seq or not redacted(store, head):
        return False
    ops = history_above(store, head, theirs.seq)
    return any(op.commit != theirs.commit and identity(op) == identity(theirs) for op in ops)


def adopt(
    store: MemoryStore, seen: Mark, theirs: Operation, url: str, accept: Callable[[], None]
) -> Operation | None:
    """A pull's answer to a remote head ``theirs`` that does not follow ``seen``, this client's
    mark of the remote: None (refuse it, as a rollback) unless ``theirs``'s history holds a
    redaction and a copy of the operation this client last saw there (and so of its history).
    Then the newest ``redact`` operation there is returned, the fetched objects are kept
    (``accept``), and this replica's history is moved onto
    the rewritten one: each of its operations the remote holds rewritten becomes that
    rewritten commit, and its own (not pushed) are committed again on top with the same file
    versions replaced; the pull then merges as usual. :class:`ConflictError`, nothing
    changed, when its own operations wrote versions of files the redaction rewrote (they may
    hold the text: redact here too)."""
    if theirs.seq <= seen.seq:
        return None
    _refuse_retired(store, theirs, url)
    try:
        seen_op = store.read_operation(seen.commit)
    except IntegrityError:
        return None  # this client no longer holds what it saw there: nothing to compare
    remote = history(store, theirs.commit)
    index = {identity(op): op for op in remote}
    redaction = _newest_redaction(remote)
    if identity(seen_op) not in index or redaction is None:
        return None
    accept()
    repo = store.repo
    with repo.writer(), repo.write_lock(store.lock_timeout):
        head = store.head_operation()
        if head is not None:
            _move_onto(store, head, remote, index, url)
    return redaction


def _newest_redaction(ops: list[Operation]) -> Operation | None:
    """The ``redact`` operation of ``ops`` with the highest sequence number, if any."""
    return max((op for op in ops if op.command == COMMAND), key=lambda op: op.seq, default=None)


def _refuse_retired(store: MemoryStore, theirs: Operation, url: str) -> None:
    """Only a current holder vouches for a rewrite: a removed one still holds the old keys."""
    if theirs.epoch < store.keys.epoch:
        raise IntegrityError(
            f"the remote {url} was rewritten (force-pushed) by a history sealed in key epoch "
            f"{theirs.epoch}, older than this replica's newest ({store.keys.epoch}): written "
            "with keys a rotation retired, it cannot stand for a redaction; nothing was changed "
            "locally"
        )


def _move_onto(
    store: MemoryStore,
    head: Operation,
    remote: list[Operation],
    index: Mapping[Identity, Operation],
    url: str,
) -> None:
    """Under the writer lock: rewrite this replica's history (from ``head``) onto the remote's
    rewritten one (``remote``, indexed by identity); see :func:`adopt`."""

    def refuse(op: Operation, path: MemoryPath) -> ConflictError:
        return ConflictError(
            f"the remote {url} redacted a text from its history, and operation #{op.seq} of "
            f"this replica, not pushed yet, wrote {path}, a file the redaction rewrote: it may "
            "hold the text. Run `gitmem redact` here with the same text, then pull again; "
            "nothing was changed"
        )

    local = history(store, head.commit)
    new_head = _rebase(store, local, head, remote, index, url, refuse)
    if new_head is None:
        return
    store.repo.update_ref(BRANCH, new_head.commit, head.commit)
    forget_old_history(store, new_head)


def onto_redaction(
    store: MemoryStore, theirs: Operation, url: str, accept: Callable[[], None]
) -> tuple[Operation, Operation | None]:
    """What a pull integrates of the remote's head ``theirs``: itself, or, when it was written
    on the history a redaction of this replica rewrote, its copy on the rewritten history
    (:func:`rebase_incoming`). And when ``theirs`` carries a redaction this replica has not
    adopted (its pull had no mark of the remote to find it by: rollback checks off, or a
    remote never pulled from), this replica's history is moved onto it first, as
    :func:`adopt` does; that redaction is returned beside it (else None). Only a history that
    diverged from ``theirs`` is looked at."""
    with store.repo.writer(), store.repo.write_lock(store.lock_timeout):
        ours = store.head_operation()
        if (
            ours is None
            or store.contains(ours, theirs.commit, theirs.seq)
            or store.contains(theirs, ours.commit, ours.seq)
        ):
            return theirs, None
        if _built_on_a_redaction(store, theirs):
            if store.high_water is None or not redacted(store, ours):
                return theirs, _adopt_unmarked(store, ours, theirs, url, accept)
            return theirs, None
        if not redacted(store, ours):
            return theirs, None
        copy = rebase_incoming(store, ours, theirs, url, accept)
        if copy is None:
            return theirs, None
        # Published now: the pull's merge, which names it, is written under another lock.
        store.repo.checkpoint()
        return copy, None


def _adopt_unmarked(
    store: MemoryStore, ours: Operation, theirs: Operation, url: str, accept: Callable[[], None]
) -> Operation | None:
    """Under the writer lock: move this replica's history onto ``theirs``'s when that holds a
    redaction and copies of operations of this replica's (see :func:`onto_redaction`); the
    newest redaction there, or None when it holds none."""
    remote = history(store, theirs.commit)
    redaction = _newest_redaction(remote)
    if redaction is None:
        return None
    _refuse_retired(store, theirs, url)
    index = {identity(op): op for op in remote}
    accept()
    _move_onto(store, ours, remote, index, url)
    return redaction


def _built_on_a_redaction(store: MemoryStore, op: Operation) -> bool:
    """True when ``op`` carries the metadata of a redacted history: its writer knew of
    redactions and wrote on a rewritten history (a pull adopts one before it merges), so
    nothing of it is to be copied (two redactions that rewrote differently are refused when
    adopted)."""
    found = meta_at(store.repo, op.commit, None)
    return found is not None and found.meta.redacted


def rebase_incoming(
    store: MemoryStore, ours: Operation, theirs: Operation, url: str, accept: Callable[[], None]
) -> Operation | None:
    """Under the writer lock, for a pull into a replica whose redaction is not on the remote
    yet: when ``theirs`` (fetched, not in ``ours``'s history) was written on the history the
    redaction rewrote (by a replica that had not seen it), its operations are committed again
    onto the rewritten one, as :func:`adopt` does for a replica's own, and the copy of
    ``theirs`` is returned for the pull to merge (merging ``theirs`` itself would bring the old
    versions back). None when ``theirs`` is not built on a rewritten history.
    :class:`ConflictError`, nothing changed, when one of its operations wrote a version of a
    file the redaction rewrote."""
    if not redacted(store, ours):
        return None
    incoming = history(store, theirs.commit)
    low = min(op.seq for op in incoming)
    mine = history_above(store, ours, low)
    index = {identity(op): op for op in mine}
    in_ours = {op.commit for op in mine}
    if not any(op.commit not in in_ours and identity(op) in index for op in incoming):
        return None

    def refuse(op: Operation, path: MemoryPath) -> ConflictError:
        return ConflictError(
            f"the remote {url} has operation #{op.seq} ({op.session}), written on the history "
            f"a redaction here rewrote, which wrote {path}, a file the redaction rewrote: it "
            "may hold the text. Run `gitmem redact` with the same text on the replica that "
            "wrote it, and sync it; nothing was changed"
        )

    accept()
    copy = _rebase(store, incoming, theirs, mine, index, url, refuse)
    # What the fetch brought of the old history is referenced by nothing once copied.
    store.repo.prune_next_gc()
    return copy


def _rebase(
    store: MemoryStore,
    ops: list[Operation],
    head: Operation,
    onto: list[Operation],
    index: Mapping[Identity, Operation],
    url: str,
    refuse: Callable[[Operation, MemoryPath], ConflictError],
) -> Operation | None:
    """The history ``ops`` (parents first, up to ``head``) rewritten onto ``onto``, a rewritten
    copy of part of it (``index``: its operations by identity): each operation ``onto`` holds
    a copy of becomes that copy, the others are committed again on top with the file versions
    the copies replaced replaced likewise. Returns the new ``head``; None when ``onto`` holds
    a copy of none of them. ``refuse`` says why an operation that wrote a version derived from
    a replaced one (it may hold the text) stops everything, before anything is written."""
    in_onto = {op.commit for op in onto}
    by_commit = {op.commit: op for op in ops}
    commits: dict[str, str] = {}
    files: dict[str, str] = {}
    own: list[Operation] = []
    for op in ops:
        if op.commit in in_onto:
            continue
        counterpart = index.get(identity(op))
        if counterpart is None:
            own.append(op)
            continue
        if tuple(commits.get(p, p) for p in op.parents) != counterpart.parents:
            raise _diverged(url, f"operation #{op.seq} has other parents there")
        commits[op.commit] = counterpart.commit
        _pair_files(store, op.tree, counterpart.tree, files, url)
    if not commits:
        return None
    changed = {old: new for old, new in files.items() if old != new}
    if changed and any(op.command == COMMAND for op in own):
        raise _diverged(
            url,
            "a redaction on one side is not on the other, and the two rewrote versions differently",
        )
    removed = _chunks(store, changed) - _chunks(store, {v: v for v in changed.values()})
    for op in own:
        parents = [Snapshot(store.codec, by_commit[p].tree) for p in op.parents]
        before = parents[0] if parents else Snapshot(store.codec, None)
        for path, _, node in changed_file_nodes(before, Snapshot(store.codec, op.tree)):
            if node is None or node.oid in files:
                continue
            derived = any(_version(p, path) in changed for p in parents)
            if derived or _chunks(store, {node.oid: node.oid}) & removed:
                raise refuse(op, path)

    def file_map(oid: str) -> tuple[str, int]:
        new = changed.get(oid)
        if new is None:
            return oid, 0
        return new, store.codec.file_size(new) - store.codec.file_size(oid)

    rewrite_commits(store, own, TreeMap(store, file_map), commits)
    return store.read_operation(commits[head.commit])


def _pair_files(store: MemoryStore, old: str, new: str, out: dict[str, str], url: str) -> None:
    """Add to ``out`` each file tree of tree ``old`` and the one at its place in ``new``, a
    rewritten copy of it: same entries, only file trees (and the trees above them) replaced."""
    stack = [(old, new)]
    while stack:
        a, b = stack.pop()
        if a == b:
            continue
        left, right = store.repo.read_tree(a), store.repo.read_tree(b)
        if [(e.name, e.mode) for e in left] != [(e.name, e.mode) for e in right]:
            raise _diverged(url, "a rewritten tree has other entries")
        for x, y in zip(left, right, strict=True):
            if x.oid == y.oid:
                continue
            if x.mode == TREE_MODE and x.name.startswith(fmt.KIND_FILE):
                if out.setdefault(x.oid, y.oid) != y.oid:
                    raise _diverged(url, "one file version was rewritten in two ways")
            elif _holds_entries(x):
                stack.append((x.oid, y.oid))
            else:
                raise _diverged(url, "a rewritten tree changed more than files")


def _chunks(store: MemoryStore, versions: Mapping[str, object]) -> set[str]:
    """The chunk and base blobs of the file trees ``versions`` names (its keys)."""
    return {
        e.oid
        for oid in versions
        for e in store.repo.read_tree(oid)
        if e.name.startswith(fmt.CHUNK_ENTRY_PREFIX) or _is_base(e)
    }


def _is_base(entry: TreeEntry) -> bool:
    """Whether a file tree's ``entry`` is a base chunk (format 6)."""
    return entry.name.startswith(fmt.BASE_ENTRY_PREFIX)


def _diverged(url: str, why: str) -> ConflictError:
    return ConflictError(
        f"the remote {url} rewrote its history for a redaction, but not as a rewrite of this "
        f"replica's ({why}); nothing was changed. Clone the remote again to continue from it"
    )


__all__ = [
    "Identity",
    "TreeMap",
    "adopt",
    "history",
    "identity",
    "onto_redaction",
    "rebase_incoming",
    "redact",
    "redacted",
    "supersedes",
]
