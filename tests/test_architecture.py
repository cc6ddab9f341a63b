"""ARCHITECTURE.md stays true: every module of gitmem/ has a row in its table of where each module
is tested, every test file it names exists, every benchmark script is listed, and its contents
list every section."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = (ROOT / "ARCHITECTURE.md").read_text("utf-8")


def section(title: str) -> str:
    start = TEXT.index(f"\n## {title}\n")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start : len(TEXT) if end < 0 else end]


def package_modules() -> set[str]:
    """The top-level modules and subpackages of gitmem/, as test_layers.py counts them, and the
    modules of the git storage (``git.objects``, ...), each a layer of its own there."""
    package = ROOT / "gitmem"
    found = {p.stem for p in package.glob("*.py")}
    found |= {p.parent.name for p in package.glob("*/__init__.py")}
    found |= {f"git.{p.stem}" for p in (package / "git").glob("*.py") if p.stem != "__init__"}
    return found


def rows_of_tests() -> dict[str, list[str]]:
    rows = re.findall(r"^\| `([a-z_.]+)` \| (.*) \|$", section("Where each module is tested"), re.M)
    return {module: re.findall(r"`(test_[a-z_]+\.py)`", tests) for module, tests in rows}


def test_every_module_has_a_row_of_tests() -> None:
    rows = rows_of_tests()
    assert sorted(package_modules() - rows.keys()) == []
    assert sorted(rows.keys() - package_modules()) == []
    assert [m for m, tests in rows.items() if not tests] == []


def test_every_test_file_named_exists() -> None:
    named = {name for tests in rows_of_tests().values() for name in tests}
    assert sorted(n for n in named if not (ROOT / "tests" / n).is_file()) == []


def test_every_benchmark_is_listed() -> None:
    listed = set(re.findall(r"`benchmarks/([a-z_]+\.py)`", section("Running the benchmarks")))
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    assert sorted(scripts - listed) == []
    assert sorted(listed - scripts) == []


def test_the_contents_list_every_section() -> None:
    contents = section("Contents")
    listed = re.findall(r"^\d+\. \[(.*?)\]\(#(.*?)\)", contents, flags=re.M)
    sections = [h for h in re.findall(r"^## (.*)$", TEXT, flags=re.M) if h != "Contents"]
    assert [title for title, _ in listed] == sections
    for title, anchor in listed:
        assert anchor == re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
