"""A split directory's repointing write (``buckets.repointed``) timed cold, as a command meets it.

    python benchmarks/bench_repoint_cold.py                 # 10,000 entries, one name a write
    python benchmarks/bench_repoint_cold.py --names 2       # two names (a rename's two paths)
    python benchmarks/bench_repoint_cold.py --calls 100 --rounds 1 --thrash-mb 2 \\
        # under callgrind, counting only the timed calls (the operator.call around them):
    valgrind --tool=callgrind --cache-sim=yes --LL=524288,8,64 --collect-atstart=no \\
        --toggle-collect=_operator_call python benchmarks/bench_repoint_cold.py ...

Between two writes of the directory a command does other work (and, in bench_commands.py, three
other tools do theirs), so the write finds its trees, bucket dicts and code out of the CPU's
caches. This writes ``--thrash-mb`` MB and sums a list of 200,000 ints between calls, then
times one ``repointed`` of ``--names`` of a few names (each pointed at a new tree), keeping the
result as the next base and dropping the version before, as ``TreeCodec.write_dir`` does. The
one-tree write of a 15-entry directory (``edit`` and ``store``) is timed the same way beside it.
Names and ids come from a seeded generator, so that callgrind's counts repeat exactly: its
instruction and cache-miss counts compare two versions where timings on a shared machine cannot
(``PYTHONPATH=<checkout>``). Prints medians in microseconds.
"""

from __future__ import annotations

import argparse
import base64
import gc
import operator
import random
import statistics
import time

from gitmem import buckets
from gitmem.git import wal

EXTRA = (b"gitmem", b"100644 gitmem\0" + bytes(20))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10000, help="entries of the directory")
    parser.add_argument("--names", type=int, default=1, help="names repointed per write")
    parser.add_argument("--calls", type=int, default=400, help="writes timed per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--thrash-mb", type=int, default=2, help="MB written between writes")
    args = parser.parse_args()
    rng = random.Random(7)

    def names(count: int) -> list[str]:
        return [
            "d" + base64.urlsafe_b64encode(b"\x01" + rng.randbytes(40)).decode().rstrip("=")
            for _ in range(count)
        ]

    written: dict[str, tuple[bytes, bytes]] = {}

    def write_tree(data: bytes) -> str:  # as GitRepo._store with the redo log
        oid = wal.object_id(b"tree", data)
        if oid not in written:
            written[oid] = (b"tree", data)
        return oid

    junk = bytearray(args.thrash_mb << 20)
    ints = list(range(200000))

    def thrash() -> None:
        junk[::64] = b"\1" * (len(junk) // 64)
        sum(ints)
        written.clear()

    big, small = names(args.entries), names(15)

    def step(box: list[buckets.Shape], pointed: list[tuple[str, str]]) -> None:
        made = buckets.repointed(box[0], pointed, lambda oid: [], write_tree, EXTRA)
        assert made is not None
        box[0] = made  # the version before is dropped here

    gc.disable()
    for _ in range(args.rounds):
        box = [buckets.build(buckets.serialized(raw, rng.randbytes(20).hex()) for raw in big)]
        buckets.store(box[0], write_tree, EXTRA)
        one = buckets.build(buckets.serialized(raw, rng.randbytes(20).hex()) for raw in small)
        buckets.store(one, write_tree, EXTRA)
        hot = big[: 2 * args.names]
        split, flat = [], []
        for i in range(args.calls):
            thrash()
            pointed = [(hot[2 * k + i % 2], rng.randbytes(20).hex()) for k in range(args.names)]
            started = time.perf_counter_ns()
            operator.call(step, box, pointed)
            split.append(time.perf_counter_ns() - started)
            thrash()
            victim = small[i % 3]
            started = time.perf_counter_ns()
            edited = buckets.edit(one, [victim], [(victim, rng.randbytes(20).hex())], lambda o: [])
            buckets.store(edited, write_tree, EXTRA)
            one = edited
            flat.append(time.perf_counter_ns() - started)
        a, b = statistics.median(split) / 1e3, statistics.median(flat) / 1e3
        print(f"split directory {a:.1f} us, one-tree directory {b:.1f} us, difference {a - b:.1f}")


if __name__ == "__main__":
    main()
