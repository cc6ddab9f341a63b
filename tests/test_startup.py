"""The MCP server and the CLI start without loading what they do not use.

``gitmem mcp`` is started by the client at the beginning of every session and each ``gitmem``
command is a fresh process: the anthropic SDK (seconds of imports) is for the SDK's tool
classes only, ``mcp`` for ``gitmem mcp`` only, and zxcvbn for a passphrase being set. Checked
structurally, by what a fresh interpreter has in ``sys.modules``, never by a timing
(``benchmarks/bench_startup.py`` times it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("anthropic", "mcp", "zxcvbn")


def loaded_after(statement: str) -> list[str]:
    """The heavy top-level packages a fresh interpreter has loaded after ``statement``."""
    code = (
        f"import sys; {statement}; "
        f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    return out.split()


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("import gitmem.mcp_server", ["mcp"]),
        ("import gitmem.cli", []),
        ("import gitmem.commands", []),
        ("from gitmem import MemoryStore", []),
        ("import gitmem.tool", ["anthropic"]),
    ],
)
def test_only_the_front_end_that_needs_a_package_loads_it(
    statement: str, expected: list[str]
) -> None:
    assert loaded_after(statement) == expected


def test_the_tool_names_stay_where_they_were() -> None:
    import gitmem.tool
    from gitmem import commands

    assert gitmem.tool.COMMAND_FIELDS is commands.COMMAND_FIELDS
    assert issubclass(gitmem.tool.MemoryCommands, commands.MemoryCommands)
    assert set(gitmem.tool.__all__) >= {"MemoryCommands", "check_input", "COMMAND_FIELDS"}
