"""What a durable write's flush costs: the redo log against two syncfs, in one process.

    python benchmarks/bench_durability.py --dir /mnt/disk     # the file system matters
    python benchmarks/bench_durability.py --writes 100 --json

Three measurements (design.md, "Writing", step 7, and "The redo log"):

1. **Write path.** The same small create on two stores in this process, interleaved (which goes
   first alternates): one writing through the redo log (one ``fdatasync`` per write), one
   through the path gitmem takes where there is no boot id (two ``syncfs`` per write). Medians
   of wall and CPU time, and their ratio. Only the flush differs; the CPU path is the same.
2. **Flushes per write.** Creates counted at the flush functions, from one thread and from
   four threads at once (group commit shares the log's flushes between threads).
3. **Preallocation.** A 2 KiB record ``pwrite`` + ``fdatasync`` into written zeros inside the
   file (what the log does) against appending to a growing file, interleaved.
4. **Log size.** The same creates (each in one of 7 directories, as in 1.) on two logged stores,
   interleaved: one whose log is a fixed 1 MiB (the size before the log was sized by its
   use), one sized as design.md ("The redo log") says. Mean and median wall time per write
   (the mean carries the checkpoints a full log costs), generations started, and the log's
   size at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gitmem
from gitmem.git import flush as git_flush
from gitmem.git import wal
from gitmem.paths import parse


@contextmanager
def logged(on: bool) -> Iterator[None]:
    """Writes through the redo log (``on``) or, as without a boot id, with two syncfs."""
    real = git_flush.default_mode
    if not on:
        git_flush.default_mode = lambda: git_flush.SYNCFS
    try:
        yield
    finally:
        git_flush.default_mode = real


def write_path(base: Path, writes: int) -> dict[str, Any]:
    """Interleaved creates on a logged store and a two-syncfs store: medians in ms."""
    key = gitmem.generate_key()
    wall: dict[str, list[float]] = {"log": [], "two syncfs": []}
    cpu: dict[str, list[float]] = {"log": [], "two syncfs": []}
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        stores = {}
        for mode in wall:
            with logged(mode == "log"):
                store = gitmem.MemoryStore.open(
                    Path(tmp) / f"{mode}.git", key, create=True, state_dir=Path(tmp) / mode
                )
                store.create(parse("/memories/seed.md"), "seed\n")
            stores[mode] = store
        for i in range(writes):
            for mode in list(wall) if i % 2 == 0 else list(wall)[::-1]:
                with logged(mode == "log"):
                    start, cpu_start = time.perf_counter(), time.process_time()
                    stores[mode].create(parse(f"/memories/d{i % 7}/n{i}.md"), f"note {i}\n" * 30)
                    wall[mode].append(time.perf_counter() - start)
                    cpu[mode].append(time.process_time() - cpu_start)
    out: dict[str, Any] = {
        mode: {
            "median_ms": 1e3 * statistics.median(wall[mode]),
            "cpu_median_ms": 1e3 * statistics.median(cpu[mode]),
        }
        for mode in wall
    }
    out["ratio"] = statistics.median(wall["log"]) / statistics.median(wall["two syncfs"])
    return out


def flushes_per_write(base: Path, per_thread: int) -> dict[str, float]:
    """Flushes per create (log ``fdatasync`` and ``syncfs`` counted), one thread and four."""
    calls: list[str] = []
    real_datasync, real_syncfs = wal.datasync, git_flush.syncfs  # type: ignore[attr-defined]

    def datasync(path: Path) -> None:
        calls.append("fdatasync")
        real_datasync(path)

    def syncfs(path: str | os.PathLike[str]) -> None:
        calls.append("syncfs")
        real_syncfs(path)

    out: dict[str, float] = {}
    wal.datasync, git_flush.syncfs = datasync, syncfs  # type: ignore[attr-defined]
    try:
        with tempfile.TemporaryDirectory(dir=base) as tmp:
            tool = gitmem.GitMemoryTool(Path(tmp) / "s.git", key=gitmem.generate_key())
            tool.call({"command": "create", "path": "/memories/seed.md", "file_text": "seed\n"})
            for threads in (1, 4):
                calls.clear()

                def writer(w: int, threads: int = threads) -> None:
                    for j in range(per_thread):
                        path = f"/memories/t{threads}-{w}/{j}.md"
                        tool.call({"command": "create", "path": path, "file_text": f"{j}\n"})

                _run_threads(threads, writer)
                out[f"{threads} thread(s)"] = len(calls) / (threads * per_thread)
    finally:
        wal.datasync, git_flush.syncfs = real_datasync, real_syncfs  # type: ignore[attr-defined]
    return out


def _run_threads(count: int, target: Callable[[int], None]) -> None:
    workers = [threading.Thread(target=target, args=(w,)) for w in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def preallocation(base: Path, records: int) -> dict[str, float]:
    """Median ms of a 2 KiB pwrite + fdatasync: into written zeros, or extending the file."""
    times: dict[str, list[float]] = {"preallocated": [], "growing": []}
    record = os.urandom(2048)
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        fds = {}
        for mode in times:
            fd = os.open(Path(tmp) / mode, os.O_RDWR | os.O_CREAT, 0o600)
            if mode == "preallocated":
                os.write(fd, bytes(wal.HEADER_SIZE + records * len(record)))
            os.fsync(fd)
            fds[mode] = fd
        try:
            for i in range(records):
                for mode in list(times) if i % 2 == 0 else list(times)[::-1]:
                    start = time.perf_counter()
                    os.pwrite(fds[mode], record, wal.HEADER_SIZE + i * len(record))
                    os.fdatasync(fds[mode])
                    times[mode].append(time.perf_counter() - start)
        finally:
            for fd in fds.values():
                os.close(fd)
    return {mode: 1e3 * statistics.median(values) for mode, values in times.items()}


@contextmanager
def log_sizes(fixed: bool) -> Iterator[None]:
    """A fixed 1 MiB log (``fixed``), or the sizing rule of gitmem/wal.py."""
    saved = wal.MIN_CAPACITY, wal.MAX_CAPACITY
    if fixed:
        wal.MIN_CAPACITY = wal.MAX_CAPACITY = 1 << 20
    try:
        yield
    finally:
        wal.MIN_CAPACITY, wal.MAX_CAPACITY = saved


def log_size(base: Path, writes: int) -> dict[str, dict[str, float]]:
    """Per write (ms, mean and median), generations and final log bytes: fixed 1 MiB vs sized."""
    key = gitmem.generate_key()
    modes = ("fixed 1 MiB", "sized")
    wall: dict[str, list[float]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        stores = {}
        for mode in modes:
            with log_sizes(mode == modes[0]):
                store = gitmem.MemoryStore.open(
                    Path(tmp) / f"{mode}.git", key, create=True, state_dir=Path(tmp) / mode
                )
                store.create(parse("/memories/seed.md"), "seed\n")
            stores[mode] = store
        for i in range(writes):
            for mode in modes if i % 2 == 0 else modes[::-1]:
                with log_sizes(mode == modes[0]):
                    start = time.perf_counter()
                    stores[mode].create(parse(f"/memories/d{i % 7}/n{i}.md"), f"note {i}\n" * 30)
                    wall[mode].append(time.perf_counter() - start)
        out = {}
        for mode in modes:
            log = stores[mode].path / wal.LOG_NAME
            header = wal.read_header(log)
            out[mode] = {
                "mean_ms": 1e3 * statistics.fmean(wall[mode]),
                "median_ms": 1e3 * statistics.median(wall[mode]),
                "generations": float(header.generation if header else 0),
                "log_bytes": float(log.stat().st_blocks * 512),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=60, help="timed creates per store")
    parser.add_argument(
        "--log-writes", type=int, default=400, help="creates per store for the log's size"
    )
    parser.add_argument("--dir", type=Path, default=None, help="where the stores live")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if not git_flush.default_mode().logged:
        parser.error("the redo log needs Linux (syncfs and a boot id)")
    base = args.dir or Path(tempfile.gettempdir())
    result = {
        "write_path": write_path(base, args.writes),
        "flushes_per_write": flushes_per_write(base, 6),
        "preallocation_ms": preallocation(base, 5 * args.writes),
        "log_size": log_size(base, args.log_writes),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    path = result["write_path"]
    for mode in ("log", "two syncfs"):
        print(
            f"create, {mode:10s}: {path[mode]['median_ms']:6.2f} ms median, "
            f"{path[mode]['cpu_median_ms']:5.2f} ms CPU"
        )
    print(f"log / two syncfs: {path['ratio']:.2f}")
    for threads, flushes in result["flushes_per_write"].items():
        print(f"flushes per write, {threads}: {flushes:.2f}")
    for mode, ms in result["preallocation_ms"].items():
        print(f"2 KiB record + fdatasync, {mode}: {ms:.3f} ms")
    for mode, figures in result["log_size"].items():
        print(
            f"log {mode:11s}: {figures['mean_ms']:6.2f} ms mean, {figures['median_ms']:6.2f} ms "
            f"median per write, {figures['generations']:.0f} generations, "
            f"{figures['log_bytes']:,.0f} bytes on disk"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
