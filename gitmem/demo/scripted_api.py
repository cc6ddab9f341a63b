"""A local, scripted stand-in for the Anthropic Messages API.

`ScriptedAPI` is a real HTTP server on 127.0.0.1 that answers `POST /v1/messages` the way the
anthropic 2.x SDK expects, so that the SDK's own tool runner can be driven end to end without a
network or an API key. It is not Claude: every reply is produced by a `ScriptedModel` (plain Python
that is shown the conversation so far), and every reply says so in its `model` field
(`scripted-stand-in`).

It speaks both ways the tool runner talks to the API:

* server-side message threads (beta `message-threads-2026-08-12`, the runner's default): the first
  request carries `thread: {"type": "create"}` with the tools and the whole history; each later one
  carries `thread: {"type": "continue", "previous_message_id": <id of the last reply>}` and only the
  new messages. The server keeps each thread's history itself; a reply's `id` is what the next turn
  continues from, and nothing else in the reply is thread-specific.
* full-history requests without a `thread` field (`tool_runner(..., thread=False)`).

Replies are sent as JSON, or as server-sent events when the request sets `stream: true`.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from anthropic import Anthropic, AsyncAnthropic

__all__ = [
    "API_KEY",
    "CLEARED_TOOL_RESULT",
    "COMPACTION_SUMMARY",
    "STAND_IN_MODEL",
    "THREADS_BETA",
    "ContextEdits",
    "Conversation",
    "RecordedRequest",
    "Script",
    "ScriptExhaustedError",
    "ScriptedAPI",
    "ScriptedModel",
    "ToolExchange",
    "apply_context_management",
    "estimated_tokens",
    "memory_call",
    "text",
    "tool_result_text",
    "tool_use",
]

JSONDict = dict[str, Any]

STAND_IN_MODEL = "scripted-stand-in"
"""The `model` of every reply, so that no transcript can pass for one written by Claude."""

API_KEY = "scripted-stand-in-no-key"
"""The dummy API key that `ScriptedAPI.client()` gives the SDK; the server ignores keys."""

THREADS_BETA = "message-threads-2026-08-12"

_MESSAGES_PATH = "/v1/messages"
# Headers that carry credentials are never kept in the request log.
_REDACTED_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie"})
# The SDK re-sends a turn that failed with a retryable status; a scripted failure is deterministic,
# so retrying it would only slow a failing test down.
_NO_RETRY = {"x-should-retry": "false"}
_TIMEOUT = 30.0


# --- what the scripted model sees and returns -------------------------------------------------


def text(value: str) -> JSONDict:
    """A `text` content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: Mapping[str, Any], *, id: str | None = None) -> JSONDict:
    """A `tool_use` content block; the server assigns an id when `id` is None."""
    block: JSONDict = {"type": "tool_use", "name": name, "input": dict(input)}
    if id is not None:
        block["id"] = id
    return block


def memory_call(command: str, **fields: Any) -> JSONDict:
    """A `tool_use` block calling the memory tool with `command` and the command's `fields`."""
    return tool_use("memory", {"command": command, **fields})


def tool_result_text(content: object) -> str:
    """The text of a `tool_result` block's `content` (a string, a list of blocks, or None)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(block.get("text", ""))
            for block in cast("list[object]", content)
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        return "\n".join(parts)
    return str(content)


@dataclass(frozen=True)
class ToolExchange:
    """One tool call the model made and the result the client sent back for it."""

    id: str
    name: str
    input: JSONDict
    result: str | None
    """The result's text, or None while the call is unanswered."""
    is_error: bool

    @property
    def command(self) -> str | None:
        """The memory tool `command` of the call, if it has one."""
        command = self.input.get("command")
        return command if isinstance(command, str) else None


@dataclass(frozen=True)
class Conversation:
    """The whole conversation a scripted model answers, however the request delivered it."""

    messages: tuple[JSONDict, ...]
    """Every message so far, oldest first, as JSON; the last one is the newest user turn."""
    system: object
    tools: tuple[JSONDict, ...]
    requested_model: str
    thread_id: str | None
    """The server-side thread the turn belongs to, or None for a full-history request."""

    def tool_exchanges(self) -> list[ToolExchange]:
        """Every tool call in the conversation, oldest first, paired with its result."""
        results: dict[str, JSONDict] = {}
        for message in self.messages:
            for block in _blocks(message):
                if block.get("type") == "tool_result":
                    results[str(block.get("tool_use_id"))] = block
        exchanges: list[ToolExchange] = []
        for message in self.messages:
            if message.get("role") != "assistant":
                continue
            for block in _blocks(message):
                if block.get("type") != "tool_use":
                    continue
                result = results.get(str(block.get("id")))
                exchanges.append(
                    ToolExchange(
                        id=str(block.get("id")),
                        name=str(block.get("name")),
                        input=dict(block.get("input") or {}),
                        result=None if result is None else tool_result_text(result.get("content")),
                        is_error=bool(result.get("is_error")) if result is not None else False,
                    )
                )
        return exchanges

    def latest_exchanges(self) -> list[ToolExchange]:
        """The tool calls whose results arrived in the newest user message."""
        if not self.messages:
            return []
        answered = {
            str(block.get("tool_use_id"))
            for block in _blocks(self.messages[-1])
            if block.get("type") == "tool_result"
        }
        return [exchange for exchange in self.tool_exchanges() if exchange.id in answered]

    def user_prompt(self) -> str:
        """The text of the first user message."""
        for message in self.messages:
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                return "\n".join(
                    str(block.get("text", ""))
                    for block in _blocks(message)
                    if block.get("type") == "text"
                )
        return ""


class ScriptedModel(Protocol):
    """Produces the next assistant turn: a list of `text` and `tool_use` content blocks."""

    def __call__(self, conversation: Conversation, /) -> Sequence[JSONDict]: ...


class ScriptExhaustedError(RuntimeError):
    """A `Script` was asked for more turns than it holds."""


class Script:
    """A scripted model that plays fixed turns in order, one per request, across all threads.

    Each turn is a list of content blocks, or a function of the conversation that returns one.
    """

    def __init__(self, *turns: Sequence[JSONDict] | Callable[[Conversation], Sequence[JSONDict]]):
        self._turns = list(turns)
        self._lock = threading.Lock()
        self.conversations: list[Conversation] = []
        """Every conversation the script was shown, in order."""

    def __call__(self, conversation: Conversation, /) -> Sequence[JSONDict]:
        with self._lock:
            index = len(self.conversations)
            self.conversations.append(conversation)
        if index >= len(self._turns):
            raise ScriptExhaustedError(
                f"the script has {len(self._turns)} turns; turn {index + 1} asked"
            )
        turn = self._turns[index]
        return turn(conversation) if callable(turn) else turn


# --- what the server records -----------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the stand-in received, and what it answered."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    """Lower-cased header names; credential headers are left out."""
    body: JSONDict | None
    status: int
    response: JSONDict | None
    """The reply message (for a stream, the message its events add up to) or the error body."""

    @property
    def thread(self) -> JSONDict | None:
        """The request's `thread` field, if any."""
        thread = (self.body or {}).get("thread")
        return thread if isinstance(thread, dict) else None

    @property
    def messages(self) -> list[JSONDict]:
        """The request's `messages` field."""
        messages = (self.body or {}).get("messages")
        return list(messages) if isinstance(messages, list) else []

    @property
    def betas(self) -> list[str]:
        """The betas named in the `anthropic-beta` header."""
        return [b.strip() for b in self.headers.get("anthropic-beta", "").split(",") if b.strip()]

    @property
    def streamed(self) -> bool:
        """Whether the request asked for server-sent events."""
        return bool((self.body or {}).get("stream"))


# --- context management (context editing and compaction) ------------------------------------

CLEARED_TOOL_RESULT = "[cleared by context editing]"
"""What the stand-in shows the model in place of a tool result that context editing cleared."""

COMPACTION_SUMMARY = (
    "Summary of the conversation so far (compacted; {count} earlier messages are no longer in "
    "context). The task, as the user gave it:\n\n{prompt}"
)
"""The stand-in's compaction summary: it keeps the task, and nothing of the work done."""


def estimated_tokens(messages: Sequence[JSONDict]) -> int:
    """The stand-in's input token count of ``messages``: one token per 4 characters of JSON."""
    return len(json.dumps(list(messages))) // 4


@dataclass
class ContextEdits:
    """What `context_management` made of one turn's history, as the model is shown it."""

    messages: list[JSONDict]
    applied: list[JSONDict] = field(default_factory=list)
    """The `applied_edits` of the reply."""
    summary: str | None = None
    """The compaction this turn made (sent first in the reply), if any."""
    requested: bool = False


def apply_context_management(messages: Sequence[JSONDict], config: object) -> ContextEdits:
    """The history the model sees under `config` (the request's `context_management`).

    History before the last `compaction` block is replaced by its summary, as the API does.
    Then each edit's trigger is measured on that history (an approximation: the API's exact
    order and arithmetic are its own) and the edits that fire are applied:
    `compact_20260112` replaces everything with a new summary; `clear_tool_uses_20250919`
    replaces the results of all but the newest `keep` tool uses (of tools not in
    `exclude_tools`) with `CLEARED_TOOL_RESULT`, if that clears at least `clear_at_least`.
    """
    visible = _after_compaction(messages)
    edits = ContextEdits(messages=visible, requested=isinstance(config, dict))
    raw_edits = config.get("edits") if isinstance(config, dict) else None
    if not isinstance(raw_edits, list):
        return edits
    tokens = estimated_tokens(visible)
    for edit in cast("list[JSONDict]", raw_edits):
        kind = edit.get("type")
        if kind == "compact_20260112":
            if tokens >= _amount(edit.get("trigger"), "input_tokens", 150_000):
                prompt = Conversation(tuple(visible), None, (), "", None).user_prompt()
                edits.summary = COMPACTION_SUMMARY.format(count=len(visible), prompt=prompt)
                edits.messages = [{"role": "user", "content": [text(edits.summary)]}]
                return edits
        elif kind == "clear_tool_uses_20250919":
            cleared = _clear_tool_uses(edits.messages, edit, tokens)
            if cleared is not None:
                edits.messages, applied = cleared
                edits.applied.append(applied)
    return edits


def _amount(spec: object, unit: str, default: int) -> int:
    if isinstance(spec, dict) and spec.get("type") == unit and isinstance(spec.get("value"), int):
        return int(spec["value"])
    return default if not isinstance(spec, dict) else 1 << 62


def _after_compaction(messages: Sequence[JSONDict]) -> list[JSONDict]:
    for index in range(len(messages) - 1, -1, -1):
        blocks = _blocks(messages[index])
        summaries = [b for b in blocks if b.get("type") == "compaction" and b.get("content")]
        if summaries:
            rest = [b for b in blocks if b.get("type") != "compaction"]
            head: list[JSONDict] = [
                {"role": "user", "content": [text(str(summaries[-1]["content"]))]}
            ]
            if rest:
                head.append({**messages[index], "content": rest})
            return copy.deepcopy([*head, *messages[index + 1 :]])
    return copy.deepcopy(list(messages))


def _clear_tool_uses(
    messages: list[JSONDict], edit: JSONDict, tokens: int
) -> tuple[list[JSONDict], JSONDict] | None:
    trigger = edit.get("trigger") or {"type": "input_tokens", "value": 100_000}
    uses = [
        block
        for message in messages
        if message.get("role") == "assistant"
        for block in _blocks(message)
        if block.get("type") == "tool_use"
    ]
    fired = (
        len(uses) >= _amount(trigger, "tool_uses", 0)
        if isinstance(trigger, dict) and trigger.get("type") == "tool_uses"
        else tokens >= _amount(trigger, "input_tokens", 100_000)
    )
    if not fired:
        return None
    excluded = set(edit.get("exclude_tools") or ())
    keep = _amount(edit.get("keep"), "tool_uses", 3)
    clearable = [str(b.get("id")) for b in uses if b.get("name") not in excluded]
    targets = set(clearable[: max(len(clearable) - keep, 0)])
    cleared_uses = cleared_tokens = 0
    for message in messages:
        for block in _blocks(message):
            if block.get("type") != "tool_result" or str(block.get("tool_use_id")) not in targets:
                continue
            cleared_uses += 1
            cleared_tokens += len(json.dumps(block.get("content"))) // 4
            block["content"] = [text(CLEARED_TOOL_RESULT)]
    if cleared_uses == 0 or cleared_tokens < _amount(edit.get("clear_at_least"), "input_tokens", 0):
        return None
    applied = {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": cleared_uses,
        "cleared_input_tokens": cleared_tokens,
    }
    return messages, applied


# --- the server --------------------------------------------------------------------------------


class _APIError(Exception):
    def __init__(self, status: int, error_type: str, message: str, error_code: str | None = None):
        super().__init__(message)
        self.status = status
        self.body: JSONDict = {"type": "error", "error": {"type": error_type, "message": message}}
        if error_code is not None:
            self.body["error"]["details"] = {"error_code": error_code}


@dataclass
class _Thread:
    id: str
    system: object
    tools: list[JSONDict]
    history: list[JSONDict]
    last_message_id: str | None = None
    in_flight: bool = False
    context_management: object = None


@dataclass
class _Turn:
    conversation: Conversation
    thread: _Thread | None
    new_messages: list[JSONDict] = field(default_factory=list)
    edits: ContextEdits | None = None


class ScriptedAPI:
    """A scripted stand-in for the Messages API on 127.0.0.1 (an ephemeral port).

    Use it as a context manager, or call `start()` and `stop()`. Point the SDK at `base_url`, or
    take a ready client from `client()` / `async_client()`.
    """

    def __init__(self, model: ScriptedModel) -> None:
        self._model = model
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._threads: dict[str, _Thread] = {}
        self._thread_of_message: dict[str, _Thread] = {}
        self._counters: dict[str, itertools.count[int]] = {}
        self._server: _Server | None = None
        self._serve_thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> ScriptedAPI:
        """Bind 127.0.0.1 on a free port and serve in a background thread."""
        if self._server is not None:
            raise RuntimeError("the scripted API is already running")
        server = _Server(("127.0.0.1", 0), _Handler, self)
        self._server = server
        self._serve_thread = threading.Thread(
            target=server.serve_forever,
            name="scripted-api",
            kwargs={"poll_interval": 0.05},
            daemon=True,
        )
        self._serve_thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket; safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._serve_thread is not None:
            self._serve_thread.join()
            self._serve_thread = None

    def __enter__(self) -> ScriptedAPI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`, for the SDK's `base_url`."""
        if self._server is None:
            raise RuntimeError("the scripted API is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def client(self, **kwargs: Any) -> Anthropic:
        """A sync SDK client for this server (dummy key, no retries, no proxies); close it."""
        import httpx2
        from anthropic import Anthropic

        # Not the SDK's DefaultHttpxClient: it mounts the environment's proxies even with
        # trust_env=False, and a proxy could carry the loopback traffic somewhere else.
        kwargs.setdefault("http_client", httpx2.Client(trust_env=False, timeout=_TIMEOUT))
        return Anthropic(
            **{"api_key": API_KEY, "max_retries": 0, **kwargs, "base_url": self.base_url}
        )

    def async_client(self, **kwargs: Any) -> AsyncAnthropic:
        """An async SDK client for this server (dummy key, no retries, no proxies); close it."""
        import httpx2
        from anthropic import AsyncAnthropic

        kwargs.setdefault("http_client", httpx2.AsyncClient(trust_env=False, timeout=_TIMEOUT))
        return AsyncAnthropic(
            **{"api_key": API_KEY, "max_retries": 0, **kwargs, "base_url": self.base_url}
        )

    # inspection

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order of arrival."""
        with self._lock:
            return list(self._requests)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions the scripted model or the server raised (each was answered with a 500)."""
        with self._lock:
            return list(self._errors)

    def thread_history(self, thread_id: str) -> list[JSONDict]:
        """The history the server holds for a thread, replies included."""
        with self._lock:
            return copy.deepcopy(self._threads[thread_id].history)

    def drop_threads(self) -> None:
        """Forget every server-side thread, as a server that lost its state would."""
        with self._lock:
            self._threads.clear()
            self._thread_of_message.clear()

    # request handling (called from the server's handler threads)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            counter = self._counters.setdefault(prefix, itertools.count(1))
            return f"{prefix}_scripted_{next(counter):06d}"

    def _begin_turn(self, body: JSONDict, headers: Mapping[str, str]) -> _Turn:
        for required in ("model", "max_tokens", "messages"):
            if required not in body:
                raise _APIError(400, "invalid_request_error", f"{required}: Field required")
        new_messages = body["messages"]
        if not isinstance(new_messages, list) or not all(
            isinstance(m, dict) for m in cast("list[object]", new_messages)
        ):
            raise _APIError(400, "invalid_request_error", "messages: expected a list of objects")
        new_messages = copy.deepcopy(cast("list[JSONDict]", new_messages))
        spec = body.get("thread")
        if spec is None:
            _check_history(new_messages)
            edits = apply_context_management(new_messages, body.get("context_management"))
            conversation = Conversation(
                messages=tuple(edits.messages),
                system=body.get("system"),
                tools=tuple(body.get("tools") or ()),
                requested_model=str(body["model"]),
                thread_id=None,
            )
            return _Turn(conversation, None, edits=edits)

        betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
        if THREADS_BETA not in betas:
            raise _APIError(
                400,
                "invalid_request_error",
                f"thread: requires the `anthropic-beta: {THREADS_BETA}` header",
            )
        if not isinstance(spec, dict) or spec.get("type") not in ("create", "continue"):
            raise _APIError(
                400, "invalid_request_error", "thread.type: expected 'create' or 'continue'"
            )

        thread_id = self._next_id("thread") if spec["type"] == "create" else ""
        with self._lock:
            if spec["type"] == "create":
                thread = _Thread(
                    id=thread_id,
                    system=body.get("system"),
                    tools=list(body.get("tools") or ()),
                    history=[],
                    context_management=body.get("context_management"),
                )
            else:
                thread = self._continued_thread(spec, body)
                if "context_management" in body:
                    thread.context_management = body["context_management"]
            history = [*thread.history, *new_messages]
            _check_history(history)
            if spec["type"] == "create":
                self._threads[thread.id] = thread
            thread.in_flight = True
            edits = apply_context_management(history, thread.context_management)
        conversation = Conversation(
            messages=tuple(copy.deepcopy(edits.messages)),
            system=copy.deepcopy(thread.system),
            tools=tuple(copy.deepcopy(thread.tools)),
            requested_model=str(body["model"]),
            thread_id=thread.id,
        )
        return _Turn(conversation, thread, new_messages, edits)

    def _continued_thread(self, spec: JSONDict, body: JSONDict) -> _Thread:
        previous = spec.get("previous_message_id")
        thread = self._thread_of_message.get(str(previous))
        if thread is None or thread.id not in self._threads:
            raise _APIError(
                404,
                "not_found_error",
                f"No thread state was found for previous_message_id {previous!r}.",
                "thread_not_found",
            )
        if thread.in_flight:
            raise _APIError(
                400,
                "invalid_request_error",
                f"Another request is still continuing from {previous!r}.",
                "thread_continue_in_flight",
            )
        if thread.last_message_id != previous:
            raise _APIError(
                400,
                "invalid_request_error",
                f"{previous!r} has already been continued; "
                f"continue from {thread.last_message_id!r}.",
                "thread_already_continued",
            )
        repeated = [name for name in ("system", "tools") if name in body]
        if repeated:
            raise _APIError(
                400,
                "invalid_request_error",
                f"{', '.join(repeated)}: cannot be sent with thread.type 'continue'; "
                "the thread keeps the values it was created with",
            )
        return thread

    def _answer(self, turn: _Turn) -> JSONDict:
        """Run the scripted model for `turn` and return the reply message."""
        try:
            blocks = [self._checked_block(block) for block in self._model(turn.conversation)]
        except _APIError:
            self._end_turn(turn, None)
            raise
        except Exception as exc:
            self._end_turn(turn, None)
            with self._lock:
                self._errors.append(exc)
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            raise _APIError(500, "api_error", f"the scripted model failed: {detail}") from exc
        edits = turn.edits
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        if edits is not None and edits.summary is not None:
            # What the server compacted comes back first, for the client to send back in its place.
            blocks.insert(0, {"type": "compaction", "content": edits.summary})
        message: JSONDict = {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": STAND_IN_MODEL,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        if edits is not None and edits.requested:
            message["context_management"] = {"applied_edits": edits.applied}
        self._end_turn(turn, message)
        return message

    def _end_turn(self, turn: _Turn, message: JSONDict | None) -> None:
        thread = turn.thread
        if thread is None:
            return
        with self._lock:
            thread.in_flight = False
            if message is None:
                return
            thread.history.extend(turn.new_messages)
            thread.history.append(
                {"role": "assistant", "content": copy.deepcopy(message["content"])}
            )
            thread.last_message_id = message["id"]
            self._thread_of_message[message["id"]] = thread

    def _checked_block(self, block: JSONDict) -> JSONDict:
        block = copy.deepcopy(dict(block))
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise TypeError(f"a text block needs a string `text`: {block!r}")
            return {"type": "text", "text": block["text"], "citations": None}
        if kind == "tool_use":
            if not isinstance(block.get("name"), str) or not isinstance(block.get("input"), dict):
                raise TypeError(f"a tool_use block needs a `name` and an `input` object: {block!r}")
            block.setdefault("id", self._next_id("toolu"))
            return block
        raise TypeError(f"the stand-in only writes text and tool_use blocks, not {kind!r}")


def _blocks(message: Mapping[str, Any]) -> list[JSONDict]:
    content = message.get("content")
    if isinstance(content, list):
        return [block for block in cast("list[object]", content) if isinstance(block, dict)]
    return []


def _check_history(messages: Sequence[JSONDict]) -> None:
    """Refuse what the real API refuses and a broken tool loop sends: unanswered or stray calls."""
    if not messages:
        raise _APIError(400, "invalid_request_error", "messages: at least one message is required")
    pending: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            raise _APIError(
                400, "invalid_request_error", f"messages.{index}.role: unexpected {role!r}"
            )
        results = {
            str(block.get("tool_use_id"))
            for block in _blocks(message)
            if block.get("type") == "tool_result"
        }
        if pending - results:
            raise _APIError(
                400,
                "invalid_request_error",
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(sorted(pending - results))}",
            )
        if results - pending:
            raise _APIError(
                400,
                "invalid_request_error",
                f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {', '.join(sorted(results - pending))}",
            )
        pending = {
            str(block.get("id"))
            for block in _blocks(message)
            if role == "assistant" and block.get("type") == "tool_use"
        }


def _stream_events(message: JSONDict) -> Iterator[tuple[str, JSONDict]]:
    """The server-sent events that add up to `message`."""
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            skeleton: JSONDict = {"type": "text", "text": "", "citations": None}
            delta: JSONDict = {"type": "text_delta", "text": block["text"]}
        elif block["type"] == "compaction":
            skeleton, delta = block, {"type": "compaction_delta", "content": None}
        else:
            skeleton = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": skeleton},
        )
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], api: ScriptedAPI
    ) -> None:
        super().__init__(address, handler)
        self.api = api


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    # HTTP/1.0 closes each connection after its response, so no idle keep-alive connection
    # outlives `stop()`, and a stream ends where the connection does.
    protocol_version = "HTTP/1.0"
    server_version = "gitmem-scripted-stand-in"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is `ScriptedAPI.requests`, not stderr

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _handle(self) -> None:
        api = self.server.api
        url = urlsplit(self.path)
        headers = {
            name.lower(): value
            for name, value in self.headers.items()
            if name.lower() not in _REDACTED_HEADERS
        }
        body: JSONDict | None = None
        status, response = 500, None
        try:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            if raw:
                try:
                    parsed = json.loads(raw)
                except ValueError as exc:
                    raise _APIError(
                        400, "invalid_request_error", f"body is not JSON: {exc}"
                    ) from exc
                if not isinstance(parsed, dict):
                    raise _APIError(400, "invalid_request_error", "body must be a JSON object")
                body = cast(JSONDict, parsed)
            if url.path != _MESSAGES_PATH or self.command != "POST":
                raise _APIError(
                    404,
                    "not_found_error",
                    f"the scripted stand-in serves only POST {_MESSAGES_PATH}",
                )
            turn = api._begin_turn(body or {}, headers)
            message = api._answer(turn)
            status, response = 200, message
            if (body or {}).get("stream"):
                send = partial(self._send_stream, message)
            else:
                send = partial(self._send_json, 200, message)
        except _APIError as error:
            status, response = error.status, error.body
            send = partial(self._send_json, error.status, error.body, _NO_RETRY)
        except Exception as exc:
            # A request the stand-in cannot make sense of must fail loudly, not hang the client.
            with api._lock:
                api._errors.append(exc)
            failure = _APIError(500, "api_error", f"the scripted stand-in failed: {exc!r}")
            status, response = failure.status, failure.body
            send = partial(self._send_json, failure.status, failure.body, _NO_RETRY)
        # Recorded before the reply goes out, so a client that has its answer can already read
        # the request that produced it.
        api._record(
            RecordedRequest(
                method=self.command,
                path=url.path,
                query=url.query,
                headers=headers,
                body=body,
                status=status,
                response=response,
            )
        )
        send()

    def _common_headers(self) -> None:
        self.send_header("request-id", self.server.api._next_id("req"))
        self.send_header("x-scripted-stand-in", "true")

    def _send_json(self, status: int, payload: JSONDict, extra: Mapping[str, str] = {}) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self._common_headers()
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, message: JSONDict) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self._common_headers()
        self.end_headers()
        for event, data in _stream_events(message):
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
