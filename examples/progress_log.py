"""The multi-session pattern of the memory-tool documentation, on one gitmem store.

Run it with ``python examples/progress_log.py [STORE]`` (default ``progress-log-memory.git``);
run it again to continue the project where the memory says it stands.

- An **initializer** session (only when the memory is new) sets up the progress log
  (``/memories/progress.md``), the feature checklist (``features.md``) and a note of the
  start-up command (``init.md``). It implements nothing.
- Each **worker** session remembers nothing, so it reads those three first, then works on one
  unticked feature, runs that feature's end-to-end check (the ``run_check`` tool, a stand-in for
  your real test command), ticks the feature only if the check passed, and appends one line to
  the progress log. Two workers run per invocation, labelled ``worker-N`` in order.
- Every change is a commit labelled with its session. The run ends with ``gitmem sessions`` and
  ``gitmem restore --session worker-N``: the memory as it was after this run's first worker.

The key: the first run creates the store with :func:`gitmem.init_store`, which saves a new key
once to an owner-only file in ``~/.config/gitmem/keys/`` (as ``gitmem init`` does); every later
run, and every ``gitmem`` command, finds it there. With ``GITMEM_KEY`` or ``GITMEM_KEY_FILE`` set
before the first run, that key is used and nothing is saved: keep setting it.

With ``ANTHROPIC_API_KEY`` set the sessions talk to Claude; without, a scripted stand-in for the
Messages API on 127.0.0.1 answers (labelled ``scripted-stand-in``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anthropic
from anthropic import beta_tool

import gitmem
from gitmem import history
from gitmem.demo.agents import VerifyingProgressModel, claude_or_stand_in

INITIALIZER_PROMPT = """\
This is the first session of a long-running project: a tiny command-line to-do app. Set up the \
memory later sessions rely on, with the memory tool: view /memories; if /memories/progress.md \
does not exist, create /memories/progress.md ("# Progress log", a blank line, then \
"- Session 1 (initializer): ..."), /memories/features.md (one "- [ ] " line for each of: add a \
task, list tasks, mark a task done), /memories/init.md (every session starts with ./init.sh) \
and /memories/scratch.md (an open design question). Implement nothing. End with one sentence."""

WORKER_PROMPT = """\
You are a new session on the tiny command-line to-do app and remember nothing. First view \
/memories, /memories/progress.md, /memories/features.md and /memories/init.md. Then take the \
first feature still "- [ ]" and only that one: implement it, then call run_check with its name. \
Only if run_check says PASS: tick it with str_replace ("- [ ]" -> "- [x]" on its line) and \
append "- Session N (worker): ..." to /memories/progress.md with insert (N: one more than the \
last session there). Housekeeping: rename /memories/scratch.md to /memories/archive/scratch.md \
if it exists, else delete /memories/archive/scratch.md if that exists. End with one sentence."""


@beta_tool
def run_check(feature: str) -> str:
    """Run the end-to-end check of one feature of the to-do app; PASS or FAIL with the output.

    Args:
        feature: the feature's name as the checklist writes it.
    """
    # A stand-in for your real test command (say, subprocess.run(["./e2e.sh", feature])).
    print(f"  run_check({feature!r}): PASS")
    return f"PASS: {feature}: the end-to-end scenario ran without errors"


def run_session(
    client: anthropic.Anthropic, model: str, store: Path, label: str, prompt: str
) -> None:
    """One session: a fresh conversation whose memory tool labels its commits ``label``."""
    memory = gitmem.GitMemoryTool(store, session=label)
    runner = client.beta.messages.tool_runner(
        model=model,
        max_tokens=2048,
        tools=[memory, run_check],
        messages=[{"role": "user", "content": prompt}],
    )
    final = runner.until_done()
    answer = " ".join(block.text for block in final.content if block.type == "text")
    print(f"[{label}] {answer}")


def gitmem_command(store: Path, *args: str) -> None:
    """Run a ``gitmem`` command on the store, as you would in a shell, showing it first."""
    print(f"$ gitmem {' '.join(args)}", flush=True)
    command = [sys.executable, "-m", "gitmem", "--repo", str(store), *args]
    subprocess.run(command, check=True)


def main(argv: list[str]) -> int:
    store = Path(argv[1] if len(argv) > 1 else "progress-log-memory.git")
    if not store.exists():
        gitmem.init_store(store)
    sessions = {s.session for s in history.sessions(gitmem.MemoryStore.open(store))}
    done = sum(1 for label in sessions if label.startswith("worker-"))
    workers = [f"worker-{done + 1}", f"worker-{done + 2}"]
    with claude_or_stand_in(VerifyingProgressModel()) as (client, model):
        if "initializer" not in sessions:
            run_session(client, model, store, "initializer", INITIALIZER_PROMPT)
        for label in workers:
            run_session(client, model, store, label, WORKER_PROMPT)
    gitmem_command(store, "sessions")
    gitmem_command(store, "restore", "--session", workers[0])
    gitmem_command(store, "cat", "/memories/features.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
