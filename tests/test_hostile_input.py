"""Hostile tool input: wrong types, missing fields, unknown commands, odd shapes and sizes.

``GitMemoryTool.call`` receives whatever JSON the model produced. Every input must either run as
a command or be refused with a ``ToolError`` (never another exception), and a refused input must
leave the branch and the memory exactly as they were. A fixed list covers every field of every
command with every wrong JSON type, every missing field, unknown commands, ``view_range`` shapes,
huge values and lone surrogates; hypothesis then throws arbitrary JSON-like objects at it.

Unknown fields are ignored, as the SDK's reference backend ignores them (and the API may add
optional fields): they never change what a command does, which the ``overwrite`` and ``path2``
cases below check.

Hostile *paths* are ``test_paths.py``'s subject. Run the long variant with
``pytest -m slow -s tests/test_hostile_input.py`` (``GITMEM_HOSTILE_EXAMPLES`` sets its size;
``GITMEM_EVIDENCE_DIR`` makes each test write its counts there).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gitmem
import gitmem.store
from gitmem import textops
from gitmem.cli import main
from gitmem.paths import parse

A = "/memories/a.md"
KNOWN = "view, create, str_replace, insert, delete, rename"
RANGE = "Error: `view_range` must be a list of two integers [start, end]"
NOT_OBJECT = "Error: the memory tool input must be an object"
# A valid input of each command, on the store the tests set up.
VALID: dict[str, dict[str, Any]] = {
    "view": {"command": "view", "path": A},
    "create": {"command": "create", "path": "/memories/new.md", "file_text": "new\n"},
    "str_replace": {"command": "str_replace", "path": A, "old_str": "two", "new_str": "2"},
    "insert": {"command": "insert", "path": A, "insert_line": 1, "insert_text": "1.5"},
    "delete": {"command": "delete", "path": "/memories/d/in.md"},
    "rename": {"command": "rename", "old_path": A, "new_path": "/memories/b.md"},
}
WRITES = {"create", "str_replace", "insert", "delete", "rename"}
INT_FIELDS = {"insert_line"}


def unknown(shown: str) -> str:
    return f"Error: Unknown command {shown}; use one of: {KNOWN}"


def needs(command: str, name: str) -> str:
    return f"Error: the {command} command needs the `{name}` parameter"


def mistyped(command: str, name: str) -> str:
    kind = "an integer" if name in INT_FIELDS else "a string"
    return f"Error: the `{name}` parameter of {command} must be {kind}"


def surrogate(command: str, name: str) -> str:
    return (
        f"Error: the `{name}` parameter of {command} is not valid Unicode text "
        "(it contains a lone surrogate)"
    )


# Every JSON type (and a few Python-only ones a caller might pass) that is not a string.
NOT_STRINGS: dict[str, Any] = {
    "int": 1,
    "zero": 0,
    "float": 1.5,
    "nan": math.nan,
    "null": None,
    "true": True,
    "false": False,
    "list": [A],
    "empty list": [],
    "object": {"path": A},
    "nested": {"a": [1, {"b": None}]},
    "bytes": A.encode(),
    "tuple": (A,),
}
NOT_INTS: dict[str, Any] = {
    "string": "1",
    "digits": "0",
    "float": 1.0,
    "nan": math.nan,
    "infinity": math.inf,
    "null": None,
    "true": True,
    "false": False,
    "list": [1],
    "object": {"line": 1},
}


def fixed_cases() -> list[tuple[str, Any, str]]:
    """(label, input, the exact refusal) for everything refused before any store access."""
    cases: list[tuple[str, Any, str]] = []
    for label, value in {
        "null": None,
        "string": "view /memories",
        "int": 3,
        "float": 1.5,
        "true": True,
        "list": [VALID["view"]],
        "empty list": [],
        "bytes": b'{"command": "view"}',
        "tuple": ("view", A),
    }.items():
        cases.append((f"input is {label}", value, NOT_OBJECT))
    for label, command, shown in [
        ("missing", None, "None"),
        ("empty", "", "''"),
        ("upper case", "VIEW", "'VIEW'"),
        ("title case", "View", "'View'"),
        ("leading space", " view", "' view'"),
        ("trailing space", "view ", "'view '"),
        ("trailing NUL", "view\x00", "'view\\x00'"),
        ("trailing newline", "create\n", "'create\\n'"),
        ("hyphen", "str-replace", "'str-replace'"),
        ("SDK method", "clear_all_memory", "'clear_all_memory'"),
        ("dunder", "__class__", "'__class__'"),
        ("other tool's", "undo_edit", "'undo_edit'"),
        ("int", 0, "0"),
        ("float", 1.5, "1.5"),
        ("bool", True, "True"),
        ("list", ["view"], "['view']"),
        ("object", {"command": "view"}, "{'command': 'view'}"),
        ("NUL escaped in the message", "\x00", "'\\x00'"),
    ]:
        data = {"path": A} if command is None else {"command": command, "path": A}
        cases.append((f"command {label}", data, unknown(shown)))
    cases.append(("no fields at all", {}, unknown("None")))
    for command, valid in VALID.items():
        for name in valid:
            if name == "command":
                continue
            partial = {k: v for k, v in valid.items() if k != name}
            cases.append((f"{command} without {name}", partial, needs(command, name)))
            bad_values = NOT_INTS if name in INT_FIELDS else NOT_STRINGS
            for label, value in bad_values.items():
                data = {**valid, name: value}
                cases.append((f"{command} {name} {label}", data, mistyped(command, name)))
            if name not in INT_FIELDS and not name.endswith("path"):
                data = {**valid, name: "ok \ud800 ok"}
                cases.append((f"{command} {name} lone surrogate", data, surrogate(command, name)))
    for label, view_range in {
        "one number": [1],
        "three numbers": [1, 2, 3],
        "a string": "1,2",
        "a range string": "1-2",
        "an int": 12,
        "a float": 1.5,
        "true": True,
        "an object": {"start": 1, "end": 2},
        "floats": [1.0, 2.0],
        "a float end": [1, 2.5],
        "strings": ["1", "2"],
        "a null start": [None, 1],
        "bool start": [True, 2],
        "bool end": [1, False],
        "nested lists": [[1], [2]],
        "a nested end": [1, [2]],
        "nan": [math.nan, 1],
        "a tuple": (1, 2),
        "100,000 numbers": list(range(100_000)),
    }.items():
        data = {**VALID["view"], "view_range": view_range}
        cases.append((f"view_range {label}", data, RANGE))
    # A lone surrogate in a path: refused by gitmem.paths in its words.
    for command, name in [("view", "path"), ("create", "path"), ("rename", "new_path")]:
        data = {**VALID[command], name: "/memories/\ud800"}
        message = (
            "Error: The path /memories/\\ud800 is not allowed: it contains a lone surrogate "
            "(not valid Unicode text)"
        )
        cases.append((f"{command} {name} lone surrogate", data, message))
    return cases


# Refused after reading the store: limits and the contract's own refusals, with huge values.
BIG = "x" * (1024 * 1024 + 1)
STORE_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    (
        "create 1 MiB + 1 byte",
        {"command": "create", "path": "/memories/big.md", "file_text": BIG},
        "Error: refused to write /memories/big.md: it would be 1,048,577 bytes, 1 byte over the "
        "file size limit of 1 MiB (max_file_bytes = 1,048,576). Nothing was written; keep memory "
        "files small, e.g. split the content into several files.",
    ),
    (
        "insert_line 10**30",
        {"command": "insert", "path": A, "insert_line": 10**30, "insert_text": "x"},
        f"Error: Invalid `insert_line` parameter: {10**30}. It should be within the range of "
        "lines of the file: [0, 3]",
    ),
    (
        "insert_line -10**30",
        {"command": "insert", "path": A, "insert_line": -(10**30), "insert_text": "x"},
        f"Error: Invalid `insert_line` parameter: {-(10**30)}. It should be within the range of "
        "lines of the file: [0, 3]",
    ),
    (
        "create with overwrite: true ignored",
        {"command": "create", "path": A, "file_text": "pwned", "overwrite": True},
        f"Error: File {A} already exists",
    ),
    (
        "rename onto an existing file with force: true ignored",
        {"command": "rename", "old_path": A, "new_path": "/memories/d/in.md", "force": True},
        "Error: The destination /memories/d/in.md already exists",
    ),
    (
        "str_replace with a 5 MB old_str: echoed cut, with a marker",
        {"command": "str_replace", "path": A, "old_str": "y" * 5_000_000, "new_str": ""},
        f"No replacement was performed, old_str `{'y' * 2_000}… [4,998,000 more characters not "
        f"shown]` did not appear verbatim in {A}.",
    ),
    (
        "str_replace with an old_str just at the echo bound: echoed whole, as the reference does",
        {"command": "str_replace", "path": A, "old_str": "y" * 2_000, "new_str": ""},
        f"No replacement was performed, old_str `{'y' * 2_000}` did not appear verbatim in {A}.",
    ),
    (
        "str_replace with an empty old_str: every position listed, as the reference does",
        {"command": "str_replace", "path": A, "old_str": "", "new_str": "z" * 3_000},
        "No replacement was performed. Multiple occurrences of old_str `` in lines: "
        + ", ".join(["1"] * 4 + ["2"] * 4 + ["3"] * 6 + ["4"])
        + ". Please ensure it is unique",
    ),
    (
        "insert_line of 4,000 digits: not echoed whole",
        {"command": "insert", "path": A, "insert_line": 10**4000, "insert_text": "x"},
        "Error: Invalid `insert_line` parameter: (an integer of 13,288 bits). It should be "
        "within the range of lines of the file: [0, 3]",
    ),
    (
        "a 10 MB path: echoed cut",
        {"command": "view", "path": "/memories/" + "p" * 10_000_000},
        f"Error: The path /memories/{'p' * 1_990}… [9,998,010 more characters not shown] is not "
        "allowed: it is longer than 1024 bytes",
    ),
    (
        "delete of the root with recursive: true",
        {"command": "delete", "path": "/memories", "recursive": True},
        "Error: Cannot delete the /memories directory itself",
    ),
]


def nested_deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


A_TEXT = "one\ntwo\nthree\n"
A_VIEW = (
    f"Here's the content of {A} with line numbers:\n"
    "     1\tone\n     2\ttwo\n     3\tthree\n     4\t"
)
# Accepted oddities: what they return (views move nothing).
ACCEPTED: list[tuple[str, dict[str, Any], str]] = [
    ("view_range null", {**VALID["view"], "view_range": None}, A_VIEW),
    ("view_range empty", {**VALID["view"], "view_range": []}, A_VIEW),
    (
        "view_range huge",
        {**VALID["view"], "view_range": [10**30, -(10**30)]},
        f"Here's the content of {A} with line numbers:\n",
    ),
    (
        "view_range reversed",
        {**VALID["view"], "view_range": [3, 1]},
        f"Here's the content of {A} with line numbers:\n",
    ),
    (
        "view_range negative",
        {**VALID["view"], "view_range": [-5, -1]},
        A_VIEW,
    ),
    ("an unknown field", {**VALID["view"], "extra": 1}, A_VIEW),
    ("a second path ignored", {**VALID["view"], "path2": "/etc/passwd"}, A_VIEW),
    ("a second command ignored", {**VALID["view"], "command2": "delete"}, A_VIEW),
    ("another command's fields", {**VALID["view"], "file_text": "x", "insert_line": 1}, A_VIEW),
    (
        "an unknown field nested 100,000 deep",
        {**VALID["view"], "extra": nested_deep(100_000)},
        A_VIEW,
    ),
    ("10,000 unknown fields", {**VALID["view"], **{f"k{i}": i for i in range(10_000)}}, A_VIEW),
]


# -- the harness ----------------------------------------------------------------------------------


@dataclass
class Counts:
    """What a test tried, for the report."""

    cases: int = 0
    refused: int = 0
    succeeded: int = 0
    failures: list[str] = field(default_factory=list)

    def report(self, name: str) -> None:
        body = {
            "cases": self.cases,
            "refused": self.refused,
            "succeeded": self.succeeded,
            "failures": len(self.failures),
        }
        print(f"\nhostile input ({name}):", json.dumps(body))
        target = os.environ.get("GITMEM_EVIDENCE_DIR")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            (Path(target) / f"hostile-{name}.json").write_text(json.dumps(body, indent=1) + "\n")


class Harness:
    def __init__(self, tool: gitmem.GitMemoryTool) -> None:
        self.tool = tool
        self.counts = Counts()

    @property
    def store(self) -> gitmem.MemoryStore:
        return self.tool.store

    def state(self) -> tuple[str | None, dict[str, str], list[str]]:
        return self.store.head(), self.store.files(), sorted(self.store.directories())

    def run(self, data: Any) -> str | ToolError:
        """Call the tool: a string or a ToolError, nothing else; a refusal moves nothing."""
        self.counts.cases += 1
        head = self.store.head_operation()
        try:
            result = self.tool.call(data)
        except ToolError as exc:
            self.counts.refused += 1
            assert isinstance(exc.content, str) and exc.content
            assert self.store.head_operation() == head, "a refused input moved the branch"
            return exc
        self.counts.succeeded += 1
        assert isinstance(result, str)
        after = self.store.head_operation()
        if isinstance(data, dict) and data.get("command") in WRITES:
            assert after is not None and after.parents == (() if head is None else (head.commit,))
        else:
            assert after == head, "a view moved the branch"
        return result

    def expect(self, label: str, data: Any, expected: str, *, refused: bool) -> None:
        before = self.state()
        try:
            got = self.run(data)
            if refused:
                assert isinstance(got, ToolError), f"accepted: {str(got)[:200]}"
                assert got.content == expected, f"{str(got.content)[:300]!r}"
                assert self.state() == before, "a refusal changed the memory"
            else:
                assert got == expected, f"{str(got)[:300]!r}"
        except AssertionError as exc:
            self.counts.failures.append(f"{label}: {exc}")


@pytest.fixture
def h(repo_path: Path, key: str, tmp_path: Path, fast_git: None) -> Harness:
    tool = gitmem.GitMemoryTool(repo_path, key=key, session="hostile", state_dir=tmp_path / "s")
    tool.call({"command": "create", "path": A, "file_text": A_TEXT})
    tool.call({"command": "create", "path": "/memories/d/in.md", "file_text": "in\n"})
    return Harness(tool)


# -- the fixed list -------------------------------------------------------------------------------


def test_fixed_list_of_malformed_inputs(h: Harness) -> None:
    cases = fixed_cases()
    for label, data, message in cases:
        h.expect(label, data, message, refused=True)
    for label, data, message in STORE_REFUSALS:
        h.expect(label, data, message, refused=True)
    for label, data, expected in ACCEPTED:
        h.expect(label, data, expected, refused=False)
    h.counts.report("fixed")
    assert h.counts.failures == []
    assert h.counts.cases == len(cases) + len(STORE_REFUSALS) + len(ACCEPTED) >= 230
    assert len(list(h.store.log())) == 2


def test_valid_inputs_still_work(h: Harness) -> None:
    """The fixed list's variations start from these: each is accepted as it stands."""
    for command, data in VALID.items():
        got = h.run(data)
        assert isinstance(got, str), (command, got)
    assert [op.command for op in h.store.log()][:5] == [
        "rename", "delete", "insert", "str_replace", "create",
    ]  # fmt: skip


def test_bounded_echo_of_a_hostile_command(h: Harness) -> None:
    """An unknown command is echoed shortened: a huge or deeply nested one never comes back whole
    (nor overflows the recursion limit while being described)."""
    for data in [
        {"command": "x" * 10_000_000},
        {"command": nested_deep(100_000)},
        {"command": {f"k{i}": i for i in range(100_000)}},
        # More digits than Python will turn into text (sys.int_info.str_digits_check_threshold).
        {"command": 7**6000},
    ]:
        got = h.run(data)
        assert isinstance(got, ToolError)
        assert isinstance(got.content, str)
        assert got.content.startswith("Error: Unknown command ")
        assert got.content.endswith(f"; use one of: {KNOWN}")
        assert len(got.content) < 200, len(got.content)


# -- str_replace on a large file: linear, outside the writer lock, bounded text -----------------

MANY_LINES = "x\n" * 400_000  # 800 KB of short lines: 400,000 matches of "x", 800,001 of ""


@pytest.fixture
def lock_log(h: Harness, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records when the writer lock is taken and when str_replace's search runs."""
    events: list[str] = []
    repo = h.store.repo
    real_lock = repo.write_lock
    real_find = textops.find_unique

    @contextlib.contextmanager
    def write_lock(timeout: float) -> Iterator[None]:
        with real_lock(timeout):
            events.append("lock")
            yield
            events.append("unlock")

    def find_unique(content: str, old: str) -> int:
        events.append("search")
        return real_find(content, old)

    monkeypatch.setattr(repo, "write_lock", write_lock)
    monkeypatch.setattr(gitmem.store, "find_unique", find_unique)
    return events


@pytest.mark.parametrize(
    ("old", "lines", "total"),
    [("x", "1, 2, 3", "400,000"), ("", "1, 1, 2", "800,001"), ("\n", "1, 2, 3", "400,000")],
)
def test_str_replace_on_many_matches_is_refused_without_the_lock(
    h: Harness, lock_log: list[str], old: str, lines: str, total: str
) -> None:
    h.store.create(parse("/memories/big.md"), MANY_LINES)
    lock_log.clear()
    got = h.run(
        {"command": "str_replace", "path": "/memories/big.md", "old_str": old, "new_str": ""}
    )
    assert isinstance(got, ToolError) and isinstance(got.content, str)
    assert got.content.startswith(
        f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {lines}, "
    )
    assert got.content.endswith(
        f", ... (the first 100 of {total} or more). Please ensure it is unique"
    )
    assert len(got.content) < 1_000
    # The search ran once, and no writer lock was taken for a refusal.
    assert lock_log == ["search"]


def test_str_replace_searches_before_the_lock(h: Harness, lock_log: list[str]) -> None:
    h.store.create(parse("/memories/big.md"), MANY_LINES + "needle\n")
    lock_log.clear()
    got = h.run(
        {"command": "str_replace", "path": "/memories/big.md", "old_str": "needle", "new_str": "N"}
    )
    assert isinstance(got, str) and "400001\tN" in got
    assert lock_log == ["search", "lock", "unlock"]
    assert h.store.read_text(parse("/memories/big.md")) == MANY_LINES + "N\n"


def test_str_replace_searches_again_when_the_file_changed_meanwhile(
    h: Harness, monkeypatch: pytest.MonkeyPatch, repo_path: Path, key: str, tmp_path: Path
) -> None:
    """Another writer changes the file between the search and the lock: the match is found
    again in the file the commit replaces, or refused if it is no longer unique."""
    other = gitmem.MemoryStore.open(repo_path, key, session="other", state_dir=tmp_path / "o")
    repo = h.store.repo
    real_lock = repo.write_lock
    interloper: list[str] = ["zero\none\ntwo\n", "two two\n"]

    @contextlib.contextmanager
    def write_lock(timeout: float) -> Iterator[None]:
        if interloper:
            other.create(parse(A), interloper.pop(0), overwrite=True)
        with real_lock(timeout):
            yield

    monkeypatch.setattr(repo, "write_lock", write_lock)
    got = h.tool.call({"command": "str_replace", "path": A, "old_str": "two", "new_str": "2"})
    assert h.store.read_text(parse(A)) == "zero\none\n2\n"
    assert "     3\t2" in got
    with pytest.raises(ToolError) as info:
        h.tool.call({"command": "str_replace", "path": A, "old_str": "2", "new_str": "two"})
    assert info.value.content == (
        "No replacement was performed, old_str `2` did not appear verbatim in /memories/a.md."
    )
    assert h.store.read_text(parse(A)) == "two two\n"


def test_echoes_are_bounded_in_exceptions_and_the_cli(repo_path: Path, key: str) -> None:
    huge = "/memories/" + "q" * 10_000_000
    with pytest.raises(gitmem.InvalidPath) as info:
        parse(huge)
    assert len(str(info.value)) < 2_200 and info.value.path == huge
    gitmem.MemoryStore.open(repo_path, key, create=True).create("/memories/a.md", "a\n")
    runner = CliRunner()
    env = {"GITMEM_KEY": key}
    for args in (
        ["view", huge],
        ["log", "x" * 1_000_000, "/memories/a", "y" * 1_000_000],
        ["expire", "--older-than", "9" * 5_000 + "d"],
        ["expire", "--older-than", "9" * 20 + "d"],
        ["expire", "--older-than", "z" * 1_000_000],
        ["log", "--until", "9" * 20 + "d"],
        ["log", "--until", "9" * 5_000 + "d"],
        ["log", "--until", "z" * 1_000_000],
        ["log", "--session", "s" * 1_000_000],
        ["log", "--command", "c" * 1_000_000],
        ["show", "HEAD~" + "9" * 5_000],
        ["show", "session:" + "s" * 1_000_000],
        ["restore", "--dry-run", "@{" + "1" * 1_000_000],
    ):
        result = runner.invoke(main, ["--repo", str(repo_path), *args], env=env)
        assert result.exit_code == 2, (args[0], result.output[-300:], result.exception)
        assert len(result.output) < 2_500, (args[0], len(result.output))
        assert result.output.startswith("gitmem: error: ")


# -- generated inputs -----------------------------------------------------------------------------

FIELDS = sorted({name for valid in VALID.values() for name in valid} | {"view_range"})
PATHS = [A, "/memories", "/memories/d", "/memories/d/in.md", "/memories/n.md", "/memories/d/x/y"]
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-3, 6)
    | st.floats()
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
by_field: dict[str, st.SearchStrategy[Any]] = {
    "command": st.sampled_from(sorted(VALID)) | st.text(max_size=12) | json_values,
    "path": st.sampled_from(PATHS) | json_values,
    "old_path": st.sampled_from(PATHS) | json_values,
    "new_path": st.sampled_from(PATHS) | json_values,
    "file_text": st.text(max_size=20) | json_values,
    "old_str": st.sampled_from(["one", "two", "\n", ""]) | st.text(max_size=6) | json_values,
    "new_str": st.text(max_size=6) | json_values,
    "insert_text": st.text(max_size=10) | json_values,
    "insert_line": st.integers(-2, 6) | st.integers() | json_values,
    "view_range": st.lists(st.integers(-3, 6), max_size=3) | json_values,
}
typed_field: dict[str, st.SearchStrategy[Any]] = {
    "path": st.sampled_from(PATHS),
    "old_path": st.sampled_from(PATHS),
    "new_path": st.sampled_from(PATHS),
    "file_text": st.text(max_size=20),
    "old_str": st.sampled_from(["one", "two", "\n", ""]) | st.text(max_size=4),
    "new_str": st.text(max_size=6),
    "insert_text": st.text(max_size=10),
    "insert_line": st.integers(-1, 5),
}
# Well-typed commands on paths that exist or not: these run, or are refused by the store.
typed = st.sampled_from(sorted(VALID)).flatmap(
    lambda command: st.fixed_dictionaries(
        {
            "command": st.just(command),
            **{name: typed_field[name] for name in VALID[command] if name != "command"},
        },
        optional={"view_range": st.lists(st.integers(-3, 6), min_size=2, max_size=2)}
        if command == "view"
        else {},
    )
)
inputs = st.one_of(
    typed,
    typed,  # twice: well-typed commands are the ones that reach the store
    # A well-typed command with fields dropped, replaced or added.
    st.builds(
        lambda base, drop, extra: {**{k: v for k, v in base.items() if k not in drop}, **extra},
        typed,
        st.sets(st.sampled_from(FIELDS), max_size=2),
        st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), json_values, max_size=3),
    ),
    # Any known field with any value.
    st.fixed_dictionaries(
        {"command": by_field["command"]},
        optional={name: by_field[name] for name in FIELDS if name != "command"},
    ),
    st.dictionaries(st.text(max_size=10), json_values, max_size=4),
    json_values,
)


def generated(h: Harness, examples: int, label: str) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(inputs)
    def check(data: Any) -> None:
        try:
            h.run(data)
        except AssertionError as exc:
            h.counts.failures.append(f"{data!r:.300}: {exc}")
            raise

    try:
        check()
    finally:
        h.counts.report(label)
    assert h.counts.failures == []
    assert h.counts.refused > 0 and h.counts.succeeded > 0
    report = h.store.verify()
    assert report.ok, report.problems


def test_generated_inputs(h: Harness) -> None:
    generated(h, 400, "generated")


@pytest.mark.slow
def test_generated_inputs_long(h: Harness) -> None:
    generated(h, int(os.environ.get("GITMEM_HOSTILE_EXAMPLES", "10000")), "generated-long")
