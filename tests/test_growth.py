"""Work that must not grow with the store: caches keyed by tree id stay exact, big directories
cost per change rather than per entry, and sizes are carried from write to write."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
import pytest
from anthropic.lib.tools import ToolError
from helpers_repo import checkpoint_loose

import gitmem
import gitmem.buckets
import gitmem.paths
import gitmem.tree
from gitmem import GitMemoryTool, Limits, MemoryStore, history
from gitmem.cache import BoundedCache
from gitmem.editor import TreeEditor
from gitmem.format import Record
from gitmem.git.objects import TREE_MODE, TreeEntry, parse_tree, tree_bytes
from gitmem.git.repo import GitRepo
from gitmem.limits import StoreSizer
from gitmem.store import Change
from gitmem.tree import TreeCodec

pytestmark = pytest.mark.usefixtures("fast_git")


def create(tool: GitMemoryTool, path: str, text: str = "x\n") -> None:
    tool.call({"command": "create", "path": path, "file_text": text})


def refusal(tool: GitMemoryTool, **command: Any) -> str:
    head = tool.store.head()
    with pytest.raises(ToolError) as info:
        tool.call(command)
    assert tool.store.head() == head
    return str(info.value.content)


def exact_size(store: MemoryStore) -> int:
    """The store's size measured from scratch (fresh caches, every header read)."""
    head = store.head_operation()
    fresh = StoreSizer(TreeCodec(store.repo, store.keys))
    return fresh.tree_bytes(None if head is None else head.tree)


# -- the cache ----------------------------------------------------------------------------------


def test_bounded_cache_evicts_the_least_recently_used_by_weight() -> None:
    cache: BoundedCache[str, int] = BoundedCache(10)
    cache.put("a", 1, 4)
    cache.put("b", 2, 4)
    assert cache.get("a") == 1  # now "b" is the least recently used
    cache.put("c", 3, 4)
    assert ("a" in cache, "b" in cache, "c" in cache) == (True, False, True)
    cache.put("a", 5, 2)  # replacing an entry replaces its weight too
    cache.put("d", 4, 4)
    assert (cache.get("a"), cache.get("c"), cache.get("d")) == (5, 3, 4)
    cache.put("huge", 0, 11)  # heavier than the whole budget: not kept, nothing evicted
    assert "huge" not in cache and len(cache) == 3
    cache.clear()
    assert len(cache) == 0 and cache.get("a") is None


def test_bounded_cache_is_safe_between_threads() -> None:
    cache: BoundedCache[int, int] = BoundedCache(64)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(3000):
                key = (i * 7 + seed) % 100
                cache.put(key, key, 1 + key % 3)
                value = cache.get((key * 3) % 100)
                assert value is None or value == (key * 3) % 100
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(cache) <= 64


def test_a_store_larger_than_no_cache_is_listed_without_rereading_every_header(
    tool: GitMemoryTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old caches were emptied whole when full: past 4,096 files every listing read every
    # header again. Now only the least recently used entries go.
    monkeypatch.setattr(tool.store.codec._sizes, "budget", 50)
    for i in range(40):
        create(tool, f"/memories/d/f{i}.md", "y" * i)
    tool.store.codec._sizes.clear()
    first = tool.call({"command": "view", "path": "/memories/d"})
    reads = count_calls(monkeypatch, tool.store.repo, "read_tree")
    assert tool.call({"command": "view", "path": "/memories/d"}) == first
    assert reads == []


# -- the twin check -----------------------------------------------------------------------------


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[Any]:
    """Record the first argument of every call of ``owner.name`` from now on."""
    calls: list[Any] = []
    real: Callable[..., Any] = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0] if args else None)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls


def test_a_create_in_a_big_directory_folds_only_the_new_names(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folded = count_calls(monkeypatch, gitmem.paths, "fold_name")
    tool = GitMemoryTool(repo_path, key=key)
    store = tool.store
    # 300 entries in one commit, then one create: the directory's names are folded once.
    op, _ = store.write("seed", lambda head, tree: seed_files(tree, 300))
    assert op is not None
    create(tool, "/memories/big/new0.md")
    folded.clear()
    for i in range(1, 6):
        create(tool, f"/memories/big/new{i}.md")
    # Each create folds its new name only (a few times), never the 300 siblings.
    assert set(folded) == {f"new{i}.md" for i in range(1, 6)}
    assert len(folded) <= 3 * 5
    assert "Note7.md" in refusal(
        tool, command="create", path="/memories/big/NOTE7.md", file_text=""
    )
    assert "new3.md" in refusal(tool, command="create", path="/memories/big/NEW3.md", file_text="")


def seed_files(tree: TreeEditor, count: int) -> Change[None]:
    for i in range(count):
        tree.put_file(gitmem.parse_path(f"/memories/big/Note{i}.md"), b"n\n")
    return Change(("/memories/big",), None)


def test_the_twin_check_follows_every_change_to_the_directory(tmp_path: Path, key: str) -> None:
    one = GitMemoryTool(tmp_path / "s.git", key=key, session="one")
    create(one, "/memories/Plan.md")
    message = refusal(one, command="create", path="/memories/plan.md", file_text="")
    assert "differs from the existing 'Plan.md' only in case" in message
    # Renamed away, the name is free; the new one is taken.
    one.call({"command": "rename", "old_path": "/memories/Plan.md", "new_path": "/memories/B.md"})
    create(one, "/memories/plan.md")
    assert "'B.md'" in refusal(one, command="create", path="/memories/b.md", file_text="")
    # Renaming a file to its own case variant stays allowed (the source is no sibling).
    one.call({"command": "rename", "old_path": "/memories/B.md", "new_path": "/memories/b.md"})
    # Another instance (its own caches) adds and removes names; this one sees both.
    other = GitMemoryTool(tmp_path / "s.git", key=key, session="other")
    create(other, "/memories/Caf\u00e9.md")
    other.call({"command": "delete", "path": "/memories/plan.md"})
    assert "only in case or Unicode form" in refusal(
        one, command="create", path="/memories/cafe\u0301.md", file_text=""
    )
    create(one, "/memories/PLAN.md")
    # A directory made by the same write counts too.
    create(one, "/memories/New/a.md")
    assert "'New'" in refusal(one, command="create", path="/memories/new/b.md", file_text="")


def test_an_import_checks_twins_against_its_own_changes(tmp_path: Path, key: str) -> None:
    tool = GitMemoryTool(tmp_path / "s.git", key=key)
    create(tool, "/memories/Keep.md")
    source = tmp_path / "plain"
    source.mkdir()
    (source / "keep.md").write_text("a\n")
    with pytest.raises(history.ImportRefused) as info:
        history.import_(tool.store, source)
    assert "keep.md: it differs from the existing 'Keep.md'" in str(info.value)
    # Replacing, the old name is removed first in the same transaction: no collision.
    history.import_(tool.store, source, replace=True)
    assert list(tool.store.files()) == ["/memories/keep.md"]
    # Two new twins in one import: the second collides with the first.
    (source / "Pair.md").write_text("1\n")
    (source / "pair.md").write_text("2\n")
    with pytest.raises(history.ImportRefused) as info:
        history.import_(tool.store, source)
    assert "pair.md: it differs from the existing 'Pair.md'" in str(info.value)


# -- sizes --------------------------------------------------------------------------------------


def test_the_carried_size_equals_a_fresh_measurement(tool: GitMemoryTool) -> None:
    store = tool.store
    steps: list[dict[str, Any]] = [
        {"command": "create", "path": "/memories/a/one.md", "file_text": "1\n" * 50 + "end\n"},
        {"command": "create", "path": "/memories/a/b/two.md", "file_text": "22\n" * 40},
        {
            "command": "str_replace",
            "path": "/memories/a/one.md",
            "old_str": "1\nend",
            "new_str": "e",
        },
        {"command": "insert", "path": "/memories/a/b/two.md", "insert_line": 1, "insert_text": "z"},
        {"command": "rename", "old_path": "/memories/a/b", "new_path": "/memories/c"},
        {"command": "delete", "path": "/memories/a/one.md"},
        {"command": "create", "path": "/memories/a/one.md", "file_text": "short\n"},
        {"command": "delete", "path": "/memories/c"},
        {"command": "create", "path": "/memories/d.md", "file_text": "d" * 300},
    ]
    for step in steps:
        tool.call(step)
        head = store.head_operation()
        assert head is not None
        assert store.sizer.known_tree_bytes(head.tree) == exact_size(store), step
        assert head.record.store_bytes == exact_size(store), step
    store.create("/memories/a/one.md", "longer than before\n", overwrite=True)
    assert store.sizer.known_tree_bytes(store.snapshot().root) == exact_size(store)
    first = store.head()
    assert first is not None
    tool.call({"command": "delete", "path": "/memories/d.md"})
    # A restore puts back trees whose size is not carried: it is measured when needed.
    store.restore(first, ["/memories/d.md"])
    assert store.store_bytes() == exact_size(store)
    # A graft's size is not tracked; the record holds it only when the tree was measured.
    restored = store.head_operation()
    assert restored is not None and restored.record.store_bytes in (None, exact_size(store))
    # The next write measures it again (with what is cached) and carries the new size.
    tool.call({"command": "create", "path": "/memories/e.md", "file_text": "e\n"})
    head = store.head_operation()
    assert head is not None and head.record.store_bytes == exact_size(store)


def test_a_new_process_checks_the_store_limit_from_the_head_record(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = GitMemoryTool(tmp_path / "s.git", key=key)
    for i in range(5):
        create(first, f"/memories/d{i}/f.md", "x" * 10)
    limits = Limits(max_file_bytes=None, max_store_bytes=70, max_view_chars=None)
    fresh = GitMemoryTool(tmp_path / "s.git", key=key, limits=limits)  # as a new process would
    headers = count_calls(monkeypatch, fresh.store.codec, "_file_entries")
    create(fresh, "/memories/d0/g.md", "y" * 10)
    assert headers == []  # the 50 bytes already there came from the head's record
    assert "max_store_bytes" in refusal(
        fresh, command="create", path="/memories/h.md", file_text="z" * 11
    )
    head = fresh.store.head_operation()
    assert head is not None and head.record.store_bytes == exact_size(fresh.store) == 60


def test_verify_reports_a_record_whose_size_is_wrong(tool: GitMemoryTool) -> None:
    store = tool.store
    create(tool, "/memories/a.md", "abc\n")
    assert store.verify().ok
    head = store.head_operation()
    assert head is not None
    with store.repo.write_lock(5):
        op, durable = store._commit(head.tree, head, "create", (), {}, None, 5)
    store.repo.wait_durable(durable)
    problems = store.verify().problems
    assert problems == [
        f"commit {op.commit}: its record states a memory of 5 bytes, but its files hold 4"
    ]


@pytest.mark.parametrize("size", ["1", -1, 1.5, True, None])
def test_a_record_with_an_invalid_size_is_refused(size: object) -> None:
    record = Record(1, 0, "s", "create", ("/memories/a",), "0", {}, 5)
    body = json.loads(record.to_bytes())
    assert body["bytes"] == 5 and Record.from_bytes(record.to_bytes()) == record
    body["bytes"] = size
    with pytest.raises(gitmem.IntegrityError, match="invalid store size"):
        Record.from_bytes(json.dumps(body).encode())
    del body["bytes"]  # absent (older writers, or a size the writer did not know): None
    assert Record.from_bytes(json.dumps(body).encode()).store_bytes is None


def test_the_next_write_reads_no_header_to_check_the_store_limit(
    tool: GitMemoryTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        create(tool, f"/memories/d{i}/f.md", "x" * 10)
    headers = count_calls(monkeypatch, tool.store.codec, "_file_entries")
    trees = count_calls(monkeypatch, tool.store.repo, "read_tree")
    create(tool, "/memories/d0/g.md", "y" * 10)
    assert headers == [] and trees == []


def test_a_limit_counts_what_another_instance_wrote(tmp_path: Path, key: str) -> None:
    limits = Limits(max_file_bytes=None, max_store_bytes=100, max_view_chars=None)
    one = GitMemoryTool(tmp_path / "s.git", key=key, limits=limits)
    create(one, "/memories/a.md", "a" * 40)
    other = GitMemoryTool(tmp_path / "s.git", key=key, limits=limits)
    create(other, "/memories/b.md", "b" * 40)
    assert "max_store_bytes" in refusal(
        one, command="create", path="/memories/c.md", file_text="c" * 30
    )
    other.call({"command": "delete", "path": "/memories/b.md"})
    create(one, "/memories/c.md", "c" * 30)
    assert one.store.store_bytes() == exact_size(one.store) == 70


# -- the root's metadata ------------------------------------------------------------------------


def test_a_write_does_not_read_back_the_root_it_wrote(
    tool: GitMemoryTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(tool, "/memories/a.md")
    trees = count_calls(monkeypatch, tool.store.repo, "read_tree")
    create(tool, "/memories/b.md")
    assert trees == []
    head = tool.store.head_operation()
    assert head is not None
    names = [e.name for e in tool.store.repo.read_tree(head.tree)]
    assert gitmem.format.META_ENTRY in names


def test_a_restored_root_without_the_metadata_gets_it(tool: GitMemoryTool) -> None:
    store = tool.store
    create(tool, "/memories/a.md")
    head = store.head_operation()
    assert head is not None
    repo: GitRepo = store.repo
    bare = [e for e in repo.read_tree(head.tree) if e.name != gitmem.format.META_ENTRY]
    old_root = repo.write_tree([TreeEntry(e.name, e.oid, e.mode) for e in bare])
    stamped = store.codec.stamp_root(old_root)
    assert stamped != old_root
    assert gitmem.format.META_ENTRY in [e.name for e in repo.read_tree(stamped)]


# -- directory trees ----------------------------------------------------------------------------


def check_canonical_trees(store: MemoryStore) -> None:
    """Every directory tree at the head is in git's canonical form (what a full serialization
    of its entries gives) and holds what the snapshot lists."""
    head = store.head_operation()
    assert head is not None
    repo = store.repo
    stack = [head.tree]
    while stack:
        oid = stack.pop()
        data = repo._read(oid, b"tree", 1 << 30)
        entries = parse_tree(data, oid)  # strict: order, duplicates, modes
        assert tree_bytes(entries) == data
        stack.extend(e.oid for e in entries if e.mode == TREE_MODE and e.name[:1] in "db")


def test_spliced_directory_trees_equal_full_serializations(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    one = GitMemoryTool(tmp_path / "s.git", key=key, session="one")
    other = GitMemoryTool(tmp_path / "s.git", key=key, session="other")
    model: dict[str, str] = {}
    dirs = ["/memories", "/memories/a", "/memories/a/b", "/memories/c"]
    for step in range(160):
        tool = other if step % 23 == 0 else one  # now and then another instance writes
        path = f"{rng.choice(dirs)}/n{rng.randrange(30)}.md"
        if path in model and rng.random() < 0.3:
            tool.call({"command": "delete", "path": path})
            del model[path]
        elif path in model and rng.random() < 0.3:
            target = f"{rng.choice(dirs)}/m{step}.md"
            tool.call({"command": "rename", "old_path": path, "new_path": target})
            model[target] = model.pop(path)
        elif path in model:
            tool.call({"command": "insert", "path": path, "insert_line": 0, "insert_text": "i"})
            model[path] = "i\n" + model[path]
        else:
            create(tool, path, f"{step}\n")
            model[path] = f"{step}\n"
        if step % 10 == 0:
            check_canonical_trees(one.store)
    check_canonical_trees(one.store)
    assert one.store.files() == model
    assert sorted(gitmem.MemoryStore.open(tmp_path / "s.git", key=key).files()) == sorted(model)


def test_a_write_to_a_big_directory_serializes_only_its_changes(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = GitMemoryTool(repo_path, key=key)
    op, _ = tool.store.write("seed", lambda head, tree: seed_files(tree, 300))
    assert op is not None
    create(tool, "/memories/big/first.md")  # the directory was read: serialized in full once
    serialized = count_calls(monkeypatch, gitmem.buckets, "serialized")
    create(tool, "/memories/big/second.md")
    tool.call(
        {
            "command": "insert",
            "path": "/memories/big/Note5.md",
            "insert_line": 0,
            "insert_text": "x",
        }
    )
    tool.call({"command": "delete", "path": "/memories/big/Note6.md"})
    # Each write serializes the entry it changed and its parent directory's entry.
    assert 3 <= len(serialized) <= 3 * 2, serialized
    check_canonical_trees(tool.store)


def test_commits_are_the_bytes_libgit2_writes(tmp_path: Path) -> None:
    # write_commit serializes commits itself (libgit2 parses the whole root tree first): the
    # ids must be those libgit2's create_commit gives.
    repo = GitRepo.init(tmp_path / "r.git")
    git = pygit2.Repository(str(repo.path))
    tree = repo.write_tree([TreeEntry("f", repo.write_blob(b"x"), 0o100644)])
    checkpoint_loose(repo)  # the tree into the repository, where libgit2 looks it up
    parents: list[str] = []
    # Times as sequence numbers give them: 1, then one more than the parents'; and 0, as
    # commits written before commits carried their sequence number.
    messages = (b"first\n\nbody\n\n", b"second", "gitmem 1 \u00e9\n".encode(), b"m")
    for seq, message in zip((1, 2, 0, 123_456), messages, strict=True):
        ours = repo.write_commit(tree, parents, message, time=seq)
        signature = pygit2.Signature("gitmem", "gitmem@invalid", seq, 0)
        theirs = git.create_commit(
            None,
            signature,
            signature,
            message,
            pygit2.Oid(hex=tree),
            [pygit2.Oid(hex=p) for p in parents],
        )
        assert ours == str(theirs)
        parents = [ours] if len(parents) != 1 else [parents[0], ours]
    with pytest.raises(ValueError, match="NUL"):  # libgit2 would cut the message there
        repo.write_commit(tree, [], b"a\0b", time=1)
    with pytest.raises(ValueError, match="is not a full object id"):
        repo.write_commit(tree[:39], [], b"m", time=1)
    with pytest.raises(ValueError, match="is not a full object id"):
        repo.write_commit(tree, [tree.upper()], b"m", time=1)


def test_a_directory_another_instance_changed_opens_only_its_new_names(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = GitMemoryTool(tmp_path / "s.git", key=key, session="one")
    op, _ = one.store.write("seed", lambda head, tree: seed_files(tree, 50))
    assert op is not None
    one.call({"command": "view", "path": "/memories/big"})
    other = GitMemoryTool(tmp_path / "s.git", key=key, session="other")
    create(other, "/memories/big/new.md", "from the other instance\n")
    opened = count_calls(monkeypatch, type(one.store.keys), "open_name")
    listing = one.call({"command": "view", "path": "/memories/big"})
    assert "/memories/big/new.md" in listing and "/memories/big/Note49.md" in listing
    # Only the new name is opened: the 50 others, and the root's, are known by sealed name.
    assert len(opened) == 1


def test_a_known_sealed_name_is_reused_only_under_its_own_parent(tool: GitMemoryTool) -> None:
    create(tool, "/memories/a/x.md")
    create(tool, "/memories/b/y.md")
    store = tool.store
    snapshot = store.snapshot()
    a_path, b_path = gitmem.parse_path("/memories/a"), gitmem.parse_path("/memories/b")
    a_node, b_node = snapshot.lookup(a_path), snapshot.lookup(b_path)
    assert a_node is not None and b_node is not None
    codec = store.codec
    b_entries = store.repo.read_tree(b_node.oid)
    codec.load_dir(a_node.oid, a_path)  # /memories/a's names are now known
    # /memories/b's entry planted in a tree read at /memories/a: opened, and refused.
    planted = store.repo.write_tree(store.repo.read_tree(a_node.oid) + b_entries)
    with pytest.raises(gitmem.IntegrityError, match="failed authentication"):
        codec.load_dir(planted, a_path)
    # A fresh codec (nothing known) says the same.
    with pytest.raises(gitmem.IntegrityError, match="failed authentication"):
        TreeCodec(store.repo, store.keys).load_dir(planted, a_path)


def test_a_write_that_adds_no_name_keeps_the_directorys_fold_index(
    repo_path: Path, key: str
) -> None:
    tool = GitMemoryTool(repo_path, key=key)
    store = tool.store
    op, _ = store.write("seed", lambda head, tree: seed_files(tree, 300))
    assert op is not None
    create(tool, "/memories/big/sub/a.md")  # the create's twin check builds the index

    def index() -> object:
        head = store.head_operation()
        assert head is not None
        big = store.snapshot().lookup(gitmem.parse_path("/memories/big"))
        assert big is not None
        return store.codec.load_dir(big.oid, gitmem.parse_path("/memories/big")).fold_index

    built = index()
    assert built is not None
    # Entries pointed at new trees (a write below, an edit of a file): the same index object.
    create(tool, "/memories/big/sub/b.md")
    tool.call(
        {
            "command": "insert",
            "path": "/memories/big/Note3.md",
            "insert_line": 0,
            "insert_text": "x",
        }
    )
    assert index() is built
    assert "Note7.md" in refusal(
        tool, command="create", path="/memories/big/NOTE7.md", file_text=""
    )
    # A new name: a new index holding it.
    create(tool, "/memories/big/Fresh.md")
    assert index() is not built
    assert "Fresh.md" in refusal(
        tool, command="create", path="/memories/big/FRESH.md", file_text=""
    )
    tool.call({"command": "delete", "path": "/memories/big/Fresh.md"})
    create(tool, "/memories/big/FRESH.md")
