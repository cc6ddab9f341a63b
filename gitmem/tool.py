"""``GitMemoryTool`` and ``AsyncGitMemoryTool``: the memory tool's exact strings over a store.

Every error reaches the tool runner as a ``ToolError`` carrying the text Claude is trained on
(``docs/memory-tool.md``); nothing else escapes, and a refused command writes nothing. The
commands themselves live in :mod:`gitmem.commands`, which the MCP server and the CLI use
without loading the SDK; this module wraps them in the SDK's classes.
"""

from __future__ import annotations

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

from . import commands
from .autosync import AutoSync
from .commands import COMMAND_FIELDS, HANDLERS, CommandRefused
from .options import Settings, StoreOptions
from .store import MemoryStore

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")


def check_input(data: object) -> None:
    """Refuse a tool input with a missing or mistyped field or an unknown command."""
    try:
        commands.check_input(data)
    except CommandRefused as exc:
        raise ToolError(exc.text) from None


class MemoryCommands(commands.MemoryCommands):
    """:class:`gitmem.commands.MemoryCommands` whose :meth:`run` raises the SDK's ToolError,
    as the tool runner expects, for every failure."""

    def run(self, action: Callable[[], T]) -> T:
        """Run ``action``, turning every failure into a ToolError (and logging the unexpected)."""
        try:
            return super().run(action)
        except CommandRefused as exc:
            raise ToolError(exc.text) from None


def _direct_handler(
    tool: object, base: type, fields: dict[str, Any]
) -> Callable[[commands.MemoryCommands, dict[str, Any]], str] | None:
    """The handler running ``fields``' command without the SDK's model, or None when a subclass
    of ``base`` overrides that command's method (which then gets the model, as the SDK gives it).

    The SDK's ``call`` builds a pydantic model of the input, a real share of a file view's CPU
    time, only to read its fields back; check_input has checked them already.
    """
    command = fields["command"]
    if getattr(type(tool), command) is not getattr(base, command):
        return None
    return HANDLERS[command]


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
