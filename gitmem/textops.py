"""The content semantics of ``str_replace`` and ``insert``, exactly as the SDK reference has them.

Pure functions over text. The store finds ``str_replace``'s match before it takes the writer
lock and redoes the search under the lock only if the file changed meanwhile, so the file a change
is computed from is always the file the commit replaces.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import GitMemError, shown_int


class TextNotFound(GitMemError):
    """``old_str`` does not occur in the file."""


class MultipleMatches(GitMemError):
    """``old_str`` occurs more than once: ``total`` times at least (overlapping matches count as
    the reference counts them, by advancing one character). ``lines`` are the 1-based lines
    where the first :data:`MAX_LISTED_MATCHES` of them start."""

    def __init__(self, lines: list[int], total: int) -> None:
        self.lines = lines
        self.total = total
        super().__init__(f"old_str occurs {total:,} times or more")

    @property
    def complete(self) -> bool:
        """True when ``lines`` lists every occurrence."""
        return len(self.lines) >= self.total


class InvalidInsertLine(GitMemError):
    """``insert_line`` is outside ``[0, n_lines]``."""

    def __init__(self, insert_line: int, n_lines: int) -> None:
        self.insert_line = insert_line
        self.n_lines = n_lines
        super().__init__(f"insert_line {shown_int(insert_line)} is outside [0, {n_lines}]")


@dataclass(frozen=True)
class Replacement:
    """The result of a unique replacement: the new text and the 0-based line it starts on."""

    text: str
    changed_line: int


# Occurrences whose lines a MultipleMatches lists; the error names how many there are in all.
MAX_LISTED_MATCHES = 100


def find_unique(content: str, old: str) -> int:
    """The index of the single occurrence of ``old`` in ``content``.

    Raises :class:`TextNotFound` or :class:`MultipleMatches`. Linear in ``content``: an empty
    ``old`` (which occurs at every position, as in the reference) or a one-character one in a
    file of many short lines costs one pass, however many matches there are.
    """
    first = content.find(old)
    if first == -1:
        raise TextNotFound("old_str not found")
    # Unique as the reference decides it, by str.count (non-overlapping): "aa" is unique in
    # "aaa", and "" only in an empty file.
    if not old:
        if not content:
            return first
    elif content.find(old, first + len(old)) == -1:
        return first
    lines: list[int] = []
    line, counted, pos = 1, 0, first
    while pos != -1 and len(lines) < MAX_LISTED_MATCHES:
        # Newlines are counted from the previous match on, never from the start again.
        line += content.count("\n", counted, pos)
        counted = pos
        lines.append(line)
        pos = content.find(old, pos + 1)
    if pos == -1:
        total = len(lines)
    elif old:
        # Non-overlapping matches (what str.count finds) are a lower bound of the reference's
        # overlapping ones; the listed matches are exact.
        total = max(len(lines) + 1, content.count(old))
    else:
        total = len(content) + 1
    raise MultipleMatches(lines, total)


def replace_at(content: str, position: int, old: str, new: str) -> Replacement:
    """``content`` with the occurrence of ``old`` at ``position`` replaced by ``new``."""
    text = content[:position] + new + content[position + len(old) :]
    return Replacement(text, content.count("\n", 0, position))


def replace_unique(content: str, old: str, new: str) -> Replacement:
    """Replace the single occurrence of ``old`` in ``content`` by ``new``."""
    return replace_at(content, find_unique(content, old), old, new)


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
