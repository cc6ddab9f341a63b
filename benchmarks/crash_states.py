"""Crash-state checker: every on-disk state a power loss could leave after a run of writes.

    python benchmarks/crash_states.py                  # 8 writes, the default mix
    python benchmarks/crash_states.py --writes 12 --random 40 --json
    python benchmarks/crash_states.py --small-log  # the log fills and is resized often

In the spirit of ALICE and CrashMonkey. A SIGKILL cannot show durability bugs (the page cache
survives a killed process); a power loss can. This script

1. runs a sequence of memory writes in a child process under ``strace -f``, recording every
   file-system call on the store and the state directory, and each write's acknowledgement
   (the driver touches ``<root>/ACK-<n>`` after a write returns);
2. replays the calls on a model of the file system in which nothing is durable until a flush
   makes it so (the pessimistic POSIX model): a file's data is durable after ``fsync`` or
   ``fdatasync`` of that file; a directory entry (create, ``link``, ``rename``, ``unlink``,
   ``mkdir``) after ``fsync`` of its directory (both directories, for a ``rename``); everything
   after ``syncfs`` or ``sync``. ``fsync`` of a file does not make its name durable, and a new
   directory's own entry needs an ``fsync`` of its parent;
3. at every point a flush is about to start (and at the end of the run), builds states from
   what is durable plus chosen subsets of what is not: none of it, all of it, all but one call,
   one call alone, each in-order prefix, and a number of random subsets. A rename is atomic; a
   write is kept whole or lost whole;
4. checks each distinct state: the store opens, the head authenticates and passes the rollback
   check against the recovered high-water mark, ``verify`` passes, the memory equals the
   state after some write at or after the last one acknowledged before the cut, and a new write
   succeeds.

Crash points just before each flush are enough: between two flushes the set of possible states
only grows, so the states of any earlier point are among those of the next flush point, where
at least as many writes have been acknowledged.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SYSCALLS = (
    "open,openat,creat,write,pwrite64,writev,pwritev,pwritev2,ftruncate,truncate,"
    "rename,renameat,renameat2,link,linkat,unlink,unlinkat,mkdir,mkdirat,rmdir,"
    "fsync,fdatasync,syncfs,sync,access,faccessat,faccessat2,close"
)
_LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+|\?)(<[^>]*>)?")
_UNFINISHED = re.compile(r"^(\d+)\s+(.*) <unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (\w+) resumed>(.*)$")
_HEX = re.compile(r"(?:\\x[0-9a-f]{2})+")
_ACK = re.compile(r"/ACK-(\d+)$")

# -- the recording ----------------------------------------------------------------------------


@dataclass
class Op:
    """One change to the modelled file system, and when it became durable (if ever).

    ``content`` ops replace an inode's bytes; ``entries`` ops set (or, with None, remove)
    names in directories, atomically. ``pending`` holds the directory inodes whose ``fsync``
    an ``entries`` op still waits for.
    """

    index: int
    event: int = 0
    inode: int = -1
    content: bytes | None = None
    entries: tuple[tuple[int, str, int | None], ...] = ()
    pending: set[int] = field(default_factory=set)
    durable_at: int | None = None
    what: str = ""


@dataclass
class Recording:
    """What a traced run did to the files under ``root``, as replayable, flushable ops."""

    root_inode: int
    initial_files: dict[int, bytes]
    initial_dirs: dict[int, dict[str, int]]
    dir_inodes: set[int]
    ops: list[Op] = field(default_factory=list)
    # (event index, acknowledged writes so far) for each flush, in order.
    flushes: list[tuple[int, int]] = field(default_factory=list)
    acks: list[tuple[int, int]] = field(default_factory=list)
    events: int = 0

    def acked_before(self, event: int) -> int:
        """How many writes were acknowledged before ``event``."""
        return max((n for at, n in self.acks if at < event), default=0)


class _Model:
    """The file system as the traced process saw it (everything applied, nothing lost)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.next_inode = 0
        self.dirs: dict[int, dict[str, int]] = {}
        self.files: dict[int, bytearray] = {}
        self.root_inode = self._scan(root)
        self.fds: dict[tuple[int, int], tuple[int, bool]] = {}
        self.pos: dict[tuple[int, int], int] = {}

    def _new(self) -> int:
        self.next_inode += 1
        return self.next_inode

    def _scan(self, path: Path) -> int:
        inode = self._new()
        if path.is_dir() and not path.is_symlink():
            self.dirs[inode] = {c.name: self._scan(c) for c in sorted(path.iterdir())}
        else:
            self.files[inode] = bytearray(path.read_bytes())
        return inode

    def inside(self, path: str) -> list[str] | None:
        """The components of ``path`` below the root, or None when it is elsewhere."""
        rel = os.path.relpath(os.path.normpath(path), self.root)
        if rel == ".":
            return []
        if rel.startswith(".."):
            return None
        return rel.split(os.sep)

    def lookup(self, parts: Sequence[str]) -> int | None:
        inode = self.root_inode
        for part in parts:
            children = self.dirs.get(inode)
            if children is None or part not in children:
                return None
            inode = children[part]
        return inode


def _unhex(text: str) -> str:
    return _HEX.sub(lambda m: bytes.fromhex(m.group(0).replace("\\x", "")).decode("latin-1"), text)


def _split_args(args: str) -> list[str]:
    """Top-level arguments of a strace call (strings are hex-escaped, so hold no commas)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(args):
        if ch in "[{<":
            depth += 1
        elif ch in "]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(args[start:i].strip())
            start = i + 1
    out.append(args[start:].strip())
    return out


def _string(arg: str) -> bytes:
    """The bytes of a quoted, ``-xx`` escaped strace string argument."""
    body = arg[arg.index('"') + 1 : arg.rindex('"')]
    return bytes.fromhex(body.replace("\\x", ""))


def _fd(arg: str) -> tuple[int, str | None]:
    """An fd argument ``N<path>`` as (N, path)."""
    number, _, rest = arg.partition("<")
    path = _unhex(rest[:-1]).encode("latin-1").decode("utf-8", "replace") if rest else None
    return (int(number) if number.lstrip("-").isdigit() else -100), path


def _path(dirfd: str | None, arg: str) -> str:
    path = _string(arg).decode("utf-8", "surrogateescape")
    if not path.startswith("/") and dirfd is not None:
        _, base = _fd(dirfd)
        path = os.path.join(base or os.getcwd(), path)
    return path


def record(trace_text: str, root: Path, initial: _Model | None = None) -> Recording:
    """Replay an ``strace -f -y -xx`` log on a model of ``root`` as it was before the run."""
    model = initial if initial is not None else _Model(root)
    rec = Recording(
        model.root_inode,
        {i: bytes(b) for i, b in model.files.items()},
        {i: dict(d) for i, d in model.dirs.items()},
        set(model.dirs),
    )
    pending: dict[str, str] = {}
    acked = 0
    for raw in trace_text.splitlines():
        unfinished = _UNFINISHED.match(raw)
        if unfinished:
            pending[unfinished.group(1)] = unfinished.group(2)
            continue
        resumed = _RESUMED.match(raw)
        if resumed:
            raw = f"{resumed.group(1)}  {pending.pop(resumed.group(1), '')}{resumed.group(3)}"
        match = _LINE.match(raw)
        # An acknowledgement is a failing access() of a path that does not exist.
        if (
            not match
            or match.group(4) == "?"
            or (int(match.group(4)) < 0 and not match.group(2).startswith(("access", "faccessat")))
        ):
            continue
        pid, name, ret = int(match.group(1)), match.group(2), int(match.group(4))
        args = _split_args(match.group(3))
        rec.events += 1
        event = rec.events
        acked = _apply(model, rec, event, pid, name, args, ret, acked)
    rec.dir_inodes = set(model.dirs)
    return rec


def _add(rec: Recording, op: Op) -> None:
    op.index, op.event = len(rec.ops), rec.events
    rec.ops.append(op)


def _set_entry(
    model: _Model, rec: Recording, changes: list[tuple[list[str], int | None]], what: str
) -> None:
    entries = []
    for parts, inode in changes:
        parent = model.lookup(parts[:-1])
        if parent is None or parent not in model.dirs:
            return
        if inode is None:
            model.dirs[parent].pop(parts[-1], None)
        else:
            model.dirs[parent][parts[-1]] = inode
        entries.append((parent, parts[-1], inode))
    _add(rec, Op(0, entries=tuple(entries), pending={e[0] for e in entries}, what=what))


def _write(model: _Model, rec: Recording, inode: int, offset: int, data: bytes) -> None:
    content = model.files.setdefault(inode, bytearray())
    if len(content) < offset:
        content.extend(b"\0" * (offset - len(content)))
    content[offset : offset + len(data)] = data
    _add(rec, Op(0, inode=inode, content=bytes(content), what="write"))


def _apply(
    model: _Model,
    rec: Recording,
    event: int,
    pid: int,
    name: str,
    args: list[str],
    ret: int,
    acked: int,
) -> int:
    if name in ("open", "openat", "creat"):
        dirfd = args[0] if name == "openat" else None
        path = _path(dirfd, args[1] if name == "openat" else args[0])
        flags = args[2] if name == "openat" else (args[1] if name == "open" else "O_CREAT")
        parts = model.inside(path)
        if parts is None:
            return acked
        inode = model.lookup(parts)
        if inode is None and "O_CREAT" in flags:
            inode = model._new()
            model.files[inode] = bytearray()
            _set_entry(model, rec, [(parts, inode)], f"create {path}")
        elif inode is not None and "O_TRUNC" in flags and inode in model.files:
            model.files[inode] = bytearray()
            _add(rec, Op(0, inode=inode, content=b"", what="truncate"))
        if inode is not None:
            model.fds[(pid, ret)] = (inode, "O_APPEND" in flags)
            model.pos[(pid, ret)] = 0
    elif name == "close":
        number, _ = _fd(args[0])
        model.fds.pop((pid, number), None)
    elif name in ("write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate"):
        inode, key = _fd_inode(model, pid, args[0])
        if inode is None or inode not in model.files:
            return acked
        if name == "ftruncate":
            size = int(args[1])
            content = model.files[inode]
            del content[size:]
            content.extend(b"\0" * (size - len(content)))
            _add(rec, Op(0, inode=inode, content=bytes(content), what="ftruncate"))
            return acked
        if name in ("writev", "pwritev", "pwritev2"):
            data = b"".join(_string(s) for s in re.findall(r'iov_base="[^"]*"', args[1]))
        else:
            data = _string(args[1])
        data = data[:ret]
        append = model.fds.get(key, (0, False))[1]
        if name == "write":
            offset = len(model.files[inode]) if append else model.pos.get(key, 0)
            model.pos[key] = offset + len(data)
        else:
            offset = int(args[-1] if name == "pwrite64" else args[3])
        _write(model, rec, inode, offset, data)
    elif name in ("rename", "renameat", "renameat2", "link", "linkat"):
        at = name.endswith("at") or name == "renameat2"
        old = _path(args[0], args[1]) if at else _path(None, args[0])
        new = _path(args[2], args[3]) if at else _path(None, args[1])
        old_parts, new_parts = model.inside(old), model.inside(new)
        if old_parts is None or new_parts is None:
            return acked
        inode = model.lookup(old_parts)
        if inode is None:
            return acked
        if name.startswith("link"):
            _set_entry(model, rec, [(new_parts, inode)], f"link {new}")
        else:
            _set_entry(model, rec, [(old_parts, None), (new_parts, inode)], f"rename {new}")
    elif name in ("unlink", "unlinkat", "rmdir"):
        path = _path(args[0], args[1]) if name == "unlinkat" else _path(None, args[0])
        parts = model.inside(path)
        if parts:
            _set_entry(model, rec, [(parts, None)], f"unlink {path}")
    elif name in ("mkdir", "mkdirat"):
        path = _path(args[0], args[1]) if name == "mkdirat" else _path(None, args[0])
        parts = model.inside(path)
        if parts and model.lookup(parts) is None:
            inode = model._new()
            model.dirs[inode] = {}
            _set_entry(model, rec, [(parts, inode)], f"mkdir {path}")
    elif name in ("fsync", "fdatasync"):
        inode, _ = _fd_inode(model, pid, args[0])
        if inode is None:
            return acked
        rec.flushes.append((event, acked))
        for op in rec.ops:
            if op.durable_at is not None:
                continue
            if op.content is not None and op.inode == inode:
                op.durable_at = event
            elif op.entries and inode in op.pending:
                op.pending.discard(inode)
                if not op.pending:
                    op.durable_at = event
    elif name in ("syncfs", "sync"):
        rec.flushes.append((event, acked))
        for op in rec.ops:
            if op.durable_at is None:
                op.durable_at = event
    elif name in ("access", "faccessat", "faccessat2"):
        path = _path(None, args[1] if name.startswith("faccessat") else args[0])
        ack = _ACK.search(path)
        if ack and model.inside(path) is not None:
            acked = int(ack.group(1))
            rec.acks.append((event, acked))
    return acked


def _fd_inode(model: _Model, pid: int, arg: str) -> tuple[int | None, tuple[int, int]]:
    number, path = _fd(arg)
    key = (pid, number)
    if key in model.fds:
        return model.fds[key][0], key
    # Threads share their process's descriptors; strace names the thread, not the process.
    if path is not None and not path.endswith("(deleted)"):
        parts = model.inside(path)
        if parts is not None:
            return model.lookup(parts), key
    return None, key


# -- crash states -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CrashState:
    """The files a power loss at ``event`` could leave, and the writes acknowledged by then."""

    event: int
    acked: int
    files: dict[str, bytes]
    how: str

    def digest(self) -> str:
        h = hashlib.sha256()
        for path in sorted(self.files):
            h.update(path.encode() + b"\0" + hashlib.sha256(self.files[path]).digest())
        return h.hexdigest()


def _build(rec: Recording, chosen: Sequence[Op]) -> dict[str, bytes]:
    files = dict(rec.initial_files)
    dirs = {i: dict(d) for i, d in rec.initial_dirs.items()}
    for op in chosen:
        if op.content is not None:
            files[op.inode] = op.content
        for parent, name, inode in op.entries:
            children = dirs.setdefault(parent, {})
            if inode is None:
                children.pop(name, None)
            else:
                children[name] = inode
    out: dict[str, bytes] = {}
    stack: list[tuple[int, str]] = [(rec.root_inode, "")]
    seen: set[int] = set()
    while stack:
        inode, prefix = stack.pop()
        if inode in seen:
            continue
        seen.add(inode)
        for name, child in dirs.get(inode, {}).items():
            path = f"{prefix}/{name}" if prefix else name
            if child in rec.dir_inodes:
                out[path + "/"] = b""
                stack.append((child, path))
            else:
                out[path] = files.get(child, b"")
    return out


def crash_states(rec: Recording, random_subsets: int, seed: int = 0) -> Iterator[CrashState]:
    """Every distinct state worth checking, as described in this module's docstring."""
    rng = random.Random(seed)
    points = [at for at, _ in rec.flushes] + [rec.events + 1]
    seen: set[str] = set()
    for point in points:
        before = [op for op in rec.ops if op.event < point]
        durable = [op for op in before if op.durable_at is not None and op.durable_at < point]
        volatile = [op for op in before if op.durable_at is None or op.durable_at >= point]
        acked = rec.acked_before(point)
        choices: list[tuple[str, set[int]]] = [
            ("none", set()),
            ("all", {o.index for o in volatile}),
        ]
        for op in volatile:
            choices.append((f"all but {op.what}", {o.index for o in volatile} - {op.index}))
            choices.append((f"only {op.what}", {op.index}))
        for cut in range(1, len(volatile)):
            choices.append((f"first {cut}", {o.index for o in volatile[:cut]}))
        for _ in range(random_subsets if len(volatile) > 2 else 0):
            choices.append(("random", {o.index for o in volatile if rng.random() < 0.5}))
        for how, kept in choices:
            chosen = sorted(durable + [o for o in volatile if o.index in kept], key=_index)
            state = CrashState(point, acked, _build(rec, chosen), how)
            digest = state.digest() + str(acked)
            if digest in seen:
                continue
            seen.add(digest)
            yield state


def _index(op: Op) -> int:
    return op.index


def materialize(state: CrashState, dest: Path) -> None:
    """Write ``state`` under ``dest`` (owner-only, as gitmem makes its files)."""
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in sorted(state.files):
        target = dest / path
        if path.endswith("/"):
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
        else:
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            target.write_bytes(state.files[path])
            target.chmod(0o600)


# -- the workload and the checks ----------------------------------------------------------------

STORE = "store.git"
STATE = "state"


def workload(writes: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """A mix of every write command; creates in new directories add new object fan-outs."""
    count = 0
    for i in range(writes):
        kind = i % 5
        if kind == 0:
            yield "create", {"path": f"/memories/d{i}/note.md", "text": f"note {i}\n" * 20}
        elif kind == 1:
            old, count = f"count {count}", count + 1
            yield "str_replace", {"path": "/memories/log.md", "old": old, "new": f"count {count}"}
        elif kind == 2:
            yield "insert", {"path": "/memories/log.md", "line": 0, "text": f"entry {i}"}
        elif kind == 3:
            yield "rename", {"old": f"/memories/d{i - 3}/note.md", "new": f"/memories/m/n{i}.md"}
        else:
            yield "delete", {"path": f"/memories/m/n{i - 1}.md"}


@contextlib.contextmanager
def small_log(on: bool) -> Iterator[None]:
    """With ``on``, a redo log of one block of records that grows to at most eight: the writes
    fill it, checkpoint and resize it (a new file) within a few writes."""
    from gitmem.git import wal

    saved = wal.MIN_CAPACITY, wal.MAX_CAPACITY, wal.GROW_BELOW
    if on:
        wal.MIN_CAPACITY, wal.MAX_CAPACITY, wal.GROW_BELOW = 2 * wal.HEADER_SIZE, 32 << 10, 4
    try:
        yield
    finally:
        wal.MIN_CAPACITY, wal.MAX_CAPACITY, wal.GROW_BELOW = saved


def setup(root: Path, key: str) -> dict[str, str]:
    """The store before the traced run (durable by assumption), and its memory."""
    from gitmem import MemoryStore
    from gitmem.paths import parse

    store = MemoryStore.open(root / STORE, key, create=True, state_dir=root / STATE)
    store.create(parse("/memories/log.md"), "count 0\nline 1\n")
    return store.files()


def drive(
    root: Path,
    key: str,
    writes: int,
    expected_out: Path,
    maintain: bool = False,
    small: bool = False,
) -> None:
    """The traced child: run the workload, touching ``<root>/ACK-<n>`` after each write.

    With ``maintain``, every write is followed by a checkpoint (which publishes the redo log's
    objects as one pack), and automatic maintenance, which checkpoints run, merges packs from
    three on (instead of nine), so that publishing and merging are in the trace.
    With ``small``, the log is tiny (:func:`small_log`), so that its resizing is in the trace.
    """
    with small_log(small):
        _drive(root, key, writes, expected_out, maintain)


def _drive(root: Path, key: str, writes: int, expected_out: Path, maintain: bool) -> None:
    from gitmem import MemoryStore
    from gitmem.git import maintenance as git_maintenance
    from gitmem.git import objects as git_objects
    from gitmem.paths import parse

    if maintain:
        os.environ.pop("GITMEM_GC_AUTO", None)
        (
            git_maintenance.AUTO_CHECK_EVERY,
            git_maintenance.AUTO_PACK_LOOSE,
            git_maintenance.AUTO_PACK_LIMIT,
        ) = 1, 8, 2
        # Merges of a few KB a checkpoint: most take two or three, so the states between a
        # merge's steps, and after its pack is published and its sources removed, are checked.
        git_maintenance.AUTO_MERGE_STEP, git_maintenance.AUTO_MERGE_FACTOR = 3000, 0
        git_maintenance._loose_estimate = lambda objects: len(git_objects.loose_objects(objects))

    store = MemoryStore.open(root / STORE, key, state_dir=root / STATE)
    states = []
    for n, (command, a) in enumerate(workload(writes), start=1):
        if command == "create":
            store.create(parse(a["path"]), a["text"])
        elif command == "str_replace":
            store.str_replace(parse(a["path"]), a["old"], a["new"])
        elif command == "insert":
            store.insert(parse(a["path"]), a["line"], a["text"])
        elif command == "rename":
            store.rename(parse(a["old"]), parse(a["new"]))
        else:
            store.delete(parse(a["path"]))
        if maintain:
            store.checkpoint()
        os.access(root / f"ACK-{n}", os.F_OK)
        states.append(store.files())
    expected_out.write_text(json.dumps(states))


def check(state: CrashState, key: str, expected: list[dict[str, str]], work: Path) -> str | None:
    """None if the store in ``state`` is whole and holds every acknowledged write, else why.

    The store is opened as after a reboot, which a power loss implies: :func:`run` points
    gitmem at another boot id, so that opening it recovers from the redo log.
    """
    from gitmem import MemoryStore
    from gitmem.paths import parse

    shutil.rmtree(work, ignore_errors=True)
    materialize(state, work)
    try:
        store = MemoryStore.open(work / STORE, key, state_dir=work / STATE)
        memory = store.files()
        report = store.verify()
        if not report.ok:
            return f"verify: {report.problems[0]}"
        # At most one write was in flight at the cut.
        if memory not in expected[state.acked : state.acked + 2]:
            return f"the memory is not the state after write {state.acked} or the next"
        store.create(parse("/memories/after-crash.md"), "written after the crash\n")
    except Exception as exc:  # every failure is a finding, whatever its type
        return f"{type(exc).__name__}: {exc}"
    return None


@dataclass
class Result:
    """What a checker run found."""

    writes: int
    calls: int
    flushes: int
    states: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)


def trace_run(
    root: Path,
    key: str,
    writes: int,
    trace_out: Path,
    expected_out: Path,
    maintain: bool = False,
    small: bool = False,
) -> None:
    """Run the driver under strace, recording every call on files."""
    env = dict(os.environ, GITMEM_KEY=key)
    command = [
        "strace", "-f", "-qq", "-y", "-xx", "-s", str(1 << 22), "-e", f"trace={_SYSCALLS}",
        "-o", str(trace_out), sys.executable, __file__, "--drive", str(root),
        "--writes", str(writes), "--expected", str(expected_out),
    ]  # fmt: skip
    if maintain:
        command.append("--maintain")
    if small:
        command.append("--small-log")
    subprocess.run(command, env=env, check=True)


def run(
    writes: int,
    random_subsets: int,
    base: Path | None = None,
    maintain: bool = False,
    small: bool = False,
) -> Result:
    """Trace a run of ``writes`` writes and check every crash state it could leave."""
    from gitmem import generate_key
    from gitmem.git import wal

    key = generate_key()
    with tempfile.TemporaryDirectory(prefix="gitmem-crash-", dir=base) as tmp:
        root = Path(tmp) / "root"
        with small_log(small):
            initial = setup(root, key)
        model = _Model(root)
        trace_out, expected_out = Path(tmp) / "trace", Path(tmp) / "expected.json"
        trace_run(root, key, writes, trace_out, expected_out, maintain, small)
        rec = record(trace_out.read_text("latin-1"), root, model)
        expected = [initial, *json.loads(expected_out.read_text())]
        result = Result(writes, rec.events, len(rec.flushes))
        # Checks write (a new write after each crash): on tmpfs their flushes cost nothing.
        scratch = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tmp)
        work = Path(tempfile.mkdtemp(prefix="gitmem-crash-check-", dir=scratch))
        # Every state is what the next boot finds: gitmem must see another boot id.
        saved_boot = wal.BOOT_ID_PATH
        wal.BOOT_ID_PATH = str(Path(tmp) / "boot_id")
        Path(wal.BOOT_ID_PATH).write_text(f"{uuid.uuid4()}\n")
        try:
            for state in crash_states(rec, random_subsets):
                result.states += 1
                problem = check(state, key, expected, work)
                if problem is not None:
                    result.failures.append(
                        {"event": state.event, "acked": state.acked, "how": state.how,
                         "why": problem}
                    )  # fmt: skip
        finally:
            wal.BOOT_ID_PATH = saved_boot
            shutil.rmtree(work, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=8, help="traced writes")
    parser.add_argument("--random", type=int, default=20, help="random subsets per crash point")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--dir", type=Path, default=None, help="where to work")
    parser.add_argument(
        "--maintain", action="store_true", help="pack loose objects often during the writes"
    )
    parser.add_argument(
        "--small-log", action="store_true", help="a tiny redo log, filled and resized often"
    )
    parser.add_argument("--drive", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drive is not None:
        drive(
            args.drive,
            os.environ["GITMEM_KEY"],
            args.writes,
            args.expected,
            args.maintain,
            args.small_log,
        )
        return 0
    if shutil.which("strace") is None:
        parser.error("strace is required (apt-get install strace)")
    result = run(args.writes, args.random, args.dir, args.maintain, args.small_log)
    if args.json:
        print(json.dumps(result.__dict__))
    else:
        print(
            f"{result.writes} writes, {result.calls} file-system calls, {result.flushes} "
            f"flushes: {result.states} crash states checked, {len(result.failures)} failed"
        )
        why: dict[str, int] = {}
        for failure in result.failures:
            kind = re.sub(r"[0-9a-f]{12,40}", "<id>", failure["why"])[:100]
            why[kind] = why.get(kind, 0) + 1
        for text, count in sorted(why.items(), key=lambda kv: -kv[1]):
            print(f"  {count:5d}  {text}")
    return 1 if result.failures else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
