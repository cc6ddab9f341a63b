"""Median and p90 latency of each memory command: GitMemoryTool next to the SDK's reference.

    python benchmarks/bench_commands.py                # 50 timed calls per command
    python benchmarks/bench_commands.py --ops 200 --json
    python benchmarks/bench_commands.py --dir /mnt/disk   # the filesystem matters (fsync)

Both tools run in this process, through ``tool.call`` (input validation included), on the same
small memory: a dozen notes of about 1 KiB in a few directories. Each command is timed on its
own batch of calls after a few untimed warm-up calls; the two tools' calls alternate (which goes
first alternates too), so both see the same machine load. Both are durable when a call returns:
the SDK's ``BetaLocalFilesystemMemoryTool`` fsyncs a file's data on create, str_replace and
insert (through a temporary file and a rename) but no directory, and nothing on delete or
rename, so the reference here (``DurableReference``) adds what a power loss needs: an fsync of
each directory whose entries the call changed (the file's directory, both directories of a
rename, and the parent of each directory the call created). gitmem flushes as design.md
("Writing", step 7) says. The write ratio is the geometric mean of the five write commands'
ratios of medians.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

import gitmem

COMMANDS = ("view file", "view dir", "create", "str_replace", "insert", "rename", "delete")
WRITES = ("create", "str_replace", "insert", "rename", "delete")
_WARMUP = 3


class DurableReference(BetaLocalFilesystemMemoryTool):
    """The SDK's filesystem tool, plus the directory fsyncs that make each write durable."""

    def call(self, input: object) -> Any:
        command = input if isinstance(input, dict) else {}
        paths = [command.get(k) for k in ("path", "old_path", "new_path")]
        touched = [self._dirs_to_flush(p) for p in paths if command.get("command") != "view" and p]
        result = super().call(input)
        for directories in touched:
            for directory in directories:
                if directory.is_dir():
                    _fsync_dir(directory)
        return result

    def _dirs_to_flush(self, path: str) -> list[Path]:
        """The file's directory and each directory the call may create, up to one that exists."""
        target = self.memory_root.parent / path.lstrip("/")
        out = [target.parent]
        current = target.parent
        while not current.exists() and current != self.memory_root.parent:
            current = current.parent
            out.append(current)
        return out


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def note(i: int) -> str:
    """A memory-sized note (about 1 KiB)."""
    lines = [f"# Note {i}", "", "## Facts"]
    lines += [f"- fact {k}: the user prefers option {i * 7 + k} for task {k}" for k in range(12)]
    lines += ["", "## Progress", f"counter: {i}", "status: in progress"]
    return "\n".join(lines) + "\n"


def seed(tool: BetaAbstractMemoryTool) -> None:
    """The memory both tools start from (not timed)."""
    for i in range(12):
        tool.call({"command": "create", "path": f"/memories/notes/n{i}.md", "file_text": note(i)})
    tool.call({"command": "create", "path": "/memories/log.md", "file_text": "start\n"})
    tool.call({"command": "create", "path": "/memories/counter.md", "file_text": note(0)})


def batches(ops: int) -> dict[str, Callable[[int], dict[str, Any]]]:
    """For each command, call ``i`` of its batch (warm-up calls included)."""
    return {
        "view file": lambda i: {"command": "view", "path": f"/memories/notes/n{i % 12}.md"},
        "view dir": lambda i: {"command": "view", "path": "/memories"},
        "create": lambda i: {
            "command": "create",
            "path": f"/memories/new/c{i}.md",
            "file_text": note(100 + i),
        },
        "str_replace": lambda i: {
            "command": "str_replace",
            "path": "/memories/counter.md",
            "old_str": f"counter: {i}\n",
            "new_str": f"counter: {i + 1}\n",
        },
        "insert": lambda i: {
            "command": "insert",
            "path": "/memories/log.md",
            "insert_line": 0,
            "insert_text": f"entry {i}: a session finished a step",
        },
        # These two work on the files the create batch made.
        "rename": lambda i: {
            "command": "rename",
            "old_path": f"/memories/new/c{i}.md",
            "new_path": f"/memories/done/c{i}.md",
        },
        "delete": lambda i: {"command": "delete", "path": f"/memories/done/c{i}.md"},
    }


def timed(tool: BetaAbstractMemoryTool, command: dict[str, Any]) -> float:
    """Seconds one call takes; the call must succeed."""
    started = time.perf_counter()
    result = tool.call(command)
    elapsed = time.perf_counter() - started
    assert isinstance(result, str) and not result.startswith("Error"), (command, result)
    return elapsed


def measure(
    tools: dict[str, BetaAbstractMemoryTool], ops: int
) -> dict[str, dict[str, list[float]]]:
    """Seconds per call of each command for each tool, the tools' calls interleaved."""
    for tool in tools.values():
        seed(tool)
    timings: dict[str, dict[str, list[float]]] = {name: {} for name in tools}
    order = list(tools)
    for command, make in batches(ops).items():
        for name in order:
            timings[name][command] = []
        for i in range(_WARMUP + ops):
            for name in order if i % 2 else reversed(order):
                elapsed = timed(tools[name], make(i))
                if i >= _WARMUP:
                    timings[name][command].append(elapsed)
    return timings


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary(samples: list[float]) -> dict[str, float]:
    """Median and 90th percentile, in milliseconds."""
    deciles = statistics.quantiles(samples, n=10, method="inclusive")
    return {"median_ms": statistics.median(samples) * 1e3, "p90_ms": deciles[-1] * 1e3}


def filesystem(path: Path) -> str:
    """The type of the filesystem ``path`` is on (Linux), else "unknown"."""
    best, kind = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    target = str(path.resolve())
    for line in mounts:
        fields = line.split()
        mounted_here = len(fields) > 2 and (target + "/").startswith(fields[1].rstrip("/") + "/")
        if mounted_here and len(fields[1]) >= len(best):
            best, kind = fields[1], fields[2]
    return kind


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=50, help="timed calls per command")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--dir", type=Path, default=None, help="where to put both memories")
    args = parser.parse_args(argv)
    if args.ops < 2:
        parser.error("--ops must be at least 2")
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-", dir=args.dir) as tmp:
        base = Path(tmp)
        os.environ["GITMEM_STATE_DIR"] = str(base / "state")
        git = gitmem.GitMemoryTool(base / "store.git", key=gitmem.generate_key(), session="bench")
        reference = DurableReference(base_path=str(base / "reference"))
        results = measure({"gitmem": git, "reference": reference}, args.ops)
        fs_type = filesystem(base)
    table = {
        name: {
            "gitmem": summary(results["gitmem"][name]),
            "reference": summary(results["reference"][name]),
        }
        for name in COMMANDS
    }
    for row in table.values():
        row["ratio"] = {"median": row["gitmem"]["median_ms"] / row["reference"]["median_ms"]}
    writes = geometric_mean([table[name]["ratio"]["median"] for name in WRITES])
    environment = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "filesystem": fs_type,
        "gitmem": gitmem.__version__,
    }
    if args.json:
        body = {"ops": args.ops, "commands": table, "writes_ratio": writes}
        print(json.dumps({**body, "environment": environment}))
        return 0
    print(
        f"{args.ops} timed calls per command; {environment['filesystem']} filesystem; "
        f"Python {environment['python']}; milliseconds"
    )
    header = f"{'command':<12} {'gitmem':>8} {'p90':>8} {'reference':>10} {'p90':>8} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for name, row in table.items():
        g, r = row["gitmem"], row["reference"]
        print(
            f"{name:<12} {g['median_ms']:>8.2f} {g['p90_ms']:>8.2f} "
            f"{r['median_ms']:>10.2f} {r['p90_ms']:>8.2f} {row['ratio']['median']:>6.2f}x"
        )
    print(f"writes (geometric mean of the five ratios): {writes:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
