"""The ``gitmem`` command line: exact output through CliRunner, and real runs of the installed
command for exit codes, piping and colour."""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from anthropic import Anthropic
from click.testing import CliRunner, Result
from test_history import built_once

from gitmem import MemoryStore, cli, history, parse_path
from gitmem.cli import main
from gitmem.demo import progress_log
from gitmem.git.refs import BRANCH, META_REF
from gitmem.git.repo import GitRepo


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return built_once(tmp_path_factory)


@pytest.fixture
def store_copy(built: tuple[Path, str], tmp_path: Path, utc: None) -> Path:
    target = tmp_path / "store.git"
    shutil.copytree(built[0], target)
    return target


class Gitmem:
    """Runs ``gitmem --repo STORE ...`` through CliRunner with the store's key."""

    def __init__(self, repo: Path, key: str) -> None:
        self.repo = repo
        self.key = key
        self.runner = CliRunner()

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        return self.runner.invoke(
            main,
            ["--repo", str(self.repo), *args],
            env={"GITMEM_KEY": self.key, **(env or {})},
        )

    def ok(self, *args: str, env: dict[str, str] | None = None) -> str:
        result = self(*args, env=env)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        assert result.stderr == ""
        return result.stdout

    def store(self) -> MemoryStore:
        return MemoryStore.open(self.repo, self.key, session="test")

    def ids(self) -> list[str]:
        return [op.commit for op in self.store().log()][::-1]


@pytest.fixture
def gm(store_copy: Path, built: tuple[Path, str]) -> Gitmem:
    return Gitmem(store_copy, built[1])


def short(commit: str) -> str:
    return commit[:10]


# -- log ------------------------------------------------------------------------------------


def test_log_is_aligned_one_operation_per_line(gm: Gitmem) -> None:
    c = [short(x) for x in gm.ids()]
    assert gm.ok("log") == (
        f"{c[6]}  2025-06-01 10:06:00  carol  delete       /memories/other.md\n"
        f"{c[5]}  2025-06-01 10:05:00  carol  str_replace  /memories/dir/n.md\n"
        f"{c[4]}  2025-06-01 10:04:00  bob    create       /memories/other.md\n"
        f"{c[3]}  2025-06-01 10:03:00  bob    rename       "
        "/memories/notes.md -> /memories/dir/n.md\n"
        f"{c[2]}  2025-06-01 10:02:00  bob    insert       /memories/notes.md\n"
        f"{c[1]}  2025-06-01 10:01:00  alice  str_replace  /memories/notes.md\n"
        f"{c[0]}  2025-06-01 10:00:00  alice  create       /memories/notes.md\n"
    )


def test_log_filters(gm: Gitmem) -> None:
    def seqs(*args: str) -> list[int]:
        return [json.loads(line)["seq"] for line in gm.ok("log", "--json", *args).splitlines()]

    assert seqs() == [7, 6, 5, 4, 3, 2, 1]
    assert seqs("/memories/dir/n.md") == [6, 4, 3, 2, 1]
    assert seqs("--", "/memories/other.md") == [7, 5]
    assert seqs("HEAD~2", "/memories/other.md") == [5]
    assert seqs("--session", "bob") == [5, 4, 3]
    assert seqs("--command", "create") == [5, 1]
    assert seqs("--since", "2025-06-01T10:02:00Z", "--until", "2025-06-01 10:04") == [5, 4, 3]
    assert seqs("-n", "2") == [7, 6]
    assert seqs("--max-count", "1", "--session", "alice") == [2]
    assert seqs("--since", "1h") == []


def test_log_json_fields(gm: Gitmem) -> None:
    c = gm.ids()
    first = json.loads(gm.ok("log", "--json", "-n", "1").splitlines()[0])
    assert first == {
        "commit": c[6],
        "seq": 7,
        "time": "2025-06-01T10:06:00Z",
        "session": "carol",
        "command": "delete",
        "paths": ["/memories/other.md"],
        "parents": [c[5]],
        "gitmem": first["gitmem"],
        "detail": {},
    }
    with_stat = json.loads(gm.ok("log", "--json", "-n", "1", "--stat"))
    assert with_stat["changes"] == [
        {
            "status": "deleted",
            "path": "/memories/other.md",
            "old_path": None,
            "added": 0,
            "removed": 1,
        }
    ]
    with_patch = json.loads(gm.ok("log", "--json", "-n", "1", "-p"))
    assert with_patch["changes"][0]["diff"] == (
        "diff /memories/other.md\ndeleted file\n--- /memories/other.md\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-x\n\\ No newline at end of file\n"
    )


def test_log_stat_and_patch(gm: Gitmem) -> None:
    c = [short(x) for x in gm.ids()]
    assert gm.ok("log", "--stat", "-n", "2") == (
        f"{c[6]}  2025-06-01 10:06:00  carol  delete       /memories/other.md\n"
        " /memories/other.md | 1 -\n"
        " 1 file changed, 0 insertions(+), 1 deletion(-)\n"
        "\n"
        f"{c[5]}  2025-06-01 10:05:00  carol  str_replace  /memories/dir/n.md\n"
        " /memories/dir/n.md | 2 +-\n"
        " 1 file changed, 1 insertion(+), 1 deletion(-)\n"
    )
    assert gm.ok("log", "-p", "/memories/other.md") == (
        f"{c[6]}  2025-06-01 10:06:00  carol  delete       /memories/other.md\n"
        "diff /memories/other.md\n"
        "deleted file\n"
        "--- /memories/other.md\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-x\n"
        "\\ No newline at end of file\n"
        "\n"
        f"{c[4]}  2025-06-01 10:04:00  bob    create       /memories/other.md\n"
        "diff /memories/other.md\n"
        "new file\n"
        "--- /dev/null\n"
        "+++ /memories/other.md\n"
        "@@ -0,0 +1 @@\n"
        "+x\n"
        "\\ No newline at end of file\n"
    )


def test_colour_only_when_asked_or_on_a_terminal(
    gm: Gitmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = gm.ids()
    first = (
        f"\x1b[33m{short(c[6])}\x1b[0m  2025-06-01 10:06:00  \x1b[36mcarol\x1b[0m  "
        "\x1b[31mdelete     \x1b[0m  /memories/other.md\n"
    )
    assert gm.ok("--color", "always", "log", "-n", "1") == first
    assert gm.ok("--color", "never", "log", "-n", "1") == click.unstyle(first)
    assert gm.ok("log", "-n", "1") == click.unstyle(first)  # CliRunner's stdout is no terminal
    monkeypatch.setattr(cli, "_isatty", lambda stream: True)
    assert gm.ok("--no-pager", "log", "-n", "1") == first
    assert gm.ok("log", "-n", "1", "--no-pager", env={"NO_COLOR": "1"}) == click.unstyle(first)
    assert gm.ok("--color", "always", "log", "-n", "1", "--no-pager", env={"NO_COLOR": "1"}) == (
        first
    )
    patch = gm.ok("--color", "always", "show", "HEAD~1", "--no-pager").splitlines()
    assert patch[-9:] == [
        "\x1b[1mdiff /memories/dir/n.md\x1b[0m",
        "\x1b[1m--- /memories/dir/n.md\x1b[0m",
        "\x1b[1m+++ /memories/dir/n.md\x1b[0m",
        "\x1b[36m@@ -1,4 +1,4 @@\x1b[0m",
        "\x1b[31m-one\x1b[0m",
        "\x1b[32m+ONE\x1b[0m",
        " TWO",
        " three",
        " four",
    ]


def test_pager_on_a_terminal_only(gm: Gitmem, monkeypatch: pytest.MonkeyPatch) -> None:
    paged: list[str] = []

    def fake_pager(lines: Iterator[str], color: bool | None = None) -> None:
        paged.append("".join(lines))

    monkeypatch.setattr(click, "echo_via_pager", fake_pager)
    gm.ok("log")
    assert paged == []  # not a terminal
    monkeypatch.setattr(cli, "_isatty", lambda stream: True)
    monkeypatch.delenv("LESS", raising=False)
    out = gm.ok("log", "-n", "2")
    assert out == "" and len(paged) == 1 and paged[0].count("\n") == 2
    assert os.environ["LESS"] == "FRX"
    assert gm.ok("log", "-n", "2", "--no-pager").count("\n") == 2
    assert gm.ok("--no-pager", "sessions").count("\n") == 4
    assert gm.ok("log", "--json").count("\n") == 7  # JSON is never paged
    assert len(paged) == 1


def test_the_pager_inherits_no_secret(
    gm: Gitmem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store opens with a key from the environment; the pager sees none of them."""
    from click import _termui_impl

    dumped = tmp_path / "pager-env"
    pager = tmp_path / "pager"
    pager.write_text(f"#!/bin/sh\nenv > {dumped}\ncat > /dev/null\n")
    pager.chmod(0o700)
    monkeypatch.setattr(cli, "_isatty", lambda stream: True)
    monkeypatch.setattr(_termui_impl, "isatty", lambda stream: True)
    secrets = {
        "GITMEM_PASSPHRASE": "pass-phrase-in-env",
        "GITMEM_SSH_PASSPHRASE": "ssh-phrase-in-env",
        "GITMEM_HTTPS_TOKEN": "token-in-env",
    }
    out = gm.ok("log", "-n", "2", env={"PAGER": str(pager), "MARKER": "seen", **secrets})
    assert out == ""
    shown = dict(line.split("=", 1) for line in dumped.read_text().splitlines() if "=" in line)
    assert shown["MARKER"] == "seen"
    assert not {"GITMEM_KEY", *secrets} & set(shown)
    assert gm.key not in dumped.read_text()


def test_progress_bar_on_stderr_only_on_a_terminal(
    gm: Gitmem, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    quiet = gm("export", str(tmp_path / "a"))
    assert quiet.exit_code == 0 and quiet.stderr == ""
    monkeypatch.setattr(cli, "_isatty", lambda stream: True)
    shown = gm("export", str(tmp_path / "b"))
    assert shown.exit_code == 0
    # click draws the bar itself only on a real terminal; here it shows its label.
    assert shown.stderr.startswith("export")
    verified = gm("verify")
    assert "verify" in verified.stderr and verified.stdout.startswith("verified 7 commits")


# -- show, diff, blame, sessions, view, cat ---------------------------------------------------


def test_show(gm: Gitmem) -> None:
    c = gm.ids()
    assert gm.ok("show", "HEAD~1") == (
        f"operation {c[5]}\n"
        "Seq:      6\n"
        "Date:     2025-06-01 10:05:00 +0000\n"
        "Session:  carol\n"
        "Command:  str_replace\n"
        "Paths:    /memories/dir/n.md\n"
        "\n"
        "diff /memories/dir/n.md\n"
        "--- /memories/dir/n.md\n"
        "+++ /memories/dir/n.md\n"
        "@@ -1,4 +1,4 @@\n"
        "-one\n"
        "+ONE\n"
        " TWO\n"
        " three\n"
        " four\n"
    )
    assert gm.ok("show", short(c[3]), "--stat") == (
        f"operation {c[3]}\n"
        "Seq:      4\n"
        "Date:     2025-06-01 10:03:00 +0000\n"
        "Session:  bob\n"
        "Command:  rename\n"
        "Paths:    /memories/notes.md -> /memories/dir/n.md\n"
        "\n"
        " /memories/notes.md -> /memories/dir/n.md | 0\n"
        " 1 file changed, 0 insertions(+), 0 deletions(-)\n"
    )
    body = json.loads(gm.ok("show", "--json"))
    assert body["commit"] == c[6]
    assert body["changes"][0]["status"] == "deleted"
    assert body["changes"][0]["diff"].startswith("diff /memories/other.md\n")


def test_diff(gm: Gitmem) -> None:
    assert gm.ok("diff", "HEAD~2", "HEAD~1") == (
        "diff /memories/dir/n.md\n"
        "--- /memories/dir/n.md\n"
        "+++ /memories/dir/n.md\n"
        "@@ -1,4 +1,4 @@\n"
        "-one\n"
        "+ONE\n"
        " TWO\n"
        " three\n"
        " four\n"
    )
    assert gm.ok("diff", "HEAD~6", "--stat") == (
        " /memories/dir/n.md | 4 ++++\n"
        " /memories/notes.md | 3 ---\n"
        " 2 files changed, 4 insertions(+), 3 deletions(-)\n"
    )
    assert gm.ok("diff", "HEAD~6", "--", "/memories/notes.md") == (
        "diff /memories/notes.md\n"
        "deleted file\n"
        "--- /memories/notes.md\n"
        "+++ /dev/null\n"
        "@@ -1,3 +0,0 @@\n"
        "-one\n"
        "-two\n"
        "-three\n"
    )
    same = gm("diff", "HEAD", "HEAD")
    assert (same.exit_code, same.stdout, same.stderr) == (0, "", "gitmem: no changes\n")
    assert gm.ok("diff", "HEAD", "HEAD", "--json") == ""  # with --json, stderr is for errors
    objects = [
        json.loads(line) for line in gm.ok("diff", "HEAD~3", "HEAD~2", "--json").splitlines()
    ]
    assert objects == [
        {
            "status": "added",
            "path": "/memories/other.md",
            "old_path": None,
            "added": 1,
            "removed": 0,
            "diff": "diff /memories/other.md\nnew file\n--- /dev/null\n+++ /memories/other.md\n"
            "@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n",
        }
    ]
    for args, message in [
        ((), "Missing argument 'REV [REV2] [PATH]...'."),
        (("/memories/a",), "give the revision to compare with, e.g. gitmem diff HEAD~1"),
        (("HEAD", "HEAD~1", "HEAD~2"), "too many revisions (HEAD, HEAD~1, HEAD~2): at most 2;"),
        (("HEAD", "/memories/a", "HEAD~1"), "'HEAD~1' comes after a path"),
        (("nosuch",), "unknown revision 'nosuch'"),
        (("HEAD", "/memories/../x"), "is not allowed: '..' components are not allowed"),
    ]:
        result = gm("diff", *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr


def test_blame(gm: Gitmem) -> None:
    c = [short(x) for x in gm.ids()]
    assert gm.ok("blame", "/memories/dir/n.md") == (
        f"{c[5]} (carol 2025-06-01 10:05:00 1) ONE\n"
        f"{c[1]} (alice 2025-06-01 10:01:00 2) TWO\n"
        f"{c[0]} (alice 2025-06-01 10:00:00 3) three\n"
        f"{c[2]} (bob   2025-06-01 10:02:00 4) four\n"
    )
    lines = [
        json.loads(x)
        for x in gm.ok("blame", "/memories/notes.md", "--rev", "HEAD~5", "--json").splitlines()
    ]
    assert [(x["line"], x["text"], x["session"]) for x in lines] == [
        (1, "one", "alice"),
        (2, "TWO", "alice"),
        (3, "three", "alice"),
    ]
    missing = gm("blame", "/memories/notes.md")
    assert (missing.exit_code, missing.stderr) == (
        1,
        "gitmem: error: /memories/notes.md does not exist\n",
    )


def test_sessions(gm: Gitmem) -> None:
    day = "2025-06-01"
    rows = [
        ("SESSION", "FIRST", "LAST", "OPS", "COMMANDS", "PATHS"),
        (
            "carol",
            f"{day} 10:05:00",
            f"{day} 10:06:00",
            "2",
            "delete:1 str_replace:1",
            "/memories/dir/n.md /memories/other.md",
        ),
        (
            "bob",
            f"{day} 10:02:00",
            f"{day} 10:04:00",
            "3",
            "create:1 insert:1 rename:1",
            "/memories/dir/n.md /memories/notes.md /memories/other.md",
        ),
        (
            "alice",
            f"{day} 10:00:00",
            f"{day} 10:01:00",
            "2",
            "create:1 str_replace:1",
            "/memories/notes.md",
        ),
    ]
    assert gm.ok("sessions") == "".join(
        f"{a:<7}  {b:<19}  {c:<19}  {d:>3}  {e:<26}  {f}\n" for a, b, c, d, e, f in rows
    )
    found = [json.loads(line) for line in gm.ok("sessions", "--json").splitlines()]
    assert [(r["session"], r["operations"], r["commands"]) for r in found] == [
        ("carol", 2, {"delete": 1, "str_replace": 1}),
        ("bob", 3, {"create": 1, "insert": 1, "rename": 1}),
        ("alice", 2, {"create": 1, "str_replace": 1}),
    ]


def test_view_and_cat(gm: Gitmem) -> None:
    assert gm.ok("view", "/memories") == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items and node_modules:\n4K\t/memories\n4K\t/memories/dir/\n19B\t/memories/dir/n.md\n"
    )
    assert gm.ok("view", "/memories/dir/n.md", "--range", "2", "-1") == (
        "Here's the content of /memories/dir/n.md with line numbers:\n"
        "     2\tTWO\n     3\tthree\n     4\tfour\n     5\t\n"
    )
    assert gm.ok("view", "/memories/notes.md", "--rev", "session:alice") == (
        "Here's the content of /memories/notes.md with line numbers:\n"
        "     1\tone\n     2\tTWO\n     3\tthree\n     4\t\n"
    )
    c = gm.ids()
    assert json.loads(gm.ok("view", "/memories/other.md", "--rev", "HEAD~1", "--json")) == {
        "path": "/memories/other.md",
        "commit": c[5],
        "text": "Here's the content of /memories/other.md with line numbers:\n     1\tx",
    }
    assert gm.ok("cat", "/memories/dir/n.md") == "ONE\nTWO\nthree\nfour\n"
    assert gm.ok("cat", "/memories/other.md", "--rev", "@{2025-06-01T10:04:30Z}") == "x"
    assert json.loads(gm.ok("cat", "/memories/other.md", "--rev", "HEAD~1", "--json")) == {
        "path": "/memories/other.md",
        "commit": c[5],
        "text": "x",
    }
    gone = gm("view", "/memories/other.md")
    assert (gone.exit_code, gone.stderr) == (
        1,
        "gitmem: error: The path /memories/other.md does not exist. Please provide a valid path.\n",
    )
    directory = gm("cat", "/memories/dir")
    assert (directory.exit_code, directory.stderr) == (
        1,
        "gitmem: error: /memories/dir is a directory, not a file\n",
    )


# -- restore, export, import, init ------------------------------------------------------------


def test_restore_dry_run_then_for_real(gm: Gitmem) -> None:
    c = gm.ids()
    assert gm.ok("restore", "HEAD~1", "--dry-run") == (
        f"Dry run: restoring {short(c[5])} would change 1 file:\n"
        "diff /memories/other.md\n"
        "new file\n"
        "--- /dev/null\n"
        "+++ /memories/other.md\n"
        "@@ -0,0 +1 @@\n"
        "+x\n"
        "\\ No newline at end of file\n"
    )
    assert gm.ids()[-1] == c[6]
    dry = [
        json.loads(x)
        for x in gm.ok("restore", "--session", "bob", "--dry-run", "--json").splitlines()
    ]
    assert [(d["status"], d["path"]) for d in dry] == [
        ("modified", "/memories/dir/n.md"),
        ("added", "/memories/other.md"),
    ]
    out = gm.ok("restore", "--session", "bob")
    head = gm.store().head_operation()
    assert head is not None
    assert out == (
        f"Restored the memory as of {short(c[4])} in new commit {short(head.commit)} "
        "(2 paths changed)\n"
    )
    assert (head.command, head.session, head.paths) == (
        "restore",
        "cli",
        ("/memories/dir/n.md", "/memories/other.md"),
    )
    assert gm.ok("cat", "/memories/dir/n.md") == "one\nTWO\nthree\nfour\n"
    out = gm.ok("restore", "--before", "2025-06-01T10:05:30Z", "/memories/dir/n.md")
    head = gm.store().head_operation()
    assert head is not None
    assert out == (
        f"Restored /memories/dir/n.md as of {short(c[5])} in new commit {short(head.commit)} "
        "(1 path changed)\n"
    )
    assert gm.ok("cat", "/memories/dir/n.md") == "ONE\nTWO\nthree\nfour\n"
    assert gm.ok("cat", "/memories/other.md") == "x"  # untouched by the partial restore
    as_json = json.loads(gm.ok("restore", short(c[0]), "/memories/notes.md", "--json"))
    assert (as_json["command"], as_json["paths"], as_json["detail"]["from"]) == (
        "restore",
        ["/memories/notes.md"],
        c[0],
    )
    for args, message in [
        ((), "give exactly one of REV, --session NAME or --until TIME"),
        (("HEAD", "--session", "bob"), "give exactly one of REV, --session NAME or --until TIME"),
        (("--before", "whenever"), "invalid time 'whenever'"),
        (("--session", "dave"), "no operation of session 'dave'"),
    ]:
        result = gm("restore", *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr


def test_a_restore_or_import_that_changes_nothing_says_so_and_makes_no_commit(
    gm: Gitmem, tmp_path: Path
) -> None:
    c = gm.ids()
    assert gm.ok("restore", "HEAD") == (
        f"Nothing to restore: the memory already matches {short(c[6])}; no commit made.\n"
    )
    assert gm.ok("restore", "HEAD~1", "/memories/dir") == (
        f"Nothing to restore: /memories/dir already matches {short(c[5])}; no commit made.\n"
    )
    assert gm.ok("restore", "HEAD", "--json") == ""
    # A dry run that would change nothing said "would change 0 files", as if only files counted;
    # it now says what the restore itself would say (the MCP server's words too).
    assert gm.ok("restore", "HEAD", "--dry-run") == (
        f"Nothing to restore: the memory already matches {short(c[6])}; nothing would change.\n"
    )
    assert gm.ok("restore", "HEAD~1", "/memories/dir/n.md", "/memories/dir", "--dry-run") == (
        f"Nothing to restore: /memories/dir/n.md, /memories/dir already match {short(c[5])}; "
        "nothing would change.\n"
    )
    assert gm.ok("restore", "HEAD", "--dry-run", "--json") == ""
    out = tmp_path / "out"
    gm.ok("export", str(out))
    assert gm.ok("import", str(out)) == (
        f"Nothing to import: the memory already holds {out}; no commit made.\n"
    )
    assert gm.ok("import", str(out), "--replace", "--json") == ""
    assert gm.ids() == c


def test_importing_a_directory_that_holds_the_key_file_is_refused(
    gm: Gitmem, tmp_path: Path
) -> None:
    # `gitmem import ~` put ~/.config/gitmem/keys/ID.key, the store's own key, into the memory
    # it encrypts, where the model reads it back.
    home = tmp_path / "home"
    (home / ".config" / "gitmem" / "keys").mkdir(parents=True)
    (home / ".config" / "gitmem" / "keys" / "0f3c.key").write_text(gm.key + "\n")
    head = gm.store().head()
    refused = gm("import", str(home))
    assert (refused.exit_code, refused.stderr) == (
        1,
        "gitmem: error: nothing was imported: 1 file refused: /memories/.config/gitmem/keys/"
        "0f3c.key: refused to store what looks like a gitmem store key (line 1). Memory must "
        "not hold credentials; remove it and try again.\n",
    )
    assert gm.store().head() == head


def test_an_import_refusal_names_the_first_20_files_and_counts_the_rest(
    gm: Gitmem, tmp_path: Path
) -> None:
    # It named every refused file: importing the wrong directory (a build tree, a home
    # directory) printed thousands of lines.
    source = tmp_path / "source"
    source.mkdir()
    for i in range(25):
        (source / f"b{i:02}.bin").write_bytes(b"\xff")
    head = gm.store().head()
    first = "; ".join(f"b{i:02}.bin: not UTF-8 text" for i in range(20))
    message = f"nothing was imported: 25 files refused: {first}; and 5 more"
    refused = gm("import", str(source))
    assert (refused.exit_code, refused.stderr) == (1, f"gitmem: error: {message}\n")
    as_json = gm("import", str(source), "--json")
    assert json.loads(as_json.stderr)["message"] == message
    with pytest.raises(history.ImportRefused) as info:
        history.import_(gm.store(), source)
    assert len(info.value.problems) == 25  # the Python API keeps them all
    assert gm.store().head() == head


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, to see that nothing is written into it."""
    directory = tmp_path / "work"
    directory.mkdir()
    monkeypatch.chdir(directory)
    return directory


def test_a_revision_alone_is_not_taken_for_the_directory_or_path(gm: Gitmem, work: Path) -> None:
    # `gitmem export HEAD~1`, the directory forgotten, exported the plaintext into ./HEAD~1.
    for rev in ("HEAD", "HEAD~1", "@^", "session:bob", "@{2h}~2"):
        refused = gm("export", rev)
        assert (refused.exit_code, refused.stderr) == (
            2,
            f"gitmem: error: {rev!r} is a revision: give the directory after it (for a "
            f"directory of that name, write ./{rev})\n",
        )
    assert list(work.iterdir()) == []
    refused = gm("cat", "HEAD~1")
    assert (refused.exit_code, refused.stderr) == (
        2,
        "gitmem: error: 'HEAD~1' is a revision: give the memory path after it\n",
    )
    for command in ("cat", "blame", "view"):
        swapped = gm(command, "/memories/dir/n.md", "HEAD~1")
        assert (swapped.exit_code, swapped.stderr) == (
            2,
            "gitmem: error: 'HEAD~1' comes after a path: give revisions before paths\n",
        ), command
        # Two paths are not a path and a misplaced revision.
        two = gm(command, "/memories/dir/n.md", "/memories/other.md")
        assert (two.exit_code, two.stderr) == (
            2,
            "gitmem: error: give one memory path, not two ('/memories/dir/n.md' and "
            "'/memories/other.md')\n",
        ), command
    assert gm.ok("export", "./HEAD").startswith("Exported ")
    assert (work / "HEAD").is_dir()


def test_export_and_import(gm: Gitmem, tmp_path: Path) -> None:
    c = gm.ids()
    out = tmp_path / "out"
    assert gm.ok("export", str(out)) == (
        f"Exported 1 file and 1 directory of {short(c[6])} to {out} (owner-only: files "
        "0600, directories 0700)\n"
    )
    refused = gm("export", str(out))
    assert (refused.exit_code, refused.stderr) == (
        2,
        f"gitmem: error: {out} is not empty; pass --force to write into it anyway\n",
    )
    summary = json.loads(gm.ok("export", str(out), "--rev", "HEAD~2", "--force", "--json"))
    assert summary == {"dir": str(out), "commit": c[4], "files": 2, "directories": 1}
    (out / "new.md").write_text("new\n")
    (out / "bad.md").write_bytes(b"\xff\xfe")
    bad = gm("import", str(out), "--json")
    assert bad.exit_code == 1
    assert json.loads(bad.stderr) == {
        "error": "ImportRefused",
        "message": "nothing was imported: 1 file refused: bad.md: not UTF-8 text",
        "exit_code": 1,
    }
    (out / "bad.md").unlink()
    done = gm.ok("import", str(out))
    head = gm.store().head_operation()
    assert head is not None
    assert done == (
        f"Imported 3 files from {out} in new commit {short(head.commit)} (3 paths changed)\n"
    )
    assert head.paths == ("/memories/dir/n.md", "/memories/new.md", "/memories/other.md")
    assert gm.store().files() == {
        "/memories/dir/n.md": "one\nTWO\nthree\nfour\n",
        "/memories/new.md": "new\n",
        "/memories/other.md": "x",
    }
    missing = gm("import", str(tmp_path / "nope"))
    assert missing.exit_code == 2


def test_init_json_and_key_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", str(tmp_path / "new.git"), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert sorted(body) == ["key_file", "store", "store_id"]
    key_file = Path(body["key_file"])
    assert key_file.name == f"{body['store_id']}.key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    printed = CliRunner().invoke(main, ["init", str(tmp_path / "p.git"), "--print-key", "--json"])
    shown = json.loads(printed.stdout)
    assert shown["key_file"] is None and shown["key"].startswith("gitmem-key-")
    # The saved key is found by store id: no key in the environment needed.
    log = CliRunner().invoke(main, ["--repo", str(tmp_path / "new.git"), "log"])
    assert (log.exit_code, log.stdout) == (0, "")


def test_init_that_cannot_save_the_key_makes_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The key file's name is the store's id, so the store was made first: when the key could
    # not be saved, a store nobody could open was left behind, and `init` refused to run again.
    config = tmp_path / "config"
    config.write_text("a file where the config directory should be")
    monkeypatch.setenv("GITMEM_CONFIG_DIR", str(config))
    target = tmp_path / "new.git"
    result = CliRunner().invoke(main, ["init", str(target)])
    assert result.exit_code == 1 and "nothing was changed" in result.stderr
    assert not target.exists()
    config.unlink()
    again = CliRunner().invoke(main, ["init", str(target)])
    assert again.exit_code == 0, again.output
    assert [f.name for f in (config / "keys").iterdir()] == [
        f"{MemoryStore.open(target).store_id}.key"
    ]


def test_accept_head_on_an_empty_store(tmp_path: Path, key: str) -> None:
    # It said "This client now trusts the store at an empty store."
    MemoryStore.init(tmp_path / "s.git", key)
    result = CliRunner().invoke(
        main, ["--repo", str(tmp_path / "s.git"), "accept-head"], env={"GITMEM_KEY": key}
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "This client now trusts the store as it is: empty, no operations yet.\n"


def test_accept_head_json(gm: Gitmem) -> None:
    c = gm.ids()
    assert json.loads(gm.ok("accept-head", "--json")) == {"commit": c[6], "seq": 7}


# -- errors and exit codes --------------------------------------------------------------------


def test_errors_with_json_are_one_object_on_stderr(gm: Gitmem) -> None:
    result = gm("show", "nosuch", "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert json.loads(result.stderr) == {
        "error": "UsageError",
        "message": "unknown revision 'nosuch'",
        "exit_code": 2,
    }


def test_a_session_label_too_long_or_not_printable_is_refused_and_nothing_written(
    gm: Gitmem, tmp_path: Path
) -> None:
    # A label of any length went into every commit's record (a 100,000-character one too).
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.md").write_text("a\n")
    head = gm.ids()[-1]
    for env, args in [
        ({"GITMEM_SESSION": "s" * 257}, ("restore", "HEAD~2")),
        ({"GITMEM_SESSION": "s" * 100_000}, ("import", str(tmp_path / "in"))),
        ({"GITMEM_SESSION": "two\nlines"}, ("import", str(tmp_path / "in"))),
        ({}, ("mcp", "--session", "m" * 257)),
    ]:
        result = gm(*args, env=env)
        assert (result.exit_code, result.stdout) == (2, ""), args
        assert result.stderr.startswith("gitmem: error: the session label "), args
        assert "at most 256" in result.stderr or "not printable" in result.stderr
        assert len(result.stderr) < 300
    assert gm.ids()[-1] == head
    gm.ok("restore", "HEAD~2", env={"GITMEM_SESSION": "s" * 256})
    assert gm.store().head_operation().session == "s" * 256  # type: ignore[union-attr]


def test_rollback_and_format_version_exit_codes(gm: Gitmem) -> None:
    c = gm.ids()
    repo = GitRepo(gm.repo)
    gm.ok("log", "-n", "1")  # this client has now seen the head
    repo.update_ref(BRANCH, c[5], c[6])
    rolled = gm("log")
    assert rolled.exit_code == 6
    assert "run `gitmem accept-head`" in rolled.stderr
    repo.update_ref(BRANCH, c[6], c[5])
    meta_ref = repo.ref(META_REF)
    assert meta_ref is not None
    meta = json.loads(repo.read_blob(meta_ref))
    meta["format"] = 99
    repo.update_ref(META_REF, repo.write_blob(json.dumps(meta).encode()), meta_ref)
    newer = gm("log")
    assert newer.exit_code == 8
    assert "format version 99" in newer.stderr


def _gitmem() -> list[str]:
    script = Path(sys.executable).with_name("gitmem")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gitmem"]


def _run(*args: str, env: dict[str, str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_gitmem(), *args], env=env, capture_output=True, text=True, timeout=120, **kw
    )


def test_an_export_the_file_system_stops_removes_what_it_wrote(gm: Gitmem, tmp_path: Path) -> None:
    # A full disk part way left the files written so far (one of them empty), said "nothing
    # was changed", and the same command run again refused the directory as not empty.
    store = gm.store()
    store.create("/memories/big.md", "x" * 100_000)
    store.close()
    out = tmp_path / "deep" / "out"
    env = {**os.environ, "GITMEM_KEY": gm.key}

    def small_files() -> None:  # writes past 64 KiB fail as on a full disk (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))

    failed = _run("--repo", str(gm.repo), "export", str(out), env=env, preexec_fn=small_files)
    assert (failed.returncode, failed.stderr) == (
        1,
        "gitmem: error: the file system refused: File too large; the export stopped and "
        "removed what it had written\n",
    )
    assert not (tmp_path / "deep").exists()
    assert _run("--repo", str(gm.repo), "export", str(out), env=env).returncode == 0
    assert (out / "big.md").stat().st_size == 100_000


def test_an_interrupted_export_removes_what_it_wrote(
    gm: Gitmem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = gm.store()
    read = store.codec.read_file
    calls: list[str] = []

    def read_then_interrupt(oid: str) -> bytes:
        calls.append(oid)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return read(oid)

    store.create("/memories/second.md", "2\n")
    monkeypatch.setattr(store.codec, "read_file", read_then_interrupt)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        history.export(store, out)
    assert len(calls) == 2 and not out.exists()


@pytest.mark.parametrize("command", [_gitmem, lambda: [sys.executable, "-m", "gitmem"]])
def test_closed_standard_streams_are_the_null_device_not_a_traceback(
    gm: Gitmem, tmp_path: Path, command: Callable[[], list[str]]
) -> None:
    # `gitmem log >&-` (or a service started without stdin) left sys.stdout or sys.stdin None
    # in Python: every command ended in a traceback ('NoneType' object has no attribute ...).
    env = {**os.environ, "GITMEM_KEY": gm.key}

    def run(*args: str, close: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command(), "--repo", str(gm.repo), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=lambda: os.close(close),
        )

    for args in (["log"], ["show", "--json"], ["cat", "/memories/dir/n.md"]):
        closed_out = run(*args, close=1)
        assert (closed_out.returncode, closed_out.stderr) == (0, ""), args
    closed_in = run("key", "add", close=0)
    assert (closed_in.returncode, closed_in.stderr) == (
        2,
        "gitmem: error: no passphrase on stdin (give the new passphrase as its first line)\n",
    )
    assert run("mcp", close=0).returncode == 0  # no client: it ends at once
    assert run("show", "HEAD~99", close=2).returncode == 2
    assert gm.store().key_slots() == []


def test_installed_command_exit_codes(gm: Gitmem, tmp_path: Path) -> None:
    env = {**os.environ, "GITMEM_KEY": gm.key, "TZ": "UTC"}
    ok = _run("--repo", str(gm.repo), "log", "-n", "1", env=env)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout.endswith("  carol  delete       /memories/other.md\n")
    assert "\x1b[" not in ok.stdout  # piped: no colour
    usage = _run("--repo", str(gm.repo), "show", "HEAD~99", env=env)
    assert (usage.returncode, usage.stderr) == (
        2,
        "gitmem: error: unknown revision 'HEAD~99': history is not that long\n",
    )
    nostore = _run("--repo", str(tmp_path / "none"), "log", env=env)
    assert (nostore.returncode, nostore.stderr) == (
        3,
        f"gitmem: error: no gitmem store at {tmp_path / 'none'}\n",
    )
    wrong = _run("--repo", str(gm.repo), "log", env={**env, "GITMEM_KEY": gm_key_other()})
    assert (wrong.returncode, wrong.stderr) == (
        4,
        f"gitmem: error: the key does not open the store at {gm.repo}\n",
    )
    badarg = _run("--repo", str(gm.repo), "log", "--since", "whenever", env=env)
    assert badarg.returncode == 2


def gm_key_other() -> str:
    from gitmem import generate_key

    return generate_key()


def test_installed_command_streams_into_a_pipe_and_stops_quietly(gm: Gitmem) -> None:
    store = gm.store()
    store.create(parse_path("/memories/big.md"), "".join(f"line {i}\n" for i in range(30000)))
    env = {**os.environ, "GITMEM_KEY": gm.key}
    with subprocess.Popen(
        [*_gitmem(), "--repo", str(gm.repo), "log", "-p"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # like `| head -1`
        err = proc.stderr.read()
        code = proc.wait(timeout=60)
    assert first.split()[3:5] == [b"test", b"create"]
    assert (code, err) == (141, b"")


def test_shell_completion_of_memory_paths_and_commands(gm: Gitmem) -> None:
    def complete(words: str, env: dict[str, str] | None = None) -> list[str]:
        result = CliRunner().invoke(
            main,
            [],
            prog_name="gitmem",
            env={
                "_GITMEM_COMPLETE": "bash_complete",
                "COMP_WORDS": words,
                "COMP_CWORD": str(len(words.split()) - 1),
                **(env or {}),
            },
        )
        assert result.exit_code == 0
        return [line.split(",", 1)[1] for line in result.stdout.splitlines() if line]

    with_key = {"GITMEM_KEY": gm.key}
    assert complete(f"gitmem --repo {gm.repo} cat /memories/d", with_key) == [
        "/memories/dir/",
        "/memories/dir/n.md",
    ]
    assert complete(f"gitmem --repo {gm.repo} cat /memories/d") == []  # no key: nothing
    assert complete("gitmem log --command st") == ["str_replace"]
    assert "sessions" in complete("gitmem se")


def test_memory_text_cannot_drive_the_terminal(gm: Gitmem, monkeypatch: pytest.MonkeyPatch) -> None:
    hostile = "title \x1b]0;pwned\x07 red \x1b[31m\n"
    store = MemoryStore.open(gm.repo, gm.key, session="evil")
    # gitmem refuses such a label now; an older gitmem, or another writer holding the key,
    # could still have recorded one.
    store.session = "evil\x1b[2J"
    store.create(parse_path("/memories/h.md"), hostile)
    monkeypatch.setattr(cli, "_isatty", lambda stream: True)  # as on a terminal
    shown = gm.ok("--no-pager", "show")
    assert "\x1b]" not in shown and "\x07" not in shown and "\x1b[2J" not in shown
    assert "+title \\x1b]0;pwned\\x07 red \\x1b[31m" in shown
    assert "Session:  evil\\x1b[2J" in shown
    blame = gm.ok("--no-pager", "--color", "never", "blame", "/memories/h.md")
    assert blame.endswith(") title \\x1b]0;pwned\\x07 red \\x1b[31m\n")
    assert gm.ok("cat", "/memories/h.md") == hostile  # raw on request
    assert json.loads(gm.ok("cat", "/memories/h.md", "--json"))["text"] == hostile


def test_an_empty_local_path_is_refused_not_taken_for_the_working_directory(
    gm: Gitmem, work: Path
) -> None:
    # `gitmem export HEAD "$OUT"` with OUT unset: Path("") is ".", so the plaintext memory
    # went into the working directory (and `init ""` made a store there).
    cases = [
        ["export", ""],
        ["export", "HEAD", "", "--force"],
        ["init", ""],
        ["clone", str(gm.repo), ""],
        ["--key-file", "", "log"],
        ["import", ""],
    ]
    for args in cases:
        result = gm(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "an empty string is not a path" in result.stderr, (args, result.stderr)
    assert list(work.iterdir()) == []


def test_demo_with_an_api_it_cannot_reach_says_so_and_keeps_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With ANTHROPIC_API_KEY set and the API out of reach (offline, a proxy, a bad key), the
    # demo printed the SDK's traceback; with --store it left a store whose key was never saved.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")  # nothing listens there
    monkeypatch.setattr(progress_log, "Anthropic", functools.partial(Anthropic, max_retries=0))
    monkeypatch.delenv("GITMEM_KEY", raising=False)
    target = tmp_path / "demo.git"
    result = CliRunner().invoke(main, ["demo", "--store", str(target)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    last = result.stderr.splitlines()[-1]
    assert last.startswith("gitmem: error: the Anthropic API could not be used (")
    assert "gitmem demo --offline" in last and "Traceback" not in result.stderr
    store = MemoryStore.open(target)  # its key was saved, as `gitmem init` saves one
    assert store.head() is None or store.verify().ok


def test_a_file_system_error_repeats_at_most_2000_characters_of_the_path(tmp_path: Path) -> None:
    # docs/safeguards.md, "Error text": the CLI's "the file system refused" line printed the
    # whole path it was given (here 6,000 characters).
    long = str(tmp_path / ("a/" * 3000))
    result = CliRunner().invoke(main, ["--repo", long, "log"])
    assert result.exit_code == 1
    assert result.stderr.startswith("gitmem: error: the file system refused: File name too long")
    assert "more characters not shown]" in result.stderr and len(result.stderr) < 2300


# -- key text where a path or URL belongs -------------------------------------------------------


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(
    ("args", "env", "what"),
    [
        (["--key-file", "{key}", "log"], {}, "Invalid value for '--key-file': the value"),
        (["--repo", "{key}", "log"], {}, "'--repo': the value (of --repo or GITMEM_REPO)"),
        (["log"], {"GITMEM_REPO": "{key}"}, "'--repo': the value (of --repo or GITMEM_REPO)"),
        (["--repo", "{repo}", "log"], {"GITMEM_KEY_FILE": "{key}"}, "the key file's path"),
        (["--repo", "{repo}", "log"], {"GITMEM_STATE_DIR": "/{key}"}, "GITMEM_STATE_DIR"),
        (["init", "{key}"], {}, "Invalid value for '[PATH]': the value"),
        (["init", "{tmp}/{key}/s.git"], {}, "Invalid value for '[PATH]': the value"),
        (["clone", "{key}", "{tmp}/c.git"], {}, "the remote URL"),
        (["clone", "https://example.invalid/{key}.git", "{tmp}/c.git"], {}, "the remote URL"),
        (["clone", "{repo}", "{key}"], {}, "Invalid value for 'PATH': the value"),
        (["--repo", "{repo}", "remote", "add", "origin", "{key}"], {}, "the remote URL"),
        (["--repo", "{repo}", "remote", "add", "o", "ssh://{key}@h/s.git"], {}, "the remote URL"),
        (["--repo", "{repo}", "pull", "{key}"], {}, "the remote URL"),
        (["--repo", "{repo}", "export", "{key}"], {}, "the directory to export into"),
        (["--repo", "{repo}", "import", "{key}"], {}, "Invalid value for 'DIR': the value"),
    ],
)
def test_key_text_given_as_a_path_or_url_is_refused_unshown(
    gm: Gitmem,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    what: str,
) -> None:
    """A key pasted where a path or URL belongs was echoed in errors, resolved as a host name,
    written into the config or made a directory's name."""
    monkeypatch.chdir(tmp_path)
    fill = {"key": gm.key, "repo": str(gm.repo), "tmp": str(tmp_path)}
    before = _tree(tmp_path)
    result = CliRunner().invoke(
        main,
        [arg.format(**fill) for arg in args],
        env={"GITMEM_KEY": gm.key, **{k: v.format(**fill) for k, v in env.items()}}
        if "GITMEM_KEY_FILE" not in env
        else {"GITMEM_KEY": "", **{k: v.format(**fill) for k, v in env.items()}},
    )
    assert result.exit_code == 2, result.output
    assert gm.key not in result.output
    assert gm.key[len("gitmem-key-1:") :][:8] not in result.output
    assert (
        f"{what} holds a gitmem store key (key text, 'gitmem-key-...') where a " in result.stderr
    ), result.stderr
    assert "refused, and not shown here" in result.stderr
    assert _tree(tmp_path) == before


def test_the_library_refuses_key_text_as_a_path_or_url_unshown(
    gm: Gitmem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem import sync
    from gitmem.errors import UsageError
    from gitmem.keysource import read_key_file

    monkeypatch.chdir(tmp_path)
    key = gm.key
    calls: list[Callable[[], object]] = [
        lambda: MemoryStore.open(key, key),
        lambda: MemoryStore.init(tmp_path / key, key),
        lambda: MemoryStore.open(gm.repo, key, state_dir=tmp_path / key),
        lambda: read_key_file(Path(key)),
        lambda: sync.clone(key, tmp_path / "c.git", key),
        lambda: sync.clone(str(gm.repo), key, key),
        lambda: sync.add_remote(gm.store(), "origin", key),
    ]
    for call in calls:
        before = _tree(tmp_path)
        with pytest.raises(UsageError) as refused:
            call()
        assert key not in str(refused.value)
        assert "holds a gitmem store key" in str(refused.value)
        assert _tree(tmp_path) == before
    assert gm.store().repo.remote_url("origin") is None
