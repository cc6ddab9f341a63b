"""How fast ``gitmem log --json`` streams a long history: time to its first line and to its end.

    python benchmarks/bench_log.py                   # 100,000 commits
    python benchmarks/bench_log.py --commits 20000   # smaller
    python benchmarks/bench_log.py --store /tmp/big.git --reuse   # time an existing bench store

The store is built with real gitmem operations (create, str_replace, insert, rename, delete by
a series of sessions) through ``MemoryStore``'s public methods, so every commit is a genuine
authenticated gitmem commit; only the object database is bypassed: :class:`PackingRepo` hashes
objects itself and writes them as one pack every 10,000 commits (``gitmem.git.pack.write_pack``),
instead of writing one loose file per object and moving the branch after every commit. The
branch is set once at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from gitmem import MemoryStore, generate_key, parse_path
from gitmem.format import MAX_BLOB_BYTES
from gitmem.git.flush import Durability
from gitmem.git.objects import (
    TREE_MODE,
    CommitInfo,
    TreeEntry,
    commit_bytes,
    parse_commit,
    parse_tree,
)
from gitmem.git.pack import write_pack
from gitmem.git.refs import BRANCH
from gitmem.git.repo import GitRepo
from gitmem.git.wal import object_id

# Objects go to a new pack every this many commits, so that memory stays bounded and the
# objects written earlier become readable through the real repository.
_COMMITS_PER_PACK = 10_000


def _tree_bytes(entries: list[TreeEntry]) -> bytes:
    def order(entry: TreeEntry) -> bytes:
        name = entry.name.encode()
        return name + b"/" if entry.mode == TREE_MODE else name

    return b"".join(
        f"{entry.mode:o} {entry.name}".encode() + b"\0" + bytes.fromhex(entry.oid)
        for entry in sorted(entries, key=order)
    )


class PackingRepo(GitRepo):
    """A :class:`GitRepo` whose new objects are hashed here and appended to packs.

    Objects written since the last pack was finished are served from memory; the branch lives
    in memory until :meth:`finish` sets it. No lock is taken: the benchmark is the only writer.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.pending: dict[str, tuple[str, bytes]] = {}
        self.branch: str | None = None
        self.commits = 0

    def _put(self, kind: str, data: bytes) -> str:
        oid = object_id(kind.encode(), data)
        self.pending.setdefault(oid, (kind, data))
        return oid

    def _get(self, oid: str, kind: str) -> bytes | None:
        found = self.pending.get(oid)
        if found is None:
            return None
        assert found[0] == kind, f"{oid} is a {found[0]}, not a {kind}"
        return found[1]

    def write_blob(self, data: bytes) -> str:
        return self._put("blob", data)

    def read_blob(self, oid: str, limit: int = MAX_BLOB_BYTES) -> bytes:
        data = self._get(oid, "blob")
        return super().read_blob(oid, limit) if data is None else data

    def has(self, oid: str) -> bool:
        return oid in self.pending or super().has(oid)

    def write_tree(self, entries: list[TreeEntry]) -> str:
        return self._put("tree", _tree_bytes(entries))

    def write_raw_tree(self, data: bytes) -> str:
        return self._put("tree", data)

    def read_tree(self, oid: str) -> list[TreeEntry]:
        data = self._get(oid, "tree")
        return super().read_tree(oid) if data is None else parse_tree(data, oid)

    def write_commit(self, tree: str, parents: list[str], message: bytes, *, time: int) -> str:
        oid = self._put("commit", commit_bytes(tree, parents, message, time=time))
        self.commits += 1
        if self.commits % _COMMITS_PER_PACK == 0:
            self.flush()
        return oid

    def read_commit(self, oid: str) -> CommitInfo:
        data = self._get(oid, "commit")
        return super().read_commit(oid) if data is None else parse_commit(data, oid)

    def ref(self, name: str) -> str | None:
        return self.branch if name == BRANCH else super().ref(name)

    def update_ref(
        self, name: str, new: str, expected: str | None, *, wait: bool = True
    ) -> Durability:
        if name != BRANCH:
            # The metadata (a store's first split directory makes it format 4): the blob goes
            # to disk first, then the real ref moves to it.
            self.flush()
            return super().update_ref(name, new, expected, wait=wait)
        assert expected == self.branch
        self.branch = new
        return None

    @contextlib.contextmanager
    def write_lock(self, timeout: float) -> Iterator[None]:
        yield

    def flush(self) -> None:
        """Write the objects held in memory as one pack (they are then on disk), newest first
        as a checkpoint packs its objects (a tree's newest version whole, older ones deltas)."""
        objects = [
            (oid, kind.encode(), data) for oid, (kind, data) in reversed(self.pending.items())
        ]
        write_pack(objects, self.path / "objects" / "pack", self.path)
        self.pending.clear()

    def finish(self) -> None:
        """Write the last pack and point the real branch at the newest commit."""
        self.flush()
        if self.branch is not None:
            GitRepo(self.path).update_ref(BRANCH, self.branch, GitRepo(self.path).ref(BRANCH))


def build_store(path: Path, key: str, commits: int, *, seed: int = 1) -> None:
    """Make a store at ``path`` whose history is ``commits`` real operations."""
    base = MemoryStore.init(path, key, check_rollback=False)
    repo = PackingRepo(path)
    store = MemoryStore(repo, base.keys, session="agent-00000", check_rollback=False)
    rng = random.Random(seed)
    topics = [f"/memories/notes/topic-{k:02d}.md" for k in range(20)]
    counters = dict.fromkeys(topics, -1)  # -1: not created yet (or renamed away)
    progress = parse_path("/memories/progress.md")
    progress_lines = 0
    days: list[str] = []
    while repo.commits < commits:
        n = repo.commits
        # A new session every 40 operations, as a long-running agent's many sessions would.
        store.session = f"agent-{n // 40:05d}"
        roll = n % 50
        fresh = [t for t in topics if counters[t] < 0]
        if fresh:
            topic = fresh[0]
            store.create(parse_path(topic), f"# {topic}\n\ncounter: 0\nseen by: nobody\n")
            counters[topic] = 0
        elif roll == 0:
            day = f"/memories/log/day-{n:06d}.md"
            store.create(parse_path(day), f"Worked on item {n}.\nNext: item {n + 1}.\n")
            days.append(day)
        elif roll == 25 and len(days) > 20:
            store.delete(parse_path(days.pop(0)))
        elif n % 1000 == 37:
            topic = rng.choice(topics)
            archived = f"/memories/archive/{Path(topic).stem}-{n}.md"
            store.rename(parse_path(topic), parse_path(archived))
            counters[topic] = -1
        elif roll % 7 == 3:
            if progress_lines in (0, 100):
                store.create(progress, "# Progress\n", overwrite=True)
                progress_lines = 1
            else:
                store.insert(progress, progress_lines, f"- step {n}: done")
                progress_lines += 1
        else:
            topic = topics[rng.randrange(len(topics))]
            old = f"counter: {counters[topic]}\n"
            counters[topic] += 1
            store.str_replace(parse_path(topic), old, f"counter: {counters[topic]}\n")
    repo.finish()


def gitmem_command() -> list[str]:
    """The installed ``gitmem`` next to this interpreter, else ``python -m gitmem``."""
    script = Path(sys.executable).with_name("gitmem")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gitmem"]


def time_log(path: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Seconds to the first line and to the end of ``gitmem log --json``, and its line count."""
    command = [*gitmem_command(), "--repo", str(path), "log", "--json"]
    start = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, env=env) as proc:
        out = proc.stdout
        assert out is not None
        first = out.readline()
        first_at = time.perf_counter() - start
        lines = first.count(b"\n")
        for block in iter(lambda: out.read(1 << 16), b""):
            lines += block.count(b"\n")
        end_at = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"gitmem log failed with exit code {proc.returncode}")
    return first_at, end_at, lines


def time_startup(env: dict[str, str]) -> float:
    """Seconds for ``gitmem --version``: the cost of starting the command at all."""
    started = time.perf_counter()
    subprocess.run([*gitmem_command(), "--version"], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    """Build (or reuse) a store and time ``gitmem log --json`` on it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--store", type=Path, help="Where to build the store (default: a temp dir)")
    parser.add_argument("--reuse", action="store_true", help="Time the store at --store as it is")
    parser.add_argument("--runs", type=int, default=3, help="Timed runs of gitmem log (best kept)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gitmem-bench-log-"))
    try:
        path = args.store or scratch / "store.git"
        key_file = path.with_name(path.name + ".key")
        if args.reuse:
            key = key_file.read_text().strip()
        else:
            if path.exists():
                raise SystemExit(f"{path} exists; pass --reuse to time it")
            key = generate_key()
            started = time.perf_counter()
            build_store(path, key, args.commits)
            built = time.perf_counter() - started
            key_file.write_text(key + "\n")
            os.chmod(key_file, 0o600)
            print(f"built {args.commits:,} commits in {built:.1f}s ({args.commits / built:,.0f}/s)")
        env = dict(os.environ, GITMEM_KEY=key, GITMEM_STATE_DIR=str(scratch / "state"))
        env.pop("GITMEM_KEY_FILE", None)
        results = [time_log(path, env) for _ in range(args.runs)]
        first = min(r[0] for r in results)
        end = min(r[1] for r in results)
        total = results[0][2]
        if total != args.commits and not args.reuse:
            raise SystemExit(f"gitmem log printed {total:,} lines for {args.commits:,} commits")
        startup = min(time_startup(env) for _ in range(args.runs))
        print(f"gitmem log --json over {total:,} operations (best of {args.runs} runs):")
        print(f"  first line after {first * 1000:,.0f} ms")
        print(f"  last line after  {end:,.2f} s  ({total / end:,.0f} commits/s)")
        print(
            f"  for scale: starting gitmem at all (gitmem --version) takes {startup * 1000:,.0f} ms"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
