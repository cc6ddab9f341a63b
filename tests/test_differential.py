"""Differential test: generated command sequences on the SDK's reference backend and on gitmem.

Both tools get the same raw input dicts through ``call``. After every command the outputs must
agree: equal text on success; on a reference error, a ``ToolError`` from gitmem with the
contract's text where the contract has one. After every sequence the two trees (files, contents,
directories) must be equal, and gitmem must have made exactly one commit per successful mutation.

Known, deliberate differences are normalized in :func:`expected_error` and
:func:`normalize_listing`, each with its reason; known reference flaws gitmem must not copy are
either not generated or undone in the harness (:func:`run_reference`).

``GITMEM_DIFF_REPORT=path`` makes the test write its counts (sequences, commands, mismatches)
as JSON; they are printed too (visible with ``-s``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gitmem
from gitmem.paths import parse

# -- generation ------------------------------------------------------------------------------

# A small alphabet so that paths collide: the same file is created, edited, moved and deleted
# within one sequence, and directories nest. ".h" is hidden, "node_modules" is left out of
# listings; both must still behave as files and directories otherwise.
NAMES = ["a", "b", "c.md", ".h", "node_modules"]
TEXT_PIECES = ["a", "b", "ab", "x y", "", "\r", "é", "\t", "a\nb"]
NEEDLES = ["a", "b", "ab", "a\n", "\n", "\r\n", "zz", "é", "", "x y\n"]


# Strategies are built once: building them per step (sampled_from over the live tree, flatmap)
# cost more than running the commands. Choices over the live tree are drawn as indices.
STYLES = st.sampled_from(["plain"] * 6 + ["trailing", "double"])
DEPTHS = st.sampled_from([1, 1, 2, 2, 3])
NAME = st.sampled_from(NAMES)
ROOTS = st.sampled_from(["/memories", "/memories/", "/memories//"])
NEEDLE = st.sampled_from(NEEDLES)
TEXT_PIECE = st.sampled_from(TEXT_PIECES) | st.integers(0, 99).map(lambda n: f"w{n}")
COMMAND = st.sampled_from(["view", "create", "str_replace", "insert", "delete", "rename"])


@functools.cache
def below(n: int) -> st.SearchStrategy[int]:
    """Indices ``0 .. n-1``."""
    return st.integers(0, n - 1)


def spell(data: st.DataObject, parts: list[str]) -> str:
    """A path to ``parts``, sometimes spelled with a trailing or doubled slash."""
    canonical = "/memories/" + "/".join(parts)
    style = data.draw(STYLES)
    if style == "trailing":
        return canonical + "/"
    if style == "double":
        doubled = data.draw(below(len(parts)))
        return "/memories" + "".join(
            ("//" if i == doubled else "/") + part for i, part in enumerate(parts)
        )
    return canonical


def fresh_path(data: st.DataObject) -> str:
    """A path from the alphabet; one in ten is the root, in one of its spellings.

    ``/memories/.`` and ``/memories/a/..`` are not generated: gitmem refuses every ``.`` and
    ``..`` component (tests/test_paths.py), the reference resolves them.
    """
    if data.draw(below(10)) == 0:
        return data.draw(ROOTS)
    return spell(data, [data.draw(NAME) for _ in range(data.draw(DEPTHS))])


@st.composite
def texts(draw: st.DrawFn) -> str:
    """Short multi-line text, CRLF or LF, with repeated pieces and some distinct words."""
    lines = draw(st.lists(TEXT_PIECE, max_size=6))
    sep = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    return sep.join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


TEXTS = texts()
NEW_STR = NEEDLE | TEXTS
view_ranges = st.one_of(
    st.none(),
    st.tuples(st.integers(-3, 9), st.integers(-3, 9)).map(list),
    st.tuples(st.integers(-1, 9), st.just(-1)).map(list),
)


class Where:
    """Paths over the tree as it is now: an existing file or directory, a new name in an
    existing directory, or a fresh path from the alphabet."""

    def __init__(self, data: st.DataObject, files: dict[str, str], dirs: list[str]) -> None:
        self.data = data
        self.files = sorted(files)
        self.dirs = dirs

    def __call__(self, *kinds: str) -> str:
        """A path of one of ``kinds`` (repeat a kind to weight it); empty kinds drop out."""
        usable = [k for k in kinds if (k != "file" or self.files) and (k != "dir" or self.dirs)]
        kind = usable[self.data.draw(below(len(usable)))]
        if kind == "fresh":
            return fresh_path(self.data)
        if kind == "child":
            parents = ["/memories", *self.dirs]
            parent = parents[self.data.draw(below(len(parents)))]
            return spell(self.data, [*parent.split("/")[2:], self.data.draw(NAME)])
        pool = self.files if kind == "file" else self.dirs
        return spell(self.data, pool[self.data.draw(below(len(pool)))].split("/")[2:])


def draw_needle(data: st.DataObject, content: str | None) -> str:
    """An ``old_str``: a fixed one (absent, repeated, empty) or a piece of the file, with
    lines that occur once weighted up so that replacements often succeed."""
    if not content:
        return data.draw(NEEDLE)
    unique = [line for line in content.split("\n") if line and content.count(line) == 1]
    choice = data.draw(below(4 if unique else 2))
    if choice == 0:
        return data.draw(NEEDLE)
    if choice == 1:
        start = data.draw(below(len(content)))
        return content[start : start + 1 + data.draw(below(len(content) - start))]
    return unique[data.draw(below(len(unique)))]


def draw_command(data: st.DataObject, files: dict[str, str], dirs: list[str]) -> dict[str, Any]:
    """One command, drawn against the tree as it is now so that most commands meet it."""
    where = Where(data, files, dirs)
    command = data.draw(COMMAND)
    if command == "rename":
        old_path = where("file", "file", "dir", "fresh")
        return {
            "command": command,
            "old_path": old_path,
            "new_path": where("fresh", "child", "child", "file", "dir"),
        }
    if command == "create":
        path = where("fresh", "child", "child", "file")
        return {"command": command, "path": path, "file_text": data.draw(TEXTS)}
    if command in ("str_replace", "insert"):
        path = where("file", "file", "file", "dir", "fresh")
    else:
        path = where("file", "dir", "fresh")
    content = files.get(str(parse(path)))
    if command == "view":
        out: dict[str, Any] = {"command": command, "path": path}
        view_range = data.draw(view_ranges)
        if view_range is not None:
            out["view_range"] = view_range
        return out
    if command == "str_replace":
        old_str = draw_needle(data, content)
        return {"command": command, "path": path, "old_str": old_str, "new_str": data.draw(NEW_STR)}
    if command == "insert":
        n_lines = 0 if content is None else len(content.split("\n"))
        return {
            "command": command,
            "path": path,
            "insert_line": data.draw(st.integers(-2, n_lines + 1)),
            "insert_text": data.draw(TEXTS),
        }
    return {"command": command, "path": path}


# -- expectations ------------------------------------------------------------------------------

# The contract table wins where the reference words an error differently: every contract error
# except view's carries an "Error: " prefix, and the reference's "is not a file." and insert
# range message are replaced (docs/memory-tool.md, "Where the SDK's ... this table wins").
_ERROR_MAP: dict[str, list[tuple[str, str]]] = {
    "view": [
        (r"The path (.*) does not exist\. Please provide a valid path\.", "{0}"),
        (r"File (.*) exceeds maximum line limit of 999,999 lines\.", "{0}"),
    ],
    "create": [(r"File (.*) already exists", "Error: {0}")],
    "str_replace": [
        (
            r"The path (.*) (does not exist\. Please provide a valid path\.|is not a file\.)",
            "Error: The path {1} does not exist. Please provide a valid path.",
        ),
        (r"No replacement was performed.*", "{0}"),
    ],
    "insert": [
        (
            r"The path (.*) (does not exist\. Please provide a valid path\.|is not a file\.)",
            "Error: The path {1} does not exist",
        ),
        (
            r"Invalid `insert_line` parameter: (-?\d+)\. It should be within the range "
            r"\[0, (\d+)\]\.",
            "Error: Invalid `insert_line` parameter: {1}. It should be within the range of "
            "lines of the file: [0, {2}]",
        ),
    ],
    "delete": [
        (r"The path (.*) does not exist", "Error: {0}"),
        # Not in the contract table: gitmem keeps the reference's words with the prefix.
        (r"Cannot delete the /memories directory itself", "Error: {0}"),
    ],
    "rename": [
        (r"The destination (.*) already exists", "Error: {0}"),
        (r"The path (.*) does not exist", "Error: {0}"),
        (r"Cannot rename the /memories directory itself", "Error: {0}"),
    ],
}


def expected_error(command: str, reference_text: str) -> str:
    """The text gitmem must raise where the reference raised ``reference_text``."""
    for pattern, template in _ERROR_MAP[command]:
        match = re.fullmatch(pattern, reference_text, flags=re.DOTALL)
        if match:
            return template.format(match.group(0), *match.groups())
    raise AssertionError(f"unclassified reference error for {command}: {reference_text!r}")


def _scratch_dir() -> str | None:
    """Where generated stores live: tmpfs when there is one.

    Creating and removing hundreds of small repositories is dominated by filesystem metadata
    work; on tmpfs the default run takes a fraction of the time it takes on a journaled disk.
    """
    explicit = os.environ.get("GITMEM_DIFF_TMP")
    if explicit:
        return explicit
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


SCRATCH = _scratch_dir()


def _probe_dir_size() -> int:
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        os.mkdir(os.path.join(tmp, "d"))
        return os.stat(os.path.join(tmp, "d")).st_size


# The reference prints a directory's st_size; gitmem prints one 4 KiB block, which is what ext4
# reports for the small directories generated here. Elsewhere (tmpfs, where SCRATCH usually is;
# btrfs) the reference's directory sizes are replaced by gitmem's before comparing; the exact
# sizes are asserted in tests/test_contract.py.
NATIVE_DIR_SIZE = _probe_dir_size() == 4096
_ROW = re.compile(r"([^\t]+)\t(.*)", flags=re.DOTALL)


def normalize_listing(reference_out: str, display: str, canonical: str) -> str:
    """The reference's directory listing as gitmem must print it.

    Three deliberate differences: the header adds "and node_modules" and such entries (with
    everything below them) are left out (the contract table); entries are printed under the
    canonical path, where the reference glues the caller's spelling to the entry and prints
    ``/memories//a`` for ``view /memories/``; directory sizes as explained above.
    """
    header, *rows = reference_out.split("\n")
    assert header.endswith(", excluding hidden items:"), header
    out = [header[: -len(":")] + " and node_modules:"]
    for index, row in enumerate(rows):
        match = _ROW.fullmatch(row)
        assert match, row
        size, shown = match.groups()
        if index == 0:
            assert shown == display
            out.append(f"{size if NATIVE_DIR_SIZE else '4K'}\t{display}")
            continue
        assert shown.startswith(display + "/"), (shown, display)
        relative = shown[len(display) + 1 :]
        if "node_modules" in relative.rstrip("/").split("/"):
            continue
        is_dir = relative.endswith("/")
        if is_dir and not NATIVE_DIR_SIZE:
            size = "4K"
        out.append(f"{size}\t{canonical}/{relative}")
    return "\n".join(out)


# One key for every generated store: key generation is not what this test exercises.
KEY = gitmem.generate_key()


# -- running -----------------------------------------------------------------------------------


@dataclass
class Counts:
    """What the differential test did, for the report."""

    sequences: int = 0
    commands: int = 0
    reference_errors: int = 0
    successes: int = 0
    mismatches: int = 0
    by_command: dict[str, dict[str, int]] = field(default_factory=dict)


def reference_tree(root: Path) -> tuple[dict[str, str], list[str]]:
    files: dict[str, str] = {}
    dirs: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            dirs.append("/memories" + str(Path(dirpath, name))[len(str(root)) :])
        for name in filenames:
            path = Path(dirpath, name)
            files["/memories" + str(path)[len(str(root)) :]] = path.read_bytes().decode("utf-8")
    return files, sorted(dirs)


def _dirs_under(root: Path) -> set[Path]:
    return {Path(d, n) for d, names, _ in os.walk(root) for n in names}


def run_reference(tool: BetaLocalFilesystemMemoryTool, data: dict[str, Any]) -> str | Exception:
    """Run ``data`` on the reference, undoing what a failed call leaves behind.

    The reference makes the destination's parents before it finds that a rename cannot happen
    (missing source, a move into itself, a file in the way) and leaves them; gitmem writes
    nothing for a refused command, so directories a failed call made are removed here.
    """
    root = tool.memory_root
    before = _dirs_under(root)
    try:
        out = tool.call(data)
    except Exception as exc:  # the reference lets OSErrors escape for some refusals
        for leftover in sorted(_dirs_under(root) - before, key=lambda p: -len(p.parts)):
            if leftover.exists():
                shutil.rmtree(leftover)
        return exc
    assert isinstance(out, str)
    return out


def check_one(
    reference: BetaLocalFilesystemMemoryTool,
    tool: gitmem.GitMemoryTool,
    data: dict[str, Any],
    counts: Counts,
) -> bool:
    """Run one command on both; True when it was a successful mutation."""
    command: str = data["command"]
    counts.commands += 1
    tally = counts.by_command.setdefault(command, {"run": 0, "ok": 0})
    tally["run"] += 1
    expected = run_reference(reference, data)
    try:
        actual: str | ToolError = tool.call(data)
    except ToolError as exc:
        actual = exc
    try:
        if isinstance(expected, Exception):
            counts.reference_errors += 1
            assert isinstance(actual, ToolError), f"gitmem succeeded: {actual!r}"
            # A refusal must be a deliberate one, not the catch-all for a crash in gitmem.
            assert "failed unexpectedly" not in str(actual.content), actual.content
            if isinstance(expected, ToolError):
                assert actual.content == expected_error(command, str(expected.content))
            return False
        counts.successes += 1
        tally["ok"] += 1
        assert isinstance(actual, str), f"gitmem refused: {actual.content!r}"
        if command == "view" and expected.startswith("Here're the files"):
            expected = normalize_listing(expected, data["path"], str(parse(data["path"])))
        assert actual == expected
    except AssertionError:
        counts.mismatches += 1
        raise
    return command != "view"


def run_sequence(data: st.DataObject, counts: Counts) -> None:
    """Draw and run one sequence of 7 to 25 commands, then compare the final trees."""
    counts.sequences += 1
    with tempfile.TemporaryDirectory(prefix="gitmem-diff-", dir=SCRATCH) as tmp:
        base = Path(tmp)
        reference = BetaLocalFilesystemMemoryTool(str(base / "ref"))
        tool = gitmem.GitMemoryTool(
            base / "store.git", key=KEY, session="diff", state_dir=base / "state"
        )
        # A few creates first, so that most later commands meet existing files.
        seeds = data.draw(st.integers(1, 4))
        length = seeds + data.draw(st.integers(6, 21))
        mutations = 0
        for step in range(length):
            files, dirs = reference_tree(reference.memory_root)
            if step < seeds:
                path = fresh_path(data)
                command = {"command": "create", "path": path, "file_text": data.draw(TEXTS)}
            else:
                command = draw_command(data, files, dirs)
            try:
                mutations += check_one(reference, tool, command, counts)
            except AssertionError as exc:
                raise AssertionError(f"step {step}: {command!r}: {exc}") from None
        files, dirs = reference_tree(reference.memory_root)
        head = tool.store.head_operation()
        try:
            assert tool.store.files() == files
            assert tool.store.directories() == dirs
            # One commit per successful mutation, none for views and refusals.
            assert (0 if head is None else head.seq) == mutations
        except AssertionError:
            counts.mismatches += 1
            raise


def report(counts: Counts) -> None:
    body = {
        "sequences": counts.sequences,
        "commands": counts.commands,
        "successes": counts.successes,
        "reference_errors": counts.reference_errors,
        "mismatches": counts.mismatches,
        "by_command": dict(sorted(counts.by_command.items())),
    }
    print("differential:", json.dumps(body))
    target = os.environ.get("GITMEM_DIFF_REPORT")
    if target:
        Path(target).write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")


def _differential(max_examples: int) -> None:
    counts = Counts()

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.data())
    def check(data: st.DataObject) -> None:
        run_sequence(data, counts)

    try:
        check()
    finally:
        report(counts)
    assert counts.mismatches == 0
    assert counts.commands > max_examples * 5


def test_differential(fast_git: None) -> None:
    _differential(150)


@pytest.mark.slow
def test_differential_long(fast_git: None) -> None:
    _differential(3000)


# -- the harness itself ----------------------------------------------------------------------


def test_expected_error_translations() -> None:
    assert expected_error("insert", "The path /memories/d is not a file.") == (
        "Error: The path /memories/d does not exist"
    )
    assert expected_error(
        "insert", "Invalid `insert_line` parameter: -1. It should be within the range [0, 2]."
    ) == (
        "Error: Invalid `insert_line` parameter: -1. It should be within the range of lines of "
        "the file: [0, 2]"
    )
    assert expected_error("str_replace", "The path /memories/d is not a file.") == (
        "Error: The path /memories/d does not exist. Please provide a valid path."
    )
    assert expected_error("rename", "The path /memories/a does not exist") == (
        "Error: The path /memories/a does not exist"
    )
    with pytest.raises(AssertionError):
        expected_error("create", "something new")


def test_normalize_listing() -> None:
    out = (
        "Here're the files and directories up to 2 levels deep in /memories/, excluding hidden "
        "items:\n4K\t/memories/\n4K\t/memories//a/\n12B\t/memories//a/f\n"
        "4K\t/memories//node_modules/\n1B\t/memories//node_modules/x"
    )
    size = "4K"
    assert normalize_listing(out, "/memories/", "/memories") == (
        "Here're the files and directories up to 2 levels deep in /memories/, excluding hidden "
        f"items and node_modules:\n{size}\t/memories/\n{size}\t/memories/a/\n12B\t/memories/a/f"
    )


def test_reference_flaws_are_real(tmp_path: Path) -> None:
    """The reference's flaws that the harness undoes or that gitmem refuses, shown on it.

    If a future SDK fixes one, this fails, and the matching workaround can go. (The design brief
    also lists root aliases such as ``/memories/`` wiping the store on delete; the SDK pinned
    here refuses them as gitmem does, so the generator includes them.)
    """
    ref = BetaLocalFilesystemMemoryTool(str(tmp_path / "ref"))
    with pytest.raises(ToolError):
        ref.call({"command": "rename", "old_path": "/memories/nope", "new_path": "/memories/p/q"})
    assert (ref.memory_root / "p").is_dir()
    ref.call({"command": "create", "path": "/memoriesX/a", "file_text": "x"})
    assert (ref.memory_root / "X" / "a").is_file()
    for spelling in ("/memories/", "/memories//", "/memories/.", "/memories/a/.."):
        with pytest.raises(ToolError, match="Cannot delete the /memories directory itself"):
            ref.call({"command": "delete", "path": spelling})
