"""Start-up latency: ``gitmem mcp`` to its first answers, ``gitmem`` commands, the imports.

    python benchmarks/bench_startup.py                       # 7 runs of each
    python benchmarks/bench_startup.py --runs 9 --compare /path/to/other/checkout

Each measurement is a fresh process, as a client starting ``gitmem mcp`` or a shell running a
``gitmem`` command makes one: ``python -c pass`` (the interpreter alone, the reference),
``import gitmem``, ``import gitmem.mcp_server``, ``gitmem --version``, ``gitmem log`` on a
store of 20 operations, and ``gitmem mcp`` on that store, timed from its spawn to the reply to
``initialize`` and to the reply to the first ``tools/call`` (``memory`` viewing
``/memories``). Prints, for each, the median wall time and the median CPU time of the process
in milliseconds, and the ratio of each to ``python -c pass``'s. With ``--compare``, the same
measurements of the gitmem in that directory (a checkout: its ``gitmem`` package and
``_gitmem_entry.py``), run in alternation with this checkout's so that both see the same load,
and the ratio of this checkout's medians to the other's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gitmem  # noqa: E402  (this checkout's, to build the store)

Sample = dict[str, tuple[float, float]]  # measurement: (wall seconds, CPU seconds)

INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"},
}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of the process ``argv``, which must succeed."""
    cpu, start = children_cpu(), time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, children_cpu() - cpu


def message(id_: int, method: str, params: Mapping[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()


def mcp_start(repo: Path, env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """Seconds from spawning ``gitmem mcp`` to the ``initialize`` reply and to the first tool
    call's reply, and the server process's CPU seconds."""
    cpu, start = children_cpu(), time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitmem", "--repo", str(repo), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(message(1, "initialize", INIT) + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    initialized = time.perf_counter() - start
    proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    view = {"name": "memory", "arguments": {"command": "view", "path": "/memories"}}
    proc.stdin.write(message(2, "tools/call", view) + b"\n")
    proc.stdin.flush()
    reply = json.loads(proc.stdout.readline())
    assert reply["id"] == 2 and not reply["result"]["isError"], reply
    called = time.perf_counter() - start
    proc.stdin.close()
    assert proc.wait() == 0
    return initialized, called, children_cpu() - cpu


def sample(checkout: Path, repo: Path, env: dict[str, str], cwd: Path) -> Sample:
    """One run of every measurement, with ``checkout``'s gitmem."""
    env = {**env, "PYTHONPATH": str(checkout)}
    py = sys.executable
    gm = [py, "-m", "gitmem"]
    out: Sample = {
        "python -c pass": timed([py, "-c", "pass"], env, cwd),
        "import gitmem": timed([py, "-c", "import gitmem"], env, cwd),
        "import gitmem.mcp_server": timed([py, "-c", "import gitmem.mcp_server"], env, cwd),
        "gitmem --version": timed([*gm, "--version"], env, cwd),
        "gitmem log (20 operations)": timed([*gm, "--repo", str(repo), "log"], env, cwd),
    }
    initialized, called, cpu = mcp_start(repo, env, cwd)
    out["gitmem mcp: initialize"] = (initialized, cpu)
    out["gitmem mcp: first tools/call"] = (called, cpu)
    return out


def medians(samples: list[Sample]) -> dict[str, tuple[float, float]]:
    return {
        name: (
            statistics.median(s[name][0] for s in samples),
            statistics.median(s[name][1] for s in samples),
        )
        for name in samples[0]
    }


def report(title: str, result: dict[str, tuple[float, float]]) -> None:
    base_wall, base_cpu = result["python -c pass"]
    print(f"\n{title}")
    print(f"{'':32} {'wall ms':>9} {'x pass':>7} {'CPU ms':>9} {'x pass':>7}")
    for name, (wall, cpu) in result.items():
        cpu_shown = "" if name == "gitmem mcp: initialize" else f"{cpu * 1000:9.0f}"
        ratio = "" if name == "gitmem mcp: initialize" else f"{cpu / base_cpu:7.1f}"
        print(f"{name:32} {wall * 1000:9.0f} {wall / base_wall:7.1f} {cpu_shown:>9} {ratio:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--compare", type=Path, help="another gitmem checkout to measure too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        key = gitmem.generate_key()
        repo = work / "m.git"
        with gitmem.MemoryStore.init(repo, key) as store:
            for i in range(20):
                store.create(f"/memories/note-{i}.md", f"note {i}\n")
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(work),
            "XDG_STATE_HOME": str(work / "state"),
            "XDG_CONFIG_HOME": str(work / "config"),
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GITMEM_KEY": key,
        }
        checkouts = [ROOT] if args.compare is None else [ROOT, args.compare.resolve()]
        samples: dict[Path, list[Sample]] = {c: [] for c in checkouts}
        run: Callable[[Path], Sample] = lambda c: sample(c, repo, env, work)  # noqa: E731
        for _ in range(args.runs):
            for checkout in checkouts:  # in alternation: both see the same load
                samples[checkout].append(run(checkout))
    load = os.getloadavg()
    print(f"{args.runs} runs each; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    results = {c: medians(s) for c, s in samples.items()}
    for checkout, result in results.items():
        report(f"medians, {checkout}", result)
    if args.compare is not None:
        here, there = results[ROOT], results[checkouts[1]]
        print(f"\nthis checkout / {checkouts[1]}, medians")
        print(f"{'':32} {'wall':>7} {'CPU':>7}")
        for name in here:
            print(
                f"{name:32} {here[name][0] / there[name][0]:7.2f} "
                f"{here[name][1] / there[name][1]:7.2f}"
            )


if __name__ == "__main__":
    main()
