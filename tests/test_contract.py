"""Every row of the memory-tool contract (``docs/memory-tool.md``) with its exact text.

Each case runs on the sync tool and on the async tool. Every successful mutation must be exactly
one commit; ``view`` and every refused command must leave HEAD where it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.lib.tools import ToolError

import gitmem
from gitmem import AsyncGitMemoryTool, GitMemoryTool, MemoryStore
from gitmem.paths import parse
from gitmem.tool import COMMAND_FIELDS

Call = Callable[[Any], str]

READ_HEADER = "Here's the content of {} with line numbers:\n"
DIR_HEADER = (
    "Here're the files and directories up to 2 levels deep in {}, "
    "excluding hidden items and node_modules:\n"
)
SNIPPET_HEADER = (
    "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
)


class Harness:
    """One tool (sync or async) behind a plain ``call``, with commit bookkeeping."""

    def __init__(self, call: Call, store: MemoryStore) -> None:
        self.call = call
        self.store = store

    def commits(self) -> int:
        return len(list(self.store.log()))

    def ok(self, data: dict[str, Any]) -> str:
        """Run a command that must succeed; a mutation must add exactly one commit."""
        before_head, before = self.store.head(), self.commits()
        out = self.call(data)
        mutates = data["command"] != "view"
        assert self.commits() == before + (1 if mutates else 0)
        if not mutates:
            assert self.store.head() == before_head
        return out

    def refused(self, data: Any) -> str:
        """Run a command that must fail with a ToolError and make no commit."""
        head, before = self.store.head(), self.commits()
        with pytest.raises(ToolError) as info:
            self.call(data)
        assert self.store.head() == head
        assert self.commits() == before
        content = info.value.content
        assert isinstance(content, str)
        return content

    def create(self, path: str, text: str) -> None:
        assert self.ok({"command": "create", "path": path, "file_text": text}) == (
            f"File created successfully at: {path}"
        )

    def view(self, path: str, view_range: list[int] | None = None) -> str:
        data: dict[str, Any] = {"command": "view", "path": path}
        if view_range is not None:
            data["view_range"] = view_range
        return self.ok(data)


@pytest.fixture(params=["sync", "async"])
def h(request: pytest.FixtureRequest, repo_path: Path, key: str) -> Iterator[Harness]:
    """A harness over a fresh store, once with GitMemoryTool and once with AsyncGitMemoryTool."""
    if request.param == "sync":
        tool = GitMemoryTool(repo_path, key=key, session="contract")
        yield Harness(tool.call, tool.store)
    else:
        atool = AsyncGitMemoryTool(repo_path, key=key, session="contract")

        def call(data: Any) -> str:
            return anyio.run(atool.call, data)

        yield Harness(call, atool.store)


def numbered(*lines: str, first: int = 1) -> str:
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first))


# -- view ----------------------------------------------------------------------------------


def test_view_empty_store(h: Harness) -> None:
    assert h.view("/memories") == DIR_HEADER.format("/memories") + "4K\t/memories"
    assert h.commits() == 0


def test_view_directory_listing(h: Harness) -> None:
    h.create("/memories/notes.md", "hello\n")
    h.create("/memories/proj/todo.md", "x" * 5632)
    h.create("/memories/proj/sub/deep.md", "three levels down\n")
    h.create("/memories/proj/sub/deeper/d.md", "four\n")
    # Exactly the default 1 MiB file limit; "1.2M" style sizes are checked in
    # test_sizes_format_like_the_reference, as files that large are refused by default.
    h.create("/memories/big.log", "y" * 1048576)
    h.create("/memories/B.md", "")
    h.create("/memories/a-b", "12345")
    h.create("/memories/.hidden", "secret")
    h.create("/memories/.hdir/inside.md", "no")
    h.create("/memories/proj/.private", "no")
    h.create("/memories/node_modules/pkg/index.js", "no")
    h.create("/memories/proj/node_modules/x.js", "no")
    assert h.view("/memories") == DIR_HEADER.format("/memories") + "\n".join(
        [
            "4K\t/memories",
            "0B\t/memories/B.md",
            "5B\t/memories/a-b",
            "1M\t/memories/big.log",
            "6B\t/memories/notes.md",
            "4K\t/memories/proj/",
            "4K\t/memories/proj/sub/",
            "5.5K\t/memories/proj/todo.md",
        ]
    )
    # Two levels below the viewed directory, whichever directory it is.
    assert h.view("/memories/proj") == DIR_HEADER.format("/memories/proj") + "\n".join(
        [
            "4K\t/memories/proj",
            "4K\t/memories/proj/sub/",
            "18B\t/memories/proj/sub/deep.md",
            "4K\t/memories/proj/sub/deeper/",
            "5.5K\t/memories/proj/todo.md",
        ]
    )
    # A hidden directory can still be viewed by name.
    assert h.view("/memories/.hdir") == DIR_HEADER.format("/memories/.hdir") + "\n".join(
        ["4K\t/memories/.hdir", "2B\t/memories/.hdir/inside.md"]
    )


@pytest.mark.parametrize(
    "size",
    [0, 1, 1023, 1024, 1025, 1536, 5632, 10239, 10240, 1048575, 1048576, 1258291, 2**30, 2**42],
)
def test_sizes_format_like_the_reference(size: int) -> None:
    from anthropic.lib.tools._beta_builtin_memory_tool import _format_file_size

    from gitmem.render import format_size

    assert format_size(size) == _format_file_size(size)
    assert format_size(5632) == "5.5K"
    assert format_size(1258291) == "1.2M"


def test_view_directory_sizes_are_utf8_bytes(h: Harness) -> None:
    h.create("/memories/u.md", "é" * 600)
    assert h.view("/memories") == DIR_HEADER.format("/memories") + (
        "4K\t/memories\n1.2K\t/memories/u.md"
    )


def test_view_directory_spellings(h: Harness) -> None:
    h.create("/memories/d/f.md", "x")
    # The header line keeps the caller's spelling; entries use the canonical path.
    assert h.view("/memories/") == DIR_HEADER.format("/memories/") + (
        "4K\t/memories/\n4K\t/memories/d/\n1B\t/memories/d/f.md"
    )
    assert h.view("/memories//d") == DIR_HEADER.format("/memories//d") + (
        "4K\t/memories//d\n1B\t/memories/d/f.md"
    )


def test_view_file_numbering_and_trailing_newline(h: Harness) -> None:
    h.create("/memories/a.md", "one\ntwo\n")
    assert h.view("/memories/a.md") == READ_HEADER.format("/memories/a.md") + numbered(
        "one", "two", ""
    )
    h.create("/memories/b.md", "no newline")
    assert h.view("/memories/b.md") == READ_HEADER.format("/memories/b.md") + numbered("no newline")
    h.create("/memories/empty.md", "")
    assert h.view("/memories/empty.md") == READ_HEADER.format("/memories/empty.md") + numbered("")


def test_view_file_keeps_crlf(h: Harness) -> None:
    h.create("/memories/w.txt", "a\r\nb\r\n")
    assert h.view("/memories/w.txt") == (
        READ_HEADER.format("/memories/w.txt") + "     1\ta\r\n     2\tb\r\n     3\t"
    )


VIEW_RANGES: list[tuple[list[int], str]] = [
    ([2, 3], numbered("l2", "l3", first=2)),
    ([2, -1], numbered("l2", "l3", "l4", "", first=2)),
    ([0, 2], numbered("l1", "l2")),
    ([-7, 1], numbered("l1")),
    ([4, 100], numbered("l4", "", first=4)),
    ([3, 3], numbered("l3", first=3)),
    ([3, 2], ""),
    ([9, 12], ""),
    ([1, -2], numbered("l1", "l2", "l3")),
]


def test_view_range(h: Harness) -> None:
    h.create("/memories/r.md", "l1\nl2\nl3\nl4\n")
    for view_range, expected in VIEW_RANGES:
        out = h.view("/memories/r.md", view_range)
        assert out == READ_HEADER.format("/memories/r.md") + expected, view_range


def test_view_range_ignored_for_directories(h: Harness) -> None:
    h.create("/memories/d/f", "x")
    assert h.view("/memories/d", [1, 1]) == DIR_HEADER.format("/memories/d") + (
        "4K\t/memories/d\n1B\t/memories/d/f"
    )


def test_view_too_long_file(h: Harness) -> None:
    # "\n" * n is n + 1 lines: the limit is 999,999 lines, so 999,998 newlines is the largest
    # viewable file. Runs of one byte compress to almost nothing, so this costs little.
    h.create("/memories/max.md", "\n" * 999_998)
    assert h.view("/memories/max.md", [999_998, -1]) == READ_HEADER.format(
        "/memories/max.md"
    ) + numbered("", "", first=999_998)
    h.create("/memories/long.md", "\n" * 999_999)
    assert h.refused({"command": "view", "path": "/memories/long.md"}) == (
        "File /memories/long.md exceeds maximum line limit of 999,999 lines."
    )
    assert h.refused({"command": "view", "path": "/memories/long.md", "view_range": [1, 2]}) == (
        "File /memories/long.md exceeds maximum line limit of 999,999 lines."
    )


def test_view_missing(h: Harness) -> None:
    h.create("/memories/f", "x")
    for path in ("/memories/nope", "/memories/f/below", "/memories/d/e/f"):
        assert h.refused({"command": "view", "path": path}) == (
            f"The path {path} does not exist. Please provide a valid path."
        )


# -- create --------------------------------------------------------------------------------


def test_create_ok_and_exists(h: Harness) -> None:
    h.create("/memories/a.md", "first")
    assert h.refused({"command": "create", "path": "/memories/a.md", "file_text": "second"}) == (
        "Error: File /memories/a.md already exists"
    )
    assert h.store.files() == {"/memories/a.md": "first"}
    # A directory is something that exists too.
    h.create("/memories/d/x", "")
    assert h.refused({"command": "create", "path": "/memories/d", "file_text": ""}) == (
        "Error: File /memories/d already exists"
    )
    assert h.refused({"command": "create", "path": "/memories", "file_text": ""}) == (
        "Error: File /memories already exists"
    )


def test_create_below_a_file_is_refused(h: Harness) -> None:
    h.create("/memories/f", "x")
    assert h.refused({"command": "create", "path": "/memories/f/g/h", "file_text": ""}) == (
        "Error: Cannot create /memories/f/g/h: /memories/f is a file, not a directory"
    )


def test_create_keeps_text_exactly(h: Harness) -> None:
    text = "crlf\r\nlone\rcr\n\ttab  \n\n\u00e9\u4e2d\U0001f600 end"
    h.create("/memories/t.md", text)
    assert h.store.files() == {"/memories/t.md": text}


# -- str_replace ---------------------------------------------------------------------------


def test_str_replace_ok_with_snippet(h: Harness) -> None:
    h.create("/memories/s.md", "l1\nl2\nl3\nl4\nl5\nl6\nl7\n")
    out = h.ok(
        {"command": "str_replace", "path": "/memories/s.md", "old_str": "l4", "new_str": "L4"}
    )
    assert out == SNIPPET_HEADER + numbered("l2", "l3", "L4", "l5", "l6", first=2)
    assert h.store.files()["/memories/s.md"] == "l1\nl2\nl3\nL4\nl5\nl6\nl7\n"


def test_str_replace_snippet_edges(h: Harness) -> None:
    h.create("/memories/s.md", "l1\nl2\nl3\n")
    out = h.ok(
        {"command": "str_replace", "path": "/memories/s.md", "old_str": "l1", "new_str": "x\ny"}
    )
    # The window is counted in lines of the new text from the line the change starts on.
    assert out == SNIPPET_HEADER + numbered("x", "y", "l2")
    out = h.ok(
        {"command": "str_replace", "path": "/memories/s.md", "old_str": "l3\n", "new_str": ""}
    )
    assert out == SNIPPET_HEADER + numbered("y", "l2", "", first=2)
    assert h.store.files()["/memories/s.md"] == "x\ny\nl2\n"


def test_str_replace_keeps_crlf(h: Harness) -> None:
    h.create("/memories/w.txt", "a\r\nb\r\n")
    out = h.ok(
        {"command": "str_replace", "path": "/memories/w.txt", "old_str": "b", "new_str": "c"}
    )
    assert out == SNIPPET_HEADER + "     1\ta\r\n     2\tc\r\n     3\t"
    assert h.store.files()["/memories/w.txt"] == "a\r\nc\r\n"


def test_str_replace_missing_or_directory(h: Harness) -> None:
    h.create("/memories/d/f", "x")
    for path in ("/memories/nope", "/memories/d", "/memories", "/memories/d/f/g"):
        data = {"command": "str_replace", "path": path, "old_str": "x", "new_str": "y"}
        assert h.refused(data) == (
            f"Error: The path {path} does not exist. Please provide a valid path."
        )


def test_str_replace_not_found(h: Harness) -> None:
    h.create("/memories/s.md", "abc\n")
    data = {"command": "str_replace", "path": "/memories/s.md", "old_str": "zz", "new_str": "y"}
    assert h.refused(data) == (
        "No replacement was performed, old_str `zz` did not appear verbatim in /memories/s.md."
    )


def test_str_replace_multiple(h: Harness) -> None:
    h.create("/memories/s.md", "a\nb a\nc\na")
    data = {"command": "str_replace", "path": "/memories/s.md", "old_str": "a", "new_str": "y"}
    assert h.refused(data) == (
        "No replacement was performed. Multiple occurrences of old_str `a` in lines: 1, 2, 4. "
        "Please ensure it is unique"
    )
    # Overlapping occurrences count, as in the reference (it advances one character at a time).
    h.create("/memories/o.md", "aaaa")
    data = {"command": "str_replace", "path": "/memories/o.md", "old_str": "aa", "new_str": "y"}
    assert h.refused(data) == (
        "No replacement was performed. Multiple occurrences of old_str `aa` in lines: 1, 1, 1. "
        "Please ensure it is unique"
    )
    assert h.store.files() == {"/memories/s.md": "a\nb a\nc\na", "/memories/o.md": "aaaa"}


# -- insert --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "line", "text", "after"),
    [
        ("a\nb\n", 0, "new", "new\na\nb\n"),
        ("a\nb\n", 1, "new", "a\nnew\nb\n"),
        ("a\nb\n", 2, "new\n", "a\nb\nnew\n"),
        ("a\nb", 2, "c", "a\nb\nc\n"),
        ("", 0, "first", "first\n"),
        ("a\r\nb\r\n", 1, "x", "a\r\nx\nb\r\n"),
        ("a\n", 1, "two\nlines\n\n", "a\ntwo\nlines\n"),
    ],
)
def test_insert_ok(h: Harness, content: str, line: int, text: str, after: str) -> None:
    h.create("/memories/i.md", content)
    data = {"command": "insert", "path": "/memories/i.md", "insert_line": line, "insert_text": text}
    assert h.ok(data) == "The file /memories/i.md has been edited."
    assert h.store.files() == {"/memories/i.md": after}


def test_insert_missing_or_directory(h: Harness) -> None:
    h.create("/memories/d/f", "x")
    for path in ("/memories/nope", "/memories/d", "/memories", "/memories/d/f/g"):
        data = {"command": "insert", "path": path, "insert_line": 0, "insert_text": "y"}
        assert h.refused(data) == f"Error: The path {path} does not exist"


@pytest.mark.parametrize("line", [-1, 3, 1000])
def test_insert_bad_line(h: Harness, line: int) -> None:
    h.create("/memories/i.md", "a\nb\n")
    data = {"command": "insert", "path": "/memories/i.md", "insert_line": line, "insert_text": "y"}
    assert h.refused(data) == (
        f"Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines "
        "of the file: [0, 2]"
    )


# -- delete --------------------------------------------------------------------------------


def test_delete_file_and_directory(h: Harness) -> None:
    h.create("/memories/keep.md", "k")
    h.create("/memories/f.md", "x")
    h.create("/memories/d/a.md", "a")
    h.create("/memories/d/e/b.md", "b")
    assert h.ok({"command": "delete", "path": "/memories/f.md"}) == (
        "Successfully deleted /memories/f.md"
    )
    assert h.ok({"command": "delete", "path": "/memories/d"}) == "Successfully deleted /memories/d"
    assert h.store.files() == {"/memories/keep.md": "k"}
    assert h.store.directories() == []


def test_delete_missing(h: Harness) -> None:
    h.create("/memories/f", "x")
    for path in ("/memories/nope", "/memories/f/g", "/memories/x/y"):
        assert h.refused({"command": "delete", "path": path}) == (
            f"Error: The path {path} does not exist"
        )


# -- rename --------------------------------------------------------------------------------


def test_rename_file(h: Harness) -> None:
    h.create("/memories/a.md", "alpha\n")
    out = h.ok({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"})
    assert out == "Successfully renamed /memories/a.md to /memories/b.md"
    assert h.store.files() == {"/memories/b.md": "alpha\n"}


def test_rename_directory_with_nested_content(h: Harness) -> None:
    h.create("/memories/src/a.md", "A")
    h.create("/memories/src/sub/b.md", "B")
    h.create("/memories/src/sub/deeper/c.md", "C")
    h.create("/memories/src/.hidden", "H")
    out = h.ok({"command": "rename", "old_path": "/memories/src", "new_path": "/memories/x/dst"})
    assert out == "Successfully renamed /memories/src to /memories/x/dst"
    assert h.store.files() == {
        "/memories/x/dst/a.md": "A",
        "/memories/x/dst/sub/b.md": "B",
        "/memories/x/dst/sub/deeper/c.md": "C",
        "/memories/x/dst/.hidden": "H",
    }
    # Names are sealed with their parent path: the moved entries must open under the new one.
    assert h.view("/memories/x/dst/sub/deeper/c.md") == (
        READ_HEADER.format("/memories/x/dst/sub/deeper/c.md") + numbered("C")
    )
    assert h.view("/memories/x") == DIR_HEADER.format("/memories/x") + "\n".join(
        [
            "4K\t/memories/x",
            "4K\t/memories/x/dst/",
            "1B\t/memories/x/dst/a.md",
            "4K\t/memories/x/dst/sub/",
        ]
    )
    assert h.store.verify().ok


def test_rename_source_missing(h: Harness) -> None:
    data = {"command": "rename", "old_path": "/memories/nope", "new_path": "/memories/n/e/w"}
    assert h.refused(data) == "Error: The path /memories/nope does not exist"
    # Unlike the reference, a refused rename leaves no parent directories behind.
    assert h.store.directories() == []


def test_rename_destination_exists(h: Harness) -> None:
    h.create("/memories/a.md", "a")
    h.create("/memories/b.md", "b")
    h.create("/memories/d/c.md", "c")
    for new in ("/memories/b.md", "/memories/d", "/memories/a.md", "/memories"):
        data = {"command": "rename", "old_path": "/memories/a.md", "new_path": new}
        assert h.refused(data) == f"Error: The destination {new} already exists"
    assert h.store.files() == {
        "/memories/a.md": "a",
        "/memories/b.md": "b",
        "/memories/d/c.md": "c",
    }


def test_rename_into_itself_is_refused(h: Harness) -> None:
    h.create("/memories/d/f", "x")
    data = {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/d/e"}
    assert h.refused(data) == "Error: Cannot move /memories/d into itself"


# -- the root --------------------------------------------------------------------------------


ROOT_SPELLINGS = ["/memories", "/memories/", "/memories/.", "/memories/a/.."]


def root_refusal(verb: str, spelling: str) -> str:
    """Every spelling of the root is refused: the first two by name, the others as paths."""
    if spelling.endswith("/.."):
        return f"Error: The path {spelling} is not allowed: '..' components are not allowed"
    if spelling.endswith("/."):
        return f"Error: The path {spelling} is not allowed: '.' components are not allowed"
    return f"Error: Cannot {verb} the /memories directory itself"


@pytest.mark.parametrize("spelling", ROOT_SPELLINGS)
def test_root_cannot_be_deleted(h: Harness, spelling: str) -> None:
    h.create("/memories/a/f", "x")
    assert h.refused({"command": "delete", "path": spelling}) == root_refusal("delete", spelling)
    assert h.store.files() == {"/memories/a/f": "x"}


@pytest.mark.parametrize("spelling", ROOT_SPELLINGS)
def test_root_cannot_be_renamed(h: Harness, spelling: str) -> None:
    h.create("/memories/a/f", "x")
    data = {"command": "rename", "old_path": spelling, "new_path": "/memories/z"}
    assert h.refused(data) == root_refusal("rename", spelling)
    assert h.store.files() == {"/memories/a/f": "x"}


# -- directory semantics -----------------------------------------------------------------------


def test_create_makes_parents(h: Harness) -> None:
    h.create("/memories/x/y/z.md", "z")
    assert h.store.directories() == ["/memories/x", "/memories/x/y"]


def test_rename_makes_parents(h: Harness) -> None:
    h.create("/memories/a.md", "a")
    h.ok({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/p/q/a.md"})
    assert h.store.directories() == ["/memories/p", "/memories/p/q"]
    assert h.store.files() == {"/memories/p/q/a.md": "a"}


def test_emptied_directory_stays_until_deleted(h: Harness) -> None:
    h.create("/memories/x/y/only.md", "o")
    h.ok({"command": "delete", "path": "/memories/x/y/only.md"})
    assert h.store.files() == {}
    assert h.store.directories() == ["/memories/x", "/memories/x/y"]
    assert h.view("/memories/x/y") == DIR_HEADER.format("/memories/x/y") + "4K\t/memories/x/y"
    assert h.view("/memories") == DIR_HEADER.format("/memories") + (
        "4K\t/memories\n4K\t/memories/x/\n4K\t/memories/x/y/"
    )
    # Moving the last file out of a directory leaves it too.
    h.create("/memories/m/f", "f")
    h.ok({"command": "rename", "old_path": "/memories/m/f", "new_path": "/memories/f"})
    assert h.store.directories() == ["/memories/m", "/memories/x", "/memories/x/y"]
    h.ok({"command": "delete", "path": "/memories/x/y"})
    assert h.store.directories() == ["/memories/m", "/memories/x"]
    # An empty directory can be created into and renamed like any other.
    h.create("/memories/x/new.md", "n")
    h.ok({"command": "rename", "old_path": "/memories/m", "new_path": "/memories/x/m"})
    assert h.store.directories() == ["/memories/x", "/memories/x/m"]
    assert h.store.files() == {"/memories/f": "f", "/memories/x/new.md": "n"}


# -- commits ------------------------------------------------------------------------------------


def test_one_commit_per_mutation_with_record(h: Harness) -> None:
    h.create("/memories/a.md", "1\n")
    h.ok({"command": "str_replace", "path": "/memories/a.md", "old_str": "1", "new_str": "2"})
    h.ok({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "0"})
    h.ok({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/d/b.md"})
    h.view("/memories")
    h.view("/memories/d/b.md")
    h.ok({"command": "delete", "path": "/memories/d"})
    ops = list(h.store.log())
    assert [(op.seq, op.command, op.paths, op.session) for op in ops] == [
        (5, "delete", ("/memories/d",), "contract"),
        (4, "rename", ("/memories/a.md", "/memories/d/b.md"), "contract"),
        (3, "insert", ("/memories/a.md",), "contract"),
        (2, "str_replace", ("/memories/a.md",), "contract"),
        (1, "create", ("/memories/a.md",), "contract"),
    ]
    assert [op.parents for op in ops] == [(ops[i + 1].commit,) for i in range(4)] + [()]


# -- malformed input ------------------------------------------------------------------------------


KNOWN = "view, create, str_replace, insert, delete, rename"


A = "/memories/a"
RANGE = "`view_range` must be a list of two integers [start, end]"
MALFORMED: list[tuple[Any, str]] = [
    ({"command": "frobnicate", "path": A}, f"Unknown command 'frobnicate'; use one of: {KNOWN}"),
    ({"path": A}, f"Unknown command None; use one of: {KNOWN}"),
    ({"command": 3}, f"Unknown command 3; use one of: {KNOWN}"),
    ("view /memories", "the memory tool input must be an object"),
    (None, "the memory tool input must be an object"),
    ({"command": "view"}, "the view command needs the `path` parameter"),
    ({"command": "create", "path": A}, "the create command needs the `file_text` parameter"),
    (
        {"command": "create", "path": 1, "file_text": "x"},
        "the `path` parameter of create must be a string",
    ),
    (
        {"command": "create", "path": A, "file_text": None},
        "the `file_text` parameter of create must be a string",
    ),
    (
        {"command": "create", "path": A, "file_text": b"x"},
        "the `file_text` parameter of create must be a string",
    ),
    (
        {"command": "str_replace", "path": A, "old_str": "x"},
        "the str_replace command needs the `new_str` parameter",
    ),
    (
        {"command": "str_replace", "path": A, "old_str": 1, "new_str": "y"},
        "the `old_str` parameter of str_replace must be a string",
    ),
    (
        {"command": "insert", "path": A, "insert_line": "0", "insert_text": "x"},
        "the `insert_line` parameter of insert must be an integer",
    ),
    (
        {"command": "insert", "path": A, "insert_line": True, "insert_text": "x"},
        "the `insert_line` parameter of insert must be an integer",
    ),
    (
        {"command": "insert", "path": A, "insert_line": 1.0, "insert_text": "x"},
        "the `insert_line` parameter of insert must be an integer",
    ),
    (
        {"command": "insert", "path": A, "insert_text": "x"},
        "the insert command needs the `insert_line` parameter",
    ),
    ({"command": "delete", "path": [A]}, "the `path` parameter of delete must be a string"),
    ({"command": "rename", "old_path": A}, "the rename command needs the `new_path` parameter"),
    (
        {"command": "rename", "old_path": None, "new_path": "/memories/b"},
        "the `old_path` parameter of rename must be a string",
    ),
    ({"command": "view", "path": A, "view_range": [1]}, RANGE),
    ({"command": "view", "path": A, "view_range": ["1", 2]}, RANGE),
    ({"command": "view", "path": A, "view_range": [1, True]}, RANGE),
    ({"command": "view", "path": A, "view_range": "1-2"}, RANGE),
]


def test_malformed_input_is_a_tool_error(h: Harness) -> None:
    h.create("/memories/a", "x\n")
    for data, message in MALFORMED:
        assert h.refused(data) == "Error: " + message, data
    assert h.store.files() == {"/memories/a": "x\n"}


def test_a_refused_path_writes_nothing(h: Harness) -> None:
    h.create("/memories/a", "x")
    out = h.refused({"command": "create", "path": "/memoriesX/a", "file_text": "y"})
    assert out == (
        "Error: The path /memoriesX/a is not allowed: every memory path must start with /memories/"
    )


def test_public_names_exist() -> None:
    # The names issue 2 makes the contract, with the base classes it promises.
    from anthropic.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool

    assert issubclass(gitmem.GitMemoryTool, BetaAbstractMemoryTool)
    assert issubclass(gitmem.AsyncGitMemoryTool, BetaAsyncAbstractMemoryTool)
    assert issubclass(gitmem.WrongKey, gitmem.GitMemError)
    assert isinstance(gitmem.generate_key(), str)
    assert str(parse("/memories/a")) == "/memories/a"


# -- a subclass's handlers --------------------------------------------------------------------

SCRIPT: list[dict[str, Any]] = [
    {"command": "create", "path": "/memories/a/notes.md", "file_text": "one\ntwo\n"},
    {"command": "create", "path": "/memories/a/notes.md", "file_text": "again\n"},
    {"command": "view", "path": "/memories/a/notes.md", "view_range": [2, -1]},
    {"command": "view", "path": "/memories", "extra": "ignored"},
    {"command": "str_replace", "path": "/memories/a/notes.md", "old_str": "two", "new_str": "2"},
    {"command": "str_replace", "path": "/memories/a/notes.md", "old_str": "zz", "new_str": ""},
    {"command": "insert", "path": "/memories/a/notes.md", "insert_line": 1, "insert_text": "x"},
    {"command": "insert", "path": "/memories/a/notes.md", "insert_line": 9, "insert_text": "x"},
    {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"},
    {"command": "view", "path": "/memories/b/notes.md"},
    {"command": "delete", "path": "/memories/a"},
    {"command": "delete", "path": "/memories/b/notes.md"},
    {"command": "view", "path": "/memories/../etc"},
]


def _outcomes(call: Call) -> list[str]:
    out = []
    for data in SCRIPT:
        try:
            out.append(call(data))
        except ToolError as exc:
            out.append(f"ToolError: {exc.content}")
    return out


def test_a_subclass_overriding_the_handlers_gets_the_sdk_models(tmp_path: Path, key: str) -> None:
    # GitMemoryTool.call runs its own handlers without the SDK's model of the input; a subclass
    # that overrides one still gets the model, and both give the same results.
    seen: list[str] = []

    def recording(name: str) -> Callable[[GitMemoryTool, Any], str]:
        def handler(self: GitMemoryTool, command: Any) -> str:
            seen.append(type(command).__name__)
            result: str = getattr(GitMemoryTool, name)(self, command)
            return result

        return handler

    # A subclass overriding all six handlers, each recording what it was given.
    recorder = type("Recording", (GitMemoryTool,), {n: recording(n) for n in COMMAND_FIELDS})

    class AsyncRecording(AsyncGitMemoryTool):
        async def create(self, command: Any) -> str:
            seen.append(type(command).__name__)
            return await super().create(command)

    plain = GitMemoryTool(tmp_path / "plain", key=key)
    expected = _outcomes(plain.call)
    assert _outcomes(recorder(tmp_path / "sub", key=key).call) == expected
    assert seen == [
        f"BetaMemoryTool20250818{kind}Command"
        for kind in ["Create"] * 2
        + ["View"] * 2
        + ["StrReplace"] * 2
        + ["Insert"] * 2
        + ["Rename", "View", "Delete", "Delete", "View"]
    ]
    seen.clear()
    atool = AsyncRecording(tmp_path / "async", key=key)
    assert _outcomes(lambda data: anyio.run(atool.call, data)) == expected
    assert seen == ["BetaMemoryTool20250818CreateCommand"] * 2
