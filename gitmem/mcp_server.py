"""``gitmem mcp``: the memory tool and the audit commands as a stdio MCP server.

A thin adapter: the ``memory`` tool hands its arguments to :class:`~gitmem.tool.AsyncGitMemoryTool`
(the same validation, dispatch and strings Claude gets through the SDK), and the audit tools are
calls into :mod:`gitmem.history` printed as the JSON objects of ``gitmem ... --json``. A refused
call comes back as a tool result with ``isError`` and the memory tool's error text; nothing a
client sends stops the server. This is the only module that imports the ``mcp`` package.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Protocol

import anyio
from anthropic.lib.tools import ToolError
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus
from anyio.to_thread import run_sync
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from . import history
from . import paths as memory_paths
from ._version import __version__
from .errors import UsageError, reporting_rollback_off, shown
from .revisions import parse_time
from .store import MemoryStore, close_for_exit
from .tool import COMMAND_FIELDS, AsyncGitMemoryTool, MemoryCommands

_JSON_TYPES = {str: "string", int: "integer"}
_log = logging.getLogger("gitmem")


def memory_input_schema() -> dict[str, Any]:
    """The ``memory`` tool's input schema: the fields of Claude's memory tool (memory_20250818)."""
    properties: dict[str, Any] = {
        "command": {
            "type": "string",
            "enum": list(COMMAND_FIELDS),
            "description": "The memory command to run.",
        }
    }
    for fields in COMMAND_FIELDS.values():
        for name, kind in fields.items():
            properties.setdefault(name, {"type": _JSON_TYPES[kind]})
    properties["view_range"] = {
        "type": "array",
        "items": {"type": "integer"},
        "description": "view only: [start, end] lines, 1-based; end -1 reads to the end.",
    }
    return {"type": "object", "properties": properties, "required": ["command"]}


MEMORY_DESCRIPTION = """\
Claude's memory tool (memory_20250818): a persistent /memories directory that outlives this \
conversation, encrypted and versioned by gitmem. Commands: view (a directory listing or a file \
with line numbers, optionally view_range), create (path, file_text), str_replace (path, old_str, \
new_str), insert (path, insert_line, insert_text), delete (path), rename (old_path, new_path). \
Every path starts with /memories. Always view /memories before starting a task, and record \
progress as you go: the context may be reset at any moment."""

_READ_ONLY = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _schema(properties: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


_REV = "A revision: a commit id (or 4+ digits of one), HEAD, HEAD~N, session:NAME, @{TIME}."

AUDIT_TOOLS = (
    types.Tool(
        name="memory_log",
        description="The memory's history, newest first: one JSON object per operation (id, "
        "time, session, command, paths), filtered; with patch, each with its decrypted diff.",
        input_schema=_schema(
            {
                "rev": _string("Start here instead of the head. " + _REV),
                "path": _string("Only operations that touched this memory path (follows renames)."),
                "session": _string("Only operations of this session."),
                "command": _string("Only operations of this command (create, str_replace, ...)."),
                "since": _string("At or after this time: ISO 8601, or 90m, 2h, 3d, 1w ago."),
                "until": _string("At or before this time."),
                "max_count": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "At most this many operations (default 50).",
                },
                "patch": {"type": "boolean", "description": "Add each operation's diff."},
            }
        ),
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="memory_show",
        description="One operation (default: the newest) as JSON, with the diff it made.",
        input_schema=_schema({"rev": _string(_REV)}),
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="memory_blame",
        description="For each line of a memory file, the operation (session, time) that last "
        "wrote it: one JSON object per line.",
        input_schema=_schema(
            {"path": _string("A memory file, /memories/..."), "rev": _string(_REV)}, ["path"]
        ),
        annotations=_READ_ONLY,
    ),
    types.Tool(
        name="memory_sessions",
        description="One JSON object per session: first and last time, operations by command, "
        "paths touched; most recently active first.",
        input_schema=_schema({}),
        annotations=_READ_ONLY,
    ),
)

RESTORE_TOOL = types.Tool(
    name="memory_restore",
    description="Make the memory (or only the given paths) what it was at a revision, as one "
    "new operation; history is kept. With dry_run, only the changes it would make.",
    input_schema=_schema(
        {
            "rev": _string("The state to bring back. " + _REV),
            "paths": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only these memory files or directories (default: everything).",
            },
            "dry_run": {"type": "boolean", "description": "Show the changes; write nothing."},
        },
        ["rev"],
    ),
    annotations=types.ToolAnnotations(destructive_hint=False, open_world_hint=False),
)

DEFAULT_LOG_COUNT = 50


_KIND_NAMES = {str: "a string", int: "an integer", bool: "true or false", list: "a list"}


def _arg(args: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    """Argument ``name`` of an audit tool, refused in the memory tool's words when mistyped;
    ``default`` when it is missing or null (a model writes ``"rev": null`` for "not given")."""
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ToolError(f"Error: the `{name}` parameter must be {_KIND_NAMES[kind]}")
    return value


def _check_parameters(tool: str, args: dict[str, Any], known: list[str]) -> None:
    """Refuse an argument ``tool`` does not take: ignoring a misspelt filter (``paths`` for
    ``path``) would answer with the whole history as if it were the filtered one."""
    unknown = [name for name in args if name not in known]
    if unknown:
        takes = f"its parameters are: {', '.join(known)}" if known else "it takes no parameters"
        raise ToolError(f"Error: {tool} has no parameter `{shown(unknown[0])}`; {takes}")


def _lines(objects: Iterable[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(o, ensure_ascii=False, sort_keys=True) for o in objects)


class MemoryServer:
    """The MCP tools over one open store; every write is labelled with the store's session."""

    def __init__(self, store: MemoryStore, *, allow_restore: bool = False) -> None:
        self.store = store
        self.allow_restore = allow_restore
        self.memory = AsyncGitMemoryTool(store)
        self._commands = MemoryCommands(store)
        self._audit: dict[str, Callable[[dict[str, Any]], str]] = {
            "memory_log": self._log,
            "memory_show": self._show,
            "memory_blame": self._blame,
            "memory_sessions": self._sessions,
        }
        if allow_restore:
            self._audit["memory_restore"] = self._restore
        self._parameters = {
            tool.name: list(tool.input_schema["properties"])
            for tool in (*AUDIT_TOOLS, RESTORE_TOOL)
        }

    def tools(self) -> list[types.Tool]:
        """Every tool this server offers: ``memory``, the audit tools, restore if allowed."""
        memory = types.Tool(
            name="memory",
            description=MEMORY_DESCRIPTION,
            input_schema=memory_input_schema(),
            annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=False),
        )
        return [memory, *AUDIT_TOOLS, *([RESTORE_TOOL] if self.allow_restore else [])]

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Run tool ``name``; a refusal or failure is a result with ``is_error``, never raised."""
        try:
            if name == "memory":
                text = await self.memory.call(arguments)
            elif name in self._audit:
                action = self._audit[name]
                args = arguments or {}
                _check_parameters(name, args, self._parameters[name])
                text = await run_sync(lambda: self._commands.run(lambda: action(args)))
            else:
                return _result(f"Error: no tool named {name!r}", error=True)
        except ToolError as exc:
            message = exc.content if isinstance(exc.content, str) else str(exc)
            return _result(message, error=True)
        return _result(text)

    # The audit tools: each one call into gitmem.history (run on a worker thread).

    def _log(self, args: dict[str, Any]) -> str:
        path = _arg(args, "path", str)
        since, until = _arg(args, "since", str), _arg(args, "until", str)
        ops = history.log(
            self.store,
            _arg(args, "rev", str),
            paths=[] if path is None else [memory_paths.parse(path)],
            session=_arg(args, "session", str),
            command=_arg(args, "command", str),
            since=None if since is None else parse_time(since),
            until=None if until is None else parse_time(until),
            max_count=_arg(args, "max_count", int, DEFAULT_LOG_COUNT),
        )
        patch = bool(_arg(args, "patch", bool, False))
        return _lines(history.operation_json(self.store, op, patch=patch) for op in ops)

    def _show(self, args: dict[str, Any]) -> str:
        op = self.store.operation(_arg(args, "rev", str, "HEAD"))
        return _lines([history.operation_json(self.store, op, patch=True)])

    def _blame(self, args: dict[str, Any]) -> str:
        path = _arg(args, "path", str)
        if path is None:
            raise ToolError("Error: memory_blame needs the `path` parameter")
        lines = history.blame(self.store, memory_paths.parse(path), _arg(args, "rev", str))
        return _lines(line.to_json() for line in lines)

    def _sessions(self, args: dict[str, Any]) -> str:
        return _lines(summary.to_json() for summary in history.sessions(self.store))

    def _restore(self, args: dict[str, Any]) -> str:
        rev = _arg(args, "rev", str)
        if rev is None:
            raise ToolError("Error: memory_restore needs the `rev` parameter")
        raw_paths = _arg(args, "paths", list)
        if raw_paths is not None and not all(isinstance(p, str) for p in raw_paths):
            raise ToolError("Error: `paths` must be a list of strings")
        paths = None if raw_paths is None else [memory_paths.parse(p) for p in raw_paths]
        if _arg(args, "dry_run", bool, False):
            if paths == []:  # as restore refuses it: an empty list is not "everything"
                raise UsageError("give at least one path to restore")
            changes = history.restore_preview(self.store, rev, paths or [])
            target = self.store.resolve(rev)
            if not changes and history.restore_matches(self.store, target, paths or []):
                # Not an empty result, which a model could take for a failure.
                return history.nothing_to_restore(target, paths or [], dry_run=True)
            return _lines(c.to_json(with_diff=True) for c in changes)
        op = self.store.restore(rev, paths)
        if op is None:
            return history.nothing_to_restore(self.store.resolve(rev), paths or [])
        return _lines([op.to_json()])


def _result(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def build_server(memory: MemoryServer) -> Server[Any]:
    """The MCP server object offering ``memory``'s tools."""

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=memory.tools())

    async def call_tool(
        _ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await memory.call(params.name, params.arguments)

    return Server(
        "gitmem",
        version=__version__,
        instructions="Persistent, encrypted, versioned memory: use the `memory` tool to view "
        "/memories before a task and to record progress; the memory_* tools show its history.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class _Stream(Protocol):
    async def receive(self) -> SessionMessage | Exception: ...
    async def aclose(self) -> None: ...


class _Sink(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class AnsweringReadStream:
    """The transport's read stream, with each line that is not a JSON-RPC message answered.

    The ``mcp`` stdio transport puts a line it cannot read on the read stream as the exception
    it raised, and the server's dispatcher logs that at debug level and drops it: the client
    would wait for a reply forever. JSON-RPC 2.0 answers it, with ``"id": null`` since no id can
    be read: -32700 (parse error) for text that is not JSON, -32600 (invalid request) for JSON
    that is not a message. A blank line holds no message and gets no reply.
    """

    def __init__(self, inner: _Stream, replies: _Sink) -> None:
        self._inner = inner
        self._replies = replies

    @property
    def last_context(self) -> object:
        """The sender's context of the last message (the dispatcher reads it, duck-typed)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        """The next message; unreadable lines are answered here and never returned."""
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            error = _unreadable_line_error(item)
            if error is not None:
                await self._replies.send(SessionMessage(error))

    async def aclose(self) -> None:
        """Close the transport's read stream."""
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _unreadable_line_error(exc: Exception) -> types.JSONRPCError | None:
    """The JSON-RPC error answering a line the transport could not read (None: a blank line)."""
    problems = exc.errors() if isinstance(exc, ValidationError) else []
    not_json = [p for p in problems if p["type"] == "json_invalid"]
    if not_json and not str(not_json[0].get("input", "x")).strip():
        return None
    if not_json or not problems:
        code, message = types.PARSE_ERROR, "Parse error: the line is not JSON"
    else:
        code, message = types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message"
    return types.JSONRPCError(
        jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message)
    )


def serve_stdio(store: MemoryStore, *, allow_restore: bool = False) -> None:
    """Serve the tools over stdin and stdout until the client closes the connection, then
    publish the store's logged writes for plain git; SIGTERM and SIGINT publish, then end the
    process as the signal would have."""
    server = build_server(MemoryServer(store, allow_restore=allow_restore))
    handled = (signal.SIGTERM, signal.SIGINT)
    main_thread = threading.current_thread() is threading.main_thread()

    def stop(signum: int, _frame: object) -> None:
        # The loop cannot be stopped in order: the thread reading stdin cannot be cancelled.
        # Writes run on worker threads, which this waits for through the writer lock.
        _publish(store)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    async def on_signals(*, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        # Python runs a signal handler on the main thread only, and the kernel may hand the
        # signal to another (the one blocked reading stdin): the idle loop's select() would
        # sleep on, and the signal be ignored. The loop's own handlers wake it from any thread;
        # and a second signal while the first one publishes waits in the loop's queue, where a
        # handler of Python's would publish again inside the first, waiting for the writer
        # lock its own caller holds.
        with anyio.open_signal_receiver(*handled) as signals:
            task_status.started()
            async for signum in signals:
                stop(signum, None)

    async def main() -> None:
        async with stdio_server() as (read, write), anyio.create_task_group() as tasks:
            if main_thread:
                await tasks.start(on_signals)
            answering = AnsweringReadStream(read, write)
            await server.run(answering, write, server.create_initialization_options())
            tasks.cancel_scope.cancel()

    # Until the loop's handlers are in place (and after they are gone), Python's: the main
    # thread is running then, so it runs them soon whichever thread the signal came to.
    previous = [signal.signal(signum, stop) for signum in handled] if main_thread else []
    try:
        # On stderr through the log, never into the protocol stream on stdout.
        with reporting_rollback_off(lambda text: _log.warning("gitmem mcp: warning: %s", text)):
            anyio.run(main)
    finally:
        for signum, handler in zip(handled, previous, strict=False):
            signal.signal(signum, handler)
    _publish(store)


def _publish(store: MemoryStore) -> None:
    # The writes are durable in the redo log already: a store that cannot be published now
    # (another writer holding the lock too long) is still whole for gitmem; say so and go.
    warning = close_for_exit(store)
    if warning is not None:
        _log.warning("gitmem mcp: warning: %s", warning)


__all__ = ["MemoryServer", "build_server", "memory_input_schema", "serve_stdio"]
