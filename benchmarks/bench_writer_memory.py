"""How a process that keeps writing grows in memory: its resident set after each stage of writes.

    python benchmarks/bench_writer_memory.py                  # 20,000 writes, RSS every 2,000
    python benchmarks/bench_writer_memory.py --writes 100000 --every 10000
    python benchmarks/bench_writer_memory.py --writes 10000 --trace   # also what grew, by line

One process opens a fresh store and makes ``--writes`` writes through the memory tool (create,
str_replace, insert, rename and delete in turn, as ``bench_commands.py --long`` does: the files
it writes stay few and small, so only the history grows). It prints its resident set size after
the first stage of writes and after each later one, each stage's growth per write, and the last
figure over the first. With ``--trace``, the 12 lines of Python that hold the most memory more
after the last stage than after the first (tracemalloc; slower).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

import gitmem
from gitmem.tool import GitMemoryTool


def rss_bytes() -> int:
    """This process's resident set size now (Linux), else its peak."""
    try:
        fields = Path("/proc/self/statm").read_text().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=20_000)
    parser.add_argument("--every", type=int, default=2_000, help="writes per stage")
    parser.add_argument("--trace", action="store_true", help="what grew, by line (tracemalloc)")
    parser.add_argument("--dir", type=Path, default=None, help="where to make the store")
    args = parser.parse_args(argv)
    import bench_commands as bench  # run as a script, its sibling is importable

    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        path = Path(scratch) / "store.git"
        store = gitmem.MemoryStore.init(
            path, gitmem.generate_key(), state_dir=Path(scratch) / "state"
        )
        tool = GitMemoryTool(store)
        for call in (
            {"command": "create", "path": "/memories/run.md", "file_text": bench.note(0)},
            {"command": "create", "path": "/memories/run-log.md", "file_text": "start\n"},
        ):
            tool.call(call)
        if args.trace:
            tracemalloc.start(4)
        started = time.perf_counter()
        first_rss = 0
        first_snapshot = None
        previous = rss_bytes()
        print(
            f"{'writes':>8} {'RSS MB':>8} {'bytes/write':>12}  (at start: {previous / 1e6:.1f} MB)"
        )
        for i in range(args.writes):
            result = tool.call(bench.long_call(i))
            assert isinstance(result, str) and not result.startswith("Error"), result
            done = i + 1
            if done % args.every and done != args.writes:
                continue
            now = rss_bytes()
            print(
                f"{done:>8,} {now / 1e6:>8.1f} {(now - previous) / args.every:>12,.0f}", flush=True
            )
            previous = now
            if not first_rss:
                first_rss = now
                if args.trace:
                    first_snapshot = tracemalloc.take_snapshot()
        elapsed = time.perf_counter() - started
        print(
            f"after {args.writes:,} writes ({elapsed:.0f} s): {previous / 1e6:.1f} MB, "
            f"{previous / first_rss:.2f}x the RSS after the first {args.every:,}"
        )
        if first_snapshot is not None:
            last = tracemalloc.take_snapshot()
            for stat in last.compare_to(first_snapshot, "lineno")[:12]:
                print(stat)
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
