"""A directory version's entries (gitmem.tree.NodeMap): Nodes to every reader, held as plain
(kind, oid) tuples that CPython's cyclic collector stops tracking, so that a store of 10,000
files does not add 10,000 objects to every full collection (docs/performance.md, "The
collector's share")."""

from __future__ import annotations

import copy
import gc
import pickle
from pathlib import Path

import pytest

from gitmem import MemoryStore
from gitmem.editor import TreeEditor
from gitmem.paths import parse
from gitmem.shardmap import SMALL, ShardedMap
from gitmem.store import Change
from gitmem.tree import Node, NodeMap, TreeCodec, evolved_nodes, version_nodes


def oid(i: int) -> str:
    return f"{i:040x}"


def test_node_fields_equality_and_immutability() -> None:
    node = Node("f", oid(1))
    assert (node.kind, node.oid) == ("f", oid(1))
    assert node == Node(kind="f", oid=oid(1)) and hash(node) == hash(Node("f", oid(1)))
    assert node != Node("d", oid(1)) and node != Node("f", oid(2))
    with pytest.raises(AttributeError):
        node.oid = oid(2)  # type: ignore[misc]
    assert copy.copy(node) == node and pickle.loads(pickle.dumps(node)) == node
    assert type(pickle.loads(pickle.dumps(node))) is Node


@pytest.mark.parametrize("size", [3, SMALL + 10])
def test_a_version_s_nodes_read_as_nodes_and_evolve_without_changing(size: int) -> None:
    plain = {f"n{i}": Node("f" if i % 2 else "d", oid(i)) for i in range(size)}
    nodes = version_nodes(plain)
    assert version_nodes(nodes) is nodes
    # Big: packed (exact tuples: a Node is a tuple subclass, which the collector never
    # untracks); small: a dict of Nodes.
    assert isinstance(nodes, NodeMap) == (size >= SMALL)
    assert len(nodes) == size and set(nodes) == set(plain) and "n0" in nodes
    assert "nope" not in nodes and nodes.get("nope") is None and nodes.get("nope", 7) == 7
    assert dict(nodes.items()) == plain and dict(nodes) == plain
    for name, node in nodes.items():
        assert type(node) is Node and nodes[name] == node == nodes.get(name)
    if isinstance(nodes, NodeMap):
        assert all(type(value) is tuple for _, value in _pairs(nodes))
    changes = {"n0": Node("f", oid(99)), "n1": None, "new": Node("d", oid(7))}
    changed = evolved_nodes(nodes, changes)
    assert nodes["n0"] == plain["n0"] and "n1" in nodes and "new" not in nodes
    assert changed["n0"] == Node("f", oid(99)) and "n1" not in changed
    assert changed["new"] == Node("d", oid(7)) and len(changed) == size
    assert isinstance(changed, NodeMap) == (size >= SMALL)
    if isinstance(changed, NodeMap):
        assert all(type(value) is tuple for _, value in _pairs(changed))
    assert evolved_nodes(nodes, {}) is nodes


def test_nodes_grown_past_small_are_packed_and_shrunk_below_it_are_nodes_again() -> None:
    small = version_nodes({f"n{i}": Node("f", oid(i)) for i in range(SMALL - 1)})
    assert isinstance(small, dict)
    grown = evolved_nodes(small, {"a": Node("f", oid(1)), "b": Node("d", oid(2))})
    assert isinstance(grown, NodeMap) and len(grown) == SMALL + 1 and grown["b"].kind == "d"
    shrunk = evolved_nodes(grown, {f"n{i}": None for i in range(SMALL - 10)})
    assert isinstance(shrunk, dict) and all(type(node) is Node for node in shrunk.values())
    assert shrunk == {"a": Node("f", oid(1)), "b": Node("d", oid(2))} | {
        f"n{i}": Node("f", oid(i)) for i in range(SMALL - 10, SMALL - 1)
    }


def _pairs(nodes: NodeMap) -> list[tuple[str, tuple[str, str]]]:
    packed = nodes.packed
    return list(packed.pairs() if isinstance(packed, ShardedMap) else packed.items())


def test_a_loaded_big_directory_is_untracked_after_a_collection(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    at = parse("/memories/d")

    def seed(_: object, tree: TreeEditor) -> Change[None]:
        for i in range(SMALL + 20):
            tree.put_file(parse(f"/memories/d/n{i}.md"), str(i).encode())
        return Change(("/memories/d",), None)

    store.write("seed", seed)
    store.create("/memories/d/extra.md", "x")
    snapshot = store.snapshot().lookup(at)
    assert snapshot is not None
    for codec in (store.codec, TreeCodec(store.repo, store.keys)):  # written, and read back
        loaded = codec.load_dir(snapshot.oid, at)
        assert isinstance(loaded.nodes, NodeMap) and len(loaded.nodes) == SMALL + 21
        packed = loaded.nodes.packed
        assert isinstance(packed, ShardedMap)
        gc.collect()
        assert not any(gc.is_tracked(value) for _, value in packed.pairs())
        assert not any(gc.is_tracked(shard) for shard in packed._shards)
        assert loaded.nodes["extra.md"].kind == "f"
    assert store.read_text("/memories/d/n5.md") == "5" and store.verify().ok


def test_a_big_directory_lists_from_its_held_tuples(repo_path: Path, key: str) -> None:
    # The listing reads the (kind, oid) tuples a NodeMap holds, making Nodes only of the
    # directories it descends into: the same rows as from Nodes.
    store = MemoryStore.open(repo_path, key, create=True)

    def seed(_: object, tree: TreeEditor) -> Change[None]:
        for i in range(SMALL + 5):
            tree.put_file(parse(f"/memories/d/n{i:03d}.md"), b"x" * i)
        tree.put_file(parse("/memories/d/sub/deep.md"), b"deep")
        return Change(("/memories/d",), None)

    store.write("seed", seed)
    snapshot = store.snapshot()
    at = parse("/memories/d")
    node = snapshot.lookup(at)
    assert node is not None
    assert isinstance(snapshot.children(at, node), NodeMap)
    rows = snapshot.listing(at)
    assert len(rows) == SMALL + 7
    by_path = {row.relative: (row.kind, row.size) for row in rows}
    assert by_path["sub"] == ("d", 0) and by_path["sub/deep.md"] == ("f", 4)
    assert all(by_path[f"n{i:03d}.md"] == ("f", i) for i in range(SMALL + 5))
