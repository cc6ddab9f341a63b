"""docs/quickstart.md works as written: every shell line runs, in order, in one shell, on a
machine with no Anthropic API key, and the Python step keeps its key across two runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = (ROOT / "docs" / "quickstart.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", QUICKSTART, flags=re.S)


def test_install_is_from_a_checkout_and_activates_the_venv() -> None:
    install = [line.split("  #")[0].strip() for line in blocks("sh")[0].splitlines()]
    assert install == ["python3 -m venv .venv", ". .venv/bin/activate", "pip install -e ."]
    assert "pip install gitmem-store" not in QUICKSTART
    # `pip install -e .` installs this checkout's project, the one the test suite runs from.
    assert 'name = "gitmem-store"' in (ROOT / "pyproject.toml").read_text()
    assert Path(sys.executable).with_name("gitmem").exists()


def test_every_step_runs_as_written_offline(tmp_path: Path) -> None:
    (python_block,) = blocks("python")
    (tmp_path / "agent.py").write_text(python_block)
    steps = [line for block in blocks("sh")[1:] for line in block.splitlines() if line.strip()]
    script = "\n".join(
        [
            "set -euo pipefail",
            # What `. .venv/bin/activate` (step 1) does: the venv's gitmem and python first.
            f'export PATH="{Path(sys.executable).parent}:$PATH"',
            *(f"echo '$ {line}'\n{line}" for line in steps),
        ]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITMEM_"))}
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    # The demo ran on the scripted stand-in, and said so.
    assert "$ gitmem log" in out
    # Two runs of agent.py on one store, one key: the second run's create is refused as
    # "already exists" (the store opened), and its insert is a commit of a second session.
    runs = out.split("$ python agent.py")[1:]
    assert len(runs) == 2
    assert "File created successfully at: /memories/progress.md" in runs[0]
    assert "Error: File /memories/progress.md already exists" in runs[1]
    sessions = re.findall(r"^session (\S+)$", out, flags=re.M)
    assert len(sessions) == 2 and sessions[0] != sessions[1]
    assert all(f"- {label}: read the log" in runs[1] for label in sessions)
    audit = out.split("$ gitmem sessions")[1].split("$ gitmem verify")[0]
    assert all(label in audit for label in sessions)
    assert re.search(r"^verified 4 commits, \d+ objects: ok$", out, flags=re.M)
    restored = out.split("$ gitmem cat /memories/progress.md\n")[1]
    assert restored == "# Progress\n"


@pytest.mark.slow
def test_the_install_step_as_written_in_a_fresh_checkout(tmp_path: Path) -> None:
    """Step 1 verbatim in a copy of the checkout (needs the package index for dependencies)."""
    checkout = tmp_path / "gitmem"
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            (checkout / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / name.decode())
    install = blocks("sh")[0]
    script = f"set -euo pipefail\n{install}\ngitmem --version\npython -c 'import gitmem'\n"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != Path(sys.executable).parent
    )
    result = subprocess.run(
        ["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True, timeout=1200
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "gitmem, version " in result.stdout
