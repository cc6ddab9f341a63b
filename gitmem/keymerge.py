"""Key slots and epochs across replicas: which metadata a pull keeps (``docs/design.md``,
"Pull", step 5, and "Key slots across replicas").

A pull adopts the incoming metadata only through this replica's own slot (so a removed holder
learns nothing new) and only when its epoch chain contains the one this replica already holds
(so nobody can swap the chain under it). Both sides changing the slots is merged when that is
safe (the same epochs: the union of the slots) and refused otherwise.
"""

from __future__ import annotations

from dataclasses import replace

from . import keyslots
from .errors import KeysDiverged
from .format import MAX_SLOTS, StoreMeta
from .keyslots import Keyring

_DIVERGED = (
    "this replica and the remote {url} both changed the store's keys since they last synced "
    "({why}); nothing was changed locally. Keep one side's keys: on the other replica, "
    "clone the store again and re-apply its key changes there"
)


def reading_keyring(incoming: StoreMeta, keyring: Keyring, where: str, url: str) -> Keyring:
    """The keyring that reads both this replica's history and the incoming one.

    ``incoming`` is opened with this replica's own slot (:class:`~gitmem.errors.WrongKey` when
    it was removed there); its epoch chain and ours must be one the prefix of the other.
    """
    theirs = keyslots.reopen(incoming, keyring, where)
    short, long = sorted((keyring, theirs), key=lambda ring: len(ring.epochs))
    if long.epochs[: len(short.epochs)] != short.epochs:
        raise KeysDiverged(_DIVERGED.format(url=url, why="both rotated the keys"))
    return long


def merge_meta(base: StoreMeta | None, ours: StoreMeta, theirs: StoreMeta, url: str) -> StoreMeta:
    """The metadata after integrating ``theirs`` into ``ours``; ``base`` is the merge base's.

    Only one side changed: that side's. Both changed within the same epochs: the union of the
    slots (ordered by slot id, so either replica gets the same bytes), provided every slot on
    both sides is identical and no slot of ``base`` is missing. Anything else: KeysDiverged.
    """
    if theirs in (ours, base):
        return ours
    if ours == base:
        return theirs
    if ours.links != theirs.links:
        raise KeysDiverged(_DIVERGED.format(url=url, why="one rotated the keys"))
    mine = {slot.slot: slot for slot in ours.slots}
    other = {slot.slot: slot for slot in theirs.slots}
    if any(mine[sid] != other[sid] for sid in mine.keys() & other.keys()):
        raise KeysDiverged(_DIVERGED.format(url=url, why="both changed the same key slot"))
    if base is not None and any(
        slot.slot not in mine or slot.slot not in other for slot in base.slots
    ):
        raise KeysDiverged(_DIVERGED.format(url=url, why="a key slot was removed"))
    union = {**mine, **other}
    if len(union) > MAX_SLOTS:
        raise KeysDiverged(_DIVERGED.format(url=url, why=f"more than {MAX_SLOTS} key slots"))
    return replace(
        ours,
        format=max(ours.format, theirs.format),
        redacted=ours.redacted or theirs.redacted,
        slots=tuple(union[sid] for sid in sorted(union)),
    )
