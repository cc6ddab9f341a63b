"""What `gitmem gc` and `gitmem verify` cost as history grows: time, peak memory, bytes.

    python benchmarks/bench_history_costs.py                       # 5,000 and 20,000 operations
    python benchmarks/bench_history_costs.py --ops 20000 --cache /tmp/gitmem-history-costs

Each store is ``bench_log.py``'s (real, authenticated operations by a series of sessions,
written to packs in bulk), with one object that nothing references packed among its history,
as a write that failed after a checkpoint leaves one: ``gitmem gc`` with its default grace keeps
that object. With ``--cache DIR`` each store is built once and copied from there afterwards.
Each command runs in a process of its own on a fresh copy; its peak resident set size is the
process's ``ru_maxrss`` (``os.wait4``). Then one new operation on one copy: libgit2's walk of
what a push of it sends, its push into another copy and its pull from there into a third, the
other copy at a local path and then served by ``git daemon`` on 127.0.0.1; beside plain git's
push of one new commit between two other copies (``--transfers-only``: these alone).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pygit2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers_git_servers import git_daemon

from gitmem import generate_key


def build(path: Path, key: str, ops: int) -> None:
    """``bench_log``'s store of ``ops`` operations, one unreferenced blob in its first pack."""
    import bench_log as module  # run as a script, its sibling is importable

    class WithGarbage(module.PackingRepo):
        def __init__(self, where: Path) -> None:
            super().__init__(where)
            self.write_blob(b"written by a write that failed after a checkpoint")

    # build_store makes its repository through the module's name: this subclass instead.
    setattr(module, "PackingRepo", WithGarbage)  # noqa: B010
    module.build_store(path, key, ops)


def store(ops: int, cache: Path | None, scratch: Path) -> tuple[Path, str]:
    """A fresh copy of the store of ``ops`` operations and its key."""
    kept = (cache or scratch) / f"history-{ops}.git"
    key_file = kept.with_suffix(".key")
    if not kept.exists():
        key = generate_key()
        build(kept, key, ops)
        key_file.write_text(key)
        key_file.chmod(0o600)
    copy = scratch / f"run-{ops}-{time.monotonic_ns()}.git"
    shutil.copytree(kept, copy, symlinks=True)
    return copy, key_file.read_text().strip()


def run(command: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (bytes) and standard output of ``command``."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(command)} failed: {err.read().decode()}")
    return elapsed, usage.ru_maxrss * 1024, out.decode()


class Transfers(NamedTuple):
    """Seconds for one new operation to travel (see :func:`transfer_times`)."""

    walk: float
    push: float
    pull: float


def transfer_times(
    ops: int, cache: Path | None, scratch: Path, url: Callable[[Path], str]
) -> Transfers:
    """One new operation on a copy of the store of ``ops`` operations: libgit2's walk of the
    commits a push sends (from the new head, the remote's head hidden, by time, as
    ``git_remote_push`` walks), then ``MemoryStore.push`` into another copy (at ``url`` of its
    path), then ``MemoryStore.pull`` of it from there into a third copy."""
    import gitmem

    remote, key = store(ops, cache, scratch)
    local, _ = store(ops, cache, scratch)
    behind, _ = store(ops, cache, scratch)
    mine = gitmem.MemoryStore.open(local, key, accept_store=True, state_dir=scratch / "push-state")
    mine.add_remote("origin", url(remote))
    mine.create(gitmem.parse_path("/memories/one-more.md"), "one new operation\n")
    mine.checkpoint()
    git_repo = pygit2.Repository(str(local))
    head = git_repo.references["refs/heads/main"].target
    started = time.perf_counter()
    walker = git_repo.walk(head, pygit2.enums.SortMode.TIME)
    walker.hide(pygit2.Repository(str(remote)).references["refs/heads/main"].target)
    assert len(list(walker)) == 1
    walked = time.perf_counter() - started
    started = time.perf_counter()
    mine.push("origin")
    pushed = time.perf_counter() - started
    theirs = gitmem.MemoryStore.open(
        behind, key, accept_store=True, state_dir=scratch / "pull-state"
    )
    theirs.add_remote("origin", url(remote))
    started = time.perf_counter()
    theirs.pull("origin")
    pulled = time.perf_counter() - started
    assert theirs.head() == mine.head()
    mine.close()
    theirs.close()
    for path in (remote, local, behind):
        shutil.rmtree(path)
    return Transfers(walked, pushed, pulled)


def plain_push_time(ops: int, cache: Path | None, scratch: Path) -> float:
    """Seconds for plain git's push of one new commit between two copies of the store."""
    plain_remote, _ = store(ops, cache, scratch)
    plain, _ = store(ops, cache, scratch)

    def git(*words: str, data: str | None = None) -> str:
        env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@invalid")
        env.update(GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@invalid")
        done = subprocess.run(
            ["git", "--git-dir", str(plain), *words],
            input=data,
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        return done.stdout.strip()

    plain_head = git("rev-parse", "refs/heads/main")
    blob = git("hash-object", "-w", "--stdin", data="one new file\n")
    listing = git("ls-tree", f"{plain_head}^{{tree}}") + f"\n100644 blob {blob}\tplain-new\n"
    commit = git("commit-tree", git("mktree", data=listing), "-p", plain_head, "-m", "one")
    git("update-ref", "refs/heads/main", commit)
    started = time.perf_counter()
    git("push", "-q", str(plain_remote), "main:main")
    plain_pushed = time.perf_counter() - started
    for path in (plain_remote, plain):
        shutil.rmtree(path)
    return plain_pushed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, nargs="+", default=[5_000, 20_000])
    parser.add_argument("--cache", type=Path, default=None, help="keep the built stores here")
    parser.add_argument(
        "--transfers-only", action="store_true", help="skip verify and gc: push and pull only"
    )
    args = parser.parse_args(argv)
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
    gitmem = [sys.executable, "-m", "gitmem"]
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        env = dict(os.environ, GITMEM_STATE_DIR=str(scratch / "state"))
        env.pop("GITMEM_KEY_FILE", None)
        print(f"{'operations':>10} {'command':<7} {'seconds':>8} {'peak RSS MB':>12}  result")
        for ops in args.ops:
            for command in () if args.transfers_only else ("verify", "gc"):
                path, key = store(ops, args.cache, scratch)
                env["GITMEM_KEY"] = key
                elapsed, peak, out = run([*gitmem, "--repo", str(path), command, "--json"], env)
                if command == "gc":
                    report = json.loads(out.splitlines()[-1])
                    result = (
                        f"{report['bytes_before']:,} -> {report['bytes_after']:,} bytes, "
                        f"kept {report['kept']}"
                    )
                else:
                    report = json.loads(out.splitlines()[-1])
                    result = f"ok {report.get('ok')}, {report.get('commits', '?')} commits"
                print(f"{ops:>10,} {command:<7} {elapsed:>8.1f} {peak / 1e6:>12.0f}  {result}")
                shutil.rmtree(path)
            with git_daemon(scratch) as served:
                for where, url in (("a local path", str), ("git://", served_at(served))):
                    moved = transfer_times(ops, args.cache, scratch, url)
                    print(
                        f"{ops:>10,} {'push':<7} {moved.push:>8.2f} {'':>12}  one new operation, "
                        f"over {where} (libgit2's walk of what it sends: {moved.walk:.3f} s)"
                    )
                    print(
                        f"{ops:>10,} {'pull':<7} {moved.pull:>8.2f} {'':>12}  one new operation, "
                        f"over {where}"
                    )
            plain = plain_push_time(ops, args.cache, scratch)
            print(f"{ops:>10,} {'plain':<7} {plain:>8.2f} {'':>12}  git's push of one new commit")
    return 0


def served_at(base: str) -> Callable[[Path], str]:
    """The ``git://`` URL of a repository in the directory ``git daemon`` serves at ``base``."""
    return lambda path: f"{base}/{path.name}"


if __name__ == "__main__":
    raise SystemExit(main())
