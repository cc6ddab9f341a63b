"""``gitmem mcp``: the memory tool and the audit commands as a stdio MCP server.

A thin adapter: the ``memory`` tool hands its arguments to
:class:`~gitmem.commands.MemoryCommands` (the same validation, dispatch and strings Claude gets
through the SDK's tool, without loading the SDK), with the tool's sync policy
(:class:`~gitmem.autosync.AutoSync`); the audit tools are
calls into :mod:`gitmem.history` printed as the JSON objects of ``gitmem ... --json``. A refused
call comes back as a tool result with ``isError`` and the memory tool's error text; nothing a
client sends stops the server. This is the only module that imports the ``mcp`` package.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from itertools import islice
from types import TracebackType
from typing import IO, Any, Protocol, cast

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskStatus
from anyio.to_thread import run_sync
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from . import history, search
from . import paths as memory_paths
from ._version import __version__
from .autosync import AutoSync
from .commands import COMMAND_FIELDS, CommandRefused, MemoryCommands
from .errors import UsageError, reporting_rollback_off, shown, shown_int
from .revisions import parse_time
from .store import MemoryStore, close_for_exit

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


SEARCH_MODES = ("grep", "S", "G")
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
        name="memory_search",
        description="Search the memory and its history, as git grep and git log -S/-G do. "
        "mode grep (the default): the lines of the memory at rev that match pattern, one JSON "
        "object per line (path, line, text). mode S: the operations that changed how many "
        "times pattern (as text) occurs in a file: where it was learned and where forgotten. "
        "mode G: the operations whose diff adds or removes a line matching pattern. S and G "
        "give operation objects, newest first, with patch each with the matching files' diffs.",
        input_schema=_schema(
            {
                "pattern": _string("A Python regular expression (text for mode S)."),
                "mode": {
                    "type": "string",
                    "enum": list(SEARCH_MODES),
                    "description": "grep (default), S or G.",
                },
                "rev": _string("Search the memory at (grep), or the history from, here. " + _REV),
                "path": _string(
                    "Only this memory file or directory (S, G: operations that touched it)."
                ),
                "session": _string("S and G: only operations of this session."),
                "ignore_case": {"type": "boolean", "description": "Ignore case (grep and G)."},
                "fixed_strings": {
                    "type": "boolean",
                    "description": "Match pattern as text, not a regular expression (grep, G).",
                },
                "max_count": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "At most this many lines or operations (default 50).",
                },
                "patch": {"type": "boolean", "description": "S and G: add the diffs."},
            },
            ["pattern"],
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
        raise CommandRefused(f"Error: the `{name}` parameter must be {_KIND_NAMES[kind]}")
    return value


def _check_parameters(tool: str, args: dict[str, Any], known: list[str]) -> None:
    """Refuse an argument ``tool`` does not take: ignoring a misspelt filter (``paths`` for
    ``path``) would answer with the whole history as if it were the filtered one."""
    unknown = [name for name in args if name not in known]
    if unknown:
        takes = f"its parameters are: {', '.join(known)}" if known else "it takes no parameters"
        raise CommandRefused(f"Error: {tool} has no parameter `{shown(unknown[0])}`; {takes}")


def _lines(objects: Iterable[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(o, ensure_ascii=False, sort_keys=True) for o in objects)


class MemoryServer:
    """The MCP tools over one open store; every write is labelled with the store's session."""

    def __init__(self, store: MemoryStore, *, allow_restore: bool = False) -> None:
        self.store = store
        self.allow_restore = allow_restore
        self.autosync = AutoSync(store)
        self._memory = MemoryCommands(store, self.autosync.after_write)
        self._commands = MemoryCommands(store)
        self._audit: dict[str, Callable[[dict[str, Any]], str]] = {
            "memory_log": self._log,
            "memory_show": self._show,
            "memory_blame": self._blame,
            "memory_search": self._search,
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
                text = await run_sync(self._memory.call, arguments)
            elif name in self._audit:
                action = self._audit[name]
                args = arguments or {}
                _check_parameters(name, args, self._parameters[name])
                text = await run_sync(lambda: self._commands.run(lambda: action(args)))
            else:
                return _result(f"Error: no tool named {name!r}", error=True)
        except CommandRefused as exc:
            return _result(exc.text, error=True)
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
            raise CommandRefused("Error: memory_blame needs the `path` parameter")
        lines = history.blame(self.store, memory_paths.parse(path), _arg(args, "rev", str))
        return _lines(line.to_json() for line in lines)

    def _search(self, args: dict[str, Any]) -> str:
        raw = _arg(args, "pattern", str)
        if raw is None:
            raise CommandRefused("Error: memory_search needs the `pattern` parameter")
        mode = _arg(args, "mode", str, "grep")
        if mode not in SEARCH_MODES:
            raise CommandRefused(f"Error: `mode` must be one of {', '.join(SEARCH_MODES)}")
        path = _arg(args, "path", str)
        paths = [] if path is None else [memory_paths.parse(path)]
        rev, count = _arg(args, "rev", str), _arg(args, "max_count", int, DEFAULT_LOG_COUNT)
        if count < 0:
            raise UsageError(f"max_count must be 0 or more, not {shown_int(count)}")
        fixed, ignore_case = _arg(args, "fixed_strings", bool), _arg(args, "ignore_case", bool)
        if mode == "S" and (fixed is not None or ignore_case is not None):
            raise CommandRefused(
                "Error: mode S matches pattern as text: no fixed_strings, ignore_case"
            )
        pattern = None
        if mode != "S":
            pattern = search.compile_pattern(
                raw, fixed_strings=bool(fixed), ignore_case=bool(ignore_case)
            )
        if pattern is not None and mode == "grep":
            for name in ("session", "patch"):
                if args.get(name) is not None:
                    raise CommandRefused(f"Error: `{name}` is for mode S and G, not grep")
            matches = search.grep(self.store, pattern, rev, paths=paths)
            return _lines(match.to_json() for match in islice(matches, count))
        hits = search.pickaxe(
            self.store,
            rev,
            text=raw if pattern is None else None,
            regex=pattern,
            paths=paths,
            session=_arg(args, "session", str),
            max_count=count,
        )
        patch = bool(_arg(args, "patch", bool, False))
        return _lines(_hit_json(hit, patch) for hit in hits)

    def _sessions(self, args: dict[str, Any]) -> str:
        return _lines(summary.to_json() for summary in history.sessions(self.store))

    def _restore(self, args: dict[str, Any]) -> str:
        rev = _arg(args, "rev", str)
        if rev is None:
            raise CommandRefused("Error: memory_restore needs the `rev` parameter")
        raw_paths = _arg(args, "paths", list)
        if raw_paths is not None and not all(isinstance(p, str) for p in raw_paths):
            raise CommandRefused("Error: `paths` must be a list of strings")
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


def _hit_json(hit: search.PickaxeHit, patch: bool) -> dict[str, Any]:
    body = hit.operation.to_json()  # as memory_log's, with only the changes that matched
    if patch:
        body["changes"] = [change.to_json(with_diff=True) for change in hit.changes]
    return body


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


MAX_LINE_BYTES = 16 << 20
"""The longest line (one JSON-RPC message) the server reads, in bytes: a longer one is read on
to its end in pieces, never held whole, and answered with an error (docs/mcp.md)."""
# What an over-long line is handed to the transport as: not JSON, so it comes back as an
# exception the read stream answers (no line the server reads whole is ever this one).
_TOO_LONG = "\x00gitmem: over-long line\x00"


class BoundedLines:
    """A binary stream's lines as UTF-8 text (invalid bytes replaced, as the ``mcp`` transport
    decodes), each at most ``limit`` bytes: a longer line is skipped to its end, a piece at a
    time, and read as a marker the read stream answers as an invalid request."""

    _PIECE = 1 << 16

    def __init__(self, raw: IO[bytes], limit: int = MAX_LINE_BYTES) -> None:
        self._raw = raw
        self._limit = limit

    def readline(self) -> str:
        """The next line, its newline kept; "" at the end of the stream."""
        line = bytearray()
        while len(line) <= self._limit:
            piece = self._raw.readline(self._PIECE)
            line += piece
            if not piece or piece.endswith(b"\n"):
                return line.decode("utf-8", "replace")
        del line
        while True:
            piece = self._raw.readline(self._PIECE)
            if not piece or piece.endswith(b"\n"):
                return _TOO_LONG + "\n"

    def close(self) -> None:
        """Nothing: the stream is the process's stdin, not this reader's to close."""


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
    if not_json and str(not_json[0].get("input", "")).strip() == _TOO_LONG:
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"Invalid Request: the line is longer than {MAX_LINE_BYTES:,} bytes, "
                "the most this server reads; it was skipped",
            ),
        )
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
        # stdin read through BoundedLines: the transport's own reader holds a line whole,
        # however long it is.
        stdin = anyio.wrap_file(cast(IO[str], BoundedLines(sys.stdin.buffer)))
        async with stdio_server(stdin) as (read, write), anyio.create_task_group() as tasks:
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
