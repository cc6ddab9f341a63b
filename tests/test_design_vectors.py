"""A second reader of the repository format, written from ``docs/design.md`` alone.

Nothing here imports gitmem's ``crypto``, ``format`` or ``tree`` modules: subkeys come from a
stdlib HKDF, names and blobs are opened by an RFC 5297 AES-SIV built from AES-CMAC and AES-CTR,
records by AES-GCM, and the repository is read with pygit2. gitmem only makes the store. When
the bytes gitmem writes change without the document changing, these tests fail.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.cmac import CMAC
from helpers_repo import published

import gitmem

# -- the constants of docs/design.md, typed in from the document ------------------------------

BRANCH = "refs/heads/main"
META_REF = "refs/gitmem/meta"
META_ENTRY = "gitmem"
ROOT = "/memories"
KEY_PREFIX = "gitmem-key-1:"
ENVELOPE_V1 = b"\x01"
NAME_AD = b"gitmem/name/v1"
BLOB_AD = b"gitmem/blob/v1"
RECORD_AD = b"gitmem/record/v1"
KEY_CHECK_MSG = b"gitmem/v1/key-check"
SUBKEYS = {  # purpose -> length in bytes; info is b"gitmem/v1/" + purpose
    "key-check": 32,
    "chunker": 32,
    "names": 64,
    "chunks": 64,
    "records": 32,
}
DIR_MODE = 0o040000
BLOB_MODE = 0o100644
IDENTITY = b"gitmem <gitmem@invalid>"
SESSION = "design-vectors"
# Format 6: the preset dictionary of compressed records, each line followed by a newline.
RECORD_DICTIONARY = "".join(
    line + "\n"
    for line in (
        '"detail":{"base":"","conflicts":[],"merged":""}',
        '"detail":{"from":"","from_seq":}',
        '"detail":{"operations":,"rewrote":"","rewrote_seq":,"versions":}',
        '"detail":{"redacted":[{"kind":"","line":}]}',
        '"command":"merge","command":"redact","command":"restore","command":"keys",',
        '"command":"delete","command":"rename","command":"insert","command":"create",',
        '"/memories/notes/","/memories/features.md","/memories/progress.md",',
        '{"bytes":,"command":"str_replace","detail":{},"gitmem":"0.1.0","paths":["/memories/',
        '"],"seq":,"session":"2026","time_ns":17,"v":1}',
    )
).encode("ascii")

# -- primitives, from their RFCs ----------------------------------------------------------------


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF-SHA256 (extract, then expand)."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out, counter = out + block, counter + 1
    return out[:length]


def _cmac(key: bytes, data: bytes) -> bytes:
    mac = CMAC(algorithms.AES(key))
    mac.update(data)
    return mac.finalize()


def _dbl(block: bytes) -> bytes:
    n = int.from_bytes(block, "big") << 1
    if n >> 128:
        n = (n ^ 0x87) & ((1 << 128) - 1)
    return n.to_bytes(16, "big")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _s2v(k1: bytes, strings: list[bytes]) -> bytes:
    d = _cmac(k1, bytes(16))
    for s in strings[:-1]:
        d = _xor(_dbl(d), _cmac(k1, s))
    last = strings[-1]
    if len(last) >= 16:
        t = last[:-16] + _xor(last[-16:], d)
    else:
        t = _xor(_dbl(d), (last + b"\x80").ljust(16, b"\x00"))
    return _cmac(k1, t)


def _ctr(k2: bytes, v: bytes, data: bytes) -> bytes:
    q = bytearray(v)
    q[8] &= 0x7F
    q[12] &= 0x7F
    enc = Cipher(algorithms.AES(k2), modes.CTR(bytes(q))).encryptor()
    return enc.update(data) + enc.finalize()


def siv_seal(key: bytes, plaintext: bytes, ad: list[bytes]) -> bytes:
    """RFC 5297 AES-SIV: ``V || C`` with S2V over ``(*ad, plaintext)``; K1 = first half."""
    half = len(key) // 2
    v = _s2v(key[:half], [*ad, plaintext])
    return v + _ctr(key[half:], v, plaintext)


def siv_open(key: bytes, sealed: bytes, ad: list[bytes]) -> bytes:
    """Inverse of :func:`siv_seal`; ValueError when the synthetic IV does not match."""
    half = len(key) // 2
    v, c = sealed[:16], sealed[16:]
    plaintext = _ctr(key[half:], v, c)
    if not hmac.compare_digest(_s2v(key[:half], [*ad, plaintext]), v):
        raise ValueError("AES-SIV authentication failed")
    return plaintext


def b64url_nopad(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def tree_of(repo: pygit2.Repository, oid: pygit2.Oid | str) -> pygit2.Tree:
    obj = repo[oid]
    assert isinstance(obj, pygit2.Tree)
    return obj


def blob_of(repo: pygit2.Repository, oid: pygit2.Oid | str) -> bytes:
    obj = repo[oid]
    assert isinstance(obj, pygit2.Blob)
    return bytes(obj.data)


def commit_of(repo: pygit2.Repository, oid: pygit2.Oid | str) -> pygit2.Commit:
    obj = repo[oid]
    assert isinstance(obj, pygit2.Commit)
    return obj


# -- the second reader --------------------------------------------------------------------------


@dataclass
class Reader:
    """Opens one store as docs/design.md says, without gitmem."""

    repo: pygit2.Repository
    store_id: bytes
    keys: dict[str, bytes]

    @classmethod
    def open(cls, path: Path, key_text: str) -> Reader:
        repo = pygit2.Repository(str(published(path)))
        # Format 2: the head's root tree carries the metadata; the ref must agree with it.
        root = commit_of(repo, repo.references[BRANCH].target).tree
        meta = json.loads(blob_of(repo, root[META_ENTRY].id))
        assert root[META_ENTRY].filemode == BLOB_MODE
        ref_meta = json.loads(blob_of(repo, repo.references[META_REF].target))
        assert (ref_meta["store_id"], ref_meta["key_check"]) == (
            meta["store_id"],
            meta["key_check"],
        )
        # Formats 4 (split directories) and 6 (compact history) without key slots read as
        # format 2 does, but for what they add.
        assert meta["gitmem"] == "store" and meta["format"] in (2, 4, 6) and "slots" not in meta
        store_id = bytes.fromhex(meta["store_id"])
        master = decode_key_text(key_text)
        keys = {
            purpose: hkdf_sha256(master, store_id, b"gitmem/v1/" + purpose.encode(), length)
            for purpose, length in SUBKEYS.items()
        }
        check = hmac.new(keys["key-check"], KEY_CHECK_MSG + store_id, hashlib.sha256).digest()
        assert base64.b64decode(meta["key_check"]) == check
        return cls(repo, store_id, keys)

    def open_name(self, entry: str, parent: str) -> tuple[str, str]:
        kind, sealed = entry[:1], b64url_nopad(entry[1:])
        assert sealed[:1] == ENVELOPE_V1
        ad = [NAME_AD, ENVELOPE_V1, kind.encode(), parent.encode("utf-8")]
        return siv_open(self.keys["names"], sealed[1:], ad).decode("utf-8"), kind

    def seal_name(self, name: str, parent: str, kind: str) -> str:
        ad = [NAME_AD, ENVELOPE_V1, kind.encode(), parent.encode("utf-8")]
        sealed = ENVELOPE_V1 + siv_seal(self.keys["names"], name.encode("utf-8"), ad)
        return kind + base64.urlsafe_b64encode(sealed).decode("ascii").rstrip("=")

    def open_blob(self, oid: pygit2.Oid, role: bytes) -> bytes:
        blob = blob_of(self.repo, oid)
        assert blob[:1] == ENVELOPE_V1
        return siv_open(self.keys["chunks"], blob[1:], [BLOB_AD, ENVELOPE_V1, role])

    def record_ad(self, commit: pygit2.Commit) -> bytes:
        return (
            ENVELOPE_V1
            + RECORD_AD
            + self.store_id
            + commit.tree_id.raw
            + bytes([len(commit.parent_ids)])
            + b"".join(p.raw for p in commit.parent_ids)
        )

    def open_record(self, commit: pygit2.Commit) -> bytes:
        sealed = base64.b64decode(commit.raw_message.strip(), validate=True)
        assert sealed[:1] == ENVELOPE_V1
        nonce, body = sealed[1:13], sealed[13:]
        return AESGCM(self.keys["records"]).decrypt(nonce, body, self.record_ad(commit))

    def record_json(self, commit: pygit2.Commit) -> bytes:
        """The record's JSON: the sealed plaintext itself, or (format 6) inflated from it."""
        plain = self.open_record(commit)
        if plain[:1] == b"{":
            return plain
        assert plain[:1] == b"\x01"
        inflater = zlib.decompressobj(-15, zdict=RECORD_DICTIONARY)
        data = inflater.decompress(plain[1:])
        assert inflater.eof and not inflater.unused_data
        return data

    def head(self) -> pygit2.Commit:
        return commit_of(self.repo, self.repo.references[BRANCH].target)

    def read_dir(
        self, tree_id: pygit2.Oid, parent: str, threshold: int | None = None
    ) -> dict[str, tuple[str, pygit2.Oid]]:
        """A directory's entries, flat or split (format 4); with ``threshold``, its shape must
        also be the one writers produce."""
        out: dict[str, tuple[str, pygit2.Oid]] = {}
        self._read_level(tree_id, parent, 0, 0, out, threshold)
        return out

    def _read_level(
        self,
        tree_id: pygit2.Oid,
        parent: str,
        level: int,
        prefix: int,
        out: dict[str, tuple[str, pygit2.Oid]],
        threshold: int | None,
    ) -> int:
        entries = []
        for entry in tree_of(self.repo, tree_id):
            if level == 0 and parent == ROOT and entry.name == META_ENTRY:
                assert entry.filemode == BLOB_MODE
                continue
            entries.append(entry)
        if entries and str(entries[0].name).startswith("b"):
            # Buckets b00-b3f, non-empty, at most 4 levels down.
            assert level < 4
            count = 0
            for entry in entries:
                name = str(entry.name)
                assert len(name) == 3 and name[0] == "b" and entry.filemode == DIR_MODE
                assert name[1:] == f"{int(name[1:], 16):02x}" and int(name[1:], 16) < 64
                bucket = (prefix << 6) | int(name[1:], 16)
                below = self._read_level(entry.id, parent, level + 1, bucket, out, threshold)
                assert below > 0
                count += below
            assert threshold is None or count > threshold
            return count
        for entry in entries:
            assert entry.filemode == DIR_MODE
            name, kind = self.open_name(str(entry.name), parent)
            assert kind in ("f", "d") and name not in out
            # In its bucket: the synthetic IV's first 24 bits start with the buckets' numbers.
            bits = int.from_bytes(b64url_nopad(str(entry.name)[1:])[1:4], "big")
            assert bits >> (24 - 6 * level) == prefix
            out[name] = (kind, entry.id)
        assert threshold is None or len(entries) <= threshold or level == 4
        return len(entries)

    def read_file(self, tree_id: pygit2.Oid) -> bytes:
        entries = {str(e.name): e for e in tree_of(self.repo, tree_id)}
        assert all(e.filemode == BLOB_MODE for e in entries.values())
        header = json.loads(self.open_blob(entries.pop("h").id, b"header"))
        # Format 6: base entries, each named "d" and its own blob id.
        bases = {str(e.id): e.id for name, e in entries.items() if name.startswith("d")}
        assert all(f"d{oid}" in entries for oid in bases)
        chunks = sorted(name for name in entries if not name.startswith("d"))
        assert chunks == [f"c{i:08x}" for i in range(header["chunks"])]
        plains: dict[str, bytes] = {}

        def unpack(oid: pygit2.Oid, depth: int) -> bytes:
            assert depth <= 64
            if str(oid) not in plains:
                body = self.open_blob(oid, b"chunk")
                if body[:1] == b"\x02":
                    count = body[1]
                    named = [body[2 + 20 * i : 22 + 20 * i].hex() for i in range(count)]
                    zdict = b"".join(unpack(bases[b], depth + 1) for b in named)
                    inflater = zlib.decompressobj(-15, zdict=zdict)
                    plains[str(oid)] = inflater.decompress(body[2 + 20 * count :])
                    assert inflater.eof and not inflater.unused_data
                else:
                    plains[str(oid)] = unpack_chunk(body)
            return plains[str(oid)]

        data = b"".join(unpack(entries[name].id, 0) for name in chunks)
        assert len(data) == header["size"]
        return data

    def files(self, tree_id: pygit2.Oid, path: str = ROOT) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, (kind, oid) in self.read_dir(tree_id, path).items():
            child = f"{path}/{name}"
            if kind == "d":
                out.update(self.files(oid, child))
            else:
                out[child] = self.read_file(oid).decode("utf-8")
        return out


def decode_key_text(text: str) -> bytes:
    text = text.strip()
    assert text.startswith(KEY_PREFIX)
    blob = b64url_nopad(text[len(KEY_PREFIX) :])
    raw, check = blob[:32], blob[32:]
    assert len(raw) == 32 and check == hashlib.sha256(raw).digest()[:4]
    return raw


def unpack_chunk(body: bytes) -> bytes:
    if body[:1] == b"\x00":
        return body[1:]
    assert body[:1] == b"\x01"
    return zlib.decompress(body[1:])


# -- a store made by gitmem ---------------------------------------------------------------------

PROGRESS = "".join(f"- step {i}: done\n" for i in range(100))
FILES_AFTER = {
    "/memories/notes/progress.md": PROGRESS.replace("step 7:", "step seven:"),
    "/memories/notes/moved/x.txt": "ab",
    "/memories/empty.md": "",
    "/memories/ünïcode.md": "é\r\n",
}


@dataclass
class Made:
    path: Path
    key: str
    state_dir: Path
    store: gitmem.MemoryStore
    started_ns: int


@pytest.fixture
def made(tmp_path: Path, key: str) -> Made:
    """A store with nested directories, a compressed, a raw and an empty file, six commits."""
    path, state = tmp_path / "store.git", tmp_path / "state"
    started = time.time_ns()
    store = gitmem.MemoryStore.open(path, key, create=True, session=SESSION, state_dir=state)
    p = gitmem.parse_path
    store.create(p("/memories/notes/progress.md"), PROGRESS)
    store.create(p("/memories/notes/sub/x.txt"), "ab")
    store.create(p("/memories/empty.md"), "")
    store.create(p("/memories/u\u0308ni\u0308code.md"), "é\r\n")  # stored NFC
    store.str_replace(p("/memories/notes/progress.md"), "step 7:", "step seven:")
    store.rename(p("/memories/notes/sub"), p("/memories/notes/moved"))
    return Made(path, key, state, store, started)


# -- the tests ----------------------------------------------------------------------------------


def test_aes_siv_is_rfc5297() -> None:
    """The document's AES-SIV is RFC 5297's; this reader's SIV reproduces vector A.1."""
    key = bytes.fromhex("fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
    ad = bytes.fromhex("101112131415161718191a1b1c1d1e1f2021222324252627")
    plaintext = bytes.fromhex("112233445566778899aabbccddee")
    sealed = siv_seal(key, plaintext, [ad])
    assert sealed.hex() == "85632d07c6e8f37f950acd320a2ecc9340c02b9690c4dc04daef7f6afe5c"
    assert siv_open(key, sealed, [ad]) == plaintext


def test_key_text_format() -> None:
    text = gitmem.generate_key()
    assert len(text) == 61 and text.startswith(KEY_PREFIX)
    body = text[len(KEY_PREFIX) :]
    assert len(body) == 48 and "=" not in body
    assert set(body) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert len(decode_key_text(text)) == 32
    with pytest.raises(AssertionError):  # one changed character fails the checksum
        decode_key_text(text[:-1] + ("A" if text[-1] != "A" else "B"))


def test_refs_and_metadata_blob(made: Made) -> None:
    repo = pygit2.Repository(str(published(made.path)))
    assert repo.is_bare
    assert sorted(repo.references) == [META_REF, BRANCH]
    assert repo.references["HEAD"].target == BRANCH
    meta_blob = blob_of(repo, repo.references[META_REF].target)
    reader = Reader.open(made.path, made.key)
    check = hmac.new(
        reader.keys["key-check"], KEY_CHECK_MSG + reader.store_id, hashlib.sha256
    ).digest()
    expected = (
        "{\n"
        ' "format": 6,\n'  # written by this version: compressed records (format 6)
        ' "gitmem": "store",\n'
        f' "key_check": "{base64.b64encode(check).decode()}",\n'
        f' "store_id": "{reader.store_id.hex()}"\n'
        "}\n"
    )
    assert meta_blob == expected.encode()
    # The same blob travels in every root tree, so a copy of the branch alone is a store.
    for commit in repo.walk(repo.references[BRANCH].target):
        assert commit.tree[META_ENTRY].id == repo.references[META_REF].target
    assert len(reader.store_id) == 16
    assert made.store.store_id == reader.store_id.hex()


def test_head_commit_and_record(made: Made) -> None:
    reader = Reader.open(made.path, made.key)
    head = reader.head()
    raw = head.read_raw()
    headers, _, message = raw.partition(b"\n\n")
    # The neutral identity at the operation's sequence number (6, below) as time, offset +0000.
    assert headers.split(b"\n")[-2:] == [
        b"author " + IDENTITY + b" 6 +0000",
        b"committer " + IDENTITY + b" 6 +0000",
    ]
    # The message is the sealed record in standard padded base64, with no newline.
    assert message == head.raw_message
    sealed = base64.b64decode(message, validate=True)
    assert base64.b64encode(sealed) == message
    assert len(sealed) == 1 + 12 + len(reader.open_record(head)) + 16
    # Format 6: the sealed plaintext is the record's JSON compressed against the dictionary.
    assert reader.open_record(head)[:1] == b"\x01"
    plaintext = reader.record_json(head)
    record = json.loads(plaintext)
    assert plaintext == json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    assert made.started_ns <= record.pop("time_ns") <= time.time_ns()
    # The size of the commit's tree: every file's UTF-8 length, summed.
    files = reader.files(head.tree_id)
    assert record.pop("bytes") == sum(len(text.encode()) for text in files.values())
    assert record == {
        "v": 1,
        "seq": 6,
        "session": SESSION,
        "command": "rename",
        "paths": ["/memories/notes/sub", "/memories/notes/moved"],
        "gitmem": gitmem.__version__,
        "detail": {},
    }
    assert made.store.head() == str(head.id)


def test_a_record_is_canonical_json_whatever_it_holds() -> None:
    # The record's bytes are design.md's canonical JSON (sorted keys, no spaces, ASCII escapes)
    # for any content: non-ASCII text, nested details, with and without a size.
    from gitmem.format import Record

    for store_bytes in (None, 0, 12345):
        record = Record(
            seq=7,
            time_ns=1_700_000_000_123_456_789,
            session="séance-\u2603-\U0001f600",
            command="str_replace",
            paths=("/memories/notes/caf\u00e9.md", '/memories/"quoted"\\back'),
            version=gitmem.__version__,
            detail={
                "redacted": [{"kind": "aws-access-key", "line": 3}],
                "z": {"b": 1, "a": [True, None, 1.5]},
            },
            store_bytes=store_bytes,
        )
        body = {
            "v": 1,
            "seq": 7,
            "time_ns": record.time_ns,
            "session": record.session,
            "command": record.command,
            "paths": list(record.paths),
            "gitmem": gitmem.__version__,
            "detail": record.detail,
        }
        if store_bytes is not None:
            body["bytes"] = store_bytes
        expected = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        assert record.to_bytes() == expected
        assert expected.isascii()
        assert Record.from_bytes(expected) == record


def test_record_associated_data_binds_tree_and_parents(made: Made) -> None:
    reader = Reader.open(made.path, made.key)
    head = reader.head()
    sealed = base64.b64decode(head.raw_message, validate=True)
    aead = AESGCM(reader.keys["records"])
    good = reader.record_ad(head)
    aead.decrypt(sealed[1:13], sealed[13:], good)
    for position in (0, 1 + 16, 1 + 16 + 16, len(good) - 1):  # version, store id, tree, parent
        bad = bytearray(good)
        bad[position] ^= 1
        with pytest.raises(InvalidTag):
            aead.decrypt(sealed[1:13], sealed[13:], bytes(bad))
    parent_count = good[1 + 16 + 16 + 20]
    assert parent_count == 1 and len(good) == 1 + 16 + 16 + 20 + 1 + 20


def test_every_record_chains_by_sequence(made: Made) -> None:
    reader = Reader.open(made.path, made.key)
    commit = reader.head()
    seen = []
    while True:
        record = json.loads(reader.record_json(commit))
        seen.append((record["seq"], record["command"], record["paths"]))
        if not commit.parent_ids:
            break
        commit = commit_of(reader.repo, commit.parent_ids[0])
    assert seen == [
        (6, "rename", ["/memories/notes/sub", "/memories/notes/moved"]),
        (5, "str_replace", ["/memories/notes/progress.md"]),
        (4, "create", ["/memories/ünïcode.md"]),
        (3, "create", ["/memories/empty.md"]),
        (2, "create", ["/memories/notes/sub/x.txt"]),
        (1, "create", ["/memories/notes/progress.md"]),
    ]


def test_names_headers_and_chunks(made: Made) -> None:
    reader = Reader.open(made.path, made.key)
    root = reader.read_dir(reader.head().tree_id, ROOT)
    assert {name: kind for name, (kind, _) in root.items()} == {
        "notes": "d",
        "empty.md": "f",
        "ünïcode.md": "f",
    }
    # Names are deterministic: sealing again gives the very entry name in the tree.
    root_entries = {e.name for e in tree_of(reader.repo, reader.head().tree_id)}
    assert reader.seal_name("notes", ROOT, "d") in root_entries
    assert reader.seal_name("notes", ROOT, "f") not in root_entries
    sealed_notes = reader.seal_name("notes", ROOT, "d")
    assert len(b64url_nopad(sealed_notes[1:])) == 1 + 16 + len(b"notes")
    with pytest.raises(ValueError):
        reader.open_name(sealed_notes, "/memories/elsewhere")

    notes = reader.read_dir(root["notes"][1], "/memories/notes")
    assert sorted(notes) == ["moved", "progress.md"]
    moved = reader.read_dir(notes["moved"][1], "/memories/notes/moved")
    assert list(moved) == ["x.txt"]

    # Compressed chunks (method 1, zlib), as many as the header says, and the header.
    progress_tree = tree_of(reader.repo, notes["progress.md"][1])
    chunk_names = sorted(str(e.name) for e in progress_tree if e.name != "h")
    assert chunk_names == [f"c{i:08x}" for i in range(len(chunk_names))]
    assert len(progress_tree) == len(chunk_names) + 1
    header_oid = next(e.id for e in progress_tree if e.name == "h")
    size = len(FILES_AFTER["/memories/notes/progress.md"].encode())
    header = f'{{"size":{size},"chunks":{len(chunk_names)}}}'.encode()
    assert reader.open_blob(header_oid, b"header") == header
    with pytest.raises(ValueError):
        reader.open_blob(header_oid, b"chunk")
    by_name = {str(e.name): e.id for e in progress_tree}
    chunks = [reader.open_blob(by_name[name], b"chunk") for name in chunk_names]
    payloads = [zlib.decompress(c[1:]) if c[:1] == b"\x01" else c[1:] for c in chunks]
    # The writer's rule: method 1 exactly when zlib at level 6 is strictly shorter. Boundaries
    # depend on the key, so a short last chunk may be stored raw; the text compresses as a rule.
    for chunk, payload in zip(chunks, payloads, strict=True):
        compressed = len(zlib.compress(payload, 6)) < len(payload)
        assert chunk[:1] == (b"\x01" if compressed else b"\x00")
    assert any(chunk[:1] == b"\x01" for chunk in chunks)
    assert b"".join(payloads).decode() == FILES_AFTER["/memories/notes/progress.md"]

    # A raw chunk (method 0): compression would not have made it shorter.
    x_tree = tree_of(reader.repo, moved["x.txt"][1])
    x_chunk = next(e.id for e in x_tree if e.name == "c00000000")
    assert reader.open_blob(x_chunk, b"chunk") == b"\x00ab"
    assert len(blob_of(reader.repo, x_chunk)) == 1 + 16 + 1 + 2

    # An empty file is a header and no chunks.
    empty_tree = tree_of(reader.repo, root["empty.md"][1])
    assert [e.name for e in empty_tree] == ["h"]
    assert reader.open_blob(empty_tree[0].id, b"header") == b'{"size":0,"chunks":0}'


def test_second_reader_sees_what_gitmem_sees(made: Made) -> None:
    reader = Reader.open(made.path, made.key)
    assert reader.files(reader.head().tree_id) == FILES_AFTER == made.store.files()


def test_split_directories_read_as_the_design_says(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gitmem.buckets, "SPLIT_THRESHOLD", 3)  # the shapes of 256, smaller
    path = tmp_path / "store.git"
    store = gitmem.MemoryStore.open(path, key, create=True, state_dir=tmp_path / "state")
    for i in range(40):
        store.create(gitmem.parse_path(f"/memories/r{i}.md"), f"{i}\n")
        store.create(gitmem.parse_path(f"/memories/d/n{i}.md"), f"n{i}\n")
    for i in range(0, 40, 3):
        store.delete(gitmem.parse_path(f"/memories/d/n{i}.md"))
    reader = Reader.open(path, key)
    tree = reader.head().tree_id
    assert reader.files(tree) == store.files()
    root = reader.read_dir(tree, ROOT, threshold=3)
    assert len(root) == 41
    assert len(reader.read_dir(root["d"][1], "/memories/d", threshold=3)) == 26
    meta = json.loads(blob_of(reader.repo, reader.repo.references[META_REF].target))
    assert meta["format"] == 6  # written by this version; 4 and up read split directories


def test_delta_chunks_read_as_the_design_says(tmp_path: Path, key: str) -> None:
    path = tmp_path / "store.git"
    store = gitmem.MemoryStore.open(path, key, create=True, state_dir=tmp_path / "state")
    text = "".join(f"- [ ] item {i}: something to check and note\n" for i in range(400))
    store.create(gitmem.parse_path("/memories/c.md"), text)
    for i in range(0, 400, 7):
        store.str_replace(gitmem.parse_path("/memories/c.md"), f"[ ] item {i}:", f"[x] item {i}:")
    reader = Reader.open(path, key)
    tree = reader.head().tree_id
    assert reader.files(tree) == store.files()
    (kind, file_tree) = reader.read_dir(tree, ROOT)["c.md"]
    names = [str(e.name) for e in tree_of(reader.repo, file_tree)]
    assert kind == "f" and any(name.startswith("d") for name in names)


def test_high_water_mark_file(made: Made) -> None:
    where = str(made.path.resolve())
    digest = hashlib.sha256(where.encode()).hexdigest()[:32]
    mark = made.state_dir / made.store.store_id / f"replica-{digest}.mark"
    data = mark.read_bytes()
    assert len(data) == 256 and mark.stat().st_mode & 0o777 == 0o600
    # Two slots of 128 bytes, the newer counting: "gitmem-mark 2 <seq> <commit> <crc32>".
    seqs = []
    for slot in (data[:128], data[128:]):
        assert slot.endswith(b"\n")
        body, _, check = slot.rstrip(b" \n").rpartition(b" ")
        assert check == b"%08x" % zlib.crc32(body)
        tag, version, seq, commit = body.split(b" ")
        assert (tag, version) == (b"gitmem-mark", b"2")
        seqs.append((int(seq), commit.decode()))
    assert max(seqs) == (6, made.store.head())


def test_the_record_dictionary_is_design_mds() -> None:
    text = (Path(__file__).parent.parent / "docs" / "design.md").read_text("utf-8")
    section = text[text.index("**Compressed records (format 6).**") :]
    start = section.index("```\n") + 4
    block = section[start : section.index("\n```", start)]
    assert "".join(line + "\n" for line in block.split("\n")).encode() == RECORD_DICTIONARY
    assert gitmem.format.RECORD_DICTIONARY == RECORD_DICTIONARY
