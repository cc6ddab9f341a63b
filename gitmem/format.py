"""The repository format, as ``docs/design.md`` specifies it: names, records, headers, metadata.

Everything that decides what bytes land in the repository is defined here or in ``crypto``; a
change to any of it is a new format version with a migration, never a silent change.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .crypto import KdfParams
from .errors import FormatVersionError, IntegrityError, NoStore

# A store with key slots (and key epochs) is version 3; one without is version 2 (or 1 until
# its first write).
SLOTS_FORMAT_VERSION = 3
# A store that has written a split directory (gitmem.buckets) is version 4, with or without key
# slots: gitmem that reads only 1-3 would take its bucket trees for forged entries.
SPLIT_FORMAT_VERSION = 4
# A store whose history a redaction rewrote (gitmem.redact) is this version from the redaction's
# commit on: gitmem that does not know redactions would refuse the rewritten branch as a
# rollback, and its users would be told to accept it, keeping the old history beside it.
REDACT_FORMAT_VERSION = 5
# Format 6, "compact history": compressed records and delta chunks (file trees with base
# entries). gitmem that reads only 1-5 would refuse both as malformed.
COMPACT_FORMAT_VERSION = 6
# The version this code creates stores at, and makes a store with its first commit (from format
# 2 on the metadata is in every root tree; a store made by gitmem 0.1 is format 1 until then).
FORMAT_VERSION = COMPACT_FORMAT_VERSION
# Versions this code reads; a store of a newer version is refused rather than misread.
READABLE_VERSIONS = frozenset({1, 2, 3, 4, REDACT_FORMAT_VERSION, COMPACT_FORMAT_VERSION})
# Records did not change with format 2 (a merge is a new command, not a new layout).
RECORD_VERSION = 1
READABLE_RECORD_VERSIONS = frozenset({1})
# The root tree's entry holding the metadata blob (format 2): so it travels with the branch.
# Encrypted entry names start with a kind character (f or d), so this one cannot collide.
META_ENTRY = "gitmem"

KIND_FILE = "f"
KIND_DIR = "d"
HEADER_ENTRY = "h"
CHUNK_ENTRY_PREFIX = "c"
# A file tree's base entries (format 6) are "d" and the base blob's id: they sort after the
# chunks and before the header, and a base added or dropped leaves every other entry as it was,
# so a file tree's next version is a small delta of it.
BASE_ENTRY_PREFIX = "d"
ROLE_CHUNK = b"chunk"
ROLE_HEADER = b"header"
COMPRESS_NONE = 0
COMPRESS_ZLIB = 1
# A chunk compressed with zlib against a preset dictionary, the bytes of the chunks it names
# as bases (format 6; docs/design.md, "File trees").
COMPRESS_DELTA = 2
# The longest chain of delta chunks a reader follows (a delta of a delta ...): a bound on the
# work of a read; writers stop far short of it (tree.DELTA_CHAIN).
MAX_DELTA_DEPTH = 64

_RECORD_AD = b"gitmem/record/v1"
# Canonical JSON (sorted keys, no spaces, ASCII escapes), as ``json.dumps(..., sort_keys=True,
# separators=(",", ":"))`` writes it; one encoder, not one built per record.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))

# The largest object of each kind a v1 store holds (docs/design.md, "Sizes"). Writers never
# exceed them, and readers check an object's declared size against them before inflating it,
# so a small planted object that inflates to gigabytes (a decompression bomb) costs nothing.
MIB = 1024 * 1024
MAX_META_BYTES = 64 * 1024
MAX_HEADER_BLOB_BYTES = 1024
# A chunk blob is its plaintext (method byte + payload, never longer than the chunk) plus the
# 17-byte envelope, so it is at most the file's size + 18 bytes.
CHUNK_BLOB_OVERHEAD = 18
MAX_BLOB_BYTES = 64 * MIB
MAX_TREE_BYTES = 16 * MIB
MAX_COMMIT_BYTES = 16 * MIB


def chunk_entry(index: int) -> str:
    """The tree entry name of a file's ``index``-th chunk (sorts in chunk order)."""
    return f"{CHUNK_ENTRY_PREFIX}{index:08x}"


def base_entry(oid: str) -> str:
    """The tree entry name of a file's base chunk ``oid`` (format 6)."""
    return BASE_ENTRY_PREFIX + oid


def record_ad(store_id: bytes, tree: str, parents: tuple[str, ...] | list[str]) -> bytes:
    """Associated data binding a commit record to its store, tree and parents."""
    if len(parents) > 255:
        # gitmem writes at most two parents; the count is one byte in the associated data.
        raise IntegrityError("a commit has more parents than a gitmem commit can have")
    return (
        _RECORD_AD
        + store_id
        + bytes.fromhex(tree)
        + bytes([len(parents)])
        + b"".join(bytes.fromhex(p) for p in parents)
    )


@dataclass(frozen=True)
class Record:
    """The decrypted content of a commit message: one operation on the memory."""

    seq: int
    time_ns: int
    session: str
    command: str
    paths: tuple[str, ...]
    version: str
    detail: dict[str, Any] = field(default_factory=dict)
    # The plaintext size of every file in the commit's tree, when the writer knew it.
    store_bytes: int | None = None

    @property
    def time(self) -> datetime:
        """The operation's time, timezone-aware UTC."""
        return datetime.fromtimestamp(self.time_ns / 1e9, tz=timezone.utc)

    def to_bytes(self) -> bytes:
        """Canonical JSON of the record."""
        body = {
            "v": RECORD_VERSION,
            "seq": self.seq,
            "time_ns": self.time_ns,
            "session": self.session,
            "command": self.command,
            "paths": list(self.paths),
            "gitmem": self.version,
            "detail": self.detail,
        }
        if self.store_bytes is not None:
            body["bytes"] = self.store_bytes
        return _CANONICAL.encode(body).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Record:
        """Parse a decrypted record; :class:`IntegrityError` when it is malformed."""
        try:
            body = json.loads(data.decode("utf-8"))
            if body["v"] not in READABLE_RECORD_VERSIONS:
                raise FormatVersionError(f"a commit record has format version {body['v']}")
            record = cls(
                seq=int(body["seq"]),
                time_ns=int(body["time_ns"]),
                session=str(body["session"]),
                command=str(body["command"]),
                paths=tuple(str(p) for p in body["paths"]),
                version=str(body["gitmem"]),
                detail=dict(body.get("detail", {})),
                store_bytes=body.get("bytes"),
            )
        except (ValueError, KeyError, TypeError, RecursionError, UnicodeDecodeError):
            raise IntegrityError("a commit record is malformed") from None
        if record.seq < 1:
            raise IntegrityError("a commit record has an invalid sequence number")
        size = record.store_bytes
        if "bytes" in body and (type(size) is not int or size < 0):
            raise IntegrityError("a commit record has an invalid store size")
        return record


# Format 6: the plaintext a commit record is sealed as begins with this byte, then the record's
# JSON as a raw DEFLATE stream (RFC 1951) against RECORD_DICTIONARY. A record written before
# format 6 is its JSON, which begins with "{".
RECORD_DEFLATED = 0x01
# The preset dictionary of compressed records (docs/design.md, "Records"): what records hold
# besides their values, the most frequent last (DEFLATE reaches nearer strings in fewer bits),
# each line ending in a newline.
# Part of the format: changing it makes every compressed record unreadable.
RECORD_DICTIONARY = (
    b'"detail":{"base":"","conflicts":[],"merged":""}\n'
    b'"detail":{"from":"","from_seq":}\n'
    b'"detail":{"operations":,"rewrote":"","rewrote_seq":,"versions":}\n'
    b'"detail":{"redacted":[{"kind":"","line":}]}\n'
    b'"command":"merge","command":"redact","command":"restore","command":"keys",\n'
    b'"command":"delete","command":"rename","command":"insert","command":"create",\n'
    b'"/memories/notes/","/memories/features.md","/memories/progress.md",\n'
    b'{"bytes":,"command":"str_replace","detail":{},"gitmem":"0.1.0","paths":["/memories/\n'
    b'"],"seq":,"session":"2026","time_ns":17,"v":1}\n'
)


def seal_plaintext(record: Record) -> bytes:
    """The plaintext ``record`` is sealed as (format 6: compressed against the dictionary)."""
    # A 2 KiB window (records are a few hundred bytes, the dictionary 541): zlib sets up a
    # 32 KiB one in about 90 us, more than the rest of a small write's record costs.
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -11, 2, zdict=RECORD_DICTIONARY)
    return bytes([RECORD_DEFLATED]) + squeeze.compress(record.to_bytes()) + squeeze.flush()


def open_plaintext(plain: bytes) -> Record:
    """The record whose sealed plaintext is ``plain`` (compressed or, before format 6, JSON);
    :class:`IntegrityError` when it is malformed."""
    if plain[:1] != bytes([RECORD_DEFLATED]):
        return Record.from_bytes(plain)  # JSON, or refused as malformed
    inflater = zlib.decompressobj(-15, zdict=RECORD_DICTIONARY)
    try:
        data = inflater.decompress(memoryview(plain)[1:], MAX_COMMIT_BYTES + 1)
    except zlib.error:
        raise IntegrityError("a commit record is malformed") from None
    if not inflater.eof or inflater.unused_data or len(data) > MAX_COMMIT_BYTES:
        raise IntegrityError("a commit record is malformed")
    return Record.from_bytes(data)


def encode_message(sealed: bytes) -> bytes:
    """A commit message carrying a sealed record (base64, so git tools stay happy)."""
    return base64.b64encode(sealed)


def decode_message(message: bytes) -> bytes:
    """The sealed record inside a commit message."""
    try:
        return base64.b64decode(message.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise IntegrityError("a commit message is not a gitmem record") from None


def encode_header(size: int, chunks: int) -> bytes:
    """Plaintext of a file header: the file's size in bytes and its chunk count."""
    # The bytes json.dumps({"size": size, "chunks": chunks}, separators=(",", ":")) gives
    # for two ints, formatted directly: a few microseconds less per file written.
    return b'{"size":%d,"chunks":%d}' % (size, chunks)


def decode_header(data: bytes) -> tuple[int, int]:
    """``(size, chunks)`` from a decrypted file header."""
    try:
        body = json.loads(data)
        size, chunks = int(body["size"]), int(body["chunks"])
    except (ValueError, KeyError, TypeError, RecursionError):
        raise IntegrityError("a file header is malformed") from None
    if size < 0 or chunks < 0:
        raise IntegrityError("a file header is malformed")
    return size, chunks


SLOT_PASSPHRASE = "passphrase"
SLOT_KEY = "key"
_SLOT_AD = b"gitmem/slot/v2"
# Sizes of a slot's binary fields: a salt; an X25519 public key; a wrapped 32-byte secret
# (nonce, ciphertext, tag); a keyring sealed to the slot (ephemeral key, nonce, epoch number and
# epoch key, tag). A label is at most 256 bytes of UTF-8 before sealing.
_SLOT_SIZES = {"salt": 16, "public": 32, "private": 60, "keyring": 96}
MAX_LABEL_BYTES = 256
MAX_SLOTS = 64


@dataclass(frozen=True)
class Slot:
    """One key slot of ``refs/gitmem/meta``: a way in for one holder (public, nothing secret)."""

    slot: str
    kind: str
    salt: bytes
    kdf: KdfParams | None
    public: bytes
    private: bytes
    keyring: bytes
    label: bytes

    def params_json(self) -> dict[str, Any]:
        """The slot's parameters: everything its wrapped secret binds as associated data."""
        kdf: dict[str, Any] = {"name": "hkdf-sha256"}
        if self.kdf is not None:
            kdf = {
                "name": "argon2id",
                "memory_kib": self.kdf.memory_kib,
                "iterations": self.kdf.iterations,
                "lanes": self.kdf.lanes,
            }
        return {
            "slot": self.slot,
            "kind": self.kind,
            "kdf": kdf,
            "salt": _b64(self.salt),
            "public": _b64(self.public),
        }

    def params_ad(self, store_id: bytes) -> bytes:
        """Associated data of the wrapped secret: the store id and the slot's parameters."""
        body = json.dumps(self.params_json(), sort_keys=True, separators=(",", ":"))
        return _SLOT_AD + store_id + body.encode("ascii")

    def to_json(self) -> dict[str, Any]:
        """The slot as it is stored."""
        body = self.params_json()
        body.update(private=_b64(self.private), keyring=_b64(self.keyring), label=_b64(self.label))
        return body

    @classmethod
    def from_json(cls, body: Any) -> Slot:
        """Parse and bounds-check a stored slot (before anything is derived from it)."""
        try:
            slot_id, kind, kdf = str(body["slot"]), body["kind"], body["kdf"]
            raw = {name: _unb64(body[name]) for name in (*_SLOT_SIZES, "label")}
            if kind == SLOT_PASSPHRASE and kdf.get("name") == "argon2id":
                params: KdfParams | None = KdfParams(
                    kdf["memory_kib"], kdf["iterations"], kdf["lanes"]
                )
            elif kind == SLOT_KEY and kdf.get("name") == "hkdf-sha256":
                params = None
            else:
                raise IntegrityError("a key slot has an unknown kind or key derivation")
        except (KeyError, TypeError, AttributeError, ValueError, binascii.Error):
            raise IntegrityError("a key slot is malformed") from None
        if params is not None:
            params.check()
        if not (len(slot_id) == 8 and all(c in "0123456789abcdef" for c in slot_id)):
            raise IntegrityError("a key slot has a malformed id")
        for name, size in _SLOT_SIZES.items():
            if len(raw[name]) != size:
                raise IntegrityError(f"a key slot's {name} has the wrong length")
        if not 28 <= len(raw["label"]) <= 28 + MAX_LABEL_BYTES:
            raise IntegrityError("a key slot's label has the wrong length")
        return cls(
            slot_id,
            kind,
            raw["salt"],
            params,
            raw["public"],
            raw["private"],
            raw["keyring"],
            raw["label"],
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise TypeError("not base64 text")
    return base64.b64decode(text, validate=True)


@dataclass(frozen=True)
class StoreMeta:
    """The store's public metadata (``refs/gitmem/meta`` and, from format 2, the root tree's
    ``gitmem`` entry): nothing here is secret.

    A format 3 store also lists its key ``slots`` and its epoch ``links`` (``links[k-1]``
    seals epoch key ``k-1`` under epoch key ``k``); a format 4 store may (:attr:`has_slots`).
    """

    format: int
    store_id: bytes
    key_check: bytes
    slots: tuple[Slot, ...] = ()
    links: tuple[bytes, ...] = ()
    # A redaction rewrote the history: format 5 says so by itself; from format 6, which every
    # store written by this version has, the field "redacted": true does.
    redacted: bool = False

    @property
    def has_slots(self) -> bool:
        """True when the store is opened through key slots (format 3, or 4 with ``slots``)."""
        return self.format == SLOTS_FORMAT_VERSION or bool(self.slots)

    @property
    def epoch(self) -> int:
        """The newest key epoch (0 until the first rotation)."""
        return len(self.links)

    def to_bytes(self) -> bytes:
        """Canonical JSON of the metadata."""
        body: dict[str, Any] = {
            "gitmem": "store",
            "format": self.format,
            "store_id": self.store_id.hex(),
            "key_check": base64.b64encode(self.key_check).decode("ascii"),
        }
        if self.has_slots:
            body["slots"] = [slot.to_json() for slot in self.slots]
            body["epochs"] = [_b64(link) for link in self.links]
        if self.redacted and self.format >= COMPACT_FORMAT_VERSION:
            body["redacted"] = True
        return json.dumps(body, sort_keys=True, indent=1).encode() + b"\n"

    @classmethod
    def from_bytes(cls, data: bytes) -> StoreMeta:
        """Parse the metadata blob; refuses unknown format versions."""
        try:
            body = json.loads(data)
            if not isinstance(body, dict):
                raise TypeError("the metadata is not a JSON object")
            if body.get("gitmem") != "store":
                raise NoStore("the repository's gitmem metadata is not recognised")
            fmt = int(body["format"])
            store_id, check = bytes.fromhex(body["store_id"]), base64.b64decode(body["key_check"])
            redacted = body.get("redacted", False)
            if type(redacted) is not bool or (redacted and fmt < COMPACT_FORMAT_VERSION):
                raise ValueError("redacted is true, from format 6")
            redacted = redacted or fmt == REDACT_FORMAT_VERSION
        # RecursionError: json.loads recurses once per level of nesting ("[[[[...").
        except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
            raise IntegrityError("the store's metadata is malformed") from None
        if fmt not in READABLE_VERSIONS:
            raise FormatVersionError(
                f"this store has format version {fmt}; this gitmem reads "
                f"{', '.join(map(str, sorted(READABLE_VERSIONS)))} (upgrade gitmem)"
            )
        if fmt < SLOTS_FORMAT_VERSION or (fmt >= SPLIT_FORMAT_VERSION and "slots" not in body):
            # Format 4 without key slots: a format 2 store that split a directory.
            if "epochs" in body:
                raise IntegrityError("the store's key slots are malformed")
            return cls(fmt, store_id, check, redacted=redacted)
        try:
            raw_slots, raw_links = body["slots"], body["epochs"]
            if not isinstance(raw_slots, list) or not isinstance(raw_links, list):
                raise TypeError("slots and epochs are lists")
            if not 1 <= len(raw_slots) <= MAX_SLOTS or len(raw_links) > 2**20:
                raise ValueError("too many slots or epochs")
            links = tuple(_unb64(link) for link in raw_links)
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise IntegrityError("the store's key slots are malformed") from None
        slots = tuple(Slot.from_json(slot) for slot in raw_slots)
        if len({slot.slot for slot in slots}) != len(slots):
            raise IntegrityError("the store lists one key slot twice")
        return cls(fmt, store_id, check, slots, links, redacted)

    def same_store(self, other: StoreMeta) -> bool:
        """True when ``other`` names the same store under the same key check."""
        return self.store_id == other.store_id and self.key_check == other.key_check
