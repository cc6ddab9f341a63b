"""``SyncResult``: what a pull, push or sync did (``docs/cli.md``, "Sync object")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .operation import Operation


@dataclass(frozen=True)
class SyncResult:
    """What a pull, push or sync did. ``action`` is one of ``up-to-date``, ``fast-forward``,
    ``merged``, ``pushed``, ``empty`` (the remote holds nothing yet). ``redaction`` is the
    ``redact`` operation of another replica that this pull adopted (this replica's history was
    moved onto the rewritten one), or None."""

    remote: str
    url: str
    action: str
    head: str | None
    remote_head: str | None
    merge: Operation | None = None
    redaction: Operation | None = None

    @property
    def conflicts(self) -> list[dict[str, str]]:
        """The conflicts the merge kept as siblings (empty without a merge)."""
        if self.merge is None:
            return []
        return list(self.merge.record.detail.get("conflicts", []))

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form (fields only ever grow)."""
        return {
            "remote": self.remote,
            "url": self.url,
            "action": self.action,
            "head": self.head,
            "remote_head": self.remote_head,
            "merge": None if self.merge is None else self.merge.to_json(),
            "conflicts": self.conflicts,
            "redaction": None if self.redaction is None else self.redaction.to_json(),
        }
