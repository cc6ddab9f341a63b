"""What publishing a store once its writer goes idle costs, and how soon plain git reads it.

    python benchmarks/bench_idle_publish.py --dir /mnt/disk --runs 9

Two measurements, medians over ``--runs`` bursts of ``--burst`` small creates each, on a store
that stays open (as an MCP server or an agent holds one):

1. **Write cost.** The time of a write in a burst with idle publishing on (``publish_idle``
   1 s, the default) and off (``None``), bursts of the two alternated in one process: their
   ratio. A burst re-arms the timer at each write and publishes once, after it.
2. **Publish delay.** After a burst's last write returns, how long until ``git log`` (plain
   git, polled every 10 ms) reads the store: the idle delay plus one checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import gitmem


def git_reads(repo: Path) -> bool:
    done = subprocess.run(
        ["git", "--git-dir", str(repo), "log", "-1", "--format=%H"],
        capture_output=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    return done.returncode == 0


def burst(store: gitmem.MemoryStore, first: int, count: int) -> list[float]:
    times = []
    for i in range(first, first + count):
        start = time.perf_counter()
        store.create(f"/memories/n{i}.md", f"note {i}\n")
        times.append(time.perf_counter() - start)
    return times


def run(root: Path, runs: int, size: int, idle: float) -> dict[str, float]:
    key = gitmem.generate_key()
    stores = {
        "on": gitmem.MemoryStore.init(
            root / "on.git", key, state_dir=root / "s1", publish_idle=idle
        ),
        "off": gitmem.MemoryStore.init(
            root / "off.git", key, state_dir=root / "s2", publish_idle=None
        ),
    }
    writes: dict[str, list[float]] = {"on": [], "off": []}
    delays: list[float] = []
    for r in range(runs):
        for name in ("on", "off") if r % 2 == 0 else ("off", "on"):
            store = stores[name]
            writes[name] += burst(store, r * size, size)
            if name == "on":
                last = time.perf_counter()
                while not git_reads(store.path):
                    time.sleep(0.01)
                delays.append(time.perf_counter() - last)
            else:
                store.close()  # the next burst starts from a published store too
    on, off = statistics.median(writes["on"]), statistics.median(writes["off"])
    return {
        "write_ms_idle_on": on * 1e3,
        "write_ms_idle_off": off * 1e3,
        "write_ratio_on_over_off": on / off,
        "publish_delay_s_median": statistics.median(delays),
        "publish_delay_s_max": max(delays),
        "idle_s": idle,
        "burst": size,
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (a tmpdir)")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--idle", type=float, default=1.0, help="publish_idle, seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(json.dumps(run(Path(tmp), args.runs, args.burst, args.idle), indent=2))


if __name__ == "__main__":
    main()
