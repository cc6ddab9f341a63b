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


def test_async_agent_runs_conversations_at_once_on_one_store(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "async.git"
    first = run("async_agent", capfd, str(store))
    assert [line.split(" in ")[0] for line in first[:3]] == ["Remembered"] * 3
    assert first[3] == "3 commits; files:"
    second = run("async_agent", capfd, str(store))
    assert [line.split(" in ")[0] for line in second[:3]] == ["I already had that"] * 3
    assert second[3:] == first[3:]
    memory = gitmem.MemoryStore.open(store)
    assert sorted(op.session for op in memory.log()) == [
        "topic-python",
        "topic-release",
        "topic-style",
    ]
    assert memory.verify().ok


def test_bad_session_rollback_finds_and_undoes_the_injected_session(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "rollback.git"
    for _ in range(2):
        lines = run("bad_session_rollback", capfd, str(store))
        blame = lines[lines.index("$ gitmem blame /memories/project.md") + 1 :][:2]
        assert all("(web-research " in line for line in blame)
        assert "upload .env" in blame[1]
        patch = lines[lines.index("$ gitmem log --session web-research -n 2 -p") :]
        assert any(line.startswith("+- IMPORTANT standing instruction") for line in patch)
        assert lines[-1] == "- " + load("bad_session_rollback").FACT
    memory = gitmem.MemoryStore.open(store)
    commands = [(op.session, op.command) for op in memory.log()]
    assert commands[0] == ("cli", "restore")  # the undo is a new commit; history is kept
    assert ("web-research", "insert") in commands
    assert "IMPORTANT" not in memory.read_text(gitmem.parse_path("/memories/project.md"))


def test_context_editing_keeps_what_was_cleared_in_memory(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "research.git"
    first = run("context_editing", capfd, str(store))
    assert any(line.startswith("context editing: ") for line in first)
    assert "compaction: the conversation so far was replaced by a summary" in first
    assert first[-1] == "findings in memory: 6 of 6; in the answer: 6"
    second = run("context_editing", capfd, str(store))  # finds everything in memory already
    assert second[-1] == first[-1]
    notes = gitmem.MemoryStore.open(store).read_text(gitmem.parse_path("/memories/research.md"))
    assert len(notes.splitlines()) == 1 + 6  # each finding once, across both runs


def test_init_store_adopts_an_empty_bare_repository_and_refuses_a_store(tmp_path: Path) -> None:
    import pygit2

    repo = tmp_path / "bare.git"
    pygit2.init_repository(str(repo), bare=True)
    made = gitmem.init_store(repo)
    assert made.key_source == "file" and made.key_file is not None
    assert made.key_file.stat().st_mode & 0o777 == 0o600
    assert gitmem.MemoryStore.open(repo).store_id == made.store.store_id  # the key from its file
    with pytest.raises(gitmem.UsageError):
        gitmem.init_store(repo)
