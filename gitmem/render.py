"""What Claude's ``view`` shows: numbered file content and directory listings, as the SDK's
reference backend formats them. The tool and ``gitmem view`` share these functions, and the
CLI and demo share :func:`plural`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import GitMemError
from .snapshot import ListEntry

MAX_LINES = 999_999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
# A directory's "size" in the reference is what the filesystem reports for it; on the ext4
# filesystems it is normally used on that is one 4 KiB block.
DIRECTORY_SIZE = 4096


class TooManyLines(GitMemError):
    """The file has more lines than ``view`` may number."""


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 line``, ``2 lines``; ``many`` is the plural when it is not ``word + "s"``."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def format_size(size: int) -> str:
    """Human-readable size: ``0B``, ``512B``, ``5.5K``, ``1.2M`` (the reference's rounding)."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    index = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024**index)
    return f"{int(value)}{units[index]}" if value == int(value) else f"{value:.1f}{units[index]}"


def number_lines(lines: Sequence[str], first: int) -> str:
    """Lines prefixed with right-aligned 1-based numbers and a tab."""
    return "\n".join(
        f"{str(i + first).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines)
    )


def view_file(display_path: str, content: str, view_range: Sequence[int] | None) -> str:
    """The text of ``view`` on a file, with the reference's ``view_range`` semantics."""
    lines = content.split("\n")
    if len(lines) > MAX_LINES:
        raise TooManyLines(f"File {display_path} exceeds maximum line limit of 999,999 lines.")
    start_num = 1
    if view_range and len(view_range) == 2:
        start = max(1, view_range[0]) - 1
        end = len(lines) if view_range[1] == -1 else view_range[1]
        lines = lines[start:end]
        start_num = start + 1
    return f"Here's the content of {display_path} with line numbers:\n" + number_lines(
        lines, start_num
    )


def view_directory(display_path: str, canonical: str, rows: Sequence[ListEntry]) -> str:
    """The text of ``view`` on a directory."""
    header = (
        f"Here're the files and directories up to 2 levels deep in {display_path}, "
        "excluding hidden items and node_modules:"
    )
    lines = [f"{format_size(DIRECTORY_SIZE)}\t{display_path}"]
    for row in rows:
        if row.kind == "d":
            lines.append(f"{format_size(DIRECTORY_SIZE)}\t{canonical}/{row.relative}/")
        else:
            lines.append(f"{format_size(row.size)}\t{canonical}/{row.relative}")
    return header + "\n" + "\n".join(lines)


def edit_snippet(new_content: str, changed_line: int) -> str:
    """The reference's ``str_replace`` success text: 2 lines of context around the change."""
    lines = new_content.split("\n")
    start = max(0, changed_line - 2)
    end = min(len(lines), changed_line + 3)
    return (
        "The memory file has been edited. Here is the snippet showing the change "
        "(with line numbers):\n" + number_lines(lines[start:end], start + 1)
    )
