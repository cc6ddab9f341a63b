"""Replicas made by plain git open and verify; a replica behind another is not a rollback.

Format 2 carries the metadata in every root tree, so copies of the branch alone are stores;
high-water marks are per replica path, so a backup that is behind still verifies.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers_repo import published

from gitmem import MemoryStore, RollbackDetected
from gitmem.format import META_ENTRY, StoreMeta
from gitmem.git.refs import BRANCH, META_REF
from gitmem.highwater import HighWater, Mark
from gitmem.paths import parse


def git(*args: str, cwd: Path | None = None) -> str:
    """Run plain git, after publishing the redo log of every store it is given."""
    for arg in args:
        if (Path(arg) / "gitmem.wal").exists():
            published(Path(arg))
    return subprocess.run(
        ["git", *args], check=True, capture_output=True, text=True, cwd=cwd
    ).stdout.strip()


def write(store: MemoryStore, name: str, text: str) -> None:
    store.create(parse(f"/memories/{name}"), text, overwrite=True)


@pytest.fixture
def original(repo_path: Path, key: str, tmp_path: Path) -> MemoryStore:
    store = MemoryStore.init(repo_path, key, state_dir=tmp_path / "state")
    write(store, "notes.md", "one\n")
    write(store, "dir/todo.md", "two\n")
    return store


def test_git_clone_bare_copy_opens_and_verifies(
    original: MemoryStore, key: str, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.git"
    git("clone", "--bare", "-q", str(original.path), str(copy))
    # Plain git copies the branch only: the metadata ref stays behind.
    assert git("--git-dir", str(copy), "for-each-ref", "--format=%(refname)") == BRANCH
    replica = MemoryStore.open(copy, key, state_dir=tmp_path / "state")
    assert replica.store_id == original.store_id
    assert replica.files() == original.files()
    assert replica.verify().ok
    # Its first write restores the metadata ref from the branch.
    write(replica, "new.md", "three\n")
    assert replica.repo.ref(META_REF) == original.repo.ref(META_REF)
    assert replica.verify().ok


def test_git_push_copy_opens_and_verifies(original: MemoryStore, key: str, tmp_path: Path) -> None:
    target = tmp_path / "pushed.git"
    git("init", "--bare", "-q", str(target))
    git("--git-dir", str(original.path), "push", "-q", str(target), "main")
    replica = MemoryStore.open(target, key, state_dir=tmp_path / "other-state")
    assert replica.files() == original.files()
    assert replica.verify().ok


def test_every_root_tree_carries_the_metadata(original: MemoryStore) -> None:
    meta_blob = original.repo.ref(META_REF)
    assert meta_blob is not None
    assert StoreMeta.from_bytes(original.repo.read_blob(meta_blob)).format == 6
    for op in original.log():
        entries = {e.name: e.oid for e in original.repo.read_tree(op.tree)}
        assert entries[META_ENTRY] == meta_blob
    # A restore to an old state still commits a root that carries it.
    first = list(original.log())[-1].commit
    restored = original.restore(first)
    assert restored is not None
    assert {e.name for e in original.repo.read_tree(restored.tree)} >= {META_ENTRY}


def test_backup_behind_still_verifies_after_the_original_moves_on(
    original: MemoryStore, key: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    backup = tmp_path / "backup.git"
    git("clone", "--bare", "-q", str(original.path), str(backup))
    assert MemoryStore.open(backup, key, state_dir=state).verify().ok
    for i in range(3):
        write(original, f"later{i}.md", f"{i}\n")
    # The same client reads both: the original is ahead, the backup behind; neither is refused.
    assert MemoryStore.open(original.path, key, state_dir=state).verify().ok
    assert MemoryStore.open(backup, key, state_dir=state).verify().ok
    assert MemoryStore.open(original.path, key, state_dir=state).verify().ok
    assert "/memories/later2.md" not in MemoryStore.open(backup, key, state_dir=state).files()


def test_a_replica_going_backwards_is_still_a_rollback(
    original: MemoryStore, key: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    backup = tmp_path / "backup.git"
    git("clone", "--bare", "-q", str(original.path), str(backup))
    old = git("--git-dir", str(backup), "rev-parse", "main")
    replica = MemoryStore.open(backup, key, state_dir=state)
    write(replica, "more.md", "x\n")
    git("--git-dir", str(backup), "update-ref", "refs/heads/main", old)
    with pytest.raises(RollbackDetected):
        MemoryStore.open(backup, key, state_dir=state).head()


def test_marks_are_per_replica_files(original: MemoryStore, tmp_path: Path) -> None:
    store_dir = tmp_path / "state" / original.store_id
    marks = sorted(store_dir.glob("replica-*.mark"))
    assert len(marks) == 1
    where = str(original.path.resolve())
    assert marks[0].name == f"replica-{hashlib.sha256(where.encode()).hexdigest()[:32]}.mark"
    mark = HighWater(original.store_id, tmp_path / "state", replica=original.path).read()
    assert mark == Mark(str(original.head()), 2)
    assert marks[0].stat().st_mode & 0o777 == 0o600
    assert store_dir.stat().st_mode & 0o777 == 0o700


def _make_format1_store(path: Path, key: str, state: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A store exactly as gitmem 0.1 wrote it: format 1 metadata, no metadata in root trees."""
    store = MemoryStore.init(path, key, state_dir=state)
    assert store.head() is None
    v1 = StoreMeta(1, store.keys.store_id, store.keys.check_value())
    store.repo.update_ref(META_REF, store.repo.write_blob(v1.to_bytes()), store.repo.ref(META_REF))
    store.codec.meta_blob = None
    with monkeypatch.context() as patch:
        patch.setattr(MemoryStore, "_upgrade_format", lambda self: None)
        write(store, "old.md", "from 0.1\n")
        write(store, "old2.md", "also\n")
    for op in store.log():
        assert META_ENTRY not in {e.name for e in store.repo.read_tree(op.tree)}
    return store.store_id


def test_format1_store_opens_and_upgrades_on_first_write(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    store_id = _make_format1_store(repo_path, key, state, monkeypatch)
    # A format 1 client's mark (one per store id) is adopted by the first replica opened.
    state = tmp_path / "state-of-a-0.1-client"
    state.mkdir(mode=0o700)
    head = MemoryStore.open(repo_path, key, check_rollback=False).repo.ref(BRANCH)
    legacy = state / f"{store_id}.json"
    legacy.write_text(json.dumps({"commit": head, "seq": 2}))
    reopened = MemoryStore.open(repo_path, key, state_dir=state)
    assert reopened.files() == {"/memories/old.md": "from 0.1\n", "/memories/old2.md": "also\n"}
    assert not legacy.exists() and len(list((state / store_id).glob("replica-*.json"))) == 1
    write(reopened, "new.md", "from 0.2\n")
    meta_blob = reopened.repo.ref(META_REF)
    assert meta_blob is not None
    assert StoreMeta.from_bytes(reopened.repo.read_blob(meta_blob)).format == 6
    head_tree = reopened.repo.read_tree(reopened.head_operation().tree)  # type: ignore[union-attr]
    assert {e.name: e.oid for e in head_tree}[META_ENTRY] == meta_blob
    assert reopened.verify().ok
    # Now a plain clone is a complete store, old history included.
    copy = tmp_path / "copy.git"
    git("clone", "--bare", "-q", str(repo_path), str(copy))
    replica = MemoryStore.open(copy, key, state_dir=state)
    assert replica.files() == reopened.files()
    assert replica.verify().ok and len(list(replica.log())) == 3


def test_deleted_metadata_ref_is_rebuilt_from_the_branch(
    original: MemoryStore, key: str, tmp_path: Path
) -> None:
    blob = original.repo.ref(META_REF)
    git("--git-dir", str(original.path), "update-ref", "-d", META_REF)
    store = MemoryStore.open(original.path, key, state_dir=tmp_path / "state")
    assert store.verify().ok and store.files() == original.files()
    write(store, "again.md", "x\n")
    assert store.repo.ref(META_REF) == blob


def _mark_files(state: Path, store: MemoryStore) -> tuple[HighWater, Path]:
    marks = HighWater(store.store_id, state, replica=store.path)
    assert marks.mark_path is not None
    return marks, Path(marks.mark_path)


def test_a_version1_mark_is_read_and_carried_into_version2(
    original: MemoryStore, key: str, tmp_path: Path
) -> None:
    """A mark written by an earlier gitmem (one JSON file, replaced whole) still protects: read
    while no version 2 file exists, and carried into it by the first advance."""
    state = tmp_path / "state"
    marks, v2 = _mark_files(state, original)
    head = original.head_operation()
    assert head is not None
    v2.unlink()
    marks.path.write_text(json.dumps({"commit": head.commit, "seq": head.seq}))
    assert marks.read() == Mark(head.commit, head.seq)
    # A rollback below the version 1 mark is caught.
    first = next(op for op in original.log() if op.seq == 1)
    git("--git-dir", str(original.path), "update-ref", "refs/heads/main", first.commit)
    with pytest.raises(RollbackDetected):
        MemoryStore.open(original.path, key, state_dir=state).head()
    git("--git-dir", str(original.path), "update-ref", "refs/heads/main", head.commit)
    # An advance to an older mark keeps the newer version 1 one.
    marks.advance(Mark(first.commit, 1))
    assert marks.read() == Mark(head.commit, head.seq)
    write(original, "more.md", "x\n")
    assert marks.read() == Mark(str(original.head()), head.seq + 1)


def test_a_torn_mark_slot_leaves_the_other(original: MemoryStore, tmp_path: Path) -> None:
    """Each advance writes the slot not holding the newest mark: a write torn by a crash (or
    seen half done by a reader) leaves the previous mark readable."""
    marks, v2 = _mark_files(tmp_path / "state", original)
    before = marks.read()
    assert before is not None
    marks.advance(Mark("ab" * 20, before.seq + 1))
    assert marks.read() == Mark("ab" * 20, before.seq + 1)
    data = bytearray(v2.read_bytes())
    newest = 0 if b" %d " % (before.seq + 1) in data[:128] else 1
    data[newest * 128 + 20] ^= 0x01  # the slot just written, torn
    v2.write_bytes(bytes(data))
    assert marks.read() == before
    marks.advance(Mark("cd" * 20, before.seq + 2))  # over the torn slot: the good one stays
    assert marks.read() == Mark("cd" * 20, before.seq + 2)
    v2.write_bytes(b"")  # emptied (a crash before its first write reached the disk)
    assert marks.read() is None
    v2.unlink()
    os.mkfifo(v2)  # not a regular file: no mark, and the next advance replaces it
    assert marks.read() is None
    marks.advance(Mark("ef" * 20, 9))
    assert marks.read() == Mark("ef" * 20, 9)
