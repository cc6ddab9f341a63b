"""CPU time of one command in a new process (a cold read or write), on a small and grown stores.

    python benchmarks/bench_cold.py --grown-cache /tmp/gitmem-grown          # 5 runs, 10,000
    python benchmarks/bench_cold.py --runs 9 --files 2000 --dir /dev/shm

Builds (or copies from ``--grown-cache``, as ``bench_commands.py`` keeps them) a store of 20
notes in ``/memories``, ``bench_commands``' flat store (N notes in ``/memories`` itself) and its
100-directory store, then for each run and store starts one fresh Python process per command:
it imports gitmem, then opens the store and runs the one command, timing only that (process
CPU time): ``view`` of one note, ``view /memories`` (every file's size: what it touches),
``str_replace`` of a line of that note (through ``GitMemoryTool``), a ``create`` of a new
note next to it and a ``delete`` of another note there (a different one each run, at most
14 runs); ``view`` and ``view /memories`` again through the CLI (``gitmem view``). Prints
each median in milliseconds and its ratio to the small store's. Compare two versions of gitmem
by running this script from each (its own ``gitmem`` is the one imported).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_commands

import gitmem

# The one command, run in the child: argv is STORE KEY NOTE COMMAND VIA VICTIM (the note a
# delete removes); prints its CPU seconds and the gitmem it imported.
_CHILD = r"""
import contextlib, io, sys, time
store, key, note, command, via, victim = sys.argv[1:7]
import gitmem, gitmem.cli, gitmem.tool
folder = note.rsplit("/", 1)[0]
new = folder + "/new-" + str(time.time_ns()) + ".md"
calls = {
    "view": {"command": "view", "path": note},
    "view-dir": {"command": "view", "path": "/memories"},
    "str_replace": {"command": "str_replace", "path": note,
                    "old_str": "status: in progress", "new_str": "status: in progress "},
    "create": {"command": "create", "path": new, "file_text": "a new note\n"},
    "delete": {"command": "delete", "path": victim},
}
argv = {"view": ["view", note], "view-dir": ["view", "/memories"]}
start = time.process_time()
if via == "tool":
    gitmem.GitMemoryTool(store, key=key).call(calls[command])
else:
    with contextlib.redirect_stdout(io.StringIO()):
        gitmem.cli.main(["--repo", store, *argv[command]], standalone_mode=False)
print(time.process_time() - start)
print(gitmem.__file__)
"""

COMMANDS = [
    ("view", "tool"),
    ("view-dir", "tool"),
    ("str_replace", "tool"),
    ("create", "tool"),
    ("delete", "tool"),
    ("view", "cli"),
    ("view-dir", "cli"),
]


def cold_cpu(store: Path, key: str, note: str, command: str, via: str, victim: str) -> float:
    """CPU seconds of ``command`` in a new process (imports excluded); a delete removes
    ``victim``."""
    env = {**os.environ, "GITMEM_KEY": key}
    # -P: the working directory is not put on the child's path (a gitmem checkout there would
    # be imported instead of this script's).
    out = subprocess.run(
        [sys.executable, "-P", "-c", _CHILD, str(store), key, note, command, via, victim],
        env=env,
        cwd=store.parent,
        check=True,
        capture_output=True,
        text=True,
    )
    *_, cpu, module = out.stdout.strip().splitlines()
    if module != gitmem.__file__:
        raise SystemExit(f"the child imported {module}, not {gitmem.__file__}")
    return float(cpu)


def small_store(path: Path, key: str) -> None:
    store = gitmem.MemoryStore.open(path, key, create=True)
    for i in range(20):
        store.create(bench_commands.grown_path(i, True), bench_commands.note(i))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command")
    parser.add_argument("--files", type=int, default=10_000, help="notes in each grown store")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the stores")
    parser.add_argument("--grown-cache", type=Path, default=None, metavar="DIR")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gitmem-cold-", dir=args.dir) as tmp:
        base = Path(tmp)
        os.environ["GITMEM_STATE_DIR"] = str(base / "state")
        key = gitmem.generate_key()
        if args.grown_cache is not None:
            key = bench_commands.cached_key(args.grown_cache, key)
        # Each store: its path, the note viewed and edited, the notes deleted (one a run).
        stores = {
            "small": (
                base / "small.git",
                "/memories/f5.md",
                [bench_commands.grown_path(6 + run, True) for run in range(args.runs)],
            )
        }
        if args.runs > 14:
            parser.error("--runs: at most 14 (the small store's notes to delete)")
        small_store(stores["small"][0], key)
        middle = args.files // 2
        for name, flat in (("flat", True), ("100 dirs", False)):
            path = base / f"{name.replace(' ', '-')}.git"
            bench_commands.built_store(path, key, args.files, flat, args.grown_cache)
            victims = [
                bench_commands.grown_path(middle + 1 + run, flat) for run in range(args.runs)
            ]
            stores[name] = (path, bench_commands.grown_path(middle, flat), victims)
        samples: dict[str, dict[str, list[float]]] = {name: {} for name in stores}
        for run in range(args.runs):
            for command, via in COMMANDS:
                label = f"{command} ({via})"
                for name, (path, note, victims) in stores.items():
                    cpu = cold_cpu(path, key, note, command, via, victims[run])
                    samples[name].setdefault(label, []).append(cpu)
    medians = {
        name: {label: statistics.median(values) * 1e3 for label, values in rows.items()}
        for name, rows in samples.items()
    }
    if args.json:
        print(json.dumps({"runs": args.runs, "files": args.files, "median_ms": medians}))
        return 0
    print(f"cold CPU, median of {args.runs} fresh processes (ms); grown stores: {args.files:,}")
    for name, rows in medians.items():
        for label, ms in rows.items():
            ratio = ms / medians["small"][label]
            print(f"{name:>9} {label:<22} {ms:9.1f}  {ratio:6.1f}x small")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
