"""Keys, subkeys and the three envelopes of format v1; the only module importing ``cryptography``.

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
import hashlib
import hmac
import os
from dataclasses import dataclass, field

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
            key = key.decode("ascii")
        except UnicodeDecodeError:
            raise WrongKey("the key is not valid: expected 32 raw bytes or key text") from None
    if not isinstance(key, str):
        raise WrongKey("the key must be text from gitmem.generate_key() or 32 bytes")
    # A byte order mark is what some editors put at the start of a file saved as UTF-8.
    text = key.strip().removeprefix("\ufeff").strip()
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


def _derive(master: bytes, store_id: bytes, purpose: bytes, length: int) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(), length=length, salt=store_id, info=b"gitmem/v1/" + purpose
    ).derive(master)


def new_store_id() -> bytes:
    """A fresh random store id."""
    return os.urandom(STORE_ID_BYTES)


@dataclass(frozen=True)
class StoreKeys:
    """The subkeys of one store, derived with HKDF-SHA256 from the store key and store id."""

    store_id: bytes
    key_check: bytes
    chunker_seed: bytes
    _names: AESSIV = field(repr=False)
    _blobs: AESSIV = field(repr=False)
    _records: AESGCM = field(repr=False)

    @classmethod
    def derive(cls, master: bytes, store_id: bytes) -> StoreKeys:
        """Derive every subkey of ``store_id`` from the raw 32-byte ``master`` key."""
        return cls(
            store_id=store_id,
            key_check=_derive(master, store_id, b"key-check", 32),
            chunker_seed=_derive(master, store_id, b"chunker", 32),
            _names=AESSIV(_derive(master, store_id, b"names", 64)),
            _blobs=AESSIV(_derive(master, store_id, b"chunks", 64)),
            _records=AESGCM(_derive(master, store_id, b"records", 32)),
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

    def open_name(self, entry: str, parent: str) -> tuple[str, str]:
        """Decrypt a tree entry name made by :meth:`seal_name`; returns ``(name, kind)``."""
        kind, body = entry[:1], entry[1:]
        try:
            ct = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (ValueError, TypeError):
            raise IntegrityError("an entry name is not valid gitmem ciphertext") from None
        if not ct or ct[0] != ENVELOPE_VERSION:
            raise IntegrityError("an entry name has an unknown envelope version")
        ad = [_NAME_AD, ct[:1], kind.encode(), parent.encode("utf-8")]
        try:
            plain = self._names.decrypt(ct[1:], ad)
            return plain.decode("utf-8"), kind
        except (InvalidTag, UnicodeDecodeError, ValueError):
            raise IntegrityError("an entry name failed authentication") from None

    # -- blobs ---------------------------------------------------------------------------

    def seal_blob(self, data: bytes, role: bytes) -> bytes:
        """Deterministically encrypt a chunk or header; ``role`` separates the two kinds."""
        ad = [_BLOB_AD, bytes([ENVELOPE_VERSION]), role]
        return bytes([ENVELOPE_VERSION]) + self._blobs.encrypt(data, ad)

    def open_blob(self, blob: bytes, role: bytes) -> bytes:
        """Decrypt a blob made by :meth:`seal_blob` with the same ``role``."""
        if not blob or blob[0] != ENVELOPE_VERSION:
            raise IntegrityError("a blob has an unknown envelope version")
        try:
            return self._blobs.decrypt(blob[1:], [_BLOB_AD, blob[:1], role])
        except (InvalidTag, ValueError):
            raise IntegrityError("a blob failed authentication") from None

    # -- records -------------------------------------------------------------------------

    def seal_record(self, plaintext: bytes, ad: bytes, *, nonce: bytes | None = None) -> bytes:
        """AEAD-encrypt a record bound to ``ad``; ``nonce`` is injectable for test vectors only."""
        nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
        header = bytes([ENVELOPE_VERSION])
        return header + nonce + self._records.encrypt(nonce, plaintext, header + ad)

    def open_record(self, blob: bytes, ad: bytes) -> bytes:
        """Decrypt a record made by :meth:`seal_record` with the same ``ad``."""
        if len(blob) < 1 + NONCE_BYTES + 16 or blob[0] != ENVELOPE_VERSION:
            raise IntegrityError("a record is truncated or has an unknown envelope version")
        nonce = blob[1 : 1 + NONCE_BYTES]
        try:
            return self._records.decrypt(nonce, blob[1 + NONCE_BYTES :], blob[:1] + ad)
        except (InvalidTag, ValueError):
            raise IntegrityError("a record failed authentication") from None
