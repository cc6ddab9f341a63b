"""Figures (2) and (3): a 1 MiB file under content-defined chunking vs stored as one chunk.

(2) The file is edited in the middle 100 times (``str_replace`` of a word between 40% and 60%
    of the file); the repository's growth is compared with what the same 100 edits cost when
    every version is stored whole (one chunk), before and after ``gitmem gc``.
(3) Reading the file (``MemoryStore.read_text``) and writing one small edit (``str_replace``)
    are timed in the same process for both ways of storing it, alternating, best of N.

"One chunk" is gitmem with ``Chunker.pieces`` replaced by a function returning the whole file,
in the same process: everything else (compression, encryption, git) is the same code.

    python benchmarks/bench_chunking.py            # 100 edits, 1 MiB
    python benchmarks/bench_chunking.py --edits 20 --reps 5

fsync stays on (it is part of a write's cost), so write times are wall-clock medians; CPU
times are shown beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import gitmem
from gitmem import chunking
from gitmem.paths import parse
from gitmem.store import MemoryStore

sys.path.insert(0, str(Path(__file__).parent))
from bench_history_size import Words, object_bytes

PATH = parse("/memories/big.md")
_REAL_PIECES = chunking.Chunker.pieces


def _one_piece(self: chunking.Chunker, data: bytes) -> list[chunking.Piece]:
    return [chunking.Piece(data, None)] if data else []


@contextlib.contextmanager
def one_chunk(enabled: bool) -> Iterator[None]:
    """Store files as one chunk (the pre-chunking form) while the block runs."""
    chunking.Chunker.pieces = _one_piece if enabled else _REAL_PIECES  # type: ignore[method-assign]
    try:
        yield
    finally:
        chunking.Chunker.pieces = _REAL_PIECES  # type: ignore[method-assign]


def make_text(size: int, seed: int = 1) -> str:
    """``size`` bytes of pseudo-English text in paragraphs (ASCII)."""
    words = Words(random.Random(seed))
    out, total = [], 0
    while total < size:
        paragraph = words.text(600) + "\n\n"
        out.append(paragraph)
        total += len(paragraph)
    return "".join(out)[:size]


# A fixed key, so that the chunk boundaries (and the figures) are the same run after run.
KEY = gitmem.crypto.encode_key(bytes(range(32)))


def new_store(root: Path, name: str, text: str, one: bool) -> MemoryStore:
    store = MemoryStore.open(
        root / f"{name}.git", KEY, create=True, state_dir=root / f"{name}-state"
    )
    with one_chunk(one):
        store.create(PATH, text)
        if not one:
            count = len(store.repo.read_tree(store.snapshot().lookup(PATH).oid)) - 1  # type: ignore[union-attr]
            print(f"    ({name}: {count} chunks)")
    return store


def edit_positions(text: str, count: int, seed: int = 2) -> Iterator[tuple[str, str]]:
    """(old, new) pairs: a unique 24-byte span between 40% and 60% of the file, uppercased."""
    rnd = random.Random(seed)
    produced = 0
    while produced < count:
        at = rnd.randrange(len(text) * 2 // 5, len(text) * 3 // 5)
        old = text[at : at + 24]
        if text.count(old) != 1 or old.upper() == old:
            continue
        new = old.upper()
        text = text.replace(old, new)
        produced += 1
        yield old, new


def growth(root: Path, text: str, edits: int) -> None:
    loose: dict[str, int] = {}
    packed: dict[str, int] = {}
    for name in ("one", "cdc"):
        store = new_store(root, f"grow-{name}", text, name == "one")
        store.gc(grace=0)
        before = object_bytes(store.path)
        with one_chunk(name == "one"):
            for old, new in edit_positions(text, edits):
                store.str_replace(PATH, old, new)
        loose[name] = object_bytes(store.path) - before
        store.gc(grace=0)
        packed[name] = object_bytes(store.path) - before
    print(f"(2) {edits} edits in the middle of a {len(text):,}-byte file: the repository grew by")
    print(f"    loose: chunked {loose['cdc']:,} B, one chunk {loose['one']:,} B")
    print(f"    after gitmem gc: chunked {packed['cdc']:,} B, one chunk {packed['one']:,} B")
    print(
        f"    chunked / whole copies: {loose['cdc'] / loose['one']:.1%} loose, "
        f"{packed['cdc'] / packed['one']:.1%} packed (target <= 5%); "
        f"{loose['cdc'] / (edits * len(text)):.1%} of {edits} uncompressed copies"
    )


def best_of(reps: int, fns: dict[str, Callable[[], object]]) -> dict[str, tuple[float, float]]:
    """Alternate the functions ``reps`` times: (min CPU seconds, median wall seconds) each."""
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    wall: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.thread_time()
            fn()
            cpu[name].append(time.thread_time() - c0)
            wall[name].append(time.perf_counter() - t0)
    return {k: (min(cpu[k]), statistics.median(wall[k])) for k in fns}


def speed(root: Path, text: str, reps: int) -> None:
    stores = {
        name: new_store(root, f"speed-{name}", text, name == "one") for name in ("one", "cdc")
    }

    def reader(name: str) -> Callable[[], object]:
        store = stores[name]

        def read() -> object:
            # A cold read: no cached listings, sizes or remembered files in the store object.
            store.codec._dirs.clear()
            store.codec._sizes.clear()
            store.codec.chunker.forget()
            with one_chunk(name == "one"):
                return store.read_text(PATH)

        return read

    edits = {name: edit_positions(text, reps * 2, seed=3 + i) for i, name in enumerate(stores)}

    def writer(name: str) -> Callable[[], object]:
        def write() -> object:
            old, new = next(edits[name])
            with one_chunk(name == "one"):
                return stores[name].str_replace(PATH, old, new)

        return write

    for read in (reader(name) for name in stores):
        read()  # warm up
    reads = best_of(reps * 4, {name: reader(name) for name in stores})
    writes = best_of(reps, {name: writer(name) for name in stores})
    for store in stores.values():
        store.gc(grace=0)
    packed = best_of(reps * 4, {name: reader(name) for name in stores})
    for label, result in (
        ("read a 1 MiB file", reads),
        ("write one small edit", writes),
        ("read it after gc", packed),
    ):
        (one_cpu, one_wall), (cdc_cpu, cdc_wall) = result["one"], result["cdc"]
        print(
            f"(3) {label}: chunked {cdc_cpu * 1e3:.2f} ms CPU / {cdc_wall * 1e3:.2f} ms wall, "
            f"one chunk {one_cpu * 1e3:.2f} ms CPU / {one_wall * 1e3:.2f} ms wall: "
            f"{cdc_cpu / one_cpu:.2f}x CPU, {cdc_wall / one_wall:.2f}x wall (target <= 1.2x)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args(argv)
    text = make_text(args.size)
    params = chunking.params_for(len(text))
    print(
        f"file: {len(text):,} bytes; body chunks {params}; "
        f"tail chunks {chunking.tail_params(params)}"
    )
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-") as tmp:
        growth(Path(tmp), text, args.edits)
        speed(Path(tmp), text, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
