"""Content-defined chunking: the boundaries docs/design.md specifies, keyed, stable under edits,
and the same whether a file is split afresh or incrementally from its previous version."""

from __future__ import annotations

import functools
import hashlib
import random
from itertools import accumulate, pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gitmem
from gitmem import chunking, parse_path
from gitmem.chunking import (
    SMALLEST,
    WINDOW,
    Chunker,
    Params,
    gear_hash,
    params_for,
    tail_params,
)
from gitmem.git.repo import GitRepo
from gitmem.store import MemoryStore

SEED = bytes(range(32))


# -- an independent reference, byte at a time, written from docs/design.md ------------------


def reference_gear(seed: bytes) -> list[int]:
    stream = hashlib.shake_256(b"gitmem/v1/chunker/gear-table" + seed).digest(512)
    return [int.from_bytes(stream[2 * b : 2 * b + 2], "little") for b in range(256)]


def reference_hashes(data: bytes, seed: bytes) -> list[int]:
    """hashes[p] = sum(gear[data[p - i]] << i for i < 16), by the rolling update."""
    gear = reference_gear(seed)
    out, h = [], 0
    for p, byte in enumerate(data):
        if p >= 16:
            h -= gear[data[p - 16]] << 15
        h = 2 * h + gear[byte]
        out.append(h)
    return out


@functools.cache  # asked for at every byte a cut may fall on
def reference_mask(bits: int) -> int:
    return sum(1 << b for b in (range(16, 16 + bits) if bits <= 15 else range(31 - bits, 31)))


def reference_cuts(data: bytes, seed: bytes) -> list[int]:
    hashes = reference_hashes(data, seed)
    size = len(data)

    def decide(start: int, p: Params) -> int:
        if size - start <= p.min_size:
            return size
        limit = min(start + p.max_size, size)
        normal = min(start + p.avg_size, limit)
        bits = p.avg_size.bit_length() - 1
        for cut in range(start + p.min_size, limit):
            mask = reference_mask(bits + p.nc if cut < normal else bits - p.nc)
            if hashes[cut - 1] & mask == 0:
                return cut
        return limit

    body = params_for(size)
    tail_p = tail_params(body)
    in_tail = body == tail_p
    cuts, start = [], 0
    while start < size:
        end = decide(start, tail_p if in_tail else body)
        if end == size and not in_tail:
            in_tail = True
            continue
        cuts.append(end)
        start = end
    return cuts


def text(size: int, seed: int = 1) -> bytes:
    rnd = random.Random(seed)
    words = [
        "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(1, 9)))
        for _ in range(500)
    ]
    out: list[str] = []
    while sum(map(len, out)) < size:
        out.append(" ".join(rnd.choice(words) for _ in range(rnd.randint(4, 14))) + ".\n")
    return "".join(out).encode()[:size]


# -- the specification ---------------------------------------------------------------------


def test_gear_table_and_hash_known_answers() -> None:
    low, high = chunking.gear_tables(bytes(32))
    assert [low[b] | high[b] << 8 for b in (0, 1, 2, 3, 255)] == [7689, 16221, 64634, 46674, 6935]
    assert reference_gear(bytes(32))[:4] == [7689, 16221, 64634, 46674]
    assert gear_hash(b"abcdefghijklmnopqrstuvwxyz", 25, bytes(32)) == 2094746207
    assert reference_hashes(b"abcdefghijklmnopqrstuvwxyz", bytes(32))[25] == 2094746207


def test_masks_are_nested_and_use_bits_13_to_30() -> None:
    masks = [chunking._mask(k) for k in range(1, 19)]
    assert [bin(m).count("1") for m in masks] == list(range(1, 19))
    assert all(a & b == a for a, b in pairwise(masks))
    assert masks[7] == 0xFF << 16 and masks[-1] == ((1 << 18) - 1) << 13
    assert all(m == reference_mask(k) for k, m in enumerate(masks, start=1))


@pytest.mark.parametrize(
    ("size", "body", "tail"),
    [
        (0, SMALLEST, SMALLEST),
        (92_681, SMALLEST, SMALLEST),
        (92_682, Params(1024, 4096, 16384, 3), SMALLEST),
        (741_455, Params(4096, 16384, 65536, 3), SMALLEST),
        (741_456, Params(8192, 32768, 131072, 3), Params(1024, 4096, 16384)),
        (1 << 20, Params(8192, 32768, 131072, 3), Params(1024, 4096, 16384)),
        (2_965_820, Params(16384, 65536, 262144, 2), Params(2048, 8192, 32768)),
        (10**9, Params(32768, 131072, 524288, 1), Params(4096, 16384, 65536)),
    ],
)
def test_chunk_sizes_grow_with_the_file(size: int, body: Params, tail: Params) -> None:
    assert params_for(size) == body
    assert tail_params(body) == tail


def test_invalid_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="power of two"):
        Params(512, 3000, 8192)
    with pytest.raises(ValueError, match="16 <= min <= avg <= max"):
        Params(8, 2048, 8192)
    with pytest.raises(ValueError, match="usable hash bits"):
        Params(1 << 16, 1 << 17, 1 << 19, nc=2)


@pytest.mark.parametrize("size", [0, 1, 511, 513, 3000, 20_000, 120_000])
def test_fresh_split_matches_the_reference(size: int) -> None:
    data = text(size, seed=size)
    assert Chunker(SEED).cuts(data) == reference_cuts(data, SEED)


@pytest.mark.slow
@pytest.mark.parametrize("size", [400_000, 1 << 20])
def test_fresh_split_of_a_large_file_matches_the_reference(size: int) -> None:
    data = text(size)
    assert Chunker(SEED).cuts(data) == reference_cuts(data, SEED)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=40_000))
def test_split_round_trips_random_data(data: bytes) -> None:
    chunks = chunking.split(data, SEED)
    assert b"".join(chunks) == data
    assert all(chunks)
    limit = params_for(len(data)).max_size
    assert all(len(c) <= limit for c in chunks)
    assert list(accumulate(map(len, chunks))) == reference_cuts(data, SEED)


def test_periodic_data_is_cut_at_the_maximum_size() -> None:
    data = bytes(range(256)) * 400
    cuts = Chunker(SEED).cuts(data)
    assert cuts == reference_cuts(data, SEED)
    assert cuts == [16384 * i for i in range(1, 7)] + [102400]


def test_boundaries_depend_on_the_key() -> None:
    data = text(60_000)
    one, same, other = (
        Chunker(SEED).cuts(data),
        Chunker(SEED).cuts(data),
        Chunker(b"k" * 32).cuts(data),
    )
    assert one == same
    assert len(one) > 10 and len(other) > 10
    # Apart from the end of the file, no boundary in common is already unlikely; most differ.
    assert len(set(one) & set(other)) <= 3


def test_store_keys_give_different_boundaries(tmp_path: Path) -> None:
    data = text(60_000).decode()
    cuts = []
    for name in ("a", "b"):
        store = MemoryStore.open(tmp_path / name, gitmem.generate_key(), create=True)
        store.create(parse_path("/memories/f.md"), data)
        cuts.append(store.codec.chunker.cuts(data.encode()))
    assert cuts[0] != cuts[1]


# -- stability and incremental splits -------------------------------------------------------


def chunk_set(data: bytes, cuts: list[int]) -> list[bytes]:
    return [data[a:b] for a, b in zip([0, *cuts], cuts, strict=False)]


def test_an_insert_in_the_middle_changes_only_nearby_chunks() -> None:
    data = text(200_000)
    cuts = Chunker(SEED).cuts(data)
    at = 100_000
    inserted = b"a new sentence of about forty bytes.\n"
    edited = data[:at] + inserted + data[at:]
    new_cuts = Chunker(SEED).cuts(edited)
    old = set(chunk_set(data, cuts))
    changed = [
        (start, end)
        for start, end in zip([0, *new_cuts], new_cuts, strict=False)
        if edited[start:end] not in old
    ]
    body = params_for(len(edited))
    assert 1 <= len(changed) <= 3
    assert changed[0][0] > at - body.max_size and changed[-1][1] < at + 4 * body.max_size
    # Every chunk before and after the changed region is the old chunk, at its shifted place.
    assert [c for c in new_cuts if c <= changed[0][0]] == [c for c in cuts if c <= changed[0][0]]
    shift = len(inserted)
    tail = [c - shift for c in new_cuts if c >= changed[-1][1]]
    assert tail == [c for c in cuts if c >= changed[-1][1] - shift]


def test_appending_rewrites_only_the_end() -> None:
    data = text(300_000)
    chunker = Chunker(SEED)
    cuts = chunker.cuts(data)
    longer = data + text(600, seed=9)
    new = chunker.cuts(longer)
    assert new == reference_cuts(longer, SEED)
    kept = [c for c in new if c in cuts]
    assert len(new) - len(kept) <= 4
    # The tail is cut small: what an append rewrites is a few KiB, not a body chunk.
    rewritten = sum(b - a for a, b in zip([0, *new], new, strict=False) if b not in cuts)
    assert rewritten < 4 * SMALLEST.max_size


def tag(chunk: bytes) -> str:
    return hashlib.sha1(chunk).hexdigest()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**32),
    st.sampled_from([3_000, 50_000, 120_000]),
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, 400), st.binary(max_size=400)), max_size=4),
)
def test_incremental_splits_equal_fresh_ones(
    seed: int, size: int, edits: list[tuple[float, int, bytes]]
) -> None:
    data = text(size, seed=seed % 1000)
    chunker = Chunker(SEED)
    for where, removed, inserted in edits:
        cuts = chunker.cuts(data)
        chunker.remember(data, cuts, [tag(c) for c in chunk_set(data, cuts)])
        at = int(where * len(data))
        data = data[:at] + inserted + data[at + removed :]
        pieces = chunker.pieces(data)
        assert list(accumulate(len(p.data) for p in pieces)) == reference_cuts(data, SEED)
        assert all(p.tag is None or p.tag == tag(p.data) for p in pieces)


def test_unchanged_chunks_keep_their_tags() -> None:
    data = text(120_000)
    chunker = Chunker(SEED)
    cuts = chunker.cuts(data)
    chunker.remember(data, cuts, [tag(c) for c in chunk_set(data, cuts)])
    edited = data[:60_000] + b"X" + data[60_001:]
    pieces = chunker.pieces(edited)
    untagged = [p for p in pieces if p.tag is None]
    assert 1 <= len(untagged) <= 3
    assert all(p.tag == tag(p.data) for p in pieces if p.tag is not None)


def test_cut_lists_it_would_not_make_are_not_used_as_hints() -> None:
    data = text(50_000)
    chunker = Chunker(SEED)
    # One chunk for the whole file, as gitmem wrote files before chunking.
    chunker.remember(data, [len(data)], ["0" * 40])
    pieces = chunker.pieces(data[:-1] + b"!")
    assert all(p.tag is None for p in pieces)
    assert list(accumulate(len(p.data) for p in pieces)) == reference_cuts(data[:-1] + b"!", SEED)


# -- the store ------------------------------------------------------------------------------


def objects(repo: Path) -> set[str]:
    """Every object of the store, in the repository or its redo log."""
    return set(GitRepo(repo).all_object_ids())


def one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    def pieces(self: Chunker, data: bytes) -> list[chunking.Piece]:
        return [chunking.Piece(data, None)] if data else []

    monkeypatch.setattr(Chunker, "pieces", pieces)


def test_files_written_as_one_chunk_stay_readable(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = parse_path("/memories/old.md")
    content = text(150_000).decode()
    with monkeypatch.context() as patch:
        one_chunk(patch)
        store = MemoryStore.open(repo_path, key, create=True)
        store.create(path, content)
        oid = store.snapshot().lookup(path).oid  # type: ignore[union-attr]
        assert len(store.repo.read_tree(oid)) == 2  # header + one chunk
    reader = MemoryStore.open(repo_path, key)
    assert reader.read_text(path) == content
    reader.str_replace(path, content[70_000:70_030], "EDITED")
    edited = content[:70_000] + "EDITED" + content[70_030:]
    assert reader.read_text(path) == edited
    oid = reader.snapshot().lookup(path).oid  # type: ignore[union-attr]
    assert len(reader.repo.read_tree(oid)) > 10
    assert reader.verify().ok
    assert MemoryStore.open(repo_path, key).files()["/memories/old.md"] == edited


def test_an_edit_writes_only_changed_chunks_and_its_trees(repo_path: Path, key: str) -> None:
    path = parse_path("/memories/a/b/notes.md")
    content = text(200_000).decode()
    store = MemoryStore.open(repo_path, key, create=True)
    store.create(path, content)
    before = objects(repo_path)
    store.str_replace(path, content[100_000:100_040], "a small edit")
    edited = content[:100_000] + "a small edit" + content[100_040:]
    new = objects(repo_path) - before
    # The chunks of the edited file that the old one lacks, the header, the file tree, the
    # trees of b, a and the root (/memories), the commit: every one of them new, and nothing
    # else. How many
    # chunks an edit changes depends on the key (the gear table is keyed): usually one to
    # three, but about one key in a hundred takes a few chunks more to cut where the old
    # version did again, so the count is computed, not assumed.
    assert len(new) == changed_chunks(store, edited, content) + 6
    # The next writer, in another process with nothing remembered, writes the same.
    fresh = MemoryStore.open(repo_path, key)
    before = objects(repo_path)
    fresh.str_replace(path, "a small edit", "a small edit, twice")
    twice = edited.replace("a small edit", "a small edit, twice")
    assert len(objects(repo_path) - before) == changed_chunks(store, twice, edited, content) + 6


def changed_chunks(store: MemoryStore, new: str, *old: str) -> int:
    """How many distinct chunks ``new`` has that no version in ``old`` has (those are in the
    repository already), cut with the store's keyed gear table by a chunker that remembers
    nothing."""

    def chunks(data: str) -> set[bytes]:
        return {piece.data for piece in Chunker(store.keys.chunker_seed).pieces(data.encode())}

    return len(chunks(new).difference(*map(chunks, old)))


def test_equal_chunks_are_one_blob(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    content = text(100_000).decode()
    store.create(parse_path("/memories/one.md"), content)
    before = objects(repo_path)
    store.create(parse_path("/memories/two.md"), content)
    # Same content: the same file tree; only the directory tree and commit are new.
    assert len(objects(repo_path) - before) == 2
    before = objects(repo_path)
    store.create(parse_path("/memories/three.md"), content + "one more line\n")
    assert len(objects(repo_path) - before) <= 6


def test_a_remembered_chunk_that_is_gone_is_written_again(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    data = text(100_000)
    cuts = store.codec.chunker.cuts(data)
    # As if the blobs had been pruned: the file is remembered with tags that name no object.
    store.codec.chunker.forget()
    store.codec.chunker.remember(data, cuts, [f"{i:040x}" for i in range(len(cuts))])
    edited = b"changed" + data[20:]
    oid = store.codec.write_file(edited)
    chunks = [e.oid for e in store.repo.read_tree(oid) if e.name != "h"]
    assert len(chunks) > 10 and all(store.repo.has(c) for c in chunks)
    assert store.codec.read_file(oid) == edited


def common_start(x: bytes | bytearray, y: bytes | bytearray) -> int:
    """How many bytes ``x`` and ``y`` share at their start, compared byte by byte."""
    pairs = enumerate(zip(x, y, strict=False))
    return next((i for i, (p, q) in pairs if p != q), min(len(x), len(y)))


def test_common_prefix_and_suffix_of_short_and_long_data_alike() -> None:
    """The common suffix of short tails is found at once (integers), of long ones by search,
    and the common prefix by a search from small blocks up: all give the byte-by-byte answer."""
    from gitmem.chunking import common_prefix, common_suffix

    rng = random.Random(7)
    as_ab = bytes(b"ab"[byte & 1] for byte in range(256))  # random bytes to random a's and b's
    for _ in range(3000):
        size = rng.choice([0, 1, 2, 100, 8191, 8192, 8193, 20000])
        a = rng.randbytes(size).translate(as_ab)
        b = bytearray(a[rng.randint(0, 3) :] if a else b"")
        if b and rng.random() < 0.7:
            b[rng.randrange(len(b))] ^= 1
        limit = rng.randint(0, size + 1)
        assert common_suffix(a, bytes(b), limit) == common_start(a[::-1][:limit], b[::-1][:limit])
        assert common_prefix(a, bytes(b)) == common_start(a, b)


@functools.cache
def candidate_block() -> bytes:
    """16 bytes whose gear hash passes every mask used here (up to 15 bits): repeated, they
    make a candidate cut every 16 bytes, so cuts land right at each minimum chunk size."""
    rnd = random.Random(7)
    while True:
        block = bytes(rnd.randrange(256) for _ in range(WINDOW))
        if gear_hash(block, WINDOW - 1, SEED) & reference_mask(15) == 0:
            return block


@pytest.mark.parametrize("phase", range(0, WINDOW, 3))
def test_cuts_at_the_minimum_size_match_the_reference(phase: int) -> None:
    # The scan starts at each chunk's smallest possible end; a cut right there, or right
    # after, must still be found, for every size from below the minimum to past it.
    data = bytes(range(phase)) + candidate_block() * 80
    chunker = Chunker(SEED)
    low = SMALLEST.min_size
    for size in [*range(low - 20, low + 40), *range(2 * low - 20, 2 * low + 40)]:
        assert chunker.cuts(data[:size]) == reference_cuts(data[:size], SEED), size


def test_a_tail_decision_after_a_body_one_from_the_same_start_sees_every_candidate() -> None:
    # When the body chunk would be the last, the same start is decided again with the tail's
    # smaller minimum: its candidates between the two minimums must have been scanned. Data:
    # random bytes (almost no candidates) with one candidate at 700, between 512 and 1024.
    body, tail = params_for(100_000), SMALLEST
    assert tail.min_size < 700 < body.min_size
    for seed in range(1000):  # the first random filling with no body candidate
        rnd = random.Random(seed)
        data = bytearray(rnd.randrange(256) for _ in range(1500))
        data[700 - WINDOW : 700] = candidate_block()
        hashes = reference_hashes(bytes(data), SEED)
        if all(hashes[c - 1] & body.mask_loose for c in range(body.min_size, len(data))):
            break
    start = 0
    scan = chunking._Scan(bytes(data), start, Chunker(SEED).tables, tail.mask_loose, tail.min_size)
    assert scan.decide(start, body) == len(data)  # no body cut: the rest is the tail
    assert scan.decide(start, tail) == 700
