"""Many agents, one remote: separate processes writing and syncing against one ``git daemon``.

The small case of ``benchmarks/bench_many_agents.py`` (which measures N = 2 to 20): three agent
processes, each with its own replica and one shared state directory, write neighbouring lines
of shared files and sync after every write.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest
from helpers_git_servers import bare_repo, git_daemon

import gitmem.sync
from gitmem import MemoryStore
from gitmem.errors import PushRejected
from gitmem.highwater import HighWater
from gitmem.sync import SYNC_PATIENCE


def _bench() -> ModuleType:
    path = Path(__file__).parent.parent / "benchmarks" / "bench_many_agents.py"
    spec = importlib.util.spec_from_file_location("bench_many_agents", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_many_agents", module)
    spec.loader.exec_module(module)
    return module


bench = _bench()


def test_three_agents_syncing_after_every_write(tmp_path: Path, key: str) -> None:
    args = argparse.Namespace(writes=6, tries=1, timeout=300)
    row = bench.one_run(3, args, key, tmp_path)
    assert row["writes"] == 18
    assert row["lost"] == 0
    assert row["false_alarms"] == 0
    # Every sync succeeds within its own attempts, and a refused attempt leaves no merge
    # behind: the remote gains the writes and at most one merge per sync.
    assert (row["syncs"], row["ok"], row["failures"]) == (18, 18, {})
    assert row["commits_per_write"] <= 2
    assert row["siblings"] == 0
    assert row["rounds"] in (1, 2)


def test_a_push_refused_though_the_remote_did_not_move_is_not_retried(
    tmp_path: Path, key: str
) -> None:
    # Sync retries only for a remote that moved: a refusal that stays (a hook, a protected
    # branch) is reported after the second attempt, not after its whole patience.
    served = tmp_path / "served"
    served.mkdir()
    bare = bare_repo(served, "memory.git")
    with git_daemon(served) as base:
        url = f"{base}/memory.git"
        store = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state")
        store.create("/memories/a.md", "a\n")
        store.add_remote("origin", url)
        store.push()
        hook = bare / "hooks" / "pre-receive"
        hook.write_text("#!/bin/sh\necho 'branch is protected' >&2\nexit 1\n")
        hook.chmod(0o755)
        store.create("/memories/b.md", "b\n")
        started = time.monotonic()
        with pytest.raises(PushRejected, match="refused the update of refs/heads/main"):
            store.sync()
        assert time.monotonic() - started < SYNC_PATIENCE / 2


def test_agents_on_one_machine_take_turns_and_never_race(tmp_path: Path, key: str) -> None:
    # Processes sharing a state directory sync with one remote one at a time: no sync of
    # theirs is ever refused because another pushed first, so each takes one attempt (one
    # fetch). Racing, they spent their shared processors on attempts that were refused.
    args = argparse.Namespace(writes=6, tries=1, timeout=300, trace=True)
    row = bench.one_run(4, args, key, tmp_path)
    assert (row["syncs"], row["ok"], row["lost"], row["false_alarms"]) == (24, 24, 0, 0)
    assert row["trace"]["ok"]["calls"] == 24
    assert row["trace"]["ok"]["attempts"] == 1.0
    assert "pause" not in row["trace"]["ok"]
    assert row["commits_per_write"] <= 2


def test_a_sync_waits_for_the_turn_another_process_holds(tmp_path: Path, key: str) -> None:
    served = tmp_path / "served"
    served.mkdir()
    bare = bare_repo(served, "memory.git")
    with git_daemon(served) as base:
        url = f"{base}/memory.git"
        store = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state")
        store.create("/memories/a.md", "a\n")
        store.add_remote("origin", url)
        # Another process of this client syncing with that remote holds its turn (a second
        # open file description of the lock file is as good as another process).
        marks = HighWater(store.store_id, tmp_path / "state", remote=url)
        done = threading.Event()
        with marks.turn(time.monotonic() + 5):

            def sync() -> None:
                store.sync()
                done.set()

            thread = threading.Thread(target=sync)
            thread.start()
            assert not done.wait(0.5)
            assert _remote_head(bare) is None
        thread.join(30)
        assert done.is_set()
        assert _remote_head(bare) == store.head()


def test_a_turn_held_past_the_patience_is_reported_and_loses_nothing(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    bare = bare_repo(served, "memory.git")
    with git_daemon(served) as base:
        url = f"{base}/memory.git"
        store = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state")
        store.create("/memories/a.md", "a\n")
        store.add_remote("origin", url)
        monkeypatch.setattr(gitmem.sync, "SYNC_PATIENCE", 0.3)
        marks = HighWater(store.store_id, tmp_path / "state", remote=url)
        with marks.turn(time.monotonic() + 5), pytest.raises(PushRejected) as raised:
            store.sync()
        assert str(raised.value) == (
            f"other processes of this client kept syncing with the remote {url} for 0.3 "
            "seconds; nothing was lost, sync again"
        )
        assert _remote_head(bare) is None
        assert store.sync().action == "pushed"
        assert _remote_head(bare) == store.head()


def _remote_head(bare: Path) -> str | None:
    out = subprocess.run(
        ["git", "--git-dir", str(bare), "rev-parse", "--verify", "-q", "refs/heads/main"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or None


@pytest.mark.slow
def test_twenty_agents_syncing_after_every_write(tmp_path: Path, key: str) -> None:
    # The target: at N=20 at least 95% of syncs succeed within sync's own retries, no
    # false alarm, no lost write, at most two remote commits per write.
    args = argparse.Namespace(writes=20, tries=1, timeout=900)
    row = bench.one_run(20, args, key, tmp_path)
    assert (row["syncs"], row["lost"], row["false_alarms"]) == (400, 0, 0)
    assert row["ok"] >= 0.95 * row["syncs"]
    assert row["commits_per_write"] <= 2
    assert row["rounds"] in (1, 2)
