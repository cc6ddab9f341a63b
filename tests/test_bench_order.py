"""benchmarks/bench_commands.py's call order: every tool follows the same kinds of calls."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest


def _bench() -> ModuleType:
    # The benchmark imports the SDK's reference tool, a test dependency too.
    path = Path(__file__).parent.parent / "benchmarks" / "bench_commands.py"
    spec = importlib.util.spec_from_file_location("bench_commands", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_commands", module)
    spec.loader.exec_module(module)
    return module


bench = _bench()


def _predecessors(tools: list[str], rounds: int) -> dict[str, Counter[str]]:
    """Which tool's call came just before each tool's call, over ``rounds`` timed rounds
    after the warm-up ones."""
    calls = [t for r in range(-3, rounds) for t in bench.call_order(tools, r)]
    seen: dict[str, Counter[str]] = {t: Counter() for t in tools}
    start = 3 * len(tools)
    for before, call in zip(calls[start - 1 :], calls[start:], strict=False):
        seen[call][before] += 1
    return seen


@pytest.mark.parametrize("pairs", [1, 2, 3, 4])
def test_every_gitmem_tool_follows_the_same_kinds_of_calls(pairs: int) -> None:
    tools = [f"{kind}{p}" for p in range(pairs) for kind in ("gitmem", "reference")]
    cycle = len(tools)
    for r in range(-3, 2 * cycle):
        assert sorted(bench.call_order(tools, r)) == sorted(tools)
    seen = _predecessors(tools, 2 * cycle)
    kinds = {
        tool: Counter(before.rstrip("0123456789") for before in counts.elements())
        for tool, counts in seen.items()
    }
    gitmem = [kinds[t] for t in tools if t.startswith("gitmem")]
    reference = [kinds[t] for t in tools if t.startswith("reference")]
    assert all(k == gitmem[0] for k in gitmem), kinds
    assert all(k == reference[0] for k in reference), kinds
    # Inside the rounds every tool follows every other one; none follows itself but with
    # a single pair (two tools cannot avoid it, and then both do equally).
    for tool, counts in seen.items():
        assert set(counts) >= set(tools) - {tool}
        if pairs > 1:
            assert counts[tool] == 0
