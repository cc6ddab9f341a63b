"""Worker processes for the durability and concurrency tests, forked from a fork server.

Importing the SDK takes seconds, too slow to start a fresh interpreter for each of dozens of
killed writers, so a ``multiprocessing`` fork server imports gitmem once and forks every worker
from it. A worker is still a separate process with its own pygit2 handles, file locks and pid,
which is what SIGKILL and the writer lock need. Each worker installs the test's environment
itself (the server keeps whatever environment it started with) and acknowledges a write by
appending a line to a file with one unbuffered ``os.write`` after the tool call has returned,
so an acknowledgement never precedes its write and survives the worker's SIGKILL.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import select
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

from gitmem import GitMemoryTool, generate_key
from gitmem.git import flush
from gitmem.git.flush import Durability
from gitmem.git.repo import GitRepo

LOG = "/memories/log.md"
SHARED = "/memories/shared.md"

_CONTEXT: ForkServerContext | None = None


def context() -> ForkServerContext:
    """The fork server every worker of these tests starts from (gitmem preloaded)."""
    global _CONTEXT
    if _CONTEXT is None:
        ctx = multiprocessing.get_context("forkserver")
        assert isinstance(ctx, ForkServerContext)
        ctx.set_forkserver_preload(["gitmem", "gitmem.tool"])
        # Start the server now (seconds: it imports the SDK), so no test times its start.
        warm = ctx.Process(target=_nothing)
        warm.start()
        warm.join()
        _CONTEXT = ctx
    return _CONTEXT


def _nothing() -> None:
    pass


def worker_env(key: str) -> dict[str, str]:
    """The test's environment (hermetic HOME, state and git config) plus the store key."""
    env = dict(os.environ)
    env["GITMEM_KEY"] = key
    return env


def read_acks(path: Path) -> list[str]:
    """The acknowledgement lines a worker wrote (none if it died before the first)."""
    try:
        return path.read_text("utf-8").splitlines()
    except FileNotFoundError:
        return []


def _use_environment(env: Mapping[str, str]) -> None:
    """In a worker: the test's environment, and the write mode of its stores (tests/conftest.py,
    ``write_mode``): the fork server that forked the worker may have started under another."""
    os.environ.clear()
    os.environ.update(env)
    modes = flush.platform_modes()
    chosen = {mode.name: mode for mode in modes}.get(env.get("GITMEM_TEST_WRITE_MODE", ""))
    mode = modes[0] if chosen is None else chosen
    flush.default_mode = lambda: mode


def _open_tool(repo: str, env: Mapping[str, str], session: str) -> GitMemoryTool:
    _use_environment(env)
    return GitMemoryTool(repo, session=session)


def _acker(ack_path: str) -> Callable[[str], None]:
    fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def ack(line: str) -> None:
        os.write(fd, (line + "\n").encode("utf-8", "backslashreplace"))

    return ack


@contextlib.contextmanager
def _reporting(ack: Callable[[str], None]) -> Iterator[None]:
    # The test reads failures from the acknowledgement file, not from the fork server's stderr.
    try:
        yield
    except BaseException as exc:
        ack(f"error {type(exc).__name__}: {exc}".replace("\n", " "))
        raise


def _wait_until(start_at: float) -> None:
    while time.time() < start_at:
        time.sleep(0.001)


# -- the writer stream that gets killed ----------------------------------------------------


def stream_text(i: int) -> str:
    """The content of the file write ``i`` of the stream creates (a small memory file)."""
    return f"# note {i}\n" + "".join(f"- fact {i}.{k}: the value is {i * k}\n" for k in range(8))


def stream_command(i: int) -> dict[str, Any]:
    """Write ``i`` of the stream: even ones create a file, odd ones insert at the log's top."""
    if i % 2 == 0:
        return {"command": "create", "path": f"/memories/w/{i}.md", "file_text": stream_text(i)}
    return {"command": "insert", "path": LOG, "insert_line": 0, "insert_text": f"entry {i}"}


def writer(repo: str, env: dict[str, str], ack_path: str, first: int, count: int) -> None:
    """Run writes ``first..first+count-1`` of the stream, acknowledging each."""
    ack = _acker(ack_path)
    with _reporting(ack):
        tool = _open_tool(repo, env, f"writer-{first}")
        ack("open")
        for i in range(first, first + count):
            tool.call(stream_command(i))
            ack(str(i))


def fault(repo: str, env: dict[str, str], ack_path: str, point: str, i: int) -> None:
    """Run stream write ``i`` and SIGKILL this process just before or after the ref moves."""
    ack = _acker(ack_path)
    tool = _open_tool(repo, env, f"fault-{point}")
    original = GitRepo.update_ref

    def dying_update_ref(
        self: GitRepo, name: str, new: str, expected: str | None, *, wait: bool = True
    ) -> Durability:
        if point == "after-ref":
            original(self, name, new, expected)  # durable, before the process dies
        ack(f"{point} {new}")
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: SIGKILL")

    GitRepo.update_ref = dying_update_ref  # type: ignore[method-assign]
    with _reporting(ack):
        tool.call(stream_command(i))
        ack(str(i))  # never reached: the process is dead by now


def creator(repo: str, env: dict[str, str], ack_path: str) -> None:
    """Create the store at ``repo`` (the test kills this at a random moment)."""
    ack = _acker(ack_path)
    with _reporting(ack):
        _use_environment(env)
        ack("start")
        GitMemoryTool(repo, session="creator")
        ack("open")


# -- concurrent writers ----------------------------------------------------------------------


def slot_line(worker: int, n: int) -> str:
    """The shared file's line counting worker ``worker``'s str_replace edits."""
    return f"slot-{worker}: {n}\n"


def shared_initial(workers: int) -> str:
    """The shared file's content before the workers start."""
    return "".join(slot_line(w, 0) for w in range(workers))


def mixed_command(worker: int, j: int) -> dict[str, Any]:
    """Write ``j`` of worker ``worker``: a create, an insert at line 0 or a str_replace.

    The str_replace edits count up the worker's own slot line of the shared file, so the final
    count shows how many of them landed.
    """
    kind = j % 3
    if kind == 0:
        return {
            "command": "create",
            "path": f"/memories/p{worker}/{j}.md",
            "file_text": f"worker {worker} write {j}\n",
        }
    if kind == 1:
        return {
            "command": "insert",
            "path": SHARED,
            "insert_line": 0,
            "insert_text": f"w{worker}-{j}",
        }
    n = j // 3
    return {
        "command": "str_replace",
        "path": SHARED,
        "old_str": slot_line(worker, n),
        "new_str": slot_line(worker, n + 1),
    }


def mixed(
    repo: str, env: dict[str, str], ack_path: str, worker: int, count: int, start_at: float
) -> None:
    """Open the tool, wait for the common start time, then run ``count`` mixed writes."""
    ack = _acker(ack_path)
    with _reporting(ack):
        tool = _open_tool(repo, env, f"proc-{worker}")
        _wait_until(start_at)
        for j in range(count):
            tool.call(mixed_command(worker, j))
            ack(str(j))


def racer(repo: str, env: dict[str, str], ack_path: str, tag: str, start_at: float) -> None:
    """At ``start_at``, open (so create) the store at ``repo`` and write one file."""
    ack = _acker(ack_path)
    with _reporting(ack):
        _use_environment(env)
        _wait_until(start_at)
        tool = GitMemoryTool(repo, session=f"racer-{tag}")
        tool.call({"command": "create", "path": f"/memories/{tag}.md", "file_text": f"{tag}\n"})
        ack(f"done {tool.store.store_id}")


def reader(repo: str, env: dict[str, str], ack_path: str, stop_path: str) -> None:
    """View the shared file and the root over and over until ``stop_path`` exists."""
    ack = _acker(ack_path)
    with _reporting(ack):
        tool = _open_tool(repo, env, "reader")
        views = 0
        while not os.path.exists(stop_path):
            tool.call({"command": "view", "path": SHARED})
            tool.call({"command": "view", "path": "/memories"})
            views += 2
        ack(f"views {views}")


def holder(repo: str, ack_path: str) -> None:
    """Take the store's writer lock the way gitmem does and keep it until killed."""
    ack = _acker(ack_path)
    with GitRepo(repo).write_lock(5.0):
        ack("locked")
        while True:
            time.sleep(1)


# -- a real full filesystem (run as a script inside a private mount namespace) ---------------


def _fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        for size in (1 << 16, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)


def full_disk(mount: Path) -> dict[str, Any]:
    """Write to a store on the nearly empty filesystem ``mount``, fill it, write again.

    Returns what each command on the full filesystem said and whether the branch stayed put,
    whether the store verified while full, and whether a write succeeded once space was freed.
    """
    from anthropic.lib.tools import ToolError

    os.environ["GITMEM_STATE_DIR"] = str(mount / "state")
    tool = GitMemoryTool(mount / "store.git", key=generate_key(), session="full-disk")
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "alpha\nbeta\n"})
    tool.call({"command": "create", "path": "/memories/d/b.md", "file_text": "b\n"})
    head, files = tool.store.head(), tool.store.files()
    _fill(mount / "filler")
    commands: list[dict[str, Any]] = [
        {"command": "create", "path": "/memories/c.md", "file_text": "c" * 5000},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "g"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "top"},
        {"command": "rename", "old_path": "/memories/d/b.md", "new_path": "/memories/e.md"},
        {"command": "delete", "path": "/memories/a.md"},
    ]
    results: list[dict[str, Any]] = []
    for command in commands:
        outcome: dict[str, Any]
        before = tool.store.head()
        try:
            outcome = {"output": tool.call(command)}
        except ToolError as exc:
            outcome = {"error": str(exc)}
        outcome["command"] = command["command"]
        outcome["head_unmoved"] = tool.store.head() == before
        results.append(outcome)
    report: dict[str, Any] = {
        "results": results,
        "files_unchanged": tool.store.files() == files and tool.store.head() == head,
        "verify_while_full": tool.store.verify().problems,
    }
    os.unlink(mount / "filler")
    report["sweep"] = _sweep(tool, mount / "pages")
    report["write_after"] = tool.call(
        {"command": "create", "path": "/memories/after.md", "file_text": "after\n"}
    )
    report["verify_after"] = tool.store.verify().problems
    report["commits"] = len(list(tool.store.log()))
    return report


def _sweep(tool: GitMemoryTool, pages: Path) -> list[dict[str, Any]]:
    """Fill the filesystem with page-sized files, free ``k`` of them, write; for k = 0..15.

    A write needs a handful of pages (objects, the ref's lock file, the high-water mark), so the
    failure lands at a different step for each ``k``, the ref update included.
    """
    from anthropic.lib.tools import ToolError

    pages.mkdir()
    made = 0
    outcomes: list[dict[str, Any]] = []
    for free in range(16):
        with contextlib.suppress(OSError):
            while True:
                (pages / str(made)).write_bytes(b"\0" * 4096)
                made += 1
        for _ in range(free):
            made -= 1
            (pages / str(made)).unlink()
        before = list(tool.store.log())
        text = f"sweep {free}\n" * 200
        path = f"/memories/sweep/{free}.md"
        try:
            outcome: dict[str, Any] = {
                "output": tool.call({"command": "create", "path": path, "file_text": text})
            }
        except ToolError as exc:
            outcome = {"error": str(exc)}
        after = list(tool.store.log())
        outcome["free_pages"] = free
        outcome["new_commits"] = len(after) - len(before)
        outcome["head_moved"] = after[0].commit != before[0].commit
        outcome["content_ok"] = tool.store.files().get(path) == text
        outcomes.append(outcome)
    for page in pages.iterdir():
        page.unlink()
    return outcomes


if __name__ == "__main__":
    import json
    import sys

    if sys.argv[1:2] == ["full-disk"]:
        print(json.dumps(full_disk(Path(sys.argv[2]))))


def in_forked_child(
    action: Callable[[], object], timeout: float = 120.0, then: Callable[[], object] = _nothing
) -> str:
    """Run ``action`` in a child forked from this process (threads, locks and all), while
    ``then`` runs here; ``"ok"``, ``"<ErrorClass>: <message>"``, or ``"hung"`` when the child
    has not answered within ``timeout`` seconds (it is killed then)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        try:
            action()
            out = "ok"
        except BaseException as exc:  # reported to the parent, whatever it is
            out = f"{type(exc).__name__}: {exc}"
        os.write(write_end, out.encode()[:4000])
        os._exit(0)
    os.close(write_end)
    try:
        then()
        ready, _, _ = select.select([read_end], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            return "hung"
        return os.read(read_end, 4096).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
