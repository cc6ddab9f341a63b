"""gitmem.shardmap: a changed copy equals the same changes made to a dict, shares the shards it
did not change, and leaves the original as it was."""

from __future__ import annotations

import random

import pytest

from gitmem.shardmap import _TOP_LIMIT, SMALL, ShardedMap, evolved, frozen


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
        assert all(nxt[key] == value and key in nxt for key, value in model.items())
        assert "absent" not in nxt and nxt.get("absent", 5) == 5
        for key in changes.keys() - model.keys():  # removed: missing whichever way it is read
            assert key not in nxt and nxt.get(key, "no") == "no"
            with pytest.raises(KeyError):
                nxt[key]
        assert isinstance(nxt, ShardedMap)
        assert (
            sorted(nxt.pairs())
            == sorted(model.items())
            == sorted((key, value) for shard in nxt.shards() for key, value in shard.items())
        )
        current = nxt


def test_changes_are_laid_over_the_shards_until_the_limit_then_copied_into_them() -> None:
    big = ShardedMap.of({f"k{i}": i for i in range(SMALL * 2)})
    after = big.evolve({"k1": -1})
    assert isinstance(after, ShardedMap)
    assert after._shards is big._shards and after["k1"] == -1 and big["k1"] == 1
    # The same keys changed again and again stay laid over: no shard is ever copied.
    for i in range(100):
        nxt = after.evolve({"k1": i, "k2": None})
        assert isinstance(nxt, ShardedMap) and nxt._shards is big._shards
        after = nxt
    assert after["k1"] == 99 and "k2" not in after and len(after) == SMALL * 2 - 1
    # Past the limit, the changes go into copies of the shards they fall in, the others shared.
    changes: dict[str, int | None] = {f"k{i}": -i for i in range(3, 3 + _TOP_LIMIT)}
    flat = after.evolve(changes)
    assert isinstance(flat, ShardedMap) and flat._top is None
    touched = {hash(key) & (len(big._shards) - 1) for key in [*changes, "k1", "k2"]}
    shared = sum(a is b for a, b in zip(big._shards, flat._shards, strict=True))
    assert shared == len(big._shards) - len(touched)
    assert flat["k1"] == 99 and "k2" not in flat and flat["k5"] == -5
    assert len(flat) == SMALL * 2 - 1 and dict(big) == {f"k{i}": i for i in range(SMALL * 2)}
    shrunk = big.evolve({f"k{i}": None for i in range(SMALL * 2 - 10)})
    assert type(shrunk) is dict and len(shrunk) == 10
    assert type(frozen({"a": 1})) is dict
    assert evolved({"a": 1}, {"a": None, "b": 2}) == {"b": 2}
    assert evolved(big, {}) is big  # no change: the same mapping, not a copy
    small = {"a": 1}
    assert evolved(small, {}) is small
