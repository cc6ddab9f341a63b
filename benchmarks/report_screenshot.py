"""Make docs/report.png and docs/report-growth.png: ``gitmem report`` of a small week-long
history, photographed in headless Chromium.

    python benchmarks/report_screenshot.py            # writes docs/report.png, report-growth.png
    python benchmarks/report_screenshot.py --out /tmp # elsewhere

The history is a made-up week of an agent's sessions (fixed times, so the picture only changes
when the page does); the screenshots are taken over the DevTools protocol at 1280x900.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers_browser import Browser, find_chromium

import gitmem.store
from gitmem import MemoryStore, generate_key, parse_path
from gitmem.report import write_report

START = datetime(2025, 6, 2, 9, 0, tzinfo=timezone.utc)


class Clock:
    """``time`` as gitmem.store sees it: each commit at the next moment of ``moments``."""

    def __init__(self) -> None:
        self.now = START

    def time_ns(self) -> int:
        return int(self.now.timestamp()) * 10**9

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def build(path: Path, key: str) -> None:
    """A week of memory: a project's notes, preferences and a bug, written by five sessions."""
    clock = Clock()
    gitmem.store.time = clock  # type: ignore[attr-defined,assignment]
    store = MemoryStore.init(path, key, check_rollback=False)

    def at(day: int, hour: int, minute: int, session: str) -> None:
        clock.now = START + timedelta(days=day, hours=hour - 9, minutes=minute)
        store.session = session

    p = parse_path
    at(0, 9, 12, "mon-kickoff")
    store.create(
        p("/memories/project/overview.md"),
        "# Billing service migration\n\nGoal: move invoicing off the monolith by July.\n"
        "Owner: Dana. Reviewer: Sam.\n",
    )
    at(0, 9, 20, "mon-kickoff")
    store.create(
        p("/memories/preferences.md"),
        "# How the user likes to work\n\n- Short answers first, details after.\n"
        "- Run the tests before proposing a commit.\n",
    )
    at(0, 10, 5, "mon-kickoff")
    store.create(
        p("/memories/project/todo.md"),
        "# To do\n\n- [ ] map invoice tables\n- [ ] draft the API\n- [ ] load test\n",
    )
    at(1, 14, 2, "tue-schema")
    store.str_replace(
        p("/memories/project/todo.md"), "- [ ] map invoice tables", "- [x] map invoice tables"
    )
    at(1, 14, 30, "tue-schema")
    store.create(
        p("/memories/project/schema.md"),
        "# Invoice schema\n\n- invoices(id, customer_id, total_cents, issued_at)\n"
        "- lines(invoice_id, sku, qty, price_cents)\n",
    )
    at(1, 15, 10, "tue-schema")
    store.insert(p("/memories/project/schema.md"), 4, "- credits(invoice_id, amount_cents)")
    at(2, 11, 0, "wed-flaky-test")
    store.create(
        p("/memories/bugs/flaky-test.md"),
        "# test_rounding fails 1 in 20 runs\n\nSuspect: float totals. Try integer cents.\n",
    )
    at(2, 11, 45, "wed-flaky-test")
    store.str_replace(
        p("/memories/bugs/flaky-test.md"),
        "Suspect: float totals. Try integer cents.",
        "Cause: float totals in the legacy export.\nFix: integer cents everywhere (PR #412).",
    )
    at(3, 16, 20, "thu-api")
    store.str_replace(
        p("/memories/project/todo.md"), "- [ ] draft the API", "- [x] draft the API (v1 agreed)"
    )
    at(3, 16, 40, "thu-api")
    store.insert(p("/memories/preferences.md"), 4, "- Prefers diagrams as Mermaid, not images.")
    at(4, 10, 15, "fri-wrapup")
    store.rename(p("/memories/bugs/flaky-test.md"), p("/memories/bugs/fixed/flaky-test.md"))
    at(4, 10, 30, "fri-wrapup")
    store.str_replace(
        p("/memories/project/overview.md"),
        "Goal: move invoicing off the monolith by July.",
        "Goal: move invoicing off the monolith by July.\nStatus: schema and API done; load "
        "test next week.",
    )
    at(4, 10, 50, "fri-wrapup")
    store.str_replace(p("/memories/project/todo.md"), "- [ ] load test", "- [ ] load test (Tue)")
    store.close()
    gitmem.store.time = time  # type: ignore[attr-defined]


def shoot(browser: Browser, name: Path) -> None:
    shot = browser.call("Page.captureScreenshot", format="png")
    name.write_bytes(base64.b64decode(shot["data"]))
    print(f"wrote {name}")


def main() -> None:
    """Build the history, write its report, photograph the timeline and the growth charts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(__file__).resolve().parent.parent / "docs"
    parser.add_argument("--out", type=Path, default=default, help="Directory for the PNGs")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no chromium on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="gitmem-shot-") as scratch:
        path = Path(scratch) / "week.git"
        key = generate_key()
        build(path, key)
        page = Path(scratch) / "report.html"
        summary = write_report(MemoryStore.open(path, key, check_rollback=False), page)
        with Browser(chromium) as browser:
            browser.call(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=900,
                deviceScaleFactor=1,
                mobile=False,
            )
            browser.open(page.as_uri())
            # The generation time and the temporary directory would change every picture.
            meta = (
                f"week.git \u00b7 HEAD \u00b7 {summary.operations} operations by "
                f"{summary.sessions} sessions, {summary.files} files \u00b7 times in UTC"
            )
            browser.evaluate(f"document.querySelector('.meta').textContent = {json.dumps(meta)}")
            browser.evaluate("document.querySelector('#ops details[data-seq=\"12\"]').open = true")
            time.sleep(0.3)
            shoot(browser, args.out / "report.png")
            browser.call(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=1180,
                deviceScaleFactor=1,
                mobile=False,
            )
            browser.evaluate("window.__report.show('growth')")
            time.sleep(0.3)
            shoot(browser, args.out / "report-growth.png")


if __name__ == "__main__":
    main()
