"""``gitmem report``: the history as one HTML page, written like an export (owner-only, never
over a file unless asked), loading nothing from the network, safe against the memory it shows,
and checked in a real headless Chromium: every session and operation, diffs, file contents at
each operation, the growth charts, filters and search."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers_browser import Browser, find_chromium
from test_history import built_once

from gitmem import MemoryStore, generate_key, history, parse_path
from gitmem.cli import main
from gitmem.errors import UsageError
from gitmem.report import embedded_json, operations_in, report_data, write_report

# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return built_once(tmp_path_factory)


@pytest.fixture
def hist(built: tuple[Path, str], tmp_path: Path, utc: None) -> MemoryStore:
    """A fresh copy of test_history's seven operations by alice, bob and carol."""
    target = tmp_path / "store.git"
    shutil.copytree(built[0], target)
    return MemoryStore.open(target, built[1], session="tester")


def run(store: MemoryStore, key: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        main, ["--repo", str(store.path), *args], env={"GITMEM_KEY": key, "NO_COLOR": "1"}
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing in CI: .ci/run installs it (apt-get install chromium)")
        pytest.skip("no chromium on PATH (apt-get install chromium) to open the report in")
    return found


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Browser]:
    with Browser(chromium) as opened:
        yield opened


def open_report(browser: Browser, page: Path, fragment: str = "") -> None:
    browser.open("about:blank", "true")  # a new document, even if only the fragment differs
    browser.requests.clear()
    browser.logs.clear()
    browser.open(page.as_uri() + fragment)


def texts(browser: Browser, selector: str) -> list[str]:
    found: list[str] = browser.evaluate(
        f"Array.from(document.querySelectorAll({json.dumps(selector)}), e => e.textContent)"
    )
    return found


def shown_seqs(browser: Browser) -> list[int]:
    found: list[str] = browser.evaluate(
        "Array.from(document.querySelectorAll('#ops details'), e => e.dataset.seq)"
    )
    return [int(seq) for seq in found]


def wait_for(browser: Browser, condition: str) -> None:
    """Wait until the JavaScript ``condition`` holds (an opened operation builds its diff in a
    task of its own)."""
    deadline = time.monotonic() + 10
    while not browser.evaluate(f"!!({condition})"):
        assert time.monotonic() < deadline, condition
        time.sleep(0.02)


def open_every_operation(browser: Browser) -> None:
    browser.evaluate("document.querySelectorAll('#ops details').forEach(d => d.open = true)")
    wait_for(
        browser,
        "document.querySelectorAll('#ops .body').length"
        " === document.querySelectorAll('#ops details').length",
    )


# -- the file, as an export writes one ------------------------------------------------------


def test_report_is_owner_only_and_says_what_it_wrote(
    hist: MemoryStore, built: tuple[Path, str], tmp_path: Path
) -> None:
    target = tmp_path / "out" / "r.html"
    target.parent.mkdir()
    os.chmod(target.parent, 0o755)
    code, out, err = run(hist, built[1], "report", "-o", str(target))
    assert (code, err) == (0, "")
    size = target.stat().st_size
    assert out == (
        f"Wrote {target} ({size:,} bytes, owner-only 0600): 7 operations by 3 sessions, "
        "3 files; it holds the decrypted memory\n"
    )
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    code, out, err = run(hist, built[1], "report", "-o", str(target), "--force", "--json")
    assert code == 0
    assert json.loads(out) == {
        "file": str(target),
        "bytes": target.stat().st_size,
        "operations": 7,
        "sessions": 3,
        "files": 3,
        "head": hist.head(),
    }
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_report_never_overwrites_unless_forced(
    hist: MemoryStore, built: tuple[Path, str], tmp_path: Path
) -> None:
    target = tmp_path / "r.html"
    target.write_text("mine")
    code, out, err = run(hist, built[1], "report", "-o", str(target))
    assert (code, out) == (2, "")
    assert err == f"gitmem: error: {target} exists; pass --force to overwrite it\n"
    assert target.read_text() == "mine"
    # A dangling symbolic link is something there too: never followed to create its target.
    link = tmp_path / "link.html"
    link.symlink_to(tmp_path / "elsewhere.html")
    code, _, err = run(hist, built[1], "report", "-o", str(link))
    assert code == 2 and err == f"gitmem: error: {link} exists; pass --force to overwrite it\n"
    assert not (tmp_path / "elsewhere.html").exists()
    # --force replaces the link itself, not the file it names.
    code, _, err = run(hist, built[1], "report", "-o", str(link), "--force")
    assert (code, err) == (0, "")
    assert not link.is_symlink() and not (tmp_path / "elsewhere.html").exists()
    code, _, _ = run(hist, built[1], "report", "-o", str(target), "--force")
    assert code == 0 and target.read_text().startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_report_refuses_places_it_must_not_write(
    hist: MemoryStore, built: tuple[Path, str], tmp_path: Path
) -> None:
    inside = hist.path / "r.html"
    code, _, err = run(hist, built[1], "report", "-o", str(inside))
    assert code == 2
    assert err == (
        f"gitmem: error: cannot write {inside}: it is inside the store's repository "
        f"{hist.path}; write the report somewhere outside it\n"
    )
    assert not inside.exists()
    code, _, err = run(hist, built[1], "report", "-o", str(tmp_path / "no" / "r.html"))
    assert code == 2
    assert err == (
        f"gitmem: error: cannot write {tmp_path / 'no' / 'r.html'}: the directory "
        f"{tmp_path / 'no'} does not exist\n"
    )
    code, _, err = run(hist, built[1], "report", "-o", str(tmp_path), "--force")
    assert code == 2
    assert f"Error: Invalid value for '-o' / '--output': File '{tmp_path}' is a directory." in err
    with pytest.raises(UsageError) as info:
        write_report(hist, tmp_path, force=True)
    assert str(info.value) == f"cannot write {tmp_path}: it is a directory"


def test_report_defaults_to_a_file_in_the_working_directory(
    hist: MemoryStore, built: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(hist, built[1], "report")
    assert code == 0 and out.startswith("Wrote gitmem-report.html (")
    assert stat.S_IMODE((tmp_path / "gitmem-report.html").stat().st_mode) == 0o600


def test_a_failed_write_leaves_no_file(
    hist: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gitmem.report as report_module

    def full_disk(fd: int, data: bytes) -> None:
        os.write(fd, data[:100])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_module, "write_all", full_disk)
    target = tmp_path / "r.html"
    with pytest.raises(Exception, match=r"^the file system refused: No space left on device; "):
        write_report(hist, target)
    assert not target.exists()
    assert os.listdir(tmp_path) == ["store.git"]


def test_a_failed_forced_write_keeps_the_old_file(
    hist: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gitmem.fsutil

    def full_disk(fd: int, data: bytes) -> None:
        os.write(fd, data[:100])
        raise OSError(28, "No space left on device")

    target = tmp_path / "r.html"
    target.write_text("the old report")
    monkeypatch.setattr(gitmem.fsutil, "write_all", full_disk)
    with pytest.raises(Exception, match=r"^the file system refused: No space left on device; "):
        write_report(hist, target, force=True)
    assert target.read_text() == "the old report"
    assert sorted(os.listdir(tmp_path)) == ["r.html", "store.git"]


def test_the_page_assets_ship_with_the_package() -> None:
    # An editable install reads them from the source tree; a wheel has only package data.
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    data = re.search(r"^gitmem = \[(.*)\]$", pyproject, flags=re.M)
    assert data is not None
    for name in ("report.html", "report.css", "report.js"):
        assert f'"{name}"' in data.group(1)
        assert (Path(__file__).parent.parent / "gitmem" / name).is_file()


def test_revision_ranges(hist: MemoryStore, built: tuple[Path, str], tmp_path: Path) -> None:
    seqs = [op.seq for op in operations_in(hist, "HEAD~2")]
    assert seqs == [5, 4, 3, 2, 1]
    assert [op.seq for op in operations_in(hist, "HEAD~5..HEAD~2")] == [5, 4, 3]
    assert [op.seq for op in operations_in(hist, "HEAD~2..")] == [7, 6]
    assert [op.seq for op in operations_in(hist, "session:bob..")] == [7, 6]
    for bad in ("..HEAD", "HEAD..HEAD..HEAD"):
        with pytest.raises(UsageError) as info:
            operations_in(hist, bad)
        assert str(info.value) == (
            f"invalid revision range '{bad}': give REV, A..B or A.. (A..HEAD)"
        )
    code, _, err = run(hist, built[1], "report", "nope..", "-o", str(tmp_path / "r.html"))
    assert code == 2 and err == "gitmem: error: unknown revision 'nope'\n"
    assert not (tmp_path / "r.html").exists()
    # An empty range still makes a page, and says so.
    code, out, err = run(hist, built[1], "report", "HEAD..", "-o", str(tmp_path / "e.html"))
    assert code == 0 and out.startswith(f"Wrote {tmp_path / 'e.html'} (")
    assert err == "gitmem: no operations in the range\n"
    # A range that starts after the first operation counts the files already there (one of
    # 19 bytes after operation 4).
    data = report_data(hist, "HEAD~3..")
    assert [(op["n"], op["f"], op["b"]) for op in data["ops"]] == [
        (7, 1, 19),
        (6, 2, 20),
        (5, 2, 20),
    ]


# -- what the page holds --------------------------------------------------------------------


def test_embedded_json_cannot_end_its_script_element() -> None:
    text = embedded_json({"a": "</script><script>alert(1)</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><script>alert(1)</script><!-- & \u2028"}


def test_page_loads_nothing_from_anywhere(hist: MemoryStore, tmp_path: Path) -> None:
    write_report(hist, tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert policy is not None
    rules = dict(rule.strip().split(" ", 1) for rule in policy.group(1).split(";"))
    assert rules["default-src"] == "'none'"
    assert rules["connect-src"] == rules["img-src"] == "'none'"
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/=]+'", rules["script-src"])
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/=]+'", rules["style-src"])
    assert "unsafe" not in policy.group(1)
    # The page's own markup, script and style name no URL at all (the data is the memory's).
    data = r'<script type="application/json" id="gitmem-data">.*?</script>'
    own = re.sub(data, "", page, count=1, flags=re.DOTALL)
    for needle in (
        "http:",
        "https:",
        "ftp:",
        "ws://",
        "wss://",
        "src=",
        "href=",
        "url(",
        "@import",
    ):
        assert needle not in own, needle


def test_versions_store_each_content_once(hist: MemoryStore) -> None:
    data = report_data(hist)
    # notes.md: four contents, other.md: one; the rename kept its content (no new version).
    assert len(data["versions"]) == 5
    renamed = next(op for op in data["ops"] if op["k"] == "rename")["x"][0]
    assert renamed[0] == "R" and renamed[3] == renamed[4] and renamed[7] == ""
    assert all(isinstance(v, list) for v in data["versions"])  # every one made by a change


# -- in the browser -------------------------------------------------------------------------


def test_browser_shows_every_session_operation_diff_and_chart(
    hist: MemoryStore, tmp_path: Path, browser: Browser
) -> None:
    page = tmp_path / "r.html"
    write_report(hist, page)
    open_report(browser, page)
    assert shown_seqs(browser) == [7, 6, 5, 4, 3, 2, 1]
    assert texts(browser, "#ops .session") == ["carol"] * 2 + ["bob"] * 3 + ["alice"] * 2
    assert texts(browser, "#ops .cmd") == [
        "delete",
        "str_replace",
        "create",
        "rename",
        "insert",
        "str_replace",
        "create",
    ]
    assert texts(browser, "#ops .paths")[3] == "/memories/notes.md \u2192 /memories/dir/n.md"
    # A diff is built only when its operation is opened.
    assert browser.evaluate("document.querySelectorAll('#ops pre').length") == 0
    browser.evaluate("document.querySelector('#ops details[data-seq=\"2\"]').open = true")
    wait_for(browser, "document.querySelectorAll('#ops .body').length === 1")
    assert texts(browser, "#ops details[data-seq='2'] pre span") == [
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+TWO",
        " three",
    ]
    assert texts(browser, "#ops details[data-seq='2'] .change-head") == [
        "modified /memories/notes.md  +1 \u22121"
    ]
    browser.evaluate("window.__report.show('sessions')")
    assert browser.evaluate(
        "Array.from(document.querySelectorAll('#sessions-table tr[data-session]'),"
        " r => r.dataset.session)"
    ) == ["carol", "bob", "alice"]
    assert texts(browser, "#sessions-table tr[data-session='bob'] td.num") == ["3"]
    browser.evaluate("window.__report.show('growth')")
    assert browser.evaluate("document.querySelectorAll('#growth svg path').length") == 2
    steps = browser.evaluate("document.querySelector('#growth-files path').getAttribute('d')")
    assert steps.startswith("M") and steps.count("H") == 6
    assert browser.evaluate("document.querySelectorAll('#session-bars rect').length") == 3
    assert browser.evaluate("location.hash") == "#view=growth"
    assert browser.requests == [page.as_uri()]
    assert browser.logs == []


def test_browser_filters_and_search_narrow_the_timeline(
    hist: MemoryStore, tmp_path: Path, browser: Browser
) -> None:
    page = tmp_path / "r.html"
    write_report(hist, page)
    open_report(browser, page, "#session=bob")
    assert shown_seqs(browser) == [5, 4, 3]
    assert texts(browser, "#timeline-count") == ["3 of 7 operations, newest first"]
    open_report(browser, page, "#command=str_replace")
    assert shown_seqs(browser) == [6, 2]
    open_report(browser, page, "#path=other")
    assert shown_seqs(browser) == [7, 5]
    # The search reads paths and diffs, whatever the case.
    open_report(browser, page, "#q=four")
    assert shown_seqs(browser) == [6, 3]
    open_report(browser, page, "#q=dir/n.md")
    assert shown_seqs(browser) == [6, 4]
    # Typing in the search box narrows it too (after a short pause), and the URL follows.
    open_report(browser, page)
    browser.evaluate(
        "(() => { const q = document.getElementById('filter-q'); q.value = 'TWO';"
        " q.dispatchEvent(new Event('input')); })()"
    )
    deadline = time.monotonic() + 10
    while shown_seqs(browser) != [6, 3, 2, 1] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shown_seqs(browser) == [6, 3, 2, 1]
    assert browser.evaluate("location.hash") == "#q=TWO"
    browser.evaluate("window.__report.filter('session', 'alice')")
    assert shown_seqs(browser) == [2, 1]
    # A link to another filter of the same page changes only the fragment.
    browser.evaluate("location.hash = '#command=rename'")
    deadline = time.monotonic() + 10
    while shown_seqs(browser) != [4] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shown_seqs(browser) == [4]
    assert browser.evaluate("document.getElementById('filter-command').value") == "rename"
    assert browser.logs == []


def _expected_contents(store: MemoryStore, data: dict[str, Any]) -> dict[int, str]:
    """Each version id of ``data`` -> the text gitmem reads for it."""
    expected: dict[int, str] = {}
    for op in data["ops"]:
        for change in op["x"]:
            if change[4] >= 0:
                path = data["paths"][change[1]]
                expected[change[4]] = history.cat(store, path, op["c"])
    return expected


def test_browser_rebuilds_every_file_content(
    hist: MemoryStore, tmp_path: Path, browser: Browser
) -> None:
    # Lines without a final newline, empty files, a file emptied and refilled.
    hist.create(parse_path("/memories/edge.md"), "a\nb")
    hist.str_replace(parse_path("/memories/edge.md"), "b", "b\n")
    hist.create(parse_path("/memories/edge.md"), "", overwrite=True)
    hist.create(parse_path("/memories/edge.md"), "x\n\n\ny", overwrite=True)
    hist.str_replace(parse_path("/memories/edge.md"), "\n\n", "\n")
    page = tmp_path / "r.html"
    write_report(hist, page)
    data = report_data(hist)
    expected = _expected_contents(hist, data)
    open_report(browser, page)
    got = browser.evaluate(f"{json.dumps(sorted(expected))}.map(v => window.__report.content(v))")
    assert got == [expected[v] for v in sorted(expected)]
    # The files view: a file's history, and its content after the operation picked.
    open_report(browser, page, "#view=files&file=/memories/dir/n.md")
    assert texts(browser, "#file-history td.seq") == ["#6", "#4"]
    assert texts(browser, "#file-content pre span") == ["ONE", "TWO", "three", "four"]
    browser.evaluate("document.querySelectorAll('#file-history tr')[1].click()")
    assert texts(browser, "#file-content pre span") == ["one", "TWO", "three", "four"]
    assert browser.logs == []


def test_browser_shows_merges_as_merges(tmp_path: Path, key: str, browser: Browser) -> None:
    origin = tmp_path / "origin.git"
    first = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state-a")
    first.session = "laptop"
    first.create(parse_path("/memories/notes.md"), "1\n2\n3\n4\n5\n")
    subprocess.run(["git", "init", "--bare", "-q", str(origin)], check=True)
    first.add_remote("origin", str(origin))
    first.push()
    second = MemoryStore.clone(str(origin), tmp_path / "b.git", key, state_dir=tmp_path / "state-b")
    second.session = "server"
    first.str_replace(parse_path("/memories/notes.md"), "1\n", "one\n")
    second.str_replace(parse_path("/memories/notes.md"), "5\n", "five\n")
    first.sync()
    assert second.sync().action == "merged+pushed"
    page = tmp_path / "r.html"
    write_report(second, page)
    data = report_data(second)
    merge = data["ops"][0]
    assert merge["k"] == "merge" and len(merge["P"]) == 2
    open_report(browser, page)
    assert browser.evaluate("document.querySelectorAll('#ops details.merge').length") == 1
    assert texts(browser, "#ops details.merge .badge") == ["merge of 2 parents"]
    browser.evaluate("document.querySelector('#ops details.merge').open = true")
    wait_for(browser, "document.querySelectorAll('#ops .body').length === 1")
    body = texts(browser, "#ops details.merge .kv")
    assert (
        f"merge of {merge['P'][0]} and {merge['P'][1]} (the diff is against the first parent)"
        in body
    )
    expected = _expected_contents(second, data)
    got = browser.evaluate(f"{json.dumps(sorted(expected))}.map(v => window.__report.content(v))")
    assert got == [expected[v] for v in sorted(expected)]
    assert browser.logs == []


INJECTED = "</script><script>window.__pwned = 1</script><!--"
HOSTILE_PATH = "/memories/<img src=x onerror=window.__pwned=2>.md"
HOSTILE_SESSION = '<b onmouseover="window.__pwned=3">s</b>"\'</script>'


def test_memory_cannot_inject_markup_or_script(
    repo_path: Path, key: str, tmp_path: Path, browser: Browser
) -> None:
    store = MemoryStore.open(repo_path, key, create=True, session=HOSTILE_SESSION)
    store.create(parse_path("/memories/a.md"), INJECTED + "\n<svg onload=window.__pwned=4>\n")
    store.create(parse_path(HOSTILE_PATH), "<script>window.__pwned=5</script>")
    store.str_replace(parse_path(HOSTILE_PATH), "5", "6 <iframe src=javascript:1>")
    page = tmp_path / "r.html"
    write_report(store, page)
    for view in ("", "#view=sessions", "#view=growth", f"#view=files&file={HOSTILE_PATH}"):
        open_report(browser, page, view)
        open_every_operation(browser)
        assert browser.evaluate("typeof window.__pwned") == "undefined"
        for tag in ("img", "iframe", "b"):
            assert browser.evaluate(f"document.getElementsByTagName('{tag}').length") == 0
        assert browser.evaluate("document.scripts.length") == 2  # the data and the page's own
        assert browser.logs == []
    open_report(browser, page)
    open_every_operation(browser)
    shown = browser.evaluate("document.getElementById('ops').textContent")
    assert INJECTED in shown and HOSTILE_PATH in shown and HOSTILE_SESSION in shown
    assert browser.requests == [page.as_uri()]


# -- long histories -------------------------------------------------------------------------


@pytest.mark.slow
def test_ten_thousand_operations_open_in_a_couple_of_seconds(
    tmp_path: Path, browser: Browser
) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from bench_log import build_store

    key = generate_key()
    build_store(tmp_path / "big.git", key, 10_000)
    store = MemoryStore.open(tmp_path / "big.git", key)
    page = tmp_path / "big.html"
    summary = write_report(store, page)
    assert summary.operations == 10_000
    assert summary.bytes < 6_000_000
    open_report(browser, page)
    ready_ms = browser.evaluate("window.__reportReadyMs")
    assert ready_ms < 3000
    # Only the first rows are built; scrolling down builds more.
    assert browser.evaluate("document.querySelectorAll('#ops details').length") == 200
    browser.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    deadline = time.monotonic() + 10
    while browser.evaluate("document.querySelectorAll('#ops details').length") == 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # The latest content of the most edited file, rebuilt from its diffs.
    data = report_data(store)
    last = data["ops"][0]
    got = browser.evaluate(f"window.__report.content({last['x'][0][4]})")
    assert got == history.cat(store, data["paths"][last["x"][0][1]])
    # Recorded times with microseconds place every step of the growth charts.
    browser.evaluate("window.__report.show('growth')")
    steps = browser.evaluate("document.querySelector('#growth-bytes path').getAttribute('d')")
    assert steps.count("H") == 9_999 and "NaN" not in steps
    assert browser.logs == []


def test_session_summaries_cover_the_range(hist: MemoryStore) -> None:
    assert [s.to_json() for s in history.session_summaries(hist.log())] == [
        s.to_json() for s in history.sessions(hist)
    ]
    summaries = report_data(hist, "HEAD~5..")["summaries"]
    assert [(s["session"], s["operations"]) for s in summaries] == [("carol", 2), ("bob", 3)]


def test_each_change_is_diffed_once(hist: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # A diff of a long file is most of what a report of its history costs: its line counts and
    # its hunks come from one diff.
    diffed: list[str] = []
    unified = history.FileChange._unified_diff

    def counting(change: history.FileChange) -> list[str]:
        diffed.append(change.path)
        return unified(change)

    monkeypatch.setattr(history.FileChange, "_unified_diff", counting)
    data = report_data(hist)
    changes = [change for op in data["ops"] for change in op["x"]]
    assert changes and len(diffed) == len(changes)
