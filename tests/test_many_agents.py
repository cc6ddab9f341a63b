"""Many agents, one remote: separate processes writing and syncing against one ``git daemon``.

The small case of ``benchmarks/bench_many_agents.py`` (which measures N = 2 to 20): three agent
processes, each with its own replica and one shared state directory, write neighbouring lines
of shared files and sync after every write.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from helpers_git_servers import bare_repo, git_daemon

from gitmem import MemoryStore
from gitmem.errors import PushRejected
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
