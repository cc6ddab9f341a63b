"""The text of Claude's ``view`` of a snapshot: what the tool returns and ``gitmem view`` prints.

Refusals are :class:`GitMemError` subclasses carrying the contract's text, so the tool passes
them on unchanged and the library and CLI need no tool adapter to get them.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import NotFound
from .format import KIND_DIR
from .limits import fit_directory_view, fit_file_view
from .paths import MemoryPath
from .render import view_directory, view_file
from .snapshot import Snapshot, decode_text


def view_text(
    snapshot: Snapshot,
    shown: str,
    target: MemoryPath,
    view_range: Sequence[int] | None,
    max_chars: int | None,
) -> str:
    """What ``view`` of ``target`` (spelled ``shown`` by the caller) returns, cut to ``max_chars``.

    Raises :class:`NotFound` with the contract's text when nothing is there, and
    :class:`~gitmem.render.TooManyLines` for a file with more lines than ``view`` numbers.
    """
    node = snapshot.lookup(target)
    if node is None:
        raise NotFound(f"The path {shown} does not exist. Please provide a valid path.")
    if node.kind == KIND_DIR:
        listing = view_directory(shown, str(target), snapshot.listing(target))
        return fit_directory_view(listing, max_chars)
    # The node is a file: read it by its id rather than looking the path up a second time.
    content = decode_text(snapshot.codec.read_file(node.oid), target)
    text = view_file(shown, content, view_range)
    range_end = view_range[1] if view_range and len(view_range) == 2 else -1
    return fit_file_view(text, content.count("\n") + 1, range_end, max_chars)


__all__ = ["view_text"]
