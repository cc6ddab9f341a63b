"""Figures (2) and (3): a 1 MiB file under content-defined chunking vs stored as one chunk.

(2) The file is edited in the middle 100 times (``str_replace`` of a word between 40% and 60%
    of the file); the repository's growth is compared with what the same 100 edits cost when
    every version is stored whole (one chunk), before and after ``gitmem gc``. Each store has
    its own random chunker key, and so its own chunk boundaries: the figure is given as the
    median and range over several stores.
(3) Writing one small edit (``str_replace``) is timed for both ways of storing the file,
    alternating, in this process; cold reads (``MemoryStore.read_text``) are timed in several
    fresh processes, the arms alternating, and the figure is the median ratio of reads made
    moments apart. Reads are also timed with chunks decoded on the calling thread alone (a
    large file's chunks are otherwise decoded on several threads, see ``gitmem.workers``).
    CPU times are the whole process's, every thread included.

"One chunk" is gitmem with ``Chunker.pieces`` replaced by a function returning the whole file,
in the same process: everything else (compression, encryption, git) is the same code.

    python benchmarks/bench_chunking.py            # 100 edits, 1 MiB
    python benchmarks/bench_chunking.py --edits 20 --reps 5 --procs 3

fsync stays on (it is part of a write's cost).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import gitmem
from gitmem import chunking, workers
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


def grown(root: Path, name: str, text: str, edits: int, one: bool) -> tuple[int, int]:
    """Bytes the repository grows by over ``edits`` mid-file edits: (loose, after gitmem gc)."""
    store = new_store(root, name, text, one)
    store.gc(grace=0)
    before = object_bytes(store.path)
    with one_chunk(one):
        for old, new in edit_positions(text, edits):
            store.str_replace(PATH, old, new)
    loose = object_bytes(store.path) - before
    store.gc(grace=0)
    return loose, object_bytes(store.path) - before


def growth(root: Path, text: str, edits: int, keys: int) -> None:
    """Figure (2) for ``keys`` stores (each store has its own random chunker key)."""
    one_loose, one_packed = grown(root, "grow-one", text, edits, one=True)
    loose, packed = [], []
    for k in range(keys):
        got = grown(root, f"grow-cdc{k}", text, edits, one=False)
        loose.append(got[0] / one_loose)
        packed.append(got[1] / one_packed)
    med = statistics.median
    print(f"(2) {edits} edits in the middle of a {len(text):,}-byte file: the repository grew by")
    print(f"    one chunk: {one_loose:,} B loose, {one_packed:,} B after gitmem gc")
    print(
        f"    chunked / whole copies over {keys} store keys: median {med(loose):.1%} loose "
        f"({min(loose):.1%}-{max(loose):.1%}), {med(packed):.1%} after gc "
        f"({min(packed):.1%}-{max(packed):.1%}) (target <= 5%)"
    )


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process, every thread included) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def cold_reader(store: MemoryStore) -> Callable[[], object]:
    def read() -> object:
        # A cold read: no cached listings, sizes or remembered files in the store object.
        store.codec.forget()
        return store.read_text(PATH)

    return read


# The arms a read worker times, in turn, each round: "serial" is the chunked file decoded on
# the calling thread alone (gitmem.workers.threads = 0).
ARMS = ("one", "cdc", "serial")


def read_worker(root: Path, rounds: int) -> None:
    """Time cold reads of both stores under ``root``, arms alternating; print JSON samples."""
    stores = {
        name: MemoryStore.open(root / f"speed-{name}.git", KEY, state_dir=root / f"{name}-state")
        for name in ("one", "cdc")
    }
    readers = {"one": cold_reader(stores["one"]), "cdc": cold_reader(stores["cdc"])}
    samples: dict[str, list[tuple[float, float]]] = {arm: [] for arm in ARMS}
    for round_ in range(rounds + 2):  # two warm-up rounds, not kept
        for arm in ARMS:
            workers.threads = 0 if arm == "serial" else None
            sample = timed(readers["one" if arm == "one" else "cdc"])
            if round_ >= 2:
                samples[arm].append(sample)
    print(json.dumps(samples))


# glibc's malloc serves a large block by mmap (fresh pages: page faults) until a free raises
# its threshold; a process that has run for a while, and grown its heap, serves the one-chunk
# read's megabyte-sized buffers from the heap instead and reads it faster. These settings put a
# fresh process in that state from the start (other C libraries ignore them).
WARM_HEAP = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


def read_figures(
    root: Path, procs: int, rounds: int, env: dict[str, str]
) -> dict[str, dict[str, list[float]]]:
    """Per-round ratios to the one-chunk read (wall and CPU), from ``procs`` fresh processes.

    Each process runs the arms alternately, so a ratio compares reads made moments apart.
    """
    ratios: dict[str, dict[str, list[float]]] = {
        arm: {"wall": [], "cpu": [], "proc": []} for arm in ARMS[1:]
    }
    for _ in range(procs):
        out = subprocess.run(
            [sys.executable, __file__, "--read-worker", str(root), "--rounds", str(rounds)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        ).stdout
        samples = json.loads(out)
        for arm in ARMS[1:]:
            pairs = list(zip(samples[arm], samples["one"], strict=True))
            walls = [a[0] / b[0] for a, b in pairs]
            ratios[arm]["wall"] += walls
            ratios[arm]["cpu"] += [a[1] / b[1] for a, b in pairs]
            ratios[arm]["proc"].append(statistics.median(walls))
    return ratios


def speed(root: Path, text: str, reps: int, procs: int) -> None:
    stores = {
        name: new_store(root, f"speed-{name}", text, name == "one") for name in ("one", "cdc")
    }
    edits = {name: edit_positions(text, reps * 2, seed=3 + i) for i, name in enumerate(stores)}
    write_ratios: dict[str, list[float]] = {"wall": [], "cpu": []}
    for _ in range(reps):
        times = {}
        for name, store in stores.items():
            old, new = next(edits[name])
            with one_chunk(name == "one"):
                times[name] = timed(lambda: store.str_replace(PATH, old, new))  # noqa: B023
        write_ratios["wall"].append(times["cdc"][0] / times["one"][0])
        write_ratios["cpu"].append(times["cdc"][1] / times["one"][1])
    med = statistics.median
    print(
        f"(3) write one small edit, chunked / one chunk, median of {reps} pairs: "
        f"{med(write_ratios['wall']):.2f}x wall, {med(write_ratios['cpu']):.2f}x CPU "
        "(target <= 1.2x)"
    )
    print(f"(3) reads, chunked / one chunk: median of the ratios of {reps * 2} pairs of reads in")
    print(f"    each of {procs} fresh processes (range: the processes' medians); CPU = all threads")
    for packed in (False, True):
        if packed:
            for store in stores.values():
                store.gc(grace=0)
        for heap, env in (("fresh heap", {}), ("warm heap", WARM_HEAP)):
            ratios = read_figures(root, procs, reps * 2, env)
            for arm, what in (("cdc", "chunked"), ("serial", "one thread")):
                got = ratios[arm]
                print(
                    f"    {'packed' if packed else 'loose'}, {heap}, {what}: "
                    f"{med(got['wall']):.2f}x wall ({min(got['proc']):.2f}-"
                    f"{max(got['proc']):.2f}), {med(got['cpu']):.2f}x CPU"
                    + ("  (target <= 1.2x)" if arm == "cdc" else "")
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--keys", type=int, default=5, help="stores (chunker keys) for (2)")
    parser.add_argument("--procs", type=int, default=5, help="fresh processes timing reads")
    parser.add_argument("--read-worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=30, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.read_worker:
        read_worker(args.read_worker, args.rounds)
        return 0
    text = make_text(args.size)
    params = chunking.params_for(len(text))
    print(
        f"file: {len(text):,} bytes; body chunks {params}; "
        f"tail chunks {chunking.tail_params(params)}"
    )
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-") as tmp:
        growth(Path(tmp), text, args.edits, args.keys)
        speed(Path(tmp), text, args.reps, args.procs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
