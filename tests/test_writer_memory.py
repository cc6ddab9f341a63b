"""A process that keeps writing stays flat in memory: what it keeps per write is bounded by the
store (its files, its packs), not by how many writes it made (docs/performance.md, "Costs as
history grows")."""

from __future__ import annotations

import gc
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

import gitmem
from gitmem import parse_path
from gitmem.git import maintenance as git_maintenance
from gitmem.git import pack
from gitmem.git.refs import BRANCH
from gitmem.git.wal import object_id

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/maps")


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    """What is freed is freed when it is let go, not whenever the cycle collector runs."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def mapped_packs(repo: Path) -> list[str]:
    """The files of ``repo``'s packs this process maps, removed ones marked ``(deleted)``."""
    with open("/proc/self/maps") as maps:
        return [line.split(maxsplit=5)[-1].strip() for line in maps if str(repo) in line]


def head(store: gitmem.MemoryStore) -> str:
    oid = store.repo.ref(BRANCH)
    assert oid is not None
    return oid


@linux_only
@pytest.mark.usefixtures("no_cycle_collector")
def test_merged_packs_are_let_go_at_once(
    store: gitmem.MemoryStore, repo_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_maintenance, "AUTO_MERGE_STEP", 1 << 30)  # each merge in one step
    merged = 0
    for i in range(24):
        store.insert(parse_path("/memories/log.md"), 0, f"line {i}") if i else store.create(
            parse_path("/memories/log.md"), "start\n"
        )
        store.checkpoint()
        merged += store.repo.maintain().merged_packs
        store.codec.forget()
        store.read_text("/memories/log.md")  # through the packs, mapping them
        assert store.repo.has(head(store))  # through libgit2's own database, mapping them
    assert merged
    assert mapped_packs(repo_path)
    assert [m for m in mapped_packs(repo_path) if m.endswith("(deleted)")] == []


@linux_only
@pytest.mark.usefixtures("no_cycle_collector")
def test_a_thread_that_ends_lets_go_of_the_repository(
    store: gitmem.MemoryStore, repo_path: Path
) -> None:
    store.create(parse_path("/memories/a.md"), "text\n")
    store.checkpoint()
    store.repo.handle.let_go()
    assert mapped_packs(repo_path) == []
    done: list[int] = []

    def read() -> None:
        store.codec.forget()
        done.append(len(store.read_text("/memories/a.md")))
        assert store.repo.has(head(store))
        assert mapped_packs(repo_path)

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    assert done
    assert mapped_packs(repo_path) == []


def test_rewriting_files_keeps_a_size_per_file_and_a_few_root_totals(
    store: gitmem.MemoryStore,
) -> None:
    def write(i: int) -> None:
        store.create(parse_path(f"/memories/new/c{i}.md"), f"note {i}\n")
        store.insert(parse_path("/memories/log.md"), 0, f"entry {i}")
        store.str_replace(parse_path("/memories/count.md"), f"count {i}\n", f"count {i + 1}\n")
        store.rename(parse_path(f"/memories/new/c{i}.md"), parse_path(f"/memories/old/c{i}.md"))
        store.delete(parse_path(f"/memories/old/c{i}.md"))

    store.create(parse_path("/memories/log.md"), "start\n")
    store.create(parse_path("/memories/count.md"), "count 0\n")
    for i in range(100):
        write(i)
    # Two files: their sizes; a root total per write would be 500, kept to the cache's bound.
    assert len(store.codec._sizes) == 2
    assert len(store.sizer._roots) == store.sizer._roots.budget == 64
    assert len(store.sizer._dirs) == 0


def test_a_merge_of_packs_holds_tens_of_bytes_per_entry(tmp_path: Path) -> None:
    """Automatic maintenance carries a merge over many writes, and now and then it merges the
    pack holding most of the history: what it holds per entry is arrays, not Python objects."""
    repo = tmp_path / "r.git"
    pygit2.init_repository(str(repo), bare=True)
    pack_dir = repo / "objects" / "pack"
    entries = 30_000
    sources = []
    for k in range(3):
        payloads = [b"%d-%d" % (k, i) for i in range(entries // 3)]
        idx = pack.write_pack(
            [(object_id(b"blob", p), b"blob", p) for p in payloads], pack_dir, repo
        )
        assert idx is not None
        sources.append(idx)
    tracemalloc.start()
    try:
        job = pack.PackMerge(sources, repo)
        assert not job.step(entries * pack.ENTRY_COST // 2)
        held = tracemalloc.get_traced_memory()[0]
        while not job.step(1 << 30):
            pass
        job.finish(pack_dir)
    finally:
        tracemalloc.stop()
    # Two read buffers of a MiB (the source's read-ahead and the new pack's) besides.
    assert (held - (2 << 20)) / entries < 80, held
