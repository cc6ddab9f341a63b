"""gitmem.workers: the shared pool that decodes a large file's chunks side by side."""

from __future__ import annotations

import multiprocessing
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_repo import published

from gitmem import MemoryStore, workers
from gitmem.errors import IntegrityError
from gitmem.format import COMPRESS_ZLIB, ROLE_CHUNK, ROLE_HEADER, chunk_entry, encode_header
from gitmem.git.objects import BLOB_MODE, TreeEntry
from gitmem.paths import parse


@pytest.fixture
def two_threads() -> Iterator[None]:
    """A pool thread beside the caller's, whatever this machine has."""
    saved = workers.threads
    workers.threads = 1
    try:
        yield
    finally:
        workers.threads = saved


def test_results_keep_the_order_of_the_items(two_threads: None) -> None:
    seen: set[str] = set()

    def square(x: int) -> int:
        seen.add(threading.current_thread().name)
        return x * x

    assert workers.map_ordered(square, range(500)) == [x * x for x in range(500)]
    assert workers.map_ordered(square, []) == []
    assert workers.map_ordered(square, [3]) == [9]


def test_the_pool_takes_part(two_threads: None) -> None:
    names: set[str] = set()
    gate = threading.Barrier(2, timeout=10)

    def meet(_: int) -> None:
        # Two items each wait for a second thread: done only if the pool ran one of them.
        names.add(threading.current_thread().name)
        gate.wait()

    workers.map_ordered(meet, range(2))
    assert any(name.startswith("gitmem-read") for name in names)


def test_the_earliest_failure_is_raised_after_every_item_ran(two_threads: None) -> None:
    ran: list[int] = []

    def check(x: int) -> int:
        ran.append(x)
        if x in (7, 3, 90):
            raise ValueError(f"item {x}")
        return x

    with pytest.raises(ValueError, match="item 3"):
        workers.map_ordered(check, range(100))
    assert sorted(ran) == list(range(100))


def test_no_pool_when_told_or_when_not_parallel() -> None:
    saved = workers.threads
    try:
        workers.threads = 0
        names = workers.map_ordered(lambda _: threading.current_thread().name, range(50))
        assert set(names) == {threading.current_thread().name}
    finally:
        workers.threads = saved
    names = workers.map_ordered(
        lambda _: threading.current_thread().name, range(50), parallel=False
    )
    assert set(names) == {threading.current_thread().name}


def _in_child(queue: multiprocessing.Queue[list[int]]) -> None:
    queue.put(workers.map_ordered(lambda x: x + 1, range(100)))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_gets_a_pool_of_its_own(two_threads: None) -> None:
    workers.map_ordered(lambda x: x, range(10))  # the parent's pool exists, with its thread
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[int]] = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    try:
        # With the parent's pool (whose thread the child lacks) this would never finish.
        assert queue.get(timeout=30) == list(range(1, 101))
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def big_text(size: int) -> str:
    lines = (f"line {i}: {'lorem ipsum dolor sit amet ' * (i % 7 + 1)}\n" for i in range(size))
    return "".join(lines)[:size]


def test_a_large_file_reads_the_same_on_one_thread_and_several(
    tmp_path: Path, key: str, two_threads: None
) -> None:
    store = MemoryStore.open(tmp_path / "s.git", key, create=True, state_dir=tmp_path / "st")
    path, text = parse("/memories/big.md"), big_text(900_000)
    store.create(path, text)
    assert store.read_text(path) == text
    workers.threads = 0
    store.codec.chunker.forget()
    assert store.read_text(path) == text


def test_a_damaged_chunk_of_a_large_file_is_named(
    tmp_path: Path, key: str, two_threads: None
) -> None:
    store = MemoryStore.open(tmp_path / "s.git", key, create=True, state_dir=tmp_path / "st")
    path = parse("/memories/big.md")
    store.create(path, big_text(900_000))
    node = store.snapshot().lookup(path)
    assert node is not None
    chunks = [e.oid for e in store.repo.read_tree(node.oid) if e.name != "h"]
    assert len(chunks) > 8
    # Two chunks swapped for each other's bytes under their own ids (hash checks stand aside).
    published(store.repo.path)  # the chunks into the repository, as loose files
    victim = store.repo.path / "objects" / chunks[5][:2] / chunks[5][2:]
    other = store.repo.path / "objects" / chunks[2][:2] / chunks[2][2:]
    victim.chmod(0o600)
    victim.write_bytes(other.read_bytes())
    reader = MemoryStore.open(tmp_path / "s.git", key, state_dir=tmp_path / "st")
    with pytest.raises(IntegrityError, match=chunks[5]):
        reader.read_text(path)


def test_chunks_that_do_not_inflate_name_the_first_of_them(
    tmp_path: Path, key: str, two_threads: None
) -> None:
    """Authentic chunks (sealed with the store's key) whose bodies are not zlib: the error
    names the earliest, whichever thread inflated it."""
    store = MemoryStore.open(tmp_path / "s.git", key, create=True, state_dir=tmp_path / "st")
    body = b"x" * 40_000
    good = bytes([COMPRESS_ZLIB]) + zlib.compress(body)
    bad = bytes([COMPRESS_ZLIB]) + b"not zlib at all"
    sealed = [
        store.repo.write_blob(store.keys.seal_blob(bad if i in (4, 9, 17) else good, ROLE_CHUNK))
        for i in range(20)
    ]
    header = store.repo.write_blob(
        store.keys.seal_blob(encode_header(20 * len(body), 20), ROLE_HEADER)
    )
    entries = [TreeEntry(chunk_entry(i), oid, BLOB_MODE) for i, oid in enumerate(sealed)]
    tree = store.repo.write_tree([*entries, TreeEntry("h", header, BLOB_MODE)])
    with pytest.raises(IntegrityError, match=f"chunk {sealed[4]} does not decompress"):
        store.codec.read_file(tree)


def test_a_pool_that_refuses_work_leaves_it_to_the_caller(
    two_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, _ = workers._executor()
    assert pool is not None

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    monkeypatch.setattr(pool, "submit", refuse)
    assert workers.map_ordered(lambda x: -x, range(40)) == [-x for x in range(40)]


def test_threads_reading_large_files_share_the_pool(
    tmp_path: Path, key: str, two_threads: None
) -> None:
    """Readers on several threads, each handing chunks to the one pool, while a writer edits."""
    store = MemoryStore.open(tmp_path / "s.git", key, create=True, state_dir=tmp_path / "st")
    paths = [parse(f"/memories/big{i}.md") for i in range(2)]
    texts = [big_text(400_000 + i) for i in range(2)]
    for path, text in zip(paths, texts, strict=True):
        store.create(path, text)
    versions = {paths[0]: {texts[0]}, paths[1]: {texts[1]}}
    failures: list[BaseException] = []

    def read(index: int) -> None:
        reader = MemoryStore.open(tmp_path / "s.git", key, state_dir=tmp_path / "st")
        try:
            for _ in range(8):
                path = paths[index % 2]
                reader.codec.chunker.forget()
                got = reader.read_text(path)
                assert got in versions[path]
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)

    def write() -> None:
        text, marker = texts[0], "line 1:"
        for n in range(4):
            new_marker = f"line 1 ({n}):"
            text = text.replace(marker, new_marker, 1)
            versions[paths[0]].add(text)  # before the write, so a reader may already see it
            store.str_replace(paths[0], marker, new_marker)
            marker = new_marker

    threads = [threading.Thread(target=read, args=(i,)) for i in range(4)]
    threads.append(threading.Thread(target=write))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures
    assert not any(thread.is_alive() for thread in threads)
