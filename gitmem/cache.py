"""A bounded, least-recently-used cache of values derived from immutable git objects.

gitmem caches what it derived from a tree (its decrypted names, a file's size, a directory's
total) under the tree's id: an id names exactly one content, so an entry never goes stale, and
the cache only needs a bound. The bound counts a weight per entry (a directory listing weighs
its entry count), so a store with one huge directory cannot fill memory with its versions, and
eviction drops the least recently used entries rather than everything: a store larger than the
bound keeps its hot part cached instead of rereading all of it after each overflow.

Hand-written, not cachetools' ``LRUCache`` (with ``getsizeof`` for the weights, behind the same
lock): every view goes through these lookups, and its ``get`` costs two Python-level calls where
this one costs a dict pop.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from . import forksafe

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A mapping of at most ``budget`` total weight; the least recently used entries go first.

    Safe to share between threads (one lock; every operation is a few dict operations).
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._items: dict[K, tuple[V, int]] = {}
        self._weight = 0
        self._lock = threading.Lock()
        forksafe.reset_in_child(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        # Another thread of the parent may have held the lock mid-change: a fresh lock, and
        # nothing kept that it may have left half done (it is only a cache).
        self._lock = threading.Lock()
        self._items, self._weight = {}, 0

    def get(self, key: K) -> V | None:
        """The value cached under ``key`` (now the most recently used), or None."""
        with self._lock:
            item = self._items.pop(key, None)
            if item is None:
                return None
            self._items[key] = item
            return item[0]

    def put(self, key: K, value: V, weight: int = 1) -> None:
        """Cache ``value`` under ``key``; entries heavier than the whole budget are not kept."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            if weight > self.budget:
                return
            self._items[key] = (value, weight)
            self._weight += weight
            while self._weight > self.budget:
                oldest = next(iter(self._items))
                self._weight -= self._items.pop(oldest)[1]

    def discard(self, key: K) -> None:
        """Forget the entry under ``key``, if there is one."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._weight -= old[1]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._items.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items
