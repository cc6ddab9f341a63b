"""Expiry: find the memory files nobody has written for a while, and remove them as one commit.

"Untouched" is defined by history alone. A file's *last touch* is the time recorded in the
newest commit that wrote it: ``create``, ``str_replace``, ``insert``, ``rename`` (the new path,
and every file under it when a directory moves), ``restore`` (the files it changed) and
``import``, or any other command listing the path, except ``delete`` and ``expire``, which
remove. Reads do not count: ``view`` is read-only by design and leaves nothing in the
repository, and recording reads would mean a commit per ``view``.

The history is walked once, newest first, and the walk stops as soon as every file at the head
has a last touch, so a store whose files were all written recently costs a few commits however
long its history is. :meth:`gitmem.MemoryStore.expire` runs the removal as one ``expire`` commit
listing the removed paths, so ``gitmem restore`` of its parent brings them back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .errors import UsageError, shown_repr
from .format import KIND_FILE
from .operation import History, Operation
from .paths import MemoryPath
from .snapshot import Snapshot

# Commands that take files away rather than write them.
REMOVING_COMMANDS = frozenset({"delete", "expire"})
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(?:\d+[smhdw])+")
_PART = re.compile(r"(\d+)([smhdw])")


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``2w``, ``1d12h``... as a timedelta (units s, m, h, d, w)."""
    compact = text.strip().lower()
    if not _DURATION.fullmatch(compact):
        raise UsageError(
            f"invalid duration {shown_repr(text)}: use a number and a unit, e.g. 90d, 12h, 2w "
            "or 1d12h (units: s, m, h, d, w)"
        )
    try:
        return timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in _PART.findall(compact)))
    except (ValueError, OverflowError):  # more digits than int() takes, or past timedelta's max
        raise UsageError(
            f"invalid duration {shown_repr(text)}: at most {timedelta.max.days:,} days"
        ) from None


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class FileAge:
    """A file at the head and its last touch: the time and id of the newest commit writing it."""

    path: MemoryPath
    last_touched: datetime
    commit: str

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form."""
        return {
            "path": str(self.path),
            "last_touched": _iso(self.last_touched),
            "commit": self.commit,
        }


@dataclass(frozen=True)
class ExpiryResult:
    """What :meth:`gitmem.MemoryStore.expire` found and did.

    ``expired`` are the files last touched before ``cutoff`` (``now - older_than``), oldest
    first; ``kept`` counts the others. ``operation`` is the ``expire`` commit, or None for a dry
    run or when nothing was old enough.
    """

    older_than: timedelta
    now: datetime
    cutoff: datetime
    expired: tuple[FileAge, ...]
    kept: int
    dry_run: bool
    operation: Operation | None = None

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form (fields only ever grow)."""
        return {
            "dry_run": self.dry_run,
            "older_than_seconds": self.older_than.total_seconds(),
            "now": _iso(self.now),
            "cutoff": _iso(self.cutoff),
            "commit": None if self.operation is None else self.operation.commit,
            "expired": [f.to_json() for f in self.expired],
            "kept": self.kept,
        }


def last_touches(store: History, head: Operation | None) -> dict[MemoryPath, FileAge]:
    """Every file at ``head`` with its last touch, from one newest-first walk of the history.

    A file no commit in the history names (only possible in a history not written by gitmem)
    gets the oldest commit's time.
    """
    if head is None:
        return {}
    pending: dict[str, MemoryPath] = {}
    under: dict[str, list[str]] = {}
    for path, node in Snapshot(store.codec, head.tree).walk():
        if node.kind != KIND_FILE:
            continue
        key = str(path)
        pending[key] = path
        for depth in range(len(path.parts)):
            under.setdefault(str(MemoryPath(path.parts[:depth])), []).append(key)
    ages: dict[MemoryPath, FileAge] = {}
    oldest: Operation | None = None
    for op in store.log(head.commit) if pending else ():
        oldest = op
        if op.command not in REMOVING_COMMANDS:
            written = op.paths[1:] if op.command == "rename" else op.paths
            for touched in written:
                for key in (touched, *under.get(touched, ())):
                    if key in pending:
                        path = pending.pop(key)
                        ages[path] = FileAge(path, op.record.time, op.commit)
        if not pending:
            break
    if oldest is not None:
        for path in pending.values():
            ages[path] = FileAge(path, oldest.record.time, oldest.commit)
    return ages


def plan_expiry(
    store: History, head: Operation | None, older_than: timedelta, now: datetime
) -> ExpiryResult:
    """Which files at ``head`` were last touched before ``now - older_than`` (a dry run)."""
    if not isinstance(older_than, timedelta):
        raise TypeError(
            "older_than must be a datetime.timedelta (gitmem.parse_duration('90d') gives one), "
            f"not {type(older_than).__name__}"
        )
    if older_than <= timedelta(0):
        raise UsageError("the expiry age must be a positive duration")
    if now.tzinfo is None:
        raise UsageError("`now` must be a timezone-aware datetime")
    cutoff = now - older_than
    ages = last_touches(store, head)
    expired = sorted(
        (a for a in ages.values() if a.last_touched < cutoff),
        key=lambda a: (a.last_touched, a.path),
    )
    return ExpiryResult(
        older_than=older_than,
        now=now,
        cutoff=cutoff,
        expired=tuple(expired),
        kept=len(ages) - len(expired),
        dry_run=True,
    )


__all__ = [
    "REMOVING_COMMANDS",
    "ExpiryResult",
    "FileAge",
    "last_touches",
    "parse_duration",
    "plan_expiry",
]
