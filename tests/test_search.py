"""``gitmem grep`` and ``gitmem log -S``/``-G`` (gitmem.search) over the seven-operation history
of tests/test_history.py, and the width of ``gitmem sessions``' table on a terminal."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from test_cli import Gitmem, short
from test_history import MINUTE, FakeClock, built_once

import gitmem.store
from gitmem import MemoryStore, cli, parse_path, search
from gitmem.errors import NotFound, UsageError
from gitmem.render import table_cells, table_line

BAD_REGEX = (
    "invalid regular expression '(': missing ), unterminated subpattern at position 0 "
    "(patterns are Python regular expressions; -F matches the text as it is)"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return built_once(tmp_path_factory)


@pytest.fixture
def gm(built: tuple[Path, str], tmp_path: Path, utc: None) -> Gitmem:
    target = tmp_path / "store.git"
    shutil.copytree(built[0], target)
    return Gitmem(target, built[1])


def add_meta(gm: Gitmem) -> None:
    """A second file, with regular-expression metacharacters in it."""
    gm.store().create(parse_path("/memories/meta.md"), "cost: 3.50 (approx)*\ncost: 3x50\n")


# -- grep -----------------------------------------------------------------------------------


def test_grep_prints_matching_lines_as_git_grep_does(gm: Gitmem) -> None:
    assert gm.ok("grep", "o") == "/memories/dir/n.md:four\n"
    assert gm.ok("grep", "-n", "-i", "o") == (
        "/memories/dir/n.md:1:ONE\n/memories/dir/n.md:2:TWO\n/memories/dir/n.md:4:four\n"
    )
    assert gm.ok("grep", "--ignore-case", "--line-number", "^t") == (
        "/memories/dir/n.md:2:TWO\n/memories/dir/n.md:3:three\n"
    )


def test_grep_at_an_old_revision_names_it_first(gm: Gitmem) -> None:
    assert gm.ok("grep", "-n", "one", "HEAD~3") == "HEAD~3:/memories/dir/n.md:1:one\n"
    # Before the rename, under the file's first name; and a file deleted since.
    assert gm.ok("grep", "one", "HEAD~6") == "HEAD~6:/memories/notes.md:one\n"
    assert gm.ok("grep", "x", "HEAD~1") == "HEAD~1:/memories/other.md:x\n"
    assert gm.ok("grep", "-l", "x", "HEAD~1") == "HEAD~1:/memories/other.md\n"


def test_grep_fixed_strings_match_metacharacters_as_text(gm: Gitmem) -> None:
    add_meta(gm)
    assert (
        gm.ok("grep", "3.50")
        == "/memories/meta.md:cost: 3.50 (approx)*\n/memories/meta.md:cost: 3x50\n"
    )
    assert gm.ok("grep", "-F", "3.50 (approx)*") == "/memories/meta.md:cost: 3.50 (approx)*\n"
    assert gm.ok("grep", "--fixed-strings", "(") == "/memories/meta.md:cost: 3.50 (approx)*\n"


def test_grep_files_with_matches_and_paths(gm: Gitmem) -> None:
    add_meta(gm)
    assert gm.ok("grep", "-l", "[ce]") == "/memories/dir/n.md\n/memories/meta.md\n"
    assert gm.ok("grep", "--files-with-matches", "-n", "c") == "/memories/meta.md\n"
    assert gm.ok("grep", "-n", "[ce]", "--", "/memories/dir") == "/memories/dir/n.md:3:three\n"
    assert gm.ok("grep", "-n", "[ce]", "/memories/meta.md") == (
        "/memories/meta.md:1:cost: 3.50 (approx)*\n/memories/meta.md:2:cost: 3x50\n"
    )
    # Options may follow the paths after `--`, as in the other commands.
    assert gm.ok("grep", "e", "--", "/memories/dir", "-n") == "/memories/dir/n.md:3:three\n"


def test_grep_json_gives_one_object_per_match_or_file(gm: Gitmem) -> None:
    add_meta(gm)
    lines = gm.ok("grep", "--json", "-i", "[ct]").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"path": "/memories/dir/n.md", "line": 2, "text": "TWO"},
        {"path": "/memories/dir/n.md", "line": 3, "text": "three"},
        {"path": "/memories/meta.md", "line": 1, "text": "cost: 3.50 (approx)*"},
        {"path": "/memories/meta.md", "line": 2, "text": "cost: 3x50"},
    ]
    assert gm.ok("grep", "-l", "--json", "t") == (
        '{"path": "/memories/dir/n.md"}\n{"path": "/memories/meta.md"}\n'
    )


def test_grep_a_pattern_starting_with_a_dash_is_given_with_e(gm: Gitmem) -> None:
    gm.store().create(parse_path("/memories/todo.md"), "- [ ] call\n- [x] done\n")
    assert gm.ok("grep", "-F", "-e", "- [ ]") == "/memories/todo.md:- [ ] call\n"
    assert gm.ok("grep", "-n", "-e", "^- \\[x", "HEAD") == "HEAD:/memories/todo.md:2:- [x] done\n"


def test_grep_colours_as_git_grep(gm: Gitmem) -> None:
    out = gm.ok("grep", "-n", "--color", "always", "o", "HEAD")
    assert out == (
        "\x1b[35mHEAD\x1b[0m\x1b[36m:\x1b[0m\x1b[35m/memories/dir/n.md\x1b[0m\x1b[36m:\x1b[0m"
        "\x1b[32m4\x1b[0m\x1b[36m:\x1b[0mf\x1b[31m\x1b[1mo\x1b[0mur\n"
    )


def test_grep_exits_1_when_nothing_matches(gm: Gitmem) -> None:
    for args in (["zzz"], ["--json", "zzz"], ["-l", "one"], ["x", "--", "/memories/dir"]):
        result = gm("grep", *args)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", ""), args


def test_grep_refuses_bad_input_clearly(gm: Gitmem) -> None:
    cases = [
        (["("], 2, BAD_REGEX),
        (["-G", "x"], 2, None),  # not an option of grep: click's usage error
        ([], 2, "give the pattern to look for (-e PATTERN for one starting with -)"),
        (
            ["x", "/etc/passwd"],
            2,
            "The path /etc/passwd is not allowed: every memory path must start with /memories/",
        ),
        (["x", "--", "/memories/nope.md"], 1, "/memories/nope.md does not exist"),
        (["x", "HEAD~1", "--", "/memories/other.md"], 0, None),
        (["x", "HEAD", "--", "/memories/other.md"], 1, "/memories/other.md does not exist at HEAD"),
        (
            ["x", "HEAD~1", "HEAD"],
            2,
            "too many revisions (HEAD~1, HEAD): at most 1; memory paths start with /memories",
        ),
        (["x", "HEAD~99"], 2, "unknown revision 'HEAD~99': history is not that long"),
    ]
    for args, code, message in cases:
        result = gm("grep", *args)
        assert result.exit_code == code, (args, result.output)
        if message is not None:
            assert result.stderr == f"gitmem: error: {message}\n", args
    result = gm("grep", "--json", "(")
    assert result.exit_code == 2 and result.stdout == ""
    assert json.loads(result.stderr) == {
        "error": "UsageError",
        "exit_code": 2,
        "message": BAD_REGEX,
    }


def test_grep_library(gm: Gitmem) -> None:
    store = gm.store()
    found = list(search.grep(store, "(?i)two|four"))
    assert [m.to_json() for m in found] == [
        {"path": "/memories/dir/n.md", "line": 2, "text": "TWO"},
        {"path": "/memories/dir/n.md", "line": 4, "text": "four"},
    ]
    pattern = search.compile_pattern("T", ignore_case=True)
    assert [m.line for m in search.grep(store, pattern, "HEAD~6")] == [2, 3]
    with pytest.raises(UsageError, match="invalid regular expression"):
        search.grep(store, "[")
    with pytest.raises(NotFound, match=r"^/memories/other\.md does not exist at HEAD$"):
        search.grep(store, "x", "HEAD", paths=["/memories/other.md"])
    empty = MemoryStore.open(gm.repo.parent / "empty.git", gm.key, create=True)
    assert list(search.grep(empty, "")) == []


# -- log -S / -G ----------------------------------------------------------------------------


def test_log_S_finds_where_a_text_was_learned_and_forgotten(gm: Gitmem) -> None:
    c = [short(x) for x in gm.ids()]
    # Learned by the create, carried unchanged through the rename, forgotten by carol's edit.
    assert gm.ok("log", "-S", "one") == (
        f"{c[5]}  2025-06-01 10:05:00  carol  str_replace  /memories/dir/n.md\n"
        f"{c[0]}  2025-06-01 10:00:00  alice  create       /memories/notes.md\n"
    )
    # Learned by an insert: the rename that moved it is no change of it.
    assert gm.ok("log", "-S", "four") == (
        f"{c[2]}  2025-06-01 10:02:00  bob  insert       /memories/notes.md\n"
    )
    # Forgotten by deleting its file.
    assert gm.ok("log", "-S", "x", "-p") == (
        f"{c[6]}  2025-06-01 10:06:00  carol  delete       /memories/other.md\n"
        "diff /memories/other.md\ndeleted file\n--- /memories/other.md\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-x\n\\ No newline at end of file\n"
        "\n"
        f"{c[4]}  2025-06-01 10:04:00  bob    create       /memories/other.md\n"
        "diff /memories/other.md\nnew file\n--- /dev/null\n+++ /memories/other.md\n"
        "@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"
    )


def test_log_S_and_G_combine_with_the_other_filters(gm: Gitmem) -> None:
    def seqs(*args: str) -> list[int]:
        return [json.loads(line)["seq"] for line in gm.ok("log", "--json", *args).splitlines()]

    assert seqs("-S", "one") == [6, 1]
    assert seqs("-S", "one", "--session", "alice") == [1]
    assert seqs("-S", "x", "--session", "carol") == [7]
    assert seqs("-S", "x", "--command", "create") == [5]
    assert seqs("-S", "one", "/memories/dir/n.md") == [6, 1]  # follows the rename back
    assert seqs("-S", "one", "--", "/memories/other.md") == []
    assert seqs("-S", "one", "HEAD~2") == [1]
    assert seqs("-S", "one", "-n", "1") == [6]
    assert seqs("-S", "ONE", "--since", "2025-06-01T10:05:00Z") == [6]
    # -G: a line matching the expression added or removed: two -> TWO; not "TWO" as context.
    assert seqs("-G", "^T") == [2]
    assert seqs("-G", "o") == [6, 3, 2, 1]
    assert seqs("-G", "[xX]", "--session", "carol") == [7]
    assert seqs("-G", "four") == [3]


def test_log_pickaxe_json_changes_are_the_matching_files_only(gm: Gitmem) -> None:
    store = gm.store()
    store.restore("HEAD~2")  # brings back other.md ("x") and n.md's "one" in one operation
    body = json.loads(gm.ok("log", "--json", "--stat", "-S", "x", "-n", "1"))
    assert body["command"] == "restore"
    assert body["changes"] == [
        {
            "added": 1,
            "old_path": None,
            "path": "/memories/other.md",
            "removed": 0,
            "status": "added",
        }
    ]
    # With a path: the operations that touched it, each looked at whole (docs/cli.md).
    body = json.loads(gm.ok("log", "--json", "--stat", "-S", "x", "-n", "1", "/memories/dir"))
    assert (body["command"], [c["path"] for c in body["changes"]]) == (
        "restore",
        ["/memories/other.md"],
    )
    body = json.loads(gm.ok("log", "--json", "-p", "-S", "one", "-n", "1"))
    assert [c["path"] for c in body["changes"]] == ["/memories/dir/n.md"]
    assert body["changes"][0]["diff"].endswith("@@ -1,4 +1,4 @@\n-ONE\n+one\n TWO\n three\n four\n")
    assert set(body) == set(json.loads(gm.ok("log", "--json", "-n", "1"))) | {"changes"}


def test_log_G_sees_a_matching_line_moved_within_its_file(gm: Gitmem) -> None:
    store = gm.store()
    path = parse_path("/memories/moved.md")
    store.create(path, "a\nb\nkey\n")
    store.str_replace(path, "a\nb\nkey\n", "key\na\nb\n")
    seqs = [json.loads(line)["seq"] for line in gm.ok("log", "--json", "-G", "key").splitlines()]
    assert seqs == [9, 8]
    # The number of occurrences did not change: -S sees only the create.
    assert [
        json.loads(line)["seq"] for line in gm.ok("log", "--json", "-S", "key").splitlines()
    ] == [8]


def test_log_pickaxe_refusals(gm: Gitmem) -> None:
    cases = [
        (["-S", "a", "-G", "b"], "-S and -G cannot be combined: give one"),
        (["-S", ""], "give the text to look for: -S with an empty text matches nothing"),
        (["-G", "("], BAD_REGEX),
        (["-S", "one", "--session", "nosuch"], "no operation of session 'nosuch'"),
    ]
    for args, message in cases:
        result = gm("log", *args)
        assert (result.exit_code, result.stderr) == (2, f"gitmem: error: {message}\n"), args
    result = gm("log", "-S", "nothing like it")
    assert (result.exit_code, result.stdout, result.stderr) == (
        0,
        "",
        "gitmem: no operations match\n",
    )


def test_pickaxe_leaves_merges_out(tmp_path: Path, key: str) -> None:
    first = MemoryStore.open(tmp_path / "a.git", key, create=True, session="a")
    first.create(parse_path("/memories/notes.md"), "1\n")
    second = MemoryStore.clone(str(tmp_path / "a.git"), tmp_path / "b.git", key, session="b")
    first.create(parse_path("/memories/fact.md"), "the sky is green\n")
    second.create(parse_path("/memories/other.md"), "x\n")
    assert second.pull().action == "merged"
    assert next(op.command for op in second.log()) == "merge"
    # The merge brings fact.md into second's line of history: the operation that wrote it is
    # the one found, as git log -S finds it, and not the merge as well.
    hits = list(search.pickaxe(second, text="green"))
    assert [(h.operation.session, h.operation.command) for h in hits] == [("a", "create")]
    assert [h.operation.session for h in search.pickaxe(second, regex="^x$")] == ["b"]


def test_pickaxe_library(gm: Gitmem) -> None:
    store = gm.store()
    hits = list(search.pickaxe(store, text="one"))
    assert [h.operation.seq for h in hits] == [6, 1]
    assert [(c.status, c.path, c.before, c.after) for c in hits[1].changes] == [
        ("added", "/memories/notes.md", None, "one\ntwo\nthree\n")
    ]
    assert [h.operation.seq for h in search.pickaxe(store, regex="(?i)^two$")] == [2, 1]
    with pytest.raises(UsageError, match="give one of text"):
        search.pickaxe(store)
    with pytest.raises(UsageError, match="give one of text"):
        search.pickaxe(store, text="a", regex="b")
    with pytest.raises(UsageError, match="max_count must be 0 or more"):
        search.pickaxe(store, text="a", max_count=-1)
    with pytest.raises(UsageError, match="unknown command"):
        search.pickaxe(store, text="a", command="bogus")
    with pytest.raises(TypeError, match="pattern must be a str, not int"):
        search.pickaxe(store, regex=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the pattern must match text"):
        search.grep(store, re.compile(b"x"))  # type: ignore[arg-type]


def test_pickaxe_decrypts_each_changed_version_once(
    gm: Gitmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = gm.store()
    reads: Counter[str] = Counter()
    read_file = store.codec.read_file

    def counted(oid: str, *, fresh: bool = False) -> bytes:
        reads[oid] += 1
        return read_file(oid, fresh=fresh)

    monkeypatch.setattr(store.codec, "read_file", counted)
    assert list(search.pickaxe(store, text="nowhere")) == []
    # notes.md's four versions and other.md's one; the rename and the delete read nothing new.
    assert sorted(reads.values()) == [1, 1, 1, 1, 1]


@pytest.mark.slow
def test_pickaxe_over_a_thousand_operations_is_quick(tmp_path: Path, key: str) -> None:
    store = MemoryStore.open(tmp_path / "m.git", key, create=True, session="s")
    paths = [parse_path(f"/memories/{name}.md") for name in ("a", "b", "c", "d")]
    for path in paths:
        store.create(path, "".join(f"line {i}\n" for i in range(250)))
    for i in range(1000):
        path = paths[i % 4]
        store.str_replace(path, f"line {i // 4}\n", f"fact {i}\n")
    fresh = MemoryStore.open(tmp_path / "m.git", key)
    start = time.process_time()
    hits = list(search.pickaxe(fresh, text="fact 5\n"))
    took = time.process_time() - start
    assert [h.operation.seq for h in hits] == [10]
    # Under half a second of processor time here; the bound leaves room for slower machines.
    assert took < 3, took


# -- sessions' width ------------------------------------------------------------------------


def test_table_cells_shrink_the_widest_columns_first() -> None:
    rows = [("NAME", "N", "PATHS"), ("a-very-long-session-name", "12", "/memories/a /memories/b")]
    assert [table_line(cells) for cells in table_cells(rows, right=(1,))] == [
        "NAME                       N  PATHS",
        "a-very-long-session-name  12  /memories/a /memories/b",
    ]
    fitted = [table_line(c, 30) for c in table_cells(rows, right=(1,), shrink=(0, 2), width=30)]
    assert fitted == ["NAME           N  PATHS", "a-very-long…  12  /memories/a…"]
    assert all(len(line) <= 30 for line in fitted)
    # Too narrow even for the headers: the line itself is cut.
    narrow = [table_line(c, 8) for c in table_cells(rows, right=(1,), shrink=(0, 2), width=8)]
    assert narrow == ["NAME   …", "a-v…  1…"]


def test_sessions_fit_the_terminal_and_json_keeps_everything(
    gm: Gitmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    clock.ns += 7 * MINUTE  # the next operations at 10:07, 10:08, ...
    monkeypatch.setattr(gitmem.store, "time", clock)
    store = MemoryStore.open(gm.repo, gm.key, session="a-session-with-a-very-long-label")
    for name in ("alpha", "beta", "gamma", "delta"):
        store.create(parse_path(f"/memories/projects/{name}/notes.md"), "x\n")
    wide = gm.ok("sessions")  # not a terminal: nothing cut
    assert wide.splitlines()[1].endswith(
        "create:4                    /memories/projects/alpha/notes.md "
        "/memories/projects/beta/notes.md /memories/projects/delta/notes.md (+1 more)"
    )
    monkeypatch.setattr(cli, "_isatty", lambda _stream: True)
    out = gm.ok("sessions", "--no-pager", "--color", "never", env={"COLUMNS": "100"})
    assert out == (
        "SESSION            FIRST                LAST                 OPS  COMMANDS          "
        "PATHS\n"
        "a-session-with-a…  2025-06-01 10:07:00  2025-06-01 10:10:00    4  create:4          "
        "/memories/proje…\n"
        "carol              2025-06-01 10:05:00  2025-06-01 10:06:00    2  delete:1 str_re…  "
        "/memories/dir/n…\n"
        "bob                2025-06-01 10:02:00  2025-06-01 10:04:00    3  create:1 insert…  "
        "/memories/dir/n…\n"
        "alice              2025-06-01 10:00:00  2025-06-01 10:01:00    2  create:1 str_re…  "
        "/memories/notes…\n"
    )
    assert max(map(len, out.splitlines())) <= 100
    full = json.loads(gm.ok("sessions", "--json").splitlines()[0])
    assert full["session"] == "a-session-with-a-very-long-label"
    assert len(full["paths"]) == 4
