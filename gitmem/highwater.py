"""The client's high-water mark: the newest commit it has seen of each store, kept outside it.

An attacker who can write the repository can point the branch back at an older, authentic
commit; only state the repository does not hold can notice. The mark lives in a per-user state
directory (``GITMEM_STATE_DIR``, else ``$XDG_STATE_HOME/gitmem``, else ``~/.local/state/gitmem``),
one owner-only JSON file per store id.
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


class HighWater:
    """The high-water mark of one store."""

    def __init__(self, store_id: str, state_dir: str | os.PathLike[str] | None = None) -> None:
        self.dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.path = self.dir / f"{store_id}.json"

    def read(self) -> Mark | None:
        """The recorded mark, or None when this client has never seen the store."""
        try:
            body = json.loads(self.path.read_text("utf-8"))
            return Mark(str(body["commit"]), int(body["seq"]))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            # A damaged mark protects nothing; it is replaced by the next one seen.
            return None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def advance(self, mark: Mark) -> None:
        """Record ``mark`` unless a newer one is already recorded (other processes write too)."""
        with self._locked():
            current = self.read()
            if current is not None and current.seq >= mark.seq:
                return
            self._write(mark)

    def reset(self, mark: Mark | None) -> None:
        """Replace the mark unconditionally (the user accepted the current branch)."""
        with self._locked():
            if mark is None:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
            else:
                self._write(mark)

    def _write(self, mark: Mark) -> None:
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"commit": mark.commit, "seq": mark.seq}, handle)
            handle.flush()
            # A mark lost to a power cut would let a rollback of that last step pass unseen.
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.dir)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
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
            return str(json.loads(self._file(repo).read_text("utf-8"))["store_id"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None

    def remember(self, repo: Path, store_id: str) -> None:
        """Record that ``repo`` holds the store ``store_id``."""
        if self.store_at(repo) == store_id:
            return
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = self._file(repo)
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        body = {"path": str(repo.resolve()), "store_id": store_id}
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(body, handle)
        os.replace(tmp, target)
