"""What publishing the redo log when a writer stops costs (design.md, "The redo log",
"Publishing when a writer stops").

    python benchmarks/bench_publish.py --dir /mnt/disk --runs 11

Two measurements, medians:

1. **In one process.** A small create, then ``store.close()`` (the checkpoint of the clearing
   kind that publishes it), repeated: the time of each, and their ratio.
2. **The command line.** ``gitmem --repo S import D`` (one small file changed each time: one
   write, then the publish before the process exits) against ``gitmem --repo S cat PATH`` (the
   same process start and store opening, no write), interleaved: the write command's extra time
   over the read, of which the publish is the part that 1. measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gitmem


def in_process(root: Path, runs: int) -> dict[str, float]:
    store = gitmem.MemoryStore.init(root / "lib.git", gitmem.generate_key(), state_dir=root / "st")
    writes: list[float] = []
    closes: list[float] = []
    for i in range(runs):
        start = time.perf_counter()
        store.create(f"/memories/n{i}.md", f"note {i}\n")
        writes.append(time.perf_counter() - start)
        start = time.perf_counter()
        store.close()
        closes.append(time.perf_counter() - start)
    write, close = statistics.median(writes), statistics.median(closes)
    return {"write_ms": write * 1e3, "close_ms": close * 1e3, "close_over_write": close / write}


def command_line(root: Path, runs: int) -> dict[str, float]:
    env = {**os.environ, "HOME": str(root / "home"), "GIT_CONFIG_GLOBAL": os.devnull}
    gitmem_cmd = [sys.executable, "-m", "gitmem"]
    repo = str(root / "cli.git")
    subprocess.run([*gitmem_cmd, "init", repo], env=env, check=True, capture_output=True)
    files = root / "files"
    files.mkdir()
    writes: list[float] = []
    reads: list[float] = []
    for i in range(runs):
        (files / "a.md").write_text(f"note {i}\n")
        steps = [("write", ["import", str(files)]), ("read", ["cat", "/memories/a.md"])]
        for name, args in steps if i % 2 == 0 else steps[::-1]:
            start = time.perf_counter()
            subprocess.run(
                [*gitmem_cmd, "--repo", repo, *args], env=env, check=True, capture_output=True
            )
            (writes if name == "write" else reads).append(time.perf_counter() - start)
    config = Path(repo, "config").read_text()
    write, read = statistics.median(writes), statistics.median(reads)
    return {
        "write_command_ms": write * 1e3,
        "read_command_ms": read * 1e3,
        "write_over_read": write / read,
        "published": float("gitmemlog" not in config),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-publish-", dir=args.dir) as scratch:
        root = Path(scratch)
        result = {"in_process": in_process(root, args.runs), "cli": command_line(root, args.runs)}
    if args.json:
        print(json.dumps(result))
        return
    lib, cli = result["in_process"], result["cli"]
    print(
        f"in process: write {lib['write_ms']:.1f} ms, close (publish) {lib['close_ms']:.1f} ms "
        f"({lib['close_over_write']:.2f}x the write)"
    )
    print(
        f"command line: write command {cli['write_command_ms']:.0f} ms, read command "
        f"{cli['read_command_ms']:.0f} ms ({cli['write_over_read']:.2f}x); published at exit: "
        f"{bool(cli['published'])}"
    )


if __name__ == "__main__":
    main()
