"""Packs written by gitmem itself (gitmem/pack.py) against libgit2's pack builder, in one run.

    python benchmarks/bench_pack.py                  # 500 sessions (~1,050 writes), 5 runs
    python benchmarks/bench_pack.py --sessions 100 --runs 3
    python benchmarks/bench_pack.py --tasks gc --runs 9

A store is built once from the progress-log workload of ``bench_history_size.py`` with
automatic maintenance and the redo log off, so every object it wrote is loose. Then, each on a
fresh copy of it, alternating the two writers run after run (``Maintenance._write_pack`` as it
is, and the libgit2 ``PackBuilder`` it replaced, kept here as the reference):

- ``pack 250``: ``_write_pack`` of 250 loose objects, about one checkpoint's or one automatic
  maintenance's worth (the new writer reads and hash-checks each, then writes);
- ``memory 250``: the same 250 objects, the new writer given them in memory (``pack.write_pack``,
  as a checkpoint of the redo log, which holds them, can), the old one reading them from the
  object database as it must;
- ``maintain``: ``GitRepo.maintain()``, which packs every loose object into one pack;
- ``gc``: ``MemoryStore.gc(grace=0)``, which reads every reachable object and packs them (the
  new writer packs each as the walk read it; the reference is handed the ids and reads each
  again, as gc did with it). gc is also timed as it was before it packed what its walk read:
  each object read again and packed by gitmem (printed as "reading once / twice"). The
  median CPU time of each is printed too: on a shared machine, less disturbed by other work.

Printed: the median time of each, the ratio new/old, and the size of the pack each writes
(gitmem's holds whole objects; libgit2's may delta trees against one another). fsync stays on:
both writers flush their pack, index and directories.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pygit2

import gitmem
from gitmem.git import maintenance as git_maintenance
from gitmem.git import wal
from gitmem.git.maintenance import Maintenance
from gitmem.git.objects import ANY_KIND
from gitmem.git.pack import PackObject, write_pack
from gitmem.git.repo import GitRepo
from gitmem.store import MemoryStore

sys.path.insert(0, str(Path(__file__).parent))
from bench_history_size import apply_gitmem, workload


def libgit2_write_pack(self: Maintenance, objects: Iterable[str], pack_dir: Path) -> Path:
    """The reference: ``Maintenance._write_pack`` before gitmem wrote its own packs."""
    from gitmem.fsutil import fsync_dir, fsync_file, make_private_dirs

    make_private_dirs(pack_dir)
    tmp = Path(tempfile.mkdtemp(prefix="gitmem-gc-", dir=self.path))
    try:
        builder = pygit2.PackBuilder(self._handle.git)
        builder.set_threads(1)
        for oid in objects:
            builder.add(pygit2.Oid(hex=oid))
        builder.write(path=str(tmp))
        (idx,) = tmp.glob("pack-*.idx")
        target = pack_dir / idx.name
        for suffix in (".pack", ".rev", ".idx"):
            part = idx.with_suffix(suffix)
            if part.exists():
                fsync_file(part)
                os.replace(part, target.with_suffix(suffix))
        fsync_dir(tmp)
        fsync_dir(pack_dir)
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def pack_stream(repo: GitRepo, writer: str) -> Callable[..., Path | None]:
    """What stands in ``pack.write_pack``'s place (gc's, which streams what its walk read) for
    ``writer``: itself for "new"; for "old" (the reference) the ids, packed by libgit2, which
    reads each object again as gc once did; for "twice" the ids, each read again and packed by
    gitmem, as gc did before it packed what its walk read."""
    if writer == "new":
        return NEW_PACK_STREAM

    def write(objects: Iterable[PackObject], pack_dir: Path, work_dir: Path) -> Path | None:
        ids = [item[0] for item in objects if len(item) == 3]
        if not ids:
            return None
        if writer == "old":
            return libgit2_write_pack(repo.maintenance, ids, pack_dir)
        again = ((oid, *repo.read_any(oid, ANY_KIND)) for oid in ids)
        return NEW_PACK_STREAM(again, pack_dir, work_dir)

    return write


NEW_WRITE_PACK = Maintenance._write_pack
NEW_PACK_STREAM = write_pack


def loose_ids(repo: Path) -> list[str]:
    objects = repo / "objects"
    return sorted(
        d.name + f.name for d in objects.iterdir() if len(d.name) == 2 for f in d.iterdir()
    )


def pack_bytes(repo: Path) -> int:
    return sum(p.stat().st_size for p in (repo / "objects" / "pack").glob("pack-*.pack"))


def trial(template: Path, work: Path, task: str, writer: str, key: str) -> tuple[float, int]:
    """Seconds ``task`` takes with ``writer`` on a fresh copy of ``template``; pack bytes."""
    copy = work / f"{task}-{writer}".replace(" ", "")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(template / "store.git", copy / "store.git", symlinks=True)
    shutil.copytree(template / "state", copy / "state", symlinks=True)
    Maintenance._write_pack = NEW_WRITE_PACK if writer != "old" else libgit2_write_pack  # type: ignore[method-assign]
    store = MemoryStore.open(copy / "store.git", key, state_dir=copy / "state")
    repo = store.repo
    git_maintenance.write_pack = pack_stream(repo, writer)  # type: ignore[attr-defined]
    run: Callable[[], object]
    if task in ("pack 250", "memory 250"):
        ids = loose_ids(repo.path)[:250]
        held = [(oid, *repo.read_any(oid, ANY_KIND)) for oid in ids]

        def run() -> object:
            with repo.write_lock(30):
                if task == "memory 250" and writer == "new":
                    return write_pack(held, repo.path / "objects" / "pack", repo.path)
                return repo.maintenance._write_pack(ids, repo.path / "objects" / "pack")
    elif task == "maintain":

        def run() -> object:
            with repo.write_lock(30):
                return repo.maintain()
    else:

        def run() -> object:
            return store.gc(grace=0)

    started, cpu_started = time.perf_counter(), time.process_time()
    run()
    elapsed = time.perf_counter() - started
    CPU_SECONDS.setdefault((task, writer), []).append(time.process_time() - cpu_started)
    size = pack_bytes(repo.path)
    if not store.verify().ok:
        raise SystemExit(f"verify failed after {task} with the {writer} writer")
    shutil.rmtree(copy)
    return elapsed, size


TASKS = ("pack 250", "memory 250", "maintain", "gc")
# The CPU time of each trial by (task, writer): this process's alone, less disturbed than the
# wall-clock time by other work on a shared machine (though an fsync's wait is not in it).
CPU_SECONDS: dict[tuple[str, str], list[float]] = {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="work under this directory (its file system)")
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=list(TASKS),
        choices=TASKS,
        metavar="TASK",
        help="the tasks to time, of: " + ", ".join(repr(t) for t in TASKS),
    )
    args = parser.parse_args(argv)
    os.environ["GITMEM_GC_AUTO"] = "0"  # every object stays loose while the store is built
    work = Path(tempfile.mkdtemp(prefix="gitmem-bench-pack-", dir=args.dir))
    try:
        key = gitmem.generate_key()
        template = work / "template"
        # Writes not logged (as where there is no boot id), so that each leaves its objects
        # loose rather than in the redo log, for a checkpoint to pack.
        boot_id_path, wal.BOOT_ID_PATH = wal.BOOT_ID_PATH, str(work / "no-boot-id")
        try:
            store = MemoryStore.open(
                template / "store.git", key, create=True, state_dir=template / "state"
            )
            ops = list(workload(args.sessions, 1000))
            apply_gitmem(store, ops)
        finally:
            wal.BOOT_ID_PATH = boot_id_path
        loose = len(loose_ids(store.path))
        print(f"store: {len(ops)} writes, {loose} loose objects")
        print(f"{'task':10} {'old (libgit2)':>14} {'new (gitmem)':>13} {'new/old':>8}   pack bytes")
        for task in args.tasks:
            writers = ["old", "new", "twice"] if task == "gc" else ["old", "new"]
            times: dict[str, list[float]] = {writer: [] for writer in writers}
            sizes: dict[str, int] = {}
            for run in range(args.runs):
                # Each writer in turn, the order rotated run after run.
                for writer in writers[run % len(writers) :] + writers[: run % len(writers)]:
                    elapsed, sizes[writer] = trial(template, work, task, writer, key)
                    times[writer].append(elapsed)
            old, new = statistics.median(times["old"]), statistics.median(times["new"])
            print(
                f"{task:10} {old * 1000:11.1f} ms {new * 1000:10.1f} ms {new / old:7.2f}x"
                f"   old {sizes['old']:,} new {sizes['new']:,} ({sizes['new'] / sizes['old']:.2f}x)"
            )
            if "twice" in times:
                twice = statistics.median(times["twice"])
                print(
                    f"{'':10} gc reading each object twice (gitmem's before): "
                    f"{twice * 1000:.1f} ms; reading once / twice: {new / twice:.2f}x"
                )
            cpu = {w: statistics.median(CPU_SECONDS[task, w]) for w in writers}
            print(
                f"{'':10} CPU time: "
                + ", ".join(f"{w} {cpu[w] * 1000:.1f} ms" for w in writers)
                + f"; new/old {cpu['new'] / cpu['old']:.2f}x"
                + (f", once/twice {cpu['new'] / cpu['twice']:.2f}x" if "twice" in cpu else "")
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
