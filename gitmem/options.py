"""``StoreOptions``: the settings of an open store, in one frozen value.

The tool constructors, :meth:`gitmem.MemoryStore.open`, :meth:`~gitmem.MemoryStore.init` and
the store itself take one ``options=StoreOptions(...)``; each also takes the same settings as
keyword arguments (``session=...``), which override the ones in ``options``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from .errors import UsageError, shown_repr
from .fsutil import local_path
from .limits import Limits
from .secrets import DEFAULT_POLICY, SecretPolicy, check_policy

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_LOCK_TIMEOUT = 30.0
# The seconds a remote has to let gitmem connect and to answer each read or write of a
# transfer, unless GITMEM_NETWORK_TIMEOUT or the caller says otherwise (docs/sync.md).
DEFAULT_NETWORK_TIMEOUT = 30.0
NETWORK_TIMEOUT_ENV = "GITMEM_NETWORK_TIMEOUT"
MAX_NETWORK_TIMEOUT = 86400.0
# The longest session label: it goes into every commit's record and every log line. Ample for
# any name, a UUID or a timestamped label, and well inside a revision's 1,000 characters, so
# that `session:NAME` can always name it.
MAX_SESSION_CHARS = 256
# The memory tool's sync policy (docs/sync.md): "manual" never touches the network; "pull"
# pulls from the remote when the tool is opened; "push" also pushes after each write.
SyncPolicy = Literal["manual", "pull", "push"]
SYNC_POLICIES: tuple[SyncPolicy, ...] = ("manual", "pull", "push")
# Seconds after a process's last write before its logged writes are published for plain git.
DEFAULT_PUBLISH_IDLE = 1.0
ENV_PUBLISH_IDLE = "GITMEM_PUBLISH_IDLE"


def default_publish_idle() -> float | None:
    """``GITMEM_PUBLISH_IDLE`` (seconds, or ``off``), else :data:`DEFAULT_PUBLISH_IDLE`."""
    text = os.environ.get(ENV_PUBLISH_IDLE, "").strip()
    if not text:
        return DEFAULT_PUBLISH_IDLE
    if text.lower() == "off":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < math.inf:
        raise UsageError(
            f"{ENV_PUBLISH_IDLE} must be a number of seconds (0 or more) or 'off', not "
            f"{shown_repr(text)}"
        )
    return value


@dataclass(frozen=True)
class StoreOptions:
    """How a store is used: who writes, how long to wait, which safeguards hold.

    ``session`` labels every commit (a fresh unique label when None); ``lock_timeout`` is the
    seconds a write waits for another writer; ``state_dir`` holds the high-water marks (None:
    the per-user state directory); ``check_rollback`` turns rollback detection on; ``limits``
    caps sizes (``docs/safeguards.md``); ``secrets`` is ``reject``, ``redact`` or ``allow``.
    ``remote`` (a remote name or URL) and ``sync`` (``manual``, ``pull``, ``push``) are the
    memory tool's sync policy (``docs/sync.md``); the library's own methods ignore them.
    ``publish_idle`` is the seconds after this process's last write at which its logged writes
    are published for plain git, on a background thread (None: only at ``close`` and exit);
    by default ``GITMEM_PUBLISH_IDLE`` or one second.
    ``network_timeout`` is the seconds a remote has to answer (None: ``GITMEM_NETWORK_TIMEOUT``,
    else 30); see :func:`network_timeout`.
    """

    session: str | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    state_dir: str | os.PathLike[str] | None = None
    check_rollback: bool = True
    limits: Limits = field(default_factory=Limits)
    secrets: SecretPolicy = DEFAULT_POLICY
    remote: str | None = None
    sync: SyncPolicy = "manual"
    publish_idle: float | None = field(default_factory=default_publish_idle)
    network_timeout: float | None = None

    def __post_init__(self) -> None:
        if self.session is not None and not isinstance(self.session, str):
            raise TypeError(f"session must be a str or None, not {type(self.session).__name__}")
        if self.session == "":
            raise UsageError("session must not be empty: give a label, or None for a fresh one")
        if self.session is not None:
            check_session_label(self.session)
        timeout = self.lock_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(
                f"lock_timeout must be a number of seconds, not {type(timeout).__name__}"
            )
        if not 0 <= timeout < math.inf:
            raise UsageError(f"lock_timeout must be 0 or more seconds, not {timeout}")
        if self.network_timeout is not None:
            check_network_timeout(self.network_timeout, "network_timeout")
        # A mistyped value (a dict for limits, "no" for check_rollback) would be accepted here
        # and fail on every later command, or silently mean something else.
        if not isinstance(self.limits, Limits):
            raise TypeError(f"limits must be a gitmem.Limits, not {type(self.limits).__name__}")
        if not isinstance(self.check_rollback, bool):
            raise TypeError(
                f"check_rollback must be True or False, not {type(self.check_rollback).__name__}"
            )
        if self.state_dir is not None:
            local_path(self.state_dir, "state directory, or None for the per-user one")
        if self.remote is not None and not isinstance(self.remote, str):
            raise TypeError(f"remote must be a str or None, not {type(self.remote).__name__}")
        check_policy(self.secrets)
        if self.sync not in SYNC_POLICIES:
            raise UsageError(f"unknown sync policy {self.sync!r}: use manual, pull or push")
        if self.sync != "manual" and self.remote is None:
            raise UsageError(f"the sync policy {self.sync!r} needs a remote")
        idle = self.publish_idle
        if idle is not None:
            if isinstance(idle, bool) or not isinstance(idle, (int, float)):
                raise TypeError(
                    f"publish_idle must be a number of seconds or None, not {type(idle).__name__}"
                )
            if not 0 <= idle < math.inf:
                raise UsageError(f"publish_idle must be 0 or more seconds, or None, not {idle}")

    @classmethod
    def of(cls, options: StoreOptions | None = None, **settings: Unpack[Settings]) -> StoreOptions:
        """``options`` (default: all defaults) with the keyword ``settings`` given over it.

        ``limits=None`` means the default limits, as the keyword arguments always have.
        """
        if options is not None and not isinstance(options, StoreOptions):
            raise TypeError(
                f"options must be a gitmem.StoreOptions or None, not {type(options).__name__}"
            )
        base = cls() if options is None else options
        if not settings:
            return base
        given: dict[str, Any] = dict(settings)
        if given.get("limits", Limits()) is None:
            given["limits"] = Limits()
        return dataclasses.replace(base, **given)


def check_network_timeout(seconds: object, name: str = "timeout") -> float:
    """``seconds`` if it is a usable network timeout: a number above 0, at most a day."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(seconds).__name__}")
    if not 0 < seconds <= MAX_NETWORK_TIMEOUT:
        raise UsageError(
            f"{name} must be more than 0 seconds and at most {MAX_NETWORK_TIMEOUT:g}, not {seconds}"
        )
    return float(seconds)


def network_timeout(options: StoreOptions | None = None, given: float | None = None) -> float:
    """The seconds a remote has to answer: ``given``, else ``options.network_timeout``, else
    ``GITMEM_NETWORK_TIMEOUT``, else :data:`DEFAULT_NETWORK_TIMEOUT` (30).

    The timeout bounds connecting and each read or write of a transfer, not the transfer as a
    whole: a large one that keeps moving is never cut off.
    """
    if given is not None:
        return check_network_timeout(given)
    if options is not None and options.network_timeout is not None:
        return float(options.network_timeout)
    text = os.environ.get(NETWORK_TIMEOUT_ENV)
    if not text:
        return DEFAULT_NETWORK_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_NETWORK_TIMEOUT:
        raise UsageError(
            f"{NETWORK_TIMEOUT_ENV} must be a number of seconds above 0 and at most "
            f"{MAX_NETWORK_TIMEOUT:g}, not {shown_repr(text)}"
        )
    return value


def check_session_label(label: str) -> None:
    """Refuse a session label that is too long or not printable text (:class:`UsageError`)."""
    if len(label) > MAX_SESSION_CHARS:
        raise UsageError(
            f"the session label is {len(label):,} characters long; at most "
            f"{MAX_SESSION_CHARS} are allowed (it is recorded in every commit)"
        )
    # A control character (a newline from a script) or a lone surrogate (a byte of a
    # GITMEM_SESSION that is not UTF-8) would be kept in every record: log lines break, and
    # `log --json` would print text that is not UTF-8.
    for char in label:
        if unicodedata.category(char) in ("Cc", "Cs"):
            raise UsageError(
                f"the session label {shown_repr(label)} contains {shown_repr(char)}, which "
                "is not printable text: use letters, digits, spaces and punctuation"
            )


class Settings(TypedDict, total=False):
    """The keyword form of :class:`StoreOptions`' fields, for ``**settings`` parameters."""

    session: str | None
    lock_timeout: float
    state_dir: str | os.PathLike[str] | None
    check_rollback: bool
    limits: Limits | None
    secrets: SecretPolicy
    remote: str | None
    sync: SyncPolicy
    publish_idle: float | None
    network_timeout: float | None


__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_NETWORK_TIMEOUT",
    "DEFAULT_PUBLISH_IDLE",
    "ENV_PUBLISH_IDLE",
    "MAX_NETWORK_TIMEOUT",
    "MAX_SESSION_CHARS",
    "NETWORK_TIMEOUT_ENV",
    "SYNC_POLICIES",
    "Settings",
    "StoreOptions",
    "SyncPolicy",
    "check_network_timeout",
    "check_session_label",
    "default_publish_idle",
    "network_timeout",
]
