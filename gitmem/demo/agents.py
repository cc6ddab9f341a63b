"""Scripted models for the examples and the README, played by the Messages API stand-in.

Like :class:`gitmem.demo.progress_log.ProgressLogModel`, each decides its next turn from the
memory tool's results so far, never from a fixed list, so that it behaves on a second run (the
memory is no longer empty) as a model would. None of them is Claude; the stand-in labels every reply
``scripted-stand-in``.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Sequence

from anthropic import Anthropic

from gitmem.demo.progress_log import (
    FEATURES,
    INIT_NOTE,
    PROGRESS,
    REAL_MODEL,
    ProgressLogModel,
    numbered_lines,
    result_of,
)
from gitmem.demo.scripted_api import (
    STAND_IN_MODEL,
    Conversation,
    JSONDict,
    ScriptedAPI,
    ScriptedModel,
    memory_call,
    text,
    tool_use,
)

__all__ = [
    "CHECK_TOOL",
    "NOTE_PROMPT",
    "RESEARCH_NOTES",
    "RESEARCH_PROMPT",
    "NoteModel",
    "ResearchModel",
    "VerifyingProgressModel",
    "claude_or_stand_in",
    "note_target",
]


@contextlib.contextmanager
def claude_or_stand_in(model: ScriptedModel) -> Iterator[tuple[Anthropic, str]]:
    """A sync client and the model id to ask: Claude when ``ANTHROPIC_API_KEY`` is set, else
    the Messages API stand-in on 127.0.0.1 with ``model`` answering."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        with Anthropic() as client:
            yield client, REAL_MODEL
    else:
        with ScriptedAPI(model) as api, api.client() as client:
            yield client, STAND_IN_MODEL


NOTE_PROMPT = "Check your memory, then remember in {path}: {fact}"
"""A prompt :class:`NoteModel` understands (Claude understands it too)."""

_TARGET = re.compile(r"(/memories/[\w./-]+\.md): (.+)$", re.S)


def note_target(prompt: str) -> tuple[str, str]:
    """The memory file and the fact a :data:`NOTE_PROMPT` names."""
    match = _TARGET.search(prompt)
    if match is None:
        raise ValueError(f"the prompt names no /memories/...md file and fact: {prompt!r}")
    return match.group(1), match.group(2).strip()


class NoteModel:
    """Keeps one fact in one memory file, as the prompt asks.

    It views ``/memories``, then the file; it creates the file when missing, appends the fact
    with ``insert`` when the file lacks it, and writes nothing when the fact is already there.
    """

    def __call__(self, conversation: Conversation, /) -> Sequence[JSONDict]:
        """The next assistant turn for ``conversation``."""
        path, fact = note_target(conversation.user_prompt())
        exchanges = conversation.tool_exchanges()
        failed = [
            e
            for e in conversation.latest_exchanges()
            if e.is_error and not (e.command == "view" and e.input.get("path") == path)
        ]
        if failed:
            return [text(f"Stopping: `{failed[0].command}` failed: {failed[0].result}")]
        if result_of(exchanges, "view", "/memories") is None:
            return [text("Checking my memory first."), memory_call("view", path="/memories")]
        if any(e.command in ("create", "insert") for e in exchanges):
            return [text(f"Remembered in {path}: {fact}")]
        viewed = [e for e in exchanges if e.command == "view" and e.input.get("path") == path]
        if not viewed:
            return [memory_call("view", path=path)]
        if viewed[-1].is_error:
            return [memory_call("create", path=path, file_text=f"- {fact}\n")]
        lines = numbered_lines(viewed[-1].result or "")
        if any(fact in line for _, line in lines):
            return [text(f"I already had that in {path}: {fact}")]
        last = max((number for number, line in lines if line.strip()), default=0)
        return [memory_call("insert", path=path, insert_line=last, insert_text=f"- {fact}\n")]


CHECK_TOOL = "run_check"
"""The name of the end-to-end check tool :class:`VerifyingProgressModel` calls before a tick."""


class VerifyingProgressModel:
    """:class:`ProgressLogModel` that ticks a feature only after a passing ``run_check``.

    A worker reads the log, the checklist and the start-up note, then calls ``run_check`` with
    the first unticked feature; only a result starting with ``PASS`` lets the progress-log model
    go on to tick it and log the session.
    """

    def __init__(self) -> None:
        self._plain = ProgressLogModel()

    def __call__(self, conversation: Conversation, /) -> Sequence[JSONDict]:
        """The next assistant turn for ``conversation``."""
        exchanges = conversation.tool_exchanges()
        reads = [result_of(exchanges, "view", path) for path in (PROGRESS, FEATURES, INIT_NOTE)]
        ticked = any(e.command == "str_replace" for e in exchanges)
        if all(r is not None for r in reads) and not ticked:
            todo = [line for _, line in numbered_lines(reads[1] or "") if line.startswith("- [ ]")]
            if todo:
                feature = todo[0].removeprefix("- [ ] ")
                checks = [e for e in exchanges if e.name == CHECK_TOOL]
                if not checks:
                    return [
                        text(f"Ran ./init.sh and implemented '{feature}'; checking it end to end."),
                        tool_use(CHECK_TOOL, {"feature": feature}),
                    ]
                if not (checks[-1].result or "").startswith("PASS"):
                    return [text(f"'{feature}' failed its check; it stays unticked.")]
        return self._plain(conversation)


RESEARCH_PROMPT = """\
Read each of these documents with read_document, one at a time: {names}. After reading each \
one, and before reading the next, append its key finding as one line "- NAME: FINDING" to \
/memories/research.md (create it with a "# Findings" line first if it is missing). Older tool \
results are cleared from your context as you go and the conversation may be compacted, so keep \
every finding in memory and check memory to see where you are. When every document has its \
line, view /memories/research.md and answer with the findings."""
"""The task :class:`ResearchModel` carries out (Claude understands it too)."""

RESEARCH_NOTES = "/memories/research.md"
_NAMES = re.compile(r"one at a time: (.+?)\. After")


class ResearchModel:
    """Reads documents one by one and keeps each finding in memory, as ``RESEARCH_PROMPT`` asks.

    Everything it knows comes from what is still in its context: after context editing clears a
    document, or compaction leaves only a summary, it finds its progress in memory again.
    """

    def __call__(self, conversation: Conversation, /) -> Sequence[JSONDict]:
        """The next assistant turn for ``conversation``."""
        match = _NAMES.search(conversation.user_prompt())
        if match is None:
            return [text("I see no documents to read.")]
        names = [name.strip() for name in match.group(1).split(",")]
        exchanges = conversation.tool_exchanges()
        latest = conversation.latest_exchanges()
        failed = [e for e in latest if e.is_error and e.input.get("path") != RESEARCH_NOTES]
        if failed:
            return [text(f"Stopping: `{failed[0].command or failed[0].name}` failed.")]
        if result_of(exchanges, "view", "/memories") is None:
            return [
                text("Checking memory for earlier progress."),
                memory_call("view", path="/memories"),
            ]
        notes = [
            e for e in exchanges if e.name == "memory" and e.input.get("path") == RESEARCH_NOTES
        ]
        if not notes:
            return [memory_call("view", path=RESEARCH_NOTES)]
        # The newest full view of the notes (or their creation); inserts after it add lines.
        last_state = max(
            (i for i, e in enumerate(notes) if e.command in ("create", "view") and not e.is_error),
            default=None,
        )
        if last_state is None:
            return [memory_call("create", path=RESEARCH_NOTES, file_text="# Findings\n")]
        known = notes[last_state]
        lines = (
            ["# Findings"]
            if known.command == "create"
            else [line for _, line in numbered_lines(known.result or "") if line.strip()]
        )
        lines += [
            str(e.input.get("insert_text", "")) for e in notes[last_state + 1 :] if not e.is_error
        ]
        noted = {line[2:].split(":", 1)[0] for line in lines if line.startswith("- ")}
        todo = [name for name in names if name not in noted]
        if not todo:
            if known.command == "view" and last_state == len(notes) - 1 and latest == [known]:
                findings = "\n".join(line for line in lines if line.startswith("- "))
                return [text(f"All {len(names)} findings, from memory:\n{findings}")]
            return [memory_call("view", path=RESEARCH_NOTES)]
        read = [e for e in latest if e.name == "read_document" and e.input.get("name") == todo[0]]
        if read and read[0].result and "Key finding:" in read[0].result:
            finding = read[0].result.split("Key finding:", 1)[1].strip().splitlines()[0]
            return [
                memory_call(
                    "insert",
                    path=RESEARCH_NOTES,
                    insert_line=len(lines),
                    insert_text=f"- {todo[0]}: {finding}",
                )
            ]
        return [tool_use("read_document", {"name": todo[0]})]
