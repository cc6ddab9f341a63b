"""A store no gitmem process is writing is a plain git repository: what a process logged in the
redo log is published when it ends (CLI, MCP server, library close and exit), and a local store
read as a remote is published first (design.md, "The redo log").

Exit behaviour is tested with real subprocesses; they write, then exit (or are killed).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

import gitmem
from gitmem.cli import main as cli_main
from gitmem.errors import LockTimeout, RemoteError
from gitmem.git.lock import LOCK_FILE
from gitmem.git.repo import GitRepo

# Every test here needs the redo log, which needs a boot id and syncfs (Linux).
pytestmark = pytest.mark.skipif(
    not Path("/proc/sys/kernel/random/boot_id").exists(), reason="the redo log needs Linux"
)


def env_with(key: str) -> dict[str, str]:
    return {**os.environ, "GITMEM_KEY": key}


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )


def assert_plain_git_reads(repo: Path, commits: int) -> None:
    """git reads the store with no gitmem involved: the branch holds ``commits`` commits."""
    log = git(repo, "log", "--format=%H", "main")
    assert log.returncode == 0, log.stderr
    assert len(log.stdout.split()) == commits
    fsck = git(repo, "fsck", "--strict")
    assert fsck.returncode == 0, fsck.stderr
    assert not GitRepo.log_pending_at(repo)


def run_python(code: str, key: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env_with(key),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def store(repo_path: Path, key: str) -> gitmem.MemoryStore:
    return gitmem.MemoryStore.init(repo_path, key)


def test_a_cli_write_leaves_a_plain_git_repository(
    store: gitmem.MemoryStore, repo_path: Path, key: str, tmp_path: Path
) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "a.md").write_text("hello\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gitmem",
            "--repo",
            str(repo_path),
            "import",
            str(tmp_path / "files"),
        ],
        env=env_with(key),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert_plain_git_reads(repo_path, 1)


def test_a_cli_write_whose_publish_fails_succeeds_with_a_warning(
    store: gitmem.MemoryStore,
    repo_path: Path,
    key: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(self: gitmem.MemoryStore) -> None:
        raise LockTimeout(f"another writer held the lock on {self.path} for over 30s")

    monkeypatch.setattr(gitmem.MemoryStore, "close", refuse)
    monkeypatch.setenv("GITMEM_KEY", key)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "a.md").write_text("hello\n")
    result = CliRunner().invoke(
        cli_main, ["--repo", str(repo_path), "import", str(tmp_path / "files")]
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr == (
        f"gitmem: warning: the writes were not published for git (another writer held the lock "
        f"on {repo_path} for over 30s); gitmem reads them, and `gitmem --repo {repo_path} "
        "checkpoint` publishes them\n"
    )
    assert GitRepo.log_pending_at(repo_path)  # the write itself is durable, in the log
    assert gitmem.MemoryStore.open(repo_path, key).read_text("/memories/a.md") == "hello\n"


def test_the_mcp_server_whose_publish_fails_warns_in_the_clis_words(
    store: gitmem.MemoryStore, repo_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # One owner of publishing at close (gitmem.store.close_for_exit), one wording of its warning.
    from gitmem import mcp_server

    def refuse() -> None:
        raise LockTimeout(f"another writer held the lock on {repo_path} for over 30s")

    store.create("/memories/a.md", "hello\n")
    store.close = refuse  # type: ignore[method-assign]
    with caplog.at_level("WARNING", logger="gitmem"):
        mcp_server._publish(store)
    assert [record.getMessage() for record in caplog.records] == [
        f"gitmem mcp: warning: the writes were not published for git (another writer held the "
        f"lock on {repo_path} for over 30s); gitmem reads them, and `gitmem --repo {repo_path} "
        "checkpoint` publishes them"
    ]


def test_a_library_write_is_in_the_log_until_close(store: gitmem.MemoryStore) -> None:
    store.create("/memories/a.md", "one\n")
    assert GitRepo.log_pending_at(store.path)
    assert store.repo.logged_here()
    with store:
        pass
    assert not GitRepo.log_pending_at(store.path)
    assert_plain_git_reads(store.path, 1)
    # Closed is still usable: the next write logs again, and close publishes it again.
    store.create("/memories/b.md", "two\n")
    assert GitRepo.log_pending_at(store.path)
    store.close()
    assert_plain_git_reads(store.path, 2)


def test_publishing_leaves_the_config_as_it_was_before_the_log(store: gitmem.MemoryStore) -> None:
    config = store.path / "config"
    before = config.read_bytes()
    assert b"extensions" not in before
    store.create("/memories/a.md", "one\n")
    assert b"[extensions]\n\tgitmemlog = true\n" in config.read_bytes()
    store.close()
    # Not even the empty section libgit2 leaves when it deletes the section's last key.
    assert config.read_bytes() == before
    assert_plain_git_reads(store.path, 1)


def test_publishing_keeps_the_users_own_extensions(store: gitmem.MemoryStore) -> None:
    config = store.path / "config"
    before = config.read_bytes() + b"[extensions]\n\tnoop = true\n"
    config.write_bytes(before)
    store.create("/memories/a.md", "one\n")
    assert b"[extensions]\n\tnoop = true\n\tgitmemlog = true\n" in config.read_bytes()
    store.close()
    assert config.read_bytes() == before
    assert_plain_git_reads(store.path, 1)


@pytest.mark.parametrize(
    ("config", "tidied"),
    [
        (b"[core]\n\tbare = true\n[extensions]\n", b"[core]\n\tbare = true\n"),
        (b"[Extensions]\n\n  \n[core]\n\tbare = true\n", b"[core]\n\tbare = true\n"),
        (b"[extensions]\n\tnoop = true\n", b"[extensions]\n\tnoop = true\n"),
        (b"[extensions]\n# the user's\n", b"[extensions]\n# the user's\n"),
        (b"[extensions] noop = true\n", b"[extensions] noop = true\n"),
        (b'[remote "extensions"]\n', b'[remote "extensions"]\n'),
    ],
)
def test_only_an_empty_extensions_section_is_dropped(config: bytes, tidied: bytes) -> None:
    assert gitmem.git.config._without_empty_extensions(config) == tidied


def test_the_tools_publish_when_closed(repo_path: Path, key: str) -> None:
    create = {"command": "create", "path": "/memories/a.md", "file_text": "one"}
    with gitmem.GitMemoryTool(repo_path, key=key) as tool:
        tool.call(create)
        assert GitRepo.log_pending_at(repo_path)
    assert_plain_git_reads(repo_path, 1)

    async def use() -> None:
        async with gitmem.AsyncGitMemoryTool(repo_path, key=key) as tool:
            await tool.call({**create, "path": "/memories/b.md"})
            assert GitRepo.log_pending_at(repo_path)

    anyio.run(use)
    assert_plain_git_reads(repo_path, 2)


def test_close_of_a_reader_publishes_nothing_and_needs_no_lock(
    store: gitmem.MemoryStore, repo_path: Path, key: str
) -> None:
    store.create("/memories/a.md", "one\n")
    reader = gitmem.MemoryStore.open(repo_path, key, lock_timeout=0.05)
    with holding_lock(repo_path):
        reader.close()  # wrote nothing here: no checkpoint, so no wait for the lock
    assert GitRepo.log_pending_at(repo_path)


def test_a_tool_process_that_exits_publishes(repo_path: Path, key: str) -> None:
    done = run_python(
        f"""
        import gitmem, gitmem.tool
        tool = gitmem.GitMemoryTool({str(repo_path)!r}, session="s")
        tool.call({{"command": "create", "path": "/memories/a.md", "file_text": "one"}})
        tool.call({{"command": "create", "path": "/memories/b.md", "file_text": "two"}})
        """,
        key,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert_plain_git_reads(repo_path, 2)


def test_a_killed_writer_leaves_the_log_which_gitmem_reads(
    store: gitmem.MemoryStore, repo_path: Path, key: str
) -> None:
    done = run_python(
        f"""
        import os, signal, gitmem
        s = gitmem.MemoryStore.open({str(repo_path)!r})
        s.create("/memories/a.md", "kept\\n")
        os.kill(os.getpid(), signal.SIGKILL)
        """,
        key,
    )
    assert done.returncode == -signal.SIGKILL
    assert GitRepo.log_pending_at(repo_path)
    refused = git(repo_path, "log", "main")
    assert refused.returncode != 0
    assert "gitmemlog" in refused.stderr
    fresh = gitmem.MemoryStore.open(repo_path, key)
    assert fresh.read_text("/memories/a.md") == "kept\n"
    assert fresh.verify().ok


def test_a_publish_at_exit_that_cannot_lock_warns_and_exits(
    store: gitmem.MemoryStore, repo_path: Path, key: str
) -> None:
    code = f"""
        import sys, gitmem, gitmem.git.repo
        gitmem.git.repo.EXIT_LOCK_SECONDS = 0.2
        s = gitmem.MemoryStore.open({str(repo_path)!r})
        s.create("/memories/a.md", "one\\n")
        print("written", flush=True)
        sys.stdin.readline()  # the test now holds the writer lock
        """
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env_with(key),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "written\n"
    with holding_lock(repo_path):
        # The exit waits 0.2 s for the lock, not 60: the timeout only stops a hung test.
        _, stderr = child.communicate("go\n", timeout=60)
    assert child.returncode == 0, stderr
    assert "were not published at exit" in stderr
    assert f"gitmem --repo {repo_path} checkpoint" in stderr
    assert "Traceback" not in stderr
    assert GitRepo.log_pending_at(repo_path)
    assert gitmem.MemoryStore.open(repo_path, key).read_text("/memories/a.md") == "one\n"


def test_a_forked_child_does_not_publish_its_parents_writes(
    store: gitmem.MemoryStore, repo_path: Path, key: str
) -> None:
    done = run_python(
        f"""
        import os, sys, gitmem
        s = gitmem.MemoryStore.open({str(repo_path)!r})
        s.create("/memories/a.md", "one\\n")
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # runs the exit handlers of the child
        os.waitpid(pid, 0)
        print(gitmem.git.repo.GitRepo.log_pending_at({str(repo_path)!r}), flush=True)
        """,
        key,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"  # the child left the log to the parent
    assert_plain_git_reads(repo_path, 1)  # which published it when it exited


def test_the_mcp_server_publishes_when_stdin_closes(
    store: gitmem.MemoryStore, repo_path: Path, key: str
) -> None:
    server = start_mcp(repo_path, key)
    call_create(server)
    server.communicate(timeout=60)  # closes stdin: the client went away
    assert server.returncode == 0
    assert_plain_git_reads(repo_path, 1)


@pytest.mark.parametrize("receiver", ["process", "other threads"])
def test_the_mcp_server_publishes_on_sigterm(
    store: gitmem.MemoryStore, repo_path: Path, key: str, receiver: str
) -> None:
    server = start_mcp(repo_path, key)
    call_create(server)
    if receiver == "process":
        server.send_signal(signal.SIGTERM)
    else:
        # The kernel may hand a process's signal to any thread that does not block it: here
        # the one blocked reading stdin. Python runs the handler on the main thread only, which
        # sat in the idle event loop's select() until something woke it.
        others = [int(t) for t in os.listdir(f"/proc/{server.pid}/task") if int(t) != server.pid]
        assert others  # the stdin reader at least
        tgkill = ctypes.CDLL(None, use_errno=True).tgkill
        for tid in others:
            tgkill(server.pid, tid, signal.SIGTERM)  # one that has exited since is ESRCH: fine
    assert wait_for_exit(server) == -signal.SIGTERM
    assert_plain_git_reads(repo_path, 1)


def test_the_mcp_server_publishes_once_when_a_second_signal_comes_while_it_does(
    store: gitmem.MemoryStore, repo_path: Path, key: str
) -> None:
    # The second signal (Ctrl-C, then SIGTERM) arrives while the first one's publish holds the
    # writer lock: it must not start another publish, which would wait for that very lock.
    code = """
        import os, signal, sys
        from gitmem.git import repo as git_repo
        from gitmem.cli import main
        checkpoint = git_repo.GitRepo._checkpoint
        def second_signal(self, *args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            return checkpoint(self, *args, **kwargs)
        git_repo.GitRepo._checkpoint = second_signal
        main(sys.argv[1:])
        """
    server = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), "--repo", str(repo_path), "mcp"],
        env=env_with(key),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    call_create(server)
    server.send_signal(signal.SIGTERM)
    try:
        _, stderr = server.communicate(timeout=120)  # only stops a hung test
    finally:
        server.kill()
    assert server.returncode == -signal.SIGTERM, stderr
    assert "not published" not in stderr
    assert_plain_git_reads(repo_path, 1)


def test_a_pull_from_a_local_store_publishes_it_first(tmp_path: Path, key: str) -> None:
    a = gitmem.MemoryStore.init(tmp_path / "a.git", key)
    a.create("/memories/one.md", "one\n")
    a.checkpoint()
    b = gitmem.MemoryStore.clone(str(tmp_path / "a.git"), tmp_path / "b.git", key)
    a.create("/memories/two.md", "two\n")
    a_head = a.head()
    assert GitRepo.log_pending_at(a.path)
    result = b.pull("origin")
    assert result.action == "fast-forward"
    assert b.head() == a_head
    assert b.read_text("/memories/two.md") == "two\n"
    # A clone through a file:// URL sees the unpublished write as well.
    a.create("/memories/three.md", "three\n")
    c = gitmem.MemoryStore.clone(f"file://{tmp_path / 'a.git'}", tmp_path / "c.git", key)
    assert c.read_text("/memories/three.md") == "three\n"


@pytest.mark.parametrize("why", ["read-only", "locked"])
def test_a_local_store_whose_writes_cannot_be_published_is_refused(
    tmp_path: Path, key: str, why: str
) -> None:
    a = gitmem.MemoryStore.init(tmp_path / "a.git", key)
    a.create("/memories/one.md", "one\n")
    a.checkpoint()
    b = gitmem.MemoryStore.clone(
        str(tmp_path / "a.git"), tmp_path / "b.git", key, lock_timeout=0.05
    )
    a.create("/memories/two.md", "two\n")
    before = sorted(str(p.relative_to(b.path)) for p in b.path.rglob("*"))
    b_head = b.head()
    unusable = read_only if why == "read-only" else holding_lock
    with unusable(tmp_path / "a.git"):
        with pytest.raises(RemoteError, match="checkpoint") as refused:
            b.pull("origin")
        assert str(tmp_path / "a.git") in str(refused.value)
        with pytest.raises(RemoteError, match="checkpoint"):
            gitmem.MemoryStore.clone(
                str(tmp_path / "a.git"), tmp_path / "c.git", key, lock_timeout=0.05
            )
    assert b.head() == b_head
    assert sorted(str(p.relative_to(b.path)) for p in b.path.rglob("*")) == before
    assert not (tmp_path / "c.git").exists()
    assert GitRepo.log_pending_at(a.path)  # nothing of A was touched either


# -- helpers ----------------------------------------------------------------------------------


@contextlib.contextmanager
def holding_lock(repo: Path) -> Iterator[None]:
    """Hold the store's writer lock from another open file (as another process would)."""
    fd = os.open(repo / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def read_only(repo: Path) -> Iterator[None]:
    """Make the store read-only for this user (every directory and the lock file)."""
    if os.geteuid() == 0:
        pytest.skip("root writes read-only files")
    changed = [repo, *[p for p in repo.rglob("*") if p.is_dir()], repo / LOCK_FILE]
    modes = {p: p.stat().st_mode for p in changed}
    for p in changed:
        p.chmod(modes[p] & ~0o222)
    try:
        yield
    finally:
        for p in changed:
            p.chmod(modes[p])


def start_mcp(repo: Path, key: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gitmem", "--repo", str(repo), "mcp"],
        env={**env_with(key), "PYTHONFAULTHANDLER": "1"},  # see wait_for_exit
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_exit(server: subprocess.Popen[str]) -> int:
    """Wait for ``server`` (with its stdin left open) to end; its exit status. One still
    running after 60 s (hung) is made to print its threads' stacks (faulthandler, on SIGABRT)
    into the failure: a hang seen once on a loaded machine showed nothing of where it was."""
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.send_signal(signal.SIGABRT)
        _, stderr = server.communicate(timeout=60)
        pytest.fail(f"the server did not end; where its threads were:\n{stderr[-8000:]}")
    server.communicate(timeout=60)
    return server.returncode


def call_create(server: subprocess.Popen[str]) -> None:
    """Initialize the MCP session and create one file; returns once the write is answered."""
    assert server.stdin is not None and server.stdout is not None
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    create = {"command": "create", "path": "/memories/a.md", "file_text": "one"}
    call = {"name": "memory", "arguments": create}
    messages.append({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    for message in messages:
        server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()
    while True:
        line = server.stdout.readline()
        assert line, "the server exited before answering"
        answer = json.loads(line)
        if answer.get("id") == 2:
            assert not answer["result"].get("isError"), answer
            return
