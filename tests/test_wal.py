"""The redo log's format (gitmem/wal.py): what ends its valid prefix, and what is never trusted."""

from __future__ import annotations

import errno
import gc
import os
import subprocess
import sys
import threading
import uuid
import zlib
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitmem import MemoryStore
from gitmem.errors import IntegrityError
from gitmem.git import files as git_files
from gitmem.git import redo as git_redo
from gitmem.git import wal
from gitmem.git.refs import BRANCH
from gitmem.git.repo import GitRepo
from gitmem.paths import parse

# Each test runs in every write mode of the platform (tests/conftest.py, write_mode).
pytestmark = pytest.mark.usefixtures("write_mode")

BOOT = uuid.uuid4().bytes
HEAD_A = "a" * 40
HEAD_B = "b" * 40


def blob(data: bytes) -> tuple[bytes, bytes]:
    return (b"blob", data)


def write_log(path: Path, header: wal.Header, records: list[wal.Record]) -> list[int]:
    """A log holding ``records`` after ``header``; the offset after each record."""
    path.write_bytes(wal.new_log(header, size=64 * 1024))
    ends = []
    offset = wal.HEADER_SIZE
    fd = os.open(path, os.O_RDWR)
    try:
        for record in records:
            data = record.to_bytes()
            os.pwrite(fd, data, offset)
            offset += len(data)
            ends.append(offset)
    finally:
        os.close(fd)
    return ends


def valid(path: Path) -> list[wal.Record]:
    header = wal.read_header(path)
    assert header is not None
    fd = wal.open_log(path, write=False)
    try:
        return [record for record, _ in wal.records(fd, header)]
    finally:
        os.close(fd)


def test_the_header_and_records_round_trip(tmp_path: Path) -> None:
    log = tmp_path / wal.LOG_NAME
    header = wal.Header(7, BOOT, HEAD_A)
    first = wal.Record(7, 1, (("refs/heads/main", HEAD_B),), (blob(b"x"), (b"tree", b"")))
    second = wal.Record(7, 2, (("refs/heads/main", HEAD_A),), ())
    write_log(log, header, [first, second])
    assert wal.read_header(log) == header
    assert valid(log) == [first, second]
    assert wal.Header.parse(wal.Header(1, BOOT, None).to_bytes()) == wal.Header(1, BOOT, None)


def test_object_ids_are_recomputed_as_git_computes_them(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    for data in (b"", b"hello\n", bytes(range(256)) * 50):
        assert wal.object_id(b"blob", data) == str(repo.create_blob(data))
    record = wal.Record(1, 1, (), (blob(b"hello\n"),))
    assert wal.record_objects(record) == [(str(repo.create_blob(b"hello\n")), b"blob", b"hello\n")]


def test_a_torn_last_record_ends_the_valid_prefix(tmp_path: Path) -> None:
    log = tmp_path / wal.LOG_NAME
    header = wal.Header(3, BOOT, None)
    records = [wal.Record(3, n, (("refs/heads/main", HEAD_A),), (blob(b"%d" % n),)) for n in (1, 2)]
    ends = write_log(log, header, records)
    with open(log, "r+b") as handle:  # the power loss kept the first half of record 2
        handle.seek((ends[0] + ends[1]) // 2)
        handle.write(bytes(ends[1] - (ends[0] + ends[1]) // 2))
    assert valid(log) == records[:1]
    with open(log, "r+b") as handle:  # one flipped bit in record 1's payload
        handle.seek(ends[0] - 1)
        byte = handle.read(1)
        handle.seek(ends[0] - 1)
        handle.write(bytes([byte[0] ^ 1]))
    assert valid(log) == []


def test_records_of_an_older_generation_are_ignored(tmp_path: Path) -> None:
    log = tmp_path / wal.LOG_NAME
    old = [wal.Record(4, n, (("refs/heads/main", HEAD_A),), (blob(b"old"),)) for n in (1, 2, 3)]
    ends = write_log(log, wal.Header(4, BOOT, None), old)
    fd = os.open(log, os.O_RDWR)
    try:
        wal.write_header(fd, wal.Header(5, BOOT, HEAD_A))
        assert valid(log) == []  # the old generation's records are stale
        new = wal.Record(5, 1, (("refs/heads/main", HEAD_B),), ())
        os.pwrite(fd, new.to_bytes(), wal.HEADER_SIZE)
    finally:
        os.close(fd)
    assert len(new.to_bytes()) < ends[0]  # stale records 2 and 3 still follow it
    assert valid(log) == [new]


def test_records_out_of_order_end_the_prefix(tmp_path: Path) -> None:
    log = tmp_path / wal.LOG_NAME
    records = [wal.Record(1, n, (), ()) for n in (1, 3)]
    write_log(log, wal.Header(1, BOOT, None), records)
    assert valid(log) == records[:1]


def test_a_damaged_or_foreign_header_is_no_header(tmp_path: Path) -> None:
    log = tmp_path / wal.LOG_NAME
    assert wal.read_header(log) is None  # missing
    data = bytearray(wal.new_log(wal.Header(2, BOOT, HEAD_A), size=8192))
    data[20] ^= 0xFF
    log.write_bytes(bytes(data))
    assert wal.read_header(log) is None
    os.unlink(log)
    os.mkfifo(log)  # never blocks, never read
    assert wal.read_header(log) is None


def test_follow_finds_records_other_processes_appended(tmp_path: Path) -> None:
    log = tmp_path / wal.LOG_NAME
    header = wal.Header(9, BOOT, HEAD_A)
    first = wal.Record(9, 1, (("refs/heads/main", HEAD_B),), ())
    write_log(log, header, [first])
    fd = wal.open_log(log, write=True)
    try:
        tail = wal.follow(fd, header, None, "refs/heads/main")
        assert (tail.seq, tail.last) == (2, HEAD_B)
        second = wal.Record(9, 2, (("refs/heads/main", HEAD_A),), ())
        os.pwrite(fd, second.to_bytes(), tail.offset)
        tail = wal.follow(fd, header, tail, "refs/heads/main")
        assert (tail.seq, tail.last) == (3, HEAD_A)
        # Another generation: scanned from its start again.
        newer = wal.Header(10, BOOT, HEAD_B)
        assert wal.follow(fd, newer, tail, "refs/heads/main").last == HEAD_B
    finally:
        os.close(fd)


def test_the_boot_id_is_read_once_per_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "boot_id"
    source.write_text(str(uuid.UUID(bytes=BOOT)) + "\n")
    monkeypatch.setattr(wal, "BOOT_ID_PATH", str(source))
    assert wal.boot_id() == BOOT
    source.write_text(str(uuid.uuid4()) + "\n")
    assert wal.boot_id() == BOOT
    monkeypatch.setattr(wal, "BOOT_ID_PATH", str(tmp_path / "missing"))
    assert wal.boot_id() is None


def test_a_log_filled_by_few_records_doubles_and_by_many_halves() -> None:
    low, high = wal.MIN_CAPACITY, wal.MAX_CAPACITY
    assert wal.next_capacity(low, wal.GROW_BELOW - 1) == 2 * low
    assert wal.next_capacity(2 * low, wal.GROW_BELOW) == 2 * low
    assert wal.next_capacity(2 * low, 4 * wal.GROW_BELOW - 1) == 2 * low
    assert wal.next_capacity(2 * low, 4 * wal.GROW_BELOW) == low
    # Within bounds, whatever the log was extended to by a record larger than it.
    assert wal.next_capacity(high, 1) == high
    assert wal.next_capacity(5 * high + 1, 1) == high
    assert wal.next_capacity(low, 10_000) == low
    # A log a large first record extended to an odd size grows to whole blocks.
    grown = wal.next_capacity(low + 100, 1)
    assert grown % wal.HEADER_SIZE == 0 and 2 * (low + 100) <= grown <= high


# -- following the log from a GitRepo: kept open, exact without timestamps ------------------

needs_log = pytest.mark.needs_log
# A second process that acts on the store: argv is the repository, the key, a state
# directory and an action; it prints the branch's head afterwards.
_OTHER = """
import os
import sys
from gitmem import MemoryStore
from gitmem.errors import IntegrityError
from gitmem.git import wal
from gitmem.git.refs import BRANCH
from gitmem.git.repo import GitRepo
from gitmem.paths import parse
repo, key, state, action = sys.argv[1:5]
store = MemoryStore.open(repo, key, state_dir=state, check_rollback=False)
if action.startswith("write:"):
    store.create(parse("/memories/" + action[6:] + ".md"), action + "\\n")
elif action == "checkpoint":
    # A writer's checkpoint of a full log (a store's checkpoint when it is done resizes it).
    with store.repo.write_lock(30.0):
        store.repo.checkpoint()
elif action == "resize":
    with store.repo.write_lock(30.0):
        store.repo._checkpoint(4 * wal.MIN_CAPACITY)
print(GitRepo(repo).ref(BRANCH), flush=True)
# Ends as a killed writer would, keeping its records in the log: a process that exits normally
# publishes them (tests/test_publish.py), which would leave these tests nothing to follow.
os._exit(0)
"""


def other_process(repo: Path, key: str, tmp: Path, action: str) -> str:
    """Run ``action`` in another process; the branch's head it leaves."""
    done = subprocess.run(
        [sys.executable, "-c", _OTHER, str(repo), key, str(tmp / "other-state"), action],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def reader(repo_path: Path, key: str, tmp_path: Path) -> GitRepo:
    """A repository with two logged writes, and this process's reader following its log."""
    store = MemoryStore.open(repo_path, key, create=True, state_dir=tmp_path / "state")
    store.create(parse("/memories/a.md"), "a\n")
    store.create(parse("/memories/b.md"), "b\n")
    repo = GitRepo(repo_path)
    tail = repo.log.view()
    assert tail is not None and tail.records == 2
    return repo


def log_inode(repo: Path) -> int:
    return (repo / wal.LOG_NAME).stat().st_ino


@needs_log
def test_following_a_log_with_nothing_new_opens_nothing(
    reader: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even right after the log changed (when its times cannot be trusted yet)."""
    opened: list[object] = []
    real_open = os.open

    def counting(path: object, *args: Any, **kwargs: Any) -> int:
        opened.append(path)
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(git_files, "_RACY_FINE_SECONDS", 3600.0)  # never settled
    monkeypatch.setattr(git_files, "_RACY_SECONDS", 3600.0)
    head = reader.ref(BRANCH)
    monkeypatch.setattr(os, "open", counting)
    assert [reader.ref(BRANCH) for _ in range(5)] == [head] * 5
    assert opened == []


@needs_log
def test_a_record_another_process_appends_is_seen_at_once(
    reader: GitRepo, repo_path: Path, key: str, tmp_path: Path
) -> None:
    for n in range(3):
        head = other_process(repo_path, key, tmp_path, f"write:n{n}")
        assert reader.ref(BRANCH) == head
    tail = reader.log._tail
    assert tail is not None and tail.records == 5


@needs_log
def test_a_record_appended_without_moving_the_logs_times_is_seen(
    reader: GitRepo,
    repo_path: Path,
    key: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The racy case: a file system whose times did not move (coarse, or a clock stepped
    back) and a reader that trusts them. The record is found by reading, not by the times."""
    monkeypatch.setattr(git_files, "_RACY_FINE_SECONDS", -3600.0)  # always settled
    monkeypatch.setattr(git_files, "_RACY_SECONDS", -3600.0)
    monkeypatch.setattr(git_files, "identity", lambda info: (info.st_dev, info.st_ino))
    assert reader.ref(BRANCH) == reader.ref(BRANCH)
    head = other_process(repo_path, key, tmp_path, "write:racy")
    assert reader.ref(BRANCH) == head


@needs_log
def test_a_checkpoint_by_another_process_is_followed_in_place(
    reader: GitRepo, repo_path: Path, key: str, tmp_path: Path
) -> None:
    seen = reader.log._tail
    assert seen is not None
    inode = log_inode(repo_path)
    head = other_process(repo_path, key, tmp_path, "checkpoint")
    assert log_inode(repo_path) == inode  # the header was rewritten in the same file
    # A new generation without records: the branch is the ref file again.
    assert reader.ref(BRANCH) == head == reader.refs.ref_file(BRANCH)
    tail = reader.log._tail
    assert tail is not None and (tail.generation, tail.records) == (seen.generation + 1, 0)
    head = other_process(repo_path, key, tmp_path, "write:after")
    assert reader.ref(BRANCH) == head


@needs_log
def test_a_log_replaced_by_another_process_is_followed(
    reader: GitRepo, repo_path: Path, key: str, tmp_path: Path
) -> None:
    """A resize renames a new file over the log: the open one is stale from then on."""
    inode = log_inode(repo_path)
    other_process(repo_path, key, tmp_path, "resize")
    assert log_inode(repo_path) != inode
    head = other_process(repo_path, key, tmp_path, "write:resized")
    assert reader.ref(BRANCH) == head
    tail = reader.log._tail
    assert tail is not None and tail.records == 1 and tail.inode == log_inode(repo_path)


@needs_log
def test_a_log_replaced_by_one_with_the_same_header_is_followed(
    reader: GitRepo, repo_path: Path
) -> None:
    """Only the file tells them apart: a copy of the log with one more record, renamed over."""
    log = repo_path / wal.LOG_NAME
    tail = reader.log._tail
    header = wal.read_header(log)
    assert tail is not None and header is not None
    record = wal.Record(header.generation, tail.seq, ((BRANCH, HEAD_B),), (blob(b"more"),))
    data = bytearray(log.read_bytes())
    added = record.to_bytes()
    data[tail.offset : tail.offset + len(added)] = added
    (repo_path / "log.new").write_bytes(data)
    os.replace(repo_path / "log.new", log)
    assert reader.ref(BRANCH) == HEAD_B


@needs_log
def test_a_removed_log_is_followed_and_so_is_a_new_one(
    reader: GitRepo, repo_path: Path, key: str, tmp_path: Path
) -> None:
    log = repo_path / wal.LOG_NAME
    kept = log.read_bytes()
    log.unlink()
    # No log: the ref file alone (which the two writes never moved).
    assert reader.ref(BRANCH) == reader.refs.ref_file(BRANCH)
    assert reader.log._tail is None
    log.write_bytes(kept)
    log.chmod(0o600)
    head = other_process(repo_path, key, tmp_path, "write:new-log")
    assert reader.ref(BRANCH) == head


@needs_log
def test_a_forked_child_does_not_trust_the_parents_descriptor(
    reader: GitRepo, tmp_path: Path
) -> None:
    """The child may have closed it and opened another file under the same number."""
    head = reader.ref(BRANCH)
    opened = reader.log._reading
    assert opened is not None
    decoy = tmp_path / "decoy"
    decoy.write_bytes(bytes(8192))
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it reads, and leave at once
        try:
            # The number names another file now (the child closed its copy when it was forked).
            os.dup2(os.open(decoy, os.O_RDONLY), opened.fd)
            os.write(write_fd, str(reader.ref(BRANCH)).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        answer = os.read(read_fd, 100).decode()
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    assert answer == head
    assert reader.ref(BRANCH) == head  # the parent's descriptor is untouched


@needs_log
def test_threads_follow_the_log_while_it_is_written_checkpointed_and_replaced(
    reader: GitRepo, repo_path: Path, key: str, tmp_path: Path
) -> None:
    writer = MemoryStore.open(repo_path, key, state_dir=tmp_path / "state")
    heads = {writer.repo.ref(BRANCH)}
    seen: list[str | None] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def follow() -> None:
        try:
            while not stop.is_set():
                seen.append(reader.ref(BRANCH))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=follow) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for n in range(12):
            writer.create(parse(f"/memories/t{n}.md"), f"{n}\n")
            heads.add(writer.repo.ref(BRANCH))
            if n % 4 == 3:
                with writer.repo.write_lock(30.0):
                    writer.repo._checkpoint(wal.MIN_CAPACITY * (2 + n % 8))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert failures == []
    assert set(seen) <= heads
    assert reader.ref(BRANCH) == writer.repo.ref(BRANCH)


@needs_log
def test_a_read_only_store_follows_the_log(
    reader: GitRepo, repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened for reading only: a process that may write nothing there still follows it."""
    head = other_process(repo_path, key, tmp_path, "write:seen-read-only")
    real_open = os.open

    def read_only(path: object, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).startswith(str(repo_path)) and flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", read_only)
    fresh = GitRepo(repo_path)
    assert fresh.ref(BRANCH) == reader.ref(BRANCH) == head


@needs_log
def test_a_record_another_thread_read_before_its_writer_took_it_in_is_taken_in_once(
    reader: GitRepo, repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader thread of the writing process may find the record between the writer's
    ``pwrite`` and its own taking in of it; the tail must still end where the record ends."""
    store = MemoryStore.open(repo_path, key, state_dir=tmp_path / "state")
    real_pwrite = os.pwrite

    def then_read(fd: int, data: bytes, offset: int) -> int:
        written = real_pwrite(fd, data, offset)
        if data.startswith(wal.RECORD_MAGIC):
            reading = threading.Thread(target=store.repo.log.view)
            reading.start()
            reading.join()
        return written

    monkeypatch.setattr(os, "pwrite", then_read)
    for n in range(3):
        store.create(parse(f"/memories/raced{n}.md"), f"{n}\n")
    monkeypatch.undo()
    fresh = GitRepo(repo_path).log.view()
    tail = store.repo.log._tail
    assert fresh is not None and tail is not None
    assert (tail.offset, tail.seq, tail.last) == (fresh.offset, fresh.seq, fresh.last)
    assert fresh.records == 5 and reader.ref(BRANCH) == fresh.last


def test_a_tail_takes_a_records_ids_from_its_writer_or_computes_them() -> None:
    """The writer hands the ids it computed as it wrote (no second hash of each object); a
    reader computes them: both give the same view, and ids that do not match the record's
    objects one for one are refused, never paired with the wrong payloads."""
    objects = ((b"blob", b"one"), (b"tree", b""), (b"blob", b"two"))
    ids = [wal.object_id(kind, payload) for kind, payload in objects]
    record = wal.Record(1, 1, ((BRANCH, "ab" * 20),), objects)
    computed, given = wal.Tail(1), wal.Tail(1)
    computed.add(record, 5000, BRANCH)
    given.add(record, 5000, BRANCH, ids=ids)
    assert computed == given
    assert computed.objects == dict(zip(ids, objects, strict=True))
    assert (computed.last, computed.seq, computed.offset) == ("ab" * 20, 2, 5000)
    with pytest.raises(ValueError):
        wal.Tail(1).add(record, 5000, BRANCH, ids=ids[:2])


@needs_log
def test_a_reader_collected_at_interpreter_exit_closes_its_log_quietly(
    repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At interpreter exit a module's globals may be gone (None) before its objects are
    collected: the reader's open log is still closed, and nothing is printed."""
    store = MemoryStore.open(repo_path, key, create=True, state_dir=tmp_path / "state")
    store.create(parse("/memories/a.md"), "a\n")
    log = os.path.realpath(repo_path / wal.LOG_NAME)

    def open_logs() -> set[str]:
        return {
            fd
            for fd in os.listdir("/proc/self/fd")
            if os.path.realpath(f"/proc/self/fd/{fd}") == log
        }

    before = open_logs()
    repo = GitRepo(repo_path)
    assert repo.ref(BRANCH) is not None  # its reader now holds the log open
    opened = open_logs() - before
    assert len(opened) == 1
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    monkeypatch.setattr(git_redo, "PROCESS", None)  # as module teardown leaves it
    del repo
    gc.collect()
    monkeypatch.undo()
    assert unraisable == []
    assert not open_logs() & opened


def sparse_record(path: Path, offset: int, generation: int, seq: int, length: int) -> None:
    """Write at ``offset`` the fixed part of record ``seq`` declaring a body of ``length`` zero
    bytes (its CRC right when that is cheap to compute), and make the file that long without
    writing the body (sparse)."""
    fixed = wal._RECORD.pack(wal.RECORD_MAGIC, generation, seq, length)
    crc = zlib.crc32(bytes(length), zlib.crc32(fixed)) if length < (1 << 20) else 0
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(fixed + wal._CRC.pack(crc))
        handle.truncate(max(offset + len(fixed) + 4 + length, path.stat().st_size))


def largest_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every length ``os.pread`` is asked for from now on."""
    asked: list[int] = []
    real = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        asked.append(length)
        return real(fd, length, offset)

    monkeypatch.setattr(os, "pread", counting)
    return asked


@pytest.mark.parametrize("length", [wal.MAX_BODY + 1, 64 << 20])
def test_a_record_declaring_more_than_the_format_allows_is_refused_unread(
    tmp_path: Path, length: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / wal.LOG_NAME
    header = wal.Header(3, BOOT, None)
    ends = write_log(log, header, [wal.Record(3, 1, (("refs/heads/main", HEAD_A),), ())])
    sparse_record(log, ends[0], 3, 2, length)
    asked = largest_reads(monkeypatch)
    with pytest.raises(IntegrityError) as raised:
        valid(log)
    assert str(raised.value) == (
        f"the redo log gitmem.wal is damaged: its record 2 declares {length:,} bytes, ending at "
        f"offset {ends[0] + 28 + length:,}; a record holds at most 524,288 and the log at most "
        "1,048,576, so gitmem wrote no such record (nothing of it was read)"
    )
    assert max(asked) <= wal.HEADER_LENGTH


def test_records_that_together_pass_the_logs_bound_are_refused(tmp_path: Path) -> None:
    """Each within a record's bound, but a log ends by 1 MiB."""
    log = tmp_path / wal.LOG_NAME
    header = wal.Header(3, BOOT, None)
    first = wal.Record(3, 1, (), (blob(bytes(wal.MAX_BODY - 100)),))
    ends = write_log(log, header, [first])
    sparse_record(log, ends[0], 3, 2, wal.MAX_BODY)
    with pytest.raises(IntegrityError, match="its record 2 declares 524,288 bytes"):
        valid(log)


def test_a_record_ending_past_the_files_end_is_torn_and_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / wal.LOG_NAME
    header = wal.Header(3, BOOT, None)
    first = wal.Record(3, 1, (("refs/heads/main", HEAD_A),), ())
    ends = write_log(log, header, [first])
    sparse_record(log, ends[0], 3, 2, 1000)
    os.truncate(log, ends[0] + 28 + 999)
    asked = largest_reads(monkeypatch)
    assert valid(log) == [first]
    assert max(asked) <= wal.HEADER_LENGTH


def test_a_version_1_record_is_bounded_by_its_files_size(tmp_path: Path) -> None:
    log = tmp_path / wal.LOG_NAME
    header = wal.Header(3, BOOT, None, version=1)
    large = wal.Record(3, 1, (("refs/heads/main", HEAD_A),), (blob(bytes(wal.MAX_BODY)),))
    write_log(log, header, [large])
    assert valid(log) == [large]


@needs_log
def test_a_sparse_log_declaring_gigabytes_is_refused_without_reading_them(
    reader: GitRepo, repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tail = reader.log._tail
    assert tail is not None
    log = repo_path / wal.LOG_NAME
    sparse_record(log, tail.offset, tail.generation, tail.seq, (1 << 31) - 1)
    asked = largest_reads(monkeypatch)
    store = MemoryStore.open(repo_path, key, state_dir=tmp_path / "state", check_rollback=False)
    with pytest.raises(IntegrityError, match=r"^the redo log gitmem\.wal is damaged: its record 3"):
        store.read_text("/memories/a.md")
    assert max(asked) <= wal.HEADER_SIZE
