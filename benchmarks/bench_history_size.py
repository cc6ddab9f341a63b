"""Figure (1): history size of the multi-session progress-log workload, gitmem vs plain git.

The workload: an initializer writes a ``features.md`` of N unticked items and a ``progress.md``
header; then each of S sessions views the memory, appends an entry of about 600 bytes of varied
text to ``progress.md`` (``insert`` at the end), ticks one item of ``features.md``
(``str_replace``), and every tenth session also creates a small note. The same sequence of
states is committed to a plain, unencrypted git repository (one commit per operation, as
gitmem makes). Both are then packed with ``git gc --aggressive --prune=now`` and their object
databases measured.

    python benchmarks/bench_history_size.py                 # 1,000 sessions, 1,000 features
    python benchmarks/bench_history_size.py --sessions 200  # quicker
    python benchmarks/bench_history_size.py --shape lines   # the second workload

A second shape (``--shape lines``): each session appends eight lines of random words to
``progress.md`` and ticks one item, nothing else. A third (``--shape notes --sessions 5``):
each session creates one note of about 200 bytes, nothing else (a small store).

The first figure is the store as the user has it between sessions, with no manual gc: written
by a process of its own that then ended, as an agent's does (its last writes published, the
redo log back at its size at rest); the writes pack their loose objects and merge packs by
themselves (design.md, "Maintenance"). It counts the whole
repository directory of each side, not only its objects: every file (objects, refs, config,
gitmem's redo log ``gitmem.wal``...) and directory, as bytes of the files and as disk use
(allocated blocks, as ``du`` counts them, which is what a loose object or the log's
preallocation really costs). The figures after gc compare the object databases alone.

fsync is off while the stores are built (``--fsync`` turns it on): it changes how long the run
takes, not a single byte of either repository.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

import gitmem
from gitmem import chunking
from gitmem.git import wal
from gitmem.paths import parse
from gitmem.store import MemoryStore

_SYLLABLES: tuple[str, ...] = (
    "ka",
    "lo",
    "mi",
    "ne",
    "ra",
    "to",
    "su",
    "pe",
    "an",
    "ti",
    "or",
    "en",
    "is",
)
_SYLLABLES += ("al", "ly", "ing", "er", "ed", "th", "qu", "st", "re", "co", "de", "ma")


@dataclass(frozen=True)
class Op:
    """One memory operation of the workload."""

    session: str
    command: str  # create | insert | str_replace
    path: str
    text: str = ""
    old: str = ""


class Words:
    """Pseudo-English text: a 3,000-word vocabulary, half the words drawn from its top 100."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.vocab = [
            "".join(rnd.choice(_SYLLABLES) for _ in range(rnd.randint(1, 4))) for _ in range(3000)
        ]

    def word(self) -> str:
        pool = self.vocab[:100] if self.rnd.random() < 0.5 else self.vocab
        return self.rnd.choice(pool)

    def sentence(self) -> str:
        words = [self.word() for _ in range(self.rnd.randint(5, 16))]
        return " ".join(words).capitalize() + "."

    def text(self, size: int) -> str:
        out: list[str] = []
        while sum(map(len, out)) < size:
            out.append(self.sentence())
        return " ".join(out)


def workload(sessions: int, features: int, seed: int = 1, shape: str = "progress") -> Iterator[Op]:
    """The operations of the workload, in order (deterministic for a given ``seed``)."""
    if shape == "lines":
        yield from lines_workload(sessions, features, seed)
        return
    if shape in _SINGLE_SHAPES:
        yield from _SINGLE_SHAPES[shape](sessions, random.Random(seed))
        return
    if shape == "notes":
        words = Words(random.Random(seed))
        for n in range(1, sessions + 1):
            yield Op(f"session-{n:04d}", "create", f"/memories/note{n}.md", words.text(200))
        return
    rnd = random.Random(seed)
    words = Words(rnd)
    items = [f"- [ ] F{i:04d}: {words.text(30)}\n" for i in range(features)]
    yield Op("init", "create", "/memories/features.md", "# Features\n\n" + "".join(items))
    yield Op("init", "create", "/memories/progress.md", "# Progress log\n")
    order = list(range(features))
    rnd.shuffle(order)
    lines = 1
    for n in range(1, sessions + 1):
        label = f"session-{n:04d}"
        entry = (
            f"\n## Session {n} (day {n // 3 + 1})\n"
            f"- Worked on F{order[(n - 1) % features]:04d}: {words.text(200)}\n"
            f"- Tests: {rnd.randint(0, 400)} passed, {rnd.randint(0, 3)} failed.\n"
            f"- Next: {words.text(150)}\n"
        )
        yield Op(label, "insert", "/memories/progress.md", entry, str(lines))
        lines += entry.count("\n")
        item = f"- [ ] F{order[(n - 1) % features]:04d}:"
        yield Op(label, "str_replace", "/memories/features.md", item.replace("[ ]", "[x]"), item)
        if n % 10 == 0:
            note = f"# Note from {label}\n\n{words.text(300)}\n"
            yield Op(label, "create", f"/memories/notes/{label}.md", note)


def lines_workload(sessions: int, features: int, seed: int = 1) -> Iterator[Op]:
    """Each session appends eight lines of random words and ticks one checklist item."""
    rnd = random.Random(seed)
    words = Words(rnd)
    items = [f"- [ ] F{i:04d}: {words.text(30)}\n" for i in range(features)]
    yield Op("init", "create", "/memories/features.md", "# Features\n\n" + "".join(items))
    yield Op("init", "create", "/memories/progress.md", "# Progress log\n")
    lines = 1
    for n in range(1, sessions + 1):
        label = f"session-{n:04d}"
        entry = "".join(f"{words.text(rnd.randint(30, 90))}\n" for _ in range(8))
        yield Op(label, "insert", "/memories/progress.md", entry, str(lines))
        lines += 8
        item = f"- [ ] F{(n - 1) % features:04d}:"
        yield Op(label, "str_replace", "/memories/features.md", item.replace("[ ]", "[x]"), item)


def log_workload(appends: int, rnd: random.Random) -> Iterator[Op]:
    """An append-only log: each operation appends an entry of about 600 bytes."""
    words = Words(rnd)
    yield Op("init", "create", "/memories/log.md", "# Log\n")
    lines = 1
    for n in range(1, appends + 1):
        entry = f"\n## Entry {n}\n{words.text(560)}\n"
        yield Op(f"session-{n:04d}", "insert", "/memories/log.md", entry, str(lines))
        lines += entry.count("\n")


def checklist_workload(ticks: int, rnd: random.Random) -> Iterator[Op]:
    """A checklist of ``ticks`` items, ticked one an operation in random order (mostly in the
    middle of the file)."""
    words = Words(rnd)
    items = [f"- [ ] T{i:04d}: {words.text(40)}\n" for i in range(ticks)]
    yield Op("init", "create", "/memories/checklist.md", "# Checklist\n\n" + "".join(items))
    order = list(range(ticks))
    rnd.shuffle(order)
    for n, i in enumerate(order, 1):
        item = f"- [ ] T{i:04d}:"
        yield Op(
            f"session-{n:04d}", "str_replace", "/memories/checklist.md", "- [x]" + item[5:], item
        )


def small_notes_workload(notes: int, rnd: random.Random) -> Iterator[Op]:
    """Many small notes, one created an operation, in a few directories."""
    words = Words(rnd)
    for n in range(1, notes + 1):
        text = f"# Note {n}\n\n{words.text(rnd.randint(100, 400))}\n"
        yield Op(f"session-{n:04d}", "create", f"/memories/topic{n % 5}/note{n:04d}.md", text)


def rewrite_workload(edits: int, rnd: random.Random) -> Iterator[Op]:
    """A large file (about 200 KB of paragraphs, one a line) rewritten in places: each operation
    replaces one paragraph, anywhere in the file, by a new one."""
    words = Words(rnd)
    paragraphs = [f"P{i:04d} {words.text(rnd.randint(150, 350))}" for i in range(800)]
    yield Op("init", "create", "/memories/big.md", "\n".join(paragraphs) + "\n")
    for n in range(1, edits + 1):
        i = rnd.randrange(len(paragraphs))
        new = f"P{i:04d} {words.text(rnd.randint(150, 350))}"
        yield Op(f"session-{n:04d}", "str_replace", "/memories/big.md", new, paragraphs[i])
        paragraphs[i] = new


def renames_workload(renames: int, rnd: random.Random) -> Iterator[Op]:
    """Fifty notes of about 1 KB, then each operation renames one (a new name, sometimes into
    another directory)."""
    words = Words(rnd)
    names = [f"/memories/inbox/note{i:03d}.md" for i in range(50)]
    for path in names:
        yield Op("init", "create", path, f"# {path}\n\n{words.text(1000)}\n")
    for n in range(1, renames + 1):
        i = rnd.randrange(len(names))
        folder = rnd.choice(("inbox", "archive", "projects"))
        new = f"/memories/{folder}/r{n:04d}-{i:03d}.md"
        yield Op(f"session-{n:04d}", "rename", names[i], new)
        names[i] = new


_SINGLE_SHAPES = {
    "log": log_workload,
    "checklist": checklist_workload,
    "small-notes": small_notes_workload,
    "rewrite": rewrite_workload,
    "renames": renames_workload,
}


def apply_gitmem(store: MemoryStore, ops: list[Op]) -> None:
    """Run ``ops`` on ``store``, viewing the memory at the start of every session."""
    session = None
    for op in ops:
        if op.session != session:
            session = store.session = op.session
            store.listing(parse("/memories"))
            with_progress = store.kind(parse("/memories/progress.md"))
            if with_progress:
                store.read_text(parse("/memories/progress.md"))
        path = parse(op.path)
        if op.command == "create":
            store.create(path, op.text)
        elif op.command == "rename":
            store.rename(path, parse(op.text))
        elif op.command == "insert":
            store.insert(path, int(op.old), op.text)
        else:
            store.str_replace(path, op.old, op.text)


def apply_plain(repo: pygit2.Repository, ops: list[Op]) -> dict[str, str]:
    """Commit the same sequence of states, unencrypted, one commit per operation."""
    files: dict[str, str] = {}
    parents: list[pygit2.Oid] = []
    for index, op in enumerate(ops):
        if op.command == "create":
            files[op.path] = op.text
        elif op.command == "rename":
            files[op.text] = files.pop(op.path)
        elif op.command == "insert":
            lines = files[op.path].splitlines(keepends=True)
            at = int(op.old)
            files[op.path] = "".join(lines[:at]) + op.text + "".join(lines[at:])
        else:
            files[op.path] = files[op.path].replace(op.old, op.text, 1)
        tree = _plain_tree(repo, files)
        when = pygit2.Signature("agent", "agent@example.invalid", 1_700_000_000 + 60 * index, 0)
        message = f"{op.command} {op.path}\n\nsession {op.session}\n"
        parents = [repo.create_commit("refs/heads/main", when, when, message, tree, parents)]
    return files


def _plain_tree(repo: pygit2.Repository, files: dict[str, str]) -> pygit2.Oid:
    nested: dict[str, object] = {}
    for path, text in files.items():
        node = nested
        *dirs, name = path.strip("/").split("/")
        for d in dirs:
            node = node.setdefault(d, {})  # type: ignore[assignment]
        node[name] = text

    def write(node: dict[str, object]) -> pygit2.Oid:
        builder = repo.TreeBuilder()
        for name, value in sorted(node.items()):
            if isinstance(value, dict):
                builder.insert(name, write(value), pygit2.enums.FileMode.TREE)
            else:
                assert isinstance(value, str)
                builder.insert(name, repo.create_blob(value.encode()), pygit2.enums.FileMode.BLOB)
        return builder.write()

    return write(nested)


def object_bytes(repo: Path) -> int:
    """Bytes in the object database (packs, their indexes and loose objects)."""
    return sum(p.stat().st_size for p in (repo / "objects").rglob("*") if p.is_file())


def file_bytes(repo: Path) -> int:
    """Bytes of every file in the repository directory (their sizes, not their blocks)."""
    return sum(p.lstat().st_size for p in repo.rglob("*") if p.is_file() and not p.is_symlink())


def disk_use(repo: Path) -> int:
    """Bytes of disk ``repo`` occupies, as ``du`` counts them: for a repository directory the
    allocated blocks of every file (objects, refs, config, gitmem's redo log...) and of every
    directory, its own included. Links are not followed."""
    total = repo.lstat().st_blocks
    for root, dirs, files in os.walk(repo):
        for name in dirs + files:
            total += os.lstat(os.path.join(root, name)).st_blocks
    return total * 512


def git_gc_aggressive(repo: Path) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "gc", "--aggressive", "--prune=now", "--quiet"], check=True
    )


@dataclass(frozen=True)
class Sizes:
    """One workload's repositories measured: gitmem's as written (no manual gc) and plain git's
    after ``git gc``, whole directories in bytes; both object databases after ``gitmem gc`` and
    ``git gc --aggressive``."""

    commits: int
    as_written: int
    as_written_disk: int
    log_disk: int
    plain_gc: int
    plain_gc_disk: int
    after_gitmem_gc: int
    packed_objects: int
    plain_aggressive: int
    gitmem_aggressive: int
    pulled_ops: int
    plain_pull: int
    gitmem_pull: int

    @property
    def ratio_as_written(self) -> float:
        return self.as_written / self.plain_gc

    @property
    def ratio_aggressive(self) -> float:
        return self.gitmem_aggressive / self.plain_aggressive

    @property
    def ratio_pull(self) -> float:
        return self.gitmem_pull / self.plain_pull


def pull_bytes(repo: Path, new: int) -> int:
    """Bytes of the pack a git server sends a replica that lacks the last ``new`` commits of
    ``main``: ``git pack-objects --thin`` as ``upload-pack`` runs it (deltas against what the
    replica has allowed)."""
    have = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", f"main~{new}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    pack = subprocess.run(
        ["git", "-C", str(repo), "pack-objects", "--revs", "--thin", "--stdout", "-q"],
        input=f"main\n^{have}\n".encode(),
        check=True,
        capture_output=True,
    ).stdout
    return len(pack)


# Whether stores are built with fsync on (--fsync), in this process and the writing one.
_FSYNC = False


def write_in_a_process(path: Path, key: str, shape: str, sessions: int, features: int) -> None:
    """Write the workload into a new store at ``path`` in a process of its own, which then
    ends as an agent's does: the store as the user has it between sessions (the last writes
    published, the redo log at rest, a merge of packs under way finished by the exit)."""
    args = [sys.executable, __file__, "--write-into", str(path), "--shape", shape]
    args += ["--sessions", str(sessions), "--features", str(features)]
    args += ["--fsync"] if _FSYNC else []
    subprocess.run(args, check=True, env={**os.environ, "GITMEM_KEY": key})


def _write_into(path: Path, shape: str, sessions: int, features: int) -> int:
    store = MemoryStore.open(
        path, os.environ["GITMEM_KEY"], create=True, state_dir=path.parent / "state"
    )
    apply_gitmem(store, list(workload(sessions, features, shape=shape)))
    return 0


def measure(shape: str, sessions: int, features: int, work: Path) -> Sizes:
    """Build both repositories of the workload under ``work`` and measure them (SystemExit if
    they hold different memories or the store does not verify)."""
    work.mkdir(parents=True, exist_ok=True)
    ops = list(workload(sessions, features, shape=shape))
    plain_path = work / "plain.git"
    plain = pygit2.init_repository(str(plain_path), bare=True, initial_head="main")
    expected = apply_plain(plain, ops)
    key = gitmem.generate_key()
    write_in_a_process(work / "gitmem.git", key, shape, sessions, features)
    store = MemoryStore.open(work / "gitmem.git", key, state_dir=work / "state")
    if store.files() != expected:
        raise SystemExit("the two repositories hold different memories")
    loose, as_written = file_bytes(store.path), disk_use(store.path)
    log_disk = disk_use(store.path / wal.LOG_NAME)
    subprocess.run(["git", "-C", str(plain_path), "gc", "--quiet"], check=True)
    plain_gc, plain_gc_disk = file_bytes(plain_path), disk_use(plain_path)
    report = store.gc()
    after_gitmem_gc = object_bytes(store.path)
    commits = sum(1 for _ in store.log())
    # A pull of the newer half of the history (at most 1,000 operations), as a git server
    # would send it to a replica that has the older half; both sides packed as above.
    pulled = min(1000, commits // 2)
    plain_pull, gitmem_pull = pull_bytes(plain_path, pulled), pull_bytes(store.path, pulled)
    git_gc_aggressive(plain_path)
    git_gc_aggressive(store.path)
    if not store.verify().ok:
        raise SystemExit("verify failed after gc")
    return Sizes(
        commits=commits,
        as_written=loose,
        as_written_disk=as_written,
        log_disk=log_disk,
        plain_gc=plain_gc,
        plain_gc_disk=plain_gc_disk,
        after_gitmem_gc=after_gitmem_gc,
        packed_objects=report.packed,
        plain_aggressive=object_bytes(plain_path),
        gitmem_aggressive=object_bytes(store.path),
        pulled_ops=pulled,
        plain_pull=plain_pull,
        gitmem_pull=gitmem_pull,
    )


# The family of workloads ``--family`` measures: (shape, sessions or operations, features).
FAMILY: tuple[tuple[str, str, int, int], ...] = (
    ("progress", "progress log: 600 sessions, log to ~360 KB, 600-item checklist", 600, 600),
    ("log", "append-only log: 650 entries of ~600 B, to ~400 KB", 650, 0),
    ("checklist", "600-item checklist (~40 KB) ticked in random order", 600, 0),
    ("small-notes", "600 small notes (100-400 B) in 5 directories", 600, 0),
    ("rewrite", "~200 KB file, 300 paragraphs replaced anywhere", 300, 0),
    ("renames", "50 notes of ~1 KB, then 300 renames", 300, 0),
)


def family(work: Path, only: list[str] | None = None) -> int:
    """Measure every shape of :data:`FAMILY` (or those in ``only``) and print one table with
    the ratios."""
    rows = []
    for shape, label, sessions, features in FAMILY:
        if only and shape not in only:
            continue
        started = time.perf_counter()
        sizes = measure(shape, sessions, features, work / shape)
        rows.append((shape, label, sizes))
        print(
            f"{shape}: {sizes.commits} commits in {time.perf_counter() - started:.0f}s",
            file=sys.stderr,
        )
    print("| shape | commits | plain git, aggressive | gitmem, aggressive | ratio |", end="")
    print(" gitmem as written | plain git after `git gc` | ratio |", end="")
    print(" pull: operations | plain git sends | gitmem sends | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, label, s in rows:
        print(
            f"| {label} (`{shape}`) | {s.commits:,} | {s.plain_aggressive:,} | "
            f"{s.gitmem_aggressive:,} | **{s.ratio_aggressive:.2f}x** | {s.as_written:,} | "
            f"{s.plain_gc:,} | **{s.ratio_as_written:.2f}x** | {s.pulled_ops:,} | "
            f"{s.plain_pull:,} | {s.gitmem_pull:,} | **{s.ratio_pull:.2f}x** |"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--features", type=int, default=1000)
    parser.add_argument("--fsync", action="store_true", help="keep fsync on while building")
    parser.add_argument("--keep", type=Path, help="build the repositories under this directory")
    parser.add_argument("--shape", choices=("progress", "lines", "notes", *_SINGLE_SHAPES))
    parser.add_argument("--family", action="store_true", help="every shape, one table")
    parser.add_argument(
        "--only", help="with --family: these shapes only (comma-separated, e.g. log,checklist)"
    )
    parser.add_argument("--write-into", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global _FSYNC
    _FSYNC = args.fsync
    if not args.fsync:
        pygit2.settings.enable_fsync_gitdir(False)
    if args.write_into:
        return _write_into(args.write_into, args.shape or "progress", args.sessions, args.features)
    work = args.keep or Path(tempfile.mkdtemp(prefix="gitmem-bench-"))
    if args.family:
        return family(work, args.only.split(",") if args.only else None)
    shape = args.shape or "progress"
    ops = list(workload(args.sessions, args.features, shape=shape))
    started = time.perf_counter()
    s = measure(shape, args.sessions, args.features, work)
    built = time.perf_counter() - started
    print(f"workload: {args.sessions} sessions, {args.features} features, {s.commits} commits")
    progress = [op for op in ops if op.path == "/memories/progress.md"]
    if progress:
        size = sum(len(op.text) for op in progress)
        print(f"chunk sizes at the end: {chunking.params_for(size)}")
    print(f"fsync while building: {'on' if args.fsync else 'off'}")
    print(f"built, packed and measured in {built:.1f}s")
    print(
        f"gitmem as written (no manual gc): {s.as_written:,} bytes, {s.as_written_disk:,} on "
        f"disk (the redo log: {s.log_disk:,})"
    )
    print(f"plain git after `git gc`:          {s.plain_gc:,} bytes, {s.plain_gc_disk:,} on disk")
    print(
        f"ratio as written / plain git gc: {s.ratio_as_written:.2f}x bytes, "
        f"{s.as_written_disk / s.plain_gc_disk:.2f}x disk (target <= 2.5x)"
    )
    print(
        f"gitmem after `gitmem gc`:       {s.after_gitmem_gc:,} bytes ({s.packed_objects} objects)"
    )
    print(f"plain git after gc --aggressive:  {s.plain_aggressive:,} bytes")
    print(f"gitmem after gc --aggressive:     {s.gitmem_aggressive:,} bytes")
    print(f"ratio gitmem / plain git: {s.ratio_aggressive:.2f}x (target <= 2x)")
    print(
        f"a pull of the last {s.pulled_ops:,} operations: plain git sends {s.plain_pull:,} "
        f"bytes, gitmem {s.gitmem_pull:,} ({s.ratio_pull:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
