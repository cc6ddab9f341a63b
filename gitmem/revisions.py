"""Revision and time syntax: what ``HEAD~2``, ``session:NAME``, ``@{2h}`` and ``--since 3d`` mean.

:meth:`gitmem.MemoryStore.resolve` parses a revision with :func:`split_revision` and hands the
``session:`` and ``@{...}`` forms to :func:`resolve_named`; the CLI's ``--since``/``--until``/
``--before`` go through :func:`parse_time`. Times are compared with the time in each commit's
encrypted record, since a gitmem commit's git timestamps are all zero.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from .errors import UsageError, shown_repr

if TYPE_CHECKING:
    from .operation import History

SESSION_PREFIX = "session:"
_SUFFIX = re.compile(r"(?:~\d*|\^)*\Z")
_UNIT_SECONDS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 7 * 86400,
    "week": 7 * 86400,
    "weeks": 7 * 86400,
}
_RELATIVE = re.compile(r"(\d+)\s*([a-z]+)(?:\s+ago)?")


# The longest revision text accepted (a session label, a time, an id, with a ~N suffix).
MAX_REVISION_CHARS = 1_000


def parse_time(text: str, *, now: datetime | None = None) -> datetime:
    """A point in time from ISO 8601 or a relative form, as an aware datetime.

    Accepted: ``2025-06-01``, ``2025-06-01T14:30``, ``2025-06-01 14:30:00+02:00``, ``...Z``
    (no offset = local time); ``90m``, ``2h``, ``3d``, ``1w`` (also ``3 days ago``), counted
    back from ``now``; ``now``, ``today`` and ``yesterday`` (local midnight).
    """
    moment = datetime.now(timezone.utc) if now is None else now
    compact = text.strip().lower()
    if compact == "now":
        return moment
    if compact in ("today", "yesterday"):
        local = moment.astimezone()
        midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
        return midnight - timedelta(days=1) if compact == "yesterday" else midnight
    relative = _RELATIVE.fullmatch(compact)
    if relative and relative.group(2) in _UNIT_SECONDS:
        try:
            return moment - timedelta(seconds=int(relative.group(1)) * _UNIT_SECONDS[relative[2]])
        except (ValueError, OverflowError):  # too many digits for int(), or before year 1
            raise UsageError(
                f"invalid time {shown_repr(text)}: that is further back than dates go"
            ) from None
    iso = text.strip()
    if iso[-1:] in ("Z", "z"):
        iso = iso[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(iso)
    except ValueError:
        raise UsageError(
            f"invalid time {shown_repr(text)}: use ISO 8601 (2025-06-01, 2025-06-01T14:30:00Z) "
            "or a relative time (90m, 2h, 3d, 1w, '3 days ago', today, yesterday)"
        ) from None
    return parsed.astimezone() if parsed.tzinfo is None else parsed


def check_moment(name: str, value: datetime) -> datetime:
    """``value`` if it is a timezone-aware datetime: a naive one (``datetime.now()``) cannot be
    compared with the recorded times; :class:`UsageError`, or ``TypeError`` for a non-datetime.
    """
    if not isinstance(value, datetime):
        raise TypeError(
            f"`{name}` must be a datetime (gitmem.revisions.parse_time('2d') gives one), "
            f"not {type(value).__name__}"
        )
    if value.utcoffset() is None:
        raise UsageError(f"`{name}` must be a timezone-aware datetime")
    return value


def split_revision(rev: str) -> tuple[str, int]:
    """``(base, steps)``: the revision without its ``~N``/``^`` suffix, and how many first
    parents that suffix walks back. ``@{...}`` ends at its closing brace."""
    if len(rev) > MAX_REVISION_CHARS:
        # Refused first, so that no message below repeats more than this much of it.
        raise UsageError(
            f"unknown revision {shown_repr(rev, 60)}: a revision is at most "
            f"{MAX_REVISION_CHARS:,} characters"
        )
    text = rev.strip()
    if text.startswith("@{"):
        close = text.find("}")
        if close < 0:
            raise UsageError(f"unknown revision {rev!r}: '@{{' without a closing '}}'")
        base, suffix = text[: close + 1], text[close + 1 :]
    else:
        match = _SUFFIX.search(text)
        assert match is not None  # the pattern matches the empty string at the end
        base, suffix = text[: match.start()], match.group(0)
    if not _SUFFIX.fullmatch(suffix):
        raise UsageError(f"unknown revision {rev!r}")
    steps = 0
    for part in re.findall(r"~\d*|\^", suffix):
        steps += 1 if part in ("~", "^") else int(part[1:])
    return base, steps


def resolve_named(store: History, base: str, rev: str) -> str | None:
    """The commit a ``session:NAME`` or ``@{TIME}`` base names; None for any other form.

    ``session:NAME`` is that session's newest operation; ``@{TIME}`` the newest operation made
    at or before TIME. Raises :class:`UsageError` when there is none.
    """
    if base.startswith(SESSION_PREFIX):
        name = base[len(SESSION_PREFIX) :]
        if not name:
            raise UsageError(f"unknown revision {rev!r}: give a session name after 'session:'")
        for op in store.log():
            if op.session == name:
                return op.commit
        raise UsageError(f"unknown revision {rev!r}: no operation of session {name!r}")
    if base.startswith("@{") and base.endswith("}"):
        when = parse_time(base[2:-1])
        for op in store.log():
            if op.record.time <= when:
                return op.commit
        raise UsageError(f"unknown revision {rev!r}: the memory has no operation that old")
    return None


__all__ = ["SESSION_PREFIX", "check_moment", "parse_time", "resolve_named", "split_revision"]
