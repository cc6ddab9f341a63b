"""A state directory that cannot hold high-water marks turns rollback detection off: gitmem says
so once (a RollbackCheckOff warning, a stderr line on the command line and from the MCP server),
and reads and writes go on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import gitmem
from gitmem.cli import main

WARNING = "rollback detection is off"


def unusable_state(tmp_path: Path) -> Path:
    """A state directory path that is a regular file: nothing can be made in it, even by root."""
    path = tmp_path / "state"
    path.write_text("not a directory\n")
    return path


def rollback_off(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, gitmem.RollbackCheckOff)]


def test_a_state_dir_that_is_a_file_warns_once_per_store(
    tmp_path: Path, repo_path: Path, key: str
) -> None:
    state = unusable_state(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tool = gitmem.GitMemoryTool(repo_path, key=key, state_dir=state)
        tool.store.create("/memories/a.md", "one\n")
        tool.store.str_replace("/memories/a.md", "one", "two")
        shown = tool.store.read_text("/memories/a.md")
        again = gitmem.MemoryStore.open(repo_path, key, state_dir=state)
        assert again.read_text("/memories/a.md") == "two\n"
    assert "two" in shown
    messages = rollback_off(caught)
    assert len(messages) == 2  # one per store: the tool's and the one opened again
    assert all(m == messages[0] for m in messages)
    assert str(state) in messages[0] and "it is not a directory" in messages[0]
    assert key not in messages[0] and "two" not in messages[0]
    assert issubclass(gitmem.RollbackCheckOff, RuntimeWarning)
    # Nothing was written because of it: the two writes are the only operations, and the file
    # in the state directory's place is as it was.
    assert [op.command for op in again.log()] == ["str_replace", "create"]
    assert state.read_text() == "not a directory\n"


def test_no_warning_when_rollback_checks_are_off(tmp_path: Path, repo_path: Path, key: str) -> None:
    state = unusable_state(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tool = gitmem.GitMemoryTool(repo_path, key=key, state_dir=state, check_rollback=False)
        tool.store.create("/memories/a.md", "one\n")
    assert rollback_off(caught) == []


def test_a_working_state_dir_gives_no_warning(tmp_path: Path, repo_path: Path, key: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tool = gitmem.GitMemoryTool(repo_path, key=key, state_dir=tmp_path / "state")
        tool.store.create("/memories/a.md", "one\n")
    assert rollback_off(caught) == []


def cli_store(tmp_path: Path, key: str) -> Path:
    repo = tmp_path / "cli.git"
    tool = gitmem.GitMemoryTool(repo, key=key, state_dir=tmp_path / "first-state")
    tool.store.create("/memories/a.md", "one\n")
    return repo


def test_the_cli_prints_one_warning_line_and_keeps_its_exit_code(tmp_path: Path, key: str) -> None:
    repo = cli_store(tmp_path, key)
    state = unusable_state(tmp_path)
    source = tmp_path / "in"
    source.mkdir()
    (source / "b.md").write_text("bee\n")
    (source / "c.md").write_text("sea\n")
    env = {"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(state)}
    runner = CliRunner()
    imported = runner.invoke(main, ["--repo", str(repo), "import", str(source)], env=env)
    assert imported.exit_code == 0, imported.output
    lines = imported.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gitmem: warning: {WARNING}")
    assert str(state) in lines[0]
    shown = runner.invoke(main, ["--repo", str(repo), "cat", "/memories/b.md"], env=env)
    assert (shown.exit_code, shown.stdout) == (0, "bee\n")
    assert len(shown.stderr.splitlines()) == 1
    as_json = runner.invoke(main, ["--repo", str(repo), "--json", "verify"], env=env)
    assert as_json.exit_code == 0
    assert '"warning": "RollbackCheckOff"' in as_json.stderr


def test_a_read_only_state_dir_warns_on_the_command_line(tmp_path: Path, key: str) -> None:
    """Root ignores permission bits, so the state directory is made read-only by a read-only
    bind mount, inside a private mount namespace (``unshare``) that ends with the command: no
    mount outlives the test, whatever happens to it."""
    repo = cli_store(tmp_path, key)
    state = tmp_path / "ro-state"
    state.mkdir(mode=0o700)
    gm = Path(sys.executable).with_name("gitmem")
    script = (
        'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && '
        'touch "$1/probe" 2>/dev/null && exit 99; shift; exec "$@"'
    )
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-rm", "true"], check=False).returncode:
        pytest.skip("no unshare -rm here: a read-only mount cannot be made and undone safely")
    env = {**os.environ, "GITMEM_KEY": key, "GITMEM_STATE_DIR": str(state)}
    command = [unshare, "-rm", "sh", "-c", script, "sh", str(state)]
    write = [str(gm), "--repo", str(repo), "import", str(tmp_path / "in")]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "b.md").write_text("bee\n")
    done = subprocess.run([*command, *write], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gitmem: warning: {WARNING}"), lines
    assert "Read-only file system" in lines[0]
    read = [str(gm), "--repo", str(repo), "cat", "/memories/b.md"]
    done = subprocess.run([*command, *read], env=env, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, "bee\n")
    assert list(state.iterdir()) == []


def test_the_mcp_server_logs_it_on_stderr_not_in_the_protocol(tmp_path: Path, key: str) -> None:
    repo = cli_store(tmp_path, key)
    state = unusable_state(tmp_path)
    names = ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "PATH")
    env = {name: os.environ[name] for name in names if name in os.environ}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gitmem", "--repo", str(repo), "mcp"],
        env={
            **env,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GITMEM_KEY": key,
            "GITMEM_STATE_DIR": str(state),
        },
    )
    errlog = tmp_path / "stderr.txt"

    async def scenario() -> None:
        with errlog.open("w") as err:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                for name in ("x", "y"):
                    path = f"/memories/{name}.md"
                    args = {"command": "create", "path": path, "file_text": name}
                    result = await session.call_tool("memory", args)
                    assert not result.is_error

    anyio.run(scenario)
    lines = [line for line in errlog.read_text().splitlines() if WARNING in line]
    assert len(lines) == 1, errlog.read_text()
    assert str(state) in lines[0]
