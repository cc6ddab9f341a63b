"""Hostile paths: every class issue 2 names (and issue 5's Windows names and wrong prefixes) is
refused by ``gitmem.paths.parse`` and, through the tool, by every command with a ``ToolError``
and no commit. Plus NFC normalization, the byte limits at their exact boundaries, and a
property: whatever ``parse`` accepts is canonical and parses again as itself.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gitmem import GitMemoryTool, InvalidPath, MemoryPath
from gitmem.errors import printable
from gitmem.paths import MAX_COMPONENT_BYTES, MAX_PATH_BYTES, parse

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
    assert str(info.value) == f"The path {printable(raw)} is not allowed: {reason}"


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
        message = f"Error: The path {printable(raw)} is not allowed: {reason}"
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
