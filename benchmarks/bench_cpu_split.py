"""CPU time of each memory command, split between the repository layer and everything above it.

    python benchmarks/bench_cpu_split.py                 # tmpfs (/dev/shm), 6 rounds
    python benchmarks/bench_cpu_split.py --rounds 10 --dir /tmp

Runs ``bench_commands``' workload on gitmem alone, through ``GitMemoryTool.call``, with automatic
maintenance off (``GITMEM_GC_AUTO=0``): each round is 30 calls of each command on the same small
memory (the creates, renames and deletes of a round undo each other). Every method of
``gitmem.git.repo.GitRepo`` (which calls the redo log and the pack writer below it) is wrapped to
add its CPU time to a counter, outermost calls only, so each call's CPU time splits into "git"
(inside ``GitRepo``) and "above" (the tool, store, tree, chunking, crypto, secrets screen and
high-water mark). The wrappers cost a few microseconds per call: compare the total with
``bench_commands.py``'s cpu column, and compare versions through this script only. The first
round is a warm-up. Prints the median milliseconds per call of each.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ["GITMEM_GC_AUTO"] = "0"

sys.path.insert(0, str(Path(__file__).parent))
import bench_commands

import gitmem
from gitmem.git.repo import GitRepo

_ROUND = 30


class GitClock:
    """CPU seconds spent inside ``GitRepo``'s methods since the last :meth:`reset`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0

    def reset(self) -> None:
        self.seconds = 0.0

    def wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return method(*args, **kwargs)
            self._depth += 1
            started = time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - started
                self._depth -= 1

        return timed

    def wrap_context(
        self, method: Callable[..., contextlib.AbstractContextManager[Any]]
    ) -> Callable[..., contextlib.AbstractContextManager[None]]:
        """A context manager method: its entry and exit count, not the block it guards."""

        @contextlib.contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[None]:
            manager = self.wrap(method)(*args, **kwargs)
            self.wrap(manager.__enter__)()
            try:
                yield
            finally:
                self.wrap(manager.__exit__)(None, None, None)

        return timed

    def install(self) -> None:
        """Wrap every method of GitRepo (a benchmark process only: it is never undone)."""
        for name, method in list(vars(GitRepo).items()):
            if name.startswith("__") or not inspect.isfunction(method):
                continue
            wrapped = getattr(method, "__wrapped__", None)
            if wrapped is not None and inspect.isgeneratorfunction(wrapped):
                setattr(GitRepo, name, self.wrap_context(method))
            else:
                setattr(GitRepo, name, self.wrap(method))


def measure(rounds: int, where: Path) -> dict[str, dict[str, float]]:
    """Median CPU milliseconds per call of each command: total, inside GitRepo, above it."""
    clock = GitClock()
    clock.install()
    tool = gitmem.GitMemoryTool(where / "repo", key=gitmem.generate_key(), state_dir=where / "st")
    bench_commands.seed(tool)
    batches = bench_commands.batches(_ROUND)
    total: dict[str, list[float]] = {name: [] for name in batches}
    git: dict[str, list[float]] = {name: [] for name in batches}
    for r in range(rounds + 1):
        for name, make in batches.items():
            for i in range(_ROUND):
                # str_replace counts up in counter.md: each round goes on from the last one.
                command = make(i + _ROUND * r if name == "str_replace" else i)
                clock.reset()
                started = time.process_time()
                result = tool.call(command)
                elapsed = time.process_time() - started
                assert not result.startswith("Error"), (command, result)
                if r:
                    total[name].append(elapsed)
                    git[name].append(clock.seconds)
    return {
        name: {
            "cpu": statistics.median(total[name]) * 1e3,
            "git": statistics.median(git[name]) * 1e3,
            "above": statistics.median(t - g for t, g in zip(total[name], git[name], strict=True))
            * 1e3,
        }
        for name in batches
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds of 30 calls each")
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm"), help="where the store goes")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        results = measure(args.rounds, Path(tmp))
    print(f"{args.rounds} rounds of {_ROUND} calls; median CPU ms per call")
    print(f"{'command':12s} {'cpu':>7s} {'git':>7s} {'above':>7s}")
    for name, row in results.items():
        print(f"{name:12s} {row['cpu']:7.3f} {row['git']:7.3f} {row['above']:7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
