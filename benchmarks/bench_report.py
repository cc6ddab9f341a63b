"""How fast a ``gitmem report`` page opens in headless Chromium, and how big it is, for long
histories.

    python benchmarks/bench_report.py                       # 1,000 and 10,000 operations
    python benchmarks/bench_report.py --ops 1000 --runs 9   # one size, more runs

Each store is built with ``bench_log.build_store`` (real gitmem operations by a series of
sessions), its report written with ``gitmem.report.write_report``, and the page opened in one
headless Chromium ``--runs`` times over the DevTools protocol (a blank page between runs). For
each size it prints the file's size, the time to write the report, and the medians of: the time
the page's script reports at its end (``window.__reportReadyMs``, ``performance.now()`` since
the navigation started: parsing the HTML and the data, building the first 200 rows) and the
time from sending the navigation to seeing ``window.__reportReady`` (what a person waits, with
the protocol's round trips).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench_log import build_store
from helpers_browser import Browser, find_chromium

from gitmem import MemoryStore, generate_key
from gitmem.report import write_report


def measure(browser: Browser, page: Path, runs: int) -> tuple[list[float], list[float]]:
    """Per run: the page's own ready time and the wall time to ready, both in ms."""
    scripted, wall = [], []
    for _ in range(runs):
        browser.open("about:blank", "true")
        wall.append(browser.open(page.as_uri()) * 1000)
        scripted.append(float(browser.evaluate("window.__reportReadyMs")))
        if browser.logs:
            raise SystemExit(f"the page logged: {browser.logs}")
    return scripted, wall


def main() -> None:
    """Build the stores, write their reports, time them in Chromium."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--runs", type=int, default=7, help="Page loads per size (median kept)")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no chromium on PATH (apt-get install chromium)")
    scratch = Path(tempfile.mkdtemp(prefix="gitmem-bench-report-"))
    try:
        with Browser(chromium) as browser:
            for count in args.ops:
                key = generate_key()
                path = scratch / f"store-{count}.git"
                build_store(path, key, count)
                store = MemoryStore.open(path, key, check_rollback=False)
                page = scratch / f"report-{count}.html"
                started = time.perf_counter()
                summary = write_report(store, page)
                written = time.perf_counter() - started
                scripted, wall = measure(browser, page, args.runs)
                print(
                    f"{count:,} operations ({summary.sessions:,} sessions, "
                    f"{summary.files:,} files): report {page.stat().st_size:,} bytes "
                    f"({page.stat().st_size / count:,.0f} per operation), written in "
                    f"{written:.1f} s"
                )
                print(
                    f"  page ready (median of {args.runs}): {statistics.median(scripted):,.0f} ms "
                    f"after navigation by the page's clock, {statistics.median(wall):,.0f} ms "
                    f"wall (min {min(wall):,.0f}, max {max(wall):,.0f})"
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
