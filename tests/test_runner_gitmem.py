"""The real SDK tool runner drives GitMemoryTool and AsyncGitMemoryTool through the local stand-in.

Nothing leaves 127.0.0.1: the client's base URL is the stand-in's and the key is a dummy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers_runner import run_async, run_sync

import gitmem
from gitmem.cli import main
from gitmem.demo.scripted_api import Script, ScriptedAPI, memory_call, text

PROMPT = "Keep a progress log."


def script() -> Script:
    """Create, view, edit, fail once (missing file), rename, then answer."""
    return Script(
        [memory_call("view", path="/memories")],
        [memory_call("create", path="/memories/progress.md", file_text="# Progress\n- s1\n")],
        [
            memory_call("str_replace", path="/memories/progress.md", old_str="s1", new_str="s2"),
            memory_call("view", path="/memories/nope.md"),
        ],
        [memory_call("rename", old_path="/memories/progress.md", new_path="/memories/log/p.md")],
        [memory_call("view", path="/memories/log/p.md")],
        [text("Done.")],
    )


def tool_results(api: ScriptedAPI) -> list[tuple[str, bool]]:
    """Every tool result the runner sent back, as (text, is_error), in order."""
    seen: list[tuple[str, bool]] = []
    for request in api.requests:
        for message in request.messages:
            if message["role"] != "user" or isinstance(message["content"], str):
                continue
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    body = content if isinstance(content, str) else content[0]["text"]
                    item = (body, bool(block.get("is_error", False)))
                    if item not in seen:
                        seen.append(item)
    return seen


EXPECTED = [
    (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items and node_modules:\n4K\t/memories",
        False,
    ),
    ("File created successfully at: /memories/progress.md", False),
    (
        "The memory file has been edited. Here is the snippet showing the change (with line "
        "numbers):\n     1\t# Progress\n     2\t- s2\n     3\t",
        False,
    ),
    ("The path /memories/nope.md does not exist. Please provide a valid path.", True),
    ("Successfully renamed /memories/progress.md to /memories/log/p.md", False),
    (
        "Here's the content of /memories/log/p.md with line numbers:\n"
        "     1\t# Progress\n     2\t- s2\n     3\t",
        False,
    ),
]


def check_store(repo: Path, key: str) -> None:
    store = gitmem.MemoryStore.open(repo, key)
    assert store.files() == {"/memories/log/p.md": "# Progress\n- s2\n"}
    ops = list(store.log())
    assert [op.command for op in ops] == ["rename", "str_replace", "create"]
    assert {op.session for op in ops} == {"runner-test"}
    assert store.verify().ok


@pytest.mark.parametrize("threaded", [True, False], ids=["threads", "full-history"])
def test_sync_tool_under_the_tool_runner(tmp_path: Path, key: str, threaded: bool) -> None:
    repo = tmp_path / "m.git"
    tool = gitmem.GitMemoryTool(repo, key=key, session="runner-test")
    with ScriptedAPI(script()) as api:
        final = run_sync(api, tool, PROMPT, threaded=threaded)
        assert [b.text for b in final.content if b.type == "text"] == ["Done."]
        assert tool_results(api) == EXPECTED
        assert api.errors == []
    check_store(repo, key)


@pytest.mark.parametrize("threaded", [True, False], ids=["threads", "full-history"])
def test_async_tool_under_the_async_tool_runner(tmp_path: Path, key: str, threaded: bool) -> None:
    repo = tmp_path / "m.git"
    tool = gitmem.AsyncGitMemoryTool(repo, key=key, session="runner-test")
    with ScriptedAPI(script()) as api:
        final = run_async(api, tool, PROMPT, threaded=threaded)
        assert [b.text for b in final.content if b.type == "text"] == ["Done."]
        assert tool_results(api) == EXPECTED
    check_store(repo, key)


def test_gitmem_demo_runs_offline_and_prints_the_log(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--store", str(tmp_path / "demo.git")])
    assert result.exit_code == 0, result.output
    assert "scripted stand-in" in result.output
    log = result.output.split("$ gitmem log\n", 1)[1].splitlines()
    commands = [line.split()[4] for line in log if line.strip() and "  " in line][:10]
    assert commands == [
        "delete",
        "insert",
        "str_replace",
        "rename",
        "insert",
        "str_replace",
        "create",
        "create",
        "create",
        "create",
    ]
    sessions = {line.split()[3] for line in log[:10]}
    assert sessions == {"initializer", "worker-1", "worker-2"}
    # The kept store opens with the key the demo saved in the per-user key file.
    store = gitmem.MemoryStore.open(tmp_path / "demo.git")
    assert store.verify().ok
    assert "- [x]" in store.read_text(gitmem.parse_path("/memories/features.md"))


def test_gitmem_demo_refuses_a_non_empty_store_path(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("keep me")
    result = CliRunner().invoke(main, ["demo", "--store", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "already exists and is not empty" in result.output
    assert (tmp_path / "x" / "f").read_text() == "keep me"
