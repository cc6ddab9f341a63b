"""Immutable mappings whose changed copies share the unchanged part with the original.

Each version of a directory keeps its entries (names, nodes, sealed names, fold index) as
mappings; a write makes the next version from the last one with a few names changed. Copying a
dict of 10,000 entries for each (four of them per write) cost more than the rest of the write
in a big directory, so large mappings are split into shards by the key's hash. A changed copy
lays its changes over the shards in a small dict, and copies the shards the changes fall in
only once that holds more than :data:`_TOP_LIMIT` keys: writes that change the same few names
(the directories and files they write below) copy no shard at all.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping
from typing import TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")

_SHARDS = 64
_MASK = _SHARDS - 1
# Below this many entries a plain dict is smaller, and copying it whole is cheaper than the
# shards' bookkeeping.
SMALL = 512


class ShardedMap(Mapping[K, V]):
    """A read-only mapping held in 64 dicts by ``hash(key)``, with the latest changes laid over
    them in a small dict; never changed once made. Values are never None (in a change, None
    removes the key)."""

    __slots__ = ("_len", "_shards", "_top")

    def __init__(
        self, shards: list[dict[K, V]], length: int, top: dict[K, V | None] | None = None
    ) -> None:
        self._shards = shards
        self._len = length
        # The changes made since the shards were last copied (None: a key removed), at most
        # _TOP_LIMIT keys: a changed copy copies this small dict rather than the list of 64
        # shards and the shard each change falls in (about 160 entries at 10,000 entries),
        # memory last touched a command ago, which a big directory's write paid for (the copies
        # and freeing them) on each of its entry maps.
        self._top = top

    @classmethod
    def of(cls, items: Mapping[K, V]) -> ShardedMap[K, V]:
        """A sharded copy of ``items``."""
        shards: list[dict[K, V]] = [{} for _ in range(_SHARDS)]
        for key, value in items.items():
            shards[hash(key) & _MASK][key] = value
        return cls(shards, len(items))

    def __getitem__(self, key: K) -> V:
        top = self._top
        if top is not None and key in top:
            found = top[key]
            if found is None:
                raise KeyError(key)
            return found
        return self._shards[hash(key) & _MASK][key]

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V | D, /) -> V | D: ...
    def get(self, key: K, default: object = None, /) -> object:
        top = self._top
        if top is not None and key in top:
            found = top[key]
            return default if found is None else found
        return self._shards[hash(key) & _MASK].get(key, default)

    def __contains__(self, key: object) -> bool:
        top = self._top
        if top is not None and key in top:
            return top[key] is not None
        return key in self._shards[hash(key) & _MASK]

    def __iter__(self) -> Iterator[K]:
        for shard in self.shards():
            yield from shard

    def __len__(self) -> int:
        return self._len

    def items(self) -> ItemsView[K, V]:
        # Shard by shard: Mapping's would look every key up again (a listing of 10,000).
        return _Items(self)

    def shards(self) -> list[dict[K, V]]:
        """The shards with every change in them (read-only: shared with other versions)."""
        top = self._top
        return self._shards if top is None else _applied(self._shards, top)

    def pairs(self) -> Iterator[tuple[K, V]]:
        """Every (key, value), shard by shard."""
        for shard in self.shards():
            yield from shard.items()

    def evolve(self, changes: Mapping[K, V | None]) -> Mapping[K, V]:
        """A copy with ``changes`` applied (a None value removes the key): laid over the
        shards, which are copied (only those the changes fall in) once the changes laid over
        them number more than :data:`_TOP_LIMIT`."""
        top: dict[K, V | None] = {} if self._top is None else dict(self._top)
        length = self._len
        for key, value in changes.items():
            present = key in self
            if value is None:
                if present:
                    length -= 1
                    top[key] = None
            else:
                if not present:
                    length += 1
                top[key] = value
        if length < SMALL // 2:
            return {
                key: value for shard in _applied(self._shards, top) for key, value in shard.items()
            }
        if len(top) > _TOP_LIMIT:
            return ShardedMap(_applied(self._shards, top), length)
        return ShardedMap(self._shards, length, top)


# Changes a ShardedMap lays over its shards before a changed copy copies them into the shards.
_TOP_LIMIT = 16


def _applied(shards: list[dict[K, V]], top: Mapping[K, V | None]) -> list[dict[K, V]]:
    """``shards`` with the changes ``top`` made in copies of those they fall in."""
    out = list(shards)
    copied: set[int] = set()
    for key, value in top.items():
        at = hash(key) & _MASK
        if at not in copied:
            out[at] = dict(out[at])
            copied.add(at)
        if value is None:
            out[at].pop(key, None)
        else:
            out[at][key] = value
    return out


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
