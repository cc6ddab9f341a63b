"""Keys, subkeys and the three envelopes of the format; the only module importing ``cryptography``.

* **Names**: AES-SIV (RFC 5297) under the names subkey, deterministic so a path is found by
  encrypting it; the parent path and the entry kind are associated data, so an entry moved to
  another directory or turned from file to directory fails to open.
* **Blobs** (chunks and file headers): AES-SIV under the chunks subkey, deterministic so equal
  plaintexts are one git blob.
* **Records** (commit messages, key check): AES-256-GCM with a random 96-bit nonce; the caller
  binds what the record describes through associated data.

Every ciphertext starts with a version byte that is also authenticated, so a later format can
change an envelope without ambiguity. Any failure to open is one opaque :class:`IntegrityError`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import IntegrityError, WrongKey

KEY_BYTES = 32
STORE_ID_BYTES = 16
NONCE_BYTES = 12
ENVELOPE_VERSION = 1
KEY_TEXT_PREFIX = "gitmem-key-1:"
KEY_TEXT = re.compile(r"gitmem-key-\d+:[A-Za-z0-9_\-]{40,}")
"""Key text (of this or a later key version) within other text: what secret screening calls a
gitmem store key, and what is never taken for a path or a URL."""
_CHECKSUM_BYTES = 4
# The key and its checksum in base64url without padding: 36 bytes, 48 characters.
_BODY_CHARS = (KEY_BYTES + _CHECKSUM_BYTES) * 4 // 3

_NAME_AD = b"gitmem/name/v1"
_BLOB_AD = b"gitmem/blob/v1"
_CHECK_INFO = b"gitmem/v1/key-check"


def generate_key() -> str:
    """Return a new random 32-byte store key as printable text (keep it secret)."""
    return encode_key(os.urandom(KEY_BYTES))


def encode_key(raw: bytes) -> str:
    """The text form of a raw 32-byte key: a prefix, base64url, and a 4-byte checksum."""
    if len(raw) != KEY_BYTES:
        raise WrongKey(f"a store key is {KEY_BYTES} bytes")
    check = hashlib.sha256(raw).digest()[:_CHECKSUM_BYTES]
    return KEY_TEXT_PREFIX + base64.urlsafe_b64encode(raw + check).decode("ascii").rstrip("=")


def decode_key(key: str | bytes) -> bytes:
    """Parse a key given as text (from :func:`generate_key`) or as 32 raw bytes.

    Raises :class:`WrongKey` without echoing any part of the input.
    """
    if isinstance(key, bytes):
        if len(key) == KEY_BYTES:
            return key
        try:
            text = key.decode("ascii")
        except UnicodeDecodeError:
            text = ""
        if not text.strip().removeprefix("\ufeff").strip().startswith(KEY_TEXT_PREFIX):
            # Bytes that are no key text were meant as a raw key: say so, not "key text...".
            raise WrongKey(
                f"the key is not valid: {len(key)} bytes, neither 32 raw bytes nor key text "
                f"(which starts with '{KEY_TEXT_PREFIX}')"
            )
        key = text
    if not isinstance(key, str):
        raise WrongKey("the key must be text from gitmem.generate_key() or 32 bytes")
    # A byte order mark is what some editors put at the start of a file saved as UTF-8.
    text = key.strip().removeprefix("\ufeff").strip()
    if not text:
        raise WrongKey("the key is not valid: it is empty")
    if not text.startswith(KEY_TEXT_PREFIX):
        raise WrongKey(f"the key is not valid: key text starts with '{KEY_TEXT_PREFIX}'")
    body = text[len(KEY_TEXT_PREFIX) :]
    if len(body) != _BODY_CHARS:
        what = "truncated" if len(body) < _BODY_CHARS else "too long"
        raise WrongKey(
            f"the key is not valid: it is {what} ({len(text)} characters; key text has "
            f"{len(KEY_TEXT_PREFIX) + _BODY_CHARS})"
        )
    try:
        blob = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (ValueError, TypeError):
        raise WrongKey("the key is not valid: it is not base64url text") from None
    raw, check = blob[:KEY_BYTES], blob[KEY_BYTES:]
    if len(raw) != KEY_BYTES or not hmac.compare_digest(
        check, hashlib.sha256(raw).digest()[:_CHECKSUM_BYTES]
    ):
        raise WrongKey("the key is not valid: it is mistyped (checksum mismatch)")
    return raw


_URLSAFE_TO_STANDARD = bytes.maketrans(b"-_", b"+/")


def name_envelope(entry: str) -> bytes:
    """The name envelope of tree entry name ``entry`` (``kind || base64url_nopad(envelope)``),
    decoded but not opened; :class:`IntegrityError` when it is not base64url text."""
    body = entry[1:]
    try:
        # base64.urlsafe_b64decode without its two Python layers, which would be a large part
        # of the cost of every name a lookup or write of a split directory places: the same
        # ASCII check, alphabet and lenient decoding.
        padded = (body + "=" * (-len(body) % 4)).encode("ascii")
        return binascii.a2b_base64(padded.translate(_URLSAFE_TO_STANDARD))
    except (ValueError, TypeError):
        raise IntegrityError("an entry name is not valid gitmem ciphertext") from None


@functools.lru_cache(maxsize=256)
def _name_ad(kind: str, parent: str) -> list[bytes]:
    """The associated data of a name envelope of ``kind`` under ``parent`` (read-only: one list
    shared by every name of a directory opened, rather than one made and encoded per name)."""
    return [_NAME_AD, bytes([ENVELOPE_VERSION]), kind.encode(), parent.encode("utf-8")]


def _derive(master: bytes, store_id: bytes, purpose: bytes, length: int) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(), length=length, salt=store_id, info=b"gitmem/v1/" + purpose
    ).derive(master)


def new_store_id() -> bytes:
    """A fresh random store id."""
    return os.urandom(STORE_ID_BYTES)


@dataclass(frozen=True)
class StoreKeys:
    """The subkeys of one store, derived with HKDF-SHA256 from the store key and store id.

    After a key rotation, ``epoch`` is the newest key epoch and the keys are those of every
    epoch: everything is sealed with the newest and opened with any, newest first
    (``MultiFernet``'s rule), so old history stays readable.
    """

    store_id: bytes
    key_check: bytes
    chunker_seed: bytes
    # HMAC key of the nonces of records sealed deterministically (seal_record_derived).
    _record_nonces: bytes = field(repr=False)
    _names: AESSIV = field(repr=False)
    _blobs: AESSIV = field(repr=False)
    _records: AESGCM = field(repr=False)
    epoch: int = 0
    # Every epoch's ciphers, newest first (the first are the three above).
    _open_names: tuple[AESSIV, ...] = field(default=(), repr=False)
    _open_blobs: tuple[AESSIV, ...] = field(default=(), repr=False)
    _open_records: tuple[tuple[int, AESGCM], ...] = field(default=(), repr=False)

    @classmethod
    def chain(cls, epoch_keys: Sequence[bytes], store_id: bytes) -> StoreKeys:
        """The subkeys of the newest of ``epoch_keys`` (epoch 0 first), opening all of them."""
        ordered = list(enumerate(epoch_keys))[::-1]  # newest first
        return replace(
            cls.derive(epoch_keys[-1], store_id),
            epoch=len(epoch_keys) - 1,
            _open_names=tuple(AESSIV(_derive(k, store_id, b"names", 64)) for _, k in ordered),
            _open_blobs=tuple(AESSIV(_derive(k, store_id, b"chunks", 64)) for _, k in ordered),
            _open_records=tuple(
                (e, AESGCM(_derive(k, store_id, b"records", 32))) for e, k in ordered
            ),
        )

    @classmethod
    def derive(cls, master: bytes, store_id: bytes) -> StoreKeys:
        """Derive every subkey of ``store_id`` from the raw 32-byte ``master`` key."""
        names = AESSIV(_derive(master, store_id, b"names", 64))
        blobs = AESSIV(_derive(master, store_id, b"chunks", 64))
        records = AESGCM(_derive(master, store_id, b"records", 32))
        return cls(
            store_id=store_id,
            key_check=_derive(master, store_id, b"key-check", 32),
            chunker_seed=_derive(master, store_id, b"chunker", 32),
            _record_nonces=_derive(master, store_id, b"record-nonces", 32),
            _names=names,
            _blobs=blobs,
            _records=records,
            _open_names=(names,),
            _open_blobs=(blobs,),
            _open_records=((0, records),),
        )

    def check_value(self) -> bytes:
        """A value stored in the repository that confirms the key without revealing it."""
        return hmac.new(self.key_check, _CHECK_INFO + self.store_id, hashlib.sha256).digest()

    def matches(self, stored_check: bytes) -> bool:
        """True when ``stored_check`` was made by this key (constant time)."""
        return hmac.compare_digest(self.check_value(), stored_check)

    # -- names ---------------------------------------------------------------------------

    def seal_name(self, name: str, parent: str, kind: str) -> str:
        """Encrypt one path component for a git tree entry: ``kind`` + base64url(ciphertext)."""
        ad = [_NAME_AD, bytes([ENVELOPE_VERSION]), kind.encode(), parent.encode("utf-8")]
        ct = bytes([ENVELOPE_VERSION]) + self._names.encrypt(name.encode("utf-8"), ad)
        return kind + base64.urlsafe_b64encode(ct).decode("ascii").rstrip("=")

    def name_sealings(self, name: str, parent: str, kind: str) -> list[str]:
        """Every entry name :meth:`open_name` opens to ``(name, kind)`` under ``parent``: one per
        key epoch, newest first (sealing is deterministic, so a path is found by its sealings
        without decrypting the names of its directory)."""
        ad = [_NAME_AD, bytes([ENVELOPE_VERSION]), kind.encode(), parent.encode("utf-8")]
        plain = name.encode("utf-8")
        return [
            kind
            + base64.urlsafe_b64encode(bytes([ENVELOPE_VERSION]) + names.encrypt(plain, ad))
            .decode("ascii")
            .rstrip("=")
            for names in self._open_names
        ]

    def open_name(self, entry: str, parent: str) -> tuple[str, str, bytes]:
        """Decrypt a tree entry name made by :meth:`seal_name`; returns ``(name, kind,
        envelope)``, the envelope as :func:`name_envelope` decodes it (its synthetic IV places
        the entry in a split directory's buckets: decoded once for both)."""
        kind = entry[:1]
        ct = name_envelope(entry)
        if not ct or ct[0] != ENVELOPE_VERSION:
            raise IntegrityError("an entry name has an unknown envelope version")
        ad = _name_ad(kind, parent)
        body = ct[1:]
        for names in self._open_names:
            try:
                return names.decrypt(body, ad).decode("utf-8"), kind, ct
            except (InvalidTag, UnicodeDecodeError, ValueError):
                continue
        raise IntegrityError("an entry name failed authentication")

    # -- blobs ---------------------------------------------------------------------------

    def seal_blob(self, data: bytes, role: bytes) -> bytes:
        """Deterministically encrypt a chunk or header; ``role`` separates the two kinds."""
        ad = [_BLOB_AD, bytes([ENVELOPE_VERSION]), role]
        return bytes([ENVELOPE_VERSION]) + self._blobs.encrypt(data, ad)

    def open_blob(self, blob: bytes, role: bytes) -> bytes:
        """Decrypt a blob made by :meth:`seal_blob` with the same ``role``."""
        if not blob or blob[0] != ENVELOPE_VERSION:
            raise IntegrityError("a blob has an unknown envelope version")
        for blobs in self._open_blobs:
            try:
                return blobs.decrypt(blob[1:], [_BLOB_AD, blob[:1], role])
            except (InvalidTag, ValueError):
                continue
        raise IntegrityError("a blob failed authentication")

    # -- records -------------------------------------------------------------------------

    def seal_record(self, plaintext: bytes, ad: bytes, *, nonce: bytes | None = None) -> bytes:
        """AEAD-encrypt a record bound to ``ad``; ``nonce`` is injectable for test vectors only."""
        nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
        header = bytes([ENVELOPE_VERSION])
        return header + nonce + self._records.encrypt(nonce, plaintext, header + ad)

    def seal_record_derived(self, plaintext: bytes, ad: bytes) -> bytes:
        """:meth:`seal_record` with the nonce derived from what it seals: the first 12 bytes of
        HMAC-SHA256, under the ``record-nonces`` subkey, of ``len(ad)`` (4 bytes), ``ad`` and
        the plaintext. The same record on the same commit always seals to the same bytes (two
        replicas redacting the same history write the same commits); different ones get
        different nonces, as random ones would (SIV's construction, design.md "Redaction")."""
        mac = hmac.new(self._record_nonces, len(ad).to_bytes(4, "big"), hashlib.sha256)
        mac.update(ad)
        mac.update(plaintext)
        return self.seal_record(plaintext, ad, nonce=mac.digest()[:NONCE_BYTES])

    def open_record(self, blob: bytes, ad: bytes) -> bytes:
        """Decrypt a record made by :meth:`seal_record` with the same ``ad``."""
        return self.open_record_epoch(blob, ad)[0]

    def open_record_epoch(self, blob: bytes, ad: bytes) -> tuple[bytes, int]:
        """Decrypt a record; also returns the key epoch it was sealed in."""
        if len(blob) < 1 + NONCE_BYTES + 16 or blob[0] != ENVELOPE_VERSION:
            raise IntegrityError("a record is truncated or has an unknown envelope version")
        nonce = blob[1 : 1 + NONCE_BYTES]
        for epoch, records in self._open_records:
            try:
                plain = records.decrypt(nonce, blob[1 + NONCE_BYTES :], blob[:1] + ad)
                return plain, epoch
            except (InvalidTag, ValueError):
                continue
        raise IntegrityError("a record failed authentication")


# -- key slots (format 3) --------------------------------------------------------------------
#
# A slot holds an X25519 private key wrapped under a key-encryption key (KEK): Argon2id of a
# passphrase, or HKDF of a raw key. The store's newest epoch key is sealed to each slot's public
# key, so a holder can start a new epoch for every remaining slot without knowing their
# passphrases (age's recipients); older epoch keys are chained behind the newest one.

SLOT_SALT_BYTES = 16
_SLOT_KEK_INFO = b"gitmem/v2/slot-kek"
_SEAL_INFO = b"gitmem/v2/sealed"
_LINK_INFO = b"gitmem/v2/epoch-link"
_LABEL_INFO = b"gitmem/v2/labels"
_AEAD_OVERHEAD = NONCE_BYTES + 16

# Bounds on Argon2id parameters read from disk, checked before any derivation: a planted cost
# must not make opening a store exhaust memory or time.
ARGON2_MAX_MEMORY_KIB = 1024 * 1024  # 1 GiB
ARGON2_MAX_ITERATIONS = 16
ARGON2_MAX_LANES = 16


@dataclass(frozen=True)
class KdfParams:
    """Argon2id cost parameters of a passphrase slot (RFC 9106's second recommended option)."""

    memory_kib: int = 64 * 1024
    iterations: int = 3
    lanes: int = 4

    def check(self) -> None:
        """Refuse parameters outside the bounds gitmem will spend (:class:`IntegrityError`)."""
        for value in (self.memory_kib, self.iterations, self.lanes):
            if type(value) is not int:
                raise IntegrityError("a key slot's Argon2id parameters are malformed")
        if not 1 <= self.lanes <= ARGON2_MAX_LANES:
            raise IntegrityError(f"a key slot asks for {self.lanes} Argon2id lanes (at most 16)")
        if not 1 <= self.iterations <= ARGON2_MAX_ITERATIONS:
            raise IntegrityError(
                f"a key slot asks for {self.iterations} Argon2id passes (at most 16)"
            )
        if not 8 * self.lanes <= self.memory_kib <= ARGON2_MAX_MEMORY_KIB:
            raise IntegrityError(
                f"a key slot asks for {self.memory_kib} KiB of Argon2id memory "
                f"(refused: the bounds are {8 * self.lanes} KiB to 1 GiB)"
            )


def _aead_kdf(secret: bytes, salt: bytes, info: bytes) -> AESGCM:
    return AESGCM(HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(secret))


def passphrase_kek(passphrase: bytes, salt: bytes, params: KdfParams) -> bytes:
    """The 32-byte KEK of a passphrase slot: Argon2id after the parameters pass their bounds."""
    from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

    params.check()
    if len(salt) != SLOT_SALT_BYTES:
        raise IntegrityError("a key slot's salt is not 16 bytes")
    return Argon2id(
        salt=salt,
        length=32,
        iterations=params.iterations,
        lanes=params.lanes,
        memory_cost=params.memory_kib,
    ).derive(passphrase)


def raw_key_kek(raw: bytes, salt: bytes) -> bytes:
    """The 32-byte KEK of a raw-key slot: HKDF-SHA256 (a random key needs no slow KDF)."""
    if len(salt) != SLOT_SALT_BYTES:
        raise IntegrityError("a key slot's salt is not 16 bytes")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=_SLOT_KEK_INFO).derive(raw)


def new_slot_secret() -> bytes:
    """A fresh X25519 private key (32 bytes) for a slot."""
    return os.urandom(32)


def slot_public(secret: bytes) -> bytes:
    """The X25519 public key of slot secret ``secret``."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    return X25519PrivateKey.from_private_bytes(secret).public_key().public_bytes_raw()


def wrap_secret(kek: bytes, secret: bytes, ad: bytes, *, nonce: bytes | None = None) -> bytes:
    """``nonce || AES-256-GCM(kek, secret, ad)``; ``nonce`` is injectable for test vectors."""
    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    return nonce + AESGCM(kek).encrypt(nonce, secret, ad)


def unwrap_secret(kek: bytes, wrapped: bytes, ad: bytes) -> bytes | None:
    """The secret :func:`wrap_secret` wrapped, or None when ``kek`` or ``ad`` do not match."""
    if len(wrapped) != _AEAD_OVERHEAD + 32:
        return None
    try:
        return AESGCM(kek).decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], ad)
    except InvalidTag:
        return None


def seal_to(
    public: bytes,
    plaintext: bytes,
    ad: bytes,
    *,
    ephemeral: bytes | None = None,
    nonce: bytes | None = None,
) -> bytes:
    """Encrypt to an X25519 public key: ``ephemeral public || nonce || AES-256-GCM``.

    The AES key is HKDF-SHA256 of the shared secret, salted with both public keys.
    ``ephemeral`` (a private key) and ``nonce`` are injectable for test vectors only.
    """
    from cryptography.hazmat.primitives.asymmetric.x25519 import (
        X25519PrivateKey,
        X25519PublicKey,
    )

    eph = X25519PrivateKey.from_private_bytes(os.urandom(32) if ephemeral is None else ephemeral)
    eph_public = eph.public_key().public_bytes_raw()
    shared = eph.exchange(X25519PublicKey.from_public_bytes(public))
    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    aead = _aead_kdf(shared, eph_public + public, _SEAL_INFO)
    return eph_public + nonce + aead.encrypt(nonce, plaintext, ad)


def open_sealed(secret: bytes, sealed: bytes, ad: bytes) -> bytes:
    """Decrypt what :func:`seal_to` sealed to ``secret``'s public key (:class:`IntegrityError`)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import (
        X25519PrivateKey,
        X25519PublicKey,
    )

    if len(sealed) < 32 + _AEAD_OVERHEAD:
        raise IntegrityError("a key slot's keyring is truncated")
    own = X25519PrivateKey.from_private_bytes(secret)
    try:
        shared = own.exchange(X25519PublicKey.from_public_bytes(sealed[:32]))
        aead = _aead_kdf(shared, sealed[:32] + own.public_key().public_bytes_raw(), _SEAL_INFO)
        body = sealed[32:]
        return aead.decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], ad)
    except (InvalidTag, ValueError):
        raise IntegrityError("a key slot's keyring failed authentication") from None


def seal_link(newer: bytes, older: bytes, ad: bytes, *, nonce: bytes | None = None) -> bytes:
    """Seal epoch key ``older`` under epoch key ``newer``: the newest key opens every older one."""
    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    return nonce + _aead_kdf(newer, b"", _LINK_INFO).encrypt(nonce, older, ad)


def open_link(newer: bytes, link: bytes, ad: bytes) -> bytes:
    """The older epoch key :func:`seal_link` sealed (:class:`IntegrityError`)."""
    try:
        aead = _aead_kdf(newer, b"", _LINK_INFO)
        older = aead.decrypt(link[:NONCE_BYTES], link[NONCE_BYTES:], ad)
    except (InvalidTag, ValueError):
        raise IntegrityError("an epoch key link failed authentication") from None
    if len(older) != KEY_BYTES:
        raise IntegrityError("an epoch key link is malformed")
    return older


def seal_label(epoch_key: bytes, label: str, ad: bytes, *, nonce: bytes | None = None) -> bytes:
    """Encrypt a slot's label under the newest epoch key (labels may name people)."""
    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    return nonce + _aead_kdf(epoch_key, b"", _LABEL_INFO).encrypt(nonce, label.encode(), ad)


def open_label(epoch_key: bytes, sealed: bytes, ad: bytes) -> str:
    """A label sealed by :func:`seal_label` (:class:`IntegrityError`)."""
    try:
        aead = _aead_kdf(epoch_key, b"", _LABEL_INFO)
        return aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], ad).decode("utf-8")
    except (InvalidTag, ValueError, UnicodeDecodeError):
        raise IntegrityError("a key slot's label failed authentication") from None
