"""A repointing write lays the new buckets of an inner tree over its base's (gitmem/buckets.py,
``Laid``) instead of copying all 64: what it writes must still be the canonical tree written
from scratch, every version must read as what it holds, and the buckets laid over a base must
stay bounded (a base's old buckets are freed once a version gets a base of its own).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from test_bucket_splice import EXTRA, Trees, random_id, stored_directory, written_inner_bytes

from gitmem import buckets


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # 3: a few hundred entries give two and three levels of buckets (as in test_bucket_splice).
    monkeypatch.setattr(buckets, "SPLIT_THRESHOLD", 3)
    yield


def inner_trees(shape: buckets.Shape) -> Iterator[buckets.Shape]:
    stack = [shape]
    while stack:
        node = stack.pop()
        if node.buckets is not None:
            yield node
            stack.extend(node.buckets.values())


def reads_as_merged(below: buckets.Laid) -> bool:
    """Every way of reading a Laid agrees with the one dict it stands for."""
    merged = below.merged()
    assert set(below.over) <= set(below.base)  # repointing adds and drops no bucket
    absent = next(i for i in range(buckets.FANOUT + 1) if i not in merged)
    return (
        dict(below.items()) == merged
        and sorted(below) == sorted(merged)
        and len(below) == len(merged)
        and sorted(map(id, below.values())) == sorted(map(id, merged.values()))
        and all(below[i] is merged[i] and below.get(i) is merged[i] for i in merged)
        and all(i in below for i in merged)
        and absent not in below
        and below.get(absent) is None
    )


@pytest.mark.parametrize("seed", range(2))
def test_a_long_run_of_repointings_writes_canonical_trees_and_stays_bounded(seed: int) -> None:
    rng = random.Random(seed)
    trees, entries, shape, _ = stored_directory(rng, 500)
    names = sorted(entries)
    hot = rng.sample(names, 6)  # the few entries a run of writes keeps repointing
    laid_seen = rebased = 0
    versions = [shape]
    for step in range(90):
        pool = hot if step % 5 else names  # now and then anywhere: new buckets laid over
        pointed = [(raw, random_id(rng)) for raw in rng.sample(pool, rng.randint(1, 3))]
        before = dict(trees.trees)
        made = buckets.repointed(shape, pointed, trees.read_leaf, trees.write, EXTRA)
        assert made is not None and made.oid is not None
        entries.update(pointed)
        fresh = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
        assert made.oid == buckets.store(fresh, Trees().write, EXTRA), step
        assert made.count == len(entries)
        assert sorted(buckets.raw_names(made)) == sorted(entries)
        assert all(written_inner_bytes(made, trees, True)), step
        # Every version made so far still reads as it was written (bases are shared).
        assert all(all(written_inner_bytes(old, trees, True)) for old in versions[-3:]), step
        assert all(trees.trees[k] == v for k, v in before.items())
        for node in inner_trees(made):
            below = node.buckets
            if isinstance(below, buckets.Laid):
                laid_seen += 1
                assert len(below.over) <= buckets.LAID_LIMIT
                assert reads_as_merged(below)
            else:
                assert isinstance(below, dict)
        top = made.buckets
        if not isinstance(top, buckets.Laid):
            rebased += 1
        versions.append(made)
        shape = made
    assert laid_seen and rebased  # both forms were written and checked
    # An edit (a new name, a removal) starts from a Laid version: its copy is a plain dict.
    victim = rng.choice(sorted(entries))
    del entries[victim]
    edited = buckets.edit(shape, [victim], [], trees.read_leaf)
    assert isinstance(edited.buckets, dict)
    fresh = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
    assert buckets.store(edited, trees.write) == buckets.store(fresh, Trees().write)


def test_a_version_read_back_repoints_into_a_laid_version() -> None:
    rng = random.Random(11)
    trees, entries, _, top = stored_directory(rng, 300)
    reread = trees.reloaded(top)  # no bytes kept: the top tree is joined whole once
    pointed = [(rng.choice(sorted(entries)), random_id(rng))]
    made = buckets.repointed(reread, pointed, trees.read_leaf, trees.write, EXTRA)
    assert made is not None and isinstance(made.buckets, buckets.Laid)
    entries.update(pointed)
    fresh = buckets.build(buckets.serialized(raw, tree) for raw, tree in entries.items())
    assert made.oid == buckets.store(fresh, Trees().write, EXTRA)
    assert reread.buckets is not None and made.buckets.base is reread.buckets  # shared
