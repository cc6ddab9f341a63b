"""Memory with context editing and compaction: what leaves the context survives in memory.

Run it with ``python examples/context_editing.py [STORE]`` (default ``research-memory.git``).

One long conversation reads six large documents (``read_document``, about 10,000 tokens each)
and appends each document's key finding to ``/memories/research.md`` before reading the next.
The request carries ``context_management`` as the memory-tool documentation recommends:

- ``clear_tool_uses_20250919``: once the context passes 30,000 input tokens, older tool results
  are cleared (all but the newest one), at least 5,000 tokens at a time. ``exclude_tools:
  ["memory"]`` keeps the memory tool's own calls and results: they are what the model needs to
  find its place again.
- ``compact_20260112``: at 50,000 input tokens the server compacts the conversation into a
  summary, which comes back first in the reply and stands in for the history after it.

After the documents have been cleared from the context, and the conversation compacted, the
model's answer still has every finding: it reads them back from memory. The example prints each
edit as it happens, then checks the answer against the memory file.

The key: the first run creates the store with :func:`gitmem.init_store`, which saves a new key
once to an owner-only file in ``~/.config/gitmem/keys/`` (as ``gitmem init`` does); later runs
find it there. With ``GITMEM_KEY`` or ``GITMEM_KEY_FILE`` set before the first run, that key is
used and nothing is saved: keep setting it. A later run starts a new session and a new findings
file is not needed: the model finds the findings already there and only answers.

With ``ANTHROPIC_API_KEY`` set it talks to Claude (a few hundred thousand input tokens in all);
without, a scripted stand-in for the Messages API on 127.0.0.1 answers, and applies the edits
itself by an approximation of the API's rules (tokens counted as characters / 4).
"""

from __future__ import annotations

import sys
from pathlib import Path

from anthropic import beta_tool
from anthropic.types.beta import BetaContextManagementConfigParam

import gitmem
from gitmem.demo.agents import (
    RESEARCH_NOTES,
    RESEARCH_PROMPT,
    ResearchModel,
    claude_or_stand_in,
)

DOCUMENTS = {
    "alpha": "the cache hit rate doubles when keys are normalised first",
    "bravo": "most latency comes from TLS handshakes, not from queries",
    "charlie": "retries without jitter caused the March outage",
    "delta": "the nightly job can run hourly at a tenth of the cost",
    "echo": "two of the five services never read their config reloads",
    "foxtrot": "disk usage grows 4% a week, so the volume is full by June",
}

CONTEXT_MANAGEMENT: BetaContextManagementConfigParam = {
    "edits": [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 30_000},
            "keep": {"type": "tool_uses", "value": 1},
            "clear_at_least": {"type": "input_tokens", "value": 5_000},
            "exclude_tools": ["memory"],
        },
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}},
    ]
}
BETAS = ["context-management-2025-06-27", "compact-2026-01-12"]


@beta_tool
def read_document(name: str) -> str:
    """Read one of the research documents in full.

    Args:
        name: the document's name.
    """
    finding = DOCUMENTS.get(name)
    if finding is None:
        return f"No document named {name!r}; there are: {', '.join(DOCUMENTS)}."
    body = f"Document {name}, section {{}}: measurements, tables and discussion. " * 600
    return f"# Document {name}\n\n{body.format(*range(600))}\n\nKey finding: {finding}\n"


def main(argv: list[str]) -> int:
    store = Path(argv[1] if len(argv) > 1 else "research-memory.git")
    if not store.exists():
        gitmem.init_store(store)
    memory = gitmem.GitMemoryTool(store)
    prompt = RESEARCH_PROMPT.format(names=", ".join(DOCUMENTS))
    with claude_or_stand_in(ResearchModel()) as (client, model):
        runner = client.beta.messages.tool_runner(
            model=model,
            max_tokens=2048,
            tools=[memory, read_document],
            messages=[{"role": "user", "content": prompt}],
            context_management=CONTEXT_MANAGEMENT,
            betas=BETAS,
        )
        shown = ""
        for message in runner:
            applied = message.context_management.applied_edits if message.context_management else []
            for edit in applied:
                if edit.type == "clear_tool_uses_20250919":
                    report = (
                        f"context editing: {edit.cleared_tool_uses} older tool result(s) "
                        f"cleared from the context, {edit.cleared_input_tokens} input tokens"
                    )
                    if report != shown:  # each request reports the edits applied to it
                        print(report)
                        shown = report
            if any(block.type == "compaction" for block in message.content):
                print("compaction: the conversation so far was replaced by a summary")
        final = runner.until_done()
    answer = "".join(block.text for block in final.content if block.type == "text")
    print(answer)
    notes = gitmem.MemoryStore.open(store).read_text(gitmem.parse_path(RESEARCH_NOTES))
    survived = [name for name, finding in DOCUMENTS.items() if f"- {name}: {finding}" in notes]
    in_answer = [name for name, finding in DOCUMENTS.items() if finding in answer]
    print(
        f"findings in memory: {len(survived)} of {len(DOCUMENTS)}; in the answer: {len(in_answer)}"
    )
    return 0 if len(survived) == len(in_answer) == len(DOCUMENTS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
