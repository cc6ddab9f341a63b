"""The user documentation's code blocks run as written (tests/docex.py says how).

Each document's blocks run in order in a scratch directory, with the hermetic home of
conftest.py; nothing reaches the network or the Anthropic API. A block that cannot run here
carries ``<!-- skip: next "why" -->`` in the document, and the number of those is pinned below,
so that a new one is a reviewed change of this file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docex import Context, compare, parse, run_document
from test_history import built_once

import gitmem
from gitmem.crypto import decode_key
from gitmem.demo.progress_log import run_store_demo
from gitmem.keysource import user_key_path, write_key_file

DOCUMENTS = [
    "README.md",
    "docs/quickstart.md",
    "docs/python-api.md",
    "docs/cli.md",
]

# Blocks marked "skip: next" in each document, each with its reason there.
SKIPS: dict[str, int] = {name: 0 for name in DOCUMENTS} | {"README.md": 2}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return built_once(tmp_path_factory)


@pytest.fixture
def context(tmp_path: Path) -> Context:
    work = tmp_path / "work"
    work.mkdir()
    return Context(directory=work, home=Path(os.environ["HOME"]), checks=CHECKS)


def test_every_document_has_its_test() -> None:
    assert all(parse(name).regions for name in DOCUMENTS)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_document(name: str, context: Context, built: tuple[Path, str], utc: None) -> None:
    setup = SETUPS.get(name)
    if setup is not None:
        setup(context, built)
    outcome = run_document(name, context)
    assert len(outcome.skipped) == SKIPS[name], outcome.skipped
    assert all(reason for reason in outcome.skipped.values())
    assert outcome.ran


def demo_store(repo: Path) -> str:
    """The demo's three sessions (initializer, worker-1, worker-2) at ``repo``; its key."""
    made = gitmem.init_store(repo)
    made.store.close()
    key = made.key_file.read_text().strip() if made.key_file else ""
    with open(os.devnull, "w") as sink:
        run_store_demo(repo, key, out=sink)
    return key


DRIFTS = {
    "output": "<!-- docex: stdout gitmem --repo history.git sessions -->\n```\nSESSION\n```\n",
    "error": "<!-- docex: stderr exit=2 gitmem --repo history.git show x -->\n```\nerr\n```\n",
    "undeclared": "```\ngitmem log\n```\n",
    "usage": "<!-- docex: usage -->\n```\ngitmem log [--sessions NAME]\n```\n",
    "signature": "<!-- docex: signature -->\n```python\ngitmem.init_store(p, save_key=True)\n```\n",
    "call": "<!-- docex: signature -->\n```python\ngitmem.init_store(p, save=True)\n```\n",
    "shell": "```sh\ngitmem --repo history.git log --command bogus\n```\n",
    "python": "```python\nimport gitmem\nassert gitmem.generate_key() == ''\n```\n",
    "tested-by": "<!-- docex: tested-by tests/test_readme.py::no_such_test -->\n```\n```\n",
    "server": "<!-- docex: server-command -->\n```sh\nclaude mcp add -- gitmem mcp --bogus\n```\n",
}


@pytest.mark.parametrize("drift", DRIFTS)
def test_a_block_that_drifted_fails(
    drift: str, context: Context, built: tuple[Path, str], tmp_path: Path, utc: None
) -> None:
    shutil.copytree(built[0], context.directory / "history.git")
    context.env["GITMEM_KEY"] = built[1]
    doc = tmp_path / "doc.md"
    doc.write_text("```python\nimport gitmem\n```\n" + DRIFTS[drift])
    with pytest.raises(AssertionError, match=r"doc\.md, line"):
        run_document(doc, context)


def history(context: Context, built: tuple[Path, str]) -> None:
    """docs/cli.md's examples use the demo's store; its outputs are of test_history's seven
    operations (1 June 2025, UTC) in history.git."""
    demo_store(context.directory / "agent-memory.git")
    shutil.copytree(built[0], context.directory / "history.git")
    with gitmem.MemoryStore.open(context.directory / "history.git", built[1]) as store:
        write_key_file(user_key_path(store.store_id), decode_key(built[1]))


def key_missing(shown: str, context: Context) -> None:
    """The error of a store whose key is nowhere: agent-memory.git with its key file moved."""
    with gitmem.MemoryStore.open(context.directory / "agent-memory.git") as store:
        key_file = user_key_path(store.store_id)
    key_file.rename(key_file.with_suffix(".moved"))
    try:
        result = context.gitmem(["--repo", "agent-memory.git", "log"])
    finally:
        key_file.with_suffix(".moved").rename(key_file)
    assert result.exit_code == 4
    compare(shown, result.stderr, context)


def completion(shown: str, context: Context) -> None:
    """Each shell's line makes its completion script; bash's runs (zsh and fish are not here)."""
    for shell in re.findall(r"_GITMEM_COMPLETE=(\w+)_source gitmem", shown):
        env = {**os.environ, "_GITMEM_COMPLETE": f"{shell}_source"}
        script = subprocess.run(
            [Path(sys.executable).with_name("gitmem")], env=env, capture_output=True, text=True
        )
        assert script.returncode == 0 and "_GITMEM_COMPLETE" in script.stdout, script.stderr
    (bash,) = [line for line in shown.splitlines() if "bash_source" in line]
    run = subprocess.run(
        ["bash", "-c", f"{bash} && complete -p gitmem"],
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0 and "gitmem" in run.stdout, run.stderr


SETUPS = {"docs/cli.md": history}
CHECKS = {"key-missing": key_missing, "completion": completion}
