"""The memory tool's six commands over a store, with the exact strings Claude is trained on.

Every refusal or failure is a :class:`CommandRefused` carrying the text Claude gets
(``docs/memory-tool.md``); nothing else escapes, and a refused command writes nothing. The
front ends raise that text their own way: the SDK tools (:mod:`gitmem.tool`) as the SDK's
``ToolError``, the MCP server (:mod:`gitmem.mcp_server`) as a result with ``isError``. This
module imports neither the SDK nor ``mcp``, which take seconds to load: a front end that does
not need them does not wait for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

from . import paths
from .errors import (
    GitMemError,
    InvalidPath,
    NotAFile,
    NotFound,
    PathExists,
    UsageError,
    clip,
    shown_int,
    shown_repr,
)
from .render import TooManyLines, edit_snippet
from .secrets import redaction_note
from .store import MemoryStore
from .textops import InvalidInsertLine, MultipleMatches, TextNotFound
from .view import view_text

log = logging.getLogger("gitmem")
T = TypeVar("T")


class CommandRefused(Exception):
    """A memory command refused or failed; ``text`` is the whole result Claude gets."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


# The fields each command needs, with their types; `view_range` is checked on its own. The MCP
# server's input schema is made from this table too, so the two cannot disagree.
COMMAND_FIELDS: dict[str, dict[str, type]] = {
    "view": {"path": str},
    "create": {"path": str, "file_text": str},
    "str_replace": {"path": str, "old_str": str, "new_str": str},
    "insert": {"path": str, "insert_line": int, "insert_text": str},
    "delete": {"path": str},
    "rename": {"old_path": str, "new_path": str},
}


def check_input(data: object) -> None:
    """Refuse a tool input with a missing or mistyped field or an unknown command."""
    if not isinstance(data, dict):
        raise CommandRefused("Error: the memory tool input must be an object")
    command = data.get("command")
    if not isinstance(command, str) or command not in COMMAND_FIELDS:
        known = ", ".join(COMMAND_FIELDS)
        # A bounded echo: a huge or deeply nested value must not come back whole (or blow the
        # recursion limit in repr).
        raise CommandRefused(
            f"Error: Unknown command {shown_repr(command, 30)}; use one of: {known}"
        )
    for name, kind in COMMAND_FIELDS[command].items():
        if name not in data:
            raise CommandRefused(f"Error: the {command} command needs the `{name}` parameter")
        value = data[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise CommandRefused(
                f"Error: the `{name}` parameter of {command} must be "
                f"{'an integer' if kind is int else 'a string'}"
            )
        # JSON can carry a lone surrogate (\ud800), which no file can hold; paths say so in
        # their own words (gitmem.paths).
        if isinstance(value, str) and not name.endswith("path") and not _encodable(value):
            raise CommandRefused(
                f"Error: the `{name}` parameter of {command} is not valid Unicode text "
                "(it contains a lone surrogate)"
            )
    # An empty view_range means the whole file, as the reference treats it.
    if command == "view" and data.get("view_range") not in (None, []):
        view_range = data["view_range"]
        if (
            not isinstance(view_range, list)
            or len(view_range) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)
        ):
            raise CommandRefused("Error: `view_range` must be a list of two integers [start, end]")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class MemoryCommands:
    """The six commands as plain methods returning the contract's text or raising
    :class:`CommandRefused`."""

    def __init__(self, store: MemoryStore, after_write: Callable[[], None] | None = None) -> None:
        self.store = store
        # Called after every successful write (the tool's push-after-write sync policy).
        self.after_write = after_write

    def _wrote(self) -> None:
        if self.after_write is not None:
            self.after_write()

    @staticmethod
    def _path(raw: str) -> paths.MemoryPath:
        try:
            return paths.parse(raw)
        except InvalidPath as exc:
            raise CommandRefused(f"Error: {exc}") from None

    def view(self, path: str, view_range: list[int] | None, *, rev: str | None = None) -> str:
        """The text of ``view`` (of the memory at ``rev``; default: the head)."""
        target = self._path(path)
        try:
            return view_text(
                self.store.snapshot(rev), path, target, view_range, self.store.limits.max_view_chars
            )
        except (NotFound, TooManyLines) as exc:
            raise CommandRefused(str(exc)) from None

    def create(self, path: str, file_text: str) -> str:
        """The text of ``create``."""
        target = self._path(path)
        try:
            op = self.store.create(target, file_text)
        except PathExists:
            raise CommandRefused(f"Error: File {path} already exists") from None
        except NotAFile as exc:
            raise CommandRefused(
                f"Error: Cannot create {path}: {exc.path} is a file, not a directory"
            ) from None
        self._wrote()
        return f"File created successfully at: {path}" + redaction_note(op.record.detail)

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        """The text of ``str_replace``."""
        target = self._path(path)
        try:
            op, result = self.store.str_replace(target, old_str, new_str)
        except (NotFound, NotAFile):
            raise CommandRefused(
                f"Error: The path {path} does not exist. Please provide a valid path."
            ) from None
        except TextNotFound:
            raise CommandRefused(
                f"No replacement was performed, old_str `{clip(old_str)}` did not appear "
                f"verbatim in {path}."
            ) from None
        except MultipleMatches as exc:
            lines = ", ".join(map(str, exc.lines))
            if not exc.complete:
                # Bounded like a view: the first lines, and how many there are.
                lines += f", ... (the first {len(exc.lines)} of {exc.total:,} or more)"
            raise CommandRefused(
                f"No replacement was performed. Multiple occurrences of old_str "
                f"`{clip(old_str)}` in lines: {lines}. Please ensure it is unique"
            ) from None
        self._wrote()
        return edit_snippet(result.text, result.changed_line) + redaction_note(op.record.detail)

    def insert(self, path: str, insert_line: int, insert_text: str) -> str:
        """The text of ``insert``."""
        target = self._path(path)
        try:
            op = self.store.insert(target, insert_line, insert_text)
        except (NotFound, NotAFile):
            raise CommandRefused(f"Error: The path {path} does not exist") from None
        except InvalidInsertLine as exc:
            raise CommandRefused(
                f"Error: Invalid `insert_line` parameter: {shown_int(insert_line)}. It should "
                f"be within the range of lines of the file: [0, {exc.n_lines}]"
            ) from None
        self._wrote()
        return f"The file {path} has been edited." + redaction_note(op.record.detail)

    def delete(self, path: str) -> str:
        """The text of ``delete``."""
        target = self._path(path)
        if target.is_root:
            raise CommandRefused("Error: Cannot delete the /memories directory itself")
        try:
            self.store.delete(target)
        except NotFound:
            raise CommandRefused(f"Error: The path {path} does not exist") from None
        self._wrote()
        return f"Successfully deleted {path}"

    def rename(self, old_path: str, new_path: str) -> str:
        """The text of ``rename``."""
        old, new = self._path(old_path), self._path(new_path)
        if old.is_root:
            raise CommandRefused("Error: Cannot rename the /memories directory itself")
        try:
            self.store.rename(old, new)
        except PathExists:
            raise CommandRefused(f"Error: The destination {new_path} already exists") from None
        except NotFound:
            raise CommandRefused(f"Error: The path {old_path} does not exist") from None
        except NotAFile as exc:
            raise CommandRefused(
                f"Error: Cannot rename to {new_path}: {exc.path} is a file, not a directory"
            ) from None
        except UsageError as exc:
            raise CommandRefused(f"Error: {exc}") from None
        self._wrote()
        return f"Successfully renamed {old_path} to {new_path}"

    def run(self, action: Callable[[], T]) -> T:
        """Run ``action``, turning every failure into a CommandRefused (and logging the
        unexpected)."""
        try:
            return action()
        except CommandRefused:
            raise
        except GitMemError as exc:
            raise CommandRefused(f"Error: {exc}") from None
        except OSError as exc:
            # The environment failed (a full disk, a read-only directory), not gitmem: say how.
            # libgit2's messages name repository files only, which are hashes, never memory.
            reason = exc.strerror or str(exc) or type(exc).__name__
            log.warning("gitmem: a memory command failed on storage: %s", reason)
            raise CommandRefused(
                f"Error: gitmem's storage failed ({reason}); the memory is unchanged unless a "
                "later view shows otherwise"
            ) from None
        except Exception as exc:
            log.exception("gitmem: unexpected failure in a memory command")
            raise CommandRefused(
                f"Error: gitmem failed unexpectedly ({type(exc).__name__}); the memory is "
                "unchanged unless a later view shows otherwise"
            ) from None

    def call(self, data: object) -> str:
        """Check ``data``, a memory tool input, and run its command, both inside :meth:`run`."""

        def command() -> str:
            check_input(data)
            fields = cast("dict[str, Any]", data)
            return HANDLERS[fields["command"]](self, fields)

        return self.run(command)


# What each command runs, given its fields as check_input let them through: the commands
# without the SDK's model of the input in between.
HANDLERS: dict[str, Callable[[MemoryCommands, dict[str, Any]], str]] = {
    "view": lambda c, f: c.view(f["path"], f.get("view_range")),
    "create": lambda c, f: c.create(f["path"], f["file_text"]),
    "str_replace": lambda c, f: c.str_replace(f["path"], f["old_str"], f["new_str"]),
    "insert": lambda c, f: c.insert(f["path"], f["insert_line"], f["insert_text"]),
    "delete": lambda c, f: c.delete(f["path"]),
    "rename": lambda c, f: c.rename(f["old_path"], f["new_path"]),
}


__all__ = ["COMMAND_FIELDS", "HANDLERS", "CommandRefused", "MemoryCommands", "check_input"]
