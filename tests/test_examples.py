"""The examples run offline, as a newcomer would run them, and do what they say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_agent_with_memory_runs_offline(tmp_path: Path) -> None:
    result = run_example("agent_with_memory.py", str(tmp_path / "m.git"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Noted: you prefer tea.",
        "1 example create /memories/preferences.md",
    ]
    # The generated key is shown once on stderr, never on stdout.
    assert "gitmem-key-1:" in result.stderr


def test_audit_and_restore_example(tmp_path: Path) -> None:
    result = run_example("audit_and_restore.py")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "History, newest first:"
    assert [line.split()[3] for line in lines[1:4]] == ["delete", "insert", "create"]
    assert lines[5:7] == ["- the build uses ./init.sh", "- tests: pytest -q"]
    assert lines[7] == "verify: 4 commits, 9 objects, ok=True"
