"""A split directory's next version is written by splicing: an inner tree's bytes are its last
version's with the changed buckets' entries replaced, added or dropped (gitmem/buckets.py).
The result must be exactly the canonical tree written from scratch, whatever the edit (buckets
split, merged, emptied, added), whether the version edited was written by this process or read
back from the repository, and after a write that failed half way.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem import MemoryStore, buckets
from gitmem.crypto import name_envelope
from gitmem.editor import TreeEditor
from gitmem.errors import IntegrityError
from gitmem.git.objects import BLOB_MODE, TREE_MODE, TreeEntry, parse_tree, tree_bytes
from gitmem.paths import parse
from gitmem.store import Change
from gitmem.tree import TreeCodec

EXTRA = (b"gitmem", b"100644 gitmem\0" + bytes(20))


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # 3: a few hundred entries give two and three levels of buckets, and shrinking merges them.
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", 3)
    yield


class Trees:
    """An object store of trees in memory: id -> bytes."""

    def __init__(self) -> None:
        self.trees: dict[str, bytes] = {}

    def write(self, data: bytes) -> str:
        oid = hashlib.sha1(b"tree %d\0" % len(data) + data).hexdigest()
        self.trees[oid] = data
        return oid

    def read_leaf(self, oid: str) -> list[tuple[str, str]]:
        """As TreeCodec's: the memory entries (trees), not the root's metadata blob."""
        return [(e.name, e.oid) for e in parse_tree(self.trees[oid], oid) if e.mode == TREE_MODE]

    def reloaded(self, oid: str) -> buckets.Shape:
        """The shape a reader makes of tree ``oid``: no leaf read, no bytes kept."""
        shape = buckets.Shape(0, oid)
        stack = [shape]
        while stack:
            node = stack.pop()
            assert node.oid is not None
            entries = [e for e in parse_tree(self.trees[node.oid], node.oid) if e.name != "gitmem"]
            if entries and buckets.bucket_index(entries[0].name) is not None:
                node.buckets = {}
                for entry in entries:
                    index = buckets.bucket_index(entry.name)
                    assert index is not None
                    child = node.buckets[index] = buckets.Shape(0, entry.oid)
                    stack.append(child)
            else:
                node.count = len(entries)
                node.names = tuple(e.name for e in entries)
        buckets.recount(shape)
        return shape


def sealed_name(rng: random.Random) -> str:
    """A random name shaped like a sealed entry name (kind, base64url of 0x01 || V || C)."""
    kind = rng.choice("fd")
    return kind + base64.urlsafe_b64encode(b"\x01" + rng.randbytes(24)).decode().rstrip("=")


def random_id(rng: random.Random) -> str:
    return rng.randbytes(20).hex()


def stored_directory(
    rng: random.Random, count: int
) -> tuple[Trees, dict[str, str], buckets.Shape, str]:
    """A directory of ``count`` random entries written (with the root's metadata entry) into a
    new :class:`Trees`: the trees, the entries, the written shape and its id."""
    trees = Trees()
    entries = {sealed_name(rng): random_id(rng) for _ in range(count)}
    shape = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
    return trees, entries, shape, buckets.store(shape, trees.write, EXTRA)


def written_inner_bytes(shape: buckets.Shape, trees: Trees, top_extra: bool) -> Iterator[bool]:
    """For every written inner tree of ``shape``: its kept bytes are the bytes stored."""
    stack = [(shape, top_extra)]
    while stack:
        node, with_extra = stack.pop()
        if node.buckets is None or node.data is None:
            continue
        assert node.oid is not None and node.changed is None
        stored = trees.trees[node.oid]
        yield (stored.replace(EXTRA[1], b"") if with_extra else stored) == node.data
        stack.extend((child, False) for child in node.buckets.values())


@pytest.mark.parametrize("seed", range(6))
def test_spliced_trees_equal_trees_written_from_scratch(seed: int) -> None:
    rng = random.Random(seed)
    trees = Trees()
    entries: dict[str, str] = {}
    shape = buckets.build([])
    buckets.store(shape, trees.write)
    # Grow to a few hundred entries (two and three levels), then shrink to none, with
    # replacements all along (alone at every second step: entries pointed at new trees); now
    # and then the version edited is one read back from the store.
    sizes = [size for size in (*range(0, 400, 37), *range(400, -1, -29), 0) for _ in "ab"]
    last_extra = False
    for step, target in enumerate(sizes):
        surplus = len(entries) - target
        removed = rng.sample(sorted(entries), max(surplus, 0))
        added = [(sealed_name(rng), random_id(rng)) for _ in range(-surplus)]
        kept = sorted(set(entries) - set(removed))
        for raw in rng.sample(kept, min(len(kept), rng.randint(0, 3))):
            removed.append(raw)  # a changed entry: out and in again
            added.append((raw, random_id(rng)))
        for raw in removed:
            del entries[raw]
        entries.update(added)
        if step % 3 == 2:
            assert shape.oid is not None
            shape = trees.reloaded(shape.oid)
        before = dict(trees.trees)
        extra = EXTRA if step % 2 else None
        edited = buckets.edit(shape, removed, added, trees.read_leaf)
        oid = buckets.store(edited, trees.write, extra)
        fresh = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
        assert oid == buckets.store(fresh, Trees().write, extra), step
        assert all(written_inner_bytes(edited, trees, extra is not None)), step
        # The version edited is unchanged (shared with its readers): its trees are as they were.
        assert all(written_inner_bytes(shape, trees, last_extra)), step
        assert all(trees.trees[k] == v for k, v in before.items())
        assert sorted(buckets.raw_names(edited)) == sorted(entries), step
        shape, last_extra = edited, extra is not None


def test_a_write_that_fails_half_way_leaves_the_edit_to_be_written_again() -> None:
    rng = random.Random(7)
    trees, entries, shape, top = stored_directory(rng, 600)
    kept = shape.data
    victim = next(iter(entries))
    entries[victim] = random_id(rng)
    edited = buckets.edit(shape, [victim], [(victim, entries[victim])], trees.read_leaf)
    calls = 0

    def failing(data: bytes) -> str:
        nonlocal calls
        calls += 1
        if calls == 3:  # the leaf and its bucket written, the top not
            raise OSError("disk full")
        return trees.write(data)

    with pytest.raises(OSError):
        buckets.store(edited, failing, EXTRA)
    assert edited.oid is None and edited.changed  # still to be written, with what changed
    assert shape.oid == top and shape.data == kept  # the version edited is untouched
    fresh = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
    assert buckets.store(edited, trees.write, EXTRA) == buckets.store(fresh, Trees().write, EXTRA)


def test_two_writers_alternating_in_a_split_directory_write_canonical_trees(
    repo_path: Path, key: str
) -> None:
    # Each process edits the version the other wrote (read back, no bytes kept) and then its
    # own (spliced from the bytes it kept).
    first = MemoryStore.open(repo_path, key, create=True)
    second = MemoryStore.open(repo_path, key)
    at = parse("/memories/d")
    for i in range(60):
        writer = first if i % 4 < 2 else second
        writer.create(f"/memories/d/n{i}.md", str(i))
        if i % 5 == 4:
            writer.delete(f"/memories/d/n{i - 2}.md")
        snapshot = writer.snapshot().lookup(at)
        assert snapshot is not None
        loaded = writer.codec.load_dir(snapshot.oid, at)
        assert snapshot.oid == writer.codec.write_dir(at, dict(loaded.nodes), {}), i
    assert first.verify().ok and second.verify().ok


@pytest.mark.parametrize("name", ["a", "b1", "b3f0", "c", "gitmem"])
def test_the_extra_entry_goes_where_git_sorts_it(name: str) -> None:
    # The root's metadata entry ("gitmem") sorts after every bucket; any other is placed too.
    rng = random.Random(name)
    trees = Trees()
    entries = {sealed_name(rng): random_id(rng) for _ in range(300)}
    shape = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
    blob = TreeEntry(name, "ab" * 20, BLOB_MODE)
    extra = (name.encode(), tree_bytes([blob]))
    top = buckets.store(shape, trees.write)
    victim = next(iter(entries))
    edited = buckets.edit(shape, [victim], [(victim, random_id(rng))], trees.read_leaf)
    for oid in (
        buckets.store(shape, trees.write, extra),
        buckets.store(edited, trees.write, extra),
    ):
        stored = parse_tree(trees.trees[oid], oid)
        assert trees.trees[oid] == tree_bytes(stored) and blob in stored
    assert shape.data is not None and trees.write(shape.data) == top


def test_a_name_envelope_decodes_as_pythons_lenient_base64url() -> None:
    # name_envelope calls binascii directly (every lookup and write of a split directory
    # decodes a name): it must accept, decode and refuse exactly what
    # base64.urlsafe_b64decode does, junk characters and non-ASCII included.
    rng = random.Random(11)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=!. \n\u00e9"
    decoded = 0
    for _ in range(20000):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        try:
            expected: bytes | None = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except ValueError:
            expected = None
        try:
            got: bytes | None = name_envelope("f" + body)
        except IntegrityError:
            got = None
        assert got == expected, body
        decoded += got is not None
    assert 0 < decoded < 20000  # both outcomes were tried
    raw = sealed_name(rng)
    assert buckets.entry_bits(raw) == int.from_bytes(base64.urlsafe_b64decode(raw[1:] + "==")[1:4])


def test_a_written_version_keeps_the_sealed_names_a_fresh_reader_finds(
    repo_path: Path, key: str
) -> None:
    # A write that points entries at new trees reuses the base's sealed names unchanged; a new
    # name, a removed one, and a file replaced by a directory of the same name change them.
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(20):
        store.create(f"/memories/n{i}.md", str(i))
    root = parse("/memories")

    def check() -> None:
        head = store.head_operation()
        assert head is not None
        written = store.codec.load_dir(head.tree, root)  # the version write_dir remembered
        fresh = TreeCodec(store.repo, store.keys).load_dir(head.tree, root)
        assert dict(written.sealed) == dict(fresh.sealed)
        assert dict(written.nodes) == dict(fresh.nodes)

    store.str_replace("/memories/n3.md", "3", "three")
    check()
    store.create("/memories/new.md", "x")
    store.delete("/memories/n4.md")
    check()

    def to_directory(_: object, tree: TreeEditor) -> Change[None]:
        tree.remove(parse("/memories/n5.md"))
        tree.put_file(parse("/memories/n5.md/inside.md"), b"y")
        return Change(("/memories/n5.md",), None)

    store.write("replace", to_directory)
    check()
    assert store.read_text("/memories/n5.md/inside.md") == "y"


def leaves(shape: buckets.Shape) -> Iterator[buckets.Shape]:
    stack = [shape]
    while stack:
        node = stack.pop()
        if node.buckets is None:
            yield node
        else:
            stack.extend(node.buckets.values())


def test_written_and_read_leaves_are_tuples_the_collector_stops_tracking() -> None:
    # A version's leaves are shared with every later one and never changed: held as tuples of
    # bytes (or strs), which CPython's collector untracks, not lists it would traverse in every
    # full collection (docs/performance.md, "The collector's share").
    rng = random.Random(11)
    trees = Trees()
    entries = {sealed_name(rng): random_id(rng) for _ in range(300)}
    shape = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
    buckets.store(shape, trees.write, EXTRA)
    assert shape.oid is not None
    reread = trees.reloaded(shape.oid)
    victim, gone = rng.sample(sorted(entries), 2)
    new = sealed_name(rng)
    entries[victim], entries[new] = random_id(rng), random_id(rng)
    del entries[gone]
    change = ([victim, gone], [(victim, entries[victim]), (new, entries[new])])
    for version in (shape, reread):
        kept = [(leaf, leaf.keys, leaf.entries) for leaf in leaves(version)]
        edited = buckets.edit(version, *change, trees.read_leaf)
        oid = buckets.store(edited, trees.write, EXTRA)
        fresh = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
        assert oid == buckets.store(fresh, Trees().write, EXTRA)
        # The version edited kept its leaves' very tuples (read ones were filled in once).
        for leaf, keys, data in kept:
            assert keys is None or leaf.keys is keys
            assert data is None or leaf.entries is data
        gc.collect()
        for leaf in (*leaves(version), *leaves(edited)):
            for held in (leaf.keys, leaf.entries, leaf.names):
                assert held is None or (isinstance(held, tuple) and not gc.is_tracked(held))
    # One tree (a directory at or under the threshold): the same once written.
    small = buckets.build(buckets.serialized(sealed_name(rng), random_id(rng)) for _ in "ab")
    buckets.store(small, trees.write)
    edited = buckets.edit(small, [], [(sealed_name(rng), random_id(rng))], trees.read_leaf)
    assert isinstance(edited.keys, list)  # unwritten: the edit's own lists
    buckets.store(edited, trees.write)
    assert isinstance(edited.keys, tuple) and isinstance(edited.entries, tuple)
    assert isinstance(small.keys, tuple) and len(small.keys) == 2


def test_a_loaded_split_directory_holds_tuples(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    at = parse("/memories/d")
    for i in range(12):
        store.create(f"/memories/d/n{i}.md", str(i))
    snapshot = store.snapshot().lookup(at)
    assert snapshot is not None
    fresh = TreeCodec(store.repo, store.keys)
    loaded = fresh.load_dir(snapshot.oid, at)
    assert loaded.shape.buckets is not None
    assert all(isinstance(leaf.names, tuple) for leaf in leaves(loaded.shape))
    store.create("/memories/d/n12.md", "12")
    store.delete("/memories/d/n3.md")
    assert store.verify().ok


def written_throughout(shape: buckets.Shape) -> Iterator[bool]:
    """For every tree of ``shape``: written, nothing left to settle, a leaf's lists tuples."""
    stack = [shape]
    while stack:
        node = stack.pop()
        yield node.oid is not None and node.changed is None
        if node.buckets is None:
            yield isinstance(node.keys, tuple) or (node.keys is None and node.names is not None)
        else:
            yield node.data is not None or node is not shape  # the next write splices these
            stack.extend(node.buckets.values())


@pytest.mark.parametrize("seed", range(4))
def test_repointed_entries_write_the_trees_written_from_scratch(seed: int) -> None:
    # Entries pointed at new trees (the common write of a big directory): edited and written in
    # one walk, the same trees as writing the directory from scratch, the version it was made
    # from unchanged, and the result as written as store() leaves it.
    rng = random.Random(seed)
    trees, entries, shape, _ = stored_directory(rng, rng.choice((100, 300, 900)))
    last_extra = True
    for step in range(60):
        if step % 4 == 3:  # a version read back: no leaf read, no bytes kept
            assert shape.oid is not None
            shape = trees.reloaded(shape.oid)
        extra = EXTRA if step % 3 else None
        pointed = [(raw, random_id(rng)) for raw in rng.sample(sorted(entries), rng.randint(1, 4))]
        before = dict(trees.trees)
        kept = [(leaf, leaf.keys, leaf.entries) for leaf in leaves(shape)]
        made = buckets.repointed(shape, pointed, trees.read_leaf, trees.write, extra)
        assert made is not None and made.oid is not None
        entries.update(pointed)
        fresh = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
        assert made.oid == buckets.store(fresh, Trees().write, extra), step
        assert made.count == len(entries) == buckets.recount(fresh)
        assert all(written_throughout(made)), step
        assert all(written_inner_bytes(made, trees, extra is not None)), step
        assert all(written_inner_bytes(shape, trees, last_extra)), step
        assert all(trees.trees[k] == v for k, v in before.items())
        for leaf, keys, data in kept:  # the version it was made from kept its very tuples
            assert keys is None or leaf.keys is keys
            assert data is None or leaf.entries is data
        # An edit of the result (a later write of another kind) starts from a sound version.
        victim = rng.choice(sorted(entries))
        del entries[victim]
        edited = buckets.edit(made, [victim], [], trees.read_leaf)
        fresh = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
        assert buckets.store(edited, trees.write) == buckets.store(fresh, Trees().write), step
        shape, last_extra = edited, False


def test_repointing_a_name_that_is_not_there_gives_none() -> None:
    rng = random.Random(5)
    trees, entries, shape, top = stored_directory(rng, 300)
    known = next(raw for raw in entries if raw[10] != "-")
    stranger = [(sealed_name(rng), random_id(rng))]
    assert buckets.repointed(shape, stranger, trees.read_leaf, trees.write, EXTRA) is None
    # Its bucket path exists (the same bits), the name does not: sorting before and after it.
    for char in "-Aaz":  # "-" sorts first in base64url
        twin = known[:10] + char + known[11:]
        if twin == known:
            continue
        assert buckets.entry_bits(twin) == buckets.entry_bits(known)
        missing = [(known, random_id(rng)), (twin, random_id(rng))]
        assert buckets.repointed(shape, missing, trees.read_leaf, trees.write, EXTRA) is None
    assert shape.oid == top and all(written_inner_bytes(shape, trees, True))


def test_a_write_below_a_split_directory_repoints_its_entry(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every write below a big directory (and an edit of a file in it) points one of its
    # entries at a new tree: written by repointed(), not edit() and store().
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(12):
        store.create(f"/memories/n{i}.md", str(i))
    store.create("/memories/sub/a.md", "a")
    edits: list[object] = []
    real_edit = buckets.edit

    def spy(*args: object) -> buckets.Shape:
        shape = args[0]
        assert isinstance(shape, buckets.Shape)
        if shape.buckets is not None:  # /memories (split), not /memories/sub (one tree)
            edits.append(shape)
        return real_edit(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(buckets, "edit", spy)
    store.create("/memories/sub/b.md", "b")
    store.str_replace("/memories/n3.md", "3", "three")
    store.rename("/memories/sub/a.md", "/memories/sub/c.md")
    assert edits == []
    store.create("/memories/n12.md", "new name")  # a new name: an edit
    assert len(edits) == 1
    fresh = MemoryStore.open(repo_path, key)
    assert fresh.read_text("/memories/n3.md") == "three"
    assert fresh.read_text("/memories/sub/c.md") == "a" and fresh.verify().ok
    head = store.head_operation()
    assert head is not None
    root = parse("/memories")
    written = store.codec.load_dir(head.tree, root)
    reread = TreeCodec(store.repo, store.keys).load_dir(head.tree, root)
    assert dict(written.nodes) == dict(reread.nodes)
