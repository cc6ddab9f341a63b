"""Size limits: refused writes (exact messages, nothing written), cheap store size, cut views."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError

import gitmem
import gitmem.paths
from gitmem import GitMemoryTool, Limits, MemoryStore
from gitmem.limits import (
    DEFAULT_MAX_FILE_BYTES,
    MIN_VIEW_CHARS,
    LimitedEditor,
    LimitExceeded,
    fit_directory_view,
    fit_file_view,
    human_bytes,
)
from gitmem.render import view_file

SMALL = Limits(max_file_bytes=100, max_store_bytes=250, max_view_chars=MIN_VIEW_CHARS)


def make_tool(repo: Path, key: str, limits: Limits | None = None) -> GitMemoryTool:
    return GitMemoryTool(repo, key=key, session="limits", limits=limits)


def refused(tool: GitMemoryTool, **command: Any) -> str:
    head = tool.store.head()
    with pytest.raises(ToolError) as info:
        tool.call(command)
    assert tool.store.head() == head, "a refused write moved HEAD"
    return str(info.value.content)


# -- configuration ------------------------------------------------------------------------------


def test_defaults() -> None:
    limits = Limits()
    assert (limits.max_file_bytes, limits.max_store_bytes, limits.max_view_chars) == (
        1024 * 1024,
        64 * 1024 * 1024,
        50_000,
    )
    assert Limits.unlimited() == Limits(None, None, None)
    assert human_bytes(DEFAULT_MAX_FILE_BYTES) == "1 MiB"
    assert human_bytes(64 * 1024 * 1024) == "64 MiB"
    assert human_bytes(1) == "1 byte"
    assert human_bytes(1500) == "1,500 bytes"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_file_bytes", 0, "max_file_bytes must be a positive integer or None, not 0"),
        ("max_store_bytes", -5, "max_store_bytes must be a positive integer or None, not -5"),
        ("max_file_bytes", True, "max_file_bytes must be a positive integer or None, not True"),
        ("max_view_chars", 100, "max_view_chars must be at least 2,048"),
        (
            "max_view_chars",
            "9" * 10_000,
            # a string echoed cut to 200 characters
            "max_view_chars must be a positive integer or None, not '"
            + "9" * 97
            + "..."
            + "9" * 98
            + "'",
        ),
    ],
)
def test_invalid_limits(field: str, value: object, message: str) -> None:
    with pytest.raises(gitmem.UsageError) as info:
        Limits(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == message


def test_tool_and_store_take_limits(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, SMALL)
    assert tool.store.limits == SMALL
    store = MemoryStore.open(repo_path, key, limits=Limits.unlimited())
    assert store.limits == Limits.unlimited()
    async_tool = gitmem.AsyncGitMemoryTool(repo_path, key=key, limits=SMALL)
    assert async_tool.store.limits == SMALL
    assert MemoryStore.open(repo_path, key).limits == Limits()


# -- file size ----------------------------------------------------------------------------------


def test_create_over_file_limit_is_refused(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, SMALL)
    tool.call({"command": "create", "path": "/memories/seed.md", "file_text": "seed"})
    message = refused(tool, command="create", path="/memories/big.md", file_text="x" * 101)
    assert message == (
        "Error: refused to write /memories/big.md: it would be 101 bytes, 1 byte over the file "
        "size limit of 100 bytes (max_file_bytes = 100). Nothing was written; keep memory files "
        "small, e.g. split the content into several files."
    )
    assert tool.store.kind(gitmem.parse_path("/memories/big.md")) is None
    # Exactly at the limit is fine; bytes are UTF-8 bytes, not characters.
    tool.call({"command": "create", "path": "/memories/edge.md", "file_text": "x" * 100})
    message = refused(tool, command="create", path="/memories/u.md", file_text="é" * 51)
    assert "it would be 102 bytes, 2 bytes over the file size limit" in message


def test_default_file_limit_message(tool: GitMemoryTool) -> None:
    text = "a" * (DEFAULT_MAX_FILE_BYTES + 10)
    message = refused(tool, command="create", path="/memories/huge.txt", file_text=text)
    assert message == (
        "Error: refused to write /memories/huge.txt: it would be 1,048,586 bytes, 10 bytes "
        "over the file size limit of 1 MiB (max_file_bytes = 1,048,576). Nothing was written; "
        "keep memory files small, e.g. split the content into several files."
    )
    assert tool.store.head() is None


def test_edits_growing_past_file_limit_are_refused(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, SMALL)
    tool.call({"command": "create", "path": "/memories/n.md", "file_text": "a" * 90 + "\n"})
    message = refused(
        tool, command="str_replace", path="/memories/n.md", old_str="a\n", new_str="b" * 20
    )
    assert message.startswith(
        "Error: refused to write /memories/n.md: it would be 109 bytes, 9 bytes over"
    )
    message = refused(
        tool, command="insert", path="/memories/n.md", insert_line=1, insert_text="c" * 9
    )
    assert message.startswith(
        "Error: refused to write /memories/n.md: it would be 101 bytes, 1 byte over"
    )
    assert tool.store.read_text(gitmem.parse_path("/memories/n.md")) == "a" * 90 + "\n"


def test_files_over_a_lowered_limit_stay_readable_and_can_shrink(repo_path: Path, key: str) -> None:
    roomy = make_tool(repo_path, key)
    text = "".join(f"line {i}\n" for i in range(40))  # 290 bytes
    roomy.call({"command": "create", "path": "/memories/old.md", "file_text": text})
    tight = make_tool(repo_path, key, SMALL)
    shown = tight.call({"command": "view", "path": "/memories/old.md"})
    assert shown == view_file("/memories/old.md", text, None)
    # Shrinking is allowed even though the result is still over the cap...
    tight.call(
        {"command": "str_replace", "path": "/memories/old.md", "old_str": "line 0\n", "new_str": ""}
    )
    # ...growing is not, and renaming never changes a size.
    message = refused(
        tight, command="insert", path="/memories/old.md", insert_line=0, insert_text="more"
    )
    assert "it would be 308 bytes, 208 bytes over the file size limit of 100 bytes" in message
    tight.call({"command": "rename", "old_path": "/memories/old.md", "new_path": "/memories/o.md"})
    tight.call({"command": "delete", "path": "/memories/o.md"})


# -- store size ---------------------------------------------------------------------------------


def test_store_limit(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, SMALL)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a" * 100})
    tool.call({"command": "create", "path": "/memories/d/b.md", "file_text": "b" * 100})
    message = refused(tool, command="create", path="/memories/c.md", file_text="c" * 60)
    assert message == (
        "Error: refused to write /memories/c.md: the memory would hold 260 bytes in all, "
        "10 bytes over the store size limit of 250 bytes (max_store_bytes = 250). Nothing was "
        "written; delete or shorten memory that is no longer needed."
    )
    tool.call({"command": "create", "path": "/memories/c.md", "file_text": "c" * 50})
    assert tool.store.store_bytes() == 250
    message = refused(tool, command="insert", path="/memories/c.md", insert_line=0, insert_text="")
    assert "the memory would hold 252 bytes in all, 2 bytes over" in message
    tool.call({"command": "delete", "path": "/memories/d"})
    tool.call({"command": "insert", "path": "/memories/c.md", "insert_line": 0, "insert_text": ""})
    assert tool.store.store_bytes() == 152


def test_store_over_a_lowered_limit(repo_path: Path, key: str) -> None:
    roomy = make_tool(repo_path, key)
    for name in "abc":
        roomy.call({"command": "create", "path": f"/memories/{name}", "file_text": "x" * 100})
    tight = make_tool(repo_path, key, SMALL)
    tight.call({"command": "create", "path": "/memories/e", "file_text": ""})  # adds 0 bytes
    message = refused(tight, command="create", path="/memories/f", file_text="1")
    assert "the memory would hold 301 bytes in all, 51 bytes over" in message
    tight.call({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/z/a"})
    tight.call(
        {"command": "str_replace", "path": "/memories/b", "old_str": "x" * 100, "new_str": ""}
    )
    tight.call({"command": "create", "path": "/memories/f", "file_text": "1"})


def test_store_size_comes_from_headers_only(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = make_tool(repo_path, key)
    sizes = {"/memories/a.md": 10, "/memories/d/b.md": 2000, "/memories/d/e/.hidden": 7}
    for path, size in sizes.items():
        tool.call({"command": "create", "path": path, "file_text": "z" * size})
    tool.call({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/m/d"})
    cold = MemoryStore.open(repo_path, key)

    def no_content(oid: str) -> bytes:
        raise AssertionError("store size must not decrypt file contents")

    monkeypatch.setattr(cold.codec, "read_file", no_content)
    assert cold.store_bytes() == 2017
    assert cold.store_bytes("HEAD~1") == 2017
    assert cold.store_bytes("HEAD~2") == 2010
    # Memoized by tree: asking again reads no header.
    calls: list[str] = []
    real = cold.codec.file_size

    def counted(oid: str) -> int:
        calls.append(oid)
        return real(oid)

    monkeypatch.setattr(cold.codec, "file_size", counted)
    assert cold.store_bytes() == 2017
    assert calls == []


def test_editor_keeps_a_running_total(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key)
    tool.call({"command": "create", "path": "/memories/d/a", "file_text": "a" * 80})
    tool.call({"command": "create", "path": "/memories/d/e/b", "file_text": "b" * 80})
    store = tool.store
    head = store.head_operation()
    assert head is not None
    limits = Limits(max_store_bytes=200)
    editor = LimitedEditor(store.codec, head.tree, limits, store.sizer)
    path = gitmem.parse_path
    editor.put_file(path("/memories/d/e/c"), b"c" * 30)
    assert editor.total_bytes() == 190
    with pytest.raises(LimitExceeded) as info:
        editor.put_file(path("/memories/f"), b"f" * 11)
    assert (info.value.limit, info.value.cap, info.value.actual) == ("max_store_bytes", 200, 201)
    editor.remove(path("/memories/d/e"))  # holds a committed file and one put in this edit
    assert editor.total_bytes() == 80
    editor.put_file(path("/memories/f"), b"f" * 120)
    assert editor.total_bytes() == 200


@pytest.mark.usefixtures("fast_git")
def test_sizes_of_a_deep_tree_need_no_recursion(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Size accounting walked a tree recursively, three frames a level, so one path about 330
    levels deep made every later write of a fresh process fail with RecursionError (issue 14)."""
    tool = make_tool(repo_path, key, Limits(max_store_bytes=10_000))
    monkeypatch.setattr(gitmem.paths, "MAX_DEPTH", 10_000)  # as an older gitmem accepted
    deep = "/memories" + "/d" * 400 + "/f"
    tool.call({"command": "create", "path": deep, "file_text": "x" * 100})
    tool.call({"command": "create", "path": "/memories/d/d/g", "file_text": "y" * 50})
    store = MemoryStore.open(repo_path, key, limits=Limits(max_store_bytes=10_000))
    head = store.head_operation()
    assert head is not None
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 100)
    try:
        assert store.store_bytes() == 150
        editor = LimitedEditor(store.codec, head.tree, store.limits, store.sizer)
        editor.put_file(gitmem.parse_path("/memories/new"), b"z" * 10)
        assert editor.total_bytes() == 160
        editor.remove(gitmem.parse_path("/memories/d/d"))
        assert editor.total_bytes() == 10
    finally:
        sys.setrecursionlimit(limit)


# -- reads --------------------------------------------------------------------------------------


def test_view_under_the_limit_is_unchanged(tool: GitMemoryTool) -> None:
    text = "".join(f"row {i}\n" for i in range(100))
    tool.call({"command": "create", "path": "/memories/r.md", "file_text": text})
    assert tool.call({"command": "view", "path": "/memories/r.md"}) == view_file(
        "/memories/r.md", text, None
    )


def test_long_file_view_is_cut_and_pages(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, SMALL)
    lines = [f"entry {i:04d}: " + "word " * (i % 7) for i in range(1, 501)]
    text = "\n".join(lines) + "\n"  # 501 numbered lines: the last is empty
    unlimited = make_tool(repo_path, key, Limits.unlimited())
    unlimited.call({"command": "create", "path": "/memories/log.md", "file_text": text})
    first = tool.call({"command": "view", "path": "/memories/log.md"})
    assert len(first) <= MIN_VIEW_CHARS
    head, *rows, note = first.split("\n")
    assert head == "Here's the content of /memories/log.md with line numbers:"
    shown = len(rows)
    assert rows[-1] == f"{shown:>6}\t{lines[shown - 1]}"
    assert note == (
        f"... output truncated after line {shown} of 501 (view shows at most 2,048 "
        f"characters): call view with view_range [{shown + 1}, 501] to see more"
    )
    # Following the notes pages through the whole file, every line exactly once.
    seen = rows
    start = shown + 1
    pages = 1
    while True:
        page = tool.call({"command": "view", "path": "/memories/log.md", "view_range": [start, -1]})
        assert len(page) <= MIN_VIEW_CHARS
        body = page.split("\n")[1:]
        pages += 1
        if not body[-1].startswith("... output truncated"):
            seen += body
            break
        seen += body[:-1]
        start += len(body) - 1
    assert seen == [f"{i + 1:>6}\t{line}" for i, line in enumerate([*lines, ""])]
    assert pages > 5


def test_view_range_end_is_kept_in_the_note(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, SMALL)
    text = "".join(f"{'x' * 60} {i}\n" for i in range(200))
    make_tool(repo_path, key, Limits.unlimited()).call(
        {"command": "create", "path": "/memories/x.md", "file_text": text}
    )
    page = tool.call({"command": "view", "path": "/memories/x.md", "view_range": [10, 150]})
    last = page.split("\n")[-2]
    n = int(last.split("\t")[0])
    assert page.endswith(
        f"... output truncated after line {n} of 201 (view shows at most 2,048 characters): "
        f"call view with view_range [{n + 1}, 150] to see more"
    )
    assert page.split("\n")[1].startswith("    10\t")


def test_one_line_longer_than_the_limit(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, Limits(max_view_chars=MIN_VIEW_CHARS))
    tool.call({"command": "create", "path": "/memories/w", "file_text": "y" * 5000 + "\nnext"})
    page = tool.call({"command": "view", "path": "/memories/w"})
    assert len(page) <= MIN_VIEW_CHARS
    header = "Here's the content of /memories/w with line numbers:"
    kept = MIN_VIEW_CHARS - len(header) - 1 - 256 - 1 - 7
    assert page == (
        f"{header}\n     1\t{'y' * kept}\n... line 1 is cut after {kept:,} of its 5,000 "
        "characters (view shows at most 2,048 characters); call view with view_range [2, 2] "
        "to see the lines after it"
    )


def test_long_directory_listing_is_cut(repo_path: Path, key: str) -> None:
    tool = make_tool(repo_path, key, SMALL)
    name = "a-rather-long-descriptive-note-name-" * 4
    for i in range(16):
        tool.call({"command": "create", "path": f"/memories/notes/{name}-{i:02d}", "file_text": ""})
    listing = tool.call({"command": "view", "path": "/memories/notes"})
    assert len(listing) <= MIN_VIEW_CHARS
    rows = listing.split("\n")
    assert rows[1] == "4K\t/memories/notes"
    listed = len(rows) - 3
    assert rows[-2] == f"0B\t/memories/notes/{name}-{listed - 1:02d}"
    assert rows[-1] == (
        f"... listing truncated after {listed} of 16 entries (view shows at most 2,048 "
        "characters): view a subdirectory to see the rest"
    )


def test_fit_functions_leave_short_results_alone() -> None:
    text = view_file("/memories/a", "one\ntwo", None)
    assert fit_file_view(text, 2, -1, MIN_VIEW_CHARS) is text
    assert fit_file_view(text * 1000, 2, -1, None) == text * 1000
    assert fit_directory_view("header\nrow", MIN_VIEW_CHARS) == "header\nrow"
