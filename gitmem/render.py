"""What Claude's ``view`` shows: numbered file content and directory listings, as the SDK's
reference backend formats them. The tool and ``gitmem view`` share these functions, and the
CLI and demo share :func:`plural`; the CLI's tables are laid out by :func:`table_cells`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

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


ELLIPSIS = "\u2026"
COLUMN_GAP = "  "


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the last one an ellipsis when anything was cut."""
    if len(text) <= width:
        return text
    return text[: width - 1] + ELLIPSIS if width > 0 else ""


def table_cells(
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] = (),
    shrink: Collection[int] = (),
    width: int | None = None,
) -> list[list[str]]:
    """``rows`` (the first one the header) as aligned cells, for :func:`table_line`.

    Columns in ``right`` are right-aligned, the others left-aligned; the last one is not
    padded. With ``width``, the columns in ``shrink`` give up characters, the widest first and
    never below their header's width, until a row fits in ``width``; a cell cut short ends in
    an ellipsis.
    """
    count = len(rows[0])
    widths = [max(len(row[i]) for row in rows) for i in range(count)]
    if width is not None:
        excess = sum(widths) + len(COLUMN_GAP) * (count - 1) - width
        while excess > 0:
            give = [i for i in shrink if widths[i] > len(rows[0][i])]
            if not give:
                break
            widths[max(give, key=lambda i: (widths[i], i))] -= 1
            excess -= 1
    last = count - 1
    return [
        [
            clip(cell, widths[i])
            if i == last
            else clip(cell, widths[i]).rjust(widths[i])
            if i in right
            else clip(cell, widths[i]).ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        for row in rows
    ]


def table_line(cells: Sequence[str], width: int | None = None) -> str:
    """A row of :func:`table_cells` as one line, cut to ``width`` (with an ellipsis) when even
    the shrunk columns do not fit."""
    line = COLUMN_GAP.join(cells).rstrip()
    return line if width is None else clip(line, width)
