"""Immutable mappings whose changed copies share the unchanged part with the original.

Each version of a directory keeps its entries (names, nodes, sealed names, fold index) as
mappings; a write makes the next version from the last one with a few names changed. Copying a
dict of 10,000 entries for each (four of them per write) cost more than the rest of the write
in a big directory, so a large mapping is a hash array mapped trie (``immutables.Map``, in C):
a changed copy allocates only the few trie nodes on the paths to its changes, and an old
version frees as little. It replaced 64 dicts sharded by hash, whose changed copy copied the
one shard of 1/64 of the entries (about 160 at 10,000) each change fell in: at 10,000
entries a changed copy, with its release later, went from 2.4 to 0.6 µs and a lookup from
0.16 to 0.10 µs (docs/performance.md, "Flat as memory grows").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import immutables

K = TypeVar("K")
V = TypeVar("V")

# Below this many entries a plain dict is kept: a copy of it costs a few µs at most, and its
# lookups (every directory view's) are the fastest there are.
SMALL = 512


def frozen(items: dict[K, V]) -> Mapping[K, V]:
    """``items`` as the mapping a directory version keeps: itself when small, else a trie
    (the caller hands it over and no longer changes it)."""
    return items if len(items) < SMALL else immutables.Map(items)


def evolved(base: Mapping[K, V], changes: Mapping[K, V | None]) -> Mapping[K, V]:
    """``base`` with ``changes`` applied (a None value removes the key), sharing with ``base``
    whatever they do not touch; ``base`` is not changed."""
    if not changes:
        return base  # neither is ever changed: the same mapping serves both versions
    if isinstance(base, immutables.Map):
        with base.mutate() as edit:
            for key, value in changes.items():
                if value is None:
                    edit.pop(key, None)
                else:
                    edit[key] = value
            out: immutables.Map[K, V] = edit.finish()
        # A trie shrunk far below the threshold becomes a dict again (not at the threshold
        # itself, so that a directory near it does not change form on every write).
        return dict(out.items()) if len(out) < SMALL // 2 else out
    copied = dict(base)
    for key, value in changes.items():
        if value is None:
            copied.pop(key, None)
        else:
            copied[key] = value
    return frozen(copied)
