"""Scripted models for the examples and the README, played by the Messages API stand-in.

Like :class:`gitmem.demo.ProgressLogModel`, each decides its next turn from the memory tool's
results so far, never from a fixed list, so that it behaves on a second run (the memory is no
longer empty) as a model would. None of them is Claude; the stand-in labels every reply
``scripted-stand-in``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gitmem.demo import (
    FEATURES,
    INIT_NOTE,
    PROGRESS,
    ProgressLogModel,
    _numbered_lines,
    _result,
)
from gitmem.scripted_api import Conversation, JSONDict, ToolExchange, memory_call, text, tool_use

__all__ = [
    "CHECK_TOOL",
    "NOTE_PROMPT",
    "NoteModel",
    "VerifyingProgressModel",
    "note_target",
]

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
        if _result(exchanges, "view", "/memories") is None:
            return [text("Checking my memory first."), memory_call("view", path="/memories")]
        if any(e.command in ("create", "insert") for e in exchanges):
            return [text(f"Remembered in {path}: {fact}")]
        viewed = [e for e in exchanges if e.command == "view" and e.input.get("path") == path]
        if not viewed:
            return [memory_call("view", path=path)]
        if viewed[-1].is_error:
            return [memory_call("create", path=path, file_text=f"- {fact}\n")]
        lines = _numbered_lines(viewed[-1].result or "")
        if any(fact in line for _, line in lines):
            return [text(f"I already had that in {path}: {fact}")]
        last = max((number for number, line in lines if line.strip()), default=0)
        return [memory_call("insert", path=path, insert_line=last, insert_text=f"- {fact}\n")]


CHECK_TOOL = "run_check"
"""The name of the end-to-end check tool :class:`VerifyingProgressModel` calls before a tick."""


class VerifyingProgressModel(ProgressLogModel):
    """:class:`ProgressLogModel` that ticks a feature only after a passing ``run_check``.

    A worker reads the log, the checklist and the start-up note, then calls ``run_check`` with
    the first unticked feature; only a result starting with ``PASS`` lets it tick and log.
    """

    def _work(self, exchanges: list[ToolExchange], paths: set[str]) -> Sequence[JSONDict]:
        reads = [_result(exchanges, "view", path) for path in (PROGRESS, FEATURES, INIT_NOTE)]
        ticked = any(e.command == "str_replace" for e in exchanges)
        if all(r is not None for r in reads) and not ticked:
            todo = [line for _, line in _numbered_lines(reads[1] or "") if line.startswith("- [ ]")]
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
        return super()._work(exchanges, paths)
