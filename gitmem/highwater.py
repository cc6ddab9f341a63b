"""The client's high-water marks: the newest commit it has seen of each replica and remote.

An attacker who can write the repository can point the branch back at an older, authentic
commit; only state the repository does not hold can notice. Marks live in a per-user state
directory (``GITMEM_STATE_DIR``, else ``$XDG_STATE_HOME/gitmem``, else ``~/.local/state/gitmem``),
one owner-only JSON file per replica path and per remote URL of each store: a backup that is
behind the original is not a rollback, the same backup going backwards is.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .fsutil import atomic_write, fsync_dir, make_private_dirs, open_lock_file, read_regular_file

# A mark or a known-store record is a few hundred bytes; anything longer is not one.
_STATE_FILE_MAX = 64 * 1024


def default_state_dir() -> Path:
    """Where high-water marks live unless a caller says otherwise."""
    explicit = os.environ.get("GITMEM_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "gitmem"


@dataclass(frozen=True)
class Mark:
    """The newest commit seen and its sequence number."""

    commit: str
    seq: int


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


class HighWater:
    """The high-water mark of one replica (a repository path) or one remote (a URL) of a store.

    With neither ``replica`` nor ``remote`` it is the single per-store mark of format 1
    clients, which the first replica opened adopts.
    """

    def __init__(
        self,
        store_id: str,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        replica: str | os.PathLike[str] | None = None,
        remote: str | None = None,
    ) -> None:
        self.dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self._legacy = self.dir / f"{store_id}.json"
        if replica is not None:
            self.where = str(Path(replica).resolve())
            self.path = self.dir / store_id / f"replica-{_digest(self.where)}.json"
        elif remote is not None:
            self.where = remote
            self.path = self.dir / store_id / f"remote-{_digest(remote)}.json"
        else:
            self.where = ""
            self.path = self._legacy
        self._dir_made = False

    def read(self) -> Mark | None:
        """The recorded mark, or None when this client has never seen the replica or remote."""
        try:
            return self._read()
        except FileNotFoundError:
            if not self._legacy_to_adopt():
                return None
        with self._locked():
            self._adopt_legacy()
        with contextlib.suppress(FileNotFoundError):
            return self._read()
        return None

    def _read(self) -> Mark | None:
        """The mark in the file; FileNotFoundError when there is none."""
        try:
            body = json.loads(read_regular_file(self.path, _STATE_FILE_MAX))
            return Mark(str(body["commit"]), int(body["seq"]))
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            # A damaged mark (or a FIFO in its place, which must not block) protects nothing;
            # it is replaced by the next one seen.
            return None

    def _legacy_to_adopt(self) -> bool:
        return bool(self.where) and self.path.name.startswith("replica-") and self._legacy.exists()

    def _adopt_legacy(self) -> None:
        """Under the lock: make a format 1 per-store mark the mark of this replica (the first to
        look wins)."""
        if not self._legacy_to_adopt() or self.path.exists():
            return
        with contextlib.suppress(FileNotFoundError):
            os.replace(self._legacy, self.path)
            fsync_dir(self.path.parent)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _state_lock(self.dir):
            if not self._dir_made:
                # Once per instance: should the directory go later, writing the mark makes it.
                make_private_dirs(self.path.parent)
                self._dir_made = True
            yield

    def advance(self, mark: Mark) -> None:
        """Record ``mark`` unless a newer one is already recorded (other processes write too)."""
        with self._locked():
            try:
                current = self._read()
            except FileNotFoundError:
                self._adopt_legacy()
                try:
                    current = self._read()
                except FileNotFoundError:
                    current = None
            if current is not None and current.seq >= mark.seq:
                return
            # Not flushed: every commit a mark names was durable before the mark was written,
            # so the mark is never ahead of the stored branch; a power loss can only take back
            # its latest advances, and the next read of the head re-advances it. The next
            # write's flush of the file system (GitRepo.sync) makes it durable when the state
            # directory shares the repository's file system.
            self._write(mark, durable=False)

    def reset(self, mark: Mark | None) -> None:
        """Replace the mark unconditionally (the user accepted the current branch)."""
        with self._locked():
            if mark is None:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
            else:
                self._write(mark, durable=True)  # a user's decision: it must not be lost

    def _write(self, mark: Mark, *, durable: bool) -> None:
        body: dict[str, object] = {"commit": mark.commit, "seq": mark.seq}
        if self.where:
            body["where"] = self.where
        data = json.dumps(body).encode("utf-8")
        try:
            atomic_write(self.path, data, durable=durable)
        except FileNotFoundError:  # the directory was removed since this instance made it
            make_private_dirs(self.path.parent)
            atomic_write(self.path, data, durable=durable)


@contextlib.contextmanager
def _state_lock(directory: Path) -> Iterator[None]:
    """Hold the exclusive lock of a state directory (made owner-only if missing)."""
    try:
        fd = open_lock_file(directory / ".lock")
    except FileNotFoundError:
        make_private_dirs(directory)
        fd = open_lock_file(directory / ".lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class KnownStores:
    """Which store id this client last saw at each repository path.

    Without it, someone who deletes a store (or just its refs) would make the next
    ``GitMemoryTool`` silently start a new, empty store there, and no high-water mark would
    notice, since the new store has a new id.
    """

    def __init__(self, state_dir: str | os.PathLike[str] | None = None) -> None:
        self.dir = (Path(state_dir) if state_dir is not None else default_state_dir()) / "paths"

    def _file(self, repo: Path) -> Path:
        digest = hashlib.sha256(str(repo.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
        return self.dir / f"{digest[:32]}.json"

    def store_at(self, repo: Path) -> str | None:
        """The id of the store last seen at ``repo``, or None."""
        try:
            return str(json.loads(read_regular_file(self._file(repo), _STATE_FILE_MAX))["store_id"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None

    def remember(self, repo: Path, store_id: str) -> None:
        """Record that ``repo`` holds the store ``store_id``."""
        if self.store_at(repo) == store_id:
            return
        body = json.dumps({"path": str(repo.resolve()), "store_id": store_id})
        # Under the directory's lock, like the marks: concurrent openers take turns.
        with _state_lock(self.dir):
            atomic_write(self._file(repo), body.encode("utf-8"))
