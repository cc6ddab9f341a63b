"""Time for two replicas to sync N new commits over a loopback ``git daemon``, and its growth.

    python benchmarks/bench_sync.py                      # 1,000 and 10,000 commits
    python benchmarks/bench_sync.py --commits 1000 --runs 3

For each N: replica A and replica B start equal (B cloned from the daemon); A makes N new
commits (real gitmem writes: a progress log appended to and a handful of notes edited, by a
series of sessions); then ``A.sync()`` pushes them and ``B.sync()`` pulls them (fetch,
authentication of every new commit on the ancestry walk, fast-forward) over ``git://127.0.0.1``.
Building the N commits is not timed, and runs with the file-system flushes turned off (they
are what makes a write durable, not what a sync costs). Reported: the push, the pull, and their
sum, per run and as medians, with the time per commit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers_git_servers import bare_repo, git_daemon

import gitmem.git.flush
from gitmem import MemoryStore, generate_key


def build(store: MemoryStore, commits: int) -> None:
    """``commits`` real operations on ``store``, without durability flushes."""
    names = vars(gitmem.git.flush)  # the module's own binding of syncfs is the one it calls
    real = names["syncfs"]
    names["syncfs"] = lambda path: None
    try:
        for i in range(commits):
            store.session = f"s{i // 50}"
            if i % 5 == 0:
                store.create(f"/memories/notes/n{i % 40}.md", f"note {i}\n" * 3, overwrite=True)
            else:
                log = "/memories/progress.md"
                if store.kind(log) is None:
                    store.create(log, "# progress\n")
                store.insert(log, 1, f"step {i}: done")
    finally:
        names["syncfs"] = real


def one_run(root: Path, served: Path, url: str, commits: int, key: str) -> tuple[float, float]:
    bare_repo(served, root.name + ".git")
    target = f"{url}/{root.name}.git"
    a = MemoryStore.init(root / "a.git", key, state_dir=root / "sa")
    a.create("/memories/start.md", "start\n")
    a.add_remote("origin", target)
    a.push()
    b = MemoryStore.clone(target, root / "b.git", key, state_dir=root / "sb")
    build(a, commits)
    started = time.perf_counter()
    pushed = a.sync()
    middle = time.perf_counter()
    pulled = b.sync()
    ended = time.perf_counter()
    assert pushed.action == "pushed" and pulled.action == "fast-forward", (pushed, pulled)
    assert b.head() == a.head()
    return middle - started, ended - middle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=3, help="runs per size (default 3)")
    args = parser.parse_args()
    key = generate_key()
    with tempfile.TemporaryDirectory() as tmp:
        served = Path(tmp) / "served"
        served.mkdir()
        with git_daemon(served) as url:
            base: float | None = None
            for commits in args.commits:
                pushes, pulls = [], []
                for run in range(args.runs):
                    root = Path(tmp) / f"n{commits}-r{run}"
                    root.mkdir()
                    push, pull = one_run(root, served, url, commits, key)
                    pushes.append(push)
                    pulls.append(pull)
                    print(
                        f"{commits:>6} commits run {run + 1}: push {push:.2f} s, pull {pull:.2f} s"
                    )
                total = statistics.median(p + q for p, q in zip(pushes, pulls, strict=True))
                per = total / commits * 1000
                growth = "" if base is None else f", {total / base:.1f}x the first size"
                base = base or total
                print(
                    f"{commits:>6} commits median: push {statistics.median(pushes):.2f} s, "
                    f"pull {statistics.median(pulls):.2f} s, sync {total:.2f} s "
                    f"({per:.2f} ms per commit{growth})"
                )


if __name__ == "__main__":
    main()
