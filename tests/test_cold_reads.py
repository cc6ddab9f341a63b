"""Cold reads cost the path, not the directory: a fresh process that views one file of a split
directory (format 4) seals the path's names and reads the one bucket each names, decrypting the
names of the trees it reads and no others (docs/design.md, "Reading").

The split threshold is lowered (as in test_buckets.py): the shapes are those of a directory of
thousands of entries at the real threshold, with a couple of hundred.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from anthropic.lib.tools import ToolError

from gitmem import GitMemoryTool, MemoryStore, buckets, crypto
from gitmem.crypto import StoreKeys
from gitmem.editor import TreeEditor
from gitmem.errors import IntegrityError, InvalidPath, PathExists
from gitmem.format import KIND_DIR, KIND_FILE
from gitmem.git.objects import TreeEntry
from gitmem.git.repo import GitRepo
from gitmem.paths import MemoryPath, parse
from gitmem.store import Change
from gitmem.tree import Node, TreeCodec

T = 4
COUNT = 200
DIR = "/memories/d"


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", T)
    yield


def big_store(repo_path: Path, key: str) -> MemoryStore:
    """A store whose ``/memories/d`` holds COUNT files and one directory, in one commit."""
    store = MemoryStore.open(repo_path, key, create=True)

    def edit(_: object, tree: TreeEditor) -> Change[None]:
        for i in range(COUNT):
            tree.put_file(parse(f"{DIR}/n{i}.md"), f"note {i}\n".encode())
        tree.put_file(parse(f"{DIR}/sub/inner.md"), b"inner\n")
        return Change((DIR,), None)

    store.write("create", edit)
    return store


class Spy:
    """Counts entry names decrypted and blobs read, process-wide."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names = 0
        self.blobs = 0
        open_name, read_blob = StoreKeys.open_name, GitRepo.read_blob

        def counted_name(keys: StoreKeys, entry: str, parent: str) -> tuple[str, str, bytes]:
            self.names += 1
            return open_name(keys, entry, parent)

        def counted_blob(repo: GitRepo, oid: str, limit: int | None = None) -> bytes:
            self.blobs += 1
            return read_blob(repo, oid) if limit is None else read_blob(repo, oid, limit)

        monkeypatch.setattr(StoreKeys, "open_name", counted_name)
        monkeypatch.setattr(GitRepo, "read_blob", counted_blob)


# At most: the names of /memories (one here), then for each of the two kinds the
# names of the one bucket its sealing names (a leaf holds at most T at this size).
BOUND = 1 + 2 * T


def test_a_cold_file_view_decrypts_the_path_not_the_directory(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_store(repo_path, key)
    spy = Spy(monkeypatch)
    cold = MemoryStore.open(repo_path, key)
    assert cold.read_text(parse(f"{DIR}/n123.md")) == "note 123\n"
    assert spy.names <= BOUND < COUNT
    # The file's header and chunk, and the store's metadata blob: no other file's header.
    assert spy.blobs <= 4


def test_cold_tool_views_cost_the_path(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_store(repo_path, key)
    spy = Spy(monkeypatch)
    with GitMemoryTool(repo_path, key=key) as tool:
        assert "note 7" in tool.call({"command": "view", "path": f"{DIR}/n7.md"})
        assert "inner" in tool.call({"command": "view", "path": f"{DIR}/sub/inner.md"})
        with pytest.raises(ToolError, match="does not exist"):
            tool.call({"command": "view", "path": f"{DIR}/absent.md"})
    # Three lookups, one of them a level deeper (sub holds one name).
    assert spy.names <= 3 * BOUND + 1 < COUNT
    assert spy.blobs <= 8


def test_find_agrees_with_the_loaded_directory(repo_path: Path, key: str) -> None:
    store = big_store(repo_path, key)
    head = store.snapshot().lookup(parse(DIR))
    assert head is not None and head.kind == KIND_DIR
    at = parse(DIR)
    loaded = TreeCodec(store.repo, store.keys).load_dir(head.oid, at).nodes
    for name in [f"n{i}.md" for i in range(0, COUNT, 7)] + ["sub", "absent.md", "N1.md"]:
        cold = TreeCodec(store.repo, store.keys)
        assert cold.find(head.oid, at, name) == loaded.get(name)
    found = TreeCodec(store.repo, store.keys).find(head.oid, at, "sub")
    assert found is not None and found.kind == KIND_DIR


def test_a_name_sealed_with_an_older_key_epoch_is_found(repo_path: Path, key: str) -> None:
    store = big_store(repo_path, key)
    head = store.snapshot().lookup(parse(DIR))
    assert head is not None
    newer = crypto.decode_key(crypto.generate_key())
    keys = StoreKeys.chain([crypto.decode_key(key), newer], store.keys.store_id)
    node = TreeCodec(store.repo, keys).find(head.oid, parse(DIR), "n5.md")
    assert node is not None and node.kind == KIND_FILE


def leaf_of(store: MemoryStore, tree: str, raw: str) -> list[int]:
    """The bucket indices from split directory ``tree`` down to the leaf ``raw`` belongs in."""
    bits, entries = buckets.entry_bits(raw), store.repo.read_tree(tree)
    path: list[int] = []
    while entries and buckets.is_bucket_like(entries[0].name):
        index = buckets.bucket_of(bits, len(path))
        path.append(index)
        below = {e.name: e.oid for e in entries}[buckets.bucket_name(index)]
        entries = store.repo.read_tree(below)
    return path


def rebuilt(store: MemoryStore, tree: str, indices: list[int], change: object) -> str:
    """``tree`` with the leaf at ``indices`` replaced by ``change(entries)``."""
    repo = store.repo
    entries = repo.read_tree(tree)
    if not indices:
        assert callable(change)
        return repo.write_tree(change(entries))
    name = buckets.bucket_name(indices[0])
    below = {e.name: e.oid for e in entries}[name]
    new = rebuilt(store, below, indices[1:], change)
    return repo.write_tree([e if e.name != name else TreeEntry(name, new, e.mode) for e in entries])


def test_the_bucket_a_lookup_reads_is_authenticated_whole(repo_path: Path, key: str) -> None:
    store = big_store(repo_path, key)
    at = parse(DIR)
    head = store.snapshot().lookup(at)
    assert head is not None
    raw = store.keys.seal_name("n9.md", DIR, KIND_FILE)
    indices = leaf_of(store, head.oid, raw)
    assert indices  # split
    forged = "f" + "A" * 40  # well-formed, but no key sealed it
    planted = rebuilt(
        store,
        head.oid,
        indices,
        lambda entries: sorted(
            [*entries, TreeEntry(forged, entries[0].oid, entries[0].mode)],
            key=lambda e: e.name + "/",
        ),
    )
    with pytest.raises(IntegrityError, match="failed authentication"):
        TreeCodec(store.repo, store.keys).find(planted, at, "n9.md")
    # An authentic entry of another bucket moved into this one.
    other = next(
        e
        for e in store.repo.read_tree(head.oid)
        if buckets.bucket_index(e.name) not in (None, indices[0])
    )
    while not store.repo.read_tree(other.oid)[0].name.startswith(("f", "d")):
        other = store.repo.read_tree(other.oid)[0]
    stray = store.repo.read_tree(other.oid)[0]
    moved = rebuilt(
        store,
        head.oid,
        indices,
        lambda entries: sorted([*entries, stray], key=lambda e: e.name + "/"),
    )
    with pytest.raises(IntegrityError, match="wrong bucket"):
        TreeCodec(store.repo, store.keys).find(moved, at, "n9.md")


def test_one_name_as_a_file_and_a_directory_is_refused(repo_path: Path, key: str) -> None:
    store = big_store(repo_path, key)
    at = parse(DIR)
    head = store.snapshot().lookup(at)
    assert head is not None
    codec = TreeCodec(store.repo, store.keys)
    nodes = dict(codec.load_dir(head.oid, at).nodes)
    sealed = {name: store.keys.seal_name(name, DIR, node.kind) for name, node in nodes.items()}
    twin = store.keys.seal_name("n3.md", DIR, KIND_DIR)
    entries = [buckets.serialized(raw, nodes[name].oid) for name, raw in sealed.items()]
    entries.append(buckets.serialized(twin, nodes["sub"].oid))
    tree = buckets.store(buckets.build(entries), store.repo.write_raw_tree, None)
    with pytest.raises(IntegrityError, match="invalid entry"):
        TreeCodec(store.repo, store.keys).find(tree, at, "n3.md")
    assert TreeCodec(store.repo, store.keys).find(tree, at, "n4.md") == nodes["n4.md"]


def test_a_small_directory_is_loaded_once(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    store.create(parse("/memories/a.md"), "a")
    store.create(parse("/memories/b.md"), "b")
    spy = Spy(monkeypatch)
    cold = TreeCodec(store.repo, store.keys)
    root = store.snapshot().lookup(MemoryPath(()))
    assert root is not None
    assert cold.find(root.oid, MemoryPath(()), "a.md") == Node(KIND_FILE, root_entry(store, "a.md"))
    assert cold.find(root.oid, MemoryPath(()), "b.md") is not None
    assert cold.find(root.oid, MemoryPath(()), "c.md") is None
    assert spy.names == 2  # one tree: decrypted (and cached) once


def root_entry(store: MemoryStore, name: str) -> str:
    node = store.snapshot().lookup(parse(f"/memories/{name}"))
    assert node is not None
    return node.oid


# -- writes ---------------------------------------------------------------------------------------


def flat_store(repo_path: Path, key: str) -> MemoryStore:
    """A store whose ``/memories`` itself (the root tree, with the metadata blob) is split."""
    store = MemoryStore.open(repo_path, key, create=True)

    def edit(_: object, tree: TreeEditor) -> Change[None]:
        for i in range(COUNT):
            tree.put_file(parse(f"/memories/n{i}.md"), f"note {i}\n".encode())
        return Change(("/memories",), None)

    store.write("create", edit)
    return store


def rebuilt_from_scratch(store: MemoryStore, path: str) -> str:
    """The id of the directory's content as a fresh codec writes it whole."""
    at = parse(path)
    codec = TreeCodec(store.repo, store.keys)
    codec.meta_blob = store.codec.meta_blob
    node = store.snapshot().lookup(at)
    assert node is not None
    return codec.write_dir(at, dict(codec.load_dir(node.oid, at).nodes), {})


@pytest.mark.parametrize("where", ["split subdirectory", "split root", "below a split one"])
def test_a_cold_edit_of_an_existing_file_costs_its_path(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    if where == "split root":
        flat_store(repo_path, key)
        target, parent = "/memories/n42.md", "/memories"
    else:
        big_store(repo_path, key)
        target = f"{DIR}/n42.md" if where == "split subdirectory" else f"{DIR}/sub/inner.md"
        parent = DIR
    spy = Spy(monkeypatch)
    cold = MemoryStore.open(repo_path, key)
    old = cold.read_text(parse(target))
    cold.str_replace(target, old.strip(), "edited")
    cold.insert(target, 0, "first")
    # A read, then two writes (each searching the file and descending to it): a few lookups
    # of the split directory (four today; eight allowed), each opening at most two buckets of
    # at most T names, and the one-tree directories once (before: every name of the directory).
    assert spy.names <= 8 * BOUND < COUNT
    again = MemoryStore.open(repo_path, key)
    assert again.read_text(parse(target)) == "first\nedited\n"
    # The tree written is the one the whole directory written afresh would be (canonical).
    node = again.snapshot().lookup(parse(parent))
    assert node is not None and node.oid == rebuilt_from_scratch(again, parent)
    assert len(again.snapshot().children(parse(parent), node)) == len(
        TreeCodec(again.repo, again.keys).load_dir(node.oid, parse(parent)).nodes
    )
    assert again.verify().ok


def test_cold_creates_deletes_and_renames_in_a_split_directory(repo_path: Path, key: str) -> None:
    big_store(repo_path, key)
    MemoryStore.open(repo_path, key).create(f"{DIR}/Twin.md", "t")
    with pytest.raises(InvalidPath, match="only in case"):
        MemoryStore.open(repo_path, key).create(f"{DIR}/TWIN.md", "x")
    with pytest.raises(PathExists):
        MemoryStore.open(repo_path, key).create(f"{DIR}/n3.md", "x")
    MemoryStore.open(repo_path, key).delete(f"{DIR}/n4.md")
    MemoryStore.open(repo_path, key).rename(f"{DIR}/n5.md", f"{DIR}/m5.md")
    MemoryStore.open(repo_path, key).str_replace(f"{DIR}/m5.md", "note 5", "moved")
    store = MemoryStore.open(repo_path, key)
    files = store.files()
    assert f"{DIR}/n4.md" not in files and f"{DIR}/n5.md" not in files
    assert files[f"{DIR}/m5.md"] == "moved\n" and files[f"{DIR}/Twin.md"] == "t"
    assert len([p for p in files if p.startswith(f"{DIR}/")]) == COUNT + 1
    node = store.snapshot().lookup(parse(DIR))
    assert node is not None and node.oid == rebuilt_from_scratch(store, DIR)
    assert store.verify().ok
