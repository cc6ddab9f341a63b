"""docs/compatibility.md tells the truth: each row's example on the SDK's reference backend and
on gitmem, with both columns asserted. If an SDK release changes a row, this fails."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

import gitmem
from gitmem import GitMemoryTool, MemoryStore
from gitmem.history import export

DOC = (Path(__file__).parent.parent / "docs" / "compatibility.md").read_text()


class Both:
    """The reference and gitmem side by side, each on its own empty memory."""

    def __init__(self, root: Path) -> None:
        self.ref = BetaLocalFilesystemMemoryTool(str(root / "ref"))
        self.key = gitmem.generate_key()
        self.gm = GitMemoryTool(root / "gm.git", key=self.key, session="compat")
        self.root = self.ref.memory_root

    def setup(self, *calls: dict[str, Any]) -> None:
        for data in calls:
            self.ref.call(data)
            self.gm.call(data)

    def run(self, data: dict[str, Any]) -> tuple[str, str]:
        """Each backend's result text, or ``"raise <Type>: <text>"`` for an exception."""
        out = []
        for tool in (self.ref, self.gm):
            try:
                result = tool.call(data)
                assert isinstance(result, str)
                out.append(result)
            except Exception as exc:
                out.append(f"raise {type(exc).__name__}: {exc}")
        return out[0], out[1]

    def commits(self) -> int:
        return sum(1 for _ in MemoryStore.open(self.gm.store.repo.path, self.key).log())


@pytest.fixture
def both(tmp_path: Path) -> Both:
    return Both(tmp_path)


def row(number: int) -> str:
    """The text of row ``number`` of the table."""
    match = re.search(rf"^\| {number} \|.*$", DOC, flags=re.MULTILINE)
    assert match, number
    return match.group(0)


def create(path: str, text: str = "x\n") -> dict[str, Any]:
    return {"command": "create", "path": path, "file_text": text}


def test_the_table_has_one_row_per_difference() -> None:
    numbers = [int(n) for n in re.findall(r"^\| (\d+) \|", DOC, flags=re.MULTILINE)]
    assert numbers == list(range(1, 18))
    # The line numbers cited are 2.12.0's (the oldest release pyproject.toml allows); a newer
    # SDK that behaves differently fails the row tests below, not a version check.
    assert "anthropic 2.12.0" in DOC


def test_row_1_errors_carry_the_specification_prefix(both: Both) -> None:
    both.setup(create("/memories/a"))
    assert both.run(create("/memories/a")) == (
        "raise ToolError: File /memories/a already exists",
        "raise ToolError: Error: File /memories/a already exists",
    )
    assert "`Error: File /memories/a already exists`" in row(1)
    missing = both.run({"command": "view", "path": "/memories/nope"})
    text = "The path /memories/nope does not exist. Please provide a valid path."
    assert missing == (f"raise ToolError: {text}", f"raise ToolError: {text}")


def test_rows_2_to_4_the_specification_wording(both: Both) -> None:
    both.setup(create("/memories/d/f"), create("/memories/a"))
    replace = {"command": "str_replace", "path": "/memories/d", "old_str": "x", "new_str": "y"}
    assert both.run(replace) == (
        "raise ToolError: The path /memories/d is not a file.",
        "raise ToolError: Error: The path /memories/d does not exist. Please provide a valid path.",
    )
    insert = {"command": "insert", "path": "/memories/d", "insert_line": 0, "insert_text": "y"}
    assert both.run(insert) == (
        "raise ToolError: The path /memories/d is not a file.",
        "raise ToolError: Error: The path /memories/d does not exist",
    )
    missing = {**insert, "path": "/memories/x"}
    assert both.run(missing) == (
        "raise ToolError: The path /memories/x does not exist. Please provide a valid path.",
        "raise ToolError: Error: The path /memories/x does not exist",
    )
    out_of_range = {**insert, "path": "/memories/a", "insert_line": 9}
    reference, ours = both.run(out_of_range)
    assert reference == (
        "raise ToolError: Invalid `insert_line` parameter: 9. It should be within the range [0, 1]."
    )
    assert ours == (
        "raise ToolError: Error: Invalid `insert_line` parameter: 9. It should be within the "
        "range of lines of the file: [0, 1]"
    )
    assert reference.removeprefix("raise ToolError: ") in row(4)
    assert ours.removeprefix("raise ToolError: ") in row(4)


def test_rows_5_to_7_listings(both: Both) -> None:
    both.setup(create("/memories/a.md", "hi"), create("/memories/node_modules/m", "z"))
    reference, ours = both.run({"command": "view", "path": "/memories/"})
    head = "Here're the files and directories up to 2 levels deep in /memories/, excluding hidden "
    size = reference.split("\n")[1].split("\t")[0]  # the file system's directory size
    assert reference == (
        f"{head}items:\n{size}\t/memories/\n2B\t/memories//a.md\n"
        f"{reference.split(chr(10))[3].split(chr(9))[0]}\t/memories//node_modules/\n"
        "1B\t/memories//node_modules/m"
    )
    assert ours == f"{head}items and node_modules:\n4K\t/memories/\n2B\t/memories/a.md"
    # Viewing a node_modules directory itself still lists it.
    direct = both.run({"command": "view", "path": "/memories/node_modules"})
    assert direct[1].endswith("\n4K\t/memories/node_modules\n1B\t/memories/node_modules/m")
    assert direct[0].split("\n")[2] == "1B\t/memories/node_modules/m"


def test_row_8_dot_components_are_refused_not_resolved(both: Both) -> None:
    both.setup(create("/memories/a/f"))
    reference, ours = both.run(create("/memories/a/../b.md"))
    assert reference == "File created successfully at: /memories/a/../b.md"
    assert (both.root / "b.md").is_file()
    assert ours == (
        "raise ToolError: Error: The path /memories/a/../b.md is not allowed: '..' components "
        "are not allowed"
    )
    assert ours.removeprefix("raise ToolError: ") in row(8)


def test_row_9_hostile_names_the_reference_accepts(both: Both) -> None:
    for path, reason in [
        ("/memories/a\\b.md", "backslashes are not allowed; use / between components"),
        ("/memories/.git/config", "'.git' components are not allowed"),
        ("/memories/bell\x07.md", "it contains a control character"),
    ]:
        reference, ours = both.run(create(path))
        assert reference == f"File created successfully at: {path}", path
        assert ours.startswith("raise ToolError: Error: The path ") and ours.endswith(reason)
    assert "backslashes are not allowed; use / between components" in row(9)


def test_row_10_a_lookalike_root_is_refused(both: Both) -> None:
    reference, ours = both.run(create("/memoriesX/a.md"))
    assert reference == "File created successfully at: /memoriesX/a.md"
    assert (both.root / "X" / "a.md").is_file()  # the reference bug
    assert ours == (
        "raise ToolError: Error: The path /memoriesX/a.md is not allowed: every memory path "
        "must start with /memories/"
    )


def test_row_11_a_failed_rename_leaves_nothing_behind(both: Both) -> None:
    before = both.commits()
    rename = {"command": "rename", "old_path": "/memories/nope", "new_path": "/memories/p/q"}
    assert both.run(rename) == (
        "raise ToolError: The path /memories/nope does not exist",
        "raise ToolError: Error: The path /memories/nope does not exist",
    )
    assert (both.root / "p").is_dir()  # the reference bug
    assert both.commits() == before
    view = both.gm.call({"command": "view", "path": "/memories"})
    assert view.split("\n")[1:] == ["4K\t/memories"]
    with pytest.raises(ToolError, match="The path /memories/p does not exist"):
        both.gm.call({"command": "view", "path": "/memories/p"})


@pytest.mark.parametrize("spelling", ["/memories/.", "/memories/", "/memories//", "/memories/a/.."])
def test_row_12_deleting_the_root_by_any_spelling_deletes_nothing(
    both: Both, spelling: str
) -> None:
    both.setup(create("/memories/a/f"), create("/memories/keep.md"))
    before = both.commits()
    reference, ours = both.run({"command": "delete", "path": spelling})
    assert reference == "raise ToolError: Cannot delete the /memories directory itself"
    assert ours.startswith("raise ToolError: Error: ")
    if spelling in ("/memories/", "/memories//"):
        assert ours == "raise ToolError: Error: Cannot delete the /memories directory itself"
    else:
        assert "components are not allowed" in ours
    assert (both.root / "keep.md").is_file()
    assert both.commits() == before
    assert both.gm.call({"command": "view", "path": "/memories/keep.md"}).endswith("\t")


def test_row_13_renaming_the_root_is_refused_by_both(both: Both) -> None:
    rename = {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"}
    assert both.run(rename) == (
        "raise ToolError: Cannot rename the /memories directory itself",
        "raise ToolError: Error: Cannot rename the /memories directory itself",
    )


def test_row_14_only_tool_errors_escape(both: Both) -> None:
    both.setup(create("/memories/d/f"), create("/memories/x.md"))
    reference, ours = both.run(
        {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/d/sub"}
    )
    assert reference.startswith("raise OSError: [Errno 22] Invalid argument")
    assert ours == "raise ToolError: Error: Cannot move /memories/d into itself"
    reference, ours = both.run(create("/memories/x.md/y"))
    assert reference.startswith("raise NotADirectoryError: ")
    assert ours == (
        "raise ToolError: Error: Cannot create /memories/x.md/y: /memories/x.md is a file, "
        "not a directory"
    )


def test_row_15_size_limits(both: Both) -> None:
    big = create("/memories/big.md", "x" * (1024 * 1024 + 1))
    reference, ours = both.run(big)
    assert reference == "File created successfully at: /memories/big.md"
    assert ours.startswith("raise ToolError: Error: refused to write /memories/big.md")


def test_row_16_likely_secrets(both: Both) -> None:
    secret = create("/memories/k.md", "key: AKIAIOSFODNN7EXAMPLE\n")
    reference, ours = both.run(secret)
    assert reference == "File created successfully at: /memories/k.md"
    assert ours.startswith("raise ToolError: Error: refused to store what looks like an AWS ")


def test_row_17_empty_directories(both: Both, tmp_path: Path) -> None:
    both.setup(create("/memories/d/f"), {"command": "delete", "path": "/memories/d/f"})
    reference, ours = both.run({"command": "view", "path": "/memories"})
    assert reference.split("\n")[2].endswith("\t/memories/d/")
    assert ours.split("\n")[2] == "4K\t/memories/d/"
    summary = export(MemoryStore.open(both.gm.store.repo.path, both.key), tmp_path / "out")
    assert (summary.files, summary.directories) == (0, 1)
    assert (tmp_path / "out" / "d").is_dir()
