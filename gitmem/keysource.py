"""Where a store's key comes from: an argument, ``GITMEM_KEY``, ``GITMEM_KEY_FILE``, or the
per-user key file that ``gitmem init`` writes for the store's id. Nothing here logs or echoes
key material; a key file readable by anyone but its owner is refused.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .crypto import decode_key, encode_key
from .errors import KeyMissing, WrongKey
from .fsutil import FILE_MODE, read_regular_file, write_new_file

ENV_KEY = "GITMEM_KEY"
ENV_KEY_FILE = "GITMEM_KEY_FILE"
# Key text is 61 characters; a file much longer than that holds no key.
_KEY_FILE_MAX = 4096


def config_dir() -> Path:
    """The per-user configuration directory (``GITMEM_CONFIG_DIR``, else XDG, else ~/.config)."""
    explicit = os.environ.get("GITMEM_CONFIG_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "gitmem"


def user_key_path(store_id: str) -> Path:
    """The per-user key file of the store with id ``store_id``."""
    return config_dir() / "keys" / f"{store_id}.key"


def read_key_file(path: Path) -> bytes:
    """The key in ``path``; refuses files other users can read or that do not hold a key."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise KeyMissing(f"the key file {path} does not exist") from None
    if not stat.S_ISREG(info.st_mode):
        raise KeyMissing(f"the key file {path} is not a regular file")
    if info.st_mode & 0o777 & ~FILE_MODE:
        raise WrongKey(f"the key file {path} is accessible to other users; run: chmod 600 {path}")
    try:
        # Never blocks: the file may have been swapped for a FIFO since the stat above.
        text = read_regular_file(path, _KEY_FILE_MAX).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WrongKey(f"the key file {path} cannot be read: {type(exc).__name__}") from None
    try:
        return decode_key(text)
    except WrongKey as exc:
        raise WrongKey(f"the key file {path}: {exc}") from None


def resolve_key(explicit: str | bytes | None, store_id: str | None) -> bytes:
    """The raw key from the first source that has one, in the documented order."""
    if explicit is not None:
        return decode_key(explicit)
    env_key = os.environ.get(ENV_KEY)
    if env_key:
        try:
            return decode_key(env_key)
        except WrongKey as exc:
            raise WrongKey(f"{ENV_KEY}: {exc}") from None
    env_file = os.environ.get(ENV_KEY_FILE)
    if env_file:
        return read_key_file(Path(env_file))
    candidate = None if store_id is None else user_key_path(store_id)
    if candidate is not None and candidate.exists():
        return read_key_file(candidate)
    per_user = "" if candidate is None else f", or save it (mode 0600) as {candidate}"
    raise KeyMissing(
        f"no key given: pass key=..., set {ENV_KEY} to the key text, or set {ENV_KEY_FILE} to "
        f"a file holding it{per_user} (gitmem.generate_key() or `gitmem init` makes one)",
        searched=True,
        key_file=candidate,
    )


def write_key_file(path: Path, key: bytes) -> None:
    """Write ``key`` to a new owner-only file at ``path`` (never overwrites)."""
    write_new_file(path, (encode_key(key) + "\n").encode("utf-8"))
