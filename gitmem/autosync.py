"""The memory tool's sync policy: pull when opened, push after writes, never block on the network.

Offline first: a write commits locally and returns; the push runs on one background thread,
and a push that fails (no network, a remote that moved) leaves the local commits in place for
the next push or sync. The pull when opened runs on a thread of its own, which the tool waits
for at most :data:`OPEN_WAIT` seconds: one that cannot reach the remote, or has not finished by
then, goes on offline (a late one still brings the remote's commits in when it ends); one that
finds something wrong in time (another store, a rewound remote, a forged commit) raises,
because that is not a network problem.
"""

from __future__ import annotations

import logging
import threading
import time

from . import forksafe
from .errors import RemoteError
from .store import MemoryStore

log = logging.getLogger("gitmem.sync")
# The longest the tool's constructor waits for the pull when opened (docs/sync.md).
OPEN_WAIT = 5.0


class AutoSync:
    """Carries out the sync policy of ``store.options`` (``remote`` and ``sync``) for one tool."""

    def __init__(self, store: MemoryStore) -> None:
        remote, policy = store.options.remote, store.options.sync
        self.store, self.remote, self.policy = store, remote, policy
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pulling: threading.Thread | None = None
        self._again = False
        self.last_error: Exception | None = None
        forksafe.reset_in_child(self._after_fork_in_child)
        if policy in ("pull", "push"):
            self.pull_now(OPEN_WAIT)

    def _after_fork_in_child(self) -> None:
        # The push thread is the parent's (it may have held the lock): the child starts its own.
        self._lock = threading.Lock()
        self._thread, self._pulling, self._again = None, None, False

    def pull_now(self, wait: float | None = None) -> None:
        """Pull from the remote, waiting for it at most ``wait`` seconds (None: until it ends).

        An unreachable remote is logged and left for later, and so is a pull still running
        after ``wait``: it goes on in the background, and its failure is logged and kept in
        :attr:`last_error`. Any other failure within ``wait`` is raised.
        """
        remote = self.remote
        assert remote is not None
        lock = threading.Lock()
        done = threading.Event()
        failed: list[Exception] = []
        left = False

        def run() -> None:
            try:
                self.store.pull(remote)
            except Exception as exc:  # the caller's to raise, or logged here once it left
                failed.append(exc)
            with lock:
                done.set()
                late = left
            if late and failed:
                self.last_error = failed[0]
                log.warning("gitmem: the pull from %s failed: %s", remote, failed[0])

        thread = threading.Thread(target=run, name="gitmem-pull", daemon=True)
        self._pulling = thread
        thread.start()
        thread.join(wait)
        with lock:
            left = not done.is_set()
        if left:
            log.warning(
                "gitmem: the pull from %s has not finished after %g s; working offline while "
                "it goes on",
                remote,
                wait,
            )
            return
        if not failed:
            return
        if not isinstance(failed[0], RemoteError):
            raise failed[0]
        self.last_error = failed[0]
        log.warning("gitmem: working offline: %s", failed[0])

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
        """Wait up to ``timeout`` seconds for the background pull and push to finish; True when
        neither is running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            threads = [t for t in (self._pulling, self._thread) if t is not None]
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)
