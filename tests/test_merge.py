"""Merges of exact edits (gitmem/merge.py): both sides' edits of one file apply together unless
they change the same text; end to end, two replicas ticking neighbouring checklist lines."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gitmem import MemoryStore
from gitmem.merge import merge_edits, merge_text
from gitmem.paths import parse

CHECKLIST = "".join(f"- [ ] feature {i}\n" for i in range(1, 9))


def tick(text: str, n: int) -> str:
    return text.replace(f"- [ ] feature {n}\n", f"- [x] feature {n}\n")


def test_neighbouring_ticks_both_stay() -> None:
    first, second = tick(CHECKLIST, 4), tick(CHECKLIST, 5)
    assert merge_text(CHECKLIST, first, second) is None  # a line merge calls it a conflict
    both = tick(tick(CHECKLIST, 4), 5)
    assert merge_edits(CHECKLIST, first, second) == both
    assert merge_edits(CHECKLIST, second, first) == both


def test_insertions_at_one_place_are_both_kept_first_side_first() -> None:
    log = "# progress\n\n## session 1\ndone\n"
    first, second = log + "## session 2a\nA\n", log + "## session 2b\nB\n"
    assert merge_edits(log, first, second) == log + "## session 2a\nA\n## session 2b\nB\n"
    assert merge_edits(log, second, first) == log + "## session 2b\nB\n## session 2a\nA\n"


def test_an_edit_made_on_both_sides_is_made_once() -> None:
    first = tick(tick(CHECKLIST, 2), 6)
    second = tick(tick(CHECKLIST, 2), 7)
    assert merge_edits(CHECKLIST, first, second) == tick(tick(tick(CHECKLIST, 2), 6), 7)


def test_the_same_text_edited_differently_is_a_conflict() -> None:
    first = CHECKLIST.replace("feature 3", "feature three")
    second = CHECKLIST.replace("feature 3", "feature THREE")
    assert merge_edits(CHECKLIST, first, second) is None
    # An insertion inside lines the other side replaced clashes too.
    lines = CHECKLIST.splitlines(keepends=True)
    inserted = "".join([*lines[:4], "new\n", *lines[4:]])
    replaced = "".join([*lines[:3], "x\n", *lines[6:]])
    assert merge_edits(CHECKLIST, inserted, replaced) is None


@given(
    st.lists(st.sampled_from(["a\n", "b\n", "c\n", "- [ ] x\n"]), max_size=12),
    st.lists(st.sampled_from(["a\n", "z\n", "- [x] x\n"]), max_size=12),
)
def test_one_side_unchanged_gives_the_other(base: list[str], other: list[str]) -> None:
    text, changed = "".join(base), "".join(other)
    assert merge_edits(text, text, changed) == changed
    assert merge_edits(text, changed, text) == changed


def test_two_replicas_tick_neighbouring_items_without_a_conflict(tmp_path: Path, key: str) -> None:
    origin = tmp_path / "origin.git"
    laptop = MemoryStore.init(tmp_path / "l.git", key, state_dir=tmp_path / "sl")
    laptop.create(parse("/memories/features.md"), CHECKLIST)
    laptop.add_remote("origin", str(origin))
    subprocess.run(["git", "init", "--bare", "-q", str(origin)], check=True)
    laptop.push()
    desktop = MemoryStore.clone(str(origin), tmp_path / "d.git", key, state_dir=tmp_path / "sd")
    path = parse("/memories/features.md")
    laptop.str_replace(path, "- [ ] feature 4", "- [x] feature 4")
    desktop.str_replace(path, "- [ ] feature 5", "- [x] feature 5")
    laptop.push()
    result = desktop.sync()
    assert result.action == "merged+pushed"
    assert result.merge is not None and result.merge.record.detail["conflicts"] == []
    assert laptop.pull().action == "fast-forward"
    for replica in (laptop, desktop):
        assert replica.files() == {"/memories/features.md": tick(tick(CHECKLIST, 4), 5)}
