"""A remote that accepts connections and never answers: every transfer gives up after the
network timeout with one clear RemoteError (exit 10), and the memory tool opens regardless."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers_git_servers import silent_host

from gitmem import GitMemoryTool, MemoryStore, RemoteError, UsageError, autosync
from gitmem.cli import main

TIMEOUT = 0.5
# "It returned" is what is asserted, not how fast: a loaded machine may be slow to wake up.
RETURNED_WITHIN = 20 * TIMEOUT


def silence(url: str, seconds: float = TIMEOUT) -> str:
    return (
        f"the remote {url} did not answer within {seconds:g} s; try again later, or allow it "
        "longer with --timeout or GITMEM_NETWORK_TIMEOUT"
    )


@pytest.fixture
def port() -> Iterator[int]:
    with silent_host() as found:
        yield found


@pytest.fixture
def store(tmp_path: Path, key: str) -> MemoryStore:
    made = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "sa")
    made.create("/memories/a.md", "kept\n")
    return made


@pytest.mark.parametrize(
    "url",
    [
        "git://127.0.0.1:{port}/memory.git",
        "http://127.0.0.1:{port}/memory.git",
        "https://127.0.0.1:{port}/memory.git",
        "ssh://git@127.0.0.1:{port}/memory.git",
    ],
    ids=["git", "http", "https", "ssh"],
)
def test_pull_from_a_silent_host_gives_up_on_every_transport(
    store: MemoryStore, port: int, url: str
) -> None:
    url = url.format(port=port)
    head = store.head()
    started = time.monotonic()
    with pytest.raises(RemoteError) as raised:
        store.pull(url, timeout=TIMEOUT)
    assert time.monotonic() - started < RETURNED_WITHIN
    assert str(raised.value) == silence(url)
    assert raised.value.exit_code == 10
    assert store.head() == head


def test_push_sync_and_clone_give_up_too(
    store: MemoryStore, port: int, tmp_path: Path, key: str
) -> None:
    url = f"git://127.0.0.1:{port}/memory.git"
    calls: dict[str, Callable[[], object]] = {
        "push": lambda: store.push(url, timeout=TIMEOUT),
        "sync": lambda: store.sync(url, timeout=TIMEOUT),
        "clone": lambda: MemoryStore.clone(url, tmp_path / "b.git", key, timeout=TIMEOUT),
    }
    for name, call in calls.items():
        started = time.monotonic()
        with pytest.raises(RemoteError) as raised:
            call()
        assert time.monotonic() - started < RETURNED_WITHIN, name
        assert str(raised.value) == silence(url), name
    assert not (tmp_path / "b.git").exists()


def test_the_timeout_comes_from_the_options_then_the_environment(
    store: MemoryStore, port: int, tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"git://127.0.0.1:{port}/memory.git"
    other = MemoryStore.open(store.path, key, state_dir=tmp_path / "sa", network_timeout=0.4)
    with pytest.raises(RemoteError) as raised:
        other.pull(url)
    assert str(raised.value) == silence(url, 0.4)
    monkeypatch.setenv("GITMEM_NETWORK_TIMEOUT", "0.3")
    with pytest.raises(RemoteError) as raised:
        store.pull(url)
    assert str(raised.value) == silence(url, 0.3)
    # The call's own timeout comes first.
    with pytest.raises(RemoteError) as raised:
        store.pull(url, timeout=TIMEOUT)
    assert str(raised.value) == silence(url, 0.5)
    monkeypatch.setenv("GITMEM_NETWORK_TIMEOUT", "soon")
    with pytest.raises(UsageError) as refused:
        store.pull(url)
    assert str(refused.value) == (
        "GITMEM_NETWORK_TIMEOUT must be a number of seconds above 0 and at most 86400, not 'soon'"
    )
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="timeout must be more than 0 seconds"):
            store.pull(url, timeout=bad)
        with pytest.raises(UsageError, match="network_timeout must be more than 0 seconds"):
            MemoryStore.open(store.path, key, network_timeout=bad)
    with pytest.raises(TypeError, match="network_timeout must be a number of seconds, not str"):
        MemoryStore.open(store.path, key, network_timeout="30")  # type: ignore[arg-type]


def test_the_command_line_says_so_and_exits_10(
    store: MemoryStore, port: int, key: str, tmp_path: Path
) -> None:
    url = f"git://127.0.0.1:{port}/memory.git"
    env = {"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(tmp_path / "sa")}
    # The line docs/sync.md shows, there for the default timeout and a host named "host".
    doc = (Path(__file__).resolve().parent.parent / "docs" / "sync.md").read_text()
    shown = next(line for line in doc.splitlines() if "did not answer within" in line)
    expected = shown.replace("git://host/memory.git", url).replace("30 s", "0.5 s") + "\n"
    assert expected == f"gitmem: error: {silence(url)}\n"
    for command in ("pull", "push", "sync"):
        result = CliRunner().invoke(
            main, ["--repo", str(store.path), command, url, "--timeout", "0.5"], env=env
        )
        assert (result.exit_code, result.stderr) == (10, f"gitmem: error: {silence(url)}\n")
    result = CliRunner().invoke(
        main, ["clone", url, str(tmp_path / "b.git")], env={**env, "GITMEM_NETWORK_TIMEOUT": "0.5"}
    )
    assert (result.exit_code, result.stderr) == (10, f"gitmem: error: {silence(url)}\n")
    result = CliRunner().invoke(
        main, ["--repo", str(store.path), "pull", url, "--timeout", "0"], env=env
    )
    assert result.exit_code == 2
    assert "timeout must be more than 0 seconds and at most 86400, not 0.0" in result.stderr


def test_a_tool_that_pulls_from_a_silent_host_opens_and_works(
    port: int, tmp_path: Path, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"git://127.0.0.1:{port}/memory.git"
    started = time.monotonic()
    tool = GitMemoryTool(
        tmp_path / "a.git",
        key=key,
        state_dir=tmp_path / "sa",
        remote=url,
        sync="pull",
        network_timeout=TIMEOUT,
    )
    assert time.monotonic() - started < RETURNED_WITHIN
    assert str(tool.autosync.last_error) == silence(url)
    command = {"command": "create", "path": "/memories/a.md", "file_text": "kept\n"}
    assert tool.call(command) == "File created successfully at: /memories/a.md"
    assert "a.md" in tool.call({"command": "view", "path": "/memories"})
    tool.close()


def test_a_pull_slower_than_the_open_bound_goes_on_in_the_background(
    port: int,
    tmp_path: Path,
    key: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The network timeout is longer than the tool waits when opened: the tool opens once the
    # bound passes, and the pull, still running, fails later without raising anywhere.
    monkeypatch.setattr(autosync, "OPEN_WAIT", 0.2)
    url = f"git://127.0.0.1:{port}/memory.git"
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="gitmem.sync"):
        tool = GitMemoryTool(
            tmp_path / "a.git",
            key=key,
            state_dir=tmp_path / "sa",
            remote=url,
            sync="push",
            network_timeout=3.0,
        )
        assert time.monotonic() - started < 3.0
        assert tool.autosync.last_error is None
        command = {"command": "create", "path": "/memories/a.md", "file_text": "kept\n"}
        assert tool.call(command) == "File created successfully at: /memories/a.md"
        assert tool.autosync.wait(60)
    assert str(tool.autosync.last_error) == silence(url, 3.0)
    assert any("has not finished after 0.2 s" in r.getMessage() for r in caplog.records)
    assert tool.store.files() == {"/memories/a.md": "kept\n"}
    tool.close()
