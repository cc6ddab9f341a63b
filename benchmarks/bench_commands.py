"""Median and p90 latency of each memory command: GitMemoryTool next to the SDK's reference.

    python benchmarks/bench_commands.py                # 50 timed calls per command
    python benchmarks/bench_commands.py --ops 200 --json
    python benchmarks/bench_commands.py --dir /mnt/disk   # the filesystem matters (fsync)
    python benchmarks/bench_commands.py --dir /dev/shm    # tmpfs: the CPU path alone
    python benchmarks/bench_commands.py --grown 10000     # also on a store of 10,000 files
                                                          # and 10,000 more commits
    python benchmarks/bench_commands.py --grown-flat 10000   # 10,000 files in /memories itself
    python benchmarks/bench_commands.py --ops 60 --writes-only --grown-flat 10000
                                       # the write commands alone, more calls
    python benchmarks/bench_commands.py --ops 200 --reads-only --grown-flat 10000
                                       # the two view commands alone, more calls
    python benchmarks/bench_commands.py --grown 10000 --long 1000 --warmup 200 [--no-collector]
                                       # and a long run of writes on the small and grown stores:
                                       # steady-state medians, mean, p99 and max, as ratios

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
import gc
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

import gitmem
import gitmem.git.repo
from gitmem.editor import TreeEditor
from gitmem.fsutil import fsync_dir
from gitmem.store import Change

COMMANDS = ("view file", "view dir", "create", "str_replace", "insert", "rename", "delete")
WRITES = ("create", "str_replace", "insert", "rename", "delete")
READS = ("view file", "view dir")
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
                    fsync_dir(directory)
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


# CPU seconds of each timed call, per tool and command (filled by measure()).
CPU: dict[str, dict[str, list[float]]] = {}


def timed(tool: BetaAbstractMemoryTool, command: dict[str, Any]) -> tuple[float, float]:
    """Wall-clock and CPU seconds one call takes; the call must succeed.

    CPU time (this process's, all threads) is what a loaded machine does not inflate: on a
    shared machine the wall-clock time of a call that needs no I/O includes waiting for a core.
    """
    started, cpu = time.perf_counter(), time.process_time()
    result = tool.call(command)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert isinstance(result, str) and not result.startswith("Error"), (command, result)
    return elapsed, cpu


def call_order(tools: Sequence[str], round: int) -> list[str]:
    """The order of the tools' calls in round ``round`` (negative: warm-up) of a batch.

    A call costs more when the call before it was another tool's (its caches and the
    interpreter's are cold: about 20 µs more after a reference call than after a gitmem one,
    on the view commands), so every tool must follow the same kinds of tools as often as the
    others. (Rounds alternately forward and reversed let the small store's gitmem follow
    itself in every other round and the grown store's never: its views measured 1.16×
    the small store's, 1.04× in a balanced order.) Rows of a Williams square: over each
    ``len(tools)`` rounds (twice that for an odd count) every tool follows every other exactly
    once inside a round, and once more, across a round's edge, the tool a fixed distance after
    it in ``tools``: with the tools listed as (gitmem, reference) pairs, every gitmem tool
    then follows gitmem and reference calls as often as every other gitmem tool.
    """
    n = len(tools)
    first = [0]
    for k in range(1, n):
        first.append((k + 1) // 2 if k % 2 else n - k // 2)
    rows = [[(j + shift) % n for j in first] for shift in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return [tools[j] for j in rows[round % len(rows)]]


def measure(
    tools: dict[str, BetaAbstractMemoryTool], ops: int, commands: Sequence[str] = COMMANDS
) -> dict[str, dict[str, list[float]]]:
    """Seconds per call of each of ``commands`` for each tool, the tools' calls interleaved."""
    for tool in tools.values():
        seed(tool)
    timings: dict[str, dict[str, list[float]]] = {name: {} for name in tools}
    order = list(tools)
    for command, make in batches(ops).items():
        if command not in commands:
            continue
        for name in order:
            timings[name][command] = []
            CPU.setdefault(name, {})[command] = []
        for i in range(_WARMUP + ops):
            for name in call_order(order, i - _WARMUP):
                elapsed, cpu = timed(tools[name], make(i))
                if i >= _WARMUP:
                    timings[name][command].append(elapsed)
                    CPU[name][command].append(cpu)
    return timings


def grow(path: Path, key: str, files: int, edits: int, *, flat: bool = False) -> None:
    """Make a store at ``path`` of ``files`` notes, then ``edits`` edits of one note each.

    The notes sit in 100 directories, one commit per create and per edit. With ``flat`` they
    all sit in ``/memories`` itself (as the model often keeps them), and the creates and edits
    are committed a hundred at a time: every commit there stores a new tree of the whole
    directory (about 60 bytes per entry), so 10,000 commits would write 6 GB of trees before
    any packing. Built with the history benchmark's packing builder (real, authenticated
    commits, written to packs in bulk rather than one durable write at a time), then opened
    like any store.
    """
    import bench_log  # run as a script, its sibling is importable

    base = gitmem.MemoryStore.init(path, key, check_rollback=False)
    repo = bench_log.PackingRepo(path)
    store = gitmem.MemoryStore(repo, base.keys, session="grow", check_rollback=False)
    names = [grown_path(i, flat) for i in range(files)]
    if not flat:
        for i, name in enumerate(names):
            store.create(name, note(i))
        for i in range(edits):
            store.insert(names[i % files], 0, f"edit {i}")
        repo.finish()
        return

    def batch(command: str, steps: range) -> None:
        def edit(_: object, tree: TreeEditor) -> Change[None]:
            for i in steps:
                path = gitmem.parse_path(names[i % files])
                old = tree.read_bytes(path) if command == "insert" else b""
                data = f"edit {i}\n".encode() + old if old else note(i).encode()
                tree.put_file(path, data)
            return Change(tuple(names[i % files] for i in steps), None)

        store.write(command, edit)

    for start in range(0, files, 100):
        batch("create", range(start, min(start + 100, files)))
    for start in range(0, edits, 100):
        batch("insert", range(start, min(start + 100, edits)))
    repo.finish()


def long_call(i: int) -> dict[str, Any]:
    """Write ``i`` of the long run: create, str_replace, insert, rename, delete in turn, so the
    directories it writes stay small and only the store around them differs."""
    k = i // len(WRITES)
    command = WRITES[i % len(WRITES)]
    if command == "create":
        return {"command": "create", "path": f"/memories/run/c{k}.md", "file_text": note(k)}
    if command == "str_replace":
        old, new = f"counter: {k}\n", f"counter: {k + 1}\n"
        return {
            "command": "str_replace",
            "path": "/memories/run.md",
            "old_str": old,
            "new_str": new,
        }
    if command == "insert":
        text = f"entry {k}: a session finished a step"
        return {
            "command": "insert",
            "path": "/memories/run-log.md",
            "insert_line": 0,
            "insert_text": text,
        }
    if command == "rename":
        return {
            "command": "rename",
            "old_path": f"/memories/run/c{k}.md",
            "new_path": f"/memories/run-done/c{k}.md",
        }
    return {"command": "delete", "path": f"/memories/run-done/c{k}.md"}


# Checkpoints and maintenance calls seen during the long run, by repository path.
EVENTS: dict[str, dict[str, int]] = {}


def count_events() -> None:
    """Count each repository's checkpoints and maintenance runs (any gitmem version)."""
    repo_class = gitmem.git.repo.GitRepo
    for method in ("_checkpoint", "maintain"):
        original = getattr(repo_class, method, None)
        if original is None:
            continue

        def counting(
            self: Any, *args: Any, _original: Any = original, _name: str = method, **kwargs: Any
        ) -> Any:
            seen = EVENTS.setdefault(str(self.path), {})
            seen[_name] = seen.get(_name, 0) + 1
            return _original(self, *args, **kwargs)

        setattr(repo_class, method, counting)


def long_run(
    tools: Mapping[str, BetaAbstractMemoryTool], writes: int, warmup: int
) -> dict[str, dict[str, list[float]]]:
    """Wall-clock and CPU seconds of each of ``writes`` writes after ``warmup`` untimed ones,
    the tools' calls interleaved (which goes first alternates)."""
    for tool in tools.values():
        tool.call({"command": "create", "path": "/memories/run.md", "file_text": note(0)})
        tool.call({"command": "create", "path": "/memories/run-log.md", "file_text": "start\n"})
    out: dict[str, dict[str, list[float]]] = {n: {"wall": [], "cpu": []} for n in tools}
    order = list(tools)
    for i in range(warmup + writes):
        for name in order if i % 2 else reversed(order):
            elapsed, cpu = timed(tools[name], long_call(i))
            if i >= warmup:
                out[name]["wall"].append(elapsed)
                out[name]["cpu"].append(cpu)
    return out


def tail_summary(samples: list[float]) -> dict[str, float]:
    """Median, mean, 99th percentile and maximum, in milliseconds."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
    return {
        "median": statistics.median(ordered) * 1e3,
        "mean": statistics.fmean(ordered) * 1e3,
        "p99": p99 * 1e3,
        "max": ordered[-1] * 1e3,
    }


def cached_key(cache: Path, key: str) -> str:
    """The key of the grown stores kept in ``cache`` (``key`` if there are none yet)."""
    cache.mkdir(parents=True, exist_ok=True)
    saved = cache / "key"
    if saved.exists():
        return saved.read_text().strip()
    saved.write_text(key)
    saved.chmod(0o600)
    return key


def built_store(path: Path, key: str, count: int, flat: bool, cache: Path | None) -> None:
    """A grown store at ``path``: built, or copied from ``cache`` where one was kept."""
    kept = None if cache is None else cache / f"{'flat' if flat else 'dirs'}-{count}.git"
    if kept is not None and kept.exists():
        shutil.copytree(kept, path, symlinks=True)
        return
    grow(path, key, count, count, flat=flat)
    if kept is not None:
        shutil.copytree(path, kept, symlinks=True)


def report_long(
    results: dict[str, dict[str, list[float]]],
    events: dict[str, dict[str, int]],
    args: argparse.Namespace,
) -> None:
    """Print (or dump as JSON) the long run: each store's figures and the grown stores' ratios
    over the small store's."""
    table = {
        name: {clock: tail_summary(samples) for clock, samples in clocks.items()}
        for name, clocks in results.items()
    }
    ratios = {
        name: {
            clock: {stat: value / table["gitmem"][clock][stat] for stat, value in figures.items()}
            for clock, figures in clocks.items()
        }
        for name, clocks in table.items()
        if name != "gitmem"
    }
    if args.json:
        print(
            json.dumps(
                {
                    "long": args.long,
                    "warmup": args.warmup,
                    "stores": table,
                    "ratios": ratios,
                    "events": events,
                }
            )
        )
        return
    collector = "off" if args.no_collector else "on"
    print(
        f"long run: {args.long} writes after {args.warmup} untimed "
        f"(create, str_replace, insert, rename, delete in turn), garbage collector {collector}; "
        "milliseconds"
    )
    print(f"{'store':<20} {'clock':<5} {'median':>8} {'mean':>8} {'p99':>8} {'max':>8}  events")
    for name, clocks in table.items():
        seen = ", ".join(f"{k} {v}" for k, v in sorted(events.get(name, {}).items()))
        for clock, f in clocks.items():
            print(
                f"{name:<20} {clock:<5} {f['median']:>8.3f} {f['mean']:>8.3f} {f['p99']:>8.3f} "
                f"{f['max']:>8.2f}  {seen if clock == 'wall' else ''}"
            )
    for name, clocks in ratios.items():
        for clock, r in clocks.items():
            print(
                f"{name} / small store ({clock}): median {r['median']:.2f}x, "
                f"mean {r['mean']:.2f}x, p99 {r['p99']:.2f}x, max {r['max']:.2f}x"
            )


def grown_path(i: int, flat: bool) -> str:
    """The path of the grown store's note ``i``."""
    return f"/memories/f{i}.md" if flat else f"/memories/g{i % 100:02d}/f{i}.md"


def grow_reference(base: Path, files: int, *, flat: bool = False) -> None:
    """The same files for the reference (plain writes: only their presence matters)."""
    for i in range(files):
        target = base / grown_path(i, flat).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(note(i))


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
    parser.add_argument(
        "--grown", type=int, default=0, metavar="N", help="also a store of N files + N commits"
    )
    parser.add_argument(
        "--grown-flat",
        type=int,
        default=0,
        metavar="N",
        help="also a store of N files in /memories itself + N edits (100 per commit)",
    )
    parser.add_argument(
        "--long",
        type=int,
        default=0,
        metavar="N",
        help="also N writes in a row on a fresh small store and on each grown store",
    )
    parser.add_argument("--warmup", type=int, default=200, help="untimed writes before --long's")
    parser.add_argument(
        "--writes-only",
        action="store_true",
        help="time the five write commands only (no view batches): the grown stores' write "
        "ratios from more calls in the same time",
    )
    parser.add_argument(
        "--reads-only",
        action="store_true",
        help="time the two view commands only (no write batches): the grown stores' read "
        "ratios from more calls in the same time",
    )
    parser.add_argument(
        "--no-collector",
        action="store_true",
        help="turn Python's cyclic garbage collector off for --long (its full collections, "
        "over every module this process imported, land on whichever write triggers them)",
    )
    parser.add_argument(
        "--grown-cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the grown stores built in DIR and copy them from there next time",
    )
    args = parser.parse_args(argv)
    if args.writes_only and args.reads_only:
        parser.error("--writes-only and --reads-only exclude each other")
    if args.ops < 2 and not (args.ops == 0 and args.long):
        parser.error("--ops must be at least 2 (or 0 with --long: the long run alone)")
    variants = {"grown": (args.grown, False), "grown flat": (args.grown_flat, True)}
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-", dir=args.dir) as tmp:
        base = Path(tmp)
        os.environ["GITMEM_STATE_DIR"] = str(base / "state")
        key = gitmem.generate_key()
        git = gitmem.GitMemoryTool(base / "store.git", key=key, session="bench")
        reference = DurableReference(base_path=str(base / "reference"))
        tools: dict[str, BetaAbstractMemoryTool] = {"gitmem": git, "reference": reference}
        if args.grown_cache is not None:
            key = cached_key(args.grown_cache, key)
        long_tools: dict[str, gitmem.GitMemoryTool] = {}
        if args.long:
            long_tools["gitmem"] = gitmem.GitMemoryTool(base / "long.git", key=key)
        for name, (count, flat) in variants.items():
            if not count:
                continue
            built_store(base / f"{name}.git", key, count, flat, args.grown_cache)
            if args.long:
                shutil.copytree(base / f"{name}.git", base / f"{name}-long.git", symlinks=True)
                long_tools[f"gitmem {name}"] = gitmem.GitMemoryTool(
                    base / f"{name}-long.git", key=key
                )
            if not args.ops:
                continue
            grow_reference(base / f"{name}-reference", count, flat=flat)
            tools[f"gitmem {name}"] = gitmem.GitMemoryTool(base / f"{name}.git", key=key)
            tools[f"reference {name}"] = DurableReference(base_path=str(base / f"{name}-reference"))
        commands = WRITES if args.writes_only else READS if args.reads_only else COMMANDS
        results = measure(tools, args.ops, commands) if args.ops else {}
        if args.long:
            count_events()
            if args.no_collector:
                gc.collect()
                gc.disable()
            long_results = long_run(long_tools, args.long, args.warmup)
            gc.enable()
            events = {
                name: EVENTS.get(str(tool.store.repo.path), {})
                for name, tool in long_tools.items()
                if isinstance(tool, gitmem.GitMemoryTool)
            }
        fs_type = filesystem(base)
    if args.long:
        report_long(long_results, events, args)
    if not args.ops:
        return 0
    table = {
        name: {
            "gitmem": summary(results["gitmem"][name]),
            "reference": summary(results["reference"][name]),
        }
        for name in commands
    }
    for name, row in table.items():
        row["ratio"] = {"median": row["gitmem"]["median_ms"] / row["reference"]["median_ms"]}
        row["gitmem"]["cpu_median_ms"] = statistics.median(CPU["gitmem"][name]) * 1e3
    # The write ratio needs the write batches (None with --reads-only).
    timed_writes = all(name in table for name in WRITES)
    writes = (
        geometric_mean([table[name]["ratio"]["median"] for name in WRITES])
        if timed_writes
        else None
    )
    # Each grown store's medians over the small store's, by variant: wall-clock, and CPU time
    # (which a loaded machine does not inflate) under "<variant> cpu".
    grown: dict[str, dict[str, float]] = {}
    for variant, (count, _) in variants.items():
        if not count:
            continue
        for label, samples in ((variant, results), (f"{variant} cpu", CPU)):
            ratios = grown[label] = {}
            for name in commands:
                small = statistics.median(samples["gitmem"][name])
                ratios[name] = statistics.median(samples[f"gitmem {variant}"][name]) / small
            if timed_writes:
                ratios["writes"] = geometric_mean([ratios[name] for name in WRITES])
        # The reference on the same files over the reference on the small memory: what the
        # size alone costs plain files (a listing of 10,000 files is long for anybody).
        ratios = grown[f"{variant} reference"] = {}
        for name in commands:
            small = statistics.median(results["reference"][name])
            ratios[name] = statistics.median(results[f"reference {variant}"][name]) / small
        if timed_writes:
            ratios["writes"] = geometric_mean([ratios[name] for name in WRITES])
    environment = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "filesystem": fs_type,
        "gitmem": gitmem.__version__,
    }
    if args.json:
        body = {
            "ops": args.ops,
            "commands": table,
            "writes_ratio": writes,
            "grown": grown.get("grown", {}),
            "grown_cpu": grown.get("grown cpu", {}),
            "grown_flat": grown.get("grown flat", {}),
            "grown_flat_cpu": grown.get("grown flat cpu", {}),
            "grown_reference": grown.get("grown reference", {}),
            "grown_flat_reference": grown.get("grown flat reference", {}),
        }
        print(json.dumps({**body, "environment": environment}))
        return 0
    print(
        f"{args.ops} timed calls per command; {environment['filesystem']} filesystem; "
        f"Python {environment['python']}; milliseconds"
    )
    header = (
        f"{'command':<12} {'gitmem':>8} {'p90':>8} {'cpu':>6} {'reference':>10} {'p90':>8} "
        f"{'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, row in table.items():
        g, r = row["gitmem"], row["reference"]
        print(
            f"{name:<12} {g['median_ms']:>8.2f} {g['p90_ms']:>8.2f} {g['cpu_median_ms']:>6.2f} "
            f"{r['median_ms']:>10.2f} {r['p90_ms']:>8.2f} {row['ratio']['median']:>6.2f}x"
        )
    if writes is not None:
        print(f"writes (geometric mean of the five ratios): {writes:.2f}x")
    for label, ratios in grown.items():
        variant = label.removesuffix(" cpu").removesuffix(" reference")
        count, flat = variants[variant]
        shape = (
            "in /memories itself + as many edits, 100 per commit"
            if flat
            else f"in 100 directories + {count:,} commits"
        )
        if label.endswith(" reference"):
            print(f"the reference on the same {count:,} files / on the small memory (wall-clock):")
        else:
            kind = "CPU time" if label.endswith(" cpu") else "wall-clock"
            print(f"gitmem on {count:,} files {shape} / on the small store ({kind}):")
        print("  " + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
