"""How long ``gitmem redact`` takes on a history of 1,000 and 10,000 operations.

    python benchmarks/bench_redact.py                       # 1,000 and 10,000 operations
    python benchmarks/bench_redact.py --ops 1000 --repeat 5

Each store is built with real gitmem operations (creates and ``str_replace`` edits spread over
50 files, in sessions of 20 operations), the secret written by the first operation into a file
that every tenth operation edits again, so the redaction rewrites the whole history and one
version in ten holds the text. Each run redacts a fresh copy of the store; the median of the
runs is printed, with the versions and operations the redaction rewrote.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from gitmem import MemoryStore, generate_key

SECRET = "4111-1111-1111-1111"
FILES = 50


def build(path: Path, key: str, ops: int, state: Path) -> None:
    """A store of ``ops`` operations at ``path`` (see the module's docstring)."""
    store = MemoryStore.init(path, key, state_dir=state, session="s0")
    text = "".join(f"line {i} of f0\n" for i in range(40))
    store.create("/memories/f0.md", text + f"card {SECRET}\n")
    for n in range(1, ops):
        store.session = f"s{n // 20}"
        name = f"/memories/f{0 if n % 10 == 0 else n % FILES}.md"
        if n < FILES and n % 10:
            store.create(name, "".join(f"line {i} of {name}\n" for i in range(40)), overwrite=True)
        else:
            store.str_replace(name, f"line {n % 40} ", f"line {n % 40} (edit {n}) ")
    store.close()


def run(ops: int, repeat: int, work: Path) -> None:
    key = generate_key()
    base = work / f"base-{ops}.git"
    start = time.perf_counter()
    build(base, key, ops, work / "state-build")
    built = time.perf_counter() - start
    times = []
    for attempt in range(repeat):
        copy = work / f"copy-{ops}-{attempt}.git"
        shutil.copytree(base, copy)
        # A state directory of its own: the copy is another replica, with its own mark.
        store = MemoryStore.open(copy, key, state_dir=work / f"state-{ops}-{attempt}")
        start = time.perf_counter()
        done = store.redact(SECRET)
        times.append(time.perf_counter() - start)
        store.close()
        shutil.rmtree(copy)
    print(
        f"{ops:>6} operations: redact median {statistics.median(times):.2f} s "
        f"(runs: {', '.join(f'{t:.2f}' for t in times)}); {done.versions} versions, "
        f"{done.operations} operations rewritten; store built in {built:.0f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, action="append", help="operations (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (default 3)")
    args = parser.parse_args()
    os.environ.setdefault("GITMEM_GC_AUTO", "0")
    with tempfile.TemporaryDirectory(prefix="bench-redact-") as tmp:
        for ops in args.ops or [1000, 10000]:
            run(ops, args.repeat, Path(tmp))


if __name__ == "__main__":
    main()
