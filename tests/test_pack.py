"""gitmem's own pack writer: git and libgit2 read every object back, the index is exact, the
large-offset table is right, and a pack is published only whole and durable."""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import signal
import stat
import struct
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import pygit2
import pytest

from gitmem import fsutil
from gitmem.chunking import common_prefix, common_suffix
from gitmem.git import pack
from gitmem.git.pack import PackObject, write_pack
from gitmem.git.wal import object_id
from gitmem.store import MemoryStore

IDENTITY = b"A U Thor <author@example.com> 0 +0000"


def bare(tmp_path: Path) -> Path:
    path = tmp_path / "bare.git"
    pygit2.init_repository(str(path), bare=True)
    return path


def tree_bytes(entries: list[tuple[bytes, str, str]]) -> bytes:
    """A git tree of (mode, name, oid) entries, sorted as git sorts them."""

    def order(entry: tuple[bytes, str, str]) -> bytes:
        return entry[1].encode() + (b"/" if entry[0] == b"40000" else b"")

    return b"".join(
        mode + b" " + name.encode() + b"\0" + bytes.fromhex(oid)
        for mode, name, oid in sorted(entries, key=order)
    )


def all_kinds(rng: random.Random, blobs: int = 20) -> list[tuple[bytes, bytes]]:
    """Well-formed objects of all four kinds (git fsck checks them): random blobs, the empty
    blob, one over a stored block (64 KiB), trees of them, commits of the trees, a tag."""
    out: list[tuple[bytes, bytes]] = [(b"blob", b""), (b"blob", rng.randbytes(300_000))]
    out += [(b"blob", rng.randbytes(rng.randrange(1, 3000))) for _ in range(blobs)]
    ids = [object_id(kind, payload) for kind, payload in out]
    empty_tree = b""
    sub = tree_bytes([(b"100644", f"f{i}", oid) for i, oid in enumerate(ids[:5])])
    root = tree_bytes(
        [(b"100644", f"g{i}", oid) for i, oid in enumerate(ids)]
        + [(b"40000", "sub", object_id(b"tree", sub))]
    )
    out += [(b"tree", empty_tree), (b"tree", sub), (b"tree", root)]
    first = b"tree %s\nauthor %s\ncommitter %s\n\nfirst\n" % (
        object_id(b"tree", root).encode(),
        IDENTITY,
        IDENTITY,
    )
    second = b"tree %s\nparent %s\nauthor %s\ncommitter %s\n\n%s\n" % (
        object_id(b"tree", empty_tree).encode(),
        object_id(b"commit", first).encode(),
        IDENTITY,
        IDENTITY,
        rng.randbytes(600).hex().encode(),
    )
    out += [(b"commit", first), (b"commit", second)]
    tag = b"object %s\ntype commit\ntag v1\ntagger %s\n\na tag\n" % (
        object_id(b"commit", second).encode(),
        IDENTITY,
    )
    out.append((b"tag", tag))
    return out


def verify_pack(idx: Path) -> dict[str, tuple[str, int, int, int]]:
    """``git verify-pack -v``'s view, which must pass: each id's type, size (of the delta, for
    a delta), offset and delta chain depth (0 for a whole object)."""
    run = subprocess.run(
        ["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True, check=True
    )
    found = {}
    for line in run.stdout.splitlines():
        fields = line.split()
        if len(fields) in (5, 7) and len(fields[0]) == 40:
            depth = int(fields[5]) if len(fields) == 7 else 0
            found[fields[0]] = (fields[1], int(fields[2]), int(fields[4]), depth)
    return found


def delta_bases(idx: Path) -> dict[str, str]:
    """The base of each delta of the pack, by id, as ``git verify-pack -v`` reads them."""
    run = subprocess.run(
        ["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True, check=True
    )
    return {f[0]: f[6] for f in map(str.split, run.stdout.splitlines()) if len(f) == 7}


def fsck(repo: Path) -> None:
    subprocess.run(
        ["git", "--git-dir", str(repo), "fsck", "--strict", "--no-dangling"],
        capture_output=True,
        check=True,
    )


def read_index(data: bytes) -> list[tuple[str, int, int]]:
    """The (id, CRC-32, offset) entries of a version-2 pack index, parsed independently of
    gitmem; asserts its structure: magic, checksum, length, sorted ids, fan-out."""
    assert data[:8] == b"\xfftOc" + struct.pack(">I", 2)
    assert hashlib.sha1(data[:-20]).digest() == data[-20:]
    fanout = struct.unpack(">256I", data[8 : 8 + 1024])
    count = fanout[255]
    names_at = 8 + 1024
    crcs_at = names_at + 20 * count
    small_at = crcs_at + 4 * count
    large_at = small_at + 4 * count
    names = [data[names_at + 20 * i : names_at + 20 * i + 20] for i in range(count)]
    crcs = struct.unpack(f">{count}I", data[crcs_at:small_at])
    small = struct.unpack(f">{count}I", data[small_at:large_at])
    large_count = sum(1 for value in small if value & 0x80000000)
    assert len(data) == large_at + 8 * large_count + 40
    large = struct.unpack(f">{large_count}Q", data[large_at : large_at + 8 * large_count])
    assert [value & 0x7FFFFFFF for value in small if value & 0x80000000] == list(range(large_count))
    assert names == sorted(set(names))
    firsts = Counter(name[0] for name in names)
    assert list(fanout) == [sum(firsts[b] for b in range(byte + 1)) for byte in range(256)]
    offsets = [large[v & 0x7FFFFFFF] if v & 0x80000000 else v for v in small]
    return [(n.hex(), c, o) for n, c, o in zip(names, crcs, offsets, strict=True)]


def check_pack(repo: Path, idx: Path, objects: list[tuple[bytes, bytes]]) -> None:
    """The pack at ``idx`` holds exactly ``objects``, and git, libgit2 and the index agree."""
    wanted = {object_id(kind, payload): (kind, payload) for kind, payload in objects}
    seen = verify_pack(idx)
    assert seen.keys() == wanted.keys()
    for oid, (kind, payload) in wanted.items():
        assert seen[oid][0] == kind.decode()
        assert seen[oid][1] == len(payload) or seen[oid][3] > 0
        assert seen[oid][3] <= pack.DELTA_DEPTH
    fsck(repo)
    odb = pygit2.Repository(str(repo)).odb
    for oid, (kind, payload) in wanted.items():
        otype, data = odb.read(oid)
        assert (otype, data) == (pack.TYPE_CODES[kind], payload)
    data = idx.with_suffix(".pack").read_bytes()
    assert idx.name == f"pack-{hashlib.sha1(data[:-20]).hexdigest()}.idx"
    assert data[-20:] == hashlib.sha1(data[:-20]).digest()
    entries = read_index(idx.read_bytes())
    assert idx.read_bytes()[-40:-20] == data[-20:]
    bounds = [*sorted(offset for _, _, offset in entries), len(data) - 20]
    following = dict(itertools.pairwise(bounds))
    for oid, crc, offset in entries:
        assert seen[oid][2] == offset
        assert zlib.crc32(data[offset : following[offset]]) == crc


def test_objects_of_every_kind_are_read_back_by_git_and_libgit2(tmp_path: Path) -> None:
    repo = bare(tmp_path)
    objects = all_kinds(random.Random(1))
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None and idx.parent == repo / "objects" / "pack"
    check_pack(repo, idx, objects)
    assert sorted(p.name for p in idx.parent.iterdir()) == [idx.name, idx.stem + ".pack"]
    for part in (idx, idx.with_suffix(".pack")):
        assert stat.S_IMODE(part.stat().st_mode) == 0o400
    assert not list(repo.glob(pack.TMP_PREFIX + "*"))


def test_versions_of_a_tree_are_deltas_no_deeper_than_the_limit(tmp_path: Path) -> None:
    """Each version changes one entry of a directory tree or appends to a file tree, as
    gitmem's writes do: stored as deltas, in chains of at most DELTA_DEPTH; a new tree with
    nothing in common with the kept ones, and blobs and commits, are stored whole."""
    repo = bare(tmp_path)
    rng = random.Random(6)
    blobs = [(b"blob", rng.randbytes(100)) for _ in range(130)]
    ids = [object_id(kind, payload) for kind, payload in blobs]
    names = [f"e{rng.randbytes(16).hex()}" for _ in range(40)]
    entries = {name: ids[0] for name in names}
    objects: list[tuple[bytes, bytes]] = list(blobs)
    for version in range(1, 120):
        entries[rng.choice(names)] = ids[version]
        objects.append((b"tree", tree_bytes([(b"100644", n, o) for n, o in entries.items()])))
        chunks = [(b"100644", f"c{i:08x}", ids[i]) for i in range(version % 60 + 1)]
        objects.append((b"tree", tree_bytes([*chunks, (b"100644", "h", ids[version])])))
    objects.append((b"tree", tree_bytes([(b"100644", "other", ids[1])])))
    # A directory of 3,000 entries (over 64 KiB: copies of more than one instruction).
    big = {f"n{i:05d}": ids[i % len(ids)] for i in range(3000)}
    objects.append((b"tree", tree_bytes([(b"100644", n, o) for n, o in big.items()])))
    big["n01500"] = ids[7]
    objects.append((b"tree", tree_bytes([(b"100644", n, o) for n, o in big.items()])))
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    check_pack(repo, idx, objects)
    seen = verify_pack(idx)
    depths = Counter(seen[object_id(k, p)][3] for k, p in objects if k == b"tree")
    assert depths[0] < 10 and max(depths) == pack.DELTA_DEPTH
    assert all(seen[oid][3] == 0 for oid in ids)
    assert seen[object_id(*objects[-3])][3] == 0  # nothing in common with what came before
    assert seen[object_id(*objects[-1])][3] == 1 and seen[object_id(*objects[-1])][1] < 200
    whole = sum(len(p) for k, p in objects if k == b"tree")
    # The big directory's first version is over the deflate limit: stored whole, not deflated.
    big_base = len(objects[-2][1])
    assert big_base > pack._DEFLATE_LIMIT
    limit = sum(len(p) for _, p in blobs) + (whole - big_base) / 5 + big_base + 64
    assert idx.with_suffix(".pack").stat().st_size < limit


def test_a_bucket_tree_is_a_delta_of_its_own_last_version(tmp_path: Path) -> None:
    """A split directory's top tree and its buckets all begin with bucket ``b00``: a bucket's
    new version whose first entry changed is still found by its second entry (and one whose
    first entry was removed by its new first), not lost among the others' versions."""
    repo = bare(tmp_path)
    blobs = [(b"blob", bytes([i])) for i in range(80)]
    ids = [object_id(kind, payload) for kind, payload in blobs]
    names = [f"b{i:02x}" for i in range(40)]

    def bucket(offset: int, first: int) -> bytes:
        return tree_bytes(
            [
                (b"100644", n, ids[first if i == 0 else (offset + i) % 80])
                for i, n in enumerate(names)
            ]
        )

    mine = bucket(0, 0)
    others = [bucket(i, i) for i in range(1, 2 * pack._BASES_PER_KEY)]
    first_changed = bucket(0, 79)
    first_removed = tree_bytes([(b"100644", n, ids[i]) for i, n in enumerate(names) if i])
    objects = [*blobs, *((b"tree", t) for t in (mine, *others, first_changed, first_removed))]
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    check_pack(repo, idx, objects)
    bases = delta_bases(idx)
    assert bases[object_id(b"tree", first_changed)] == object_id(b"tree", mine)
    assert bases[object_id(b"tree", first_removed)] in {
        object_id(b"tree", mine),
        object_id(b"tree", first_changed),
    }


def test_the_delta_bases_kept_are_bounded_and_the_newest_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bytes kept for delta bases the oldest trees are forgotten, not all of them: a
    tree's next version, written a little later, is still a delta of it, however many trees
    went before; and what is kept stays under the bound."""
    monkeypatch.setattr(pack, "_BASES_BYTES", 20_000)
    repo = bare(tmp_path)
    blobs = [(b"blob", bytes([i, j])) for i in range(60) for j in range(2)]
    ids = [object_id(kind, payload) for kind, payload in blobs]

    def tree(k: int, version: int) -> bytes:
        entries = [(b"100644", f"t{k:03d}-{i:02d}", ids[(k + i) % 60 * 2]) for i in range(20)]
        entries[10] = (b"100644", f"t{k:03d}-10", ids[(k + 10) % 60 * 2 + version])
        return tree_bytes(entries)

    trees = [(b"tree", tree(0, 0))]
    for k in range(1, 60):
        trees += [(b"tree", tree(k, 0)), (b"tree", tree(k - 1, 1))]
    objects = [*blobs, *trees]
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    check_pack(repo, idx, objects)
    bases = delta_bases(idx)
    for k in range(59):
        assert bases[object_id(b"tree", tree(k, 1))] == object_id(b"tree", tree(k, 0))
    kept = pack._TreeBases(set())
    for offset, (_, payload) in enumerate(trees):
        kept.add(payload, pack._keys(payload), offset, 0, None, None)
        held = {id(entry[0]) for entries in kept.keyed.values() for entry in entries}
        assert kept.kept <= pack._BASES_BYTES and len(held) <= len(kept.added)
    assert sum(size for size, _ in kept.added.values()) < pack._BASES_BYTES < len(trees) * 800


def test_many_objects_sharing_fanout_bytes(tmp_path: Path) -> None:
    repo = bare(tmp_path)
    rng = random.Random(2)
    objects = [(b"blob", rng.randbytes(rng.randrange(0, 200))) for _ in range(700)]
    assert len({object_id(k, p)[:2] for k, p in objects}) < 256  # some first bytes shared
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    check_pack(repo, idx, objects)


def test_an_object_given_twice_is_packed_once(tmp_path: Path) -> None:
    repo = bare(tmp_path)
    objects = all_kinds(random.Random(3), blobs=3)
    kind, payload = objects[5]
    given: list[PackObject] = [*objects, (kind, payload), (object_id(kind, payload), kind, payload)]
    idx = write_pack(given, repo / "objects" / "pack", repo)
    assert idx is not None
    check_pack(repo, idx, objects)
    data = idx.with_suffix(".pack").read_bytes()
    assert struct.unpack(">I", data[8:12]) == (len(objects),)


def test_the_same_objects_give_the_same_pack(tmp_path: Path) -> None:
    repo = bare(tmp_path)
    objects = all_kinds(random.Random(4), blobs=3)
    first = write_pack(objects, repo / "objects" / "pack", repo)
    again = write_pack([(object_id(k, p), k, p) for k, p in objects], first.parent, repo)  # type: ignore[union-attr]
    assert first == again and first is not None
    check_pack(repo, first, objects)


def test_offsets_in_the_large_offset_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offsets past 2 GiB without writing 2 GiB: the threshold lowered, so most entries go to
    the 8-byte table, which git and libgit2 must then read."""
    monkeypatch.setattr(pack, "LARGE_OFFSET", 4000)
    repo = bare(tmp_path)
    objects = all_kinds(random.Random(5), blobs=30)
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    data = idx.read_bytes()
    count = len(objects)
    small = struct.unpack(f">{count}I", data[8 + 1024 + 24 * count : 8 + 1024 + 28 * count])
    assert 0 < sum(1 for value in small if value & 0x80000000) < count
    check_pack(repo, idx, objects)


def test_the_index_written_a_few_entries_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index is written in chunks of entries, large offsets among them: it is the index
    written at once, which git and libgit2 read."""
    repo = bare(tmp_path)
    objects = all_kinds(random.Random(6), blobs=30)
    whole = write_pack(objects, tmp_path / "whole", repo)
    monkeypatch.setattr(pack, "_INDEX_CHUNK", 3)
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert whole is not None and idx is not None and len(objects) > 3 * 3
    assert idx.read_bytes() == whole.read_bytes()
    monkeypatch.setattr(pack, "LARGE_OFFSET", 4000)
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    check_pack(repo, idx, objects)


def test_blobs_are_stored_and_trees_and_commits_deflated(tmp_path: Path) -> None:
    repo = bare(tmp_path)
    blob = bytes(5000)  # would shrink to almost nothing if deflated
    commit = b"tree %s\nauthor %s\ncommitter %s\n\n%s\n" % (
        object_id(b"tree", b"").encode(),
        IDENTITY,
        IDENTITY,
        b"ab" * 2000,
    )
    idx = write_pack([(b"blob", blob), (b"tree", b""), (b"commit", commit)], repo / "o", repo)
    assert idx is not None
    sizes = {kind: packed for kind, _, packed in verify_pack_sizes(idx)}
    assert sizes["blob"] >= len(blob)
    assert sizes["commit"] < len(commit) // 4


def test_a_tree_over_the_deflate_limit_is_stored_whole(tmp_path: Path) -> None:
    """Deflating a directory of thousands of entries at every checkpoint cost milliseconds
    a write: such a tree is stored, a smaller one deflated."""
    repo = bare(tmp_path)
    entry = b"100644 n\0" + bytes(20)
    large = entry * (pack._DEFLATE_LIMIT // len(entry) + 1)  # compresses to almost nothing
    small = (b"100644 m\0" + bytes(20)) * 100  # another first name: not a delta of large
    objects = [(b"tree", large), (b"tree", small)]
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    packed = {oid: size for oid, _, _, size in verify_pack_rows(idx)}
    assert packed[object_id(b"tree", large)] > len(large)
    assert packed[object_id(b"tree", small)] < len(small) // 4


def stored_whole(row: tuple[str, str, int, int]) -> bool:
    """Whether a ``verify_pack_rows`` row of a whole object is a zlib stream of stored blocks:
    its packed size is its size plus the stream's 11 bytes and the entry header's."""
    _, _, size, packed = row
    return packed >= size + 11


def test_small_payloads_are_stored_in_a_checkpoints_pack(tmp_path: Path) -> None:
    """Setting up a deflater costs more than a small tree or delta gains from it: with
    ``deflate_min`` (a checkpoint's) those are stored, larger ones still deflated."""
    blobs = [(b"blob", b"a"), (b"blob", b"b")]
    one, other = (object_id(kind, payload) for kind, payload in blobs)
    small = tree_bytes([(b"100644", "c00000000", one), (b"100644", "h", one)])
    large = tree_bytes([(b"100644", f"n{i:03d}", one) for i in range(100)])
    edited = tree_bytes([(b"100644", f"n{i:03d}", other if i == 50 else one) for i in range(100)])
    objects = [*blobs, (b"tree", small), (b"tree", large), (b"tree", edited)]
    deflated_delta = 0
    for deflate_min in (0, pack.CHECKPOINT_DEFLATE_MIN):
        repo = bare(tmp_path / str(deflate_min))
        idx = write_pack(objects, repo / "objects" / "pack", repo, deflate_min=deflate_min)
        assert idx is not None
        check_pack(repo, idx, objects)
        rows = {oid: row for row in verify_pack_rows(idx) for oid in [row[0]]}
        seen = verify_pack(idx)
        edited_id = object_id(b"tree", edited)
        assert seen[edited_id][3] == 1  # a delta of large, of a few bytes
        edited_packed = rows[edited_id][3]
        assert len(small) < pack.CHECKPOINT_DEFLATE_MIN < len(large)
        assert stored_whole(rows[object_id(b"tree", small)]) == (deflate_min > 0)
        assert not stored_whole(rows[object_id(b"tree", large)])
        if deflate_min:
            assert edited_packed > deflated_delta  # its few bytes stored: 11 more
        else:
            deflated_delta = edited_packed


def test_a_checkpoint_stores_its_small_entries(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(5):
        store.create(f"/memories/n{i}.md", "x\n" * 400)
    store.checkpoint()
    (idx,) = sorted((repo_path / "objects" / "pack").glob("*.idx"), key=os.path.getmtime)[-1:]
    rows = verify_pack_rows(idx, whole=True)
    assert all(stored_whole(row) for row in rows if row[2] < pack.CHECKPOINT_DEFLATE_MIN)
    assert any(not stored_whole(row) for row in rows if row[1] != "blob")


@pytest.mark.parametrize("packer", ["checkpoint", "gc"])
def test_the_newest_version_of_a_tree_is_stored_whole(
    repo_path: Path, key: str, packer: str
) -> None:
    """A checkpoint packs its objects newest first, and gc's walk yields a commit's tree before
    its parents, as git's gc orders a pack: the trees of the branch's commit are stored whole
    or as deltas of each other (two files' trees may share an entry), never of an older
    version, so a fresh process reading them resolves no chain through history; the older
    versions are the deltas, of newer ones."""
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(6):
        store.create(f"/memories/n{i}.md", f"note {i}\n")
    for i in range(6):
        store.str_replace(f"/memories/n{i % 2}.md", "note", f"note {i}")
    if packer == "gc":
        store.gc(grace=0)
    else:
        store.checkpoint()
    (idx,) = sorted((repo_path / "objects" / "pack").glob("*.idx"), key=os.path.getmtime)[-1:]
    seen = verify_pack(idx)
    bases = delta_bases(idx)
    git = ["git", "--git-dir", str(repo_path)]
    listed = subprocess.run(
        [*git, "ls-tree", "-r", "-t", "refs/heads/main"], capture_output=True, text=True, check=True
    )
    root = subprocess.run(
        [*git, "rev-parse", "refs/heads/main^{tree}"], capture_output=True, text=True, check=True
    )
    current = {root.stdout.strip()} | {
        f[2] for f in map(str.split, listed.stdout.splitlines()) if f[1] == "tree"
    }
    assert current <= seen.keys()
    assert seen[root.stdout.strip()][3] == 0
    assert all(bases[oid] in current for oid in current if oid in bases)
    older = [oid for oid, row in seen.items() if row[0] == "tree" and oid not in current]
    assert len(older) >= 10 and sum(oid in bases for oid in older) > len(older) // 2


@pytest.mark.parametrize("packer", ["checkpoint", "gc"])
def test_file_trees_chain_only_through_their_own_versions(
    repo_path: Path, key: str, packer: str
) -> None:
    """Notes of one size share their header blob: packed by a checkpoint or by gc, their
    current trees are whole or deltas of whole trees (at most one deep), and each older
    version of an edited note is a delta of its own newer version."""
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(40):
        store.create(f"/memories/n{i:02d}.md", f"note {i:02d}\n")
    rng = random.Random(23)
    words = [rng.randbytes(4).hex() for _ in range(3000)]
    store.create("/memories/long.md", " ".join(words) + "\n")
    for k in range(4):
        store.str_replace("/memories/long.md", words[-1], f"{words[-1]} edit{k}")
        store.str_replace(f"/memories/n{k:02d}.md", "note", "memo")
    if packer == "gc":
        store.gc(grace=0)
    else:
        store.checkpoint()
    seen: dict[str, tuple[str, int, int, int]] = {}
    bases: dict[str, str] = {}
    for idx in (repo_path / "objects" / "pack").glob("*.idx"):
        seen |= verify_pack(idx)
        bases |= delta_bases(idx)
    git = ["git", "--git-dir", str(repo_path)]

    def file_trees(commit: str) -> dict[str, str]:
        listed = subprocess.run(
            [*git, "ls-tree", "-r", "-t", commit], capture_output=True, text=True, check=True
        ).stdout
        rows = [line.split() for line in listed.splitlines()]
        return {f[3]: f[2] for f in rows if f[1] == "tree" and f[3].rsplit("/", 1)[-1][0] == "f"}

    current = file_trees("refs/heads/main")
    assert len(current) == 41 and all(seen[oid][3] <= 1 for oid in current.values())
    long_path = max(current, key=lambda p: seen[current[p]][1])  # the largest file tree
    versions = [file_trees(f"refs/heads/main~{2 * k}")[long_path] for k in range(5)]
    assert len(set(versions)) == 5
    for newer, older in itertools.pairwise(versions):
        assert bases[older] == newer


def verify_pack_rows(idx: Path, *, whole: bool = False) -> list[tuple[str, str, int, int]]:
    """(id, type, size, packed size) of each object of the pack (``whole``: deltas left
    out), as git verify-pack -v reads it."""
    run = subprocess.run(
        ["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True, check=True
    )
    rows = [line.split() for line in run.stdout.splitlines()]
    return [
        (f[0], f[1], int(f[2]), int(f[3]))
        for f in rows
        if len(f[0]) == 40 and (len(f) == 5 or (len(f) > 5 and not whole))
    ]


def verify_pack_sizes(idx: Path) -> list[tuple[str, int, int]]:
    """(type, size, packed size) of each whole object of the pack."""
    return [(kind, size, packed) for _, kind, size, packed in verify_pack_rows(idx, whole=True)]


def test_nothing_is_written_for_no_objects(tmp_path: Path) -> None:
    repo = bare(tmp_path)
    before = sorted(repo.rglob("*"))
    assert write_pack([], repo / "objects" / "pack", repo) is None
    assert write_pack(iter([]), repo / "new" / "pack", repo) is None
    assert sorted(repo.rglob("*")) == before


def test_a_missing_pack_directory_is_made_owner_only_and_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = bare(tmp_path)
    flushed: list[Path] = []
    real = fsutil.fsync_dir

    def fsync_dir(path: str | os.PathLike[str]) -> None:
        flushed.append(Path(path))
        real(path)

    monkeypatch.setattr(pack, "fsync_dir", fsync_dir)
    idx = write_pack([(b"blob", b"x")], repo / "elsewhere" / "pack", repo)
    assert idx is not None
    for directory in (repo / "elsewhere", repo / "elsewhere" / "pack"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    # Each new directory's name is durable too: its parent is flushed.
    assert flushed[1:] == [repo / "elsewhere" / "pack", repo / "elsewhere", repo]


def test_durable_before_visible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both files flushed, then the pack renamed, then the index (which makes the pack
    visible), then both directories of the renames flushed."""
    repo = bare(tmp_path)
    calls: list[tuple[str, str]] = []
    real_replace, real_file, real_dir = os.replace, fsutil.fsync_file, fsutil.fsync_dir

    def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        calls.append(("rename", Path(target).suffix))
        real_replace(source, target)

    def fsync_file(path: str | os.PathLike[str]) -> None:
        calls.append(("fsync file", Path(path).name))
        real_file(path)

    def fsync_dir(path: str | os.PathLike[str]) -> None:
        where = "pack dir" if Path(path) == repo / "objects" / "pack" else "temporary dir"
        assert Path(path).name.startswith(pack.TMP_PREFIX) or where == "pack dir"
        calls.append(("fsync dir", where))
        real_dir(path)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(pack, "fsync_file", fsync_file)
    monkeypatch.setattr(pack, "fsync_dir", fsync_dir)
    write_pack([(b"blob", b"x")], repo / "objects" / "pack", repo)
    assert calls == [
        ("fsync file", "pack"),
        ("fsync file", "idx"),
        ("rename", ".pack"),
        ("rename", ".idx"),
        ("fsync dir", "temporary dir"),
        ("fsync dir", "pack dir"),
    ]


KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from gitmem.git.pack import write_pack

def objects():
    for i in range(50):
        yield (b"blob", os.urandom(100_000))
    os.kill(os.getpid(), signal.SIGKILL)
    yield (b"blob", b"never")

repo = Path(sys.argv[1])
write_pack(objects(), repo / "objects" / "pack", repo)
"""


def test_a_writer_killed_midway_leaves_no_visible_pack(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    store.gc(grace=0)
    pack_dir = repo_path / "objects" / "pack"
    before = sorted(pack_dir.iterdir())
    run = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(repo_path)], check=False)
    assert run.returncode == -signal.SIGKILL
    assert sorted(pack_dir.iterdir()) == before
    (leftover,) = repo_path.glob(pack.TMP_PREFIX + "*")
    assert [p.name for p in leftover.iterdir()] == ["pack"]  # half a pack, in its directory
    assert store.verify().ok
    store.gc(grace=0)
    assert not leftover.exists()


# -- merging packs by copying their entries (automatic maintenance) --------------------------


def versioned_trees(rng: random.Random, versions: int) -> list[tuple[bytes, bytes]]:
    """Blobs and successive versions of a directory tree (which the writer stores as deltas)."""
    blobs = [(b"blob", rng.randbytes(200)) for _ in range(versions)]
    ids = [object_id(kind, payload) for kind, payload in blobs]
    names = [f"e{i:03d}" for i in range(30)]
    entries = dict.fromkeys(names, ids[0])
    out: list[tuple[bytes, bytes]] = list(blobs)
    for version in range(versions):
        entries[rng.choice(names)] = ids[version]
        out.append((b"tree", tree_bytes([(b"100644", n, o) for n, o in entries.items()])))
    return out


def merged(repo: Path, sources: list[Path], budget: int) -> tuple[Path, list[int]]:
    """Merge ``sources`` ``budget`` bytes at a time; the new index and the bytes of each step."""
    job = pack.PackMerge(sources, repo)
    steps: list[int] = []
    done = False
    while not done:
        before = job._offset
        done = job.step(budget)
        steps.append(job._offset - before)
    return job.finish(repo / "objects" / "pack"), steps


def test_a_merge_copies_entries_and_deltas_a_bounded_amount_at_a_time(tmp_path: Path) -> None:
    """Three packs (one object in two of them, trees stored as deltas) merged 2 KB at a time:
    the new pack holds every object once, git verifies it, its deltas are the sources' (copied,
    not recomputed), and no step copied more than its budget and one entry."""
    repo = bare(tmp_path)
    rng = random.Random(11)
    groups = [versioned_trees(rng, 40), all_kinds(rng), versioned_trees(rng, 25)]
    groups[2].append(groups[0][5])  # a blob in two sources: packed once
    pack_dir = repo / "objects" / "pack"
    sources = [write_pack(group, pack_dir, repo) for group in groups]
    assert all(sources)
    deltas = {}
    for idx in sources:
        assert idx is not None
        deltas.update({oid: row[3] for oid, row in verify_pack(idx).items()})
    assert sum(1 for depth in deltas.values() if depth) > 40
    new_idx, steps = merged(repo, [s for s in sources if s is not None], 2000)
    # A step stops once it has copied its budget: it may pass it by one entry, which is at
    # most about 3 KB here but for the 300 KB blob's.
    assert len(steps) > 20 and sum(1 for size in steps if size >= 2000 + 3200) <= 1
    objects = [obj for group in groups for obj in group]
    check_pack(repo, new_idx, list(dict.fromkeys(objects)))
    seen = verify_pack(new_idx)
    assert {oid: row[3] for oid, row in seen.items()} == deltas  # the same chains
    assert not list(repo.glob(pack.TMP_PREFIX + "*"))


def test_a_merge_reads_a_source_removed_meanwhile(tmp_path: Path) -> None:
    repo = bare(tmp_path)
    rng = random.Random(12)
    groups = [versioned_trees(rng, 20), versioned_trees(rng, 20)]
    pack_dir = repo / "objects" / "pack"
    sources = [write_pack(group, pack_dir, repo) for group in groups]
    job = pack.PackMerge([s for s in sources if s is not None], repo)
    assert not job.step(100)
    for idx in sources:  # another process merged them, or gc ran
        assert idx is not None
        idx.unlink()
        idx.with_suffix(".pack").unlink()
    while not job.step(100):
        pass
    new_idx = job.finish(pack_dir)
    check_pack(repo, new_idx, groups[0] + groups[1])


def test_a_damaged_entry_or_an_abandoned_merge_publishes_nothing(tmp_path: Path) -> None:
    repo = bare(tmp_path)
    pack_dir = repo / "objects" / "pack"
    idx = write_pack(versioned_trees(random.Random(13), 10), pack_dir, repo)
    other = write_pack(versioned_trees(random.Random(14), 10), pack_dir, repo)
    assert idx is not None and other is not None
    before = sorted(pack_dir.iterdir())
    job = pack.PackMerge([idx, other], repo)
    assert not job.step(1)
    job.abandon()
    assert sorted(pack_dir.iterdir()) == before and not list(repo.glob(pack.TMP_PREFIX + "*"))
    data = bytearray(idx.with_suffix(".pack").read_bytes())
    data[-30] ^= 0xFF  # inside the last entry
    idx.with_suffix(".pack").chmod(0o600)
    idx.with_suffix(".pack").write_bytes(bytes(data))
    job = pack.PackMerge([other, idx], repo)
    with pytest.raises(ValueError, match="CRC"):
        job.step(1 << 30)
    job.abandon()
    assert sorted(pack_dir.iterdir()) == before and not list(repo.glob(pack.TMP_PREFIX + "*"))
    (pack_dir / "pack-v1.idx").write_bytes(b"\xfftOc" + struct.pack(">I", 1) + bytes(2000))
    (pack_dir / "pack-v1.pack").write_bytes(b"PACK")
    with pytest.raises(ValueError, match="version-2"):
        pack.PackMerge([other, pack_dir / "pack-v1.idx"], repo)
    assert not list(repo.glob(pack.TMP_PREFIX + "*"))


# -- which tree a tree is a delta of -----------------------------------------------------------


def sealed_like(rng: random.Random) -> str:
    """An entry name as long as a sealed one (a kind letter and base64 text)."""
    return "f" + rng.randbytes(30).hex()


def file_tree(chunks: list[str], header: str) -> bytes:
    """A memory file's tree: chunk entries and the header entry, as gitmem writes them."""
    entries = [(b"100644", f"c{i:08x}", oid) for i, oid in enumerate(chunks)]
    return tree_bytes([*entries, (b"100644", "h", header)])


def test_notes_sharing_a_header_are_not_chained(tmp_path: Path) -> None:
    """Notes of the same size share their header blob, so each note's tree shares its header
    entry with the others': a note's tree may be a delta of another note's only if that one
    is stored whole, never a chain of unrelated notes (they lay 28 deep on average in a store
    of 10,000 notes, up to 50). Newest first, as a checkpoint packs: a directory naming the
    notes, then the notes."""
    repo = bare(tmp_path)
    rng = random.Random(21)
    header = (b"blob", rng.randbytes(40))
    chunks = [(b"blob", rng.randbytes(60)) for _ in range(120)]
    header_id = object_id(*header)
    notes = [(b"tree", file_tree([object_id(*c)], header_id)) for c in chunks]
    directory = tree_bytes([(b"40000", sealed_like(rng), object_id(*n)) for n in notes])
    objects = [(b"tree", directory), *notes, header, *chunks]
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    check_pack(repo, idx, objects)
    seen = verify_pack(idx)
    depths = [seen[object_id(*n)][3] for n in notes]
    assert max(depths) == 1 and depths.count(1) > len(notes) // 2  # deltas, of whole trees


def test_a_tree_is_a_delta_of_its_own_paths_version(tmp_path: Path) -> None:
    """A file's older version is a delta of its newer one (the same path, found through the
    name the directory gives it), not of another note's tree that happens to share more bytes;
    each path's versions chain at most DELTA_DEPTH deep, and the newest version is whole."""
    repo = bare(tmp_path)
    rng = random.Random(22)
    blobs = [(b"blob", rng.randbytes(50)) for _ in range(400)]
    ids = [object_id(*b) for b in blobs]
    names = [sealed_like(rng) for _ in range(3)]
    chunks = {name: ids[10 * k : 10 * k + 8] for k, name in enumerate(names)}
    objects: list[tuple[bytes, bytes]] = []
    versions: dict[str, list[str]] = {name: [] for name in names}
    decoy_at = 5
    for version in range(pack.DELTA_DEPTH + 10):  # newest first
        trees = {}
        for k, name in enumerate(names):
            # Each version differs in its last chunk and its header from the one before.
            chunks[name][-1] = ids[100 + 3 * version + k]
            trees[name] = (b"tree", file_tree(chunks[name], ids[300 + version]))
            versions[name].append(object_id(*trees[name]))
        directory = tree_bytes([(b"40000", n, object_id(*t)) for n, t in trees.items()])
        if version == decoy_at:
            # Another note's tree (named by another directory) sharing all but its header
            # with this version of the first file comes just before it: by bytes alone, it
            # is the better base.
            decoy = file_tree(chunks[names[0]], ids[399])
            other = tree_bytes([(b"40000", sealed_like(rng), object_id(b"tree", decoy))])
            objects += [(b"tree", other), (b"tree", decoy)]
        objects += [(b"tree", directory), *trees.values()]
    objects += blobs
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    check_pack(repo, idx, objects)
    seen = verify_pack(idx)
    bases = delta_bases(idx)
    for name in names:
        chain = versions[name]
        assert seen[chain[0]][3] == 0
        for depth in range(1, pack.DELTA_DEPTH + 1):
            assert bases[chain[depth]] == chain[depth - 1] and seen[chain[depth]][3] == depth
        assert all(bases[oid] in chain for oid in chain if oid in bases)
        assert max(seen[oid][3] for oid in chain) == pack.DELTA_DEPTH


# -- trees changed in several places -----------------------------------------------------------


def based_file_tree(chunks: list[str], bases: list[str], header: str) -> bytes:
    """A file tree holding its chunks in order, then base entries ``d<base blob id>`` (one
    for each id in ``bases``, sorted), then its header."""
    entries = [(b"100644", f"c{i:08x}", oid) for i, oid in enumerate(chunks)]
    entries += [(b"100644", f"d{oid}", oid) for oid in bases]
    return tree_bytes([*entries, (b"100644", "h", header)])


def cat_file(repo: Path, oids: list[str]) -> dict[str, bytes]:
    """Each object's payload as ``git cat-file --batch`` reads it."""
    run = subprocess.run(
        ["git", "--git-dir", str(repo), "cat-file", "--batch"],
        input="".join(f"{oid}\n" for oid in oids).encode(),
        capture_output=True,
        check=True,
    )
    out, pos = {}, 0
    for oid in oids:
        eol = run.stdout.index(b"\n", pos)
        got, _, size = run.stdout[pos:eol].split()
        assert got.decode() == oid
        out[oid] = run.stdout[eol + 1 : eol + 1 + int(size)]
        pos = eol + 2 + int(size)
    return out


def pack_versions(
    tmp_path: Path, trees: list[bytes], blobs: list[tuple[bytes, bytes]]
) -> dict[str, tuple[str, int, int, int]]:
    """Pack ``trees`` (newest first) and ``blobs``; check the pack as git, libgit2 and git
    cat-file read it; return verify-pack's view of it."""
    repo = bare(tmp_path)
    objects = [*((b"tree", t) for t in trees), *blobs]
    idx = write_pack(objects, repo / "objects" / "pack", repo)
    assert idx is not None
    check_pack(repo, idx, objects)
    subprocess.run(["git", "index-pack", "--verify", str(idx.with_suffix(".pack"))], check=True)
    oids = [object_id(b"tree", t) for t in trees]
    assert cat_file(repo, oids) == dict(zip(oids, trees, strict=True))
    return verify_pack(idx)


def test_a_tree_changed_in_three_places_is_a_small_delta(tmp_path: Path) -> None:
    """A file tree of 20 chunks and 100 base entries whose next version changes a chunk,
    inserts a base entry in the middle and changes its header: a delta of those three
    entries (about 140 bytes inserted), not of everything between the first and the last."""
    rng = random.Random(31)
    blobs = [(b"blob", rng.randbytes(30)) for _ in range(130)]
    ids = [object_id(*b) for b in blobs]
    chunks, bases = ids[:20], sorted(ids[20:120])
    older = based_file_tree(chunks, bases, ids[120])
    chunks[7] = ids[121]
    newer_bases = sorted([*bases, ids[122]])
    assert 30 < newer_bases.index(ids[122]) < 70  # inserted well inside the base entries
    newer = based_file_tree(chunks, newer_bases, ids[123])
    assert len(older) > 7000
    seen = pack_versions(tmp_path, [newer, older], blobs)
    assert seen[object_id(b"tree", newer)][3] == 0
    kind, size, _, depth = seen[object_id(b"tree", older)]
    assert (kind, depth) == ("tree", 1)
    assert size < 200


def test_a_tree_with_entries_removed_in_several_places_is_a_small_delta(tmp_path: Path) -> None:
    """Base entries removed at three places, none next to another, and the header changed."""
    rng = random.Random(32)
    blobs = [(b"blob", rng.randbytes(30)) for _ in range(130)]
    ids = [object_id(*b) for b in blobs]
    chunks, bases = ids[:20], sorted(ids[20:120])
    older = based_file_tree(chunks, bases, ids[120])
    kept = [oid for i, oid in enumerate(bases) if i not in (10, 11, 12, 50, 90)]
    newer = based_file_tree(chunks, kept, ids[121])
    seen = pack_versions(tmp_path, [older, newer], blobs)
    kind, size, _, depth = seen[object_id(b"tree", newer)]
    assert (kind, depth) == ("tree", 1)
    assert size < 80  # the header inserted, the rest copies


def test_a_tree_of_duplicate_looking_entries_is_read_back_whole(tmp_path: Path) -> None:
    """Entries with one id under many names, names that differ in their last letter, ids
    holding a NUL and a mode's bytes: the delta copies only bytes found equal, so each version
    reads back as it was, whatever order they come in."""
    rng = random.Random(33)
    blobs = [(b"blob", rng.randbytes(30)) for _ in range(40)]
    ids = [object_id(*b) for b in blobs]
    tricky = (b"\x00100644 d" + rng.randbytes(11)).hex()
    assert object_id(b"blob", b"") not in ids
    same = ids[0]

    def version(names: list[str], swap: int) -> bytes:
        entries = [(b"100644", n, tricky if n.endswith("a") else same) for n in names]
        entries[swap] = (b"100644", entries[swap][1], ids[swap % 40])
        return tree_bytes(entries)

    names = [f"e{i:03d}{c}" for i in range(60) for c in "ab"]
    trees = [version(names, 5)]
    for step in range(1, 12):
        names = [n for k, n in enumerate(names) if k % (10 + step) != step]
        names += [f"e{step:03d}c", f"e{60 + step:03d}a"]
        trees.append(version(sorted(set(names)), (7 * step) % len(names)))
    trees = list(dict.fromkeys(trees))
    seen = pack_versions(tmp_path, trees, [*blobs, (b"blob", rng.randbytes(5))])
    deltas = [seen[object_id(b"tree", t)] for t in trees[1:]]
    assert all(
        depth >= 1 and size < len(t) // 4
        for (_, size, _, depth), t in zip(deltas, trees[1:], strict=True)
    )


def apply_delta(base: bytes, delta: bytes) -> bytes:
    """git's delta applied, as gitformat-pack describes it (independent of gitmem)."""

    def varint(pos: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = delta[pos]
            value |= (byte & 0x7F) << shift
            shift += 7
            pos += 1
            if not byte & 0x80:
                return value, pos

    base_size, pos = varint(0)
    target_size, pos = varint(pos)
    assert base_size == len(base)
    out = bytearray()
    while pos < len(delta):
        command = delta[pos]
        pos += 1
        if command & 0x80:
            offset = size = 0
            for i in range(4):
                if command & (1 << i):
                    offset |= delta[pos] << (8 * i)
                    pos += 1
            for i in range(3):
                if command & (1 << (4 + i)):
                    size |= delta[pos] << (8 * i)
                    pos += 1
            assert 0 < (size or 0x10000) <= 0xFFFFFF and offset + (size or 0x10000) <= len(base)
            out += base[offset : offset + (size or 0x10000)]
        else:
            assert 0 < command <= 0x7F
            out += delta[pos : pos + command]
            pos += command
    assert len(out) == target_size
    return bytes(out)


def test_entry_deltas_of_random_edits_and_malformed_trees_make_the_target() -> None:
    """Random trees edited at random places (entries inserted, removed, changed, repeated,
    moved) and bytes that are no tree at all: the delta makes the target exactly."""
    rng = random.Random(34)
    checked = 0
    for _ in range(300):
        entries = [
            rng.choice([b"100644 ", b"40000 "])
            + rng.randbytes(rng.randrange(1, 6)).hex().encode()
            + b"\0"
            + rng.choice([b"\0" * 20, rng.randbytes(20), b"\x00100644 " + bytes(12)])
            for _ in range(rng.randrange(0, 40))
        ]
        new = list(entries)
        for _ in range(rng.choice([1, 3, 5, 20])):  # (20: more than the searches)
            at = rng.randrange(len(new) + 1)
            action = rng.randrange(4)
            if action == 0 or not new:
                new.insert(at, rng.choice([*entries, b"100644 x\0" + rng.randbytes(20)]))
            elif action == 1:
                del new[at % len(new)]
            elif action == 2:
                new[at % len(new)] = new[at % len(new)][:-20] + rng.randbytes(20)
            else:
                new.insert(at, new.pop(rng.randrange(len(new))))
        base, target = b"".join(entries), b"".join(new)
        if rng.randrange(5) == 0:
            base, target = base[: rng.randrange(len(base) + 1)], target + rng.randbytes(9)
        prefix = common_prefix(base, target)
        suffix = common_suffix(base, target, min(len(base), len(target)) - prefix)
        found = pack._entry_delta(base, target, prefix, suffix)
        if found is not None:
            data, copied = found
            assert apply_delta(base, data) == target
            assert copied <= len(target)
            checked += 1
    assert checked > 150
