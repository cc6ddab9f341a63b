"""The README tells the truth: its command-line examples run, its test command is CI's."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

import gitmem
from gitmem.cli import main

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
