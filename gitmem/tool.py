"""``GitMemoryTool`` and ``AsyncGitMemoryTool``: the memory tool's exact strings over a store.

Every error reaches the tool runner as a ``ToolError`` carrying the text Claude is trained on
(``docs/memory-tool.md``); nothing else escapes, and a refused command writes nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from anyio.to_thread import run_sync

from . import paths
from .autosync import AutoSync
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
from .options import Settings, StoreOptions
from .render import TooManyLines, edit_snippet
from .secrets import redaction_note
from .store import MemoryStore
from .textops import InvalidInsertLine, MultipleMatches, TextNotFound
from .view import view_text

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger("gitmem")
T = TypeVar("T")

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
        raise ToolError("Error: the memory tool input must be an object")
    command = data.get("command")
    if not isinstance(command, str) or command not in COMMAND_FIELDS:
        known = ", ".join(COMMAND_FIELDS)
        # A bounded echo: a huge or deeply nested value must not come back whole (or blow the
        # recursion limit in repr).
        raise ToolError(f"Error: Unknown command {shown_repr(command, 30)}; use one of: {known}")
    for name, kind in COMMAND_FIELDS[command].items():
        if name not in data:
            raise ToolError(f"Error: the {command} command needs the `{name}` parameter")
        value = data[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ToolError(
                f"Error: the `{name}` parameter of {command} must be "
                f"{'an integer' if kind is int else 'a string'}"
            )
        # JSON can carry a lone surrogate (\ud800), which no file can hold; paths say so in
        # their own words (gitmem.paths).
        if isinstance(value, str) and not name.endswith("path") and not _encodable(value):
            raise ToolError(
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
            raise ToolError("Error: `view_range` must be a list of two integers [start, end]")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class MemoryCommands:
    """The six commands as plain methods returning the contract's text or raising ToolError."""

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
            raise ToolError(f"Error: {exc}") from None

    def view(self, path: str, view_range: list[int] | None, *, rev: str | None = None) -> str:
        """The text of ``view`` (of the memory at ``rev``; default: the head)."""
        target = self._path(path)
        try:
            return view_text(
                self.store.snapshot(rev), path, target, view_range, self.store.limits.max_view_chars
            )
        except (NotFound, TooManyLines) as exc:
            raise ToolError(str(exc)) from None

    def create(self, path: str, file_text: str) -> str:
        """The text of ``create``."""
        target = self._path(path)
        try:
            op = self.store.create(target, file_text)
        except PathExists:
            raise ToolError(f"Error: File {path} already exists") from None
        except NotAFile as exc:
            raise ToolError(
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
            raise ToolError(
                f"Error: The path {path} does not exist. Please provide a valid path."
            ) from None
        except TextNotFound:
            raise ToolError(
                f"No replacement was performed, old_str `{clip(old_str)}` did not appear "
                f"verbatim in {path}."
            ) from None
        except MultipleMatches as exc:
            lines = ", ".join(map(str, exc.lines))
            if not exc.complete:
                # Bounded like a view: the first lines, and how many there are.
                lines += f", ... (the first {len(exc.lines)} of {exc.total:,} or more)"
            raise ToolError(
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
            raise ToolError(f"Error: The path {path} does not exist") from None
        except InvalidInsertLine as exc:
            raise ToolError(
                f"Error: Invalid `insert_line` parameter: {shown_int(insert_line)}. It should "
                f"be within the range of lines of the file: [0, {exc.n_lines}]"
            ) from None
        self._wrote()
        return f"The file {path} has been edited." + redaction_note(op.record.detail)

    def delete(self, path: str) -> str:
        """The text of ``delete``."""
        target = self._path(path)
        if target.is_root:
            raise ToolError("Error: Cannot delete the /memories directory itself")
        try:
            self.store.delete(target)
        except NotFound:
            raise ToolError(f"Error: The path {path} does not exist") from None
        self._wrote()
        return f"Successfully deleted {path}"

    def rename(self, old_path: str, new_path: str) -> str:
        """The text of ``rename``."""
        old, new = self._path(old_path), self._path(new_path)
        if old.is_root:
            raise ToolError("Error: Cannot rename the /memories directory itself")
        try:
            self.store.rename(old, new)
        except PathExists:
            raise ToolError(f"Error: The destination {new_path} already exists") from None
        except NotFound:
            raise ToolError(f"Error: The path {old_path} does not exist") from None
        except NotAFile as exc:
            raise ToolError(
                f"Error: Cannot rename to {new_path}: {exc.path} is a file, not a directory"
            ) from None
        except UsageError as exc:
            raise ToolError(f"Error: {exc}") from None
        self._wrote()
        return f"Successfully renamed {old_path} to {new_path}"

    def run(self, action: Callable[[], T]) -> T:
        """Run ``action``, turning every failure into a ToolError (and logging the unexpected)."""
        try:
            return action()
        except ToolError:
            raise
        except GitMemError as exc:
            raise ToolError(f"Error: {exc}") from None
        except OSError as exc:
            # The environment failed (a full disk, a read-only directory), not gitmem: say how.
            # libgit2's messages name repository files only, which are hashes, never memory.
            reason = exc.strerror or str(exc) or type(exc).__name__
            log.warning("gitmem: a memory command failed on storage: %s", reason)
            raise ToolError(
                f"Error: gitmem's storage failed ({reason}); the memory is unchanged unless a "
                "later view shows otherwise"
            ) from None
        except Exception as exc:
            log.exception("gitmem: unexpected failure in a memory command")
            raise ToolError(
                f"Error: gitmem failed unexpectedly ({type(exc).__name__}); the memory is "
                "unchanged unless a later view shows otherwise"
            ) from None


# What each command runs, given its fields as check_input let them through: the handlers of
# GitMemoryTool and AsyncGitMemoryTool without the SDK's model of the input in between.
_HANDLERS: dict[str, Callable[[MemoryCommands, dict[str, Any]], str]] = {
    "view": lambda c, f: c.view(f["path"], f.get("view_range")),
    "create": lambda c, f: c.create(f["path"], f["file_text"]),
    "str_replace": lambda c, f: c.str_replace(f["path"], f["old_str"], f["new_str"]),
    "insert": lambda c, f: c.insert(f["path"], f["insert_line"], f["insert_text"]),
    "delete": lambda c, f: c.delete(f["path"]),
    "rename": lambda c, f: c.rename(f["old_path"], f["new_path"]),
}


def _direct_handler(
    tool: object, base: type, fields: dict[str, Any]
) -> Callable[[MemoryCommands, dict[str, Any]], str] | None:
    """The handler running ``fields``' command without the SDK's model, or None when a subclass
    of ``base`` overrides that command's method (which then gets the model, as the SDK gives it).

    The SDK's ``call`` builds a pydantic model of the input, a real share of a file view's CPU
    time, only to read its fields back; check_input has checked them already.
    """
    command = fields["command"]
    if getattr(type(tool), command) is not getattr(base, command):
        return None
    return _HANDLERS[command]


def _open(
    repo: str | os.PathLike[str] | MemoryStore,
    key: str | bytes | None,
    options: StoreOptions | None,
    settings: Settings,
) -> MemoryStore:
    if isinstance(repo, MemoryStore):
        if key is not None or options is not None or settings:
            # An open store already has its key, session label and safeguards; silently
            # ignoring a different one would label or limit writes other than asked.
            raise TypeError("an open MemoryStore carries its own options: pass only the store")
        return repo
    return MemoryStore.open(repo, key, create=True, options=StoreOptions.of(options, **settings))


def _close(tool: GitMemoryTool | AsyncGitMemoryTool) -> None:
    # A push still running publishes too (a push checkpoints first); waiting keeps its writes
    # from racing the close.
    tool.autosync.wait(tool.store.lock_timeout)
    tool.store.close()


class GitMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool backed by an encrypted git store; a drop-in for the SDK's tools.

    ``repo`` is a bare repository path, created on first use, or an open
    :class:`~gitmem.MemoryStore` (which brings its own key and options: pass no other then).
    ``key`` is the text from :func:`gitmem.generate_key` (or 32 bytes); when None it comes from
    ``GITMEM_KEY``, then the file named by ``GITMEM_KEY_FILE``, then the per-user key file of an
    existing store.
    ``options`` (:class:`gitmem.StoreOptions`) and the keyword ``settings`` over it say how the
    store is used: ``session`` labels every commit this instance makes (unique per instance
    when None); ``lock_timeout`` and ``state_dir``; ``limits`` caps file, store and ``view``
    sizes (default :class:`gitmem.Limits`); ``secrets`` is what a write holding a likely
    credential gets: ``reject`` (default), ``redact`` or ``allow`` (``docs/safeguards.md``);
    ``remote`` (a remote name or URL) and ``sync`` (``"manual"``; ``"pull"``: pull when opened;
    ``"push"``: also push after each write, in the background) make the memory follow the agent
    between machines (``docs/sync.md``); the network never delays or fails a write.
    """

    def __init__(
        self,
        repo: str | os.PathLike[str] | MemoryStore,
        *,
        key: str | bytes | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        options: StoreOptions | None = None,
        **settings: Unpack[Settings],
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.store = _open(repo, key, options, settings)
        self.autosync = AutoSync(self.store)
        self._commands = MemoryCommands(self.store, self.autosync.after_write)

    @property
    def session(self) -> str:
        """The label on every commit this tool makes."""
        return self.store.session

    def close(self) -> None:
        """Wait for a background push (up to the lock timeout), then publish this process's
        writes to the store for plain git (:meth:`MemoryStore.close`)."""
        _close(self)

    def __enter__(self) -> GitMemoryTool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def call(self, input: object) -> str:
        """Validate ``input`` and run the command; every failure is a ToolError."""
        check_input(input)
        fields = cast("dict[str, Any]", input)
        handler = _direct_handler(self, GitMemoryTool, fields)
        if handler is not None:
            commands = self._commands
            return commands.run(lambda: handler(commands, fields))
        result = super().call(input)
        assert isinstance(result, str)
        return result

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """Show a file with line numbers or a directory listing."""
        return self._commands.run(lambda: self._commands.view(command.path, command.view_range))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """Create a new file."""
        return self._commands.run(lambda: self._commands.create(command.path, command.file_text))

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace unique text in a file."""
        c = self._commands
        return c.run(lambda: c.str_replace(command.path, command.old_str, command.new_str))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert text at a line."""
        c = self._commands
        return c.run(lambda: c.insert(command.path, command.insert_line, command.insert_text))

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Delete a file or directory."""
        return self._commands.run(lambda: self._commands.delete(command.path))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Rename or move a file or directory."""
        c = self._commands
        return c.run(lambda: c.rename(command.old_path, command.new_path))


class AsyncGitMemoryTool(BetaAsyncAbstractMemoryTool):
    """The async twin of :class:`GitMemoryTool`; git and crypto work runs on worker threads."""

    def __init__(
        self,
        repo: str | os.PathLike[str] | MemoryStore,
        *,
        key: str | bytes | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        options: StoreOptions | None = None,
        **settings: Unpack[Settings],
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.store = _open(repo, key, options, settings)
        self.autosync = AutoSync(self.store)
        self._commands = MemoryCommands(self.store, self.autosync.after_write)

    @property
    def session(self) -> str:
        """The label on every commit this tool makes."""
        return self.store.session

    async def close(self) -> None:
        """:meth:`GitMemoryTool.close`, on a worker thread."""
        await run_sync(_close, self)

    async def __aenter__(self) -> AsyncGitMemoryTool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def call(self, input: object) -> str:
        """Validate ``input`` and run the command off the event loop."""
        check_input(input)
        fields = cast("dict[str, Any]", input)
        handler = _direct_handler(self, AsyncGitMemoryTool, fields)
        if handler is not None:
            commands = self._commands
            return await self._run(lambda: handler(commands, fields))
        result = await super().call(input)
        assert isinstance(result, str)
        return result

    async def _run(self, action: Callable[[], str]) -> str:
        return await run_sync(self._commands.run, action)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """Show a file with line numbers or a directory listing."""
        return await self._run(lambda: self._commands.view(command.path, command.view_range))

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """Create a new file."""
        return await self._run(lambda: self._commands.create(command.path, command.file_text))

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace unique text in a file."""
        c = self._commands
        return await self._run(
            lambda: c.str_replace(command.path, command.old_str, command.new_str)
        )

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert text at a line."""
        c = self._commands
        return await self._run(
            lambda: c.insert(command.path, command.insert_line, command.insert_text)
        )

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Delete a file or directory."""
        return await self._run(lambda: self._commands.delete(command.path))

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Rename or move a file or directory."""
        return await self._run(lambda: self._commands.rename(command.old_path, command.new_path))


__all__ = [
    "COMMAND_FIELDS",
    "AsyncGitMemoryTool",
    "GitMemoryTool",
    "MemoryCommands",
    "check_input",
]
