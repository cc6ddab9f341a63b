"""Issue 5's evidence at a larger scale: each family's long variant, with cases tried and failures.

    python benchmarks/evidence.py                      # every family, default sizes
    python benchmarks/evidence.py --scale 0.2          # smaller (the counted sizes scale)
    python benchmarks/evidence.py --family model --family tamper
    python benchmarks/evidence.py --json evidence.json # the table as JSON too

Each family runs as its own ``pytest`` process over the test files that hold it, slow variants
included (``-m "slow or not slow"``), with ``-s`` so that the tests' own count lines are kept.
"Cases tried" is what the family counts: model-test steps, hostile inputs (fixed and generated),
SIGKILLs, concurrent writes, tamper cases, test cases. Failures are pytest's failures and errors.
The table ends with the command that reproduces each row. Exit status 1 if anything failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALL_MARKS = "slow or not slow"


@dataclass
class Family:
    """One family of evidence: which tests, at what size, and how its cases are counted."""

    name: str
    what: str
    targets: list[str]
    env: Callable[[float], dict[str, str]] = lambda scale: {}
    # How to count cases from the evidence JSON files and the tests' printed lines; the number
    # of pytest test cases when neither gives one.
    count: Callable[[dict[str, dict[str, int]], list[str]], int | None] = lambda j, lines: None
    lines: str | None = None
    keyword: str | None = None


def _json_sum(prefix: str, key: str) -> Callable[[dict[str, dict[str, int]], list[str]], int]:
    """The sum of ``key`` over the evidence files whose names start with ``prefix``."""
    return lambda j, lines: sum(int(v.get(key, 0)) for n, v in j.items() if n.startswith(prefix))


def _flatten(pattern_hits: list[tuple[str, ...] | str]) -> list[str]:
    return [h for hit in pattern_hits for h in (hit if isinstance(hit, tuple) else (hit,)) if h]


def _line_sum(pattern: str) -> Callable[[dict[str, dict[str, int]], list[str]], int | None]:
    def count(_j: dict[str, dict[str, int]], lines: list[str]) -> int | None:
        found = [int(m) for line in lines for m in _flatten(re.findall(pattern, line))]
        return sum(found) if found else None

    return count


FAMILIES = [
    Family(
        "paths",
        "hostile paths refused by parse and by every command (test cases)",
        ["tests/test_paths.py"],
    ),
    Family(
        "input",
        "hostile tool inputs: the fixed list plus hypothesis-generated objects",
        ["tests/test_hostile_input.py"],
        env=lambda s: {"GITMEM_HOSTILE_EXAMPLES": str(max(100, int(10_000 * s)))},
        count=_json_sum("hostile-", "cases"),
        lines=r"^hostile input",
    ),
    Family(
        "model",
        "stateful model test: commands and restores against an in-memory model (steps)",
        ["tests/test_model.py"],
        env=lambda s: {
            "GITMEM_MODEL_EXAMPLES": str(max(20, int(300 * s))),
            "GITMEM_MODEL_STEPS": "50",
        },
        count=_json_sum("model-", "steps"),
        lines=r"^model test",
    ),
    Family(
        "crashes",
        "writers and creators killed with SIGKILL; full disks (kills)",
        ["tests/test_durability.py"],
        count=_line_sum(r"(\d+) SIGKILLs|(?<=: )(\d+) rounds"),
        lines=r"^(kill test|killed store creation|real full filesystem)",
    ),
    Family(
        "concurrency",
        "processes and threads writing one store at once (writes)",
        ["tests/test_concurrency.py"],
        count=_line_sum(r"(\d+) writes in"),
        lines=r"^\d+ (processes|threads) x",
    ),
    Family(
        "tamper",
        "tampering by a writer without the key (cases)",
        ["tests/test_tamper.py", "tests/test_security.py"],
        keyword="tamper or flipped or altered or forged or rolled or deleted_branch or another",
    ),
    Family(
        "plaintext",
        "no plaintext in objects, refs, reflogs, config or packs (test cases)",
        ["tests/test_security.py"],
        keyword="plaintext or needles",
    ),
]


@dataclass
class Result:
    family: str
    what: str
    cases: int
    failures: int
    seconds: float
    command: str
    notes: list[str] = field(default_factory=list)


def run_family(family: Family, scale: float) -> Result:
    env_extra = family.env(scale)
    args = ["-m", ALL_MARKS, "-s", "-q", "-p", "no:cacheprovider", *family.targets]
    if family.keyword:
        args += ["-k", family.keyword]
    shown_env = " ".join(f"{k}={v}" for k, v in env_extra.items())
    command = (shown_env + " " if shown_env else "") + shlex.join(["pytest", *args])
    with tempfile.TemporaryDirectory(prefix="gitmem-evidence-") as tmp:
        junit = Path(tmp) / "junit.xml"
        evidence = Path(tmp) / "evidence"
        env = {**os.environ, **env_extra, "GITMEM_EVIDENCE_DIR": str(evidence)}
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *args, f"--junitxml={junit}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - started
        tests = failures = 0
        if junit.is_file():
            for suite in ET.parse(junit).getroot().iter("testsuite"):
                tests += int(suite.get("tests", 0)) - int(suite.get("skipped", 0))
                failures += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        elif proc.returncode != 0:
            failures = 1
        counts = {p.stem: json.loads(p.read_text()) for p in sorted(evidence.glob("*.json"))}
    lines = [line.strip() for line in proc.stdout.splitlines()]
    notes = [line for line in lines if family.lines and re.search(family.lines, line)]
    hits = family.count(counts, lines)
    json_failures = sum(
        int(c.get("failures", 0) or c.get("mismatches", 0)) for c in counts.values()
    )
    if proc.returncode not in (0, 5) and failures == 0:
        failures = 1  # pytest itself failed (usage error, crash)
        notes.append(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "")
    return Result(
        family.name,
        family.what,
        tests if hits is None else hits,
        max(failures, json_failures),
        seconds,
        command,
        notes,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=[f.name for f in FAMILIES])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the counted sizes")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    options = parser.parse_args()
    chosen = [f for f in FAMILIES if not options.family or f.name in options.family]
    results = []
    for family in chosen:
        print(f"running {family.name}: {family.what} ...", flush=True)
        result = run_family(family, options.scale)
        results.append(result)
        for note in result.notes:
            print(f"    {note}")
        print(
            f"    {result.cases} cases tried, {result.failures} failures ({result.seconds:.0f}s)",
            flush=True,
        )
    print()
    print(f"{'family':<12} {'cases tried':>11} {'failures':>8} {'seconds':>7}  reproduce with")
    for r in results:
        print(f"{r.family:<12} {r.cases:>11} {r.failures:>8} {r.seconds:>7.0f}  {r.command}")
    if options.json:
        options.json.write_text(
            json.dumps([r.__dict__ for r in results], indent=1) + "\n", encoding="utf-8"
        )
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
