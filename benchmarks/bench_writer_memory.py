"""How a process that keeps writing grows in memory: its resident set after each stage of writes.

    python benchmarks/bench_writer_memory.py                  # 20,000 writes, a row every 2,000
    python benchmarks/bench_writer_memory.py --writes 30000 --every 5000
    python benchmarks/bench_writer_memory.py --writes 10000 --trace   # also the Python heap

One process opens a fresh store and makes ``--writes`` writes through the memory tool (create,
str_replace, insert, rename and delete in turn, as ``bench_commands.py --long`` does: the files
it writes stay few and small, so only the history grows). After the first stage of writes and
each later one it prints, in MB: its resident set (RSS); the anonymous part of it (``anon``:
memory that is the process's own, the Python heap, malloc's arenas, libgit2's caches); the
file-backed rest (``file``: mapped files, the interpreter and libraries and the store's pack
indexes and packs, clean pages the kernel may drop and read again); libgit2's object cache; the
packs whose index or data it maps (removed ones in brackets); and the growth of ``anon`` per
write over the stage; at the end, the peak resident set too. With ``--trace``, also the Python
heap (tracemalloc; slower) and the 12 lines of Python that hold the most memory more after the
last stage than after the first.

The workload's own log file grows by a line every five writes (about 8 bytes a write): that
much growth is the data's, not the writer's.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

import pygit2

import gitmem
from gitmem.tool import GitMemoryTool


def memory() -> tuple[int, int]:
    """This process's resident set and the anonymous part of it, in bytes (Linux)."""
    fields: dict[str, int] = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if rest.strip().endswith("kB"):
            fields[name] = int(rest.split()[0]) * 1024
    return fields["Rss"], fields["Anonymous"]


def peak_rss() -> int:
    """The largest this process's resident set has been, in bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise LookupError("no VmHWM in /proc/self/status")


def mapped_packs(store: Path) -> tuple[int, int]:
    """How many of ``store``'s pack files this process maps, and how many of them are removed."""
    packs: dict[str, bool] = {}  # the pack's name without its suffix: removed
    for line in Path("/proc/self/maps").read_text().splitlines():
        name = line.split(maxsplit=5)[-1]
        if str(store) in name and (".pack" in name or ".idx" in name):
            stem = name.split(".pack")[0].split(".idx")[0]
            packs[stem] = packs.get(stem, False) or name.endswith("(deleted)")
    return len(packs), sum(packs.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=20_000)
    parser.add_argument("--every", type=int, default=2_000, help="writes per stage")
    parser.add_argument("--trace", action="store_true", help="the Python heap (tracemalloc)")
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
        first_snapshot = None
        rows: list[tuple[int, int]] = []  # (writes, anon) after each stage
        rss, anon = memory()
        print(f"at start: RSS {rss / 1e6:.1f} MB, anon {anon / 1e6:.1f} MB")
        heading = f"{'writes':>8} {'RSS':>7} {'anon':>7} {'file':>7} {'git cache':>9}"
        heading += f" {'packs':>7} {'anon/write':>10}" + (f" {'Python':>7}" if args.trace else "")
        print(heading)
        for i in range(args.writes):
            result = tool.call(bench.long_call(i))
            assert isinstance(result, str) and not result.startswith("Error"), result
            done = i + 1
            if done % args.every and done != args.writes:
                continue
            rss, anon = memory()
            mapped, removed = mapped_packs(path)
            per_write = (
                f"{(anon - rows[-1][1]) / (done - rows[-1][0]):>10,.0f}" if rows else f"{'':>10}"
            )
            row = f"{done:>8,} {rss / 1e6:>7.1f} {anon / 1e6:>7.1f} {(rss - anon) / 1e6:>7.1f}"
            row += f" {pygit2.settings.cached_memory[0] / 1e6:>9.1f}"
            row += f" {f'{mapped} [{removed}]':>7} {per_write}"
            if args.trace:
                row += f" {tracemalloc.get_traced_memory()[0] / 1e6:>7.1f}"
            print(row, flush=True)
            rows.append((done, anon))
            if args.trace and first_snapshot is None:
                first_snapshot = tracemalloc.take_snapshot()
        elapsed = time.perf_counter() - started
        print(
            f"after {args.writes:,} writes ({elapsed:.0f} s): RSS {rss / 1e6:.1f} MB, "
            f"anon {anon / 1e6:.1f} MB, {anon / rows[0][1]:.2f}x the anon after the first "
            f"{rows[0][0]:,}; peak RSS "
            f"{peak_rss() / 1e6:.1f} MB"
        )
        if first_snapshot is not None:
            last = tracemalloc.take_snapshot()
            for stat in last.compare_to(first_snapshot, "lineno")[:12]:
                print(stat)
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
