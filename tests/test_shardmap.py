"""gitmem.shardmap: a changed copy equals the same changes made to a dict, shares the shards it
did not change, and leaves the original as it was."""

from __future__ import annotations

import random

from gitmem.shardmap import SMALL, ShardedMap, evolved, frozen


def test_changed_copies_equal_dict_edits_and_leave_the_original() -> None:
    rng = random.Random(3)
    model = {f"k{i}": i for i in range(SMALL * 2)}
    current = frozen(dict(model))
    assert isinstance(current, ShardedMap)
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


def test_only_changed_shards_are_copied_and_small_maps_are_dicts() -> None:
    big = ShardedMap.of({f"k{i}": i for i in range(SMALL * 2)})
    after = big.evolve({"k1": -1})
    assert isinstance(after, ShardedMap)
    shared = sum(a is b for a, b in zip(big._shards, after._shards, strict=True))
    assert shared == len(big._shards) - 1
    shrunk = big.evolve({f"k{i}": None for i in range(SMALL * 2 - 10)})
    assert type(shrunk) is dict and len(shrunk) == 10
    assert type(frozen({"a": 1})) is dict
    assert evolved({"a": 1}, {"a": None, "b": 2}) == {"b": 2}
    assert evolved(big, {}) is big  # no change: the same mapping, not a copy
    small = {"a": 1}
    assert evolved(small, {}) is small
