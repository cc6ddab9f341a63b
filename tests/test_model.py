"""A stateful model test: random command sequences against ``GitMemoryTool`` and a tiny model.

The model is a dict of path -> text plus a set of directories, with the memory tool's semantics
and strings written out here on their own (it imports nothing from gitmem that computes an
answer). After every command the tool's output (or error text) must equal the model's; every
successful write must be exactly one new commit on top of the previous head, labelled with its
command; views and refusals must leave the head where it was; and the store's files and
directories must equal the model's. A restore rule puts the store back to a random earlier
commit (``MemoryStore.restore``) and the model to the state it recorded there; every fifth
commit a fresh tool (no caches) replaces the old one on the same repository. ``verify`` must
pass at the end of every run.

Run the long variant with ``pytest -m slow -s tests/test_model.py``; ``GITMEM_MODEL_EXAMPLES``
and ``GITMEM_MODEL_STEPS`` override its size, and ``GITMEM_EVIDENCE_DIR`` makes each run write
its counts to ``model-default.json`` or ``model-long.json`` there.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

import gitmem

ROOT = "/memories"
# Few names, so that random commands keep colliding: creating over files and directories,
# renaming onto and into each other, hidden entries and node_modules left out of listings.
NAMES = ("a", "b.md", ".h", "node_modules")
DEPTH = 3
WIDTH = 6  # line numbers are right-aligned to this width, then a tab
DIR_SIZE = "4K"  # a directory's size in a listing: one 4 KiB block


def _all_paths() -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    layer: list[tuple[str, ...]] = [()]
    for _ in range(DEPTH):
        layer = [(*p, n) for p in layer for n in NAMES]
        out.extend(layer)
    # The root last: hypothesis favours the first element, and most commands refuse the root.
    return [*out, ()]


PATHS = _all_paths()


def show(parts: tuple[str, ...]) -> str:
    return ROOT + "".join("/" + p for p in parts)


# -- the model ----------------------------------------------------------------------------------


def human(size: int) -> str:
    """Sizes as the SDK's reference prints them: 0B, 512B, 5.5K, 1.2M."""
    if size == 0:
        return "0B"
    scale = 0
    while scale < 3 and size >= 1024 ** (scale + 1):
        scale += 1
    value = size / 1024**scale
    unit = "BKMG"[scale]
    return f"{int(value)}{unit}" if value == int(value) else f"{value:.1f}{unit}"


def numbered(lines: list[str], first: int) -> list[str]:
    return [f"{str(first + i).rjust(WIDTH)}\t{line}" for i, line in enumerate(lines)]


class Refused(Exception):
    """The model's answer is an error with this text."""


@dataclass
class Model:
    """The memory as a dict of files and a set of directories (the root is implicit)."""

    files: dict[tuple[str, ...], str] = field(default_factory=dict)
    dirs: set[tuple[str, ...]] = field(default_factory=set)

    def copy(self) -> Model:
        return Model(dict(self.files), set(self.dirs))

    def kind(self, p: tuple[str, ...]) -> str | None:
        if p == () or p in self.dirs:
            return "d"
        return "f" if p in self.files else None

    def file_above(self, p: tuple[str, ...]) -> tuple[str, ...] | None:
        """The highest proper ancestor of ``p`` that is a file, if any."""
        for i in range(1, len(p)):
            if p[:i] in self.files:
                return p[:i]
        return None

    def make_parents(self, p: tuple[str, ...]) -> None:
        for i in range(1, len(p)):
            self.dirs.add(p[:i])

    def under(self, p: tuple[str, ...]) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
        """Files and directories at or below ``p``."""
        files = [f for f in self.files if f[: len(p)] == p]
        dirs = [d for d in self.dirs if d[: len(p)] == p]
        return files, dirs

    # The commands. Each returns the success text or raises Refused; only writes that return
    # change the model.

    def view(self, shown: str, p: tuple[str, ...], view_range: list[int] | None) -> str:
        kind = self.kind(p)
        if kind is None:
            raise Refused(f"The path {shown} does not exist. Please provide a valid path.")
        if kind == "f":
            lines = self.files[p].split("\n")
            first = 1
            if view_range is not None:
                start = max(1, view_range[0]) - 1
                stop = len(lines) if view_range[1] == -1 else view_range[1]
                lines = lines[start:stop]
                first = start + 1
            head = f"Here's the content of {shown} with line numbers:"
            # An empty range still ends the header with a newline, as the reference does.
            return head + "\n" + "\n".join(numbered(lines, first))
        rows = [f"{DIR_SIZE}\t{shown}"]

        def walk(d: tuple[str, ...], level: int) -> None:
            entries = [*self.files, *self.dirs]
            children = {c[-1] for c in entries if len(c) == len(d) + 1 and c[: len(d)] == d}
            for name in sorted(children):
                if name.startswith(".") or name == "node_modules":
                    continue
                child = (*d, name)
                if child in self.dirs:
                    rows.append(f"{DIR_SIZE}\t{show(child)}/")
                    if level < 2:
                        walk(child, level + 1)
                else:
                    rows.append(f"{human(len(self.files[child].encode()))}\t{show(child)}")

        walk(p, 1)
        head = (
            f"Here're the files and directories up to 2 levels deep in {shown}, "
            "excluding hidden items and node_modules:"
        )
        return "\n".join([head, *rows])

    def create(self, p: tuple[str, ...], text: str) -> str:
        if self.kind(p) is not None:
            raise Refused(f"Error: File {show(p)} already exists")
        blocker = self.file_above(p)
        if blocker is not None:
            raise Refused(
                f"Error: Cannot create {show(p)}: {show(blocker)} is a file, not a directory"
            )
        self.make_parents(p)
        self.files[p] = text
        return f"File created successfully at: {show(p)}"

    def str_replace(self, p: tuple[str, ...], old: str, new: str) -> str:
        if self.kind(p) != "f":
            raise Refused(f"Error: The path {show(p)} does not exist. Please provide a valid path.")
        content = self.files[p]
        starts = [i for i in range(len(content) + 1) if content.startswith(old, i)]
        if not starts:
            raise Refused(
                f"No replacement was performed, old_str `{old}` did not appear verbatim in "
                f"{show(p)}."
            )
        # Non-overlapping occurrences decide; the error lists every (overlapping) start.
        disjoint, end = 0, -1
        for i in starts:
            if i >= end:
                disjoint, end = disjoint + 1, i + max(len(old), 1)
        if disjoint > 1:
            # safeguards.md: the lines of the first 100 occurrences, then how many there are at
            # least (str.count's non-overlapping ones, "" at every position).
            numbers = ", ".join(str(content[:i].count("\n") + 1) for i in starts[:100])
            if len(starts) > 100:
                numbers += f", ... (the first 100 of {max(101, content.count(old)):,} or more)"
            raise Refused(
                f"No replacement was performed. Multiple occurrences of old_str `{old}` in "
                f"lines: {numbers}. Please ensure it is unique"
            )
        at = starts[0]
        after = content[:at] + new + content[at + len(old) :]
        self.files[p] = after
        changed = content[:at].count("\n")
        lines = after.split("\n")
        lo, hi = max(0, changed - 2), min(len(lines), changed + 3)
        head = (
            "The memory file has been edited. Here is the snippet showing the change "
            "(with line numbers):"
        )
        return head + "\n" + "\n".join(numbered(lines[lo:hi], lo + 1))

    def insert(self, p: tuple[str, ...], line: int, text: str) -> str:
        if self.kind(p) != "f":
            raise Refused(f"Error: The path {show(p)} does not exist")
        lines = self.files[p].split("\n")
        if lines[-1] == "":
            lines = lines[:-1]
        if not 0 <= line <= len(lines):
            raise Refused(
                f"Error: Invalid `insert_line` parameter: {line}. It should be within the range "
                f"of lines of the file: [0, {len(lines)}]"
            )
        while text.endswith("\n"):
            text = text[:-1]
        joined = "\n".join([*lines[:line], text, *lines[line:]])
        self.files[p] = joined if joined.endswith("\n") else joined + "\n"
        return f"The file {show(p)} has been edited."

    def delete(self, p: tuple[str, ...]) -> str:
        if p == ():
            raise Refused("Error: Cannot delete the /memories directory itself")
        if self.kind(p) is None:
            raise Refused(f"Error: The path {show(p)} does not exist")
        files, dirs = self.under(p)
        for f in files:
            del self.files[f]
        self.dirs.difference_update(dirs)
        return f"Successfully deleted {show(p)}"

    def rename(self, old: tuple[str, ...], new: tuple[str, ...]) -> str:
        if old == ():
            raise Refused("Error: Cannot rename the /memories directory itself")
        if self.kind(new) is not None:
            raise Refused(f"Error: The destination {show(new)} already exists")
        if self.kind(old) is None:
            raise Refused(f"Error: The path {show(old)} does not exist")
        if new[: len(old)] == old:
            raise Refused(f"Error: Cannot move {show(old)} into itself")
        blocker = self.file_above(new)
        if blocker is not None:
            raise Refused(
                f"Error: Cannot rename to {show(new)}: {show(blocker)} is a file, not a directory"
            )
        files, dirs = self.under(old)
        moved_files = {new + f[len(old) :]: self.files.pop(f) for f in files}
        self.dirs.difference_update(dirs)
        self.dirs.update(new + d[len(old) :] for d in dirs)
        self.files.update(moved_files)
        self.make_parents(new)
        return f"Successfully renamed {show(old)} to {show(new)}"


# -- the machine --------------------------------------------------------------------------------


@dataclass
class Counts:
    """What the runs did, for the report."""

    runs: int = 0
    steps: int = 0
    mismatches: int = 0
    by_rule: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "steps": self.steps,
            "mismatches": self.mismatches,
            "by_rule": dict(sorted(self.by_rule.items())),
        }


COUNTS = Counts()
paths = st.sampled_from(PATHS)
# Small alphabets: lines, CR, non-ASCII (sizes are UTF-8 bytes) and repeats, so old_str often
# occurs several times, overlapping or not; nothing that could look like a credential.
texts = st.text(alphabet="ab é\r\n", max_size=24) | st.builds(
    lambda unit, times: unit * times, st.sampled_from(["a", "ab", "a\n", "\n"]), st.integers(1, 8)
)
short = st.text(alphabet="ab\n", max_size=3)
ranges = st.none() | st.lists(st.integers(-3, 9), min_size=2, max_size=2)


class MemoryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="gitmem-model-"))
        self.repo = self.tmp / "store.git"
        self.key = gitmem.generate_key()
        self.tool = self._open()
        self.model = Model()
        self.head: gitmem.Operation | None = None
        # Every commit with the memory it holds, oldest first (drawn by index: commit ids are
        # random, and draws must not depend on them for hypothesis to replay a run).
        self.history: list[tuple[str, Model]] = []
        COUNTS.runs += 1

    def _open(self) -> gitmem.GitMemoryTool:
        return gitmem.GitMemoryTool(
            self.repo, key=self.key, session="model", state_dir=self.tmp / "state"
        )

    def teardown(self) -> None:
        try:
            if self.head is not None:
                report = self.tool.store.verify()
                assert report.ok, report.problems
                assert report.commits == self.head.seq
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- checking -----------------------------------------------------------------------------

    def step(self, rule: str, data: dict[str, Any], expect: str | Refused) -> None:
        """Run ``data`` through the tool and compare everything with the model's answer."""
        COUNTS.steps += 1
        COUNTS.by_rule[f"{rule} {'refused' if isinstance(expect, Refused) else 'ok'}"] += 1
        try:
            try:
                got: str | Refused = self.tool.call(data)
            except ToolError as exc:
                assert isinstance(exc.content, str)
                got = Refused(exc.content)
            if isinstance(expect, Refused):
                assert isinstance(got, Refused), (data, got)
                assert str(got) == str(expect), data
            else:
                assert got == expect, data
            writes = data["command"] != "view" and not isinstance(expect, Refused)
            self.check_commit(data["command"] if writes else None)
        except AssertionError:
            COUNTS.mismatches += 1
            raise

    def check_commit(self, command: str | None) -> None:
        """One new commit for a write (``command``), none otherwise; then the tree."""
        now = self.tool.store.head_operation()
        if command is None:
            assert now == self.head
            return
        assert now is not None and now != self.head
        assert now.parents == (() if self.head is None else (self.head.commit,))
        assert now.seq == (1 if self.head is None else self.head.seq + 1)
        assert (now.command, now.session) == (command, "model")
        self.head = now
        self.history.append((now.commit, self.model.copy()))
        if now.seq % 5 == 0:
            # A fresh client, with no caches, must read the same memory and history.
            self.tool = self._open()
            assert self.tool.store.head_operation() == now
            COUNTS.by_rule["reopened"] += 1
        self.check_tree()

    def check_tree(self) -> None:
        store = self.tool.store
        assert store.files() == {show(p): t for p, t in self.model.files.items()}
        assert sorted(store.directories()) == sorted(show(d) for d in self.model.dirs)

    def answer(self, action: Any, *args: Any) -> str | Refused:
        try:
            result: str = action(*args)
            return result
        except Refused as exc:
            return exc

    # -- rules --------------------------------------------------------------------------------

    @initialize(data=st.data())
    def seed(self, data: st.DataObject) -> None:
        """Start from the empty memory's view, then a few creates, whatever rules are drawn."""
        self.step("view", {"command": "view", "path": ROOT}, self.model.view(ROOT, (), None))
        for _ in range(data.draw(st.integers(0, 6), "seed files")):
            p, text = self.fresh(data, "path"), data.draw(texts, "file_text")
            command = {"command": "create", "path": show(p), "file_text": text}
            self.step("create", command, self.answer(self.model.create, p, text))

    def pick(self, data: st.DataObject, kinds: str, label: str) -> tuple[str, ...]:
        """A path: mostly an existing one of ``kinds`` ('f', 'd'), else any from the pool."""
        existing = sorted(self.model.files) if "f" in kinds else []
        if "d" in kinds:
            existing += [*sorted(self.model.dirs), ()]
        # Hypothesis favours 0, so 0 is the common case here and in the choices below.
        if existing and data.draw(st.integers(0, 7), f"{label}: any?") < 7:
            return data.draw(st.sampled_from(existing), label)
        return data.draw(paths, label)

    def fresh(self, data: st.DataObject, label: str) -> tuple[str, ...]:
        """A path: mostly one or two new names below an existing directory, else any."""
        parents = [(), *sorted(self.model.dirs)]
        if data.draw(st.integers(0, 7), f"{label}: any?") < 7:
            parent = data.draw(st.sampled_from(parents), f"{label}: parent")
            room = min(2, DEPTH - len(parent))
            if room > 0:
                more = data.draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=room), label)
                return (*parent, *more)
        return data.draw(paths, label)

    @rule(data=st.data(), spelling=st.sampled_from(["", "/"]), view_range=ranges)
    def view(self, data: st.DataObject, spelling: str, view_range: list[int] | None) -> None:
        p = self.pick(data, "fd", "path")
        shown = show(p) + (spelling if p == () else "")
        command: dict[str, Any] = {"command": "view", "path": shown}
        if view_range is not None:
            command["view_range"] = view_range
        file_range = view_range if self.model.kind(p) == "f" else None
        self.step("view", command, self.answer(self.model.view, shown, p, file_range))

    @rule(data=st.data(), text=texts)
    def create(self, data: st.DataObject, text: str) -> None:
        p = self.fresh(data, "path")
        command = {"command": "create", "path": show(p), "file_text": text}
        self.step("create", command, self.answer(self.model.create, p, text))

    @rule(data=st.data(), new=short)
    def str_replace(self, data: st.DataObject, new: str) -> None:
        p = self.pick(data, "f", "path")
        content = self.model.files.get(p)
        if content is not None and data.draw(st.integers(0, 3), "made up?") < 3:
            start = data.draw(st.integers(0, len(content)), "start")
            old = content[start : start + data.draw(st.integers(0, 4), "length")]
        else:
            old = data.draw(short, "old_str")
        command = {"command": "str_replace", "path": show(p), "old_str": old, "new_str": new}
        self.step("str_replace", command, self.answer(self.model.str_replace, p, old, new))

    @rule(data=st.data(), text=texts)
    def insert(self, data: st.DataObject, text: str) -> None:
        p = self.pick(data, "f", "path")
        content = self.model.files.get(p)
        # Around the file's line count, so that both ends and one past each are tried.
        n = 6 if content is None else content.count("\n") + 1
        line = data.draw(st.integers(-1, n + 1), "insert_line")
        command = {"command": "insert", "path": show(p), "insert_line": line, "insert_text": text}
        self.step("insert", command, self.answer(self.model.insert, p, line, text))

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        p = self.pick(data, "fd", "path")
        command = {"command": "delete", "path": show(p)}
        self.step("delete", command, self.answer(self.model.delete, p))

    @rule(data=st.data())
    def rename(self, data: st.DataObject) -> None:
        old, new = self.pick(data, "fd", "old_path"), self.fresh(data, "new_path")
        command = {"command": "rename", "old_path": show(old), "new_path": show(new)}
        self.step("rename", command, self.answer(self.model.rename, old, new))

    @precondition(lambda self: bool(self.history))
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        COUNTS.steps += 1
        COUNTS.by_rule["restore"] += 1
        target, memory = self.history[data.draw(st.integers(0, len(self.history) - 1), "index")]
        already = memory == self.model
        op = self.tool.store.restore(target)
        self.model = memory.copy()
        if already:  # no empty commit: the memory matches the target already
            assert op is None
            self.check_commit(None)
            return
        self.check_commit("restore")
        assert op == self.head


# -- running it ---------------------------------------------------------------------------------


def run_model(label: str, max_examples: int, steps: int) -> Counts:
    before = Counts(COUNTS.runs, COUNTS.steps, COUNTS.mismatches, Counter(COUNTS.by_rule))
    try:
        run_state_machine_as_test(
            MemoryMachine,
            settings=settings(
                max_examples=max_examples,
                stateful_step_count=steps,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            ),
        )
    finally:
        done = Counts(
            COUNTS.runs - before.runs,
            COUNTS.steps - before.steps,
            COUNTS.mismatches - before.mismatches,
            COUNTS.by_rule - before.by_rule,
        )
        print("\nmodel test:", json.dumps(done.to_json()))
        target = os.environ.get("GITMEM_EVIDENCE_DIR")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            report = Path(target) / f"model-{label}.json"
            report.write_text(json.dumps(done.to_json(), indent=1) + "\n")
    return done


def test_model(fast_git: None) -> None:
    done = run_model("default", max_examples=40, steps=30)
    assert done.mismatches == 0
    assert done.steps >= 40 * 10


@pytest.mark.slow
def test_model_long(fast_git: None) -> None:
    examples = int(os.environ.get("GITMEM_MODEL_EXAMPLES", "400"))
    steps = int(os.environ.get("GITMEM_MODEL_STEPS", "60"))
    done = run_model("long", max_examples=examples, steps=steps)
    assert done.mismatches == 0


def test_model_is_not_vacuous() -> None:
    """The model disagrees with the store where the store is right and a naive model is not."""
    m = Model()
    m.create(("a", "b.md"), "x\ny\n")
    assert m.view("/memories", (), None) == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items and node_modules:\n4K\t/memories\n4K\t/memories/a/\n4B\t/memories/a/b.md"
    )
    m.delete(("a", "b.md"))
    assert m.kind(("a",)) == "d"  # an emptied directory stays
    m.create(("b.md",), "aaaa")
    with pytest.raises(Refused) as info:
        m.str_replace(("b.md",), "aa", "c")
    assert str(info.value) == (
        "No replacement was performed. Multiple occurrences of old_str `aa` in lines: 1, 1, 1. "
        "Please ensure it is unique"
    )
    # Overlapping occurrences count once, as str.count has it: "aaa" holds "aa" once.
    m.create(("c",), "aaa")
    assert m.str_replace(("c",), "aa", "b").endswith("     1\tba")
    m.create(("n",), "aaa")
    assert m.str_replace(("n",), "aaa", "") == (
        "The memory file has been edited. Here is the snippet showing the change (with line "
        "numbers):\n     1\t"
    )
    assert m.insert(("n",), 0, "z\n\n") == "The file /memories/n has been edited."
    assert m.files[("n",)] == "z\n"
    with pytest.raises(Refused) as info:
        m.rename(("a",), ("a", "a"))
    assert str(info.value) == "Error: Cannot move /memories/a into itself"


@pytest.mark.parametrize(("text", "old"), [("a" * 150, ""), ("ab\n" * 120, "b"), ("a" * 5, "")])
def test_the_model_lists_multiple_matches_as_the_tool_does(
    tmp_path: Path, key: str, text: str, old: str
) -> None:
    # Found by test_model_long: past 100 occurrences the tool lists the first 100 and a count
    # (safeguards.md); an empty old_str occurs at every position of a non-empty file.
    tool = gitmem.GitMemoryTool(tmp_path / "store.git", key=key, state_dir=tmp_path / "state")
    tool.call({"command": "create", "path": "/memories/a", "file_text": text})
    model = Model()
    model.create(("a",), text)
    with pytest.raises(Refused) as expected:
        model.str_replace(("a",), old, "x")
    with pytest.raises(ToolError) as got:
        tool.call({"command": "str_replace", "path": "/memories/a", "old_str": old, "new_str": "x"})
    assert got.value.content == str(expected.value)
