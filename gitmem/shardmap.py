"""Immutable mappings whose changed copies share the unchanged part with the original.

Each version of a directory keeps its entries (names, nodes, sealed names, fold index) as
mappings; a write makes the next version from the last one with a few names changed. Copying a
dict of 10,000 entries for each (four of them per write) cost more than the rest of the write
in a big directory, so large mappings are split into shards by the key's hash, and a changed
copy copies only the shards its changes fall in.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping
from typing import TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")

_SHARDS = 64
_MASK = _SHARDS - 1
# Below this many entries a plain dict is smaller, and copying it whole costs a few µs.
SMALL = 512


class ShardedMap(Mapping[K, V]):
    """A read-only mapping held in 64 dicts by ``hash(key)``; never changed once made."""

    __slots__ = ("_len", "_shards")

    def __init__(self, shards: list[dict[K, V]], length: int) -> None:
        self._shards = shards
        self._len = length

    @classmethod
    def of(cls, items: Mapping[K, V]) -> ShardedMap[K, V]:
        """A sharded copy of ``items``."""
        shards: list[dict[K, V]] = [{} for _ in range(_SHARDS)]
        for key, value in items.items():
            shards[hash(key) & _MASK][key] = value
        return cls(shards, len(items))

    def __getitem__(self, key: K) -> V:
        return self._shards[hash(key) & _MASK][key]

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V | D, /) -> V | D: ...
    def get(self, key: K, default: object = None, /) -> object:
        return self._shards[hash(key) & _MASK].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._shards[hash(key) & _MASK]

    def __iter__(self) -> Iterator[K]:
        for shard in self._shards:
            yield from shard

    def __len__(self) -> int:
        return self._len

    def items(self) -> ItemsView[K, V]:
        # Shard by shard: Mapping's would look every key up again (a listing of 10,000).
        return _Items(self)

    def shards(self) -> list[dict[K, V]]:
        """The shards themselves (read-only: shared with other versions)."""
        return self._shards

    def pairs(self) -> Iterator[tuple[K, V]]:
        """Every (key, value), shard by shard."""
        for shard in self._shards:
            yield from shard.items()

    def evolve(self, changes: Mapping[K, V | None]) -> Mapping[K, V]:
        """A copy with ``changes`` applied (a None value removes the key); only the shards
        they fall in are copied."""
        shards = list(self._shards)
        copied: set[int] = set()
        length = self._len
        for key, value in changes.items():
            at = hash(key) & _MASK
            if at not in copied:
                shards[at] = dict(shards[at])
                copied.add(at)
            shard = shards[at]
            if value is None:
                if shard.pop(key, _GONE) is not _GONE:
                    length -= 1
            else:
                if key not in shard:
                    length += 1
                shard[key] = value
        if length < SMALL // 2:
            return {key: value for shard in shards for key, value in shard.items()}
        return ShardedMap(shards, length)


_GONE = object()


class _Items(ItemsView[K, V]):
    def __init__(self, owner: ShardedMap[K, V]) -> None:
        super().__init__(owner)
        self._owner = owner

    def __iter__(self) -> Iterator[tuple[K, V]]:
        return self._owner.pairs()


def frozen(items: dict[K, V]) -> Mapping[K, V]:
    """``items`` as the mapping a directory version keeps: itself when small, else sharded
    (the caller hands it over and no longer changes it)."""
    return items if len(items) < SMALL else ShardedMap.of(items)


def evolved(base: Mapping[K, V], changes: Mapping[K, V | None]) -> Mapping[K, V]:
    """``base`` with ``changes`` applied (a None value removes the key), sharing with ``base``
    whatever they do not touch; ``base`` is not changed."""
    if not changes:
        return base  # neither is ever changed: the same mapping serves both versions
    if isinstance(base, ShardedMap):
        return base.evolve(changes)
    out = dict(base)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return frozen(out)
