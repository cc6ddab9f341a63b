"""The redo log's format (gitmem/wal.py): what ends its valid prefix, and what is never trusted."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pygit2
import pytest

from gitmem import wal

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
