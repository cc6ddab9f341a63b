"""``str_replace`` on a large file of short lines: time, writer-lock time and error size.

The file is 800 KB of 400,000 short lines (``x``), where ``old_str`` = ``"x"`` occurs 400,000
times and ``""`` at every position (issue 14 measured about 105 s and 215 s there, inside the
write transaction, with 3-6 MB of error text). Each case is run ``--reps`` times; the figures
are medians, and the reference in the same run is a ``view`` of the same file (reading and
decrypting it), so a ratio near 1 means the search costs about what reading the file costs.
The writer lock's hold time is measured by wrapping the store's lock.

    python benchmarks/bench_str_replace.py [--lines 400000] [--reps 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from anthropic.lib.tools import ToolError

import gitmem

PATH = "/memories/big.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=400_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tool = gitmem.GitMemoryTool(
            Path(tmp) / "s.git", key=gitmem.generate_key(), limits=gitmem.Limits.unlimited()
        )
        tool.call({"command": "create", "path": PATH, "file_text": "x\n" * args.lines})
        held: list[float] = []
        real_lock = tool.store.repo.write_lock

        @contextlib.contextmanager
        def timed_lock(timeout: float) -> Iterator[None]:
            with real_lock(timeout):
                start = time.perf_counter()
                try:
                    yield
                finally:
                    held.append(time.perf_counter() - start)

        tool.store.repo.write_lock = timed_lock  # type: ignore[method-assign]
        cases: dict[str, dict[str, object]] = {
            "view (reference)": {"command": "view", "path": PATH, "view_range": [1, 2]},
            'old_str "x" (refused)': {"old_str": "x"},
            'old_str "" (refused)': {"old_str": ""},
            "unique old_str (written)": {"old_str": "needle"},
        }
        results: dict[str, dict[str, float]] = {}
        data: dict[str, object]
        for name, case in cases.items():
            times, locks, sizes = [], [], []
            for rep in range(args.reps):
                if "needle" in case.values():
                    tool.call({"command": "insert", "path": PATH, "insert_line": 0,
                               "insert_text": "needle"})  # fmt: skip
                if "command" in case:
                    data = case
                else:
                    data = {"command": "str_replace", "path": PATH, "new_str": f"n{rep}", **case}
                held.clear()
                start = time.perf_counter()
                try:
                    out = tool.call(data)
                except ToolError as exc:
                    out = str(exc.content)
                times.append(time.perf_counter() - start)
                locks.append(sum(held))
                sizes.append(len(out))
            results[name] = {
                "median_s": statistics.median(times),
                "lock_median_s": statistics.median(locks),
                "result_chars": statistics.median(sizes),
            }
        reference = results["view (reference)"]["median_s"]
        for figures in results.values():
            figures["ratio_to_view"] = figures["median_s"] / reference
        print(json.dumps({"lines": args.lines, "reps": args.reps, "cases": results}, indent=1))


if __name__ == "__main__":
    main()
