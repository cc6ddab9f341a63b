"""Key slots and key epochs (format 3): who can open a store, and with which keys it writes.

A slot is one holder's way in: a passphrase (Argon2id) or a raw key (HKDF) unwraps the slot's
X25519 secret, which opens the newest epoch key sealed to the slot; each epoch key opens the one
before it, down to epoch 0, whose key check is in the metadata. Every function here is pure: it
takes a :class:`~gitmem.format.StoreMeta` and returns a new one, which the store writes under its
lock. ``docs/design.md`` ("Key slots") specifies the bytes.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any

from . import crypto
from .crypto import KdfParams, StoreKeys
from .errors import IntegrityError, UsageError, WrongKey, WrongPassphrase
from .format import (
    MAX_LABEL_BYTES,
    MAX_SLOTS,
    SLOT_KEY,
    SLOT_PASSPHRASE,
    SLOTS_FORMAT_VERSION,
    Slot,
    StoreMeta,
)
from .keysource import Credential

_KEYRING_AD = b"gitmem/keyring/v2"
_LINK_AD = b"gitmem/epoch-link/v2"
_LABEL_AD = b"gitmem/label/v2"
INITIAL_KEY_LABEL = "initial key"


@dataclass(frozen=True)
class Keyring:
    """What unlocking a store yields: the slot used and every epoch key (never printed)."""

    slot: str | None
    secret: bytes | None = field(repr=False)
    epochs: tuple[bytes, ...] = field(repr=False)

    @property
    def epoch(self) -> int:
        """The newest epoch this keyring holds."""
        return len(self.epochs) - 1

    def keys(self, store_id: bytes) -> StoreKeys:
        """The subkeys of the newest epoch, able to open every older one."""
        return StoreKeys.chain(self.epochs, store_id)


def normalize_passphrase(passphrase: str) -> bytes:
    """A passphrase as the KDF sees it: NFC-normalized UTF-8; an empty one is refused."""
    if not isinstance(passphrase, str):
        raise UsageError("a passphrase must be text")
    if not passphrase:
        raise UsageError("the passphrase is empty")
    try:
        return unicodedata.normalize("NFC", passphrase).encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("the passphrase is not valid text") from None


def _u32(value: int) -> bytes:
    return value.to_bytes(4, "big")


def _keyring_ad(store_id: bytes, slot: str) -> bytes:
    return _KEYRING_AD + store_id + slot.encode("ascii")


def _label_ad(store_id: bytes, slot: str, epoch: int) -> bytes:
    return _LABEL_AD + store_id + slot.encode("ascii") + _u32(epoch)


def _link_ad(store_id: bytes, epoch: int) -> bytes:
    return _LINK_AD + store_id + _u32(epoch)


# -- unlocking -------------------------------------------------------------------------------


def unlock(meta: StoreMeta, credential: Credential, where: str, hint: str | None = None) -> Keyring:
    """Open ``meta`` with the key or passphrase that ``credential`` holds (``hint``: as for
    :func:`unlock_with_passphrase`)."""
    if credential.key is not None:
        return unlock_with_key(meta, credential.key, where)
    assert credential.passphrase is not None
    return unlock_with_passphrase(meta, credential.passphrase, where, hint)


def unlock_with_key(meta: StoreMeta, raw: bytes, where: str) -> Keyring:
    """Open ``meta`` with a raw 32-byte key: a version 1 store's key, or a key slot's."""
    if not meta.has_slots:
        if not StoreKeys.derive(raw, meta.store_id).matches(meta.key_check):
            raise WrongKey(f"the key does not open the store at {where}")
        return Keyring(None, None, (raw,))
    for slot in meta.slots:
        if slot.kind == SLOT_KEY:
            kek = crypto.raw_key_kek(raw, slot.salt)
            secret = crypto.unwrap_secret(kek, slot.private, slot.params_ad(meta.store_id))
            if secret is not None:
                return _open_keyring(meta, slot, secret)
    raise WrongKey(f"the key does not open the store at {where} (it is in none of its key slots)")


# The most Argon2id work one open spends on a passphrase, as KiB of memory times passes: twice
# what one slot may ask for, so a slot at the bounds opens even after cheaper ones failed, and
# slots planted in the metadata cannot make an open take much longer than two such slots.
MAX_UNLOCK_WORK = 2 * crypto.ARGON2_MAX_MEMORY_KIB * crypto.ARGON2_MAX_ITERATIONS
MAX_UNLOCK_WORK_GIB = MAX_UNLOCK_WORK // (1024 * 1024)


def slot_work(slot: Slot) -> int:
    """The Argon2id work of trying ``slot``: KiB of memory times passes (0 for a key slot)."""
    return 0 if slot.kdf is None else slot.kdf.memory_kib * slot.kdf.iterations


def unlock_with_passphrase(
    meta: StoreMeta, passphrase: str, where: str, hint: str | None = None
) -> Keyring:
    """Open ``meta`` with a passphrase: one Argon2id derivation per passphrase slot, at most.

    Slot ``hint`` (the one this user's passphrase opened last) is tried first, then the others
    cheapest first, so that expensive slots someone planted come last; no more than
    :data:`MAX_UNLOCK_WORK` is spent in all.
    """
    secret_text = normalize_passphrase(passphrase)
    slots = [slot for slot in meta.slots if slot.kind == SLOT_PASSPHRASE]
    if not slots:
        raise WrongPassphrase(
            f"the store at {where} has no passphrase slots (add one with `gitmem key add`)"
        )
    # sorted() is stable: slots of equal cost keep the metadata's order.
    slots.sort(key=lambda slot: (slot.slot != hint, slot_work(slot)))
    spent = 0
    for tried, slot in enumerate(slots):
        assert slot.kdf is not None  # parsing guarantees it for passphrase slots
        spent += slot_work(slot)
        if spent > MAX_UNLOCK_WORK:
            raise WrongPassphrase(
                f"the passphrase was tried against {tried} of the {len(slots)} passphrase slots "
                f"of the store at {where} and opens none of them; the rest were not tried, since "
                f"they would take this open past gitmem's bound of {MAX_UNLOCK_WORK_GIB} GiB of "
                "Argon2id memory times passes (someone may have planted expensive slots). Open "
                "the store with a key or another passphrase and remove the slots you do not know "
                "(`gitmem key list`, `gitmem key remove SLOT`)"
            )
        kek = crypto.passphrase_kek(secret_text, slot.salt, slot.kdf)
        secret = crypto.unwrap_secret(kek, slot.private, slot.params_ad(meta.store_id))
        if secret is not None:
            return _open_keyring(meta, slot, secret)
    raise WrongPassphrase(f"the passphrase does not open the store at {where}")


def reopen(meta: StoreMeta, keyring: Keyring, where: str) -> Keyring:
    """``keyring`` brought up to date with ``meta`` (after a rotation), without a passphrase.

    Raises :class:`WrongKey` when the keyring's slot has been removed.
    """
    if keyring.slot is None:
        if not meta.has_slots:
            return keyring
        # The store gained slots since it was opened with its version 1 key: that key became
        # the slot labelled "initial key", if nobody has removed it since.
        return unlock_with_key(meta, keyring.epochs[0], where)
    for slot in meta.slots:
        if slot.slot == keyring.slot:
            assert keyring.secret is not None
            if crypto.slot_public(keyring.secret) != slot.public:
                raise WrongKey(
                    f"the key slot {slot.slot} was given a new passphrase since this store was "
                    f"opened with it; open the store at {where} again with the new passphrase "
                    "(a replica that has not pulled the change yet: clone the store again, or "
                    "pull with another key slot)"
                )
            return _open_keyring(meta, slot, keyring.secret)
    raise WrongKey(f"the key slot {keyring.slot} was removed from the store at {where}")


def _open_keyring(meta: StoreMeta, slot: Slot, secret: bytes) -> Keyring:
    if crypto.slot_public(secret) != slot.public:
        raise IntegrityError(f"key slot {slot.slot} is inconsistent (its public key)")
    body = crypto.open_sealed(secret, slot.keyring, _keyring_ad(meta.store_id, slot.slot))
    epoch, newest = int.from_bytes(body[:4], "big"), body[4:]
    if epoch != meta.epoch or len(newest) != crypto.KEY_BYTES:
        raise IntegrityError(f"key slot {slot.slot} does not hold the store's newest epoch key")
    epochs = [newest]
    for k in range(epoch, 0, -1):
        epochs.append(crypto.open_link(epochs[-1], meta.links[k - 1], _link_ad(meta.store_id, k)))
    epochs.reverse()
    if not StoreKeys.derive(epochs[0], meta.store_id).matches(meta.key_check):
        raise IntegrityError("the store's epoch keys do not lead back to its key check")
    return Keyring(slot.slot, secret, tuple(epochs))


# -- changing slots --------------------------------------------------------------------------


def is_slot_id(text: str) -> bool:
    """Whether ``text`` has the form of a slot id: 8 lowercase hex digits."""
    return len(text) == 8 and all(c in "0123456789abcdef" for c in text)


def _new_slot_id(meta: StoreMeta) -> str:
    taken = {slot.slot for slot in meta.slots}
    while True:
        candidate = os.urandom(4).hex()
        if candidate not in taken:
            return candidate


def _check_label(label: str) -> str:
    if not isinstance(label, str) or len(label.encode("utf-8", "replace")) > MAX_LABEL_BYTES:
        raise UsageError(f"a key label is text of at most {MAX_LABEL_BYTES} bytes")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in label):
        raise UsageError("a key label may not contain control characters")
    return label


def make_slot(
    meta: StoreMeta,
    keyring: Keyring,
    slot_id: str,
    *,
    passphrase: str | None = None,
    raw_key: bytes | None = None,
    label: str,
    params: KdfParams | None = None,
    secret: bytes | None = None,
) -> Slot:
    """A new slot ``slot_id`` for a passphrase or a raw key, holding ``keyring``'s newest key.

    ``secret`` is the slot's new X25519 secret when the caller needs to know it (a random one
    otherwise).
    """
    salt = os.urandom(crypto.SLOT_SALT_BYTES)
    secret = crypto.new_slot_secret() if secret is None else secret
    if passphrase is not None:
        params = KdfParams() if params is None else params
        params.check()
        kek = crypto.passphrase_kek(normalize_passphrase(passphrase), salt, params)
        draft = Slot(slot_id, SLOT_PASSPHRASE, salt, params, crypto.slot_public(secret), *_EMPTY)
    elif raw_key is not None:
        kek = crypto.raw_key_kek(raw_key, salt)
        draft = Slot(slot_id, SLOT_KEY, salt, None, crypto.slot_public(secret), *_EMPTY)
    else:
        raise UsageError("a key slot needs a passphrase or a key")
    private = crypto.wrap_secret(kek, secret, draft.params_ad(meta.store_id))
    return _seal_for(meta.store_id, replace(draft, private=private), keyring, label)


_EMPTY = (b"", b"", b"")


def _seal_for(store_id: bytes, slot: Slot, keyring: Keyring, label: str) -> Slot:
    """``slot`` with ``keyring``'s newest epoch key and ``label`` sealed for it."""
    epoch, newest = keyring.epoch, keyring.epochs[-1]
    sealed = crypto.seal_to(slot.public, _u32(epoch) + newest, _keyring_ad(store_id, slot.slot))
    return replace(
        slot,
        keyring=sealed,
        label=crypto.seal_label(newest, label, _label_ad(store_id, slot.slot, epoch)),
    )


def slot_label(meta: StoreMeta, keyring: Keyring, slot: Slot) -> str:
    """The decrypted label of ``slot``."""
    ad = _label_ad(meta.store_id, slot.slot, keyring.epoch)
    return crypto.open_label(keyring.epochs[-1], slot.label, ad)


def describe(meta: StoreMeta, keyring: Keyring) -> list[dict[str, Any]]:
    """One JSON object per slot: ``slot``, ``label``, ``kind`` and ``current`` (the one in use)."""
    return [
        {
            "slot": slot.slot,
            "label": slot_label(meta, keyring, slot),
            "kind": slot.kind,
            "current": slot.slot == keyring.slot,
        }
        for slot in meta.slots
    ]


def add(
    meta: StoreMeta,
    keyring: Keyring,
    *,
    passphrase: str | None = None,
    raw_key: bytes | None = None,
    label: str = "",
    params: KdfParams | None = None,
) -> tuple[StoreMeta, str]:
    """``meta`` with a new slot; a version 1 store first gets a slot for its own key."""
    _check_label(label)
    if not meta.has_slots:
        first = make_slot(
            meta, keyring, _new_slot_id(meta), raw_key=keyring.epochs[0], label=INITIAL_KEY_LABEL
        )
        meta = replace(meta, format=max(meta.format, SLOTS_FORMAT_VERSION), slots=(first,))
    if len(meta.slots) >= MAX_SLOTS:
        raise UsageError(f"a store has at most {MAX_SLOTS} key slots")
    slot_id = _new_slot_id(meta)
    slot = make_slot(
        meta,
        keyring,
        slot_id,
        passphrase=passphrase,
        raw_key=raw_key,
        label=label,
        params=params,
    )
    return replace(meta, slots=(*meta.slots, slot)), slot_id


def with_passphrase(
    meta: StoreMeta, raw: bytes, passphrase: str, params: KdfParams | None = None
) -> StoreMeta:
    """A version 1 ``meta`` of key ``raw`` made a store whose only way in is ``passphrase``."""
    keyring = Keyring(None, None, (raw,))
    slot = make_slot(
        meta, keyring, _new_slot_id(meta), passphrase=passphrase, label="", params=params
    )
    return replace(meta, format=max(meta.format, SLOTS_FORMAT_VERSION), slots=(slot,), links=())


def _find(meta: StoreMeta, slot_id: str) -> Slot:
    if not is_slot_id(slot_id):
        # Not echoed: a passphrase typed where a slot id belongs must not reach a terminal log.
        raise UsageError("that is not a key slot id (8 hex digits; see `gitmem key list`)")
    for slot in meta.slots:
        if slot.slot == slot_id:
            return slot
    raise UsageError(f"no key slot {slot_id!r} in this store (see `gitmem key list`)")


def remove(meta: StoreMeta, keyring: Keyring, slot_id: str) -> StoreMeta:
    """``meta`` without slot ``slot_id``; the last slot is never removed."""
    if not meta.has_slots:
        raise UsageError("this store has no key slots: its key is the only way in")
    gone = _find(meta, slot_id)
    if len(meta.slots) == 1:
        raise UsageError(
            f"key slot {slot_id} is the last way into this store; add another before removing it"
        )
    return replace(meta, slots=tuple(slot for slot in meta.slots if slot is not gone))


def passphrase_slot(meta: StoreMeta, slot_id: str) -> Slot:
    """Slot ``slot_id`` of ``meta``; a UsageError unless it is a passphrase slot there."""
    if not meta.has_slots:
        raise UsageError("this store has no key slots (add one with `gitmem key add`)")
    slot = _find(meta, slot_id)
    if slot.kind != SLOT_PASSPHRASE:
        raise UsageError(f"key slot {slot_id} holds a key, not a passphrase")
    return slot


def passwd(
    meta: StoreMeta,
    keyring: Keyring,
    slot_id: str,
    passphrase: str,
    params: KdfParams | None = None,
) -> tuple[StoreMeta, Keyring]:
    """``meta`` with slot ``slot_id`` remade for a new passphrase (same id and label), and the
    keyring to go on with (its secret is the new one when the slot is the keyring's own).

    The slot gets a new X25519 key pair: the old passphrase still unwraps the old secret from
    any earlier metadata in the repository's history, and that secret must open nothing sealed
    to the slot from now on. Callers rotate afterwards (:func:`rotate`), so that nothing written
    after the change opens with the epoch key the old secret already reached.
    """
    old = passphrase_slot(meta, slot_id)
    label = slot_label(meta, keyring, old)
    secret = crypto.new_slot_secret()
    new = make_slot(
        meta, keyring, slot_id, passphrase=passphrase, label=label, params=params, secret=secret
    )
    if keyring.slot == slot_id:
        keyring = replace(keyring, secret=secret)
    return replace(meta, slots=tuple(new if slot is old else slot for slot in meta.slots)), keyring


def rotate(meta: StoreMeta, keyring: Keyring) -> tuple[StoreMeta, Keyring]:
    """``meta`` with a new epoch key sealed to every remaining slot, and the keyring with it.

    The new key is random, so holders of slots removed before now never see it.
    """
    if not meta.has_slots:
        raise UsageError("this store has no key slots to rotate (add one with `gitmem key add`)")
    newest = os.urandom(crypto.KEY_BYTES)
    epoch = meta.epoch + 1
    link = crypto.seal_link(newest, keyring.epochs[-1], _link_ad(meta.store_id, epoch))
    rotated = Keyring(keyring.slot, keyring.secret, (*keyring.epochs, newest))
    slots = tuple(
        _seal_for(meta.store_id, slot, rotated, slot_label(meta, keyring, slot))
        for slot in meta.slots
    )
    return replace(meta, slots=slots, links=(*meta.links, link)), rotated
