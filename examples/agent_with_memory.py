"""An agent whose memory is a gitmem store: the SDK's tool runner with GitMemoryTool.

Run it with ``python examples/agent_with_memory.py [STORE]`` (default ``agent-memory.git``), as
often as you like: each run is one session that checks its memory and keeps a fact in it.

The key: the first run creates the store with :func:`gitmem.init_store`, which saves a new key
once to an owner-only file in ``~/.config/gitmem/keys/`` (exactly as ``gitmem init`` does), and
every later run finds it there. If you set ``GITMEM_KEY`` (the key text) or ``GITMEM_KEY_FILE``
(an owner-only file holding it) before the first run, that key is used instead and nothing is
saved: keep setting it. A store made with ``gitmem init`` works as it is.

With ``ANTHROPIC_API_KEY`` set it asks Claude; without, a scripted stand-in for the Messages API
on 127.0.0.1 answers instead (labelled ``scripted-stand-in``), so the example runs offline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anthropic

import gitmem
from gitmem.demo.agents import NOTE_PROMPT, NoteModel, claude_or_stand_in

PROMPT = NOTE_PROMPT.format(path="/memories/preferences.md", fact="I prefer tea to coffee.")


def ask(client: anthropic.Anthropic, memory: gitmem.GitMemoryTool, model: str) -> str:
    """Run one conversation to the end and return Claude's final text."""
    runner = client.beta.messages.tool_runner(
        model=model,
        max_tokens=1024,
        tools=[memory],
        messages=[{"role": "user", "content": PROMPT}],
    )
    final = runner.until_done()
    return "".join(block.text for block in final.content if block.type == "text")


def main(argv: list[str]) -> int:
    store = Path(argv[1] if len(argv) > 1 else "agent-memory.git")
    if not store.exists():
        gitmem.init_store(store)
    memory = gitmem.GitMemoryTool(store)  # a new session label for this run
    with claude_or_stand_in(NoteModel()) as (client, model):
        answer = ask(client, memory, model)
    print(answer)
    print(f"This run's session: {memory.session}")
    for op in memory.store.log():
        print(op.seq, op.command, *op.paths)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
