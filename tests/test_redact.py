"""Redaction: a text replaced by ``[redacted]`` in every version of every file, on every replica
(design.md, "Redaction"), against real ``git daemon`` replicas; refused when forged."""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_git_servers import bare_repo, git_daemon

from gitmem import IntegrityError, MemoryStore
from gitmem import format as fmt
from gitmem.crypto import StoreKeys, decode_key
from gitmem.git import wal
from gitmem.git.repo import PRUNE_NOW
from gitmem.search import pickaxe

SECRET = "4111-1111-1111-1111 exp 09/29"


def p(name: str) -> str:
    return f"/memories/{name}"


# -- finding the text anywhere in a repository, under the store's key --------------------------


def _objects(repo: Path) -> Iterator[tuple[str, str, bytes]]:
    """``(id, type, content)`` of every object in ``repo``, loose or packed, as git reads it."""
    git = ["git", "--git-dir", str(repo)]
    listing = subprocess.run(
        [*git, "cat-file", "--batch-all-objects", "--batch-check"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.split("\n")
    rows = [line.split() for line in listing if line]
    out = subprocess.run(
        [*git, "cat-file", "--batch"],
        input="".join(f"{oid}\n" for oid, _, _ in rows).encode(),
        capture_output=True,
        check=True,
    ).stdout
    pos = 0
    for oid, kind, size in rows:
        pos = out.index(b"\n", pos) + 1
        yield oid, kind, out[pos : pos + int(size)]
        pos += int(size) + 1


def _opens(keys: StoreKeys, data: bytes, secret: bytes) -> bool:
    """True when ``data`` is a chunk or header sealed under ``keys`` whose plaintext holds
    ``secret``."""
    for role in (fmt.ROLE_CHUNK, fmt.ROLE_HEADER):
        try:
            plain = keys.open_blob(data, role)
        except IntegrityError:
            continue
        body = zlib.decompress(plain[1:]) if plain[:1] == b"\x01" else plain[1:]
        if secret in body or secret in plain:
            return True
    return False


def _wal_objects(path: Path) -> Iterator[bytes]:
    """The payload of every object of every record the redo log still holds, of any
    generation (a checkpoint leaves earlier generations' records in place)."""
    if not path.exists():
        return
    data = path.read_bytes()
    for found in re.finditer(re.escape(wal.RECORD_MAGIC), data):
        start = found.start()
        try:
            _, generation, seq, length = wal._RECORD.unpack_from(data, start)
        except struct.error:
            continue
        body_at = start + wal._RECORD.size + wal._CRC.size
        record = wal._parse_body(generation, seq, data[body_at : body_at + length])
        if record is not None:
            yield from (payload for _, payload in record.objects)


def leaks(repo: Path, key: str, secret: str) -> list[str]:
    """Where ``repo`` (its objects, its redo log, any other file in it) yields ``secret``,
    decrypting with every key ``key`` derives."""
    meta = subprocess.run(
        ["git", "--git-dir", str(repo), "cat-file", "blob", "refs/gitmem/meta"],
        capture_output=True,
        check=True,
    ).stdout
    store_id = fmt.StoreMeta.from_bytes(meta).store_id
    keys = StoreKeys.derive(decode_key(key), store_id)
    needle = secret.encode()
    found = []
    for oid, kind, content in _objects(repo):
        if needle in content or (kind == "blob" and _opens(keys, content, needle)):
            found.append(f"object {oid}")
        if kind == "commit":
            header, _, message = content.partition(b"\n\n")
            tree = header.split(b"\n")[0].split()[1].decode()
            parents = [
                line.split()[1].decode()
                for line in header.split(b"\n")
                if line.startswith(b"parent ")
            ]
            ad = fmt.record_ad(store_id, tree, parents)
            try:
                record = keys.open_record(fmt.decode_message(message), ad)
            except IntegrityError:
                continue
            if needle in record:
                found.append(f"record {oid}")
    found += [
        "redo log object"
        for payload in _wal_objects(repo / wal.LOG_NAME)
        if needle in payload or _opens(keys, payload, needle)
    ]
    for file in repo.rglob("*"):
        if file.is_file() and needle in file.read_bytes():
            found.append(f"file {file}")
    return found


# -- the whole story, three repositories -------------------------------------------------------


Kept = tuple[int, int, str, str, tuple[str, ...], str]


def state(store: MemoryStore) -> tuple[list[Kept], list[dict[str, str]]]:
    """Each operation's record as a redaction keeps it, and each revision's files other than
    those that held the secret, newest first."""
    records, files = [], []
    for op in store.log():
        if op.command == "redact":
            continue
        r = op.record
        records.append((r.seq, r.time_ns, r.session, r.command, r.paths, r.version))
        files.append(
            {path: text for path, text in store.files(op.commit).items() if "card" not in text}
        )
    return records, files


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "served"
    root.mkdir()
    path = bare_repo(root, "memory.git")
    with git_daemon(root) as base:
        yield f"{base}/memory.git", path


def test_a_redaction_reaches_every_replica_and_leaves_no_trace(
    served: tuple[str, Path], tmp_path: Path, key: str
) -> None:
    url, on_disk = served
    a = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "sa", session="s1")
    a.add_remote("origin", url)
    a.create(p("notes.md"), f"groceries\ncard {SECRET}\nmilk\n")
    a.create(p("other.md"), "unrelated\n")
    a.push()
    b = MemoryStore.clone(url, tmp_path / "b.git", key, state_dir=tmp_path / "sb", session="b1")
    a.session = "s2"
    a.str_replace(p("notes.md"), "milk", "oat milk")
    a.insert(p("notes.md"), 0, "# list\n")
    a.create(p("copy.md"), f"copied card {SECRET} once\n")
    a.str_replace(p("other.md"), "unrelated", "still unrelated")
    a.push()
    b.pull()
    # B's own work, not pushed: unrelated to the secret.
    b.create(p("b-own.md"), "from b\n")
    b.str_replace(p("other.md"), "still unrelated", "still unrelated, b")
    a.session = "s3"
    a.rename(p("notes.md"), p("moved.md"))
    a.delete(p("copy.md"))
    a.create(p("later.md"), "later\n")
    a.push()
    # Not pushed yet: in A's redo log only, until a checkpoint, and then as a stale record.
    a.str_replace(p("moved.md"), "groceries", "groceries, eggs")
    for store in (a, b):
        store.checkpoint()
    # The scan finds the text in the objects, and (in A) in the redo log's stale records.
    found = leaks(a.path, key, SECRET)
    assert any(f.startswith("object") for f in found) and leaks(on_disk, key, SECRET)
    assert any(f == "redo log object" for f in found) == a.repo.mode.logged
    before = state(a)
    old_head = a.head()
    assert old_head is not None

    dry = a.redact(SECRET, dry_run=True)
    assert [(h.operation.seq, h.operation.command, h.path) for h in dry.holding] == [
        (1, "create", p("notes.md")),
        (3, "str_replace", p("notes.md")),
        (4, "insert", p("notes.md")),
        (5, "create", p("copy.md")),
        (7, "rename", p("moved.md")),
        (10, "str_replace", p("moved.md")),
    ]
    assert a.head() == old_head
    done = a.redact(SECRET)
    assert done.operation is not None
    assert (done.versions, done.operations, done.paths) == (
        5,
        10,
        (p("copy.md"), p("moved.md"), p("notes.md")),
    )
    assert done.operation.command == "redact" and SECRET not in repr(done.operation.record)
    assert a.read_text(p("moved.md")) == "# list\ngroceries, eggs\ncard [redacted]\noat milk\n"
    assert state(a) == before
    # Before any gc: the old objects are still there, but the redo log holds none of them.
    assert "redo log object" not in leaks(a.path, key, SECRET)
    a.push()
    b.pull()
    assert b.read_text(p("moved.md")) == "# list\ngroceries, eggs\ncard [redacted]\noat milk\n"
    assert b.read_text(p("b-own.md")) == "from b\n"
    assert b.read_text(p("other.md")) == "still unrelated, b\n"
    b.push()
    a.pull()
    assert a.files() == b.files()
    for store in (a, b):
        assert (store.path / PRUNE_NOW).exists()
        store.gc()
        assert not (store.path / PRUNE_NOW).exists()
    subprocess.run(["git", "--git-dir", str(on_disk), "gc", "-q", "--prune=now"], check=True)
    for repo in (a.path, b.path, on_disk):
        assert leaks(repo, key, SECRET) == []
        assert (
            subprocess.run(
                ["git", "--git-dir", str(repo), "cat-file", "-e", old_head], capture_output=True
            ).returncode
            != 0
        )
    for store in (a, b):
        assert store.verify().ok
        assert list(pickaxe(store, text=SECRET)) == []
        assert all(
            SECRET not in text for op in store.log() for text in store.files(op.commit).values()
        )
    # Every record of A's history reads as before, with the other files as they were.
    records, files = state(MemoryStore.open(a.path, key, state_dir=tmp_path / "sa"))
    kept = dict(zip(records, map(str, files), strict=True))
    assert [kept.get(r) for r in before[0]] == [str(f) for f in before[1]]
