"""The examples run offline, as a newcomer would run them, and do what they say.

Each runs twice in a row on the same store with no key in the environment: the first run makes
the store and saves its key to the per-user key file, the second must find it there (the second
run is the one a key made afresh each run breaks). They run in this process (``main(argv)``),
which keeps the suite fast (the README's quick start, the same code, runs as a script twice in
test_readme).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

import gitmem

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(name: str, capfd: pytest.CaptureFixture[str], *args: str) -> list[str]:
    """Run example ``name`` offline in this process; the lines it printed (it must succeed)."""
    assert "ANTHROPIC_API_KEY" not in os.environ
    assert load(name).main([name, *args]) == 0
    out, err = capfd.readouterr()
    assert "gitmem-key-1:" not in out + err  # no key is ever shown
    return out.splitlines()


def key_files() -> list[Path]:
    return sorted((Path(os.environ["XDG_CONFIG_HOME"]) / "gitmem" / "keys").glob("*.key"))


def test_agent_with_memory_keeps_its_key_across_runs(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "m.git")
    first = run("agent_with_memory", capfd, store)
    assert first[0] == "Remembered in /memories/preferences.md: I prefer tea to coffee."
    assert first[2:] == ["1 create /memories/preferences.md"]
    assert len(key_files()) == 1
    second = run("agent_with_memory", capfd, store)
    assert second[0] == "I already had that in /memories/preferences.md: I prefer tea to coffee."
    assert second[2:] == first[2:]  # nothing new to write
    assert len(key_files()) == 1 and first[1] != second[1]  # the same key, a new session


def test_agent_with_memory_uses_the_key_in_the_environment(
    tmp_path: Path, key: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITMEM_KEY", key)
    for _ in range(2):
        run("agent_with_memory", capfd, str(tmp_path / "m.git"))
    assert key_files() == []  # a key the user keeps is never copied anywhere


def test_progress_log_runs_the_multi_session_pattern_twice(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "progress.git"
    first = run("progress_log", capfd, str(store))
    labels = [line.split("]")[0] + "]" for line in first if line.startswith("[")]
    assert labels == ["[initializer]", "[worker-1]", "[worker-2]"]
    # Each worker checked its feature before ticking it.
    assert [line for line in first if "run_check" in line] == [
        "  run_check('add a task'): PASS",
        "  run_check('list tasks'): PASS",
    ]
    assert "$ gitmem sessions" in first and "$ gitmem restore --session worker-1" in first
    # The restore brought back the memory as it was after worker-1: one feature ticked.
    assert first[-3:] == ["- [x] add a task", "- [ ] list tasks", "- [ ] mark a task done"]
    second = run("progress_log", capfd, str(store))
    labels = [line.split("]")[0] + "]" for line in second if line.startswith("[")]
    assert labels == ["[worker-3]", "[worker-4]"]  # the memory is set up: no initializer
    assert second[-3:] == ["- [x] add a task", "- [x] list tasks", "- [ ] mark a task done"]
    memory = gitmem.MemoryStore.open(store)
    progress = memory.read_text(gitmem.parse_path("/memories/progress.md"))
    assert [line[:11] for line in progress.splitlines()[2:]] == [
        "- Session 1",
        "- Session 2",
        "- Session 3",
    ]
    assert memory.verify().ok


def test_audit_and_restore_example(capfd: pytest.CaptureFixture[str]) -> None:
    lines = run("audit_and_restore", capfd)
    assert lines[0] == "History, newest first:"
    assert [line.split()[3] for line in lines[1:4]] == ["delete", "insert", "create"]
    assert lines[5:7] == ["- the build uses ./init.sh", "- tests: pytest -q"]
    assert lines[7] == "verify: 4 commits, 9 objects, ok=True"
