"""An agent whose memory is a gitmem store: the SDK's tool runner with GitMemoryTool.

Run it with ``python examples/agent_with_memory.py [STORE]``. With ``ANTHROPIC_API_KEY`` set it
asks Claude; without, a scripted stand-in for the Messages API on 127.0.0.1 answers instead, so
the example runs offline. The store's key comes from ``GITMEM_KEY`` (a new one is generated and
printed to stderr when unset — save it, or the memory cannot be read again).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import anthropic

import gitmem
from gitmem.demo.scripted_api import Script, ScriptedAPI, memory_call, text

PROMPT = "Check your memory for my preferences, then remember that I prefer tea to coffee."


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


def offline_script() -> Script:
    """What a model might do with the prompt, played back by the local stand-in."""
    return Script(
        [memory_call("view", path="/memories")],
        [memory_call("create", path="/memories/preferences.md", file_text="- prefers tea\n")],
        [text("Noted: you prefer tea.")],
    )


def main() -> int:
    store = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "memory.git"
    key = os.environ.get("GITMEM_KEY")
    if key is None:
        key = gitmem.generate_key()
        print(f"New store key (keep it secret and safe): {key}", file=sys.stderr)
    memory = gitmem.GitMemoryTool(store, key=key, session="example")
    if os.environ.get("ANTHROPIC_API_KEY"):
        with anthropic.Anthropic() as client:
            answer = ask(client, memory, "claude-sonnet-5-5")
    else:
        with ScriptedAPI(offline_script()) as api, api.client() as client:
            answer = ask(client, memory, "scripted-stand-in")
    print(answer)
    for op in memory.store.log():
        print(op.seq, op.session, op.command, *op.paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
