"""Where a replica's metadata is: the head's root tree, and ``refs/gitmem/meta``.

Format 2 puts the metadata blob in every commit's root tree, so a copy of the branch made by
plain git (``git clone --bare``, ``git push``, a forge's fork) is a complete store. Format 1
stores, and stores with no commit yet, have it only in ``refs/gitmem/meta``. The head's copy is
the one its record authenticates; ``MemoryStore.bound_meta`` checks the ref against it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import IntegrityError
from .format import MAX_META_BYTES, META_ENTRY, StoreMeta
from .git.objects import BLOB_MODE
from .git.refs import BRANCH, META_REF
from .git.repo import GitRepo


@dataclass(frozen=True)
class FoundMeta:
    """A store's metadata, the blob it came from, and whether the branch carried it."""

    meta: StoreMeta
    blob: str
    in_tree: bool


def meta_in_tree(repo: GitRepo, tree: str) -> str | None:
    """The metadata blob id in root tree ``tree``, or None for a format 1 tree."""
    for entry in repo.read_tree(tree):
        if entry.name == META_ENTRY:
            if entry.mode != BLOB_MODE:
                raise IntegrityError(f"the root tree {tree} holds a gitmem entry that is no blob")
            return entry.oid
    return None


def find_meta(repo: GitRepo) -> FoundMeta | None:
    """The metadata of the store in ``repo``, or None when neither place holds any.

    ``refs/gitmem/meta`` first (an empty store has nothing else); the head's root tree only when
    the ref is absent, as in a copy made by plain git. Nothing here is authenticated yet: it
    only names the store and the slots to unlock; the keys so found must then authenticate the
    head's record, which binds the root tree and so its blob (a branch of another store fails
    there), and the metadata used or written is the head's (``MemoryStore.bound_meta``).
    """
    meta_blob = repo.ref(META_REF)
    if meta_blob is not None:
        # The branch is not even read: a damaged branch is reported where it is used.
        return meta_at(repo, None, meta_blob)
    return meta_at(repo, repo.ref(BRANCH), None)


def meta_at(repo: GitRepo, head: str | None, meta_blob: str | None) -> FoundMeta | None:
    """The metadata given a head commit id and a metadata blob id (either may be None)."""
    if meta_blob is not None:
        return FoundMeta(
            StoreMeta.from_bytes(repo.read_blob(meta_blob, MAX_META_BYTES)), meta_blob, False
        )
    if head is None:
        return None
    blob = meta_in_tree(repo, repo.read_commit(head).tree)
    if blob is None:
        return None
    return FoundMeta(StoreMeta.from_bytes(repo.read_blob(blob, MAX_META_BYTES)), blob, True)


def carried_meta(repo: GitRepo, head: str | None, meta_blob: str | None) -> FoundMeta | None:
    """The metadata a fetched store is known by: the one ``head``'s root tree carries (its
    record authenticates it), else, for a format 1 head or no head at all, ``meta_blob``.

    A remote's ``refs/gitmem/meta`` is not authenticated and an honest host's is often stale (a
    push sends it only when the host lacks it), so it counts only where nothing else is.
    """
    if head is not None:
        blob = meta_in_tree(repo, repo.read_commit(head).tree)
        if blob is not None:
            return FoundMeta(StoreMeta.from_bytes(repo.read_blob(blob, MAX_META_BYTES)), blob, True)
    return None if meta_blob is None else meta_at(repo, None, meta_blob)
