"""docs/cli.md stays the reference: every command, option and JSON field is in it, and its exit
code table is the one on the exception classes."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import shutil
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from test_history import built_once

import gitmem
from gitmem.cli import main
from gitmem.errors import GitMemError

DOCS = (Path(__file__).parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")


def sections(level: str) -> dict[str, str]:
    """Heading text -> the text under it, for headings of ``level`` (``##`` or ``###``)."""
    found: dict[str, str] = {}
    parts = re.split(rf"^{level} (.+)$", DOCS, flags=re.MULTILINE)
    for title, body in zip(parts[1::2], parts[2::2], strict=True):
        found[title.strip()] = body
    return found


COMMANDS = sections("###")
TOP = sections("##")


def command_section(name: str) -> str:
    return COMMANDS.get(f"`gitmem {name}`", "")


def test_every_command_has_a_section() -> None:
    missing = [name for name in main.commands if not command_section(name)]
    assert missing == []


def _documented(param: click.Parameter, text: str) -> list[str]:
    if isinstance(param, click.Option):
        names = [o for o in [*param.opts, *param.secondary_opts] if o not in ("-h", "--help")]
        return [n for n in names if f"`{n}" not in text and f" {n} " not in text]
    metavar = param.metavar or param.name or ""
    words = re.findall(r"[A-Z][A-Z0-9]*", metavar.upper())
    return [w for w in words if w not in text]


def test_every_option_and_argument_is_documented() -> None:
    # The group's options, which every command also takes, are documented once (below).
    shared = {param.name for param in main.params}
    missing = {}
    for name, command in main.commands.items():
        text = command_section(name)
        own = [param for param in command.params if param.name not in shared]
        gaps = [gap for param in own for gap in _documented(param, text)]
        if gaps:
            missing[name] = gaps
    assert missing == {}


def test_global_options_are_documented() -> None:
    text = TOP["Global options"]
    gaps = [gap for param in main.params for gap in _documented(param, text)]
    assert gaps == []
    for flag in ("--version", "-h", "--help"):
        assert f"`{flag}`" in text


def _all_error_classes() -> set[type[GitMemError]]:
    for info in pkgutil.iter_modules(gitmem.__path__):
        if info.name != "__main__":
            importlib.import_module(f"gitmem.{info.name}")
    found: set[type[GitMemError]] = set()
    stack: list[type[GitMemError]] = [GitMemError]
    while stack:
        cls = stack.pop()
        found.add(cls)
        stack.extend(cls.__subclasses__())
    return found


def test_exit_code_table_matches_the_exception_classes() -> None:
    table = TOP["Exit codes"]
    documented: dict[str, int] = {}
    codes: set[int] = set()
    for line in table.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 3 or not cells[0].isdigit():
            continue
        codes.add(int(cells[0]))
        for name in re.findall(r"`(\w+)`", cells[2]):
            documented[name] = int(cells[0])
    actual = {cls.__name__: cls.exit_code for cls in _all_error_classes()}
    wrong = {n: (c, actual.get(n)) for n, c in documented.items() if actual.get(n) != c}
    assert wrong == {}
    undocumented = {n: c for n, c in actual.items() if c != 1 and n not in documented}
    assert undocumented == {}
    assert {c for c in actual.values()} <= codes
    assert {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 130, 141} == codes


def test_shell_completion_is_documented() -> None:
    text = TOP["Shell completion"]
    for shell in ("bash", "zsh", "fish"):
        assert f"_GITMEM_COMPLETE={shell}_source gitmem" in text


# -- JSON fields ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return built_once(tmp_path_factory)


def _keys(value: Any, prefix: str = "") -> set[str]:
    """Every key in ``value``; keys of objects inside lists too, except ``detail``'s."""
    keys: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            keys.add(key)
            if key not in ("detail", "commands"):
                keys |= _keys(inner)
    elif isinstance(value, list):
        for item in value:
            keys |= _keys(item)
    return keys


def test_json_fields_are_documented(built: tuple[Path, str], tmp_path: Path) -> None:
    repo = tmp_path / "store.git"
    shutil.copytree(built[0], repo)
    runner = CliRunner()
    env = {"GITMEM_KEY": built[1]}
    out = tmp_path / "out"
    runs = {
        "log": [["log"], ["log", "--stat"], ["log", "-p"], ["log", "-S", "one", "-p"]],
        "grep": [["grep", "o"], ["grep", "-l", "o"]],
        "show": [["show"]],
        "diff": [["diff", "HEAD~6"]],
        "blame": [["blame", "/memories/dir/n.md"]],
        "sessions": [["sessions"]],
        "view": [["view", "/memories"]],
        "cat": [["cat", "/memories/dir/n.md"]],
        "restore": [["restore", "HEAD~1", "--dry-run"], ["restore", "HEAD~1"]],
        "export": [["export", str(out)]],
        "import": [["import", str(out)]],
        "verify": [["verify"]],
        "accept-head": [["accept-head"]],
    }
    shared = TOP["Output"] + TOP["Revisions"]
    undocumented: dict[str, set[str]] = {}
    for name, invocations in runs.items():
        text = command_section(name) + shared
        for args in invocations:
            result = runner.invoke(main, ["--repo", str(repo), *args, "--json"], env=env)
            assert result.exit_code == 0, (args, result.output)
            for line in result.stdout.splitlines():
                gaps = {k for k in _keys(json.loads(line)) if f"`{k}`" not in text}
                if gaps:
                    undocumented.setdefault(name, set()).update(gaps)
    init = runner.invoke(main, ["init", str(tmp_path / "new.git"), "--print-key", "--json"])
    gaps = {k for k in json.loads(init.stdout) if f"`{k}`" not in command_section("init")}
    if gaps:
        undocumented["init"] = gaps
    assert undocumented == {}
    error = runner.invoke(main, ["--repo", str(repo), "show", "nope", "--json"], env=env)
    assert all(f"`{k}`" in TOP["Output"] for k in json.loads(error.stderr))
