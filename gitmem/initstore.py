"""Creating a store together with a key kept safely, as ``gitmem init`` does.

The key is the one already in ``GITMEM_KEY`` / ``GITMEM_KEY_FILE`` when either is set (so the
store opens with it later), else a new one, saved once to the per-user key file (owner-only),
where every later open of the store finds it by the store's id. Nothing here prints a key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .crypto import decode_key, generate_key
from .errors import StorageError, UsageError
from .fsutil import fsync_dir, local_path
from .keysource import ENV_KEY, ENV_KEY_FILE, resolve_key, user_key_path, write_key_file
from .store import MemoryStore


@dataclass(frozen=True)
class NewStore:
    """A store :func:`init_store` made, and where its key is kept."""

    store: MemoryStore
    key: bytes
    key_source: str
    """``GITMEM_KEY`` or ``GITMEM_KEY_FILE`` (the key came from there), else ``file`` or
    ``none`` (a new key, saved to ``key_file`` or, with ``save_key=False``, nowhere)."""
    key_file: Path | None


def init_store(path: str | os.PathLike[str], *, save_key: bool = True) -> NewStore:
    """Create a store at ``path`` with a key that outlives the run.

    ``path`` must be vacant (:meth:`MemoryStore.vacant`: nothing, an empty directory or an empty
    git repository); otherwise :class:`UsageError`.
    """
    target = local_path(path, "store's path")
    if not MemoryStore.vacant(target):
        raise UsageError(
            f"{target} already exists and is neither empty nor an empty git repository"
        )
    source = (
        ENV_KEY
        if os.environ.get(ENV_KEY)
        else ENV_KEY_FILE
        if os.environ.get(ENV_KEY_FILE)
        else None
    )
    key = resolve_key(None, None) if source else decode_key(generate_key())
    if source is not None or not save_key:
        return NewStore(MemoryStore.init(target, key), key, source or "none", None)
    # The key file is named after the store's id, which the store's creation draws; but a key
    # directory that cannot be written must fail before there is a store nobody could open.
    # So the key is saved first under a name of its own, and renamed once the id is known.
    pending = user_key_path(f".new-{os.urandom(8).hex()}")
    write_key_file(pending, key)
    try:
        store = MemoryStore.init(target, key)
    except BaseException:
        pending.unlink(missing_ok=True)
        raise
    key_path = user_key_path(store.store_id)
    try:
        os.rename(pending, key_path)
        fsync_dir(key_path.parent)
    except OSError as exc:
        raise StorageError(
            f"the store at {target} was made, but its key could not be given its name: "
            f"{exc.strerror or exc}; it is in {pending}: rename that file to {key_path}"
        ) from None
    return NewStore(store, key, "file", key_path)


__all__ = ["NewStore", "init_store"]
