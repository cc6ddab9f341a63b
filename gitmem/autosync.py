"""The memory tool's sync policy: pull when opened, push after writes, never block on the network.

Offline first: a write commits locally and returns; the push runs on one background thread,
and a push that fails (no network, a remote that moved) leaves the local commits in place for
the next push or sync. A pull when opened that cannot reach the remote goes on offline; one
that finds something wrong (another store, a rewound remote, a forged commit) raises, because
that is not a network problem.
"""

from __future__ import annotations

import logging
import threading

from . import forksafe
from .errors import RemoteError
from .store import MemoryStore

log = logging.getLogger("gitmem.sync")


class AutoSync:
    """Carries out the sync policy of ``store.options`` (``remote`` and ``sync``) for one tool."""

    def __init__(self, store: MemoryStore) -> None:
        remote, policy = store.options.remote, store.options.sync
        self.store, self.remote, self.policy = store, remote, policy
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again = False
        self.last_error: Exception | None = None
        forksafe.reset_in_child(self._after_fork_in_child)
        if policy in ("pull", "push"):
            self.pull_now()

    def _after_fork_in_child(self) -> None:
        # The push thread is the parent's (it may have held the lock): the child starts its own.
        self._lock = threading.Lock()
        self._thread, self._again = None, False

    def pull_now(self) -> None:
        """Pull from the remote; an unreachable remote is logged and left for later."""
        assert self.remote is not None
        try:
            self.store.pull(self.remote)
        except RemoteError as exc:
            self.last_error = exc
            log.warning("gitmem: working offline: %s", exc)

    def after_write(self) -> None:
        """Start (or queue) a background push when the policy says so; returns at once."""
        if self.policy != "push":
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                self._again = True
                return
            self._thread = threading.Thread(target=self._push_loop, name="gitmem-push", daemon=True)
            self._thread.start()

    def _push_loop(self) -> None:
        assert self.remote is not None
        while True:
            try:
                self.store.sync(self.remote)
                self.last_error = None
            except Exception as exc:  # every failure is left for the next sync, never raised
                self.last_error = exc
                log.warning("gitmem: push to %s failed; will retry: %s", self.remote, exc)
            with self._lock:
                if not self._again:
                    self._thread = None
                    return
                self._again = False

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background push to finish; True when none is running."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True
