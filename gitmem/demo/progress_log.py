"""The newcomer's demo: the multi-session progress-log pattern through the SDK's tool runner.

Three sessions share one memory store, each with its own memory tool instance (made by a factory
that is given the session's label, which gitmem records on every commit):

1. `initializer` views `/memories` and creates the progress log (`progress.md`), the feature
   checklist (`features.md`), the start-up note (`init.md`) and a scratch note (`scratch.md`).
2. `worker-1` and `worker-2` each view `/memories`, the log, the checklist and the note, work on the
   first unchecked feature, tick it with `str_replace`, append to the log with `insert`, and tidy
   the scratch note (the first archives it with `rename`, the second `delete`s the archived copy).

By default the replies come from `ProgressLogModel`, a scripted model behind a local stand-in for
the Messages API (`gitmem.demo.scripted_api`), not from Claude; with `use_real_api=True` the same
prompts go to Claude through `anthropic.Anthropic()`.

Run it with `gitmem demo` (it uses Claude when `ANTHROPIC_API_KEY` is set).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

from anthropic import Anthropic, omit
from anthropic.lib.tools import BetaAbstractMemoryTool
from anthropic.types.beta import BetaMessageParam

from gitmem.render import plural

from .scripted_api import (
    STAND_IN_MODEL,
    Conversation,
    JSONDict,
    ScriptedAPI,
    ToolExchange,
    memory_call,
    text,
    tool_result_text,
)

__all__ = [
    "INITIALIZER_PROMPT",
    "REAL_MODEL",
    "SESSIONS",
    "WORKER_PROMPT",
    "MemoryToolFactory",
    "ProgressLogModel",
    "SessionTranscript",
    "ToolCall",
    "numbered_lines",
    "result_of",
    "run_demo",
    "run_session",
    "run_sessions",
    "run_store_demo",
]

MemoryToolFactory = Callable[[str], BetaAbstractMemoryTool]
"""Makes the memory tool for one session, given the session's label."""

REAL_MODEL = "claude-sonnet-5-5"
"""The Claude model of `use_real_api=True`; the SDK warns that `claude-sonnet-4-5` is deprecated."""

MAX_TOKENS = 2048

PROGRESS = "/memories/progress.md"
FEATURES = "/memories/features.md"
INIT_NOTE = "/memories/init.md"
SCRATCH = "/memories/scratch.md"
ARCHIVED_SCRATCH = "/memories/archive/scratch.md"
FEATURE_NAMES = ("add a task", "list tasks", "mark a task done")

INITIALIZER_PROMPT = f"""\
This is the first session of a long-running project: a tiny command-line to-do app. Before any \
feature work, set up the memory that later sessions will rely on. Use the memory tool:
1. View /memories.
2. If {PROGRESS} does not exist yet, create these files:
   - {PROGRESS}: a "# Progress log" heading, a blank line, then one line \
"- Session 1 (initializer): ..." saying what this session did.
   - {FEATURES}: a checklist with one "- [ ] " line for each feature: \
{", ".join(FEATURE_NAMES)}.
   - {INIT_NOTE}: a note that every session starts by running ./init.sh, which installs the \
dependencies and starts the dev server.
   - {SCRATCH}: a one-line scratch note with an open design question.
Do not implement any feature. Finish with one short sentence saying what you set up."""

WORKER_PROMPT = f"""\
You are a new session on the tiny command-line to-do app and remember nothing, so read memory first:
1. View /memories, then view {PROGRESS}, {FEATURES} and {INIT_NOTE}.
2. Pick the first feature in {FEATURES} that is still "- [ ]" and work on that one feature only. \
(This is a demo: assume that running ./init.sh, the implementation and its end-to-end check all \
succeed.)
3. Tick that feature in {FEATURES} with str_replace ("- [ ]" becomes "- [x]" on its line only).
4. Append one line at the end of {PROGRESS} with insert: "- Session N (worker): ..." where N is \
one more than the last session in the log.
5. Housekeeping: if {SCRATCH} exists, rename it to {ARCHIVED_SCRATCH}; otherwise, if \
{ARCHIVED_SCRATCH} exists, delete it.
Finish with one short sentence saying what you did."""

SESSIONS: tuple[tuple[str, str], ...] = (
    ("initializer", INITIALIZER_PROMPT),
    ("worker-1", WORKER_PROMPT),
    ("worker-2", WORKER_PROMPT),
)
"""Each session's label and prompt, in the order they run."""


@dataclass(frozen=True)
class ToolCall:
    """One memory tool call of a session and the result the tool gave."""

    input: dict[str, Any]
    result: str
    is_error: bool

    @property
    def command(self) -> str:
        """The memory command (`view`, `create`, ...)."""
        return str(self.input.get("command"))


@dataclass(frozen=True)
class SessionTranscript:
    """What one session did: its tool calls in order and its final answer."""

    label: str
    model: str
    """The `model` the replies named (`scripted-stand-in` unless Claude answered)."""
    calls: tuple[ToolCall, ...]
    answer: str


# --- running sessions through the tool runner -------------------------------------------------


def run_demo(
    tool_factory: MemoryToolFactory,
    *,
    out: TextIO,
    use_real_api: bool = False,
    model: str | None = None,
) -> list[SessionTranscript]:
    """Run the three sessions against Claude (`use_real_api`) or the scripted stand-in."""
    if use_real_api:
        with Anthropic() as client:
            print(f"Talking to the Anthropic API ({model or REAL_MODEL}).", file=out)
            return run_sessions(client, tool_factory, model=model or REAL_MODEL, out=out)
    with ScriptedAPI(ProgressLogModel()) as api, api.client() as client:
        print(
            f"Replies come from a scripted stand-in for the Messages API at {api.base_url}, "
            "not from Claude (set ANTHROPIC_API_KEY to talk to Claude).",
            file=out,
        )
        return run_sessions(client, tool_factory, model=model or STAND_IN_MODEL, out=out)


def run_sessions(
    client: Anthropic,
    tool_factory: MemoryToolFactory,
    *,
    model: str,
    out: TextIO,
    threaded: bool = True,
    sessions: Sequence[tuple[str, str]] = SESSIONS,
) -> list[SessionTranscript]:
    """Run `sessions` (label, prompt) in order, each with `tool_factory(label)`."""
    return [
        run_session(
            client, tool_factory(label), label, prompt, model=model, out=out, threaded=threaded
        )
        for label, prompt in sessions
    ]


def run_session(
    client: Anthropic,
    tool: BetaAbstractMemoryTool,
    label: str,
    prompt: str,
    *,
    model: str,
    out: TextIO,
    threaded: bool = True,
) -> SessionTranscript:
    """Run one session's tool loop to the end, printing each tool call and result to `out`."""
    print(f"\n== session {label} ==", file=out)
    messages: list[BetaMessageParam] = [{"role": "user", "content": prompt}]
    runner = client.beta.messages.tool_runner(
        model=model,
        max_tokens=MAX_TOKENS,
        messages=messages,
        tools=[tool],
        thread=omit if threaded else False,
    )
    calls: list[ToolCall] = []
    for message in runner:
        uses = {block.id: block for block in message.content if block.type == "tool_use"}
        # The runner caches this response and sends it itself, so the tools still run only once.
        response = runner.generate_tool_call_response() if uses else None
        if response is None:
            continue
        for result in cast("Iterable[JSONDict]", response["content"]):
            use = uses.get(str(result.get("tool_use_id")))
            call = ToolCall(
                input=dict(use.input) if use is not None else {},
                result=tool_result_text(result.get("content")),
                is_error=bool(result.get("is_error")),
            )
            calls.append(call)
            _print_call(call, out)
    final = runner.until_done()
    answer = " ".join(block.text.strip() for block in final.content if block.type == "text").strip()
    print(f"  [{final.model}] {answer}", file=out)
    return SessionTranscript(label=label, model=final.model, calls=tuple(calls), answer=answer)


def _short(value: object, width: int = 40) -> str:
    flat = str(value)
    return repr(flat if len(flat) <= width else flat[: width - 3] + "...")


def _describe(call: ToolCall) -> str:
    i = call.input
    command = call.command
    if command == "view":
        return f"view {i.get('path')}" + (f" {i['view_range']}" if i.get("view_range") else "")
    if command == "create":
        lines = len(str(i.get("file_text", "")).splitlines())
        return f"create {i.get('path')} ({plural(lines, 'line')})"
    if command == "str_replace":
        return (
            f"str_replace {i.get('path')} {_short(i.get('old_str'))} -> {_short(i.get('new_str'))}"
        )
    if command == "insert":
        return f"insert {i.get('path')} @{i.get('insert_line')} {_short(i.get('insert_text'))}"
    if command == "delete":
        return f"delete {i.get('path')}"
    if command == "rename":
        return f"rename {i.get('old_path')} -> {i.get('new_path')}"
    return f"{command} {i}"


def _print_call(call: ToolCall, out: TextIO) -> None:
    first, *rest = call.result.splitlines() or [""]
    more = f" (+{plural(len(rest), 'line')})" if rest else ""
    print(f"  {'!' if call.is_error else '>'} memory {_describe(call)}", file=out)
    print(f"      {'error: ' if call.is_error else ''}{first}{more}", file=out)


# --- the scripted model -----------------------------------------------------------------------

_SESSION_LINE = re.compile(r"^- Session (\d+)\b")


class ProgressLogModel:
    """A scripted model that follows `INITIALIZER_PROMPT` or `WORKER_PROMPT`.

    It decides every step from the memory tool's results so far, never from a fixed list: the
    `/memories` listing says whether the store is new (initialize) or not (work), the checklist's
    view says which feature is next, the log's view gives the line to insert after and the session
    number, and the listing says which scratch note to archive or delete. It stops at the first
    tool error and reports it.
    """

    def __call__(self, conversation: Conversation, /) -> Sequence[JSONDict]:
        """The next assistant turn for `conversation`."""
        exchanges = conversation.tool_exchanges()
        failed = [e for e in conversation.latest_exchanges() if e.is_error]
        if failed:
            return [text(f"Stopping: `{failed[0].command}` failed: {failed[0].result}")]
        listing = result_of(exchanges, "view", "/memories")
        if listing is None:
            return [text("Reading memory first."), memory_call("view", path="/memories")]
        paths = _listed_paths(listing)
        if PROGRESS not in paths:
            return self._initialize(exchanges)
        return self._work(exchanges, paths)

    def _initialize(self, exchanges: list[ToolExchange]) -> Sequence[JSONDict]:
        if any(e.command == "create" for e in exchanges):
            return [
                text("Set up the progress log, a three-feature checklist and the start-up note.")
            ]
        checklist = "".join(f"- [ ] {name}\n" for name in FEATURE_NAMES)
        return [
            text("Memory is empty, so this is the first session: setting up the artifacts."),
            memory_call(
                "create",
                path=PROGRESS,
                file_text="# Progress log\n\n- Session 1 (initializer): created the feature "
                "checklist and the start-up note; no feature work yet.\n",
            ),
            memory_call(
                "create",
                path=FEATURES,
                file_text=f"# Features (tick only after end-to-end verification)\n\n{checklist}",
            ),
            memory_call(
                "create",
                path=INIT_NOTE,
                file_text="# Start-up\n\nRun ./init.sh at the start of every session: it installs "
                "the dependencies and starts the dev server.\n",
            ),
            memory_call(
                "create",
                path=SCRATCH,
                file_text="Scratch: JSON lines or SQLite for tasks? Decide before 'list tasks'.\n",
            ),
        ]

    def _work(self, exchanges: list[ToolExchange], paths: set[str]) -> Sequence[JSONDict]:
        views = {
            path: result_of(exchanges, "view", path) for path in (PROGRESS, FEATURES, INIT_NOTE)
        }
        unread = [path for path, result in views.items() if result is None]
        if unread:
            return [
                text("Reading the progress log, the checklist and the start-up note."),
                *(memory_call("view", path=path) for path in unread),
            ]
        progress, features = cast(str, views[PROGRESS]), cast(str, views[FEATURES])
        tick = next((e for e in exchanges if e.command == "str_replace"), None)
        if tick is None:
            return self._tick_and_log(progress, features)
        feature = str(tick.input.get("new_str", "")).removeprefix("- [x] ")
        if not any(e.command in ("rename", "delete") for e in exchanges):
            if SCRATCH in paths:
                return [
                    text("Archiving the scratch note."),
                    memory_call("rename", old_path=SCRATCH, new_path=ARCHIVED_SCRATCH),
                ]
            if ARCHIVED_SCRATCH in paths:
                return [
                    text("The archived scratch note is stale; deleting it."),
                    memory_call("delete", path=ARCHIVED_SCRATCH),
                ]
        return [text(f"Implemented and verified '{feature}', ticked it and logged the session.")]

    def _tick_and_log(self, progress: str, features: str) -> Sequence[JSONDict]:
        todo = [line for _, line in numbered_lines(features) if line.startswith("- [ ] ")]
        if not todo:
            return [text("Every feature in the checklist is already done.")]
        feature = todo[0].removeprefix("- [ ] ")
        log = numbered_lines(progress)
        # A trailing newline shows as an empty last numbered line, which `insert` does not count.
        last_line = max((number for number, line in log if line.strip()), default=0)
        sessions = [int(m.group(1)) for _, line in log if (m := _SESSION_LINE.match(line))]
        session = max(sessions, default=0) + 1
        return [
            text(f"Ran ./init.sh; working on '{feature}'. It passes its end-to-end check."),
            memory_call("str_replace", path=FEATURES, old_str=todo[0], new_str=f"- [x] {feature}"),
            memory_call(
                "insert",
                path=PROGRESS,
                insert_line=last_line,
                insert_text=f"- Session {session} (worker): implemented '{feature}', verified it "
                "end to end, ticked it in features.md.\n",
            ),
        ]


def result_of(exchanges: Iterable[ToolExchange], command: str, path: str) -> str | None:
    """The result of the first successful `command` on `path`, if any."""
    for exchange in exchanges:
        if (
            exchange.command == command
            and exchange.input.get("path") == path
            and not exchange.is_error
        ):
            return exchange.result
    return None


def _listed_paths(listing: str) -> set[str]:
    """The paths of a directory view (`{size}\\t{path}` lines after the header)."""
    return {line.split("\t", 1)[1].rstrip("/") for line in listing.splitlines()[1:] if "\t" in line}


def numbered_lines(view: str) -> list[tuple[int, str]]:
    """The `(number, text)` lines of a file view (`{n:>6}\\t{line}` after the header)."""
    lines: list[tuple[int, str]] = []
    for line in view.splitlines()[1:]:
        number, sep, content = line.partition("\t")
        if sep and number.strip().isdigit():
            lines.append((int(number), content))
    return lines


# --- command line -----------------------------------------------------------------------------


def run_store_demo(
    repo: Path,
    key: str,
    *,
    out: TextIO,
    use_real_api: bool = False,
    model: str | None = None,
    state_dir: Path | None = None,
) -> list[SessionTranscript]:
    """Run the demo with a :class:`gitmem.GitMemoryTool` per session on the store at ``repo``."""
    from gitmem.tool import GitMemoryTool

    def factory(label: str) -> BetaAbstractMemoryTool:
        return GitMemoryTool(repo, key=key, session=label, state_dir=state_dir)

    return run_demo(factory, out=out, use_real_api=use_real_api, model=model)
