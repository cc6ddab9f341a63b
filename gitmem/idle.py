"""Publishing a store's logged writes once its writer goes idle, on a background thread.

A process that keeps a store open all day (an MCP server, an agent) would otherwise leave the
repository unreadable by plain git until it closes the store. Each write re-arms the timer, so
a burst of writes pays for one publish after its last write, not one per write.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from . import forksafe

_log = logging.getLogger("gitmem")


class IdlePublisher:
    """Calls ``publish`` once ``delay`` seconds have passed since the last :meth:`touch`.

    A daemon thread, started by a touch and ended once nothing is pending, waits for the
    deadline and runs ``publish``. An exception from it is logged as a warning, never raised:
    the writes stay in the redo log, which gitmem reads, and the next idle period or ``close``
    publishes them.
    """

    def __init__(self, delay: float, publish: Callable[[], None], name: str) -> None:
        self.delay = delay
        self._publish = publish
        self._name = name
        self._reset()
        forksafe.reset_in_child(self._reset)

    def _reset(self) -> None:
        # In a forked child: the parent's thread is not there, and the parent publishes its
        # own writes.
        self._cond = threading.Condition()
        self._due: float | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    def touch(self) -> None:
        """A write was logged: publish ``delay`` seconds from now, unless another comes first."""
        with self._cond:
            if self._stopped:
                return
            self._due = time.monotonic() + self.delay
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"gitmem idle publish {self._name}", daemon=True
                )
                self._thread.start()
            # No notify: the deadline only moves later, and the waiting thread finds the new one
            # when the old one passes. Waking it on every write would cost each write a switch
            # to that thread and back.

    def cancel(self) -> None:
        """Forget a pending publish (the caller publishes now, or the store is closing)."""
        with self._cond:
            self._due = None
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and self._due is not None:
                    left = self._due - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                if self._stopped or self._due is None:
                    # Nothing pending: the thread ends (and with it its hold on the store);
                    # the next touch starts another.
                    self._thread = None
                    return
                self._due = None
            try:
                self._publish()
            except Exception as exc:  # a background thread has no caller to raise to
                _log.warning(
                    "gitmem: publishing the writes of %s after they went idle failed (%s); "
                    "gitmem reads them, and the next idle period, close() or `gitmem "
                    "checkpoint` publishes them",
                    self._name,
                    exc,
                )
