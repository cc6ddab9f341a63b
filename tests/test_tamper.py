"""Tampering: an attacker who can write the repository but lacks the key.

Each case alters one thing in a copy of the same small store (three files in three directories,
four commits) and then checks, from a client that had read the store before and from a fresh
one:

* every read either fails closed with a ``ToolError`` (one line, starting ``Error:``, no
  traceback, no memory content) or returns exactly what it returned before the tampering, and
  the reads that need what was altered do fail;
* writes that need what was altered are refused and leave the branch where it was;
* ``MemoryStore.verify`` is not ok and names the problem (the object or commit id, or the path);
* ``gitmem verify`` exits with the documented code, naming the problem, without a traceback.

Three ways to alter an object:

* **rehashed**: the altered object is written as a new object and every tree above it is
  rebuilt, up to a new commit carrying the head's genuine record, so that git's hashes are all
  consistent. git sees a valid repository; gitmem's record authentication must refuse it.
* **in place**: the loose object's file is rewritten with other (well-formed) content under the
  same id. libgit2's hash check, which gitmem turns on, must refuse it.
* **in place, hash check off**: as above with libgit2's hash check switched off, standing in for
  a SHA-1 second preimage: gitmem's own envelopes and structure checks must refuse it. Alterations
  that only move authentic pieces around (chunks reordered, two files' trees swapped) are left out
  of this mode: ``docs/design.md`` ("Reading") rests their detection on git's hashes.

``test_security.py`` covers flipped bytes of the compressed loose files, forged commit records and
a plain rollback; these cases are the rest of issue 5's list.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2
import pytest
from anthropic.lib.tools import ToolError
from click.testing import CliRunner
from helpers_bomb import plant
from helpers_repo import published, unpack
from pygit2.enums import ObjectType

import gitmem
from gitmem import GitMemError, GitMemoryTool, MemoryStore
from gitmem.cli import main as cli_main
from gitmem.crypto import KdfParams
from gitmem.git import maintenance as git_maintenance
from gitmem.git import objects as git_objects
from gitmem.git.repo import GitRepo
from gitmem.paths import parse

BRANCH = "refs/heads/main"
META = "refs/gitmem/meta"
TREE, BLOB, EXEC, LINK, GITLINK = 0o040000, 0o100644, 0o100755, 0o120000, 0o160000

F_TEXT = "".join(
    f"line {i:04d} canaryF7Q of a long file, {i * 7919 % 1000:03d}\n" for i in range(400)
)
G_TEXT = "canaryG3W in a subdirectory\n"
T_TEXT = "canaryT8K one\n"
CANARIES = ["canaryF7Q", "canaryG3W", "canaryT8K"]

READS: dict[str, dict[str, Any]] = {
    "root": {"command": "view", "path": "/memories"},
    "dir": {"command": "view", "path": "/memories/dir"},
    "sub": {"command": "view", "path": "/memories/dir/sub"},
    "f": {"command": "view", "path": "/memories/dir/f.md"},
    "f-range": {"command": "view", "path": "/memories/dir/f.md", "view_range": [2, 3]},
    "g": {"command": "view", "path": "/memories/dir/sub/g.md"},
    "top": {"command": "view", "path": "/memories/top.md"},
}
WRITES: dict[str, dict[str, Any]] = {
    "edit-f": {
        "command": "str_replace",
        "path": "/memories/dir/f.md",
        "old_str": "line 0001 ",
        "new_str": "LINE 0001 ",
    },
    "edit-g": {
        "command": "insert",
        "path": "/memories/dir/sub/g.md",
        "insert_line": 0,
        "insert_text": "x",
    },
    "edit-top": {
        "command": "str_replace",
        "path": "/memories/top.md",
        "old_str": "two",
        "new_str": "three",
    },
}
ALL = [*READS, *WRITES]
# Which reads and writes need each object of the store.
NEEDS = {
    "commit": ALL,
    "root": ALL,
    "dir": ["root", "dir", "sub", "f", "f-range", "g", "edit-f", "edit-g"],
    "sub": ["dir", "sub", "g", "edit-g"],
    "file": ["root", "dir", "f", "f-range", "edit-f"],
    "header": ["root", "dir", "f", "f-range", "edit-f"],
    "chunk": ["f", "f-range", "edit-f"],
    "top": ["root", "top", "edit-top"],
}


# -- the store and its objects --------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    name: str
    oid: str
    mode: int


@dataclass(frozen=True)
class Layout:
    """Object ids of the head, found from the structure alone (as an attacker would)."""

    commits: list[str]  # newest first
    root: str
    dir_name: str
    dir: str
    top_name: str
    top: str
    sub_name: str
    sub: str
    f_name: str
    file: str
    g_name: str
    g: str
    header: str
    chunks: list[str]

    def oid(self, role: str) -> str:
        if role == "commit":
            return self.commits[0]
        if role == "chunk":
            return self.chunks[1]
        value = getattr(self, role)
        assert isinstance(value, str)
        return value


def entries(r: pygit2.Repository, oid: str) -> list[Entry]:
    tree = r[oid]
    assert isinstance(tree, pygit2.Tree)
    return [Entry(str(e.name), str(e.id), int(e.filemode)) for e in tree]


def one(items: list[Entry], prefix: str) -> Entry:
    (found,) = [e for e in items if e.name.startswith(prefix)]
    return found


def layout_of(repo: Path) -> Layout:
    r = pygit2.Repository(str(published(repo)))
    head = r.references[BRANCH].target
    commits = [str(c.id) for c in r.walk(head)]
    commit = r[head]
    assert isinstance(commit, pygit2.Commit)
    root = str(commit.tree_id)
    d, top = one(entries(r, root), "d"), one(entries(r, root), "f")
    sub, f = one(entries(r, d.oid), "d"), one(entries(r, d.oid), "f")
    g = one(entries(r, sub.oid), "f")
    file_entries = {e.name: e.oid for e in entries(r, f.oid)}
    chunks = [file_entries[n] for n in sorted(file_entries) if n != "h"]
    assert len(chunks) >= 3
    return Layout(
        commits,
        root,
        d.name,
        d.oid,
        top.name,
        top.oid,
        sub.name,
        sub.oid,
        f.name,
        f.oid,
        g.name,
        g.oid,
        file_entries["h"],
        chunks,
    )


def tree_bytes(items: list[Entry]) -> bytes:
    # git's order: names as bytes, a tree's name compared as if it ended in "/".
    def key(e: Entry) -> bytes:
        return e.name.encode() + (b"/" if e.mode == TREE else b"")

    return b"".join(
        f"{e.mode:o} {e.name}".encode() + b"\0" + bytes.fromhex(e.oid)
        for e in sorted(items, key=key)
    )


def write_tree(r: pygit2.Repository, items: list[Entry]) -> str:
    # Through the object database directly: libgit2's tree builder would refuse the odd entries.
    return str(r.odb.write(ObjectType.TREE, tree_bytes(items)))


def write_blob(r: pygit2.Repository, data: bytes) -> str:
    return str(r.odb.write(ObjectType.BLOB, data))


def raw(r: pygit2.Repository, oid: str) -> bytes:
    return bytes(r[oid].read_raw())


def flip(data: bytes, at: int | None = None) -> bytes:
    out = bytearray(data)
    out[len(out) // 2 if at is None else at] ^= 0x01
    return bytes(out)


def flip_name(name: str) -> str:
    """A sealed name with one base64 character of its ciphertext changed."""
    i = len(name) // 2
    return name[:i] + ("A" if name[i] != "A" else "B") + name[i + 1 :]


@dataclass
class Victim:
    """A copy of the store, a client that has read all of it, and what that client saw."""

    repo: Path
    state: Path
    key: str
    seen: GitMemoryTool
    before: dict[str, str]
    at: Layout

    @property
    def r(self) -> pygit2.Repository:
        return pygit2.Repository(str(published(self.repo)))

    def branch(self) -> str | None:
        path = self.repo / BRANCH
        return path.read_text().strip() if path.is_file() else None


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    base = tmp_path_factory.mktemp("tamper-template")
    key = gitmem.generate_key()
    tool = GitMemoryTool(base / "store.git", key=key, session="tamper", state_dir=base / "state")
    tool.call({"command": "create", "path": "/memories/dir/f.md", "file_text": F_TEXT})
    tool.call({"command": "create", "path": "/memories/dir/sub/g.md", "file_text": G_TEXT})
    tool.call({"command": "create", "path": "/memories/top.md", "file_text": T_TEXT})
    tool.call(
        {"command": "str_replace", "path": "/memories/top.md", "old_str": "one", "new_str": "two"}
    )
    return base, key


@pytest.fixture
def victim(template: tuple[Path, str], tmp_path: Path) -> Victim:
    base, key = template
    shutil.copytree(base / "store.git", tmp_path / "store.git")
    shutil.copytree(base / "state", tmp_path / "state")
    seen = GitMemoryTool(
        tmp_path / "store.git", key=key, session="seen", state_dir=tmp_path / "state"
    )
    before = {name: seen.call(data) for name, data in READS.items()}
    return Victim(
        tmp_path / "store.git",
        tmp_path / "state",
        key,
        seen,
        before,
        layout_of(tmp_path / "store.git"),
    )


# -- how objects are altered ----------------------------------------------------------------------


def rebuild(r: pygit2.Repository, tree: str, names: list[str], replacement: str) -> str:
    """``tree`` with the object at ``names`` (entry names below it) replaced, rehashed upwards."""
    if not names:
        return replacement
    out = [
        Entry(e.name, rebuild(r, e.oid, names[1:], replacement), e.mode)
        if e.name == names[0]
        else e
        for e in entries(r, tree)
    ]
    return write_tree(r, out)


def forge(
    v: Victim,
    root: str | None = None,
    *,
    message: bytes | None = None,
    parents: list[str] | None = None,
) -> str:
    """A commit like the head but with other parts, then the branch moved to it."""
    r = v.r
    head = r[v.at.commits[0]]
    assert isinstance(head, pygit2.Commit)
    lines = [f"tree {root or head.tree_id}"]
    lines += [f"parent {p}" for p in (head.parent_ids if parents is None else parents)]
    lines += ["author gitmem <gitmem@invalid> 0 +0000", "committer gitmem <gitmem@invalid> 0 +0000"]
    body = "\n".join(lines).encode() + b"\n\n" + (head.raw_message if message is None else message)
    # Through the object database: libgit2's commit creation checks the parents' types.
    oid = r.odb.write(ObjectType.COMMIT, body)
    r.references[BRANCH].set_target(oid)
    return str(oid)


def rewrite_loose(v: Victim, oid: str, content: bytes) -> None:
    """Put ``content`` (an object of the same type) under ``oid``'s name: its hash is now wrong."""
    path = v.repo / "objects" / oid[:2] / oid[2:]
    kind = v.r[oid].type_str.encode()
    # A packed object (the metadata blob, published by init's checkpoint) is made loose first,
    # its pack removed: readers look in packs first, so a loose copy beside it is not read.
    packs = [
        idx
        for idx in (v.repo / "objects" / "pack").glob("pack-*.idx")
        if oid in git_maintenance._pack_index_oids(idx)
    ]
    unpack(v.repo, packs)
    path.parent.mkdir(exist_ok=True)
    if path.exists():
        path.chmod(0o644)
    path.write_bytes(zlib.compress(kind + b" %d\0" % len(content) + content))


def truncate_loose(v: Victim, oid: str) -> None:
    path = v.repo / "objects" / oid[:2] / oid[2:]
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@contextlib.contextmanager
def no_hash_check() -> Iterator[None]:
    """Reads without hash checks (libgit2's and gitmem's own for loose objects): a stand-in
    for a SHA-1 second preimage."""
    pygit2.settings.enable_strict_hash_verification(False)
    git_objects._CHECK_LOOSE_HASHES = False
    try:
        yield
    finally:
        git_objects._CHECK_LOOSE_HASHES = True
        pygit2.settings.enable_strict_hash_verification(True)  # gitmem's setting (git/handle.py)


# -- what each case expects -----------------------------------------------------------------------


@dataclass
class Expect:
    """``problem`` must be in a verify problem (``exact``: be one); ``fails`` must be refused."""

    problem: str
    fails: list[str]
    exact: bool = False
    code: int = 5
    # The error opening the store gives (the metadata is read at open), if any.
    open_error: str | None = None
    # Whether the client that had read the store before must fail too (the head changed).
    seen_fails: bool = False
    hash_check: bool = True


def forged(commit: str) -> Expect:
    """A new head that is not authentic: everything fails, verify names the commit."""
    message = f"commit {commit} failed authentication (forged, altered or spliced)"
    return Expect(f"commit {commit}: {message}", ALL, exact=True, seen_fails=True)


Case = Callable[[Victim], Expect]
CASES: dict[str, Case] = {}


def case(name: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        assert name not in CASES
        CASES[name] = fn
        return fn

    return register


# Where each object sits, as entry names from the root.
def place(v: Victim, role: str) -> list[str]:
    a = v.at
    return {
        "root": [],
        "dir": [a.dir_name],
        "sub": [a.dir_name, a.sub_name],
        "file": [a.dir_name, a.f_name],
        "top": [a.top_name],
        "header": [a.dir_name, a.f_name, "h"],
        "chunk": [a.dir_name, a.f_name, "c00000001"],
    }[role]


def altered(v: Victim, role: str) -> bytes:
    """The object of ``role`` with one bit of its content flipped where gitmem reads it."""
    r, oid = v.r, v.at.oid(role)
    data = raw(r, oid)
    if role in ("header", "chunk"):
        return flip(data)
    if role == "commit":
        # In the base64 record, so the commit still parses.
        head = r[oid]
        assert isinstance(head, pygit2.Commit)
        message = head.raw_message
        return data[: len(data) - len(message)] + flip_name(message.decode()).encode()
    items = entries(r, oid)
    first = items[0]
    # A sealed name for a directory, an entry name ("h") for a file tree.
    changed = Entry(flip_name(first.name) if len(first.name) > 2 else "H", first.oid, first.mode)
    return tree_bytes([changed, *items[1:]])


# Flipped bits, rehashed up to a forged commit.
for _role in ["root", "dir", "sub", "file", "top", "header", "chunk"]:

    @case(f"rehashed: a flipped bit in the {_role} object")
    def _flip_rehashed(v: Victim, role: str = _role) -> Expect:
        r = v.r
        kind = ObjectType.BLOB if role in ("header", "chunk") else ObjectType.TREE
        new = str(r.odb.write(kind, altered(v, role)))
        return forged(forge(v, rebuild(r, v.at.root, place(v, role), new)))


@case("rehashed: a flipped bit in the commit record")
def _commit_record(v: Victim) -> Expect:
    head = v.r[v.at.commits[0]]
    assert isinstance(head, pygit2.Commit)
    return forged(forge(v, message=flip_name(head.raw_message.decode()).encode()))


# Flipped bits in place: libgit2's hash check refuses the object.
for _role in ["commit", "root", "dir", "sub", "file", "top", "header", "chunk"]:

    @case(f"in place: a flipped bit in the {_role} object")
    def _flip_in_place(v: Victim, role: str = _role) -> Expect:
        oid = v.at.oid(role)
        rewrite_loose(v, oid, altered(v, role))
        return Expect(oid, NEEDS[role])

    @case(f"in place, no hash check: a flipped bit in the {_role} object")
    def _flip_no_hash(v: Victim, role: str = _role) -> Expect:
        oid = v.at.oid(role)
        rewrite_loose(v, oid, altered(v, role))
        return Expect(oid, NEEDS[role], hash_check=False)


# Truncated objects. A loose file cut short made libgit2 1.9 loop forever (libgit2 issue #7342);
# gitmem checks a loose object's zlib stream is whole before handing it to libgit2.
for _role in ["commit", "root", "file", "header", "chunk"]:

    @case(f"in place: the {_role} object's file cut in half")
    def _cut_file(v: Victim, role: str = _role) -> Expect:
        oid = v.at.oid(role)
        truncate_loose(v, oid)
        return Expect(oid, NEEDS[role])

    @case(f"in place, no hash check: the {_role} object's content cut in half")
    def _cut_content(v: Victim, role: str = _role) -> Expect:
        oid = v.at.oid(role)
        data = raw(v.r, oid)
        # Mid-entry for a tree (a tree cut between entries only lacks entries, which only git's
        # hashes can tell: see the module docstring).
        rewrite_loose(v, oid, data[: len(data) // 2])
        return Expect(oid, NEEDS[role], hash_check=False)


for _role in ["header", "chunk"]:

    @case(f"rehashed: the {_role} blob cut in half")
    def _cut_rehashed(v: Victim, role: str = _role) -> Expect:
        r = v.r
        data = raw(r, v.at.oid(role))
        new = write_blob(r, data[: len(data) // 2])
        return forged(forge(v, rebuild(r, v.at.root, place(v, role), new)))


@case("rehashed: the commit record cut in half")
def _cut_record(v: Victim) -> Expect:
    head = v.r[v.at.commits[0]]
    assert isinstance(head, pygit2.Commit)
    message = head.raw_message.strip()
    return forged(forge(v, message=message[: len(message) // 2]))


# Entries swapped between files and directories, and moved between directories.


def swap_cases() -> dict[str, Callable[[Victim], tuple[str, list[Entry], str, list[str]]]]:
    """Each gives (the tree to change, its new entries, what verify names, what fails)."""

    def dir_gets_file_tree(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
        a = v.at
        items = [
            Entry(e.name, a.top if e.name == a.dir_name else e.oid, e.mode)
            for e in entries(v.r, a.root)
        ]
        return "root", items, "/memories/dir", NEEDS["dir"]

    def file_gets_dir_tree(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
        a = v.at
        items = [
            Entry(e.name, a.sub if e.name == a.top_name else e.oid, e.mode)
            for e in entries(v.r, a.root)
        ]
        return "root", items, a.sub, NEEDS["top"]

    def trees_exchanged(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
        a = v.at
        swap = {a.sub_name: a.file, a.f_name: a.sub}
        items = [Entry(e.name, swap[e.name], e.mode) for e in entries(v.r, a.dir)]
        return "dir", items, "/memories/dir", NEEDS["dir"]

    def files_exchanged(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
        a = v.at
        items = [
            Entry(e.name, a.top if e.name == a.f_name else e.oid, e.mode)
            for e in entries(v.r, a.dir)
        ]
        return "dir", items, "/memories/dir/f.md", NEEDS["file"]

    def kind_prefix_swapped(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
        a = v.at
        items = [
            Entry("f" + e.name[1:] if e.name == a.dir_name else e.name, e.oid, e.mode)
            for e in entries(v.r, a.root)
        ]
        return "root", items, a.root, ALL

    def name_moved_up(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
        # g.md's sealed name binds /memories/dir/sub as its parent; here it sits in the root.
        a = v.at
        items = [*entries(v.r, a.root), Entry(a.g_name, a.g, TREE)]
        return "root", items, a.root, ALL

    def file_emptied(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
        return "file", [], v.at.file, NEEDS["file"]

    return {
        "a directory's entry given a file's tree": dir_gets_file_tree,
        "a file's entry given a directory's tree": file_gets_dir_tree,
        "a file's and a directory's trees exchanged": trees_exchanged,
        "a file's entry given another file's tree": files_exchanged,
        "the f/d kind prefix of an entry name swapped": kind_prefix_swapped,
        "an entry name moved to another directory": name_moved_up,
        "a file tree with no entries": file_emptied,
    }


def plant_cases() -> dict[str, Callable[[Victim], tuple[str, list[Entry], str, list[str]]]]:
    """Planted, missing and reordered entries; same shape as :func:`swap_cases`."""

    def planted(name: str, mode: int, target: Callable[[Victim], str]) -> Any:
        def make(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
            items = [*entries(v.r, v.at.root), Entry(name, target(v), mode)]
            return "root", items, "/memories", ALL

        return make

    def blob(v: Victim) -> str:
        return write_blob(v.r, b"#!/bin/sh\necho planted\n")

    def in_file(change: Callable[[Victim, list[Entry]], list[Entry]], needs: str = "file") -> Any:
        def make(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
            items = change(v, entries(v.r, v.at.file))
            return "file", items, "/memories/dir/f.md", NEEDS[needs]

        return make

    def chunks_reordered(v: Victim, items: list[Entry]) -> list[Entry]:
        c = v.at.chunks
        swap = {c[0]: c[1], c[1]: c[0]}
        return [Entry(e.name, swap.get(e.oid, e.oid), e.mode) for e in items]

    def dir_entry_as_blob(v: Victim) -> tuple[str, list[Entry], str, list[str]]:
        items = [
            Entry(e.name, e.oid, BLOB if e.mode == TREE and e.name[0] == "f" else e.mode)
            for e in entries(v.r, v.at.dir)
        ]
        return "dir", items, "/memories/dir", NEEDS["dir"]

    return {
        "a symlink (mode 120000) planted": planted("README", LINK, blob),
        "a submodule (mode 160000) planted": planted("vendor", GITLINK, lambda v: v.at.commits[1]),
        "an executable blob (mode 100755) planted": planted("run.sh", EXEC, blob),
        "a plain blob named README planted": planted("README", BLOB, blob),
        "a directory with a plain-text name planted": planted("notes", TREE, lambda v: v.at.sub),
        "a file tree planted under a plain-text name": planted("f.md", TREE, lambda v: v.at.top),
        "an entry of a directory turned into a blob": dir_entry_as_blob,
        "an extra entry in a file tree": in_file(
            lambda v, items: [*items, Entry("README", blob(v), BLOB)]
        ),
        "an extra chunk in a file tree": in_file(
            lambda v, items: [*items, Entry(f"c{len(items) - 1:08x}", v.at.chunks[0], BLOB)]
        ),
        "a missing chunk": in_file(lambda v, items: [e for e in items if e.name != "c00000001"]),
        "the last chunk missing": in_file(lambda v, items: items[:-1]),
        "the header missing": in_file(lambda v, items: [e for e in items if e.name != "h"]),
        "a chunk replaced by the header": in_file(
            lambda v, items: [
                Entry(e.name, v.at.header if e.name == "c00000000" else e.oid, e.mode)
                for e in items
            ],
            "chunk",
        ),
        "a chunk replaced by another file's chunk": in_file(
            lambda v, items: [
                Entry(
                    e.name,
                    one(entries(v.r, v.at.top), "c").oid if e.name == "c00000000" else e.oid,
                    e.mode,
                )
                for e in items
            ],
            "chunk",
        ),
        "a chunk entry made executable": in_file(
            lambda v, items: [
                Entry(e.name, e.oid, EXEC if e.name == "c00000000" else e.mode) for e in items
            ]
        ),
        "chunks reordered": in_file(chunks_reordered),
    }


# Chunk and tree pieces that are each authentic: only git's hashes (under the record) catch them.
ONLY_HASHES = {"chunks reordered", "a file's entry given another file's tree"}

for _name, _make in {**swap_cases(), **plant_cases()}.items():

    @case(f"rehashed: {_name}")
    def _structure_rehashed(v: Victim, make: Any = _make) -> Expect:
        role, items, _names, _fails = make(v)
        r = v.r
        return forged(forge(v, rebuild(r, v.at.root, place(v, role), write_tree(r, items))))

    @case(f"in place: {_name}")
    def _structure_in_place(v: Victim, make: Any = _make) -> Expect:
        role, items, _names, fails = make(v)
        oid = v.at.oid(role)
        rewrite_loose(v, oid, tree_bytes(items))
        return Expect(oid, fails)

    if _name not in ONLY_HASHES:

        @case(f"in place, no hash check: {_name}")
        def _structure_no_hash(v: Victim, make: Any = _make) -> Expect:
            role, items, names, fails = make(v)
            rewrite_loose(v, v.at.oid(role), tree_bytes(items))
            return Expect(names, fails, hash_check=False)


# Forged and spliced commits beyond test_security's.


@case("a merge commit: the head's record with a second parent")
def _merge(v: Victim) -> Expect:
    return forged(forge(v, parents=[v.at.commits[1], v.at.commits[3]]))


@case("an older commit's record under the head's tree")
def _old_record(v: Victim) -> Expect:
    older = v.r[v.at.commits[2]]
    assert isinstance(older, pygit2.Commit)
    return forged(forge(v, message=older.raw_message))


@case("a commit with an extra parent that is not a commit")
def _parent_tree(v: Victim) -> Expect:
    return forged(forge(v, parents=[v.at.commits[1], v.at.root]))


# The branch.


@case("the branch rolled back to the first commit")
def _rollback(v: Victim) -> Expect:
    first = v.at.commits[-1]
    v.r.references[BRANCH].set_target(pygit2.Oid(hex=first))
    return Expect(f"the store's branch is at operation #1 ({first[:12]})", ALL, seen_fails=True)


@case("the branch pointing at a tree")
def _branch_tree(v: Victim) -> Expect:
    (v.repo / BRANCH).write_text(v.at.root + "\n")
    return Expect(f"object {v.at.root} should be a commit", ALL, seen_fails=True)


@case("the branch pointing at a missing object")
def _branch_missing(v: Victim) -> Expect:
    missing = "0123456789abcdef0123456789abcdef01234567"
    (v.repo / BRANCH).write_text(missing + "\n")
    return Expect(f"object {missing} is missing from the repository", ALL, seen_fails=True)


@case("the branch made a symbolic ref")
def _branch_symbolic(v: Victim) -> Expect:
    (v.repo / BRANCH).write_text(f"ref: {META}\n")
    message = f"the ref {BRANCH} is symbolic; gitmem refs point at objects"
    return Expect(message, ALL, exact=True, seen_fails=True)


@case("the branch file holding garbage")
def _branch_garbage(v: Victim) -> Expect:
    (v.repo / BRANCH).write_text("not an object id\n")
    return Expect(f"the ref {BRANCH} is corrupt", ALL, seen_fails=True)


@case("the head commit rewritten with another author")
def _other_author(v: Victim) -> Expect:
    """Documented (design.md): the record does not bind the author line, so the copy reads the
    same; a client that saw the original head refuses the copy as a rollback."""
    r = v.r
    head = r[v.at.commits[0]]
    assert isinstance(head, pygit2.Commit)
    sig = pygit2.Signature("mallory", "mallory@example.com", 0, 0)
    oid = r.create_commit(None, sig, sig, head.raw_message, head.tree_id, head.parent_ids)
    r.references[BRANCH].set_target(oid)
    return Expect(f"the store's branch is at operation #4 ({str(oid)[:12]})", ALL, seen_fails=True)


# The metadata ref.


def meta_body(v: Victim) -> dict[str, Any]:
    oid = (v.repo / META).read_text().strip()
    body = json.loads(raw(v.r, oid))
    assert isinstance(body, dict)
    return body


def set_meta(v: Victim, data: bytes) -> str:
    oid = write_blob(v.r, data)
    v.r.references[META].set_target(pygit2.Oid(hex=oid))
    return oid


def wrong_key(v: Victim) -> str:
    return f"the key does not open the store at {v.repo}"


@case("the metadata with another store id")
def _meta_store_id(v: Victim) -> Expect:
    body = meta_body(v)
    body["store_id"] = os.urandom(16).hex()
    set_meta(v, json.dumps(body).encode())
    # A client new to the path would find the key does not open it (WrongKey).
    message = f"the repository at {v.repo} now holds the gitmem store {body['store_id']}, not "
    return Expect("", [], code=9, open_error=message)


@case("the metadata with format 99")
def _meta_format(v: Victim) -> Expect:
    body = meta_body(v)
    body["format"] = 99
    set_meta(v, json.dumps(body).encode())
    message = (
        "this store has format version 99; this gitmem reads 1, 2, 3, 4, 5, 6 (upgrade gitmem)"
    )
    return Expect("", [], code=8, open_error=message)


@case("the metadata with a flipped bit in the key check")
def _meta_check(v: Victim) -> Expect:
    body = meta_body(v)
    check = base64.b64decode(body["key_check"])
    body["key_check"] = base64.b64encode(flip(check)).decode()
    set_meta(v, json.dumps(body).encode())
    return Expect("", [], code=4, open_error=wrong_key(v))


@case("the metadata of another store under the same key")
def _meta_other_store(v: Victim) -> Expect:
    other = MemoryStore.open(v.repo.parent / "other.git", v.key, create=True, state_dir=v.state)
    oid = other.repo.ref(META)
    assert oid is not None
    set_meta(v, other.repo.read_blob(oid))
    # The key opens it, but this client has used another store at this path (and every record
    # binds the real store id: test_security checks that a client new to the path fails there).
    message = f"the repository at {v.repo} now holds the gitmem store {other.store_id}, not "
    return Expect("", [], code=9, open_error=message)


@case("the metadata not JSON")
def _meta_garbage(v: Victim) -> Expect:
    set_meta(v, b"\x00garbage")
    return Expect("", [], open_error="the store's metadata is malformed")


for _name, _body in {
    "a JSON list": b'["gitmem", "store"]',
    "a JSON string": b'"store"',
    "deeply nested JSON": b"[" * 30_000 + b"]" * 30_000,
    "JSON with a list for the store id": b'{"gitmem": "store", "format": 1, "store_id": [1], '
    b'"key_check": ""}',
}.items():

    @case(f"the metadata {_name}")
    def _meta_json(v: Victim, body: bytes = _body) -> Expect:
        set_meta(v, body)
        return Expect("", [], open_error="the store's metadata is malformed")


@case("the metadata not a gitmem store's")
def _meta_foreign(v: Victim) -> Expect:
    body = meta_body(v)
    body["gitmem"] = "something else"
    set_meta(v, json.dumps(body).encode())
    return Expect("", [], code=3, open_error="the repository's gitmem metadata is not recognised")


@case("the metadata ref pointing at a tree")
def _meta_tree(v: Victim) -> Expect:
    v.r.references[META].set_target(pygit2.Oid(hex=v.at.root))
    return Expect("", [], open_error=f"object {v.at.root} should be a blob")


# Deleting the metadata ref is no tampering since format 2: every root tree carries the
# metadata (tests/test_replicas.py::test_deleted_metadata_ref_is_rebuilt_from_the_branch).


@case("in place: a flipped bit in the metadata blob")
def _meta_in_place(v: Victim) -> Expect:
    oid = (v.repo / META).read_text().strip()
    rewrite_loose(v, oid, flip(raw(v.r, oid), 3))
    return Expect("", [], open_error=f"object {oid} is corrupt")


# Decompression bombs: a small loose file that inflates far beyond what the format allows an
# object of its kind (docs/design.md, "Sizes"). gitmem must refuse it from its header, before
# inflating it; test_security measures the memory that costs.


def plant_bomb(v: Victim, kind: bytes, at: str | None = None) -> str:
    """A bomb under its own id (a genuine object), or in place of object ``at``."""
    return plant(v.repo, kind, at)


@case("the metadata ref pointing at a decompression bomb")
def _meta_bomb(v: Victim) -> Expect:
    oid = plant_bomb(v, b"blob")
    v.r.references[META].set_target(pygit2.Oid(hex=oid))
    return Expect("", [], open_error=f"object {oid} is corrupt")


@case("the branch pointing at a decompression bomb")
def _branch_bomb(v: Victim) -> Expect:
    oid = plant_bomb(v, b"commit")
    (v.repo / BRANCH).write_text(oid + "\n")
    return Expect(f"object {oid} is corrupt: it declares", ALL, seen_fails=True)


for _role in ["commit", "root", "header", "chunk"]:

    @case(f"in place: a decompression bomb as the {_role} object")
    def _bomb_in_place(v: Victim, role: str = _role) -> Expect:
        oid = v.at.oid(role)
        kind = b"blob" if role in ("header", "chunk") else role.encode().replace(b"root", b"tree")
        plant_bomb(v, kind, at=oid)
        return Expect(oid, NEEDS[role])


# -- the checks -----------------------------------------------------------------------------------


def attempt(tool: GitMemoryTool, data: dict[str, Any]) -> str | ToolError:
    try:
        return tool.call(data)
    except ToolError as exc:
        return exc


def assert_refusal(error: ToolError, what: str) -> None:
    text = error.content
    assert isinstance(text, str), what
    assert text.startswith("Error: "), (what, text)
    assert "\n" not in text and "Traceback" not in text, (what, text)
    # An unexpected exception means some tampering reached code that did not expect it.
    assert "unexpectedly" not in text, (what, text)
    for canary in CANARIES:
        assert canary not in text, (what, text)


def check_reads(v: Victim, tool: GitMemoryTool, must_fail: list[str], who: str) -> None:
    for name, data in READS.items():
        got = attempt(tool, data)
        if isinstance(got, ToolError):
            assert_refusal(got, f"{who} {name}")
        else:
            # Never other content: what this read showed before the tampering, or an error.
            assert name not in must_fail, f"{who}: {name} read through the tampering"
            assert got == v.before[name], f"{who}: {name} changed"


def check_cli(v: Victim, expect: Expect) -> None:
    result = CliRunner().invoke(
        cli_main,
        ["--repo", str(v.repo), "verify"],
        env={"GITMEM_KEY": v.key, "GITMEM_STATE_DIR": str(v.state)},
    )
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == expect.code, result.output
    assert "Traceback" not in result.output
    for canary in CANARIES:
        assert canary not in result.output
    if expect.open_error is not None:
        assert result.stdout == ""
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"gitmem: error: {expect.open_error}"), line
        return
    *problems, summary = result.stdout.splitlines()
    assert problems and all(p.startswith("problem: ") for p in problems), result.stdout
    assert summary.endswith(
        f"FAILED ({len(problems)} problem{'s' if len(problems) != 1 else ''})"
    ), summary
    assert expect.problem in result.stdout


def files_of(repo: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and p.name != "gitmem.lock"
    }


def run_case(v: Victim, name: str) -> None:
    untouched = files_of(v.repo)
    expect = CASES[name](v)
    assert files_of(v.repo) != untouched, "the case changed nothing"
    branch = v.branch()
    with contextlib.ExitStack() as stack:
        if not expect.hash_check:
            stack.enter_context(no_hash_check())
        # The client that read everything before: fails where the head changed, and otherwise
        # may only show what it showed before (it may hold authentic objects in its caches).
        check_reads(v, v.seen, ALL if expect.seen_fails else [], "seen client")
        if expect.open_error is not None:
            with pytest.raises(GitMemError) as info:
                GitMemoryTool(v.repo, key=v.key, state_dir=v.state)
            assert str(info.value).startswith(expect.open_error), str(info.value)
            assert info.value.exit_code == expect.code
            check_cli(v, expect)
            return
        fresh = GitMemoryTool(v.repo, key=v.key, session="fresh", state_dir=v.state)
        check_reads(v, fresh, expect.fails, "fresh client")
        for write in [w for w in WRITES if w in expect.fails]:
            got = attempt(fresh, WRITES[write])
            assert isinstance(got, ToolError), f"{write} went through the tampering"
            assert_refusal(got, write)
            assert v.branch() == branch, f"{write} moved the branch"
        report = MemoryStore.open(v.repo, v.key, state_dir=v.state).verify()
        assert not report.ok
        if expect.exact:
            assert expect.problem in report.problems, report.problems
        else:
            assert any(expect.problem in p for p in report.problems), report.problems
        for problem in report.problems:
            assert "\n" not in problem
            for canary in CANARIES:
                assert canary not in problem
        check_cli(v, expect)


@pytest.mark.parametrize("name", sorted(CASES))
def test_tampering_fails_closed(victim: Victim, name: str) -> None:
    run_case(victim, name)


# -- refs/gitmem/meta: the slots that decide who holds keys are authenticated before any use -------

FAST = KdfParams(64, 1, 1)  # cheap Argon2id for tests
CHANGED_OUTSIDE = "changed outside gitmem"


def _held(path: Path, key: str, state: Path) -> MemoryStore:
    """A store held by its initial key and by alice's passphrase."""
    store = MemoryStore.init(path, key, state_dir=state)
    store.create(parse("/memories/note.md"), "hello\n")
    store.add_key(passphrase="alice's passphrase", label="alice", kdf=FAST)
    return store


def _edit_meta(path: Path, how: str) -> None:
    """What someone who can write the repository, and holds no key, does to the slots:
    plants a slot (a copy of alice's under a new id), or drops alice's."""
    repo = GitRepo(path)
    old = repo.ref(META)
    assert old is not None
    body = json.loads(repo.read_blob(old))
    (alice,) = [slot for slot in body["slots"] if slot["kind"] == "passphrase"]
    if how == "planted":
        body["slots"].append(dict(alice, slot="0badc0de"))
    else:
        body["slots"].remove(alice)
    data = json.dumps(body, sort_keys=True, indent=1).encode() + b"\n"
    repo.update_ref(META, repo.write_blob(data), old)


@pytest.mark.parametrize("how", ["planted", "dropped"])
def test_an_edited_metadata_ref_is_refused_and_never_stamped(
    tmp_path: Path, key: str, how: str
) -> None:
    # A holder's next write carried the edited slots into an authenticated commit (verify then
    # said ok), after which `key list`, `rotate` and `remove` failed on every replica, or the
    # dropped holder was locked out for good.
    state = tmp_path / "state"
    store = _held(tmp_path / "s.git", key, state)
    branch, good = store.repo.ref(BRANCH), store.repo.ref(META)
    _edit_meta(store.path, how)
    holder = MemoryStore.open(store.path, key, state_dir=state)
    alice = MemoryStore.open(store.path, passphrase="alice's passphrase", state_dir=state)
    note = parse("/memories/new.md")
    for who in (store, holder, alice):
        with pytest.raises(gitmem.IntegrityError, match=CHANGED_OUTSIDE):
            who.create(note, "x\n")
        with pytest.raises(gitmem.IntegrityError, match=CHANGED_OUTSIDE):
            who.key_slots()
        with pytest.raises(gitmem.IntegrityError, match=CHANGED_OUTSIDE):
            who.rotate_keys()
    with pytest.raises(gitmem.IntegrityError, match=CHANGED_OUTSIDE):
        holder.read_text(parse("/memories/note.md"))
    assert store.repo.ref(BRANCH) == branch
    report = holder.verify()
    assert not report.ok
    assert any("refs/gitmem/meta" in problem for problem in report.problems)
    env = {"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(state)}
    listed = CliRunner().invoke(cli_main, ["--repo", str(store.path), "key", "list"], env=env)
    assert listed.exit_code == 5, listed.output
    assert CHANGED_OUTSIDE in listed.output and "run `gitmem accept-head`" in listed.output
    # accept-head points the ref back at the metadata the head carries; all works again.
    accepted = CliRunner().invoke(cli_main, ["--repo", str(store.path), "accept-head"], env=env)
    assert accepted.exit_code == 0, accepted.output
    assert GitRepo(store.path).ref(META) == good
    again = MemoryStore.open(store.path, passphrase="alice's passphrase", state_dir=state)
    assert [slot["label"] for slot in again.key_slots()] == ["initial key", "alice"]
    again.create(note, "x\n")
    assert again.rotate_keys() == 1
    assert again.verify().ok


def test_an_older_metadata_ref_is_not_used_and_the_next_write_replaces_it(
    tmp_path: Path, key: str
) -> None:
    # A crash between a key change's commit and its ref leaves the ref at the metadata the
    # commit before carried: accepted (it is authentic), never used, and brought up to date.
    state = tmp_path / "state"
    store = _held(tmp_path / "s.git", key, state)
    older = store.repo.ref(META)
    bob = store.add_key(passphrase="bob's passphrase", label="bob", kdf=FAST)
    newer = store.repo.ref(META)
    assert older is not None and newer is not None
    store.repo.update_ref(META, older, newer)
    holder = MemoryStore.open(store.path, key, state_dir=state)
    assert bob in {slot["slot"] for slot in holder.key_slots()}
    holder.create(parse("/memories/new.md"), "x\n")
    assert holder.repo.ref(META) == newer
    assert holder.verify().ok


@pytest.mark.parametrize("how", ["planted", "dropped"])
def test_an_empty_stores_metadata_is_checked_as_far_as_the_keys_can(
    tmp_path: Path, key: str, how: str
) -> None:
    # No commit carries an empty store's metadata yet: a planted slot fails its label (only a
    # holder of the newest epoch key can seal one); a dropped one cannot be told (trust on
    # first use, docs/security.md) and is what the first write then carries.
    store = MemoryStore.init(tmp_path / "s.git", key, state_dir=tmp_path / "state")
    store.add_key(passphrase="alice's passphrase", label="alice", kdf=FAST)
    _edit_meta(store.path, how)
    note = parse("/memories/new.md")
    if how == "dropped":
        store.create(note, "x\n")
        assert [slot["label"] for slot in store.key_slots()] == ["initial key"]
        return
    with pytest.raises(gitmem.IntegrityError, match="no holder of the store's keys made"):
        store.create(note, "x\n")
    with pytest.raises(gitmem.IntegrityError, match="no holder of the store's keys made"):
        store.key_slots()
    assert store.repo.ref(BRANCH) is None
