"""Many agents, one remote: N processes write and sync against one loopback ``git daemon``.

    python benchmarks/bench_many_agents.py                    # N = 2, 5, 10, 20
    python benchmarks/bench_many_agents.py --agents 20 --writes 20 --tries 1

Each agent is a separate process with its own replica (``MemoryStore.clone`` of the served
store) and, as agents on one machine do, one state directory shared by all (with
``--state-per-agent``, one each, as agents on separate machines have: they do not take turns,
they race). Once every agent
has cloned, each makes ``--writes`` writes and calls ``sync()`` after each (up to ``--tries``
calls at a sync point; the default, 1, measures what ``sync`` achieves with its own retries).
The writes edit neighbouring lines of shared files: even writes tick the agent's line of the
step in ``/memories/board.md`` (the lines of all agents for one step are adjacent), odd writes
append an entry at the end of ``/memories/log.md``.

When all agents are done (or ``--timeout`` seconds have passed), the parent syncs every replica
in turn for up to three rounds until all of them and the remote hold one head, then checks that
every write an agent saw acknowledged is in that memory. Reported per N:

* ``syncs``: sync points; ``ok``: those where a ``sync()`` call succeeded;
* ``false alarms``: ``RollbackDetected`` raised by a sync (nothing rewinds the remote here);
* ``lost``: acknowledged writes missing from the converged memory;
* ``commits/write``: commits the remote's branch gained, per write;
* median and p90 time of a successful ``sync()`` call;
* ``siblings``: conflict siblings in the converged memory; ``rounds``: convergence rounds.
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
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers_git_servers import bare_repo, git_daemon

from gitmem import MemoryStore, generate_key
from gitmem.errors import GitMemError, RollbackDetected

BOARD = "/memories/board.md"
LOG = "/memories/log.md"


def board_line(step: int, agent: int, done: bool) -> str:
    return f"- [{'x' if done else ' '}] step {step:02d} agent {agent:02d}"


def log_line(step: int, agent: int) -> str:
    return f"agent {agent:02d} step {step:02d} done"


def state_of(spec: dict[str, Any], agent: int) -> Path:
    """The state directory of ``agent``: shared, or its own with ``--state-per-agent``."""
    root = Path(spec["root"])
    return root / f"state{agent:02d}" if spec.get("state_per_agent") else root / "state"


def trace_sync(events: list[list[Any]]) -> None:
    """Record in ``events`` each network round trip, merge and pause a sync makes, as
    ``[what, seconds]`` (``--trace``: where a sync's time goes)."""
    import gitmem.sync
    from gitmem.git.repo import GitRepo

    def timed(what: str, call: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                events.append([what, time.perf_counter() - started])

        return wrapper

    def timed_entry(what: str, manager: Any) -> Any:
        # The fetch happens when the block is entered.
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            context = manager(*args, **kwargs)
            value = context.__enter__()
            events.append([what, time.perf_counter() - started])

            class Entered:
                def __enter__(self) -> Any:
                    return value

                def __exit__(self, *exc: Any) -> Any:
                    return context.__exit__(*exc)

            return Entered()

        return wrapper

    GitRepo.list_remote = timed("list", GitRepo.list_remote)  # type: ignore[method-assign]
    GitRepo.fetching = timed_entry("fetch", GitRepo.fetching)  # type: ignore[method-assign]
    GitRepo.push = timed("push", GitRepo.push)  # type: ignore[method-assign]
    gitmem.sync._integrate = timed("merge", gitmem.sync._integrate)
    # sync's own pauses only (not the sleeps of the rest of the process).
    gitmem.sync.time = types.SimpleNamespace(  # type: ignore[assignment, attr-defined]
        monotonic=time.monotonic, sleep=timed("pause", time.sleep)
    )


def agent_main(spec: dict[str, Any]) -> None:
    """One agent: clone, wait for the start signal, write and sync; results as JSON."""
    me, root = spec["agent"], Path(spec["root"])
    events: list[list[Any]] = []
    store = MemoryStore.clone(
        spec["url"], root / f"a{me:02d}.git", spec["key"], state_dir=state_of(spec, me)
    )
    store.session = f"agent{me:02d}"
    if spec.get("trace"):
        trace_sync(events)
    (root / f"ready{me:02d}").touch()
    while not (root / "go").exists():
        time.sleep(0.01)
    deadline = spec["deadline"]
    acked: list[int] = []
    syncs: list[dict[str, Any]] = []
    for step in range(spec["writes"]):
        if time.time() > deadline:
            break
        if step % 2 == 0:
            store.str_replace(BOARD, board_line(step, me, False), board_line(step, me, True))
        else:
            lines = store.read_text(LOG).count("\n")
            store.insert(LOG, lines, log_line(step, me))
        acked.append(step)
        point: dict[str, Any] = {"calls": [], "ok": False}
        for _ in range(spec["tries"]):
            events.clear()
            started = time.perf_counter()
            try:
                store.sync()
            except RollbackDetected as exc:
                outcome = f"false alarm: {exc}"
            except GitMemError as exc:
                outcome = f"{type(exc).__name__}: {exc}"
            else:
                outcome = "ok"
            point["calls"].append([outcome, time.perf_counter() - started, list(events)])
            if outcome == "ok":
                point["ok"] = True
                break
        syncs.append(point)
    Path(spec["out"]).write_text(json.dumps({"acked": acked, "syncs": syncs}))


def remote_commits(bare: Path) -> int:
    out = subprocess.run(
        ["git", "--git-dir", str(bare), "rev-list", "--count", "refs/heads/main"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def one_run(n: int, args: argparse.Namespace, key: str, tmp: Path) -> dict[str, Any]:
    root = tmp / f"n{n}"
    served = root / "served"
    served.mkdir(parents=True)
    bare = bare_repo(served, "memory.git")
    with git_daemon(served) as base_url:
        url = f"{base_url}/memory.git"
        seed = MemoryStore.init(root / "seed.git", key, state_dir=root / "state")
        board = "".join(
            board_line(step, agent, False) + "\n"
            for step in range(0, args.writes, 2)
            for agent in range(n)
        )
        seed.create(BOARD, "# board\n" + board)
        seed.create(LOG, "# log\n")
        seed.add_remote("origin", url)
        seed.push()
        seeded = remote_commits(bare)
        deadline = time.time() + args.timeout
        procs = []
        for agent in range(n):
            spec = {
                "agent": agent,
                "root": str(root),
                "url": url,
                "key": key,
                "writes": args.writes,
                "tries": args.tries,
                "deadline": deadline,
                "trace": getattr(args, "trace", False),
                "state_per_agent": getattr(args, "state_per_agent", False),
                "out": str(root / f"out{agent:02d}.json"),
            }
            procs.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--agent-spec", json.dumps(spec)],
                    env={**os.environ, "GITMEM_SESSION": f"agent{agent:02d}"},
                )
            )
        while not all((root / f"ready{a:02d}").exists() for a in range(n)):
            if any(p.poll() not in (None, 0) for p in procs):
                raise SystemExit("an agent failed to clone")
            time.sleep(0.05)
        started = time.perf_counter()
        (root / "go").touch()
        for proc in procs:
            proc.wait(timeout=max(1.0, deadline - time.time()) + 120)
        wall = time.perf_counter() - started
        results = [json.loads((root / f"out{a:02d}.json").read_text()) for a in range(n)]
        replicas = [
            MemoryStore.open(
                root / f"a{a:02d}.git",
                key,
                state_dir=state_of(
                    {"root": root, "state_per_agent": getattr(args, "state_per_agent", False)}, a
                ),
            )
            for a in range(n)
        ]
        rounds = 0
        for rounds in range(1, 4):
            for replica in replicas:
                try:
                    replica.sync()
                except GitMemError as exc:
                    print(f"  convergence round {rounds}: {type(exc).__name__}: {exc}")
            heads = {replica.head() for replica in replicas}
            if len(heads) == 1 and heads == {seed.pull().head}:
                break
        else:
            rounds = -1
        final = replicas[0]
        board_text, log_text = final.read_text(BOARD), final.read_text(LOG)
        lost = 0
        for agent, result in enumerate(results):
            for step in result["acked"]:
                if step % 2 == 0:
                    lost += board_line(step, agent, True) not in board_text
                else:
                    lost += log_line(step, agent) not in log_text
        siblings = sum(".conflict-" in path for path in final.files())
        points = [point for result in results for point in result["syncs"]]
        calls = [call for point in points for call in point["calls"]]
        ok_times = [seconds for outcome, seconds, _ in calls if outcome == "ok"]
        failures: dict[str, int] = {}
        for outcome, _, _ in calls:
            if outcome != "ok":
                kind = outcome.split(":")[0]
                failures[kind] = failures.get(kind, 0) + 1
        writes = sum(len(result["acked"]) for result in results)
        return {
            "agents": n,
            "syncs": len(points),
            "ok": sum(point["ok"] for point in points),
            "false_alarms": sum(outcome.startswith("false alarm") for outcome, _, _ in calls),
            "lost": lost,
            "writes": writes,
            "commits_per_write": (remote_commits(bare) - seeded) / max(1, writes),
            "median": statistics.median(ok_times) if ok_times else float("nan"),
            "p90": percentile(ok_times, 0.9),
            "siblings": siblings,
            "rounds": rounds,
            "wall": wall,
            "ok_per_second": len(ok_times) / wall,
            "failures": failures,
            "trace": trace_summary(calls) if getattr(args, "trace", False) else None,
        }


def trace_summary(calls: list[list[Any]]) -> dict[str, Any]:
    """Per outcome (ok, or the error's kind): calls, mean seconds, mean attempts, round trips
    per attempt, and mean seconds spent in each part (``--trace``)."""
    groups: dict[str, list[list[Any]]] = {}
    for call in calls:
        groups.setdefault(call[0].split(":")[0], []).append(call)
    summary: dict[str, Any] = {}
    for kind, members in groups.items():
        parts: dict[str, float] = {}
        attempts = trips = 0
        for _, _, events in members:
            attempts += sum(what == "fetch" for what, _ in events) or 1
            trips += sum(what in ("list", "fetch", "push") for what, _ in events)
            for what, seconds in events:
                parts[what] = parts.get(what, 0.0) + seconds
        count = len(members)
        summary[kind] = {
            "calls": count,
            "seconds": round(sum(call[1] for call in members) / count, 2),
            "attempts": round(attempts / count, 1),
            "trips/attempt": round(trips / max(1, attempts), 2),
            **{what: round(total / count, 2) for what, total in sorted(parts.items())},
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="*", default=[2, 5, 10, 20])
    parser.add_argument("--writes", type=int, default=20, help="writes per agent (default 20)")
    parser.add_argument("--tries", type=int, default=1, help="sync() calls per sync point")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per N (default 900)")
    parser.add_argument("--agent-spec", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print each row as JSON too")
    parser.add_argument(
        "--state-per-agent",
        action="store_true",
        help="a state directory per agent (agents on separate machines: they race)",
    )
    parser.add_argument(
        "--trace", action="store_true", help="where a sync's time goes (implies --json)"
    )
    args = parser.parse_args()
    if args.agent_spec:
        agent_main(json.loads(args.agent_spec))
        return
    key = generate_key()
    print(
        "| N | syncs | ok within retries | false alarms | lost writes | remote commits/write "
        "| median sync | p90 sync | conflict siblings | rounds to converge | ok syncs/s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.agents:
            row = one_run(n, args, key, Path(tmp))
            print(
                f"| {n} | {row['syncs']} | {row['ok']} ({100 * row['ok'] / row['syncs']:.0f}%) "
                f"| {row['false_alarms']} | {row['lost']} | {row['commits_per_write']:.2f} "
                f"| {row['median']:.2f} s | {row['p90']:.2f} s | {row['siblings']} "
                f"| {row['rounds']} | {row['ok_per_second']:.1f} |",
                flush=True,
            )
            if args.json or args.trace:
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
