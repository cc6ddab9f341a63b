"""The README tells the truth: its command-line examples run, its test command is CI's."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import gitmem
from gitmem.cli import main
from gitmem.demo.agents import NoteModel
from gitmem.demo.scripted_api import API_KEY, ScriptedAPI

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def shell_block(after_heading: str) -> list[str]:
    section = README.split(after_heading, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_two_commands_are_what_ci_runs() -> None:
    setup, tests = shell_block("## Two commands")[0], shell_block("Run the tests:")[0]
    assert setup.endswith(".venv/bin/gitmem demo")
    assert (
        tests == "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest"
    )
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -q -e '.[test]'" in ci and ".venv/bin/pytest\n" in ci


def test_every_cli_example_in_the_readme_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    env: dict[str, str] = {}
    lines = shell_block("## The command line")
    assert lines[0] == "gitmem init agent-memory.git"
    for line in lines:
        words = shlex.split(line)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value
            monkeypatch.setenv(name, value)
            # A few sessions of the progress-log pattern give the examples something to show.
            demo_store(Path(value))
            continue
        assert words[0] == "gitmem"
        result = runner.invoke(main, words[1:], env=env)
        assert result.exit_code == 0, f"{line}: {result.output}"


def demo_store(repo: Path) -> None:
    from gitmem.demo.progress_log import run_store_demo

    store = gitmem.MemoryStore.open(repo)
    key_file = next((Path.home() / ".config" / "gitmem" / "keys").glob(f"{store.store_id}.key"))
    key = key_file.read_text().strip()
    with open("/dev/null", "w") as sink:
        run_store_demo(repo, key, out=sink)


def python_block(after_heading: str) -> str:
    section = README.split(after_heading, 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def test_the_python_quick_start_runs_twice_on_one_store(tmp_path: Path) -> None:
    """As written, on a fresh machine (the key kept between runs), against the local stand-in."""
    script = tmp_path / "quickstart.py"
    script.write_text(python_block("## Quick start (Python)"))
    with ScriptedAPI(NoteModel()) as api:
        env = {
            **{k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": api.base_url,
            "NO_PROXY": "127.0.0.1",
        }
        runs = [
            subprocess.run(
                [sys.executable, str(script)],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            for _ in range(2)
        ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert runs[0].stdout == "Remembered in /memories/preferences.md: I prefer tea.\n"
    assert runs[1].stdout == "I already had that in /memories/preferences.md: I prefer tea.\n"
    store = gitmem.MemoryStore.open(tmp_path / "agent-memory.git")  # the key from its file
    assert store.read_text(gitmem.parse_path("/memories/preferences.md")) == "- I prefer tea.\n"
    assert [op.command for op in store.log()] == ["create"]
