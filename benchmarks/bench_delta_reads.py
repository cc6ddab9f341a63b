"""What delta chunks (format 6) cost a cold read of a file edited many times.

For each edited shape of ``bench_history_size.py`` (a ticked checklist, an append-only log, a
large file rewritten in places) two stores are built with the same operations: one as gitmem
writes (changed chunks of files of 8 KiB or more stored as deltas), one with deltas turned off
(``tree.DELTA_MIN_FILE`` raised past every file). Both are packed with ``gitmem gc``; then the
last version of the edited file is read with nothing cached (``TreeCodec.read_file(fresh=True)``
after ``forget``), the two stores alternating, and the medians compared with the number of
objects each file tree names.

    python benchmarks/bench_delta_reads.py
    python benchmarks/bench_delta_reads.py --reads 50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pygit2
from bench_history_size import FAMILY, apply_gitmem, workload

import gitmem
from gitmem import tree
from gitmem.paths import parse
from gitmem.store import MemoryStore

_EDITED = ("checklist", "log", "rewrite")


def build(work: Path, shape: str, count: int, deltas: bool) -> tuple[MemoryStore, str]:
    """A packed store of ``shape``'s operations, reopened cold; and the edited file's tree id."""
    ops = list(workload(count, 0, shape=shape))
    saved = tree.DELTA_MIN_FILE
    tree.DELTA_MIN_FILE = saved if deltas else 1 << 62
    try:
        key = gitmem.generate_key()
        store = MemoryStore.open(work / "g.git", key, create=True, state_dir=work / "state")
        apply_gitmem(store, ops)
        store.gc()
    finally:
        tree.DELTA_MIN_FILE = saved
    reader = MemoryStore.open(work / "g.git", key, state_dir=work / "state")
    node = reader.snapshot().lookup(parse(ops[-1].path))
    assert node is not None
    return reader, node.oid


def cold_read(store: MemoryStore, oid: str) -> float:
    store.codec.forget()
    started = time.perf_counter()
    store.codec.read_file(oid, fresh=True)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=30, help="cold reads of each file")
    args = parser.parse_args(argv)
    pygit2.settings.enable_fsync_gitdir(False)
    work = Path(tempfile.mkdtemp(prefix="gitmem-bench-"))
    print("| shape | file | objects read: deltas | whole | cold read: deltas | whole | ratio |")
    print("|---|---|---|---|---|---|---|")
    for shape, _, count, _ in FAMILY:
        if shape not in _EDITED:
            continue
        with_deltas, delta_oid = build(work / f"{shape}-deltas", shape, count, True)
        whole, whole_oid = build(work / f"{shape}-whole", shape, count, False)
        size = len(whole.codec.read_file(whole_oid))
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(args.reads):
            times[0].append(cold_read(with_deltas, delta_oid))
            times[1].append(cold_read(whole, whole_oid))
        a, b = (statistics.median(t) * 1000 for t in times)
        objects = [
            len(s.repo.read_tree(o)) for s, o in ((with_deltas, delta_oid), (whole, whole_oid))
        ]
        print(
            f"| `{shape}` | {size:,} B | {objects[0]} | {objects[1]} | {a:.2f} ms | {b:.2f} ms "
            f"| **{a / b:.2f}x** |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
