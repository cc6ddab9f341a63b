"""Making this process's gitmem objects usable in a child made by ``fork``.

A forked child has only the thread that called ``fork``. A lock another thread of the parent
held at that moment stays held in the child forever, and whatever that lock guarded may be half
changed. Objects that hold such a lock register here a method that gives them fresh locks and
drops (or rebuilds) what the lock guarded; it is called in the child for every registered object
still alive, before the child goes on: the pattern of CPython's logging module, whose handlers'
locks are reinitialised ``after_in_child``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from types import MethodType
from typing import Any, cast

# By object, weakly (registering keeps nothing alive): the function its method is.
_RESETS: weakref.WeakKeyDictionary[Any, Callable[[Any], object]] = weakref.WeakKeyDictionary()


def reset_in_child(method: Callable[[], object]) -> None:
    """Call ``method``, a bound method, in every child this process forks while its object is
    alive."""
    bound = cast(MethodType, method)
    _RESETS[bound.__self__] = bound.__func__


def _after_fork_in_child() -> None:
    for obj, reset in list(_RESETS.items()):
        reset(obj)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
