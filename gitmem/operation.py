"""``Operation``, one authenticated commit of the memory, and ``History``, what reads it.

Modules below the store (expiry, revisions) take a :class:`History` rather than the store
itself, so they never import it; :class:`gitmem.MemoryStore` is one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .format import Record
from .tree import TreeCodec


@dataclass(frozen=True)
class Operation:
    """One commit of the memory, authenticated and decrypted."""

    commit: str
    parents: tuple[str, ...]
    tree: str
    record: Record
    epoch: int = field(default=0, compare=False)
    """The key epoch its record was sealed in (0 until the store's first key rotation)."""

    @property
    def seq(self) -> int:
        """The operation's sequence number (1 for the first)."""
        return self.record.seq

    @property
    def session(self) -> str:
        """The session label of the writer."""
        return self.record.session

    @property
    def command(self) -> str:
        """The memory command (or ``restore``) the commit records."""
        return self.record.command

    @property
    def paths(self) -> tuple[str, ...]:
        """The memory paths touched; ``(old, new)`` for a rename."""
        return self.record.paths

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form (fields only ever grow)."""
        return {
            "commit": self.commit,
            "seq": self.record.seq,
            "time": self.record.time.isoformat().replace("+00:00", "Z"),
            "session": self.record.session,
            "command": self.record.command,
            "paths": list(self.record.paths),
            "parents": list(self.parents),
            "gitmem": self.record.version,
            "detail": self.record.detail,
        }


class History(Protocol):
    """Read access to a store's authenticated history (:class:`gitmem.MemoryStore` is one)."""

    @property
    def codec(self) -> TreeCodec:
        """Reads and decrypts the store's trees and files."""
        ...

    def log(self, rev: str | None = None) -> Iterator[Operation]:
        """Every operation reachable from ``rev`` (default: the head), newest first."""
        ...


__all__ = ["History", "Operation"]
