"""Chunks stored as deltas of the chunks they replace (format 6; design.md, "File trees").

An edit of a file of some KiB stores each changed chunk as zlib against a preset dictionary:
the bytes of the old chunks it overlapped (its bases, listed in the file tree with every base
they need in turn), in chains of at most ``DELTA_CHAIN`` deltas.
"""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest

from gitmem import MemoryStore
from gitmem import format as fmt
from gitmem import tree as tree_module
from gitmem.errors import IntegrityError
from gitmem.git.objects import BLOB_MODE, TreeEntry
from gitmem.paths import parse
from gitmem.tree import DELTA_CHAIN, DELTA_MIN_FILE

CHECKLIST = "# Checklist\n\n" + "".join(
    f"- [ ] T{i:04d}: check the {i}th thing and write down what it said\n" for i in range(400)
)


def file_tree(store: MemoryStore, path: str) -> list[TreeEntry]:
    node = store.snapshot().lookup(parse(path))
    assert node is not None
    return store.repo.read_tree(node.oid)


def body(store: MemoryStore, oid: str) -> bytes:
    """A chunk's authenticated plaintext body (method byte first)."""
    return store.codec._open_chunk(oid, 1 << 20)


def named_bases(chunk: bytes) -> list[str]:
    if chunk[0] != fmt.COMPRESS_DELTA:
        return []
    return [chunk[2 + 20 * i : 22 + 20 * i].hex() for i in range(chunk[1])]


def depth(store: MemoryStore, oid: str) -> int:
    bases = named_bases(body(store, oid))
    return 0 if not bases else 1 + max(depth(store, b) for b in bases)


def ticked(store: MemoryStore, items: list[int] | range, text: str = CHECKLIST) -> str:
    for i in items:
        old, new = f"- [ ] T{i:04d}:", f"- [x] T{i:04d}:"
        if old not in text:
            old, new = new, old
        store.str_replace("/memories/c.md", old, new)
        text = text.replace(old, new)
    return text


def test_a_tick_is_stored_as_a_small_delta_and_every_version_reads_back(
    repo_path: Path, key: str
) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    store.create("/memories/c.md", CHECKLIST)
    assert not any(e.name.startswith("d") for e in file_tree(store, "/memories/c.md"))
    texts = [CHECKLIST]
    for i in range(200, 230):
        texts.append(ticked(store, [i], texts[-1]))
    entries = file_tree(store, "/memories/c.md")
    chunks = [e for e in entries if e.name.startswith("c")]
    bases = [e for e in entries if e.name.startswith("d")]
    # Base entries are named by their blob id, sorted as git sorts them.
    assert bases and all(e.name == "d" + e.oid for e in bases)
    deltas = [e for e in chunks if body(store, e.oid)[0] == fmt.COMPRESS_DELTA]
    assert deltas
    for entry in deltas:
        assert len(store.repo.read_blob(entry.oid, 1 << 20)) < 200  # a tick, not a chunk
        # Everything a delta needs, its bases' bases too, is in its file tree.
        stack = named_bases(body(store, entry.oid))
        while stack:
            base = stack.pop()
            assert "d" + base in {e.name for e in bases}
            stack += named_bases(body(store, base))
    fresh = MemoryStore.open(repo_path, key)
    assert fresh.read_text("/memories/c.md") == texts[-1]
    versions = [op.commit for op in fresh.log()]  # newest first
    for commit, text in zip(versions, reversed(texts), strict=True):
        fresh.codec.forget()
        assert fresh.read_text("/memories/c.md", commit) == text
    assert fresh.verify().ok
    # Every base is reachable through its file tree: garbage collection keeps it.
    fresh.gc(grace=0)
    assert MemoryStore.open(repo_path, key).read_text("/memories/c.md") == texts[-1]


def test_deltas_chain_and_no_chain_is_longer_than_the_limit(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    store.create("/memories/c.md", CHECKLIST)
    # Ticking and unticking items next to each other edits one chunk again and again.
    text = ticked(store, [300, 301, 302] * (DELTA_CHAIN + 4))
    depths = [depth(store, e.oid) for e in file_tree(store, "/memories/c.md") if e.name[0] in "cd"]
    assert max(depths) >= 2  # a delta of a delta
    assert max(depths) <= DELTA_CHAIN
    store.codec.forget()
    assert store.read_text("/memories/c.md") == text


def test_small_files_are_never_deltas(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    small = "".join(f"- [ ] S{i}: a short line\n" for i in range(100))
    assert len(small) < DELTA_MIN_FILE
    store.create("/memories/s.md", small)
    for i in range(0, 100, 9):
        store.str_replace("/memories/s.md", f"- [ ] S{i}:", f"- [x] S{i}:")
    assert not any(e.name.startswith("d") for e in file_tree(store, "/memories/s.md"))


def _appends(store: MemoryStore) -> tuple[int, str]:
    """Twenty appends to a 30 KB log: the chunk bytes they wrote, and the log."""
    rnd = random.Random(5)
    words = [
        "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(2, 9))) for _ in range(500)
    ]
    text = "# Log\n" + "".join(
        f"entry {i}: {' '.join(rnd.choices(words, k=15))}\n" for i in range(300)
    )
    store.create("/memories/log.md", text)
    written = 0
    for i in range(20):
        entry = f"new entry {i}: {' '.join(rnd.choices(words, k=40))}\n"
        before = {e.oid for e in file_tree(store, "/memories/log.md")}
        store.insert("/memories/log.md", text.count("\n"), entry)
        text += entry
        new = [e for e in file_tree(store, "/memories/log.md") if e.oid not in before]
        chunks = [e for e in new if e.name.startswith("c")]
        written += sum(len(store.repo.read_blob(e.oid, 1 << 20)) for e in chunks)
    return written, text


def test_an_append_to_a_log_costs_about_the_entry(
    repo_path: Path, tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    written, text = _appends(MemoryStore.open(repo_path, key, create=True))
    assert MemoryStore.open(repo_path, key).read_text("/memories/log.md") == text
    monkeypatch.setattr(tree_module, "DELTA_MIN_FILE", 1 << 40)
    whole, _ = _appends(MemoryStore.open(tmp_path / "whole.git", key, create=True))
    # The new tail is a delta of the old one (about the entry's compressed bytes), where
    # without deltas each append stores the whole tail chunk (some KiB) again.
    assert written < whole / 2, (written, whole)


def _store_with_delta(repo_path: Path, key: str) -> tuple[MemoryStore, list[TreeEntry]]:
    store = MemoryStore.open(repo_path, key, create=True)
    store.create("/memories/c.md", CHECKLIST)
    ticked(store, [200, 201, 202, 203])
    return store, file_tree(store, "/memories/c.md")


def _sealed(store: MemoryStore, data: bytes) -> str:
    return store.repo.write_blob(store.codec.keys.seal_blob(data, fmt.ROLE_CHUNK))


def _delta(store: MemoryStore, entries: list[TreeEntry]) -> TreeEntry:
    return next(
        e for e in entries if e.name.startswith("c") and body(store, e.oid)[0] == fmt.COMPRESS_DELTA
    )


def _read_forged(store: MemoryStore, entries: list[TreeEntry]) -> None:
    tree = store.repo.write_tree(entries)
    store.codec.forget()
    store.codec.read_file(tree, fresh=True)


def test_a_delta_naming_a_base_its_tree_lacks_is_refused(repo_path: Path, key: str) -> None:
    store, entries = _store_with_delta(repo_path, key)
    rest = [e for e in entries if not e.name.startswith("d")]
    assert len(rest) < len(entries)
    with pytest.raises(IntegrityError, match="names a base that file tree"):
        _read_forged(store, rest)  # the bases left out: deltas name blobs not in it


def test_a_base_entry_not_named_by_its_id_is_refused(repo_path: Path, key: str) -> None:
    store, entries = _store_with_delta(repo_path, key)
    chunk = next(e for e in entries if e.name.startswith("c"))
    extra = TreeEntry("d" + "0" * 40, chunk.oid, BLOB_MODE)
    with pytest.raises(IntegrityError, match="is malformed"):
        _read_forged(store, sorted([*entries, extra], key=lambda e: e.name))


def test_a_delta_that_does_not_inflate_is_refused(repo_path: Path, key: str) -> None:
    store, entries = _store_with_delta(repo_path, key)
    delta = _delta(store, entries)
    broken = body(store, delta.oid)[:22] + b"not zlib"
    forged = [e._replace(oid=_sealed(store, broken)) if e == delta else e for e in entries]
    with pytest.raises(IntegrityError, match="does not decompress"):
        _read_forged(store, forged)


def test_a_delta_that_inflates_past_the_file_is_refused(repo_path: Path, key: str) -> None:
    store, entries = _store_with_delta(repo_path, key)
    delta = _delta(store, entries)
    head = body(store, delta.oid)
    (base,) = named_bases(head)[:1]
    squeeze = zlib.compressobj(
        9, zlib.DEFLATED, -15, zdict=store.codec.read_file(file_tree_oid(store))
    )
    big = head[: 2 + 20 * head[1]] + squeeze.compress(b"x" * (1 << 20)) + squeeze.flush()
    assert base
    forged = [e._replace(oid=_sealed(store, big)) if e == delta else e for e in entries]
    with pytest.raises(IntegrityError, match="does not decompress"):
        _read_forged(store, forged)


def file_tree_oid(store: MemoryStore) -> str:
    node = store.snapshot().lookup(parse("/memories/c.md"))
    assert node is not None
    return node.oid


def test_a_chain_deeper_than_readers_follow_is_refused(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, entries = _store_with_delta(repo_path, key)
    assert max(depth(store, e.oid) for e in entries if e.name[0] == "c") >= 2
    monkeypatch.setattr(tree_module, "MAX_DELTA_DEPTH", 0)
    with pytest.raises(IntegrityError, match="is a delta more than 0 deep"):
        _read_forged(store, entries)


def test_a_redaction_rewrites_versions_whose_bases_hold_the_text(repo_path: Path, key: str) -> None:
    secret = "the door code is 4711-0815"
    store = MemoryStore.open(repo_path, key, create=True)
    store.create("/memories/c.md", CHECKLIST)
    before = {e.oid for e in file_tree(store, "/memories/c.md")}
    store.str_replace("/memories/c.md", "- [ ] T0200:", f"- [ ] T0200: {secret}")
    holding = {e.oid for e in file_tree(store, "/memories/c.md") if e.name[0] == "c"} - before
    store.str_replace("/memories/c.md", f"- [ ] T0200: {secret}", "- [x] T0200:")
    text = ticked(store, [201, 202], CHECKLIST.replace("- [ ] T0200:", "- [x] T0200:"))
    # The premise: the version without the text keeps the chunk that held it as a base.
    assert holding & {e.oid for e in file_tree(store, "/memories/c.md") if e.name[0] == "d"}
    store.redact(secret)
    assert not holding & store.repo.reachable()
    store.gc(grace=0)
    assert not any(store.repo.has(oid) for oid in holding)
    fresh = MemoryStore.open(repo_path, key)
    assert fresh.read_text("/memories/c.md") == text
    for op in fresh.log():
        if fresh.snapshot(op.commit).lookup(parse("/memories/c.md")) is not None:
            assert secret not in fresh.read_text("/memories/c.md", op.commit)
    assert fresh.verify().ok


def test_a_chain_at_its_limit_is_rerooted_not_stored_whole(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    store.create("/memories/c.md", CHECKLIST)
    first = {e.oid for e in file_tree(store, "/memories/c.md") if e.name[0] == "c"}
    written: set[str] = set()
    text = CHECKLIST
    for i in [300, 301, 302] * (DELTA_CHAIN + 2):
        text = ticked(store, [i], text)
        written |= {e.oid for e in file_tree(store, "/memories/c.md") if e.name[0] == "c"}
    whole = {o for o in written - first if body(store, o)[0] != fmt.COMPRESS_DELTA}
    # Every version of the edited chunk is a delta: past the limit, of the chunk its chain
    # started from.
    assert not whole
    depths = [depth(store, o) for o in written - first]
    assert max(depths) == DELTA_CHAIN and depths.count(1) > 1
    cold = MemoryStore.open(repo_path, key)
    assert cold.read_text("/memories/c.md") == text
    # A process that only read the file re-roots too.
    for i in [300, 301, 302] * (DELTA_CHAIN + 1):
        text = ticked(cold, [i], text)
        written |= {e.oid for e in file_tree(cold, "/memories/c.md") if e.name[0] == "c"}
    assert not {o for o in written - first if body(cold, o)[0] != fmt.COMPRESS_DELTA}


def test_a_chain_at_its_limit_whose_roots_are_not_known_is_stored_whole(
    repo_path: Path, key: str
) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    store.create("/memories/c.md", CHECKLIST)
    text = ticked(store, [300, 301, 302] * 3)
    store.codec._roots.clear()  # as if the whole chunks had been pushed out of the cache
    text = ticked(store, [300, 301, 302] * 3, text)
    entries = file_tree(store, "/memories/c.md")
    assert max(depth(store, e.oid) for e in entries if e.name[0] == "c") < DELTA_CHAIN
    store.codec.forget()
    assert store.read_text("/memories/c.md") == text
