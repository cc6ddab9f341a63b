"""`gitmem gc`: one pack, nothing reachable lost, old garbage pruned, young garbage kept, the
writer lock held throughout, and readers undisturbed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner
from helpers_repo import checkpoint_loose, published
from pygit2.enums import ObjectType

import gitmem
from gitmem import parse_path
from gitmem.cli import main
from gitmem.git import flush as git_flush
from gitmem.git import maintenance as git_maintenance
from gitmem.git import pack as git_pack
from gitmem.git import repo as git_repo
from gitmem.git.maintenance import GcReport, _pack_index_oids, _stale_pack_leftover
from gitmem.git.refs import BRANCH
from gitmem.git.repo import GitRepo
from gitmem.store import MemoryStore

DAY = 86400.0


def loose_objects(repo: Path) -> set[str]:
    root = repo / "objects"
    return {d.name + f.name for d in root.iterdir() if len(d.name) == 2 for f in d.iterdir()}


def packs(repo: Path) -> list[Path]:
    return sorted((repo / "objects" / "pack").glob("pack-*.idx"))


def age(repo: Path, oid: str, seconds: float) -> None:
    path = repo / "objects" / oid[:2] / oid[2:]
    then = time.time() - seconds
    os.utime(path, (then, then))


def filled(repo_path: Path, key: str, files: int = 6) -> MemoryStore:
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(files):
        lines = "".join(f"file {i} line {n}\n" for n in range(300 * i + 1))
        store.create(parse_path(f"/memories/d{i % 2}/f{i}.md"), lines)
    store.str_replace(parse_path("/memories/d1/f1.md"), "file 1 line 7\n", "seven\n")
    return store


def git_reads_the_packs(repo: Path) -> None:
    """git accepts every pack (``verify-pack``) and the repository (``fsck``), and the packs
    are gitmem's own (its blobs are stored blocks, zlib header 78 01; libgit2 writes 78 9c)."""
    for idx in packs(repo):
        run = subprocess.run(
            ["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True, check=True
        )
        data = idx.with_suffix(".pack").read_bytes()
        rows = [line.split() for line in run.stdout.splitlines()]
        blobs = [int(f[4]) for f in rows if len(f) == 5 and f[1] == "blob"]
        for offset in blobs:
            while data[offset] & 0x80:  # the entry's type and size
                offset += 1
            assert data[offset + 1 : offset + 3] == b"\x78\x01"
    subprocess.run(["git", "--git-dir", str(repo), "fsck", "--strict"], check=True)


def test_gc_packs_everything_reachable_and_verify_passes(repo_path: Path, key: str) -> None:
    store = filled(repo_path, key)
    before = store.files()
    log = [op.commit for op in store.log()]
    reachable = set(store.repo.reachable())
    report = store.gc(grace=0)
    assert loose_objects(repo_path) == set()
    (idx,) = packs(repo_path)
    assert _pack_index_oids(idx) == reachable
    git_reads_the_packs(repo_path)
    assert report.packed == len(reachable) and report.pruned == 0 and report.kept == 0
    fresh = MemoryStore.open(repo_path, key)
    assert fresh.files() == before
    assert [op.commit for op in fresh.log()] == log
    assert fresh.verify().ok
    subprocess.run(["git", "--git-dir", str(repo_path), "fsck", "--strict"], check=True)


def test_gc_prunes_old_garbage_and_keeps_young_garbage(repo_path: Path, key: str) -> None:
    store = filled(repo_path, key)
    old = store.repo.write_blob(b"left behind by a writer that died, long ago")
    young = store.repo.write_blob(b"left behind a minute ago")
    checkpoint_loose(store.repo)  # as a write that failed after a checkpoint leaves them
    age(repo_path, old, 15 * DAY)
    age(repo_path, young, 60)
    report = store.gc()  # the default grace: two weeks
    assert (report.pruned, report.kept) == (1, 1)
    assert not store.repo.has(old)
    assert store.repo.has(young) and young in loose_objects(repo_path)
    assert store.gc(grace=30).pruned == 1
    assert not store.repo.has(young)
    assert store.verify().ok


def test_gc_removes_old_temporary_object_files_and_keeps_young_ones(
    repo_path: Path, key: str
) -> None:
    """What object writers killed mid-write leave: gitmem's temporary files in objects/ and
    libgit2's in objects/ or a fan-out directory. A young one may be a live writer's."""
    store = filled(repo_path, key)
    objects = repo_path / "objects"
    # A fan-out directory holding no object (ids are random: pick a free one).
    fanout = objects / next(f"{n:02x}" for n in range(256) if not (objects / f"{n:02x}").exists())
    fanout.mkdir()
    old = [objects / "tmp_obj_gitmem-4242-abcd-1-0", fanout / "tmp_object_git2_Q1w2e3"]
    young = [objects / "tmp_obj_gitmem-4243-abcd-1-0", objects / "tmp_object_git2_R4t5y6"]
    for path in old + young:
        path.write_bytes(b"x\x01half an object")
    then = time.time() - 2 * DAY
    for path in old:
        os.utime(path, (then, then))
    link = objects / "tmp_object_git2_link"
    link.symlink_to(old[0])  # not a writer's file: left alone
    os.utime(link, (then, then), follow_symlinks=False)
    report = store.gc(grace=DAY)
    assert report.temporaries == 2
    assert not any(path.exists() for path in old)
    assert all(path.exists() for path in young) and link.is_symlink()
    assert not fanout.exists()  # the fan-out emptied of its leftover goes too
    assert store.verify().ok
    assert store.gc(grace=0).temporaries == 2  # --grace 0s: every temporary file
    assert not any(path.exists() for path in young)


def test_gc_removes_old_pack_leftovers_and_keeps_young_ones(repo_path: Path, key: str) -> None:
    """What pack writers killed mid-write leave in objects/pack: libgit2's temporary pack and
    index lock, git's temporary pack and index, and a pack renamed without its index (no reader
    sees it). A young one may be a live writer's; a pack with a .keep file is never removed."""
    store = filled(repo_path, key)
    store.gc(grace=0)
    pack_dir = repo_path / "objects" / "pack"
    orphan, young_orphan, kept_orphan = (pack_dir / f"pack-{c * 40}.pack" for c in "abc")
    old = [
        pack_dir / "pack_git2_Q1w2e3",
        pack_dir / "tmp_pack_R4t5y6",
        pack_dir / "tmp_idx_R4t5y6",
        pack_dir / f"pack-{'a' * 40}.idx.lock",
        orphan,
    ]
    young = [pack_dir / "pack_git2_U7i8o9", young_orphan]
    for path in [*old, *young, kept_orphan]:
        path.write_bytes(b"PACK\0\0\0\2half a pack")
    (pack_dir / f"pack-{'c' * 40}.keep").write_bytes(b"")
    then = time.time() - 2 * DAY
    for path in [*old, kept_orphan]:
        os.utime(path, (then, then))
    link = pack_dir / "pack_git2_link"
    link.symlink_to(old[0])  # not a writer's file: left alone
    os.utime(link, (then, then), follow_symlinks=False)
    report = store.gc(grace=DAY)
    assert report.temporaries == len(old)
    assert not any(path.exists() for path in old)
    assert all(path.exists() for path in young) and link.is_symlink() and kept_orphan.exists()
    assert store.verify().ok
    assert store.gc(grace=0).temporaries == len(young)  # --grace 0s: every leftover
    assert not any(path.exists() for path in young)
    assert kept_orphan.exists() and link.is_symlink()
    (idx,) = packs(repo_path)
    assert idx.with_suffix(".pack").exists() and store.verify().ok


def test_gc_never_removes_a_pack_whose_index_exists(repo_path: Path, key: str) -> None:
    """With ``--grace 0s`` every pack is old enough: the one gc has just written (its index
    written last) stays, and so would any other indexed pack."""
    store = filled(repo_path, key)
    for _ in range(2):
        report = store.gc(grace=0)
        assert report.temporaries == 0
        (idx,) = packs(repo_path)
        assert idx.with_suffix(".pack").exists()
        assert MemoryStore.open(repo_path, key).verify().ok
    pack = idx.with_suffix(".pack")
    later = time.time() + 30 * DAY
    assert not _stale_pack_leftover(pack, later, DAY) and pack.exists()
    saved = idx.read_bytes()
    idx.unlink()  # as a writer killed between its pack's rename and its index's leaves it
    assert not _stale_pack_leftover(pack, time.time(), DAY) and pack.exists()  # too young
    assert _stale_pack_leftover(pack, later, DAY) and not pack.exists()
    assert saved  # the index was a real one


@pytest.mark.skipif(
    not git_flush.default_mode().logged, reason="the redo log needs syncfs and a boot id"
)
def test_gc_publishes_what_the_redo_log_holds_and_loses_nothing(repo_path: Path, key: str) -> None:
    """`gitmem gc` in another process, while every write is in the redo log alone (the branch
    file still at the store's creation): it publishes them first, packs them and prunes
    nothing of them, even with ``--grace 0s``; plain git then reads every commit."""
    store = filled(repo_path, key)
    commits = [op.commit for op in store.log()]
    states = [store.files(rev=commit) for commit in commits]
    assert GitRepo(repo_path).refs.ref_file(BRANCH) != commits[0]  # the log alone holds them
    run = subprocess.run(
        [sys.executable, "-m", "gitmem", "--repo", str(repo_path), "gc", "--grace", "0s", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "GITMEM_KEY": key},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["pruned"] == 0 and report["missing"] == []
    assert GitRepo(repo_path).refs.ref_file(BRANCH) == commits[0]
    assert loose_objects(repo_path) == set()
    (idx,) = packs(repo_path)
    assert _pack_index_oids(idx) >= set(commits)
    git_log = subprocess.run(
        ["git", "--git-dir", str(repo_path), "log", "--format=%H", BRANCH],
        capture_output=True,
        text=True,
        check=True,
    )
    assert git_log.stdout.split() == commits
    git_reads_the_packs(repo_path)
    fresh = MemoryStore.open(repo_path, key)
    assert [op.commit for op in fresh.log()] == commits
    assert [fresh.files(rev=commit) for commit in commits] == states
    assert fresh.verify().ok


def test_gc_again_and_after_more_writes_leaves_one_pack(repo_path: Path, key: str) -> None:
    store = filled(repo_path, key)
    store.gc(grace=0)
    first = packs(repo_path)
    report = store.gc(grace=0)
    assert packs(repo_path) == first and report.removed_packs == 0
    store.create(parse_path("/memories/new.md"), "after the first gc\n")
    report = store.gc(grace=0)
    assert len(packs(repo_path)) == 1 and packs(repo_path) != first
    # The first gc's pack, and the one gc's own checkpoint published the new write in.
    assert report.removed_packs == 2
    assert loose_objects(repo_path) == set()
    assert MemoryStore.open(repo_path, key).read_text(parse_path("/memories/new.md")) == (
        "after the first gc\n"
    )


def test_the_young_garbage_of_an_old_pack_is_kept_alone(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack holding young garbage is replaced by a pack of that garbage alone, dated as the
    pack was: its reachable objects are in gc's new pack, and are not stored twice."""
    store = filled(repo_path, key)
    with monkeypatch.context() as worse:
        # The old pack stores every tree whole and nothing deflated: gc's new pack and the
        # pack of the young garbage are smaller together, so gc keeps them (it keeps the old
        # pack when they are not: test_gc_keeps_the_old_packs_when_its_pack_is_no_smaller).
        worse.setattr(git_pack._TreeBases, "delta", lambda *_: None)
        worse.setattr(git_pack, "_deflate", lambda _, payload, __=0: git_pack.zlib_stored(payload))
        store.gc(grace=0)
    (first,) = packs(repo_path)
    then = time.time() - DAY / 2
    os.utime(first.with_suffix(".pack"), (then, then))
    # History rewritten by hand: the last commit becomes unreachable, but only just.
    head = store.head()
    assert head is not None
    parent = store.repo.read_commit(head).parents[0]
    subprocess.run(
        ["git", "--git-dir", str(repo_path), "update-ref", "refs/heads/main", parent], check=True
    )
    garbage = _pack_index_oids(first) - set(store.repo.reachable())
    report = store.gc(grace=DAY)
    assert first not in packs(repo_path) and len(packs(repo_path)) == 2
    (kept,) = [idx for idx in packs(repo_path) if _pack_index_oids(idx) == garbage]
    assert kept.with_suffix(".pack").stat().st_mtime == then
    assert report.kept == len(garbage) > 0 and store.repo.has(head)
    git_reads_the_packs(repo_path)
    # Garbage alone is not written again: its date stays.
    report = store.gc(grace=DAY)
    assert kept in packs(repo_path) and report.kept == len(garbage)
    then = time.time() - 2 * DAY
    os.utime(kept.with_suffix(".pack"), (then, then))
    report = store.gc(grace=DAY)
    assert kept not in packs(repo_path) and len(packs(repo_path)) == 1
    assert report.pruned == len(garbage) and not store.repo.has(head)


def test_gc_never_grows_a_store_whose_pack_holds_young_garbage(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose history maintenance packed together with one object nothing references
    (left by a write that failed after a checkpoint): gc with the default grace makes it no
    bigger, and again no bigger the second time."""
    store = filled(repo_path, key)
    store.repo.write_blob(b"left behind a minute ago")
    checkpoint_loose(store.repo)
    monkeypatch.setattr(git_maintenance, "AUTO_PACK_LOOSE", 0)
    before = packs(repo_path)
    assert store.repo.maintain().packed_loose > 50
    (history,) = set(packs(repo_path)) - set(before)
    report = store.gc()
    assert report.kept == 1
    assert report.bytes_after <= report.bytes_before
    assert history not in packs(repo_path)
    again = store.gc()
    assert again.kept == 1 and again.bytes_after <= again.bytes_before
    assert MemoryStore.open(repo_path, key).verify().ok


def _worse_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    """gc's pack writer made to pack worse than the packs it replaces: every tree whole and
    nothing deflated."""
    monkeypatch.setattr(git_pack._TreeBases, "delta", lambda *_: None)
    monkeypatch.setattr(
        git_pack, "_deflate", lambda _, payload, __=0: git_pack.zlib_stored(payload)
    )


def test_gc_keeps_the_old_packs_when_its_pack_is_no_smaller(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gc that prunes nothing and whose new pack is larger than the packs it would replace
    keeps those: it never grows the store."""
    store = filled(repo_path, key)
    store.gc(grace=0)
    before = packs(repo_path)
    sizes = {idx: idx.with_suffix(".pack").stat().st_size for idx in before}
    _worse_packs(monkeypatch)
    report = store.gc(grace=0)
    assert report.bytes_after == report.bytes_before
    assert (report.packed, report.pruned, report.removed_packs) == (0, 0, 0)
    assert packs(repo_path) == before
    assert {idx: idx.with_suffix(".pack").stat().st_size for idx in before} == sizes
    assert sorted((repo_path / "objects" / "pack").iterdir()) == sorted(
        path for idx in before for path in (idx, idx.with_suffix(".pack"))
    )
    git_reads_the_packs(repo_path)
    assert MemoryStore.open(repo_path, key).verify().ok


def test_gc_prunes_garbage_even_when_its_pack_is_no_smaller(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Garbage old enough is pruned from the packs whatever the new pack's size: the old
    packs holding it are replaced."""
    store = filled(repo_path, key)
    store.gc(grace=0)
    head = store.head()
    assert head is not None
    parent = store.repo.read_commit(head).parents[0]
    subprocess.run(
        ["git", "--git-dir", str(repo_path), "update-ref", "refs/heads/main", parent], check=True
    )
    (first,) = packs(repo_path)
    garbage = _pack_index_oids(first) - set(store.repo.reachable())
    _worse_packs(monkeypatch)
    report = store.gc(grace=0)
    assert report.pruned == len(garbage) > 0 and first not in packs(repo_path)
    assert not store.repo.has(head) and len(packs(repo_path)) == 1
    git_reads_the_packs(repo_path)


def test_gc_holds_one_set_of_raw_ids_and_no_libgit2_object_cache(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc's memory per reachable object is one 20-byte id in one set, which its walk and its
    pack writer share; libgit2's object cache is bounded while gc runs, and restored after."""
    store = filled(repo_path, key)
    limit = pygit2.settings.cached_memory[1]
    seen: list[tuple[set[bytes] | None, int]] = []
    write_pack = git_pack.write_pack

    def watched(*args: object, packed: set[bytes] | None = None, **kwargs: object) -> object:
        seen.append((packed, pygit2.settings.cached_memory[1]))
        return write_pack(*args, packed=packed, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(git_maintenance, "write_pack", watched)
    report = store.gc(grace=0)
    (packed, cache_limit), *_ = seen
    assert packed is not None and len(packed) == report.packed > 10
    assert all(type(oid) is bytes and len(oid) == 20 for oid in packed)
    assert cache_limit == git_maintenance.GC_OBJECT_CACHE
    assert pygit2.settings.cached_memory[1] == limit


def test_the_object_cache_bound_is_restored_when_the_last_gc_ends() -> None:
    """Two gcs at once (threads of one process, each on its own store): the first to end
    leaves the bound lowered for the other, the last restores it."""
    limit = pygit2.settings.cached_memory[1]
    first, second = git_maintenance.object_cache_limited(), git_maintenance.object_cache_limited()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert pygit2.settings.cached_memory[1] == git_maintenance.GC_OBJECT_CACHE
    second.__exit__(None, None, None)
    assert pygit2.settings.cached_memory[1] == limit


def test_gc_reads_each_reachable_object_once(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk reads and hash-checks each object, and the pack is written from what it read:
    no object is read a second time to be packed."""
    filled(repo_path, key)
    published(repo_path)  # loose objects, read from their files
    store = MemoryStore.open(repo_path, key)
    reads: list[str] = []
    read_any = GitRepo.read_any

    def counted(self: GitRepo, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes]:
        reads.append(oid)
        return read_any(self, oid, limits)

    monkeypatch.setattr(GitRepo, "read_any", counted)
    report = store.gc(grace=0)
    assert report.packed > 10
    assert sorted(reads) == sorted(set(reads)) and len(reads) == report.packed


def test_gc_of_an_empty_store(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    report = store.gc(grace=0)
    assert report.packed == 1  # the metadata blob
    assert MemoryStore.open(repo_path, key).files() == {}


def test_gc_refuses_a_repository_missing_a_reachable_object(repo_path: Path, key: str) -> None:
    store = filled(repo_path, key)
    published(repo_path)
    victim = next(iter(loose_objects(repo_path) & set(store.repo.reachable())))
    garbage = store.repo.write_blob(b"old garbage")
    checkpoint_loose(store.repo)
    age(repo_path, garbage, 30 * DAY)
    path = repo_path / "objects" / victim[:2] / victim[2:]
    os.chmod(path, 0o600)
    path.unlink()
    before = packs(repo_path)
    with pytest.raises(gitmem.IntegrityError, match=f"object {victim} is missing"):
        MemoryStore.open(repo_path, key).gc(grace=0)
    assert store.repo.has(garbage)  # nothing was pruned
    # The pack the walk was streaming into was abandoned, unpublished, its directory removed.
    assert packs(repo_path) == before and not list(repo_path.glob("gitmem-gc-*"))


def test_gc_holds_the_writer_lock(repo_path: Path, key: str) -> None:
    store = filled(repo_path, key)
    waiting = MemoryStore.open(repo_path, key, lock_timeout=0.2)
    with store.repo.write_lock(5.0), pytest.raises(gitmem.LockTimeout):
        waiting.gc(grace=0)
    # And a writer waits for a gc: the lock is taken before anything is read or written.
    entered = threading.Event()
    release = threading.Event()
    original = store.repo.gc

    def slow_gc(grace: float, now: float | None = None) -> GcReport:
        entered.set()
        release.wait(5)
        return original(grace, now)

    store.repo.gc = slow_gc  # type: ignore[method-assign]
    worker = threading.Thread(target=store.gc, kwargs={"grace": 0})
    worker.start()
    assert entered.wait(5)
    with pytest.raises(gitmem.LockTimeout):
        waiting.create(parse_path("/memories/during.md"), "x")
    release.set()
    worker.join(10)
    waiting.create(parse_path("/memories/after.md"), "x")
    assert waiting.verify().ok


READER = """
import sys, time
from gitmem.store import MemoryStore
store = MemoryStore.open(sys.argv[1], sys.argv[2])
expected = store.files()
deadline = time.time() + float(sys.argv[3])
reads = 0
while time.time() < deadline:
    store = MemoryStore.open(sys.argv[1], sys.argv[2])
    assert store.files() == expected
    reads += 1
print(reads)
"""


def test_readers_keep_working_while_gc_runs(repo_path: Path, key: str) -> None:
    store = filled(repo_path, key, files=10)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(repo_path), key, "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GITMEM_STATE_DIR": str(repo_path.parent / "reader-state")},
    )
    errors: list[BaseException] = []

    def thread_reader() -> None:
        try:
            other = MemoryStore.open(repo_path, key)
            expected = other.files()
            for _ in range(25):
                other.codec._dirs.clear()
                assert other.files() == expected
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=thread_reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for i in range(4):
        store.repo.write_blob(f"garbage {i}".encode())
        store.gc(grace=0)
    for thread in threads:
        thread.join(30)
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert int(out) > 0
    assert errors == []
    assert store.verify().ok


def test_the_gc_command(repo_path: Path, key: str) -> None:
    filled(repo_path, key)
    runner = CliRunner()
    env = {"GITMEM_KEY": key}
    result = runner.invoke(main, ["--repo", str(repo_path), "gc", "--json"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert sorted(report) == [
        "bytes_after",
        "bytes_before",
        "kept",
        "missing",
        "packed",
        "pruned",
        "removed_packs",
        "temporaries",
    ]
    assert report["packed"] > 10 and report["pruned"] == 0 and report["temporaries"] == 0
    result = runner.invoke(main, ["--repo", str(repo_path), "gc", "--grace", "0s"], env=env)
    assert result.exit_code == 0, result.output
    objects = "object" if report["packed"] == 1 else "objects"
    assert result.stdout.startswith(f"Packed {report['packed']} {objects}; pruned 0 unreferenced")
    bad = runner.invoke(main, ["--repo", str(repo_path), "gc", "--grace", "soon"], env=env)
    assert bad.exit_code == 2


# -- automatic maintenance ------------------------------------------------------------------


def test_writes_pack_loose_objects_and_merge_packs_by_themselves(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem.git import maintenance as git_maintenance

    # Thresholds of one object and two packs, so that a few writes exercise both steps.
    monkeypatch.delenv("GITMEM_GC_AUTO")
    monkeypatch.setattr(git_maintenance, "AUTO_PACK_LOOSE", 0)
    monkeypatch.setattr(git_maintenance, "AUTO_PACK_LIMIT", 2)
    monkeypatch.setattr(git_maintenance, "AUTO_CHECK_EVERY", 1)
    store = filled(repo_path, key)
    for i in range(12):
        store.insert(parse_path("/memories/d0/f0.md"), 0, f"line {i}")
        # With the redo log, objects reach the repository (as loose files) at checkpoints,
        # and maintenance looks at each.
        store.checkpoint()
    assert loose_objects(repo_path) == set()
    assert 1 <= len(packs(repo_path)) <= 3
    assert not list(repo_path.glob("gitmem-gc-*"))
    fresh = MemoryStore.open(repo_path, key)
    assert fresh.files() == store.files()
    assert fresh.verify().ok
    assert [op.seq for op in fresh.log()] == list(range(19, 0, -1))
    # Nothing reachable was lost to the merges: a full gc finds every object.
    assert set(fresh.repo.reachable()) <= set().union(
        *(_pack_index_oids(i) for i in packs(repo_path))
    )
    git_reads_the_packs(repo_path)


def test_a_merge_is_spread_over_checkpoints_and_completes(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a small budget a checkpoint (1,500 bytes, or eight times what it packed), a merge of
    the packs copies about that much at each checkpoint (no write waits for all of it), is
    carried on by the next ones, keeps up with the writes, and ends with the packs merged,
    nothing lost and no temporary files left."""
    from gitmem.git import pack

    monkeypatch.delenv("GITMEM_GC_AUTO")
    monkeypatch.setattr(git_maintenance, "AUTO_PACK_LIMIT", 3)
    monkeypatch.setattr(git_maintenance, "AUTO_MERGE_STEP", 1500)
    copied: list[tuple[int, int]] = []
    step = pack.PackMerge.step

    def counted(job: pack.PackMerge, budget: int) -> bool:
        before = job._offset
        try:
            return step(job, budget)
        finally:
            copied.append((budget, job._offset - before))

    monkeypatch.setattr(pack.PackMerge, "step", counted)
    store = filled(repo_path, key, files=3)
    reports: list[git_maintenance.MaintenanceReport] = []
    maintain = GitRepo.maintain

    def reported(repo: GitRepo, budget: int | None = None) -> git_maintenance.MaintenanceReport:
        assert budget is not None and budget >= 1500
        reports.append(maintain(repo, budget))
        return reports[-1]

    monkeypatch.setattr(GitRepo, "maintain", reported)
    for i in range(30):
        store.insert(parse_path("/memories/d0/f0.md"), 0, f"line {i}")
        store.checkpoint()
    assert any(r.deferred for r in reports) and any(r.merged_packs for r in reports)
    # A step passes its budget by one entry at most: these are a few hundred bytes each.
    assert copied and all(size < budget + 1000 for budget, size in copied)
    for i in range(60):  # the last merge started finishes
        if str(repo_path) not in git_maintenance._MERGES:
            break
        store.insert(parse_path("/memories/d0/f0.md"), 0, f"more {i}")
        store.checkpoint()
    assert str(repo_path) not in git_maintenance._MERGES
    assert len(packs(repo_path)) < 15  # of the 40 or so checkpoints'
    assert not list(repo_path.glob("gitmem-gc-*"))
    fresh = MemoryStore.open(repo_path, key)
    assert fresh.files() == store.files() and fresh.verify().ok
    assert set(fresh.repo.reachable()) <= set().union(
        *(_pack_index_oids(i) for i in packs(repo_path))
    )
    git_reads_the_packs(repo_path)


def test_a_merge_under_way_is_dropped_by_gc_and_by_a_forked_child(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITMEM_GC_AUTO")
    monkeypatch.setattr(git_maintenance, "AUTO_PACK_LIMIT", 2)
    monkeypatch.setattr(git_maintenance, "AUTO_MERGE_STEP", 1)
    monkeypatch.setattr(git_maintenance, "AUTO_MERGE_FACTOR", 0)
    store = filled(repo_path, key, files=2)
    for i in range(3):
        store.insert(parse_path("/memories/d0/f0.md"), 0, f"line {i}")
        store.checkpoint()
    job = git_maintenance._MERGES[str(repo_path)]
    [tmp] = repo_path.glob("gitmem-gc-*")
    # A child forked while the merge was under way: it starts its own and leaves the parent's
    # files alone.
    monkeypatch.setattr(job, "pid", os.getpid() + 1)
    store.insert(parse_path("/memories/d0/f0.md"), 0, "in the child")
    store.checkpoint()
    assert git_maintenance._MERGES[str(repo_path)] is not job and tmp.is_dir()
    shutil.rmtree(tmp)
    # Another process merged one of the packs this merge reads: it is dropped, not finished.
    job = git_maintenance._MERGES[str(repo_path)]
    [tmp] = repo_path.glob("gitmem-gc-*")
    other = GitRepo(repo_path)
    with other.write_lock(5.0):
        git_maintenance._MERGES.pop(str(repo_path))
        other.maintain()  # a merge of its own, at once: it removes the packs both wanted
        git_maintenance._MERGES[str(repo_path)] = job
    assert not all(idx.exists() for idx in job.sources)
    store.insert(parse_path("/memories/d0/f0.md"), 0, "after the other merge")
    store.checkpoint()
    assert git_maintenance._MERGES.get(str(repo_path)) is not job and not tmp.exists()
    store.gc(0.0)
    assert str(repo_path) not in git_maintenance._MERGES
    assert not list(repo_path.glob("gitmem-gc-*")) and len(packs(repo_path)) == 1
    assert MemoryStore.open(repo_path, key).verify().ok


def test_a_process_finishes_its_merge_when_it_exits(repo_path: Path, key: str) -> None:
    """A process that writes once (as each CLI command does) and exits with a merge under way
    finishes it at exit, after its write: its packs are merged and nothing temporary is left."""
    store = filled(repo_path, key, files=2)
    for i in range(3):
        store.insert(parse_path("/memories/d0/f0.md"), 0, f"line {i}")
        store.checkpoint()
    before = len(packs(repo_path))
    script = (
        "import sys\n"
        "from gitmem import MemoryStore, parse_path\n"
        "from gitmem.git import maintenance as m\n"
        "m.AUTO_PACK_LIMIT, m.AUTO_MERGE_STEP, m.AUTO_MERGE_FACTOR = 2, 1, 0\n"
        "store = MemoryStore.open(sys.argv[1], sys.argv[2])\n"
        "store.create(parse_path('/memories/last.md'), 'last\\n')\n"
        "store.close()\n"
        "assert m._MERGES, 'the merge should still be under way'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GITMEM_GC_AUTO"}
    subprocess.run([sys.executable, "-c", script, str(repo_path), key], check=True, env=env)
    assert len(packs(repo_path)) < before
    assert not list(repo_path.glob("gitmem-gc-*"))
    fresh = MemoryStore.open(repo_path, key)
    assert fresh.files()["/memories/last.md"] == "last\n" and fresh.verify().ok
    git_reads_the_packs(repo_path)


def test_a_damaged_pack_fails_the_merge_not_the_write(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack entry that does not match its index's CRC stops the merge (IntegrityError from
    maintain) before anything is published or removed; a write whose checkpoint tries it
    succeeds all the same."""
    from gitmem.git.pack import write_pack

    monkeypatch.delenv("GITMEM_GC_AUTO")
    monkeypatch.setattr(git_maintenance, "AUTO_PACK_LIMIT", 2)
    store = filled(repo_path, key, files=2)
    store.checkpoint()
    junk = write_pack(
        [(b"blob", os.urandom(100)) for _ in range(5)], repo_path / "objects" / "pack", repo_path
    )
    assert junk is not None
    data = bytearray(junk.with_suffix(".pack").read_bytes())
    data[-30] ^= 0xFF  # inside the last entry
    junk.with_suffix(".pack").chmod(0o600)
    junk.with_suffix(".pack").write_bytes(bytes(data))
    before = packs(repo_path)
    with pytest.raises(gitmem.IntegrityError, match="cannot be merged"):
        GitRepo(repo_path).maintain()
    assert packs(repo_path) == before and not list(repo_path.glob("gitmem-gc-*"))
    tried: list[int | None] = []
    maintain = GitRepo.maintain

    def spied(repo: GitRepo, budget: int | None = None) -> git_maintenance.MaintenanceReport:
        tried.append(budget)
        return maintain(repo, budget)

    monkeypatch.setattr(GitRepo, "maintain", spied)
    op = store.create(parse_path("/memories/after.md"), "still written\n")
    store.checkpoint()
    assert tried and junk.exists() and not list(repo_path.glob("gitmem-gc-*"))
    assert MemoryStore.open(repo_path, key).head() == op.commit


def test_no_maintenance_below_the_thresholds_or_when_turned_off(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem.git import maintenance as git_maintenance

    def checkpointed(repo: Path) -> None:  # each checkpoint publishes one pack
        store = filled(repo, key, files=3)
        for i in range(3):
            store.create(parse_path(f"/memories/c{i}.md"), f"{i}\n")
            store.checkpoint()

    monkeypatch.setattr(git_maintenance, "AUTO_PACK_LIMIT", 1)
    checkpointed(repo_path)  # GITMEM_GC_AUTO=0 (conftest)
    assert len(packs(repo_path)) >= 3
    monkeypatch.delenv("GITMEM_GC_AUTO")
    monkeypatch.setattr(git_maintenance, "AUTO_PACK_LIMIT", 10**9)
    other = repo_path.parent / "other.git"
    checkpointed(other)
    assert len(packs(other)) >= 3


def test_a_failing_maintenance_does_not_fail_the_write(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem.git import maintenance as git_maintenance
    from gitmem.git import repo as git_repo

    def full(self: git_repo.GitRepo) -> git_maintenance.MaintenanceReport:
        raise OSError(28, "No space left on device")

    store = filled(repo_path, key, files=2)
    monkeypatch.delenv("GITMEM_GC_AUTO")
    monkeypatch.setattr(git_maintenance, "AUTO_CHECK_EVERY", 1)
    monkeypatch.setattr(git_repo.GitRepo, "maintain", full)
    op = store.create(parse_path("/memories/after.md"), "still written\n")
    assert MemoryStore.open(repo_path, key).head() == op.commit


# -- refs other than gitmem's: verify and gc agree -----------------------------------------------


def _plant_ref(repo: Path, name: str, oid: str) -> None:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(oid + "\n")


def test_an_extra_ref_at_a_missing_object_is_reported_and_gc_goes_on(
    repo_path: Path, key: str
) -> None:
    store = filled(repo_path, key, files=2)
    before = store.files()
    missing = "0123456789abcdef0123456789abcdef01234567"
    _plant_ref(repo_path, "refs/tags/gone", missing)
    # A commit that exists, whose tree does not: the commit is kept, the tree cannot be.
    head = store.head()
    assert head is not None
    body = f"tree {missing}\nparent {head}\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\nx"
    orphan = str(pygit2.Repository(str(repo_path)).odb.write(ObjectType.COMMIT, body.encode()))
    _plant_ref(repo_path, "refs/remotes/elsewhere/main", orphan)
    problems = store.verify().problems
    assert problems == [
        f"the ref refs/remotes/elsewhere/main reaches object {missing}, which is missing",
        f"the ref refs/tags/gone reaches object {missing}, which is missing",
    ]
    env = {"GITMEM_KEY": key}
    verified = CliRunner().invoke(main, ["--repo", str(repo_path), "verify"], env=env)
    assert verified.exit_code == 5 and "refs/tags/gone" in verified.stdout
    collected = CliRunner().invoke(main, ["--repo", str(repo_path), "gc", "--grace", "0s"], env=env)
    assert collected.exit_code == 0, collected.output
    assert (
        collected.stdout.startswith(
            f"skipped: the ref refs/tags/gone reaches object {missing}, which is missing\n"
        )
        or f"skipped: the ref refs/tags/gone reaches object {missing}" in collected.stdout
    )
    fresh = MemoryStore.open(repo_path, key)
    assert fresh.files() == before
    assert fresh.repo.has(orphan)  # nothing that exists was lost
    assert fresh.verify().problems == problems
    again = fresh.gc(grace=0)
    assert sorted(again.missing) == sorted(problems)


def test_a_corrupt_object_behind_an_extra_ref_stops_gc_and_verify_names_it(
    repo_path: Path, key: str
) -> None:
    store = filled(repo_path, key, files=2)
    blob = store.repo.write_blob(b"someone else's")
    checkpoint_loose(store.repo)
    path = repo_path / "objects" / blob[:2] / blob[2:]
    path.chmod(0o600)
    path.write_bytes(b"not zlib")
    _plant_ref(repo_path, "refs/tags/damaged", blob)
    (problem,) = store.verify().problems
    assert problem.startswith(f"the ref refs/tags/damaged reaches a damaged object: object {blob}")
    with pytest.raises(gitmem.IntegrityError, match=blob):
        store.gc(grace=0)
