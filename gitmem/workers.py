"""A small shared thread pool for work that runs outside the GIL: inflating a file's chunks.

Reading a large file decodes a few dozen independent chunks, and most of that time is spent in
zlib, which releases the GIL, so on a machine with two or more cores the chunks inflate side by
side (their authentication, AES-SIV, holds the GIL and stays on the caller's thread). The pool
is made on first use, sized from the CPUs this process may run on, and made again in a child
after ``fork`` (a forked child has none of its parent's threads).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")

# More threads than this gain little: the GIL-holding share of a chunk's work (AES-SIV, Python)
# then dominates.
_MAX_THREADS = 4

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
# Threads besides the caller's; None: one per usable CPU but the caller's, at most _MAX_THREADS.
# Set to 0 to keep all work on the calling thread (benchmarks compare the two).
threads: int | None = None


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _executor() -> tuple[ThreadPoolExecutor | None, int]:
    """The shared pool and its size; ``(None, 0)`` when work stays on the calling thread."""
    global _pool, _pool_size
    count = min(_usable_cpus() - 1, _MAX_THREADS) if threads is None else threads
    if count <= 0:
        return None, 0
    with _lock:
        if _pool is None or _pool_size != count:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="gitmem-read")
            _pool_size = count
        return _pool, count


def _after_fork_in_child() -> None:
    # The child has none of the parent's threads, and the lock may have been held by one of
    # them: start afresh (the old pool is dropped, not shut down, which would wait for
    # threads that do not exist here).
    global _lock, _pool, _pool_size
    _lock, _pool, _pool_size = threading.Lock(), None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def map_ordered(fn: Callable[[T], R], items: Sequence[T], *, parallel: bool = True) -> list[R]:
    """``[fn(x) for x in items]``, shared between this thread and the pool when ``parallel``.

    Threads take the next item as they come free, so one that starts late (or is descheduled)
    does less. When calls fail, the exception of the earliest failing item is raised, after
    every item has been tried.
    """
    pool, count = _executor() if parallel and len(items) > 1 else (None, 0)
    if pool is None:
        return [fn(item) for item in items]
    total = len(items)
    results: list[R | None] = [None] * total
    errors: dict[int, Exception] = {}
    claim = itertools.count().__next__  # atomic under the GIL: each index is taken once

    def drain() -> None:
        while (index := claim()) < total:
            try:
                results[index] = fn(items[index])
            except Exception as exc:  # re-raised below, in order
                errors[index] = exc

    futures = []
    for _ in range(min(count, total - 1)):
        try:
            futures.append(pool.submit(drain))
        except RuntimeError:  # the pool was just replaced, or the interpreter is exiting
            break
    drain()
    for future in futures:
        future.result()
    if errors:
        raise errors[min(errors)]
    return cast("list[R]", results)
