"""gitmem.shardmap: a changed copy equals the same changes made to a dict, leaves the original
as it was, and keeps the form (dict or trie) its size calls for."""

from __future__ import annotations

import random

import immutables

from gitmem.shardmap import SMALL, evolved, frozen


def test_changed_copies_equal_dict_edits_and_leave_the_original() -> None:
    rng = random.Random(3)
    model = {f"k{i}": i for i in range(SMALL * 2)}
    current = frozen(dict(model))
    assert isinstance(current, immutables.Map)
    for _ in range(200):
        changes: dict[str, int | None] = {}
        for _ in range(rng.randrange(1, 6)):
            key = f"k{rng.randrange(SMALL * 3)}"
            changes[key] = None if rng.random() < 0.5 else rng.randrange(1000)
        before = dict(current)
        nxt = evolved(current, changes)
        assert dict(current) == before  # the original is untouched
        for key, value in changes.items():
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        assert dict(nxt) == model and len(nxt) == len(model)
        assert sorted(nxt.items()) == sorted(model.items())
        assert all(nxt.get(key) == value for key, value in model.items())
        assert "absent" not in nxt and nxt.get("absent", 5) == 5
        current = nxt


def test_small_maps_are_dicts_and_no_change_shares_the_base() -> None:
    big = frozen({f"k{i}": i for i in range(SMALL * 2)})
    assert isinstance(evolved(big, {"k1": -1}), immutables.Map)
    # Near the threshold a map keeps its form; far below it, it is a dict again.
    assert isinstance(evolved(big, {f"k{i}": None for i in range(SMALL + 10)}), immutables.Map)
    shrunk = evolved(big, {f"k{i}": None for i in range(SMALL * 2 - 10)})
    assert type(shrunk) is dict and shrunk == {f"k{i}": i for i in range(SMALL * 2 - 10, SMALL * 2)}
    assert evolved(big, {}) is big
    small = {"a": 1}
    assert evolved(small, {}) is small
    assert type(frozen({"a": 1})) is dict
    assert evolved({"a": 1}, {"a": None, "b": 2}) == {"b": 2}
    grown = evolved({f"k{i}": i for i in range(SMALL - 1)}, {"new": 0})
    assert isinstance(grown, immutables.Map) and len(grown) == SMALL
