"""Redaction: a text replaced by ``[redacted]`` in every version of every file, on every replica
(design.md, "Redaction"), against real ``git daemon`` replicas; refused when forged."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers_git_servers import bare_repo, git_daemon

from gitmem import (
    ConflictError,
    IntegrityError,
    MemoryStore,
    PushRejected,
    RollbackDetected,
    buckets,
    cli,
)
from gitmem import format as fmt
from gitmem.cli import main
from gitmem.crypto import KdfParams, StoreKeys, decode_key
from gitmem.errors import FormatVersionError, NotFound, UsageError
from gitmem.git import wal
from gitmem.git.repo import PRUNE_NOW
from gitmem.options import StoreOptions
from gitmem.search import pickaxe

SECRET = "4111-1111-1111-1111 exp 09/29"
FAST = KdfParams(64, 1, 1)  # cheap Argon2id for tests


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
        # Temporary files and directories (a fetch's quarantine, a pack being written) would
        # hold objects that the scan of the object database does not see.
        if any(mark in file.name for mark in ("gitmem-fetch-", "gitmem-gc-", "tmp_")):
            found.append(f"temporary {file}")
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


@pytest.mark.usefixtures("write_mode")
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
    # Not pushed yet: in A's redo log only, until a checkpoint, and then as a stale record
    # (a writer's checkpoint keeps the log's file; the one a store makes when it is done gives
    # it a new one at its size at rest).
    a.str_replace(p("moved.md"), "groceries", "groceries, eggs")
    for store in (a, b):
        with store.repo.write_lock(30.0):
            store.repo.checkpoint(clear=True)
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
    pulled = b.pull()
    # The pull says it moved B's history onto the redacted one: its old versions stay until gc.
    assert pulled.redaction is not None and pulled.redaction.commit == done.operation.commit
    assert pulled.to_json()["redaction"]["command"] == "redact"
    assert b.read_text(p("moved.md")) == "# list\ngroceries, eggs\ncard [redacted]\noat milk\n"
    assert b.read_text(p("b-own.md")) == "from b\n"
    assert b.read_text(p("other.md")) == "still unrelated, b\n"
    b.push()
    assert a.pull().redaction is None  # A's own redaction: nothing of A's was rewritten
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


# -- replicas with work of their own, and a remote nobody should trust -------------------------


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    path = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--bare", "-q", str(path)], check=True)
    return path


def first_replica(origin: Path, tmp_path: Path, key: str) -> MemoryStore:
    a = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "sa", session="a")
    a.add_remote("origin", str(origin))
    a.create(p("notes.md"), f"one\ncard {SECRET}\ntwo\n")
    a.create(p("other.md"), "other\n")
    a.push()
    return a


def replica(origin: Path, tmp_path: Path, key: str, name: str) -> MemoryStore:
    return MemoryStore.clone(
        str(origin), tmp_path / f"{name}.git", key, state_dir=tmp_path / f"s{name}"
    )


def test_unpushed_work_on_a_redacted_file_is_refused_until_redacted_there_too(
    origin: Path, tmp_path: Path, key: str
) -> None:
    a = first_replica(origin, tmp_path, key)
    b = replica(origin, tmp_path, key, "b")
    b.str_replace(p("notes.md"), "two", "two and three")
    a.redact(SECRET)
    a.push()
    before = b.head()
    with pytest.raises(ConflictError) as refused:
        b.pull()
    assert str(refused.value) == (
        f"the remote {origin} redacted a text from its history, and operation #3 of this "
        f"replica, not pushed yet, wrote {p('notes.md')}, a file the redaction rewrote: it may "
        "hold the text. Run `gitmem redact` here with the same text, then pull again; nothing "
        "was changed"
    )
    assert b.head() == before and SECRET in b.read_text(p("notes.md"))
    # Redacted here with the same text, the shared history is the very same commits.
    b.redact(SECRET)
    assert a.head_operation() is not None
    b.sync()
    a.pull()
    assert a.read_text(p("notes.md")) == b.read_text(p("notes.md"))
    assert a.read_text(p("notes.md")) == "one\ncard [redacted]\ntwo and three\n"
    for store in (a, b):
        store.gc()
        assert store.verify().ok
        assert leaks(store.path, key, SECRET) == []
        # One copy of each operation: the two rewrites of the shared history are the same.
        assert sorted(op.seq for op in store.log() if op.command != "merge") == [1, 2, 3, 3, 4]


def test_a_redaction_pushed_after_gc_still_replaces_the_remote(
    origin: Path, tmp_path: Path, key: str
) -> None:
    a = first_replica(origin, tmp_path, key)
    b = replica(origin, tmp_path, key, "b")
    a.redact(SECRET)
    a.gc()
    assert a.pull().action == "up-to-date"  # the old history has nothing to give
    a.gc()
    assert a.push().action == "pushed"
    pulled = b.pull()
    assert pulled.action == "fast-forward" and pulled.redaction is not None
    assert b.head() == a.head() and b.verify().ok
    assert b.pull().redaction is None  # said once, by the pull that adopted it


def test_a_rewind_or_a_rewrite_without_the_key_is_refused(
    origin: Path, tmp_path: Path, key: str
) -> None:
    a = first_replica(origin, tmp_path, key)
    b = replica(origin, tmp_path, key, "b")
    old = a.head()
    assert old is not None
    done = a.redact(SECRET).operation
    assert done is not None
    a.push()
    b.pull()
    git = ["git", "--git-dir", str(origin)]
    # The host serves the old history again: it holds no redaction of what B saw since.
    subprocess.run([*git, "update-ref", "refs/heads/main", old], check=True)
    with pytest.raises(RollbackDetected, match="rewound or force-pushed"):
        b.pull()
    assert b.head() == done.commit
    # Someone without the key copies the redaction's record onto a history of their own.
    message = subprocess.run(
        [*git, "cat-file", "commit", done.commit], capture_output=True, check=True
    ).stdout.partition(b"\n\n")[2]
    tree = a.read_operation(old).tree
    forged = (
        subprocess.run(
            [*git, "commit-tree", tree, "-p", old],
            input=message,
            capture_output=True,
            check=True,
            env={
                **os.environ,
                "GIT_AUTHOR_NAME": "x",
                "GIT_AUTHOR_EMAIL": "x@x",
                "GIT_COMMITTER_NAME": "x",
                "GIT_COMMITTER_EMAIL": "x@x",
            },
        )
        .stdout.decode()
        .strip()
    )
    subprocess.run([*git, "update-ref", "refs/heads/main", forged], check=True)
    with pytest.raises(IntegrityError, match="failed authentication"):
        b.pull()
    assert b.head() == done.commit and b.verify().ok


def test_a_redaction_by_a_removed_holder_is_refused(origin: Path, tmp_path: Path, key: str) -> None:
    a = first_replica(origin, tmp_path, key)
    a.add_key(passphrase="a long passphrase for bob", label="bob", kdf=FAST)
    a.push()
    b = replica(origin, tmp_path, key, "b")
    # C's copy, taken before B's rotation: it knows epoch 0 only, as a removed holder would.
    c = replica(origin, tmp_path, key, "c")
    b.rotate_keys()
    before = b.head()
    c.redact(SECRET)
    subprocess.run(
        ["git", "--git-dir", str(c.path), "push", "-q", "--force", str(origin), "main:main"],
        check=True,
    )
    with pytest.raises(IntegrityError, match="sealed in key epoch 0, older than this replica"):
        b.pull()
    assert b.head() == before and SECRET in b.read_text(p("notes.md"))


def test_a_redacted_store_is_of_a_format_older_gitmem_refuses(
    origin: Path, tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = first_replica(origin, tmp_path, key)
    b = replica(origin, tmp_path, key, "b")
    a.redact(SECRET)
    a.push()
    b.pull()
    for store in (a, b):
        meta = store.bound_meta(store.head_operation()).meta
        assert meta.format == fmt.COMPACT_FORMAT_VERSION and meta.redacted
    older = fmt.READABLE_VERSIONS - {fmt.COMPACT_FORMAT_VERSION}
    monkeypatch.setattr(fmt, "READABLE_VERSIONS", older)
    version = f"format version {fmt.COMPACT_FORMAT_VERSION}; "
    with pytest.raises(FormatVersionError, match=version + r".*\(upgrade gitmem\)"):
        MemoryStore.open(b.path, key, state_dir=tmp_path / "sb")


# -- refusals: nothing is written --------------------------------------------------------------


def test_what_cannot_be_redacted_is_refused_and_nothing_written(
    origin: Path, tmp_path: Path, key: str
) -> None:
    a = first_replica(origin, tmp_path, key)
    a.create(p(f"{SECRET[:4]}-named.md"), "x\n")
    head = a.head()
    cases: list[tuple[str, type[Exception], str]] = [
        ("", UsageError, "the text to redact is empty; nothing was changed"),
        ("dacte", UsageError, "is part of the marker [redacted] that replaces it"),
        ("not anywhere", NotFound, "no version of any file holds the text; nothing was changed"),
        (SECRET[:4], UsageError, "the text is in the record of operation #3"),
    ]
    a.session = f"session {SECRET[5:9]}"
    cases.append((SECRET[5:9], UsageError, "the text is in this session's label"))
    for text, error, words in cases:
        with pytest.raises(error) as refused:
            a.redact(text)
        assert words in str(refused.value)
        assert a.head() == head
    assert not (a.path / PRUNE_NOW).exists()


def test_the_command_line_reads_the_text_from_stdin_or_a_file_never_argv(
    origin: Path, tmp_path: Path, key: str, utc: None
) -> None:
    a = first_replica(origin, tmp_path, key)
    first = a.log().__next__()
    created = list(a.log())[-1]
    head = a.head()
    runner = CliRunner()
    env = {"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(tmp_path / "sa")}
    base = ["--repo", str(a.path), "redact"]
    dry = runner.invoke(main, [*base, "-", "--dry-run"], input=SECRET + "\n", env=env)
    assert dry.exit_code == 0, dry.output
    when = created.record.time.isoformat().replace("+00:00", "Z")
    assert dry.stdout == (
        "Dry run: the text is in 1 version of 1 path, written by 1 operation; redacting it "
        "rewrites 2 operations:\n"
        f"#1 {created.commit[:10]} {when} a create /memories/notes.md\n"
    )
    assert SECRET not in dry.output
    refusals = [
        ([*base, SECRET], "", 2, "never given on the command line"),
        ([*base, "-"], "\n", 2, "the text to redact is empty; nothing was changed"),
        ([*base, "-"], "nowhere\n", 1, "no version of any file holds the text"),
        ([*base, "-", "--file", str(tmp_path / "t")], "", 2, "not both"),
        (base, "", 2, "give the text to redact on stdin (`gitmem redact -`) or in a file"),
    ]
    for args, given, code, words in refusals:
        result = runner.invoke(main, args, input=given, env=env)
        assert (result.exit_code, words in result.stderr) == (code, True), result.output
        assert SECRET not in result.output
    assert MemoryStore.open(a.path, key, state_dir=tmp_path / "sa").head() == head
    (tmp_path / "t").write_text(SECRET + "\n")
    done = runner.invoke(main, [*base, "--file", str(tmp_path / "t"), "--json"], env=env)
    assert done.exit_code == 0, done.output
    body = json.loads(done.stdout)
    assert (body["versions"], body["operations"], body["paths"]) == (1, 2, [p("notes.md")])
    assert body["operation"]["command"] == "redact" and SECRET not in done.stdout
    assert body["operation"]["detail"] == {
        "rewrote": head,
        "rewrote_seq": 2,
        "versions": 1,
        "operations": 2,
    }
    assert first.seq == 2
    log = runner.invoke(main, ["--repo", str(a.path), "log", "-S", SECRET], env=env)
    assert log.exit_code == 0 and log.stdout == ""


def test_work_pushed_on_the_old_history_before_the_redaction_is_copied_onto_it(
    origin: Path, tmp_path: Path, key: str
) -> None:
    a = first_replica(origin, tmp_path, key)
    c = replica(origin, tmp_path, key, "c")
    a.redact(SECRET)
    # C, not knowing of it, pushes work on the old history before A publishes the redaction.
    c.create(p("from-c.md"), "c\n")
    c.push()
    with pytest.raises(PushRejected):
        a.push()
    result = a.sync()
    assert result.action == "merged+pushed"
    assert a.read_text(p("from-c.md")) == "c\n"
    assert a.read_text(p("notes.md")) == "one\ncard [redacted]\ntwo\n"
    c.pull()
    assert c.files() == a.files()
    for store in (a, c):
        store.gc()
        assert store.verify().ok
        assert leaks(store.path, key, SECRET) == []
        assert list(pickaxe(store, text=SECRET)) == []
    subprocess.run(["git", "--git-dir", str(origin), "gc", "-q", "--prune=now"], check=True)
    assert leaks(origin, key, SECRET) == []


def test_work_pushed_on_the_old_history_that_edits_a_redacted_file_is_refused(
    origin: Path, tmp_path: Path, key: str
) -> None:
    a = first_replica(origin, tmp_path, key)
    c = replica(origin, tmp_path, key, "c")
    a.redact(SECRET)
    c.str_replace(p("notes.md"), "two", "two, three")
    c.push()
    head = a.head()
    with pytest.raises(ConflictError, match=r"has operation #3 \(.*\), written on the history"):
        a.sync()
    assert a.head() == head and SECRET not in a.read_text(p("notes.md"))
    # C redacts the same text: its rewrite of the shared history is the same commits.
    c.redact(SECRET)
    c.sync()
    a.sync()
    c.pull()
    assert a.files() == c.files()
    assert a.read_text(p("notes.md")) == "one\ncard [redacted]\ntwo, three\n"


def test_split_directories_and_a_second_redaction(
    origin: Path, tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", 4)  # every directory here is split
    a = first_replica(origin, tmp_path, key)
    b = replica(origin, tmp_path, key, "b")
    for n in range(12):
        a.create(p(f"deep/dir/n{n}.md"), f"note {n}\n" + (f"pin {n}: 0000-{n}\n" if n % 3 else ""))
    a.push()
    b.pull()
    b.create(p("b.md"), "b\n")
    files = a.files()
    a.redact(SECRET)
    assert a.redact("0000-4").versions == 1
    a.push()
    b.pull()
    expected = {
        path: text.replace(SECRET, "[redacted]").replace("0000-4", "[redacted]")
        for path, text in files.items()
    }
    assert {k: v for k, v in b.files().items() if k != p("b.md")} == expected
    assert a.files() == expected
    for store in (a, b):
        store.gc()
        assert store.verify().ok
        assert leaks(store.path, key, SECRET) == [] and leaks(store.path, key, "0000-4") == []
        assert [op.command for op in store.log()].count("redact") == 2


def test_an_older_redaction_served_again_is_refused(origin: Path, tmp_path: Path, key: str) -> None:
    a = first_replica(origin, tmp_path, key)
    a.create(p("pin.md"), "pin 9876\n")
    a.push()
    b = replica(origin, tmp_path, key, "b")
    first = a.redact(SECRET).operation
    assert first is not None
    a.push()
    b.pull()
    second = a.redact("9876").operation
    assert second is not None
    a.push()
    b.pull()
    assert b.head() == second.commit
    # The host serves the first redaction's history again: authentic, and a redaction, but
    # without a copy of what B saw there since.
    subprocess.run(
        ["git", "--git-dir", str(origin), "update-ref", "refs/heads/main", first.commit],
        check=True,
    )
    with pytest.raises(RollbackDetected, match="rewound or force-pushed"):
        b.pull()
    assert b.head() == second.commit and b.read_text(p("pin.md")) == "pin [redacted]\n"


def test_a_push_that_would_replace_work_pushed_meanwhile_is_refused(
    origin: Path, tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = first_replica(origin, tmp_path, key)
    c = replica(origin, tmp_path, key, "c")
    a.redact(SECRET)
    real = a.repo.push

    def racing(*args: Any, **kwargs: Any) -> None:
        # C pushes between A's check of the remote's head and A's forced update.
        c.create(p("from-c.md"), "c\n")
        c.push()
        real(*args, **kwargs)

    monkeypatch.setattr(a.repo, "push", racing)
    with pytest.raises(PushRejected, match=r"refs/heads/main \(it moved since it was checked\)"):
        a.push()
    monkeypatch.undo()
    assert c.pull().action == "up-to-date"  # nothing of C's was lost on the remote
    assert a.sync().action == "merged+pushed"
    assert a.read_text(p("from-c.md")) == "c\n"
    assert SECRET not in a.read_text(p("notes.md"))


def test_on_a_terminal_the_text_is_asked_for_and_not_echoed(
    origin: Path, tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = first_replica(origin, tmp_path, key)
    monkeypatch.setattr(cli, "_isatty", lambda stream: True)
    env = {"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(tmp_path / "sa")}
    result = CliRunner().invoke(
        main, ["--repo", str(a.path), "redact", "--dry-run"], input=SECRET + "\n", env=env
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == "Text to redact: \n"
    assert SECRET not in result.output
    assert result.stdout.startswith("Dry run: the text is in 1 version of 1 path")


def test_a_replica_without_rollback_checks_adopts_a_redaction_too(
    origin: Path, tmp_path: Path, key: str
) -> None:
    a = first_replica(origin, tmp_path, key)
    options = StoreOptions(check_rollback=False, session="b")
    b = MemoryStore.clone(str(origin), tmp_path / "b.git", key, options=options)
    b.create(p("b.md"), "b\n")
    a.redact(SECRET)
    a.push()
    pulled = b.pull()
    assert pulled.action == "merged" and pulled.redaction is not None
    assert pulled.redaction.command == "redact"
    assert b.read_text(p("notes.md")) == "one\ncard [redacted]\ntwo\n"
    b.push()
    b.gc()
    assert b.verify().ok and leaks(b.path, key, SECRET) == []


def test_after_a_rotation_the_whole_history_is_sealed_again_in_the_newest_epoch(
    origin: Path, tmp_path: Path, key: str
) -> None:
    a = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "sa", session="a")
    a.add_remote("origin", str(origin))
    a.create(p("other.md"), "other\n")
    a.add_key(passphrase="a long passphrase for bob", label="bob", kdf=FAST)
    a.push()
    b = replica(origin, tmp_path, key, "b")
    a.create(p("notes.md"), f"card {SECRET}\n")
    b.create(p("b.md"), "b\n")
    b.push()
    a.pull()  # a merge whose second parent, B's, is older than the text
    a.rotate_keys()
    a.redact(SECRET)
    assert a.verify().ok
    assert {op.epoch for op in a.log()} == {1}
    a.push()
    assert b.pull().action == "fast-forward"
    assert b.files() == a.files() and b.verify().ok


def test_gitmem_pull_says_it_adopted_a_redaction(origin: Path, tmp_path: Path, key: str) -> None:
    a = first_replica(origin, tmp_path, key)
    b = replica(origin, tmp_path, key, "b")
    b.close()
    done = a.redact(SECRET)
    assert done.operation is not None
    a.push()
    env = {"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(tmp_path / "sb")}
    result = CliRunner().invoke(main, ["--repo", str(b.path), "pull"], env=env)
    assert result.exit_code == 0, result.output
    head = done.operation.commit[:10]
    assert result.stdout == (
        f"Fast-forwarded to {head} from origin.\n"
        f"origin was redacted (operation #{done.operation.seq}, session a): this replica's "
        "history now follows it. Run `gitmem gc` to delete the old versions from this replica "
        "now.\n"
    )
    again = CliRunner().invoke(main, ["--repo", str(b.path), "pull", "--json"], env=env)
    assert again.exit_code == 0 and json.loads(again.stdout)["redaction"] is None


def test_gitmem_sync_says_it_adopted_a_redaction(origin: Path, tmp_path: Path, key: str) -> None:
    a = first_replica(origin, tmp_path, key)
    b = replica(origin, tmp_path, key, "b")
    done = a.redact(SECRET)
    assert done.operation is not None
    a.push()
    synced = b.sync()
    assert synced.redaction is not None and synced.redaction.commit == done.operation.commit
    assert b.sync().redaction is None
