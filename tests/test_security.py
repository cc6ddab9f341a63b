"""Security properties of issue 2: keys, tampering, rollback, and no plaintext anywhere.

The attacker here can read and write the repository but has no key. Every tampering must make
reads fail closed with a clear error (a ``ToolError`` through the tool) and make ``verify``
name the object or commit at fault. Objects are altered with pygit2 and the git CLI directly;
only gitmem itself is restricted to importing pygit2 in one module.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from anthropic.lib.tools import ToolError
from click.testing import CliRunner
from helpers_bomb import bomb, plant
from helpers_proc import in_forked_child
from helpers_repo import published

import gitmem
from gitmem import GitMemoryTool, IntegrityError, MemoryStore, RollbackDetected, WrongKey
from gitmem.cli import main as cli_main
from gitmem.crypto import KEY_TEXT_PREFIX
from gitmem.git import pack as packfile


def git(repo: Path, *args: str) -> bytes:
    """Run the git CLI on ``repo`` and return its stdout."""
    return subprocess.run(
        ["git", f"--git-dir={published(repo)}", *args], check=True, capture_output=True
    ).stdout


def open_store(repo: Path, key: str, state: Path) -> MemoryStore:
    """A fresh client (no caches) with the given high-water directory."""
    return MemoryStore.open(repo, key, state_dir=state)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


F_TEXT = "hello world\n" * 20
F_FINAL = F_TEXT + "ok\n"


@pytest.fixture
def filled(repo_path: Path, key: str, state: Path) -> GitMemoryTool:
    """A store with three commits: a file in a directory, an edit, a second file."""
    tool = GitMemoryTool(repo_path, key=key, session="sec", state_dir=state)
    tool.call({"command": "create", "path": "/memories/dir/f.md", "file_text": F_TEXT + "end\n"})
    tool.call(
        {"command": "str_replace", "path": "/memories/dir/f.md", "old_str": "end", "new_str": "ok"}
    )
    tool.call({"command": "create", "path": "/memories/top.md", "file_text": "top\n"})
    return tool


# -- keys ---------------------------------------------------------------------------------------


def test_wrong_key_is_refused_clearly(filled: GitMemoryTool, repo_path: Path, state: Path) -> None:
    other = gitmem.generate_key()
    with pytest.raises(WrongKey) as info:
        open_store(repo_path, other, state)
    assert str(info.value) == f"the key does not open the store at {repo_path}"
    assert info.value.exit_code == 4
    with pytest.raises(WrongKey):
        GitMemoryTool(repo_path, key=other, state_dir=state)


def test_wrong_key_from_environment(
    filled: GitMemoryTool, repo_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITMEM_KEY", gitmem.generate_key())
    with pytest.raises(WrongKey) as info:
        GitMemoryTool(repo_path, state_dir=state)
    assert str(info.value) == f"the key does not open the store at {repo_path}"


def test_wrong_key_exit_path(filled: GitMemoryTool, repo_path: Path) -> None:
    """The installed entry point: one line on stderr, exit code 4, no traceback, no key."""
    other = gitmem.generate_key()
    env = {**os.environ, "GITMEM_KEY": other}
    result = subprocess.run(
        [sys.executable, "-m", "gitmem", "--repo", str(repo_path), "log"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 4
    assert result.stdout == ""
    assert result.stderr == f"gitmem: error: the key does not open the store at {repo_path}\n"
    assert other not in result.stderr
    # With --json, the same error as one JSON object on stderr.
    os.environ["GITMEM_KEY"] = other
    try:
        json_run = CliRunner().invoke(cli_main, ["--repo", str(repo_path), "log", "--json"])
    finally:
        del os.environ["GITMEM_KEY"]
    assert json_run.exit_code == 4
    assert json.loads(json_run.stderr) == {
        "error": "WrongKey",
        "message": f"the key does not open the store at {repo_path}",
        "exit_code": 4,
    }


_CHECKSUM = "the key is not valid: it is mistyped (checksum mismatch)"
_PREFIX = f"the key is not valid: key text starts with '{KEY_TEXT_PREFIX}'"


def _cut(length: int) -> str:
    return f"the key is not valid: it is truncated ({length} characters; key text has 61)"


def _flip_char(key: str) -> str:
    body = key[len(KEY_TEXT_PREFIX) :]
    swapped = ("B" if body[0] == "A" else "A") + body[1:]
    return KEY_TEXT_PREFIX + swapped


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda k: "", "the key is not valid: it is empty"),
        (lambda k: " \n", "the key is not valid: it is empty"),
        (lambda k: "not-a-key", _PREFIX),
        (lambda k: k[len(KEY_TEXT_PREFIX) :], _PREFIX),
        (lambda k: KEY_TEXT_PREFIX, _cut(13)),
        (lambda k: KEY_TEXT_PREFIX + "!!!!", _cut(17)),
        (lambda k: KEY_TEXT_PREFIX + "A", _cut(14)),
        (lambda k: k[:-3], _cut(58)),
        (lambda k: k[:-1], _cut(60)),
        (lambda k: k[:40] + "\n", _cut(40)),
        (
            lambda k: k + "AAAA",
            "the key is not valid: it is too long (65 characters; key text has 61)",
        ),
        (_flip_char, _CHECKSUM),
        (lambda k: k[:-1] + "!", "the key is not valid: it is not base64url text"),
        # Bytes that are no key text were meant as a raw key: "key text starts with ..." (for
        # 31 ASCII bytes) did not say that a raw key is 32 bytes.
        (
            lambda k: b"\x00" * 31,
            "the key is not valid: 31 bytes, neither 32 raw bytes nor key text (which starts "
            "with 'gitmem-key-1:')",
        ),
        (
            lambda k: b"\xff" * 33,
            "the key is not valid: 33 bytes, neither 32 raw bytes nor key text (which starts "
            "with 'gitmem-key-1:')",
        ),
        (lambda k: k[:-1].encode(), _cut(60)),  # key text as bytes is still key text
        (lambda k: 12345, "the key must be text from gitmem.generate_key() or 32 bytes"),
    ],
)
def test_malformed_key(repo_path: Path, key: str, state: Path, make: object, message: str) -> None:
    MemoryStore.open(repo_path, key, create=True, state_dir=state)
    assert callable(make)
    bad = make(key)
    with pytest.raises(WrongKey) as info:
        MemoryStore.open(repo_path, bad, state_dir=state)
    assert str(info.value) == message
    # Never echo what was given.
    if isinstance(bad, str) and len(bad) > len(KEY_TEXT_PREFIX):
        assert bad[len(KEY_TEXT_PREFIX) :] not in str(info.value)


@pytest.mark.parametrize("form", ["argument", "key file"])
def test_a_key_with_a_byte_order_mark_is_accepted(
    repo_path: Path, key: str, state: Path, tmp_path: Path, form: str
) -> None:
    MemoryStore.open(repo_path, key, create=True, state_dir=state)
    if form == "argument":
        assert MemoryStore.open(repo_path, "\ufeff" + key, state_dir=state).store_id
        return
    path = tmp_path / "key"
    path.write_bytes(b"\xef\xbb\xbf" + key.encode() + b"\r\n")  # as a Windows editor saves it
    path.chmod(0o600)
    assert MemoryStore.open(repo_path, gitmem.keysource.read_key_file(path), state_dir=state)


@pytest.mark.parametrize("content", [b"", b"\n", b"\xef\xbb\xbf\r\n"])
def test_an_empty_key_file_is_said_to_be_empty(tmp_path: Path, content: bytes) -> None:
    # It was reported as "key text starts with 'gmk1-'", as if it held some other text.
    path = tmp_path / "key"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(WrongKey) as info:
        gitmem.keysource.read_key_file(path)
    assert str(info.value) == f"the key file {path} is empty: it should hold the store's key text"


def test_malformed_key_when_creating(repo_path: Path, state: Path) -> None:
    with pytest.raises(WrongKey):
        GitMemoryTool(repo_path, key="gitmem-key-1:short", state_dir=state)
    # A refused key leaves no half-made store behind to be opened with another key later.
    assert not repo_path.exists()


# -- locating objects ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Objects:
    """The ids of HEAD's objects, by role."""

    commit: str
    root: str
    directory: str
    file_tree: str
    header: str
    chunk: str


def objects_of(repo: Path) -> Objects:
    """HEAD's objects along /memories/dir/f.md (the only directory at the root)."""
    r = pygit2.Repository(str(published(repo)))
    commit = r[r.references["refs/heads/main"].target]
    assert isinstance(commit, pygit2.Commit)
    root = commit.tree
    dirs = [e for e in root if e.name.startswith("d")]
    assert len(dirs) == 1
    directory = r[dirs[0].id]
    assert isinstance(directory, pygit2.Tree) and len(directory) == 1
    file_tree = r[directory[0].id]
    assert isinstance(file_tree, pygit2.Tree)
    names = {e.name: str(e.id) for e in file_tree}
    return Objects(
        str(commit.id), str(root.id), str(directory.id), str(file_tree.id), names["h"],
        names["c00000000"],
    )  # fmt: skip


def loose(repo: Path, oid: str) -> Path:
    path = repo / "objects" / oid[:2] / oid[2:]
    assert path.is_file()
    return path


def flip_byte(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(raw))


ROLES = ["chunk", "header", "file_tree", "directory", "root", "commit"]


@pytest.mark.parametrize("role", ROLES)
def test_flipped_bit_in_a_loose_object(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, role: str
) -> None:
    oid = getattr(objects_of(repo_path), role)
    flip_byte(loose(repo_path, oid))
    store = open_store(repo_path, key, state)
    with pytest.raises(IntegrityError) as info:
        store.files()
    assert oid in str(info.value)
    tool = GitMemoryTool(repo_path, key=key, state_dir=state)
    with pytest.raises(ToolError) as tool_info:
        tool.call({"command": "view", "path": "/memories/dir/f.md"})
    assert isinstance(tool_info.value.content, str) and oid in tool_info.value.content
    # A write that needs the corrupt object is refused too, and moves nothing.
    head = git(repo_path, "rev-parse", "refs/heads/main")
    with pytest.raises(ToolError):
        tool.call(
            {
                "command": "str_replace",
                "path": "/memories/dir/f.md",
                "old_str": "ok",
                "new_str": "x",
            }
        )
    assert git(repo_path, "rev-parse", "refs/heads/main") == head
    report = open_store(repo_path, key, state).verify()
    assert not report.ok
    assert any(oid in problem for problem in report.problems), report.problems


# -- decompression bombs: refused from their header, before they are inflated -----------------


def _point(repo: Path, ref: str, oid: str) -> None:
    pygit2.Repository(str(published(repo))).references.create(ref, pygit2.Oid(hex=oid), force=True)


def _bomb_meta(repo: Path, key: str, state: Path) -> None:
    _point(repo, "refs/gitmem/meta", plant(repo, b"blob"))
    open_store(repo, key, state)


def _bomb_branch(repo: Path, key: str, state: Path) -> None:
    _point(repo, "refs/heads/main", plant(repo, b"commit"))
    open_store(repo, key, state).head()


def _bomb_chunk(repo: Path, key: str, state: Path) -> None:
    plant(repo, b"blob", at=objects_of(repo).chunk)
    open_store(repo, key, state).files()


def _bomb_tree(repo: Path, key: str, state: Path) -> None:
    plant(repo, b"tree", at=objects_of(repo).directory)
    open_store(repo, key, state).files()


def _bomb_gc(repo: Path, key: str, state: Path) -> None:
    _point(repo, "refs/tags/planted", plant(repo, b"blob"))
    open_store(repo, key, state).gc(grace=0)


BOMBS = {
    "metadata ref": _bomb_meta,
    "branch": _bomb_branch,
    "chunk in place": _bomb_chunk,
    "tree in place": _bomb_tree,
    "another ref, at gc": _bomb_gc,
}


@pytest.mark.parametrize("where", sorted(BOMBS))
def test_a_decompression_bomb_is_never_inflated(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, where: str
) -> None:
    """A 250 KB loose object inflating to 256 MiB is refused with a clear error, costing no
    more memory than its compressed size."""
    bomb(b"blob"), bomb(b"commit"), bomb(b"tree")  # made before measuring
    tracemalloc.start()
    try:
        with pytest.raises(IntegrityError):
            BOMBS[where](repo_path, key, state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"{peak:,} bytes"


def test_a_packed_object_larger_than_its_kind_allows_is_refused_from_its_header(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path
) -> None:
    r = pygit2.Repository(str(published(repo_path)))
    big = r.create_blob(os.urandom(100_000))  # the metadata blob may have 64 KiB
    builder = pygit2.PackBuilder(r)
    builder.add(big)
    builder.write(str(repo_path / "objects" / "pack"))
    loose(repo_path, str(big)).unlink()
    _point(repo_path, "refs/gitmem/meta", str(big))
    with pytest.raises(IntegrityError) as info:
        open_store(repo_path, key, state)
    assert str(info.value) == (
        f"object {big} is corrupt: it declares 100,000 bytes, more than a gitmem blob may have "
        "(65,536)"
    )


# -- revisions resolve through gitmem's own history, never through refs ------------------------


@pytest.mark.parametrize("namespace", ["refs/tags/", "refs/heads/", "refs/", ""])
def test_a_ref_named_like_an_abbreviated_id_does_not_redirect_a_revision(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, namespace: str
) -> None:
    ops = list(open_store(repo_path, key, state).log())
    target, first = ops[1], ops[-1]
    prefix = target.commit[:10]
    (repo_path / f"{namespace}{prefix}").parent.mkdir(parents=True, exist_ok=True)
    (repo_path / f"{namespace}{prefix}").write_text(first.commit + "\n")
    store = open_store(repo_path, key, state)
    assert store.resolve(prefix) == target.commit
    assert store.resolve(prefix + "~1") == first.commit
    env = {"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(state)}
    runner = CliRunner()
    shown = runner.invoke(cli_main, ["--repo", str(repo_path), "show", prefix, "--json"], env=env)
    assert json.loads(shown.stdout.splitlines()[0])["commit"] == target.commit, shown.output
    restored = runner.invoke(
        cli_main, ["--repo", str(repo_path), "restore", prefix, "--json"], env=env
    )
    assert restored.exit_code == 0, restored.output
    assert open_store(repo_path, key, state).operation("HEAD").record.detail["from"] == (
        target.commit
    )


def test_a_prefix_made_ambiguous_by_planted_objects_resolves_through_history(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path
) -> None:
    store = open_store(repo_path, key, state)
    target = list(store.log())[1].commit
    prefix = target[:4]
    r = pygit2.Repository(str(published(repo_path)))
    n = 0
    while not hashlib.sha1(b"blob %d\0%d" % (len(str(n)), n)).hexdigest().startswith(prefix):
        n += 1
    assert str(r.create_blob(str(n).encode())).startswith(prefix)
    assert store.resolve(prefix) == target


def _rewrite_loose(repo: Path, oid: str, kind: bytes, content: bytes) -> None:
    """Put a well-formed object with other content under ``oid``'s name (its hash is wrong)."""
    path = loose(repo, oid)
    path.chmod(0o644)
    path.write_bytes(zlib.compress(kind + b" %d\x00" % len(content) + content))


@pytest.mark.parametrize("hash_check", [True, False])
def test_altered_ciphertext_under_the_same_name(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, hash_check: bool
) -> None:
    objs = objects_of(repo_path)
    blob = bytearray(pygit2.Repository(str(published(repo_path)))[objs.chunk].read_raw())
    blob[len(blob) // 2] ^= 0x80
    _rewrite_loose(repo_path, objs.chunk, b"blob", bytes(blob))
    # gitmem turns the hash check on (gitmem/git/handle.py); off, the crypto layer alone is tested.
    pygit2.settings.enable_strict_hash_verification(hash_check)
    try:
        with pytest.raises(IntegrityError) as info:
            open_store(repo_path, key, state).read_text(gitmem.parse_path("/memories/dir/f.md"))
        # With git's hash check the object is refused as corrupt before decryption; without
        # it, AES-SIV refuses the ciphertext. Either way the chunk is named.
        assert str(info.value) == f"chunk {objs.chunk} failed authentication"
        report = open_store(repo_path, key, state).verify()
        assert report.problems == [
            f"commit {objs.commit[:12]}, file /memories/dir/f.md: "
            f"chunk {objs.chunk} failed authentication"
        ]
    finally:
        pygit2.settings.enable_strict_hash_verification(True)


def test_altered_ciphertext_in_a_new_object_breaks_the_commit(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path
) -> None:
    """Re-hashing the altered blob and every tree above it still needs a new commit record."""
    objs = objects_of(repo_path)
    r = pygit2.Repository(str(published(repo_path)))
    blob = bytearray(r[objs.chunk].read_raw())
    blob[-1] ^= 0x01
    new_chunk = r.create_blob(bytes(blob))

    def rebuilt(tree_id: str, name: str, child: pygit2.Oid) -> pygit2.Oid:
        tree = r[tree_id]
        assert isinstance(tree, pygit2.Tree)
        builder = r.TreeBuilder(tree)
        builder.insert(name, child, tree[name].filemode)
        return builder.write()

    directory = r[objs.directory]
    root = r[objs.root]
    assert isinstance(directory, pygit2.Tree) and isinstance(root, pygit2.Tree)
    new_file = rebuilt(objs.file_tree, "c00000000", new_chunk)
    new_dir = rebuilt(objs.directory, str(directory[0].name), new_file)
    dir_name = next(str(e.name) for e in root if str(e.id) == objs.directory)
    new_root = rebuilt(objs.root, dir_name, new_dir)
    head = r[objs.commit]
    assert isinstance(head, pygit2.Commit)
    forged = r.create_commit(
        None, head.author, head.committer, head.raw_message, new_root, head.parent_ids
    )
    git(repo_path, "update-ref", "refs/heads/main", str(forged), objs.commit)
    store = open_store(repo_path, key, state)
    with pytest.raises(IntegrityError) as info:
        store.head()
    assert str(info.value) == f"commit {forged} failed authentication (forged, altered or spliced)"
    # The altered chunk itself fails too, on its own.
    with pytest.raises(IntegrityError) as chunk_info:
        store.codec.read_file(str(new_file))
    assert str(chunk_info.value) == f"chunk {new_chunk} failed authentication"
    assert any(str(forged) in p for p in store.verify().problems)


# -- forged and spliced commits ------------------------------------------------------------------


def _commit(r: pygit2.Repository, message: bytes, tree: str, parents: list[str]) -> str:
    sig = pygit2.Signature("gitmem", "gitmem@invalid", 0, 0)
    return str(r.create_commit(None, sig, sig, message, pygit2.Oid(hex=tree), parents))


def forgeries(r: pygit2.Repository, head: str) -> dict[str, str]:
    """Commits an attacker without the key can make, each a child of (or beside) ``head``."""
    c3 = r[head]
    assert isinstance(c3, pygit2.Commit)
    c2 = c3.parents[0]
    c1 = c2.parents[0]
    random_record = base64.b64encode(os.urandom(80))
    return {
        # A message that is not a record at all.
        "bogus message": _commit(r, b"I am the real memory", str(c3.tree_id), [head]),
        # A well-formed envelope with random bytes.
        "random record": _commit(r, random_record, str(c3.tree_id), [head]),
        # HEAD's genuine record, replayed on top of HEAD with the same tree.
        "replayed record": _commit(r, c3.raw_message, str(c3.tree_id), [head]),
        # HEAD's genuine record over another tree (an older one).
        "record on another tree": _commit(r, c3.raw_message, str(c1.tree_id), [str(c2.id)]),
        # An old commit's record and tree spliced on top of HEAD (a "revert" without the key).
        "spliced record": _commit(r, c2.raw_message, str(c2.tree_id), [head]),
        # HEAD with its parent dropped: history reordered.
        "reordered history": _commit(r, c3.raw_message, str(c3.tree_id), [str(c1.id)]),
        # HEAD's record with no parents at all.
        "orphaned record": _commit(r, c3.raw_message, str(c3.tree_id), []),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "bogus message",
        "random record",
        "replayed record",
        "record on another tree",
        "spliced record",
        "reordered history",
        "orphaned record",
    ],
)
def test_forged_commit_fails_closed(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, kind: str
) -> None:
    head = git(repo_path, "rev-parse", "refs/heads/main").decode().strip()
    r = pygit2.Repository(str(published(repo_path)))
    forged = forgeries(r, head)[kind]
    git(repo_path, "update-ref", "refs/heads/main", forged, head)
    expected = f"commit {forged} failed authentication (forged, altered or spliced)"
    with pytest.raises(IntegrityError) as info:
        open_store(repo_path, key, state).files()
    assert str(info.value) == expected
    # The tool that wrote the real history sees it too, for reads and writes alike.
    for data in (
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/new.md", "file_text": "x"},
        {"command": "delete", "path": "/memories/top.md"},
    ):
        with pytest.raises(ToolError) as tool_info:
            filled.call(data)
        assert tool_info.value.content == f"Error: {expected}"
    assert git(repo_path, "rev-parse", "refs/heads/main").decode().strip() == forged
    report = open_store(repo_path, key, state).verify()
    assert report.problems[0] == f"commit {forged}: {expected}", report.problems


def test_record_from_another_store_with_the_same_key(
    repo_path: Path, tmp_path: Path, key: str, state: Path
) -> None:
    """Store ids are bound into every record: one key used for two stores does not mix them.

    Store B's first commit, with every object it needs, is copied into store A byte for byte,
    and A's branch is pointed at it. Only the store id differs from what B authenticated.
    """
    a = GitMemoryTool(repo_path, key=key, state_dir=state)
    b = GitMemoryTool(tmp_path / "other.git", key=key, state_dir=state)
    a.call({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    b.call({"command": "create", "path": "/memories/b.md", "file_text": "b"})
    ra = pygit2.Repository(str(published(repo_path)))
    rb = pygit2.Repository(str(published(tmp_path / "other.git")))
    for oid in rb.odb:
        obj = rb.odb.read(oid)
        ra.odb.write(obj[0], obj[1])
    b_head = str(rb.references["refs/heads/main"].target)
    a_head = str(ra.references["refs/heads/main"].target)
    git(repo_path, "update-ref", "refs/heads/main", b_head, a_head)
    # A client that never saw A, so rollback detection cannot be what refuses it.
    with pytest.raises(IntegrityError) as info:
        open_store(repo_path, key, state.parent / "fresh-state").head()
    assert str(info.value) == f"commit {b_head} failed authentication (forged, altered or spliced)"


# -- rollback ------------------------------------------------------------------------------------


def test_rolled_back_branch_is_detected(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path
) -> None:
    head = git(repo_path, "rev-parse", "refs/heads/main").decode().strip()
    older = git(repo_path, "rev-parse", "refs/heads/main~1").decode().strip()
    git(repo_path, "update-ref", "refs/heads/main", older, head)
    store = open_store(repo_path, key, state)
    with pytest.raises(RollbackDetected) as info:
        store.files()
    assert str(info.value) == (
        f"the store's branch is at operation #2 ({older[:12]}), which does not follow operation "
        f"#3 ({head[:12]}) that this client has already seen: the repository was rolled back "
        "or replaced; if that is intended, run `gitmem accept-head`"
    )
    assert info.value.exit_code == 6
    # The tool refuses reads and writes alike, and writes nothing.
    for data in (
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/new.md", "file_text": "x"},
    ):
        with pytest.raises(ToolError) as tool_info:
            filled.call(data)
        assert tool_info.value.content == f"Error: {info.value}"
    assert git(repo_path, "rev-parse", "refs/heads/main").decode().strip() == older
    assert any("rolled back" in p for p in store.verify().problems)
    # A client that never saw the store cannot tell; one that did can accept the rollback.
    assert open_store(repo_path, key, state.parent / "fresh-state").files() == {
        "/memories/dir/f.md": F_FINAL
    }
    accepted = store.accept_head()
    assert accepted is not None and accepted.commit == older and accepted.seq == 2
    assert store.files() == {"/memories/dir/f.md": F_FINAL}
    assert filled.call({"command": "create", "path": "/memories/new.md", "file_text": "x"}) == (
        "File created successfully at: /memories/new.md"
    )
    assert [op.seq for op in store.log()] == [3, 2, 1]
    assert store.verify().ok


def test_deleted_branch_is_a_rollback(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path
) -> None:
    head = git(repo_path, "rev-parse", "refs/heads/main").decode().strip()
    git(repo_path, "update-ref", "-d", "refs/heads/main", head)
    with pytest.raises(RollbackDetected) as info:
        open_store(repo_path, key, state).files()
    assert str(info.value) == (
        f"the store's branch is gone, but this client has seen operation #3 ({head[:12]}); if "
        "that is intended, run `gitmem accept-head`"
    )
    with pytest.raises(ToolError):
        filled.call({"command": "view", "path": "/memories"})


def test_branch_moved_forward_by_a_writer_is_not_a_rollback(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path
) -> None:
    # Another client with its own high-water mark writes; this one follows.
    other = GitMemoryTool(repo_path, key=key, session="other", state_dir=state.parent / "o")
    other.call({"command": "create", "path": "/memories/o.md", "file_text": "o"})
    assert filled.call({"command": "view", "path": "/memories/o.md"}).endswith("     1\to")


# -- no plaintext --------------------------------------------------------------------------------

CANARY_DIR = "canarydirQ7Z"
CANARY_NAME = "canaryname4KX.md"
CANARY_RENAMED = "canaryrenamedW2P.md"
CANARY_CONTENT = "canarycontentV9M"
CANARY_EDIT = "canaryeditJ3T"
CANARY_SESSION = "canarysessionH5R"
CANARIES = [CANARY_DIR, CANARY_NAME, CANARY_RENAMED, CANARY_CONTENT, CANARY_EDIT, CANARY_SESSION]


def _fill_with_canaries(tool: GitMemoryTool) -> None:
    base = f"/memories/{CANARY_DIR}"
    tool.call(
        {
            "command": "create",
            "path": f"{base}/{CANARY_NAME}",
            "file_text": f"line one {CANARY_CONTENT}\n" * 3 + "tail\n",
        }
    )
    tool.call({"command": "create", "path": "/memories/plain.md", "file_text": CANARY_CONTENT})
    tool.call(
        {
            "command": "str_replace",
            "path": f"{base}/{CANARY_NAME}",
            "old_str": "tail",
            "new_str": CANARY_EDIT,
        }
    )
    tool.call(
        {
            "command": "insert",
            "path": f"{base}/{CANARY_NAME}",
            "insert_line": 1,
            "insert_text": CANARY_EDIT + " inserted",
        }
    )
    tool.call(
        {
            "command": "rename",
            "old_path": f"{base}/{CANARY_NAME}",
            "new_path": f"{base}/sub/{CANARY_RENAMED}",
        }
    )
    tool.call({"command": "view", "path": f"{base}/sub/{CANARY_RENAMED}"})
    tool.call({"command": "view", "path": "/memories"})
    with pytest.raises(ToolError):
        tool.call({"command": "str_replace", "path": "/memories/plain.md", "old_str": "zz",
                   "new_str": CANARY_EDIT})  # fmt: skip
    tool.call({"command": "delete", "path": "/memories/plain.md"})


def _needles(extra: list[str]) -> list[bytes]:
    """Each canary as UTF-8 and in the base64 alphabets, at every alignment."""
    out: list[bytes] = []
    for text in CANARIES + extra:
        raw = text.encode()
        out.append(raw)
        for shift in range(3):
            for enc in (base64.b64encode, base64.urlsafe_b64encode):
                encoded = enc(b"\x00" * shift + raw)
                # Keep only characters that depend on the canary's bits alone.
                out.append(encoded[(shift * 4 + 2) // 3 + 1 : -3])
    return out


def _decoded_views(r: pygit2.Repository) -> Iterator[tuple[str, bytes]]:
    """Every object's bytes, plus base64-decoded commit messages and tree entry names."""
    for oid in r.odb:
        obj = r[oid]
        yield str(oid), obj.read_raw()
        if isinstance(obj, pygit2.Commit):
            message = obj.raw_message.strip()
            yield str(oid), base64.b64decode(message + b"=" * (-len(message) % 4))
        elif isinstance(obj, pygit2.Tree):
            for entry in obj:
                body = str(entry.name)[1:]
                with contextlib.suppress(ValueError):
                    yield str(oid), base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def assert_no_plaintext(repo: Path, extra: list[str]) -> None:
    needles = _needles(extra)
    batch = git(repo, "cat-file", "--batch-all-objects", "--batch")
    assert batch
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    config = git(repo, "config", "--list", "--local")
    log = git(repo, "log", "--branches", "--format=%H %an %ae %at %cn %ce %ct %B")
    for name, blob in [("cat-file", batch), ("refs", refs), ("config", config), ("log", log)]:
        for needle in needles:
            assert needle not in blob, (name, needle)
    # Raw files: loose objects are compressed, so inflate them too; packs are covered above.
    for path in repo.rglob("*"):
        if not path.is_file():
            continue
        raw = path.read_bytes()
        views = [raw, path.name.encode(), str(path.relative_to(repo)).encode()]
        if "objects" in path.parts and len(path.parent.name) == 2:
            views.append(zlib.decompress(raw))
        for view in views:
            for needle in needles:
                assert needle not in view, (path, needle)
    for oid, view in _decoded_views(pygit2.Repository(str(published(repo)))):
        for needle in needles:
            assert needle not in view, (oid, needle)


def test_no_plaintext_anywhere(
    repo_path: Path,
    key: str,
    state: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    tool = GitMemoryTool(repo_path, key=key, session=CANARY_SESSION, state_dir=state)
    _fill_with_canaries(tool)
    assert tool.store.files() == {
        f"/memories/{CANARY_DIR}/sub/{CANARY_RENAMED}": (
            f"line one {CANARY_CONTENT}\n{CANARY_EDIT} inserted\n"
            f"line one {CANARY_CONTENT}\nline one {CANARY_CONTENT}\n{CANARY_EDIT}\n"
        )
    }
    assert [op.session for op in tool.store.log()] == [CANARY_SESSION] * 6
    # Identifying details of this machine and user must not be there either.
    extra = [str(repo_path), str(state), key, key[len(KEY_TEXT_PREFIX) :]]
    host = socket.gethostname()
    if len(host) >= 8:
        extra.append(host)
    assert_no_plaintext(repo_path, extra)
    # A fixed neutral identity on every commit, its time the operation's seq (never a clock's).
    identities = git(repo_path, "log", "--format=%an|%ae|%at|%cn|%ce|%ct").decode().split()
    assert identities == [
        f"gitmem|gitmem@invalid|{seq}|gitmem|gitmem@invalid|{seq}" for seq in range(6, 0, -1)
    ]
    # No reflogs to tell when refs moved.
    assert not (repo_path / "logs").exists()

    # Packing rewrites every object into one file (deltified and compressed differently).
    subprocess.run(
        [
            "git",
            f"--git-dir={published(repo_path)}",
            "gc",
            "--aggressive",
            "--prune=now",
            "--quiet",
        ],
        check=True,
        capture_output=True,
    )
    assert list((repo_path / "objects" / "pack").glob("*.pack"))
    assert_no_plaintext(repo_path, extra)
    assert open_store(repo_path, key, state).verify().ok

    # Logs and console output of everything above.
    captured = capfd.readouterr()
    for text in [caplog.text, captured.out, captured.err]:
        for canary in [*CANARIES, key]:
            assert canary not in text
    # The client's own state outside the repository holds no plaintext either.
    for path in state.rglob("*"):
        if path.is_file():
            for canary in CANARIES:
                assert canary.encode() not in path.read_bytes(), path


def test_needles_would_find_a_leak() -> None:
    """The scan above is not vacuous: each encoding of a canary is found where it is."""
    needles = _needles([])
    for text in CANARIES:
        for shift in range(3):
            plain = b"xx" * shift + text.encode() + b"yy"
            for enc in (base64.b64encode, base64.urlsafe_b64encode):
                encoded = enc(plain)
                assert any(n in encoded for n in needles), (text, shift)


# -- verify ----------------------------------------------------------------------------------------


def test_verify_clean_store(filled: GitMemoryTool, repo_path: Path, key: str, state: Path) -> None:
    report = open_store(repo_path, key, state).verify()
    assert report.ok
    assert report.problems == []
    assert report.commits == 3


def test_verify_cli_names_the_failure(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITMEM_KEY", key)
    monkeypatch.setenv("GITMEM_STATE_DIR", str(state))
    runner = CliRunner()
    ok = runner.invoke(cli_main, ["--repo", str(repo_path), "verify"])
    assert ok.exit_code == 0, ok.output
    chunk = objects_of(repo_path).chunk
    flip_byte(loose(repo_path, chunk))
    bad = runner.invoke(cli_main, ["--repo", str(repo_path), "verify"])
    assert bad.exit_code != 0
    assert chunk in bad.output
    assert "Traceback" not in bad.output


# -- local tricks: files that would block, reflogs, HEAD ------------------------------------------


def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o600)
        path.unlink()
    os.mkfifo(path)


def _include_fifo(repo: Path) -> None:
    _fifo(repo.parent / "included")
    with (repo / "config").open("a") as handle:
        handle.write(f"[include]\n\tpath = {repo.parent / 'included'}\n")


def _pack_index_fifo(repo: Path) -> None:
    subprocess.run(["git", f"--git-dir={published(repo)}", "repack", "-q", "-a", "-d"], check=True)
    (idx,) = (repo / "objects" / "pack").glob("*.idx")
    _fifo(idx)


FIFOS: dict[str, Callable[[Path], None]] = {
    "config": lambda repo: _fifo(repo / "config"),
    "include.path in the config": _include_fifo,
    "packed-refs": lambda repo: _fifo(repo / "packed-refs"),
    # Published first: while the redo log holds writes, the branch is read from the log.
    "the branch's ref file": lambda repo: _fifo(published(repo) / "refs" / "heads" / "main"),
    "the metadata ref file": lambda repo: _fifo(repo / "refs" / "gitmem" / "meta"),
    "objects/info/alternates": lambda repo: _fifo(repo / "objects" / "info" / "alternates"),
    "a loose object": lambda repo: _fifo(loose(repo, objects_of(repo).chunk)),
    "a pack index": _pack_index_fifo,
}


@pytest.mark.parametrize("where", sorted(FIFOS))
def test_a_fifo_in_the_repository_is_an_error_not_a_hang(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, where: str
) -> None:
    FIFOS[where](repo_path)
    outcome = in_forked_child(lambda: open_store(repo_path, key, state).files())
    assert outcome.startswith("IntegrityError: "), outcome


def _fifo_all(directory: Path) -> None:
    for path in directory.glob("*.json"):
        _fifo(path)


STATE_FIFOS: dict[str, Callable[[Path, Path, str], None]] = {
    "the high-water mark": lambda state, repo, sid: _fifo(state / f"{sid}.json"),
    "the known-stores record": lambda state, repo, sid: _fifo_all(state / "paths"),
    "HEAD": lambda state, repo, sid: _fifo(repo / "HEAD"),
}


@pytest.mark.parametrize("where", sorted(STATE_FIFOS))
def test_a_fifo_in_place_of_a_file_gitmem_does_not_need_is_replaced(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, where: str
) -> None:
    STATE_FIFOS[where](state, repo_path, filled.store.store_id)
    outcome = in_forked_child(lambda: open_store(repo_path, key, state).files())
    assert outcome == "ok", outcome


def test_a_fifo_as_the_key_file_is_refused_without_blocking(
    filled: GitMemoryTool, repo_path: Path, tmp_path: Path, state: Path
) -> None:
    _fifo(tmp_path / "key")
    os.environ["GITMEM_KEY_FILE"] = str(tmp_path / "key")
    try:
        outcome = in_forked_child(lambda: open_store(repo_path, None, state))  # type: ignore[arg-type]
    finally:
        del os.environ["GITMEM_KEY_FILE"]
    assert outcome.startswith("KeyMissing: "), outcome


def test_a_deleted_head_is_recreated(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path
) -> None:
    (repo_path / "HEAD").unlink()
    assert open_store(repo_path, key, state).files()["/memories/top.md"] == "top\n"
    tool = GitMemoryTool(repo_path, key=key, state_dir=state)
    tool.call({"command": "create", "path": "/memories/after.md", "file_text": "x\n"})
    result = CliRunner().invoke(
        cli_main,
        ["--repo", str(repo_path), "cat", "/memories/after.md"],
        env={"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(state)},
    )
    assert (result.exit_code, result.stdout) == (0, "x\n"), result.output


def test_a_deleted_head_in_a_read_only_repository_gives_advice_that_works(
    tmp_path: Path, key: str, state: Path
) -> None:
    with small_filesystem(tmp_path / "mnt", "4m") as mnt:
        repo = mnt / "store.git"
        GitMemoryTool(repo, key=key, state_dir=state).call(
            {"command": "create", "path": "/memories/top.md", "file_text": "top\n"}
        )
        (repo / "HEAD").unlink()
        _remount(mnt, "ro")
        try:
            with pytest.raises(gitmem.NoStore) as info:
                open_store(repo, key, state).files()
        finally:
            _remount(mnt, "rw")
        command = str(info.value).split("recreate it with: ", 1)[1]
        subprocess.run(command, shell=True, check=True)
        assert (repo / "HEAD").read_text() == "ref: refs/heads/main\n"
        assert open_store(repo, key, state).files()["/memories/top.md"] == "top\n"


LEAK = "leaky.person@example.com"


@contextlib.contextmanager
def _global_gitconfig(home: Path, text: str) -> Iterator[None]:
    """A user-level git config for libgit2 (its search paths were fixed at import)."""
    from pygit2.enums import ConfigLevel

    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(text)
    saved = pygit2.settings.search_path[ConfigLevel.GLOBAL]
    pygit2.settings.search_path[ConfigLevel.GLOBAL] = str(home)
    try:
        yield
    finally:
        pygit2.settings.search_path[ConfigLevel.GLOBAL] = saved


def _assert_no_reflog(repo: Path) -> None:
    assert not (repo / "logs").exists(), sorted(p.name for p in (repo / "logs").rglob("*"))
    for path in repo.rglob("*"):
        if path.is_file() and path.name != "config":  # where the test itself put the identity
            assert LEAK.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    "how", ["repository config", "user config", "log files already there", "everything"]
)
def test_no_reflog_is_written_whatever_the_config_says(
    repo_path: Path, key: str, state: Path, tmp_path: Path, how: str
) -> None:
    tool = GitMemoryTool(repo_path, key=key, session="s", state_dir=state)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    setting = f"[core]\n\tlogAllRefUpdates = always\n[user]\n\temail = {LEAK}\n\tname = Leaky\n"
    if how in ("repository config", "everything"):
        with (repo_path / "config").open("a") as handle:
            handle.write(setting)
    if how in ("log files already there", "everything"):
        for name in ("HEAD", "refs/heads/main", "refs/gitmem/meta"):
            (repo_path / "logs" / name).parent.mkdir(parents=True, exist_ok=True)
            (repo_path / "logs" / name).write_text("")
    with _global_gitconfig(tmp_path / "home", setting):
        fresh = GitMemoryTool(repo_path, key=key, session="s", state_dir=state)
        for i in range(3):
            fresh.call({"command": "create", "path": f"/memories/b{i}.md", "file_text": "b\n"})
        fresh.store.gc(grace=0)
        MemoryStore.init(tmp_path / "new.git", key).create("/memories/c.md", "c\n")
    _assert_no_reflog(repo_path)
    _assert_no_reflog(tmp_path / "new.git")


# -- store substitution: another store's refs copied into the repository --------------------------


def _substitute(victim: Path, other: Path) -> None:
    """Copy ``other``'s objects and gitmem refs into ``victim`` (what a malicious host can do)."""
    published(victim)  # what a host has: the published repositories
    shutil.copytree(published(other) / "objects", victim / "objects", dirs_exist_ok=True)
    for ref in ("refs/heads/main", "refs/gitmem/meta"):
        (victim / ref).write_text((other / ref).read_text())


@pytest.fixture
def swapped(tmp_path: Path, state: Path) -> tuple[Path, Path]:
    """Stores A and B, each made by `gitmem init` with its own per-user key file, used by this
    client; then B's refs copied into A."""
    runner = CliRunner()
    env = {"GITMEM_STATE_DIR": str(state)}
    for name, text in (("a", "secret of A\n"), ("b", "secret of B\n")):
        path = tmp_path / f"{name}.git"
        assert runner.invoke(cli_main, ["init", str(path)], env=env).exit_code == 0
        store = MemoryStore.open(path, state_dir=state)
        store.create(gitmem.parse_path("/memories/x.md"), text)
    _substitute(tmp_path / "a.git", tmp_path / "b.git")
    return tmp_path / "a.git", tmp_path / "b.git"


def test_a_substituted_store_is_refused(swapped: tuple[Path, Path], state: Path) -> None:
    a, b = swapped
    branch = (a / "refs/heads/main").read_text()
    env = {"GITMEM_STATE_DIR": str(state)}
    runner = CliRunner()
    for command in (["cat", "/memories/x.md"], ["restore", "HEAD"], ["gc"]):
        result = runner.invoke(cli_main, ["--repo", str(a), *command], env=env)
        assert result.exit_code == 9, result.output
        assert "secret of" not in result.output
        assert result.stderr.startswith(f"gitmem: error: the repository at {a} now holds"), (
            result.stderr
        )
    with pytest.raises(gitmem.StoreReplaced):
        GitMemoryTool(a, state_dir=state)
    with pytest.raises(gitmem.StoreReplaced):
        MemoryStore.open(a, state_dir=state)
    assert (a / "refs/heads/main").read_text() == branch
    # The other store, at its own path, is untouched by all this.
    assert MemoryStore.open(b, state_dir=state).read_text("/memories/x.md") == "secret of B\n"


def test_a_substituted_store_is_used_once_accepted(swapped: tuple[Path, Path], state: Path) -> None:
    a, _ = swapped
    env = {"GITMEM_STATE_DIR": str(state)}
    runner = CliRunner()
    accepted = runner.invoke(cli_main, ["--repo", str(a), "accept-store"], env=env)
    assert accepted.exit_code == 0, accepted.output
    result = runner.invoke(cli_main, ["--repo", str(a), "cat", "/memories/x.md"], env=env)
    assert (result.exit_code, result.stdout) == (0, "secret of B\n"), result.output


def test_a_substituted_store_is_accepted_from_python(
    swapped: tuple[Path, Path], state: Path
) -> None:
    a, _ = swapped
    store = MemoryStore.open(a, accept_store=True, state_dir=state)
    assert store.read_text("/memories/x.md") == "secret of B\n"
    assert GitMemoryTool(a, state_dir=state).store.store_id == store.store_id


def test_replicas_of_one_store_at_several_paths_all_open(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, tmp_path: Path
) -> None:
    """The check is per path: copies of one store (replicas, mirrors) are not substitutions."""
    copy = tmp_path / "replica.git"
    shutil.copytree(repo_path, copy)
    assert open_store(copy, key, state).files() == open_store(repo_path, key, state).files()


def test_the_size_leak_is_as_documented(tool: GitMemoryTool, repo_path: Path) -> None:
    """security.md: a chunk blob is 18 bytes more than the chunk (compressed when that helps)."""
    # The long one stays under the smallest chunk size (512 bytes), so that it is one chunk
    # whatever the key: cut points are keyed, and 4,000 bytes were split for about one key in six.
    texts = {"/memories/short.md": "hi\n", "/memories/long.md": "the same line again\n" * 25}
    for path, text in texts.items():
        tool.call({"command": "create", "path": path, "file_text": text})
    store = tool.store
    for path, text in texts.items():
        node = store.snapshot().lookup(gitmem.parse_path(path))
        assert node is not None
        (chunk,) = [e for e in store.repo.read_tree(node.oid) if e.name != "h"]
        size = len(store.repo.read_blob(chunk.oid))
        data = text.encode()
        stored = min(len(data), len(zlib.compress(data, 6)))
        assert size == stored + 18, (path, size)
    assert size < len(data)  # the long one compressed


# -- a damaged disk, a full one, a read-only one: errors, never tracebacks ------------------------


def test_a_damaged_pack_under_a_multi_pack_index_is_listed_by_verify(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path
) -> None:
    open_store(repo_path, key, state).gc(grace=0)
    git(repo_path, "multi-pack-index", "write")
    # The metadata blob loose as well, so that the store opens and verify has work to do.
    meta = git(repo_path, "rev-parse", "refs/gitmem/meta").decode().strip()
    body = pygit2.Repository(str(published(repo_path)))[meta].read_raw()
    (repo_path / "objects" / meta[:2]).mkdir(exist_ok=True)
    (repo_path / "objects" / meta[:2] / meta[2:]).write_bytes(
        zlib.compress(b"blob %d\0" % len(body) + body)
    )
    (pack,) = (repo_path / "objects" / "pack").glob("*.pack")
    pack.chmod(0o600)
    pack.write_bytes(pack.read_bytes()[: pack.stat().st_size // 2])
    report = open_store(repo_path, key, state).verify()
    assert not report.ok and report.problems
    result = CliRunner().invoke(
        cli_main,
        ["--repo", str(repo_path), "verify"],
        env={"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(state)},
    )
    assert result.exit_code == 5, result.output
    assert "Traceback" not in result.output and result.stdout.startswith("problem: ")


@contextlib.contextmanager
def small_filesystem(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``where``, mounted for the test only (root and mount(8) needed)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root; the fault-injecting tests cover this")
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True)


def _fill(where: Path) -> None:
    """Leave no free space on the file system at ``where``."""
    with (where / "filler").open("wb") as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()


def test_gc_on_a_full_disk_is_a_clear_error_and_loses_nothing(
    tmp_path: Path, key: str, state: Path
) -> None:
    with small_filesystem(tmp_path / "mnt", "4m") as mnt:
        repo = mnt / "store.git"
        store = MemoryStore.open(repo, key, create=True, state_dir=state)
        for i in range(20):
            store.create(gitmem.parse_path(f"/memories/f{i}.md"), f"file {i}\n" * 200)
        before = store.files()
        _fill(mnt)
        with pytest.raises(gitmem.GitMemError) as info:
            open_store(repo, key, state).gc(grace=0)
        assert "nothing was pruned" in str(info.value) or "No space" in str(info.value)
        result = CliRunner().invoke(
            cli_main,
            ["--repo", str(repo), "gc", "--grace", "0s"],
            env={"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(state)},
        )
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert result.stderr.startswith("gitmem: error: "), result.output
        (mnt / "filler").unlink()
        fresh = open_store(repo, key, state)
        assert fresh.files() == before
        assert fresh.verify().ok


def test_gc_that_cannot_write_its_pack_is_a_clear_error(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same without root: the pack writer fails as on a full disk."""
    before = open_store(repo_path, key, state).files()
    published(repo_path)  # gc's own checkpoint then has nothing to write: gc's pack fails

    def no_space(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(packfile, "write_all", no_space)
    with pytest.raises(gitmem.GitMemError) as info:
        open_store(repo_path, key, state).gc(grace=0)
    assert str(info.value) == (
        "gc could not write the new pack: No space left on device; nothing was pruned"
    )
    monkeypatch.undo()
    assert open_store(repo_path, key, state).files() == before
    assert list(repo_path.glob("gitmem-gc-*")) == []


def test_a_read_only_repository_reads_and_refuses_writes_clearly(
    tmp_path: Path, key: str, state: Path
) -> None:
    with small_filesystem(tmp_path / "mnt", "8m") as mnt:
        repo = mnt / "store.git"
        tool = GitMemoryTool(repo, key=key, state_dir=state)
        tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
        tool.call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
        _remount(mnt, "ro")
        env = {"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(state)}
        runner = CliRunner()
        read = runner.invoke(cli_main, ["--repo", str(repo), "cat", "/memories/a.md"], env=env)
        assert (read.exit_code, read.stdout) == (0, "a\n"), read.output
        for command in (["restore", "HEAD~1"], ["gc"], ["expire", "--older-than", "0s"]):
            wrote = runner.invoke(cli_main, ["--repo", str(repo), *command], env=env)
            assert wrote.exit_code == 1, (command, wrote.output)
            assert wrote.stderr.startswith("gitmem: error: "), (command, wrote.output)
            assert "Read-only file system" in wrote.stderr, wrote.stderr
        with pytest.raises(ToolError) as refused:
            GitMemoryTool(repo, key=key, state_dir=state).call(
                {"command": "create", "path": "/memories/c.md", "file_text": "c\n"}
            )
        assert "Read-only file system" in str(refused.value)
        _remount(mnt, "rw")


def test_a_read_only_state_directory_still_allows_reading(
    tmp_path: Path, key: str, repo_path: Path
) -> None:
    with small_filesystem(tmp_path / "mnt", "1m") as mnt:
        state = mnt / "state"
        tool = GitMemoryTool(repo_path, key=key, state_dir=state)
        tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
        # Another writer moves the branch on; this client has not seen it yet.
        GitMemoryTool(repo_path, key=key, check_rollback=False).call(
            {"command": "create", "path": "/memories/b.md", "file_text": "b\n"}
        )
        _remount(mnt, "ro")
        try:
            # The head it could not record is said once, not silently dropped (RollbackCheckOff).
            with pytest.warns(gitmem.RollbackCheckOff, match="Read-only file system"):
                fresh = GitMemoryTool(repo_path, key=key, state_dir=state)
                assert "1\tb\n" in fresh.call({"command": "view", "path": "/memories/b.md"})
            elsewhere = tmp_path / "copy.git"
            shutil.copytree(repo_path, elsewhere)  # a path this client has no record of
            result = CliRunner().invoke(
                cli_main,
                ["--repo", str(elsewhere), "cat", "/memories/a.md"],
                env={"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(state)},
            )
            assert (result.exit_code, result.stdout) == (0, "a\n"), result.output
            assert result.stderr.startswith("gitmem: warning: rollback detection is off")
        finally:
            _remount(mnt, "rw")


def test_a_state_directory_that_cannot_be_written_still_allows_reading(
    filled: GitMemoryTool, repo_path: Path, key: str, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same without root: every write under the state directory fails."""
    real_open = os.open

    def read_only(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if str(path).startswith(str(state)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    GitMemoryTool(repo_path, key=key, check_rollback=False).call(
        {"command": "create", "path": "/memories/new.md", "file_text": "new\n"}
    )
    monkeypatch.setattr(os, "open", read_only)
    with pytest.warns(gitmem.RollbackCheckOff):
        store = open_store(repo_path, key, state)
        assert store.read_text("/memories/new.md") == "new\n"
