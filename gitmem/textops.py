"""The content semantics of ``str_replace`` and ``insert``, exactly as the SDK reference has them.

Pure functions over text: the store calls them inside its write transaction, so the file a
change is computed from is the file the commit replaces.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import GitMemError


class TextNotFound(GitMemError):
    """``old_str`` does not occur in the file."""


class MultipleMatches(GitMemError):
    """``old_str`` occurs more than once; ``lines`` are the 1-based lines where it starts."""

    def __init__(self, lines: list[int]) -> None:
        self.lines = lines
        super().__init__(f"old_str occurs {len(lines)} times")


class InvalidInsertLine(GitMemError):
    """``insert_line`` is outside ``[0, n_lines]``."""

    def __init__(self, insert_line: int, n_lines: int) -> None:
        self.insert_line = insert_line
        self.n_lines = n_lines
        super().__init__(f"insert_line {insert_line} is outside [0, {n_lines}]")


@dataclass(frozen=True)
class Replacement:
    """The result of a unique replacement: the new text and the 0-based line it starts on."""

    text: str
    changed_line: int


def replace_unique(content: str, old: str, new: str) -> Replacement:
    """Replace the single occurrence of ``old`` in ``content`` by ``new``."""
    count = content.count(old)
    if count == 0:
        raise TextNotFound("old_str not found")
    if count > 1:
        lines: list[int] = []
        start = 0
        # Overlapping matches are reported too, as the reference does (it advances by one).
        while (pos := content.find(old, start)) != -1:
            lines.append(content.count("\n", 0, pos) + 1)
            start = pos + 1
        raise MultipleMatches(lines)
    pos = content.find(old)
    return Replacement(content.replace(old, new), content.count("\n", 0, pos))


def split_lines_keeping_cr(content: str) -> list[str]:
    """Split on LF only (CR stays), without the empty tail a trailing newline leaves."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def insert_at(content: str, insert_line: int, text: str) -> str:
    """Insert ``text`` as lines after line ``insert_line`` (0 = before the first line)."""
    lines = split_lines_keeping_cr(content)
    if insert_line < 0 or insert_line > len(lines):
        raise InvalidInsertLine(insert_line, len(lines))
    lines.insert(insert_line, text.rstrip("\n"))
    result = "\n".join(lines)
    return result if result.endswith("\n") else result + "\n"
