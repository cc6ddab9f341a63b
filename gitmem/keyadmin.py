"""Managing an open store's key slots: list, add, remove, change a passphrase, rotate.

Each change is one metadata write through the store's :meth:`~KeyedStore.change_meta` (under
the writer lock, committed as a ``keys`` operation); the slots' cryptography is
:mod:`gitmem.keyslots`'s. ``docs/design.md`` ("Key slots") specifies the bytes.
:class:`gitmem.MemoryStore`'s methods of the same names call these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from . import keyslots
from .crypto import KdfParams, decode_key
from .format import StoreMeta
from .keyslots import Keyring
from .operation import Operation
from .replica import FoundMeta
from .strength import check_new_passphrase

# A change of the metadata: given it and the keyring, the new metadata and the keyring to use.
MetaChange = Callable[[StoreMeta, Keyring], tuple[StoreMeta, Keyring]]


class KeyedStore(Protocol):
    """What key-slot management needs of a store (:class:`gitmem.MemoryStore` is one)."""

    def head_operation(self) -> Operation | None:
        """The authenticated head (None: an empty store)."""
        ...

    def bound_meta(self, head: Operation | None) -> FoundMeta:
        """The metadata this store may use and write, as ``head`` binds it."""
        ...

    def keyring_for(self, meta: StoreMeta) -> Keyring:
        """This store's keyring, brought up to date with ``meta``."""
        ...

    def change_meta(self, action: str, change: MetaChange, *, rotate: bool = False) -> int:
        """Apply ``change`` to the metadata under the writer lock and commit it; returns the
        newest epoch."""
        ...


def _current_meta(store: KeyedStore) -> StoreMeta:
    return store.bound_meta(store.head_operation()).meta


def key_slots(store: KeyedStore) -> list[dict[str, Any]]:
    """One JSON object per key slot: ``slot``, ``label``, ``kind`` and ``current``.

    A version 1 store (no slots yet) lists nothing.
    """
    meta = _current_meta(store)
    if not meta.has_slots:
        return []
    return keyslots.describe(meta, store.keyring_for(meta))


def add_key(
    store: KeyedStore,
    *,
    passphrase: str | None = None,
    key: str | bytes | None = None,
    label: str = "",
    kdf: KdfParams | None = None,
    allow_weak_passphrase: bool = False,
) -> str:
    """Add a key slot for ``passphrase`` (or a raw ``key``); returns the new slot's id.

    The first slot added to a version 1 store makes it version 2, with a slot labelled
    ``initial key`` for the key it had. A passphrase below the strength bar is refused
    (:class:`~gitmem.errors.WeakPassphrase`) unless ``allow_weak_passphrase``.
    """
    raw = None if key is None else decode_key(key)
    if passphrase is not None:  # the slot's way in when both are given
        check_new_passphrase(passphrase, allow_weak=allow_weak_passphrase)
    added: list[str] = []

    def change(meta: StoreMeta, keyring: Keyring) -> tuple[StoreMeta, Keyring]:
        meta, slot = keyslots.add(
            meta, keyring, passphrase=passphrase, raw_key=raw, label=label, params=kdf
        )
        added.append(slot)
        return meta, keyring

    store.change_meta("add", change)
    return added[0]


def remove_key(store: KeyedStore, slot: str) -> int:
    """Remove key slot ``slot`` and rotate (:func:`rotate_keys`); refuses the last slot.

    Returns the new key epoch: nothing written from now on opens with the removed slot's
    keys.
    """
    return store.change_meta(
        "remove",
        lambda meta, keyring: (keyslots.remove(meta, keyring, slot), keyring),
        rotate=True,
    )


def rotate_keys(store: KeyedStore) -> int:
    """Start a new key epoch; returns its number.

    A new random epoch key is sealed to every remaining slot, and the ``keys`` commit that
    records the change is sealed with it at once, so nothing can be appended under older
    keys. Every later write uses it; older epochs stay readable to every current holder.
    """
    return store.change_meta("rotate", lambda meta, keyring: (meta, keyring), rotate=True)


def check_passphrase_slot(store: KeyedStore, slot: str) -> None:
    """Raise :class:`~gitmem.errors.UsageError` unless ``slot`` is a passphrase slot of
    ``store``, as :func:`change_passphrase` would: the command line checks before asking for a
    new passphrase."""
    keyslots.passphrase_slot(_current_meta(store), slot)


def change_passphrase(
    store: KeyedStore,
    slot: str,
    passphrase: str,
    *,
    kdf: KdfParams | None = None,
    allow_weak_passphrase: bool = False,
) -> int:
    """Give passphrase slot ``slot`` a new passphrase and key pair (its id and label stay),
    and rotate (:func:`rotate_keys`); returns the new key epoch.

    The old passphrase opens nothing written from now on, even with the slot's old
    metadata from the repository's history; what it opened before stays open to it. The
    store keeps working; other processes that opened the slot with the old passphrase get
    :class:`~gitmem.errors.WrongKey` and must open the store again. A passphrase below the
    strength bar is refused (:class:`~gitmem.errors.WeakPassphrase`) unless
    ``allow_weak_passphrase``.
    """
    check_new_passphrase(passphrase, allow_weak=allow_weak_passphrase)
    return store.change_meta(
        "passwd",
        lambda meta, keyring: keyslots.passwd(meta, keyring, slot, passphrase, kdf),
        rotate=True,
    )


__all__ = [
    "KeyedStore",
    "MetaChange",
    "add_key",
    "change_passphrase",
    "check_passphrase_slot",
    "key_slots",
    "remove_key",
    "rotate_keys",
]
