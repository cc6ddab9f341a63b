"""Where a store's key comes from, in this order: the ``key=`` argument, the ``passphrase=``
argument, ``GITMEM_KEY``, ``GITMEM_KEY_FILE``, ``GITMEM_PASSPHRASE``, the per-user key file that
``gitmem init`` writes for the store's id, and (the CLI only) a hidden prompt on a terminal.
Nothing here logs or echoes key material; a key file readable by anyone but its owner is refused.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .crypto import decode_key, encode_key
from .errors import KeyMissing, WrongKey
from .fsutil import (
    FILE_MODE,
    explicit_dir,
    read_regular_file,
    refuse_key_text,
    user_dir,
    write_new_file,
)

ENV_KEY = "GITMEM_KEY"
ENV_KEY_FILE = "GITMEM_KEY_FILE"
# Key text is 61 characters; a file much longer than that holds no key.
_KEY_FILE_MAX = 4096
ENV_PASSPHRASE = "GITMEM_PASSPHRASE"
SECRET_VARIABLES = (ENV_KEY, ENV_PASSPHRASE, "GITMEM_SSH_PASSPHRASE", "GITMEM_HTTPS_TOKEN")
"""The environment variables that hold secrets: no program gitmem starts (a pager) inherits
them."""


def config_dir() -> Path:
    """The per-user configuration directory (``GITMEM_CONFIG_DIR``, else XDG, else ~/.config)."""
    explicit = explicit_dir("GITMEM_CONFIG_DIR")
    if explicit is not None:
        return explicit
    return user_dir("XDG_CONFIG_HOME", ".config") / "gitmem"


def user_key_path(store_id: str) -> Path:
    """The per-user key file of the store with id ``store_id``."""
    return config_dir() / "keys" / f"{store_id}.key"


def read_key_file(path: Path) -> bytes:
    """The key in ``path``; refuses files other users can read or that do not hold a key, and
    key text given as the path."""
    refuse_key_text(path, "the key file's path")
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
    if not text.strip().removeprefix("\ufeff").strip():  # as decode_key reads it
        raise WrongKey(f"the key file {path} is empty: it should hold the store's key text")
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


@dataclass(frozen=True)
class Credential:
    """A raw key or a passphrase, and where it came from (``source``, for messages)."""

    source: str
    key: bytes | None = field(default=None, repr=False)
    passphrase: str | None = field(default=None, repr=False)


def resolve_credential(
    key: str | bytes | None,
    passphrase: str | None,
    store_id: str | None,
    prompt: Callable[[], str] | None = None,
    *,
    passphrase_slots: bool = True,
) -> Credential:
    """The credential from the first source that has one, in the documented order.

    ``prompt`` (the CLI's hidden terminal prompt) is asked last, only when nothing else gave one.
    ``GITMEM_PASSPHRASE`` and the prompt are skipped for a store without passphrase slots.
    """
    if key is not None:
        return Credential("key=", key=decode_key(key))
    if passphrase is not None:
        return Credential("passphrase=", passphrase=passphrase)
    if os.environ.get(ENV_KEY) or os.environ.get(ENV_KEY_FILE):
        return Credential(
            ENV_KEY if os.environ.get(ENV_KEY) else ENV_KEY_FILE, key=resolve_key(None, None)
        )
    env_passphrase = os.environ.get(ENV_PASSPHRASE) if passphrase_slots else None
    if env_passphrase:
        return Credential(ENV_PASSPHRASE, passphrase=env_passphrase)
    candidate = None if store_id is None else user_key_path(store_id)
    if candidate is not None and candidate.exists():
        return Credential(str(candidate), key=read_key_file(candidate))
    if prompt is not None and passphrase_slots:
        return Credential("prompt", passphrase=prompt())
    try:
        return Credential("", key=resolve_key(None, store_id))
    except KeyMissing as exc:
        if not passphrase_slots or store_id is None:
            raise
        raise KeyMissing(
            f"{exc}; or pass passphrase=... or set {ENV_PASSPHRASE} to the passphrase of one of "
            "the store's key slots",
            searched=exc.searched,
            key_file=exc.key_file,
            passphrase_slots=True,
        ) from None
