"""Several conversations at once on one memory store: AsyncGitMemoryTool with the async client.

Run it with ``python examples/async_agent.py [STORE]`` (default ``async-memory.git``). Three
conversations run concurrently on one event loop, each with its own ``AsyncGitMemoryTool`` (and
so its own session label) over the same store; each keeps one fact in its own topic file. The
git and crypto work runs on worker threads, never on the event loop, and writes from all of them
(or from other processes) are serialized by the store's lock: each is one commit.

The key: the first run creates the store with :func:`gitmem.init_store`, which saves a new key
once to an owner-only file in ``~/.config/gitmem/keys/`` (as ``gitmem init`` does), where later
runs find it. With ``GITMEM_KEY`` or ``GITMEM_KEY_FILE`` set before the first run, that key is
used and nothing is saved: keep setting it.

With ``ANTHROPIC_API_KEY`` set it asks Claude; without, a scripted stand-in for the Messages API
on 127.0.0.1 answers instead (labelled ``scripted-stand-in``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import anthropic

import gitmem
from gitmem.demo.agents import NOTE_PROMPT, NoteModel
from gitmem.demo.scripted_api import STAND_IN_MODEL, ScriptedAPI

TOPICS = {
    "python": "The project targets Python 3.10 and newer.",
    "style": "Formatting is ruff format, 100 columns.",
    "release": "Releases are tagged vMAJOR.MINOR.PATCH on main.",
}


async def converse(
    client: anthropic.AsyncAnthropic, model: str, store: Path, topic: str, fact: str
) -> str:
    """One conversation, labelled ``topic-<topic>``; its final text."""
    memory = gitmem.AsyncGitMemoryTool(store, session=f"topic-{topic}")
    prompt = NOTE_PROMPT.format(path=f"/memories/topics/{topic}.md", fact=fact)
    runner = client.beta.messages.tool_runner(
        model=model,
        max_tokens=1024,
        tools=[memory],
        messages=[{"role": "user", "content": prompt}],
    )
    final = await runner.until_done()
    return "".join(block.text for block in final.content if block.type == "text")


async def run_all(client: anthropic.AsyncAnthropic, model: str, store: Path) -> list[str]:
    """Every topic's conversation at once."""
    return await asyncio.gather(
        *(converse(client, model, store, topic, fact) for topic, fact in TOPICS.items())
    )


async def amain(store: Path) -> list[str]:
    if os.environ.get("ANTHROPIC_API_KEY"):
        async with anthropic.AsyncAnthropic() as client:
            return await run_all(client, "claude-sonnet-5-5", store)
    with ScriptedAPI(NoteModel()) as api:
        async with api.async_client() as client:
            return await run_all(client, STAND_IN_MODEL, store)


def main(argv: list[str]) -> int:
    store = Path(argv[1] if len(argv) > 1 else "async-memory.git")
    if not store.exists():
        gitmem.init_store(store)
    for answer in asyncio.run(amain(store)):
        print(answer)
    memory = gitmem.MemoryStore.open(store)
    print(f"{sum(1 for _ in memory.log())} commits; files:")
    for path, text in sorted(memory.files().items()):
        print(f"  {path}: {text.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
