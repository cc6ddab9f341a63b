"""What a redaction found and did (:class:`Redaction`), below the store so that
:meth:`MemoryStore.redact` can name it; the work is :mod:`gitmem.redact`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .operation import Operation

MARKER = "[redacted]"
"""What every occurrence of a redacted text becomes."""

COMMAND = "redact"
"""The command of the operation a redaction appends."""


@dataclass(frozen=True)
class Holding:
    """Operation ``operation`` wrote a version of file ``path`` that holds the text."""

    operation: Operation
    path: str

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form: the operation's fields and the path (never the text)."""
        return {
            "commit": self.operation.commit,
            "seq": self.operation.seq,
            "time": self.operation.record.time.isoformat().replace("+00:00", "Z"),
            "session": self.operation.session,
            "command": self.operation.command,
            "path": self.path,
        }


@dataclass(frozen=True)
class Redaction:
    """What :meth:`MemoryStore.redact` found, and (unless a dry run) did.

    ``holding``: every operation that wrote a version holding the text, with the path, oldest
    first; ``versions``: how many distinct file versions hold it; ``operations``: how many
    operations the rewrite commits again (from the first that holds it to the head);
    ``operation``: the ``redact`` operation appended (None for a dry run).
    """

    holding: tuple[Holding, ...]
    versions: int
    operations: int
    paths: tuple[str, ...]
    operation: Operation | None = None

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form (fields only ever grow)."""
        return {
            "holding": [h.to_json() for h in self.holding],
            "versions": self.versions,
            "operations": self.operations,
            "paths": list(self.paths),
            "operation": None if self.operation is None else self.operation.to_json(),
        }


__all__ = ["COMMAND", "MARKER", "Holding", "Redaction"]
