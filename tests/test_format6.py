"""Format 6, compact history: compressed records, the migration of older stores, and the
metadata's redaction mark (design.md, "Repository format version 6")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gitmem import MemoryStore
from gitmem import format as fmt
from gitmem.errors import FormatVersionError, IntegrityError
from gitmem.format import Record, StoreMeta
from gitmem.git.refs import META_REF

CHECKLIST = "".join(f"- [ ] item {i}: something to check and note\n" for i in range(400))


def meta_body(store: MemoryStore) -> dict[str, object]:
    ref = store.repo.ref(META_REF)
    assert ref is not None
    body = json.loads(store.repo.read_blob(ref, fmt.MAX_META_BYTES))
    assert isinstance(body, dict)
    return body


def sealed_plaintexts(store: MemoryStore) -> list[bytes]:
    """Each commit's record as sealed (newest first)."""
    out = []
    for op in store.log():
        info = store.repo.read_commit(op.commit)
        ad = fmt.record_ad(store.keys.store_id, info.tree, info.parents)
        out.append(store.keys.open_record(fmt.decode_message(info.message), ad))
    return out


def test_a_format_5_store_becomes_6_on_its_first_write_and_its_history_still_reads(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as old:
        # As gitmem before format 6 wrote: format 2 metadata, JSON records, whole chunks.
        old.setattr(fmt, "FORMAT_VERSION", 2)
        old.setattr(fmt, "seal_plaintext", lambda record: record.to_bytes())
        old.setattr("gitmem.tree.DELTA_MIN_FILE", 1 << 40)
        store = MemoryStore.open(repo_path, key, create=True)
        store.create("/memories/c.md", CHECKLIST)
        store.str_replace("/memories/c.md", "[ ] item 7:", "[x] item 7:")
        assert meta_body(store)["format"] == 2
        assert all(plain[:1] == b"{" for plain in sealed_plaintexts(store))
    store = MemoryStore.open(repo_path, key)
    assert store.read_text("/memories/c.md") == CHECKLIST.replace("[ ] item 7:", "[x] item 7:")
    store.str_replace("/memories/c.md", "[ ] item 9:", "[x] item 9:")
    assert meta_body(store)["format"] == fmt.COMPACT_FORMAT_VERSION
    plains = sealed_plaintexts(store)
    assert plains[0][:1] == bytes([fmt.RECORD_DEFLATED]) and plains[1][:1] == b"{"
    assert [op.record.command for op in store.log()] == ["str_replace", "str_replace", "create"]
    assert store.verify().ok
    monkeypatch.setattr(fmt, "READABLE_VERSIONS", frozenset({1, 2, 3, 4, 5}))
    with pytest.raises(FormatVersionError) as caught:
        MemoryStore.open(repo_path, key)
    assert str(caught.value) == (
        "this store has format version 6; this gitmem reads 1, 2, 3, 4, 5 (upgrade gitmem)"
    )


def test_a_new_store_is_format_6_and_not_marked_redacted(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    store.create("/memories/a.md", "a\n")
    body = meta_body(store)
    assert body["format"] == 6 and "redacted" not in body
    assert not StoreMeta.from_bytes(json.dumps(body).encode()).redacted
    # Plain git reads the branch, and the message is the base64 of a compressed record.
    store.close()
    shown = subprocess.run(
        ["git", "--git-dir", str(repo_path), "log", "-1", "--format=%B", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert 100 < len(shown) < 160


def test_a_record_compresses_to_about_a_third() -> None:
    record = Record(
        seq=1234,
        time_ns=1_764_312_345_678_901_234,
        session="20261128T074512Z-1a2b3c4d",
        command="str_replace",
        paths=("/memories/progress.md",),
        version="0.1.0",
        store_bytes=123_456,
    )
    sealed = fmt.seal_plaintext(record)
    assert len(record.to_bytes()) == 188 and len(sealed) < 70
    assert fmt.open_plaintext(sealed) == record
    assert fmt.open_plaintext(record.to_bytes()) == record


@pytest.mark.parametrize(
    "plain",
    [
        b"\x02not a record",
        b"\x01not deflate at all \xff\xff",
        bytes([fmt.RECORD_DEFLATED]) + b"\x03\x00",  # an empty stream: no JSON
    ],
)
def test_a_malformed_record_is_refused(plain: bytes) -> None:
    with pytest.raises(IntegrityError, match="a commit record is malformed"):
        fmt.open_plaintext(plain)


def test_a_compressed_record_with_bytes_after_it_or_cut_short_is_refused() -> None:
    record = Record(1, 1, "s", "create", ("/memories/a.md",), "0.1.0")
    sealed = fmt.seal_plaintext(record)
    for plain in (sealed + b"x", sealed[:-3]):
        with pytest.raises(IntegrityError, match="a commit record is malformed"):
            fmt.open_plaintext(plain)


def test_a_record_that_inflates_past_the_commit_bound_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = Record(1, 1, "s" * 5000, "create", ("/memories/a.md",), "0.1.0")
    sealed = fmt.seal_plaintext(record)
    monkeypatch.setattr(fmt, "MAX_COMMIT_BYTES", 4096)
    with pytest.raises(IntegrityError, match="a commit record is malformed"):
        fmt.open_plaintext(sealed)


def test_the_redaction_mark(key: str) -> None:
    base = StoreMeta(6, bytes(16), bytes(32))
    assert b"redacted" not in base.to_bytes()
    marked = StoreMeta.from_bytes(StoreMeta(6, bytes(16), bytes(32), redacted=True).to_bytes())
    assert marked.redacted and json.loads(marked.to_bytes())["redacted"] is True
    # Format 5 was a redaction's format: it is marked by itself, and stays marked as 6.
    five = StoreMeta.from_bytes(StoreMeta(5, bytes(16), bytes(32)).to_bytes())
    assert (
        five.redacted
        and StoreMeta.from_bytes(
            StoreMeta(6, five.store_id, five.key_check, redacted=five.redacted).to_bytes()
        ).redacted
    )
    for body in (
        {**json.loads(base.to_bytes()), "redacted": "yes"},
        {**json.loads(base.to_bytes()), "redacted": True, "format": 4},
    ):
        with pytest.raises(IntegrityError, match="metadata is malformed"):
            StoreMeta.from_bytes(json.dumps(body).encode())
