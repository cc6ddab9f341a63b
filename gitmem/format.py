"""Repository format v2, as ``docs/design.md`` specifies it: names, records, headers, metadata.

Everything that decides what bytes land in the repository is defined here or in ``crypto``; a
change to any of it is a new format version with a migration, never a silent change.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .errors import FormatVersionError, IntegrityError, NoStore

FORMAT_VERSION = 2
# Versions this code reads; a store of a newer version is refused rather than misread.
READABLE_VERSIONS = frozenset({1, 2})
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
ROLE_CHUNK = b"chunk"
ROLE_HEADER = b"header"
COMPRESS_NONE = 0
COMPRESS_ZLIB = 1

_RECORD_AD = b"gitmem/record/v1"

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
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")

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
            )
        except (ValueError, KeyError, TypeError, RecursionError, UnicodeDecodeError):
            raise IntegrityError("a commit record is malformed") from None
        if record.seq < 1:
            raise IntegrityError("a commit record has an invalid sequence number")
        return record


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
    return json.dumps({"size": size, "chunks": chunks}, separators=(",", ":")).encode()


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


@dataclass(frozen=True)
class StoreMeta:
    """The store's public metadata (``refs/gitmem/meta`` and, from format 2, the root tree's
    ``gitmem`` entry): nothing here is secret."""

    format: int
    store_id: bytes
    key_check: bytes

    def to_bytes(self) -> bytes:
        """Canonical JSON of the metadata."""
        body = {
            "gitmem": "store",
            "format": self.format,
            "store_id": self.store_id.hex(),
            "key_check": base64.b64encode(self.key_check).decode("ascii"),
        }
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
            meta = cls(fmt, bytes.fromhex(body["store_id"]), base64.b64decode(body["key_check"]))
        # RecursionError: json.loads recurses once per level of nesting ("[[[[...").
        except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
            raise IntegrityError("the store's metadata is malformed") from None
        if fmt not in READABLE_VERSIONS:
            raise FormatVersionError(
                f"this store has format version {fmt}; this gitmem reads "
                f"{', '.join(map(str, sorted(READABLE_VERSIONS)))} (upgrade gitmem)"
            )
        return meta

    def same_store(self, other: StoreMeta) -> bool:
        """True when ``other`` names the same store under the same key check."""
        return self.store_id == other.store_id and self.key_check == other.key_check
