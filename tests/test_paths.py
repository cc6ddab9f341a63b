"""Hostile paths: every class issue 2 names (and issue 5's Windows names and wrong prefixes) is
refused by ``gitmem.paths.parse`` and, through the tool, by every command with a ``ToolError``
and no commit. Plus NFC normalization, the byte limits at their exact boundaries, and a
property: whatever ``parse`` accepts is canonical and parses again as itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from hypothesis import example, given, settings
from hypothesis import strategies as st

import gitmem
from gitmem import GitMemoryTool, InvalidPath, MemoryPath, history
from gitmem import paths as gitmem_paths
from gitmem.errors import printable, shown
from gitmem.paths import MAX_COMPONENT_BYTES, MAX_DEPTH, MAX_PATH_BYTES, parse

OUTSIDE = "every memory path must start with /memories/"
DOTDOT = "'..' components are not allowed"
DOT = "'.' components are not allowed"
BACKSLASH = "backslashes are not allowed; use / between components"
ENCODED = "it contains percent-encoded traversal"
ENCODED_SEP = "it contains a percent-encoded separator"
LOOKALIKE = "a component is a look-alike of '.', '..' or a separator"
CONTROL = "it contains a control character"
SURROGATE = "it contains a lone surrogate (not valid Unicode text)"
GIT = "'.git' components are not allowed"
DRIVE = "a component looks like a Windows drive letter"
LONG_COMPONENT = f"a component is longer than {MAX_COMPONENT_BYTES} bytes"
LONG_PATH = f"it is longer than {MAX_PATH_BYTES} bytes"


def reserved(component: str) -> str:
    return f"'{component}' is a reserved device name on Windows"


# (path, the reason parse gives), grouped by the class of attack.
HOSTILE: list[tuple[str, str]] = [
    # not under /memories, including prefixes that only look like it
    ("", "the path is empty; memory paths start with /memories"),
    ("/", OUTSIDE),
    ("/etc/passwd", OUTSIDE),
    ("memories/a", OUTSIDE),
    ("memories", OUTSIDE),
    ("/Memories/a", OUTSIDE),
    ("/MEMORIES", OUTSIDE),
    ("/memoriesX/a", OUTSIDE),
    ("/memoriesX", OUTSIDE),
    ("/memories-x/a", OUTSIDE),
    ("/memories.git", OUTSIDE),
    ("//memories/a", OUTSIDE),
    (" /memories/a", OUTSIDE),
    ("./memories/a", OUTSIDE),
    ("~/memories/a", OUTSIDE),
    ("/tmp/../memories/a", OUTSIDE),
    ("file:///memories/a", OUTSIDE),
    ("C:/memories/a", OUTSIDE),
    # dot and dot-dot components, the root aliases among them
    ("/memories/.", DOT),
    ("/memories/./a", DOT),
    ("/memories/a/.", DOT),
    ("/memories/..", DOTDOT),
    ("/memories/../etc/passwd", DOTDOT),
    ("/memories/a/..", DOTDOT),
    ("/memories/a/../..", DOTDOT),
    ("/memories/a/../../etc", DOTDOT),
    ("/memories//..//x", DOTDOT),
    # backslashes
    ("/memories\\..\\etc", BACKSLASH),
    ("/memories/..\\x", BACKSLASH),
    ("/memories/a\\b", BACKSLASH),
    ("/memories/a\\", BACKSLASH),
    # percent-encoded traversal, single, double and deeper
    ("/memories/%2e%2e/etc", ENCODED),
    ("/memories/%2E%2E", ENCODED),
    ("/memories/%2e", ENCODED),
    ("/memories/.%2e/x", ENCODED),
    ("/memories/%252e%252e/etc", ENCODED),
    ("/memories/%25252e%25252e/x", ENCODED),
    ("/memories/%2525252e%2525252e/x", ENCODED),
    ("/memories/%2e%2e%2fetc", ENCODED_SEP),
    ("/memories/..%2f..%2fetc", ENCODED_SEP),
    ("/memories/a%2fb", ENCODED_SEP),
    ("/memories/a%2Fb", ENCODED_SEP),
    ("/memories/a%5cb", ENCODED_SEP),
    ("/memories/%252e%252e%252fetc", ENCODED_SEP),
    ("/memories/%255c..", ENCODED_SEP),
    # overlong UTF-8 (issue 10), IIS's %u form and encoded look-alikes: every encoded spelling
    # of ".", "/" and "\\" is one thing to a lenient decoder
    ("/memories/%c0%ae%c0%ae/etc", ENCODED),
    ("/memories/%C0%AE%C0%AE", ENCODED),
    ("/memories/%c0%ae", ENCODED),
    ("/memories/%e0%80%ae", ENCODED),
    ("/memories/%e0%80%ae%e0%80%ae", ENCODED),
    ("/memories/%f0%80%80%ae%f0%80%80%ae", ENCODED),
    ("/memories/.%c0%ae", ENCODED),
    ("/memories/%25c0%25ae%25c0%25ae/x", ENCODED),
    ("/memories/%u002e%u002e", ENCODED),
    ("/memories/%ef%bc%8e%ef%bc%8e", ENCODED),
    ("/memories/%e2%80%a5", ENCODED),
    ("/memories/a%c0%afb", ENCODED_SEP),
    ("/memories/a%e0%80%afb", ENCODED_SEP),
    ("/memories/a%c1%9cb", ENCODED_SEP),
    ("/memories/%c0%ae%c0%ae%c0%afetc", ENCODED_SEP),
    ("/memories/a%ef%bc%8fb", ENCODED_SEP),
    ("/memories/a%ef%bc%bcb", ENCODED_SEP),
    ("/memories/a%u002fb", ENCODED_SEP),
    ("/memories/a%u005cb", ENCODED_SEP),
    # characters whose NFKC form is a dot, dot-dot, slash or backslash
    ("/memories/\uff0e\uff0e/etc", LOOKALIKE),  # fullwidth full stops
    ("/memories/\uff0e", LOOKALIKE),
    ("/memories/\u2025", LOOKALIKE),  # two dot leader
    ("/memories/\u2024", LOOKALIKE),  # one dot leader
    ("/memories/\u2024\u2024", LOOKALIKE),
    ("/memories/\ufe52\ufe52", LOOKALIKE),  # small full stops
    ("/memories/a\uff0fb", LOOKALIKE),  # fullwidth solidus
    ("/memories/\uff0e\uff0e\uff0fetc", LOOKALIKE),
    ("/memories/a\uff3cb", LOOKALIKE),  # fullwidth reverse solidus
    ("/memories/a\ufe68b", LOOKALIKE),  # small reverse solidus
    # NUL and other control characters, line and paragraph separators
    ("/memories/a\x00b", CONTROL),
    ("/memories/a\x00", CONTROL),
    ("/memories/\x01", CONTROL),
    ("/memories/a\nb", CONTROL),
    ("/memories/a\r", CONTROL),
    ("/memories/a\tb", CONTROL),
    ("/memories/a\x1b[31m", CONTROL),
    ("/memories/a\x7fb", CONTROL),
    ("/memories/a\x85b", CONTROL),
    ("/memories/a\x9fb", CONTROL),
    ("/memories/a\u2028b", CONTROL),
    ("/memories/a\u2029b", CONTROL),
    # lone surrogates
    ("/memories/\ud800", SURROGATE),
    ("/memories/a\udfffb", SURROGATE),
    ("/memories/\udc80", SURROGATE),
    # .git in any case and disguise
    ("/memories/.git", GIT),
    ("/memories/.GIT", GIT),
    ("/memories/.Git/config", GIT),
    ("/memories/a/.git", GIT),
    ("/memories/a/.gIt/hooks/pre-commit", GIT),
    ("/memories/.git.", GIT),
    ("/memories/.git ", GIT),
    ("/memories/.git. .", GIT),
    ("/memories/.\uff47\uff49\uff54", GIT),  # fullwidth "git"
    ("/memories/\uff0egit", GIT),  # fullwidth dot
    # Windows drive letters and reserved device names (issue 5)
    ("/memories/C:", DRIVE),
    ("/memories/c:foo", DRIVE),
    ("/memories/a/Z:/x", DRIVE),
    ("/memories/\uff23:", DRIVE),  # fullwidth C
    ("/memories/CON", reserved("CON")),
    ("/memories/con", reserved("con")),
    ("/memories/con.txt", reserved("con.txt")),
    ("/memories/a/Con.md", reserved("Con.md")),
    ("/memories/NUL", reserved("NUL")),
    ("/memories/nul.tar.gz", reserved("nul.tar.gz")),
    ("/memories/aux", reserved("aux")),
    ("/memories/PRN ", reserved("PRN ")),
    ("/memories/COM1", reserved("COM1")),
    ("/memories/com9.log", reserved("com9.log")),
    ("/memories/lpt1", reserved("lpt1")),
    ("/memories/LPT9.md", reserved("LPT9.md")),
    ("/memories/com\u00b9", reserved("com\u00b9")),
    ("/memories/d/lpt\u00b3.txt", reserved("lpt\u00b3.txt")),
    # over-long components and paths
    ("/memories/" + "a" * 256, LONG_COMPONENT),
    ("/memories/" + "\u00e9" * 128, LONG_COMPONENT),
    ("/memories/" + "\U0001f600" * 64, LONG_COMPONENT),
    ("/memories" + "/aaaaaaa" * 128, LONG_PATH),
    ("/memories/" + "a" * 5000, LONG_PATH),
]


@pytest.mark.parametrize(("raw", "reason"), HOSTILE, ids=[repr(p)[:40] for p, _ in HOSTILE])
def test_parse_refuses(raw: str, reason: str) -> None:
    with pytest.raises(InvalidPath) as info:
        parse(raw)
    assert info.value.reason == reason
    assert info.value.path == raw
    assert str(info.value) == f"The path {shown(raw)} is not allowed: {reason}"


@pytest.mark.parametrize("raw", [None, 1, b"/memories/a", ["/memories/a"], MemoryPath(("a",))])
def test_parse_refuses_non_strings(raw: object) -> None:
    with pytest.raises(InvalidPath) as info:
        parse(raw)
    assert info.value.reason == f"a path must be a string, not {type(raw).__name__}"


def test_every_hostile_path_is_refused_by_every_command(tmp_path: Path, key: str) -> None:
    tool = GitMemoryTool(tmp_path / "store.git", key=key, session="paths")
    tool.call({"command": "create", "path": "/memories/ok.md", "file_text": "ok\n"})
    tool.call({"command": "create", "path": "/memories/d/in.md", "file_text": "in\n"})
    head = tool.store.head()
    before = (tool.store.files(), tool.store.directories())
    for raw, reason in HOSTILE:
        message = f"Error: The path {shown(raw)} is not allowed: {reason}"
        inputs: list[dict[str, Any]] = [
            {"command": "view", "path": raw},
            {"command": "view", "path": raw, "view_range": [1, 2]},
            {"command": "create", "path": raw, "file_text": "pwned"},
            {"command": "str_replace", "path": raw, "old_str": "a", "new_str": "b"},
            {"command": "insert", "path": raw, "insert_line": 0, "insert_text": "pwned"},
            {"command": "delete", "path": raw},
            {"command": "rename", "old_path": raw, "new_path": "/memories/new.md"},
            {"command": "rename", "old_path": "/memories/ok.md", "new_path": raw},
            {"command": "rename", "old_path": "/memories/d", "new_path": raw},
        ]
        for data in inputs:
            with pytest.raises(ToolError) as info:
                tool.call(data)
            assert info.value.content == message, data
        assert tool.store.head() == head, raw
    assert (tool.store.files(), tool.store.directories()) == before
    assert len(list(tool.store.log())) == 2


# -- normalization -------------------------------------------------------------------------------


def test_two_spellings_are_one_file(tmp_path: Path, key: str) -> None:
    composed, decomposed = "/memories/caf\u00e9.md", "/memories/cafe\u0301.md"
    assert parse(composed) == parse(decomposed) == MemoryPath(("caf\u00e9.md",))
    tool = GitMemoryTool(tmp_path / "store.git", key=key, session="nfc")
    tool.call({"command": "create", "path": decomposed, "file_text": "one\n"})
    with pytest.raises(ToolError) as info:
        tool.call({"command": "create", "path": composed, "file_text": "two\n"})
    assert info.value.content == f"Error: File {composed} already exists"
    assert tool.store.files() == {composed: "one\n"}
    assert tool.call({"command": "view", "path": composed}) == (
        f"Here's the content of {composed} with line numbers:\n     1\tone\n     2\t"
    )
    tool.call({"command": "str_replace", "path": composed, "old_str": "one", "new_str": "uno"})
    assert tool.store.files() == {composed: "uno\n"}
    # Directories too: a file created under either spelling lands in one directory.
    tool.call({"command": "create", "path": "/memories/re\u0301sume\u0301/a", "file_text": ""})
    tool.call({"command": "create", "path": "/memories/r\u00e9sum\u00e9/b", "file_text": ""})
    assert tool.store.directories() == ["/memories/r\u00e9sum\u00e9"]
    listing = tool.call({"command": "view", "path": "/memories"})
    assert listing.endswith(
        f"4B\t{composed}\n4K\t/memories/r\u00e9sum\u00e9/\n"
        "0B\t/memories/r\u00e9sum\u00e9/a\n0B\t/memories/r\u00e9sum\u00e9/b"
    )
    with pytest.raises(ToolError) as info:
        tool.call({"command": "rename", "old_path": composed, "new_path": decomposed})
    assert info.value.content == f"Error: The destination {decomposed} already exists"


def test_compatibility_forms_stay_distinct() -> None:
    # NFC, not NFKC, names the file: the ligature and "fi" are two names (as on every disk).
    assert parse("/memories/\ufb01le") != parse("/memories/file")
    assert parse("/memories/\ufb01le").parts == ("\ufb01le",)


# -- limits ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("component", "ok"),
    [
        ("a" * 255, True),
        ("a" * 256, False),
        ("\u00e9" * 127 + "a", True),  # 255 bytes
        ("\u00e9" * 128, False),  # 256 bytes
        ("\u20ac" * 85, True),  # 255 bytes of 3-byte characters
        ("\u20ac" * 85 + "a", False),
        ("\U0001f600" * 63 + "abc", True),  # 255 bytes
        ("\U0001f600" * 64, False),
        # The limit counts the stored (NFC) name: 100 decomposed é are 300 bytes as given,
        # 200 as stored.
        ("e\u0301" * 100, True),
        # U+0958 has no composed form: NFC decomposes it, from 3 bytes to 6.
        ("\u0958" * 42, True),  # 252 bytes stored
        ("\u0958" * 43, False),  # 129 bytes given, 258 stored
    ],
)
def test_component_limit(component: str, ok: bool) -> None:
    raw = "/memories/d/" + component
    if ok:
        assert parse(raw).parts == ("d", unicodedata.normalize("NFC", component))
    else:
        with pytest.raises(InvalidPath) as info:
            parse(raw)
        assert info.value.reason == LONG_COMPONENT


def path_of_bytes(total: int) -> str:
    """A canonical path of exactly ``total`` UTF-8 bytes, in components of up to 200 bytes."""
    rest = total - len("/memories")
    parts = []
    while rest > 0:
        size = min(200, rest - 1)
        assert size > 0
        parts.append("p" * size)
        rest -= size + 1
    path = "/memories/" + "/".join(parts)
    assert len(path.encode()) == total
    return path


def test_path_limit_boundary(tmp_path: Path, key: str) -> None:
    ok, too_long = path_of_bytes(MAX_PATH_BYTES), path_of_bytes(MAX_PATH_BYTES + 1)
    assert str(parse(ok)) == ok
    with pytest.raises(InvalidPath) as info:
        parse(too_long)
    assert info.value.reason == LONG_PATH
    # The stored form counts: given short, stored over the limit.
    decomposing = "/memories" + ("/" + "\u0958" * 42) * 7
    assert len(decomposing.encode()) == 898
    with pytest.raises(InvalidPath) as info:
        parse(decomposing)
    assert info.value.reason == LONG_PATH
    tool = GitMemoryTool(tmp_path / "store.git", key=key, session="limits")
    assert tool.call({"command": "create", "path": ok, "file_text": "deep"}) == (
        f"File created successfully at: {ok}"
    )
    assert tool.store.files() == {ok: "deep"}
    with pytest.raises(ToolError):
        tool.call({"command": "rename", "old_path": ok, "new_path": ok + "x"})
    assert len(list(tool.store.log())) == 1


# -- accepted spellings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parts"),
    [
        ("/memories", ()),
        ("/memories/", ()),
        ("/memories//", ()),
        ("/memories/a", ("a",)),
        ("/memories/a/", ("a",)),
        ("/memories//a///b", ("a", "b")),
        ("/memories/.hidden", (".hidden",)),
        ("/memories/...", ("...",)),
        ("/memories/..a/a..", ("..a", "a..")),
        ("/memories/.gitignore", (".gitignore",)),
        ("/memories/git", ("git",)),
        ("/memories/a%41", ("a%41",)),
        ("/memories/100%", ("100%",)),
        ("/memories/%zz", ("%zz",)),
        ("/memories/a b/c d.md", ("a b", "c d.md")),
        ("/memories/console.md", ("console.md",)),
        ("/memories/com10", ("com10",)),
        ("/memories/notes:2024", ("notes:2024",)),
        ("/memories/\u4e2d\u6587", ("\u4e2d\u6587",)),
        # percent signs that decode to nothing like a separator or a dot
        ("/memories/%c3%a9", ("%c3%a9",)),
        ("/memories/%c0", ("%c0",)),
        ("/memories/%c0%c0", ("%c0%c0",)),
        ("/memories/%e0%80", ("%e0%80",)),
        ("/memories/%c0%80", ("%c0%80",)),
        ("/memories/%u00e9", ("%u00e9",)),
    ],
)
def test_parse_accepts(raw: str, parts: tuple[str, ...]) -> None:
    assert parse(raw) == MemoryPath(parts)


# -- the property ------------------------------------------------------------------------------

PIECES = [
    "/",
    "//",
    ".",
    "..",
    "a",
    "b.md",
    "%",
    "%2e",
    "%2f",
    "%25",
    "%5c",
    "2e",
    "\\",
    ":",
    "C",
    " ",
    "git",
    "GIT",
    "con",
    "\u00e9",
    "e\u0301",
    "\u0958",
    "\ufb01",
    "\uff0e",
    "\uff0f",
    "\u2025",
    "\u2024",
    "\x00",
    "\n",
    "\x85",
    "\u2028",
    "\ud800",
    "\u200b",
    "\U0001f600",
    "a" * 120,
    "\u0958" * 20,
    "\u00e9" * 60,
]
raw_paths = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=24).map(lambda ps: "/memories" + "".join(ps)),
    st.lists(st.sampled_from(PIECES), max_size=24).map(lambda ps: "/memories/" + "".join(ps)),
    st.text(max_size=40).map(lambda t: "/memories/" + t),
    st.text(max_size=20),
)


def assert_canonical(path: MemoryPath) -> None:
    text = str(path)
    assert text == "/memories" or text.startswith("/memories/")
    assert "\\" not in text
    assert len(text.encode("utf-8")) <= MAX_PATH_BYTES
    for part in path.parts:
        assert part not in ("", ".", "..")
        assert "/" not in part
        assert part == unicodedata.normalize("NFC", part)
        assert len(part.encode("utf-8")) <= MAX_COMPONENT_BYTES
        folded = unicodedata.normalize("NFKC", part)
        assert folded not in (".", "..") and "/" not in folded and "\\" not in folded
        assert folded.casefold().rstrip(". ") != ".git"
        for ch in part:
            assert unicodedata.category(ch) not in ("Cc", "Cs", "Zl", "Zp"), repr(ch)


@settings(max_examples=400, deadline=None)
@given(raw_paths)
@example("/memories" + ("/" + "\u0958" * 42) * 7)
@example("/memories/" + "e\u0301" * 200)
@example("/memories/%2e%2e")
def test_accepted_paths_are_canonical_and_round_trip(raw: str) -> None:
    try:
        path = parse(raw)
    except InvalidPath:
        return
    assert_canonical(path)
    assert parse(str(path)) == path
    assert str(parse(str(path))) == str(path)


# -- depth (issue 14: one deep path must not brick the store) ----------------------------------

DEEP_SCRIPT = r"""
import json, os, sys
import pygit2
from click.testing import CliRunner
from gitmem import GitMemoryTool
from gitmem.cli import main

repo, deep_dir, deep_file, out = sys.argv[1:5]
# About depth, not durability: each write of a deep path stores hundreds of trees.
os.fsync = lambda fd: None
pygit2.settings.enable_fsync_gitdir(False)
tool = GitMemoryTool(repo, session="fresh")
steps = {}
def call(name, **data):
    steps[name] = tool.call(data)
call("create", command="create", path="/memories/unrelated.md", file_text="u\n")
call("view_root", command="view", path="/memories")
call("view_deep", command="view", path=deep_file)
call("replace", command="str_replace", path=deep_file, old_str="deep", new_str="DEEP")
call("insert", command="insert", path=deep_file, insert_line=0, insert_text="top")
runner = CliRunner()
for name, args in {
    "log": ["log", "--stat"],
    "verify": ["verify"],
    "export": ["export", out],
    "blame": ["blame", deep_file],
    "show": ["show"],
}.items():
    result = runner.invoke(main, ["--repo", repo, *args])
    steps[name] = [result.exit_code, result.output[-200:]]
call("rename", command="rename", old_path=deep_dir, new_path="/memories/moved")
call("delete", command="delete", path="/memories/moved")
print(json.dumps(steps))
"""


def deep_path(levels: int) -> str:
    """A file ``levels`` components deep (the file included), in one-letter directories."""
    return "/memories" + "/d" * (levels - 1) + "/f.md"


@pytest.mark.usefixtures("fast_git")
def test_depth_bound(tool: GitMemoryTool) -> None:
    at_bound, over = deep_path(MAX_DEPTH), deep_path(MAX_DEPTH + 1)
    assert tool.call({"command": "create", "path": at_bound, "file_text": "ok\n"}) == (
        f"File created successfully at: {at_bound}"
    )
    head = tool.store.head()
    with pytest.raises(ToolError) as info:
        tool.call({"command": "create", "path": over, "file_text": "no\n"})
    assert info.value.content == (
        f"Error: The path {over} is not allowed: it is {MAX_DEPTH + 1} levels deep; "
        f"new paths may have {MAX_DEPTH}"
    )
    # A rename may not push what it moves past the bound, nor make a new name past it.
    tool.call({"command": "create", "path": "/memories/x/y/z.md", "file_text": "z\n"})
    head = tool.store.head()
    for new in ("/memories" + "/d" * (MAX_DEPTH - 2) + "/x", deep_path(MAX_DEPTH + 1)):
        with pytest.raises(ToolError) as info:
            tool.call({"command": "rename", "old_path": "/memories/x", "new_path": new})
        assert "levels deep; new paths may have 64" in str(info.value.content)
    assert tool.store.head() == head
    # Moving the deep tree shallower, or as deep, is fine.
    tool.call({"command": "rename", "old_path": "/memories/d/d", "new_path": "/memories/e"})
    assert tool.store.kind(parse(deep_path(MAX_DEPTH).replace("/d/d", "/e", 1))) == "f"


def fewer_frames(extra: int) -> int:
    """A recursion limit ``extra`` frames above the caller's depth (what a recursion needs)."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back  # type: ignore[assignment]
    return depth + extra


def old_deep_store(repo: Path, key: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A store holding a path at the bound and one 500 levels deep (made before the bound)."""
    tool = GitMemoryTool(repo, key=key, session="old")
    tool.call({"command": "create", "path": deep_path(MAX_DEPTH), "file_text": "at bound\n"})
    with monkeypatch.context() as patch:
        patch.setattr(gitmem_paths, "MAX_DEPTH", 10_000)
        deep = "/memories/old" + "/a" * 498 + "/f.md"
        assert len(deep.encode()) <= MAX_PATH_BYTES
        tool.call({"command": "create", "path": deep, "file_text": "deep\n"})
    return "/memories/old", deep


@pytest.mark.usefixtures("fast_git")
def test_a_deep_store_is_walked_without_recursion(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep_dir, deep = old_deep_store(tmp_path / "s.git", key, monkeypatch)
    # A fresh store (no caches), with Python's stack held well below the tree's depth: any walk
    # that recursed per level would raise RecursionError.
    fresh = gitmem.MemoryStore.open(tmp_path / "s.git", key, session="fresh")
    tool = GitMemoryTool(tmp_path / "s.git", key=key, session="fresh")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(fewer_frames(250))
    try:
        assert fresh.store_bytes() == len("at bound\ndeep\n")
        assert tool.store.create(parse("/memories/new.md"), "n\n")
        assert fresh.verify().ok
        assert deep in fresh.files()
        assert fresh.listing(parse(deep_dir), depth=1000)[-1].relative.endswith("f.md")
        exported = history.export(fresh, tmp_path / "out")
        assert exported.files == 3
        assert (tmp_path / "out").joinpath(*parse(deep).parts).read_text() == "deep\n"
        fresh.rename(parse(deep_dir), parse("/memories/moved"))
        assert fresh.read_text(parse(deep.replace(deep_dir, "/memories/moved"))) == "deep\n"
        changes = history.diff(fresh, "HEAD~1", "HEAD")
        assert [c.status for c in changes] == ["renamed"]
        fresh.restore("HEAD~1")
        fresh.delete(parse(deep_dir))
        assert set(fresh.files()) == {deep_path(MAX_DEPTH), "/memories/new.md"}
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.usefixtures("fast_git")
def test_a_deep_store_stays_usable_from_a_fresh_process(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "s.git"
    deep_dir, deep = old_deep_store(repo, key, monkeypatch)
    out = tmp_path / "export"
    script = [sys.executable, "-c", DEEP_SCRIPT, str(repo), deep_dir, deep, str(out)]
    done = subprocess.run(
        script, env={**os.environ, "GITMEM_KEY": key}, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    steps = json.loads(done.stdout)
    assert steps["create"] == "File created successfully at: /memories/unrelated.md"
    assert steps["view_root"].endswith("4K\t/memories/old/a/\n2B\t/memories/unrelated.md")
    assert steps["view_deep"].endswith("     1\tdeep\n     2\t")
    assert steps["replace"].startswith("The memory file has been edited.")
    assert steps["insert"] == f"The file {deep} has been edited."
    for name in ("log", "verify", "export", "blame", "show"):
        assert steps[name][0] == 0, (name, steps[name])
    assert (out.joinpath(*parse(deep).parts)).read_text() == "top\nDEEP\n"
    assert steps["rename"] == f"Successfully renamed {deep_dir} to /memories/moved"
    assert steps["delete"] == "Successfully deleted /memories/moved"


# -- new names: invisible, format and confusable characters, trailing dots, case collisions ----

INVISIBLE = "it contains the invisible or formatting character"
TRAILING = "a name may not end with a dot or a space (Windows drops them)"
NEW_NAMES_REFUSED: list[tuple[str, str]] = [
    ("a\u200b.md", f"{INVISIBLE} U+200B ZERO WIDTH SPACE"),
    ("\ufeffa.md", f"{INVISIBLE} U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    ("a\u200e.md", f"{INVISIBLE} U+200E LEFT-TO-RIGHT MARK"),
    ("a\u200f.md", f"{INVISIBLE} U+200F RIGHT-TO-LEFT MARK"),
    ("a\u061c.md", f"{INVISIBLE} U+061C ARABIC LETTER MARK"),
    ("soft\u00adhyphen", f"{INVISIBLE} U+00AD SOFT HYPHEN"),
    ("a\u034fb", f"{INVISIBLE} U+034F COMBINING GRAPHEME JOINER"),
    ("a\U000e0041b", f"{INVISIBLE} U+E0041 TAG LATIN CAPITAL LETTER A"),
    ("\U0001f3f4\U000e0067\U000e0062", f"{INVISIBLE} U+E0067 TAG LATIN SMALL LETTER G"),
    ("\u3164", f"{INVISIBLE} U+3164 HANGUL FILLER"),
    ("a\u115fb", f"{INVISIBLE} U+115F HANGUL CHOSEONG FILLER"),
    ("\uffa0x", f"{INVISIBLE} U+FFA0 HALFWIDTH HANGUL FILLER"),
    ("a\u2060b", f"{INVISIBLE} U+2060 WORD JOINER"),
    ("a\u2064b", f"{INVISIBLE} U+2064 INVISIBLE PLUS"),
    ("a\u180eb", f"{INVISIBLE} U+180E MONGOLIAN VOWEL SEPARATOR"),
    ("a\u00adb\u00ad", f"{INVISIBLE} U+00AD SOFT HYPHEN"),
    ("\ufe0fa", f"{INVISIBLE} U+FE0F VARIATION SELECTOR-16"),
    ("a\u200d", f"{INVISIBLE} U+200D ZERO WIDTH JOINER"),
    ("a\u200db", f"{INVISIBLE} U+200D ZERO WIDTH JOINER"),
    ("a\u200cb", f"{INVISIBLE} U+200C ZERO WIDTH NON-JOINER"),
    ("\U0001d173x", f"{INVISIBLE} U+1D173 MUSICAL SYMBOL BEGIN BEAM"),
    ("a\u0600", f"{INVISIBLE} U+0600 ARABIC NUMBER SIGN"),
    ("notes.", TRAILING),
    ("notes.md.", TRAILING),
    ("...", TRAILING),
    ("notes ", TRAILING),
    ("notes\u3000", TRAILING),
    ("notes\u00a0", TRAILING),
    ("a\u2215b", "it contains U+2215 DIVISION SLASH, which looks like a slash"),
    ("1\u20442", "it contains U+2044 FRACTION SLASH, which looks like a slash"),
    ("a\u29f9b", "it contains U+29F9 BIG REVERSE SOLIDUS, which looks like a slash"),
]
NEW_NAMES_ACCEPTED = [
    "\U0001f468\u200d\U0001f469\u200d\U0001f467.md",  # a family: ZWJ between emoji
    "\U0001f469\U0001f3fd\u200d\U0001f4bb",  # skin tone, then ZWJ
    "\u2764\ufe0f.md",  # a variation selector after its base
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f.md",  # flag
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.md",  # Persian, ZWNJ between letters
    "\u0915\u094d\u200d\u0937.md",  # Devanagari: ZWJ after a virama
    "\u0d28\u0d4d\u200c.md",  # Malayalam: ZWNJ after a virama
    "..a",
    ".hidden",
    "a.b.md",
    "x y.md",
]


@pytest.mark.parametrize(
    ("name", "reason"), NEW_NAMES_REFUSED, ids=[ascii(n) for n, _ in NEW_NAMES_REFUSED]
)
def test_new_names_are_refused(tool: GitMemoryTool, name: str, reason: str) -> None:
    tool.call({"command": "create", "path": "/memories/ok.md", "file_text": "ok\n"})
    head = tool.store.head()
    for where in (f"/memories/{name}", f"/memories/{name}/inner.md"):
        shown = printable(str(parse(where).parent if where.endswith("inner.md") else parse(where)))
        message = f"Error: The path {shown} is not allowed: {reason}"
        with pytest.raises(ToolError) as info:
            tool.call({"command": "create", "path": where, "file_text": "x"})
        assert info.value.content == message
        with pytest.raises(ToolError) as info:
            tool.call({"command": "rename", "old_path": "/memories/ok.md", "new_path": where})
        assert info.value.content == message
    assert tool.store.head() == head


@pytest.mark.parametrize("name", NEW_NAMES_ACCEPTED, ids=ascii)
def test_names_that_need_a_joiner_are_accepted(tool: GitMemoryTool, name: str) -> None:
    path = f"/memories/{name}"
    assert gitmem_paths.new_name_problem(parse(path).name) is None
    assert tool.call({"command": "create", "path": path, "file_text": "x"}) == (
        f"File created successfully at: {path}"
    )


def _full_fold(name: str) -> str:
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", name).casefold())


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)))
@example("".join(map(chr, range(0x80))))
def test_an_ascii_name_folds_as_the_full_rule_folds_it(name: str) -> None:
    # fold_name lower-cases ASCII names without normalizing: the key must be the full rule's.
    assert gitmem_paths.fold_name(name) == _full_fold(name)


@given(st.text(max_size=8))
@example("\u212a.md")  # KELVIN SIGN: folds to the ASCII "k.md"
@example("STRASSE\u00df")
def test_names_fold_by_the_full_rule(name: str) -> None:
    assert gitmem_paths.fold_name(name) == _full_fold(name)


def test_names_differing_only_in_case_or_form_are_refused(tool: GitMemoryTool) -> None:
    tool.call({"command": "create", "path": "/memories/notes/a.md", "file_text": "a\n"})
    tool.call({"command": "create", "path": "/memories/caf\u00e9.md", "file_text": "c\n"})
    head = tool.store.head()
    for path, other in [
        ("/memories/notes/A.md", "a.md"),
        ("/memories/NOTES/b.md", "notes"),
        ("/memories/Notes", "notes"),
        ("/memories/CAF\u00c9.md", "caf\u00e9.md"),
        ("/memories/CAFE\u0301.md", "caf\u00e9.md"),
        ("/memories/notes/\u212a.md", None),  # KELVIN SIGN: not a collision of "a.md"
    ]:
        data = {"command": "create", "path": path, "file_text": "x"}
        if other is None:
            tool.call(data)
            continue
        with pytest.raises(ToolError) as info:
            tool.call(data)
        assert f"it differs from the existing '{other}' only in case or Unicode form" in str(
            info.value.content
        )
    # Renaming a name to another case of itself is fine: the old name goes.
    tool.call(
        {
            "command": "rename",
            "old_path": "/memories/notes/a.md",
            "new_path": "/memories/notes/A.md",
        }
    )
    assert "/memories/notes/A.md" in tool.store.files()
    assert len(list(tool.store.log())) == len(list(tool.store.log(head))) + 2


def test_a_name_that_looks_like_a_siblings_is_refused(tool: GitMemoryTool) -> None:
    """Unicode TS #39: a letter of another script standing in for one of this one (a Cyrillic
    'а' for a Latin 'a') makes a name that reads as its sibling's."""
    for path in ("/memories/a.md", "/memories/Notes.md", "/memories/dir/x.md"):
        tool.call({"command": "create", "path": path, "file_text": "x\n"})
    head = tool.store.head()
    for path, refused, other in [
        ("/memories/\u0430.md", "/memories/\u0430.md", "a.md"),  # CYRILLIC SMALL LETTER A
        # CYRILLIC SMALL LETTER O, in another case than the sibling's
        ("/memories/n\u043etes.md", "/memories/n\u043etes.md", "Notes.md"),
        ("/memories/N\u03bftes.md", "/memories/N\u03bftes.md", "Notes.md"),  # GREEK OMICRON
        ("/memories/\u0501ir/y.md", "/memories/\u0501ir", "dir"),  # CYRILLIC KOMI DE
    ]:
        with pytest.raises(ToolError) as info:
            tool.call({"command": "create", "path": path, "file_text": "y\n"})
        assert str(info.value.content) == (
            f"Error: The path {refused} is not allowed: it looks the same as the existing "
            f"'{other}': they differ only in look-alike characters (Unicode's confusables), so "
            "one would be taken for the other"
        )
    with pytest.raises(ToolError, match=r"it looks the same as the existing 'a\.md'"):
        tool.call(
            {
                "command": "rename",
                "old_path": "/memories/dir/x.md",
                "new_path": "/memories/\u0430.md",
            }
        )
    assert tool.store.head() == head
    # A name in another script alone is fine, and so are two ASCII names that TS #39 would call
    # look-alikes ("rn" and "m", "l" and "1"): the rule is for mixed scripts.
    for path in (
        "/memories/\u043f\u0440\u0438\u0432\u0435\u0442.md",
        "/memories/m.md",
        "/memories/rn.md",
        "/memories/l.md",
        "/memories/1.md",
        "/memories/dir/\u0430.md",  # another directory
    ):
        tool.call({"command": "create", "path": path, "file_text": "z\n"})
    # Renaming a name to a look-alike of itself is allowed, as to its own case.
    tool.call(
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/\u0430.md"}
    )


@given(st.text(alphabet="aAmMnNrRlLiI01|`'\"%o0O.-_ ", min_size=1, max_size=12))
@example('r"n')
@example("rm`'\"")
def test_an_ascii_names_twin_key_is_its_skeletons(name: str) -> None:
    """The byte-level key of an ASCII name is the one its skeleton gives (so that it meets
    the keys of non-ASCII names)."""
    folded = gitmem_paths.fold_name(name)
    expected = gitmem_paths._collapse(gitmem_paths.skeleton(folded))
    assert gitmem_paths.twin_key(name) == expected


def test_the_skeleton_is_unicode_ts_39s() -> None:
    assert gitmem_paths.skeleton("\u0430") == "a"
    assert gitmem_paths.skeleton("m") == "rn"  # the prototype of "m" is "rn"
    assert gitmem_paths.skeleton("\u00e9") == "e\u0301"  # NFD around the mapping
    assert gitmem_paths.skeleton("\u0410") == "A"
    assert gitmem_paths.twin_key("\u0410pple") == gitmem_paths.twin_key("apple")
    # The ASCII characters' skeletons kept in the code are the data file's.
    assert dict(gitmem_paths._ASCII_PROTOTYPES) == {
        chr(code): gitmem_paths.skeleton(chr(code))
        for code in range(128)
        if gitmem_paths.skeleton(chr(code)) != chr(code)
    }


@pytest.mark.usefixtures("fast_git")
def test_an_older_store_with_such_names_stays_usable(
    tool: GitMemoryTool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    names = ["a\u200b.md", "notes.", "A.md", "a.md"]
    with monkeypatch.context() as patch:
        patch.setattr(gitmem_paths, "new_name_problem", lambda name: None)
        patch.setattr(gitmem_paths, "fold_name", lambda name: name)
        for name in names:
            tool.call({"command": "create", "path": f"/memories/{name}", "file_text": name})
        tool.call({"command": "create", "path": "/memories/d\u200e/in.md", "file_text": "in"})
    listing = tool.call({"command": "view", "path": "/memories"})
    assert "/memories/a\u200b.md" in listing and "/memories/notes." in listing
    for name in names:
        path = f"/memories/{name}"
        assert tool.call({"command": "view", "path": path}).endswith(f"1\t{name}")
        tool.call({"command": "str_replace", "path": path, "old_str": name, "new_str": "x"})
        tool.call({"command": "insert", "path": path, "insert_line": 0, "insert_text": "y"})
    # An export refuses the case pair before writing anything.
    out = tmp_path / "out"
    with pytest.raises(gitmem.UsageError) as info:
        history.export(tool.store, out)
    assert "1 pair(s) of names differ only in case or Unicode form" in str(info.value)
    assert "/memories/A.md and /memories/a.md" in str(info.value)
    assert not out.exists()
    # Renamed away or deleted, the store exports again.
    tool.call(
        {"command": "rename", "old_path": "/memories/a\u200b.md", "new_path": "/memories/b.md"}
    )
    tool.call({"command": "rename", "old_path": "/memories/A.md", "new_path": "/memories/c.md"})
    tool.call({"command": "rename", "old_path": "/memories/d\u200e", "new_path": "/memories/d"})
    tool.call({"command": "delete", "path": "/memories/notes."})
    assert sorted(tool.store.files()) == [
        "/memories/a.md",
        "/memories/b.md",
        "/memories/c.md",
        "/memories/d/in.md",
    ]
    assert history.export(tool.store, out).files == 4


def test_export_never_overwrites_a_name_it_wrote(tool: GitMemoryTool, tmp_path: Path) -> None:
    # Two names the file system makes one file (a hard link stands in for a folding rule
    # gitmem's check does not know): the second is refused, the first keeps its content.
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "one"})
    tool.call({"command": "create", "path": "/memories/b.md", "file_text": "two"})
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.md").write_text("old")
    os.link(out / "a.md", out / "b.md")
    with pytest.raises(gitmem.UsageError) as info:
        history.export(tool.store, out, force=True)
    assert str(info.value) == (
        "cannot export /memories/b.md: this file system makes it the same file as "
        f"/memories/a.md (at {out / 'b.md'}); the export stopped there, nothing was overwritten"
    )
    assert (out / "a.md").read_text() == "one"


def test_import_refuses_new_names_like_create(tool: GitMemoryTool, tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "deep").mkdir(parents=True)
    for name in ("a.md", "A.md", "b\u200b.md", "c.md.", "ok.md"):
        (source / name).write_text("x")
    head = tool.store.head()
    with pytest.raises(history.ImportRefused) as info:
        history.import_(tool.store, source)
    assert sorted(info.value.problems) == [
        "/memories/a.md: it differs from the existing 'A.md' only in case or Unicode form; the "
        "two would be one file on Windows and macOS",
        "/memories/b\u200b.md: it contains the invisible or formatting character U+200B ZERO "
        "WIDTH SPACE",
        f"/memories/c.md.: {TRAILING}",
    ]
    assert tool.store.head() == head


def test_ascii_fast_paths_agree_with_the_per_character_rules() -> None:
    """ASCII paths and names skip the per-character Unicode checks: the result is the same."""
    for code in range(128):
        ch = chr(code)
        raw = f"/memories/a{ch}b"
        try:
            gitmem_paths.parse(raw)
            refused = False
        except InvalidPath as exc:
            refused = "control character" in str(exc)
        assert refused == (code < 0x20 or code == 0x7F), code
        assert gitmem_paths.new_name_problem(f"a{ch}b") is None or ch in "./\\", code
        per_character = any(
            c in gitmem_paths._SLASH_LOOKALIKES or gitmem_paths._invisible(c) for c in f"a{ch}b"
        )
        assert not per_character, code
        # Why components and paths of ASCII skip NFKC and NFC: they are their own forms.
        assert unicodedata.normalize("NFKC", ch) == ch == unicodedata.normalize("NFC", ch)
