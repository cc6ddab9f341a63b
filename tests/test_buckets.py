"""Split directories (format 4): a directory over the threshold is written as bucket trees by
the bits of its entries' synthetic IVs, canonically, and read back only when every entry sits
in the bucket its bits name (docs/design.md, "Split directories").

The threshold is lowered for these tests (gitmem.buckets.SPLIT_THRESHOLD): the shapes are the
same as at 256, with a few dozen entries instead of thousands.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem import MemoryStore, buckets
from gitmem import format as fmt
from gitmem.crypto import KdfParams
from gitmem.editor import TreeEditor
from gitmem.errors import FormatVersionError, IntegrityError, InvalidPath, PathExists
from gitmem.git.objects import BLOB_MODE, TREE_MODE, TreeEntry
from gitmem.git.refs import META_REF
from gitmem.paths import MemoryPath, parse
from gitmem.store import Change
from gitmem.tree import TreeCodec

FAST = KdfParams(64, 1, 1)
T = 4
REAL = buckets.SPLIT_THRESHOLD  # before the fixture lowers it


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", T)
    yield


def top_names(store: MemoryStore, tree: str) -> list[str]:
    return [e.name for e in store.repo.read_tree(tree)]


def node_at(store: MemoryStore, path: str) -> str:
    node = store.snapshot().lookup(parse(path))
    assert node is not None
    return node.oid


def fresh_id(store: MemoryStore, path: str) -> str:
    """The id of the directory's content written from scratch (no earlier version to edit)."""
    at = parse(path)
    loaded = store.codec.load_dir(node_at(store, path), at)
    return store.codec.write_dir(at, dict(loaded.nodes), {})


def depth(store: MemoryStore, tree: str) -> int:
    """How many bucket levels the directory tree ``tree`` has."""
    names = [e for e in store.repo.read_tree(tree) if e.name != fmt.META_ENTRY]
    if not names or buckets.bucket_index(names[0].name) is None:
        return 0
    return 1 + max(depth(store, e.oid) for e in names)


def placed_trees(store: MemoryStore, tree: str) -> set[tuple[tuple[int, ...], str]]:
    """The directory tree ``tree`` and its bucket trees, each with the bucket numbers that
    lead to it: a reader can take over a bucket unread only when both are unchanged."""
    found = set()
    stack: list[tuple[tuple[int, ...], str]] = [((), tree)]
    while stack:
        place, oid = stack.pop()
        found.add((place, oid))
        for entry in store.repo.read_tree(oid):
            number = buckets.bucket_index(entry.name)
            if number is not None:
                stack.append(((*place, number), entry.oid))
    return found


def meta(store: MemoryStore) -> dict[str, object]:
    oid = store.repo.ref(META_REF)
    assert oid is not None
    body: dict[str, object] = json.loads(store.repo.read_blob(oid))
    return body


def fresh_codec(store: MemoryStore) -> TreeCodec:
    return TreeCodec(store.repo, store.keys)


def tree_reads(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the trees ``store`` reads from now on, in order."""
    reads: list[str] = []
    real = store.repo.read_tree

    def counting(oid: str) -> list[TreeEntry]:
        reads.append(oid)
        return real(oid)

    monkeypatch.setattr(store.repo, "read_tree", counting)
    return reads


def test_growing_and_shrinking_keeps_one_canonical_tree(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", 2)  # 90 entries then nest a level deeper
    store = MemoryStore.open(repo_path, key, create=True)
    deepest = 0
    names = [f"note{i}.md" for i in range(90)]
    for count, name in enumerate(names, 1):
        store.create(f"/memories/d/{name}", name)
        oid = node_at(store, "/memories/d")
        # The same entries written fresh give the same tree: the shape is canonical.
        assert oid == fresh_id(store, "/memories/d"), count
        deepest = max(deepest, depth(store, oid))
        assert (depth(store, oid) > 0) == (count > 2), count
    assert deepest >= 2  # some bucket of 90 entries over 64 buckets held more than 2
    other = MemoryStore.open(repo_path, key)  # another process: reads the buckets back
    assert sorted(other.files()) == sorted(f"/memories/d/{n}" for n in names)
    for count in range(len(names), 0, -1):
        store.delete(f"/memories/d/{names[count - 1]}")
        if count > 1:
            oid = node_at(store, "/memories/d")
            assert oid == fresh_id(store, "/memories/d"), count
            assert (depth(store, oid) > 0) == (count - 1 > 2), count
    assert store.verify().ok and other.verify().ok


@pytest.mark.parametrize("count", [T - 1, T, T + 1])
def test_the_threshold_itself(repo_path: Path, key: str, count: int) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(count):
        store.create(f"/memories/f{i}.md", "x")
    root = store.snapshot().root
    assert root is not None
    split = count > T
    assert all(buckets.bucket_index(n) is not None for n in top_names(store, root)[:-1]) == split
    assert fmt.META_ENTRY in top_names(store, root)  # the metadata stays at the top
    assert meta(store)["format"] == fmt.COMPACT_FORMAT_VERSION  # every write makes it 6
    assert len(MemoryStore.open(repo_path, key).files()) == count


def test_the_root_splits_and_a_fresh_reader_checks_every_bucket(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(40):
        store.create(f"/memories/r{i}.md", str(i))
    assert fresh_id(store, "/memories") == store.snapshot().root
    reader = fresh_codec(store)
    loaded = reader.load_dir(store.snapshot().root or "", MemoryPath(()))
    assert len(loaded.nodes) == 40
    assert store.read_text("/memories/r7.md") == "7"


def grow_big(store: MemoryStore, names: range) -> None:
    def edit(_: object, tree: TreeEditor) -> Change[None]:
        for i in names:
            tree.put_file(parse(f"/memories/big/n{i}.md"), b"x")
        return Change(("/memories/big",), None)

    store.write("seed", edit)


def shrink_big(store: MemoryStore, names: range) -> None:
    def edit(_: object, tree: TreeEditor) -> Change[None]:
        for i in names:
            tree.remove(parse(f"/memories/big/n{i}.md"))
        return Change(("/memories/big",), None)

    store.write("shrink", edit)


def test_the_real_threshold(repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", REAL)
    store = MemoryStore.open(repo_path, key, create=True)
    grow_big(store, range(REAL))
    assert depth(store, node_at(store, "/memories/big")) == 0
    grow_big(store, range(REAL, REAL + 1))
    oid = node_at(store, "/memories/big")
    assert depth(store, oid) == 1 and oid == fresh_id(store, "/memories/big")
    grow_big(store, range(REAL + 1, REAL * 16))  # a quarter of the threshold a bucket
    oid = node_at(store, "/memories/big")
    assert depth(store, oid) == 1 and oid == fresh_id(store, "/memories/big")
    shrink_big(store, range(REAL, REAL * 16))
    oid = node_at(store, "/memories/big")
    assert depth(store, oid) == 0 and oid == fresh_id(store, "/memories/big")
    assert len(MemoryStore.open(repo_path, key).files()) == REAL


@pytest.mark.slow
def test_the_real_threshold_nests_buckets(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", REAL)
    store = MemoryStore.open(repo_path, key, create=True)
    grow_big(store, range(REAL * 64 * 2))  # twice the threshold a bucket: every one splits
    oid = node_at(store, "/memories/big")
    assert depth(store, oid) == 2 and oid == fresh_id(store, "/memories/big")
    shrink_big(store, range(REAL * 32, REAL * 64 * 2))  # half of it: none does
    oid = node_at(store, "/memories/big")
    assert depth(store, oid) == 1 and oid == fresh_id(store, "/memories/big")
    assert MemoryStore.open(repo_path, key).verify().ok


def test_a_new_version_reads_only_the_buckets_that_changed(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = split_dir(repo_path, key, 60)
    reader = MemoryStore.open(repo_path, key)  # another process
    at = parse("/memories/d")
    old = node_at(store, "/memories/d")
    reader.codec.load_dir(old, at)
    store.create("/memories/d/new.md", "x")
    store.delete("/memories/d/n3.md")
    new = node_at(store, "/memories/d")
    reads = tree_reads(reader, monkeypatch)
    loaded = reader.codec.load_dir(new, at)
    # The trees that changed at their place (the top tree and the buckets on the two changed
    # paths, more where a bucket split or merged back: that depends on the key), not all.
    changed = placed_trees(store, new) - placed_trees(store, old)
    assert len(reads) <= len(changed) < len(placed_trees(store, new))
    assert dict(loaded.nodes) == dict(fresh_codec(store).load_dir(new, at).nodes)
    assert dict(loaded.sealed) == dict(fresh_codec(store).load_dir(new, at).sealed)
    assert "new.md" in loaded.nodes and "n3.md" not in loaded.nodes


def test_a_superseded_version_is_dropped_and_still_reads_back(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = split_dir(repo_path, key, 60)
    at = parse("/memories/d")
    old = node_at(store, "/memories/d")
    before = store.snapshot()
    assert (old, at) in store.codec._dirs  # written by this process: cached
    store.create("/memories/d/new.md", "x")
    store.delete("/memories/d/n3.md")
    new = node_at(store, "/memories/d")
    # The writer drops the version it edited from, and keeps the one it wrote.
    assert (old, at) not in store.codec._dirs and (new, at) in store.codec._dirs
    expected = dict(fresh_codec(store).load_dir(old, at).nodes)
    changed = placed_trees(store, old) - placed_trees(store, new)
    node = before.lookup(at)
    assert node is not None and node.oid == old
    reads = tree_reads(store, monkeypatch)
    # An older snapshot still reads as it was, reopened from the newer version: only the
    # trees that differ from it are read again.
    listed = dict(before.children(at, node))
    assert listed == expected
    assert "n3.md" in listed and "new.md" not in listed
    assert 0 < len(reads) <= len(changed)
    assert before.read_text(parse("/memories/d/n3.md")) == "3"
    assert sorted(store.files()) == sorted(
        [f"/memories/d/n{i}.md" for i in range(60) if i != 3] + ["/memories/d/new.md"]
    )


def test_a_failed_commit_leaves_the_caches_reading_the_head(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = split_dir(repo_path, key, 60)
    head = store.head_operation()

    def failing(*args: object, **kwargs: object) -> object:
        raise OSError("disk full")

    # The trees are written and cached, the version edited from dropped: then the commit fails.
    monkeypatch.setattr(store, "_commit", failing)
    with pytest.raises(OSError):
        store.create("/memories/d/new.md", "x")
    monkeypatch.undo()
    assert store.head_operation() == head
    assert "/memories/d/new.md" not in store.files() and len(store.files()) == 60
    store.delete("/memories/d/n5.md")
    store.create("/memories/d/other.md", "z")
    expected = {f"/memories/d/n{i}.md" for i in range(60) if i != 5} | {"/memories/d/other.md"}
    assert set(store.files()) == expected
    assert set(MemoryStore.open(repo_path, key).files()) == expected
    assert store.verify().ok


def test_a_removal_in_a_split_directory_not_loaded_rewrites_its_bucket_path(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", 2)  # nested buckets, emptied and merged
    store = MemoryStore.open(repo_path, key, create=True)
    names = [f"note{i}.md" for i in range(90)]
    for name in names:
        store.create(f"/memories/d/{name}", name)
    at = parse("/memories/d")
    loads: list[MemoryPath] = []
    real = TreeCodec.load_dir

    def counting(self: TreeCodec, oid: str, path: MemoryPath, top: object = None) -> object:
        if path == at:
            loads.append(path)
        return real(self, oid, path, top)  # type: ignore[arg-type]

    monkeypatch.setattr(TreeCodec, "load_dir", counting)
    path_only = 0
    for count in range(len(names), 1, -1):
        fresh = MemoryStore.open(repo_path, key)  # a new process: nothing loaded
        loads.clear()
        fresh.delete(f"/memories/d/{names[count - 1]}")
        path_only += not loads
        oid = node_at(store, "/memories/d")
        # The tree the whole listing gives: emptied buckets dropped, merges where due.
        assert oid == fresh_id(store, "/memories/d"), count
        assert (depth(store, oid) > 0) == (count - 1 > 2), count
    # Most removals kept every tree on their path over the threshold: none loaded the
    # directory; those that had a tree fall to it loaded it, to merge its buckets.
    assert path_only > len(names) // 2 and path_only < len(names) - 2
    assert sorted(store.files()) == ["/memories/d/note0.md"]
    assert store.verify().ok


# -- hostile trees ------------------------------------------------------------------------------


def split_dir(repo_path: Path, key: str, count: int = 20) -> MemoryStore:
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(count):
        store.create(f"/memories/d/n{i}.md", str(i))
    return store


def refused(store: MemoryStore, tree: str, message: str) -> None:
    with pytest.raises(IntegrityError) as info:
        fresh_codec(store).load_dir(tree, parse("/memories/d"))
    assert message in str(info.value)
    assert "n1.md" not in str(info.value)


def test_an_entry_in_the_wrong_bucket_is_refused(repo_path: Path, key: str) -> None:
    store = split_dir(repo_path, key)
    repo = store.repo
    top = repo.read_tree(node_at(store, "/memories/d"))
    first, second = top[0], top[1]
    moved = repo.read_tree(first.oid)[0]
    forged = repo.write_tree([*repo.read_tree(second.oid), moved])
    tree = repo.write_tree([*top[2:], first, TreeEntry(second.name, forged, TREE_MODE)])
    refused(store, tree, "wrong bucket")
    # A reader that knows the entry's name (it opened the directory before) checks its bucket
    # all the same, from the sealed name.
    knowing = fresh_codec(store)
    knowing.load_dir(node_at(store, "/memories/d"), parse("/memories/d"))
    with pytest.raises(IntegrityError, match="wrong bucket"):
        knowing.load_dir(tree, parse("/memories/d"))


def test_one_name_twice_in_one_tree_is_refused(repo_path: Path, key: str) -> None:
    # A file and a directory of one name (each sealing authentic) in one flat tree.
    store = MemoryStore.open(repo_path, key, create=True)
    store.create("/memories/d/n.md", "x")
    store.create("/memories/d/other.md", "y")
    repo = store.repo
    entries = repo.read_tree(node_at(store, "/memories/d"))
    twin = store.keys.seal_name("n.md", "/memories/d", "d")
    tree = repo.write_tree(
        sorted([*entries, TreeEntry(twin, repo.empty_tree(), TREE_MODE)], key=lambda e: e.name)
    )
    refused(store, tree, "invalid entry")


def test_malformed_buckets_are_refused(repo_path: Path, key: str) -> None:
    store = split_dir(repo_path, key)
    repo = store.repo
    top = repo.read_tree(node_at(store, "/memories/d"))
    used = {e.name for e in top}
    free = next(buckets.bucket_name(i) for i in range(64) if buckets.bucket_name(i) not in used)
    empty = repo.empty_tree()
    cases = {
        "empty bucket": [*top, TreeEntry(free, empty, TREE_MODE)],
        # Names a bucket can never have: out of range, upper case, too long, a blob.
        "malformed bucket": [*top, TreeEntry("b40", top[0].oid, TREE_MODE)],
    }
    for message, entries in cases.items():
        refused(store, repo.write_tree(entries), message)
    for name in ("b0A", "b000", "bz"):
        refused(store, repo.write_tree([*top, TreeEntry(name, top[0].oid, TREE_MODE)]), "bucket")
    blob = repo.write_blob(b"x")
    refused(store, repo.write_tree([*top, TreeEntry("b3f", blob, BLOB_MODE)]), "bucket")
    # Buckets and entries mixed in one tree.
    entry = repo.read_tree(top[0].oid)[0]
    refused(store, repo.write_tree([*top, entry]), "bucket")


def test_buckets_nested_too_deep_are_refused(repo_path: Path, key: str) -> None:
    store = split_dir(repo_path, key)
    repo = store.repo
    leaf = repo.read_tree(node_at(store, "/memories/d"))[0]
    entry = repo.read_tree(leaf.oid)[0]
    bits = buckets.entry_bits(entry.name)
    # Each level in the bucket the entry's bits name: valid down to MAX_LEVELS, not below.
    tree = repo.write_tree([entry])
    extra = buckets.MAX_LEVELS
    tree = repo.write_tree([TreeEntry("b00", tree, TREE_MODE)])
    for level in range(extra - 1, -1, -1):
        name = buckets.bucket_name(buckets.bucket_of(bits, level))
        tree = repo.write_tree([TreeEntry(name, tree, TREE_MODE)])
    refused(store, tree, "too deep")
    # The same entry exactly MAX_LEVELS down reads (readers do not require the threshold).
    tree = repo.write_tree([entry])
    for level in range(extra - 1, -1, -1):
        name = buckets.bucket_name(buckets.bucket_of(bits, level))
        tree = repo.write_tree([TreeEntry(name, tree, TREE_MODE)])
    assert len(fresh_codec(store).load_dir(tree, parse("/memories/d")).nodes) == 1


# -- the format version --------------------------------------------------------------------------


def test_a_format_3_store_grown_past_the_threshold_becomes_format_4(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    store.create("/memories/a.md", "a")
    store.add_key(passphrase="pw for the tests", label="pw", kdf=FAST)
    assert meta(store)["format"] == 6
    pre_split = store.head()
    for i in range(T + 1):
        store.create(f"/memories/n{i}.md", str(i))
    body = meta(store)
    assert body["format"] == 6 and len(body["slots"]) == 2  # type: ignore[arg-type]
    # The branch carries it too, and both ways in still open the store.
    root = store.snapshot().root
    assert root is not None
    (in_tree,) = [e for e in store.repo.read_tree(root) if e.name == fmt.META_ENTRY]
    assert in_tree.oid == store.repo.ref(META_REF)
    assert len(MemoryStore.open(repo_path, passphrase="pw for the tests").files()) == T + 2
    assert len(MemoryStore.open(repo_path, key).files()) == T + 2
    # gitmem that reads formats 1-3 refuses the store instead of reporting tampering.
    monkeypatch.setattr(fmt, "READABLE_VERSIONS", frozenset({1, 2, 3}))
    with pytest.raises(FormatVersionError):
        MemoryStore.open(repo_path, key)
    monkeypatch.undo()
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", T)
    # History from before the split reads; restoring it and writing again works.
    assert pre_split is not None
    assert set(store.files(pre_split)) == {"/memories/a.md"}
    store.restore(pre_split)
    assert set(store.files()) == {"/memories/a.md"} and meta(store)["format"] == 6
    for i in range(T + 1):
        store.create(f"/memories/m{i}.md", str(i))
    assert store.verify().ok


def test_a_store_without_slots_becomes_format_4_and_can_still_add_one(
    repo_path: Path, key: str
) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(T):
        store.create(f"/memories/n{i}.md", str(i))
    assert meta(store)["format"] == 6  # every write by this version makes it 6
    store.create("/memories/last.md", "x")
    body = meta(store)
    assert body["format"] == 6 and "slots" not in body and "epochs" not in body
    assert store.key_slots() == []
    store.add_key(passphrase="pw for the tests", label="pw", kdf=FAST)
    body = meta(store)
    assert body["format"] == 6 and len(body["slots"]) == 2  # type: ignore[arg-type]
    assert len(MemoryStore.open(repo_path, passphrase="pw for the tests").files()) == T + 1


def test_format_4_metadata_parses_with_and_without_slots() -> None:
    bare = fmt.StoreMeta(4, b"\1" * 16, b"\2" * 32)
    assert not bare.has_slots
    assert fmt.StoreMeta.from_bytes(bare.to_bytes()) == bare
    body = json.loads(bare.to_bytes())
    body["epochs"] = []
    with pytest.raises(IntegrityError):
        fmt.StoreMeta.from_bytes(json.dumps(body).encode())


# -- edits across split directories -------------------------------------------------------------


def test_renaming_a_directory_holding_a_split_one_reseals_it(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(30):
        store.create(f"/memories/a/big/n{i}.md", str(i))
    store.rename("/memories/a", "/memories/z")
    assert sorted(store.files()) == sorted(f"/memories/z/big/n{i}.md" for i in range(30))
    assert node_at(store, "/memories/z/big") == fresh_id(store, "/memories/z/big")
    assert depth(store, node_at(store, "/memories/z/big")) >= 1
    assert MemoryStore.open(repo_path, key).read_text("/memories/z/big/n7.md") == "7"
    assert store.verify().ok


def test_case_twins_are_found_across_buckets(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(30):
        store.create(f"/memories/d/Note{i}.md", str(i))
    for tool in (store, MemoryStore.open(repo_path, key)):
        with pytest.raises(InvalidPath, match="only in case"):
            tool.create("/memories/d/NOTE17.md", "x")
        with pytest.raises(PathExists):
            tool.create("/memories/d/Note3.md", "x")


def test_git_fsck_accepts_split_directories(repo_path: Path, key: str) -> None:
    store = split_dir(repo_path, key, 40)
    store.checkpoint()
    subprocess.run(["git", "--git-dir", str(repo_path), "fsck", "--strict"], check=True)


# -- replicas ----------------------------------------------------------------------------------


def test_split_directories_sync_and_merge_between_replicas(tmp_path: Path, key: str) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--bare", "-q", str(origin)], check=True)
    first = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state-a")
    first.create("/memories/d/base.md", "base\n")
    first.add_remote("origin", str(origin))
    first.push()
    second = MemoryStore.clone(str(origin), tmp_path / "b.git", key, state_dir=tmp_path / "state-b")
    second.add_key(passphrase="pw for the tests", label="pw", kdf=FAST)  # format 3 on this side
    second.sync()
    first.pull()
    assert meta(first)["format"] == 6
    for i in range(20):
        first.create(f"/memories/d/a{i}.md", f"a{i}\n")
        second.create(f"/memories/d/b{i}.md", f"b{i}\n")
    assert meta(first)["format"] == 6 and meta(second)["format"] == 6
    assert first.sync().action == "pushed"
    assert second.sync().action == "merged+pushed"
    assert first.sync().action == "fast-forward"
    assert first.files() == second.files() and len(first.files()) == 41
    merged = node_at(first, "/memories/d")
    assert merged == node_at(second, "/memories/d") == fresh_id(first, "/memories/d")
    assert first.verify().ok and second.verify().ok


def test_a_format_3_replica_pulling_a_split_head_becomes_format_4(tmp_path: Path, key: str) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--bare", "-q", str(origin)], check=True)
    first = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state-a")
    first.create("/memories/x.md", "x\n")
    first.add_key(passphrase="pw for the tests", label="pw", kdf=FAST)
    first.add_remote("origin", str(origin))
    first.push()
    second = MemoryStore.clone(str(origin), tmp_path / "b.git", key, state_dir=tmp_path / "state-b")
    assert meta(second)["format"] == 6
    for i in range(10):
        first.create(f"/memories/n{i}.md", "n\n")
    first.push()
    assert second.pull().action == "fast-forward"
    assert meta(second)["format"] == 6 and len(second.files()) == 11
    second.create("/memories/after.md", "y\n")
    assert second.verify().ok


def test_a_split_replica_merging_one_that_added_key_slots_keeps_both(
    tmp_path: Path, key: str
) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--bare", "-q", str(origin)], check=True)
    first = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state-a")
    first.create("/memories/base.md", "base\n")
    first.add_remote("origin", str(origin))
    first.push()
    second = MemoryStore.clone(str(origin), tmp_path / "b.git", key, state_dir=tmp_path / "state-b")
    for i in range(10):
        first.create(f"/memories/d/a{i}.md", f"a{i}\n")
    second.add_key(passphrase="pw for the tests", label="pw", kdf=FAST)
    second.create("/memories/e/b.md", "b\n")
    assert meta(first)["format"] == 6 and "slots" not in meta(first)
    assert meta(second)["format"] == 6
    assert first.sync().action == "pushed"
    assert second.sync().action == "merged+pushed"
    body = meta(second)
    assert body["format"] == 6 and len(body["slots"]) == 2  # type: ignore[arg-type]
    assert first.sync().action == "fast-forward"
    assert meta(first) == body
    assert len(MemoryStore.open(tmp_path / "a.git", passphrase="pw for the tests").files()) == 12
    assert first.verify().ok and second.verify().ok
