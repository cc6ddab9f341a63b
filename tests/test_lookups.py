"""A lookup's answers are the full read's: a codec remembers the names it looked up in each
directory version (a tree id at a path) and the bucket trees of split directories it checked
(docs/design.md, "Reading", step 6), and what it remembers must never differ from loading the
directory whole, nor let an altered tree through.

The split threshold is lowered (as in test_cold_reads.py): the shapes are those of a directory of
thousands of entries at the real threshold, with a couple of hundred.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem import MemoryStore, buckets
from gitmem.crypto import StoreKeys
from gitmem.editor import TreeEditor
from gitmem.errors import IntegrityError
from gitmem.format import KIND_FILE
from gitmem.git.objects import TREE_MODE, TreeEntry, parse_tree
from gitmem.paths import parse
from gitmem.snapshot import Snapshot
from gitmem.store import Change
from gitmem.tree import Node, TreeCodec

T = 4
COUNT = 150


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", T)
    yield


def grown(repo_path: Path, key: str) -> MemoryStore:
    """A store with a split ``/memories`` (COUNT files, a directory) and a small ``/memories/s``."""
    store = MemoryStore.open(repo_path, key, create=True)

    def edit(_: object, tree: TreeEditor) -> Change[None]:
        for i in range(COUNT):
            tree.put_file(parse(f"/memories/n{i}.md"), f"note {i}\n".encode())
        tree.put_file(parse("/memories/sub/inner.md"), b"inner\n")
        for i in range(3):
            tree.put_file(parse(f"/memories/s/m{i}.md"), f"small {i}\n".encode())
        return Change(("/memories",), None)

    store.write("create", edit)
    return store


def names(rng: random.Random) -> list[str]:
    """Names present and absent, in random order, some asked twice."""
    present = [f"n{i}.md" for i in rng.sample(range(COUNT), 25)] + ["sub", "s"]
    absent = [f"x{rng.randrange(10**6)}.md", "N1.md", "n1.md/", "sub.md", "m0.md"]
    picked = present + absent + rng.sample(present, 8) + absent[:2]
    rng.shuffle(picked)
    return picked


def check(store: MemoryStore, codec: TreeCodec, rng: random.Random) -> None:
    """Every lookup through ``codec`` (which keeps what it found) in ``/memories`` and
    ``/memories/s`` of the head equals what loading the directory whole in a fresh codec gives,
    and the path lookups of a snapshot through ``codec`` agree."""
    snap = store.snapshot()
    for path in ("/memories", "/memories/s"):
        at = parse(path)
        node = snap.lookup(at)
        assert node is not None
        fresh = TreeCodec(store.repo, store.keys).load_dir(node.oid, at)
        for name in names(rng) + [f"m{i}.md" for i in range(4)]:
            if "/" in name:
                continue
            expected = fresh.nodes.get(name)
            assert codec.find(node.oid, at, name) == expected, (path, name)
            found = codec.find_sealed(node.oid, at, name)
            assert found == (None if expected is None else (expected, fresh.sealed[name]))
            full = Snapshot(codec, snap.root).lookup(at.child(name))
            assert full == expected


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lookups_equal_the_full_read_after_writes_here_and_elsewhere(
    repo_path: Path, key: str, seed: int
) -> None:
    rng = random.Random(seed)
    writer = grown(repo_path, key)
    reader = MemoryStore.open(repo_path, key)
    # The reader's codec, never loading /memories whole: its lookups go bucket by bucket.
    check(reader, reader.codec, rng)
    check(reader, reader.codec, rng)  # everything asked again, now remembered
    # This process's writes (the writer's codec has /memories loaded whole after them).
    for i in rng.sample(range(COUNT), 4):
        writer.str_replace(f"/memories/n{i}.md", f"note {i}", f"edited {i}")
    writer.delete(f"/memories/n{rng.randrange(COUNT)}.md")
    writer.create("/memories/added.md", "added")
    writer.create("/memories/s/m3.md", "small 3")
    check(writer, writer.codec, rng)
    check(reader, reader.codec, rng)
    # Another process writes: the reader's versions are not the head's any more.
    script = (
        "import sys; from gitmem import MemoryStore;"
        "s = MemoryStore.open(sys.argv[1], sys.argv[2]);"
        "s.rename('/memories/added.md', '/memories/renamed.md');"
        "s.delete('/memories/s/m0.md');"
        "s.str_replace('/memories/n7.md', 'note 7', 'elsewhere')"
    )
    subprocess.run([sys.executable, "-c", script, str(repo_path), key], check=True)
    for store in (reader, writer):
        check(store, store.codec, rng)
        assert store.read_text("/memories/n7.md") == "elsewhere\n"
        assert store.kind("/memories/added.md") is None
        assert store.kind("/memories/renamed.md") == KIND_FILE
        assert store.kind("/memories/s/m0.md") is None


class Opened:
    """Counts entry names decrypted (process-wide)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        open_name = StoreKeys.open_name

        def counted(keys: StoreKeys, entry: str, parent: str) -> tuple[str, str, bytes]:
            self.count += 1
            return open_name(keys, entry, parent)

        monkeypatch.setattr(StoreKeys, "open_name", counted)


def test_a_lookup_asked_again_decrypts_nothing_and_a_new_version_reuses_its_buckets(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = grown(repo_path, key)
    reader = MemoryStore.open(repo_path, key)
    opened = Opened(monkeypatch)
    assert reader.read_text("/memories/n3.md") == "note 3\n"
    first = opened.count
    assert first > 0
    assert reader.read_text("/memories/n3.md") == "note 3\n"
    assert opened.count == first  # remembered for this version
    # Another writer changes one file: the reader's next lookup of n3.md, in a new version
    # of /memories, goes through buckets checked already unless the write touched them.
    writer.str_replace("/memories/n99.md", "note 99", "changed")
    raw_3 = reader.keys.seal_name("n3.md", "/memories", KIND_FILE)
    raw_99 = reader.keys.seal_name("n99.md", "/memories", KIND_FILE)
    shared = buckets.bucket_of(buckets.entry_bits(raw_3), 0) == buckets.bucket_of(
        buckets.entry_bits(raw_99), 0
    )
    before = opened.count
    assert reader.read_text("/memories/n3.md") == "note 3\n"
    if not shared:
        # Only the leaves the directory sealing of n3 reaches could be new (none here).
        assert opened.count == before
    assert reader.read_text("/memories/n99.md") == "changed\n"


def leaf_path(store: MemoryStore, tree: str, raw: str) -> list[str]:
    """The bucket names from split directory tree ``tree`` down to the leaf ``raw`` is in."""
    bits, entries = buckets.entry_bits(raw), store.repo.read_tree(tree)
    entries = [e for e in entries if e.name != "gitmem"]
    path: list[str] = []
    while entries and buckets.is_bucket_like(entries[0].name):
        name = buckets.bucket_name(buckets.bucket_of(bits, len(path)))
        path.append(name)
        entries = store.repo.read_tree({e.name: e.oid for e in entries}[name])
    return path


def replaced(store: MemoryStore, tree: str, at: list[str], oid: str) -> str:
    """``tree`` with the tree at bucket path ``at`` replaced by tree ``oid``."""
    entries = store.repo.read_tree(tree)
    below = {e.name: e.oid for e in entries}[at[0]]
    new = oid if len(at) == 1 else replaced(store, below, at[1:], oid)
    return store.repo.write_tree(
        [e if e.name != at[0] else TreeEntry(e.name, new, e.mode) for e in entries]
    )


def test_a_checked_leaf_moved_to_another_bucket_is_refused_by_a_codec_that_read_it(
    repo_path: Path, key: str
) -> None:
    """The checked trees are remembered by id and place: an authentic leaf, already read and
    checked where it belongs, is checked again (and refused) where it does not."""
    store = grown(repo_path, key)
    top = store.snapshot().lookup(parse("/memories"))
    assert top is not None
    at = parse("/memories")
    codec = TreeCodec(store.repo, store.keys)
    # Two names whose leaves differ in their first-level bucket.
    by_bucket: dict[str, tuple[str, list[str]]] = {}
    for i in range(COUNT):
        raw = store.keys.seal_name(f"n{i}.md", "/memories", KIND_FILE)
        path = leaf_path(store, top.oid, raw)
        by_bucket.setdefault(path[0], (f"n{i}.md", path))
    (name_a, path_a), (name_b, path_b) = list(by_bucket.values())[:2]
    assert codec.find(top.oid, at, name_a) is not None  # leaf A read and checked
    assert codec.find(top.oid, at, name_b) is not None
    leaf_a = top.oid
    for bucket in path_a:
        leaf_a = {e.name: e.oid for e in store.repo.read_tree(leaf_a)}[bucket]
    # Leaf A planted where B's leaf was, at the same depth if possible.
    forged = replaced(store, top.oid, path_b[: len(path_a)], leaf_a)
    with pytest.raises(IntegrityError, match="wrong bucket"):
        codec.find(forged, at, name_b)
    # The authentic version still answers as before, from what the codec kept.
    assert codec.find(top.oid, at, name_a) == TreeCodec(store.repo, store.keys).find(
        top.oid, at, name_a
    )


def test_a_directory_loaded_whole_answers_from_its_entries(repo_path: Path, key: str) -> None:
    store = grown(repo_path, key)
    codec = TreeCodec(store.repo, store.keys)
    at = parse("/memories")  # the root tree, split
    root = store.snapshot().lookup(at)
    assert root is not None
    assert codec.find(root.oid, at, "n1.md") is not None  # looked up bucket by bucket
    loaded = codec.load_dir(root.oid, at)  # now loaded: lookups read its entries
    for name in ["n1.md", "n2.md", "sub", "absent", "n1.md", "absent"]:
        assert codec.find(root.oid, at, name) == loaded.nodes.get(name)
    assert codec.find(root.oid, at, "sub") == Node("d", loaded.nodes["sub"].oid)


def bucket_tree(indices: list[int], rng: random.Random) -> bytes:
    return b"".join(
        b"40000 " + buckets.bucket_name(i).encode() + b"\0" + rng.randbytes(20) for i in indices
    )


def test_bucket_trees_read_whole_are_those_parsing_accepts(repo_path: Path) -> None:
    """read_buckets answers only for trees parse_tree and the bucket checks accept, and then
    with the same buckets; any change of a byte's meaning sends the tree to the full parse."""
    rng = random.Random(7)
    for _ in range(300):
        indices = sorted(rng.sample(range(buckets.FANOUT), rng.randint(1, buckets.FANOUT)))
        data = bucket_tree(indices, rng)
        parsed = parse_tree(data, "t")
        assert buckets.read_buckets(data) == {e.name: e.oid for e in parsed}
        variants = [
            data[:-1],
            data + b"\0",
            bucket_tree(indices[::-1], rng) if len(indices) > 1 else b"",
            bucket_tree([*indices, indices[-1]], rng),  # a bucket twice
            data.replace(b"40000 ", b"040000 ", 1),
            data.replace(b"40000 ", b"100644 ", 1),
            data.replace(b" b", b" B", 1),
            data.replace(b" b", b" c", 1),
            data + b"40000 c00\0" + rng.randbytes(20),
            data + b"100644 gitmem\0" + rng.randbytes(20),
        ]
        for variant in variants:
            fast = buckets.read_buckets(variant)
            if fast is None:
                continue
            entries = parse_tree(variant, "t")
            assert all(buckets.bucket_index(e.name) is not None for e in entries)
            assert all(e.mode == TREE_MODE for e in entries)
            assert fast == {e.name: e.oid for e in entries}
    assert buckets.read_buckets(b"") is None


def test_a_split_root_with_a_metadata_entry_that_is_no_blob_is_refused(
    repo_path: Path, key: str
) -> None:
    store = grown(repo_path, key)
    at = parse("/memories")
    root = store.snapshot().lookup(at)
    assert root is not None
    entries = store.repo.read_tree(root.oid)
    meta = next(e for e in entries if e.name == "gitmem")
    bad = store.repo.write_tree(
        [
            e if e.name != "gitmem" else TreeEntry(e.name, store.repo.empty_tree(), TREE_MODE)
            for e in entries
        ]
    )
    with pytest.raises(IntegrityError, match="no blob"):
        TreeCodec(store.repo, store.keys).find(bad, at, "n1.md")
    # Without it (a format 1 root) the buckets read the same.
    bare = store.repo.write_tree([e for e in entries if e != meta])
    assert TreeCodec(store.repo, store.keys).find(bare, at, "n1.md") == TreeCodec(
        store.repo, store.keys
    ).find(root.oid, at, "n1.md")
