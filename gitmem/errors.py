"""The exception hierarchy: one root, exit codes on the classes, opaque crypto failures.

Every error gitmem raises on purpose is a :class:`GitMemError`. The CLI maps an exception to its
process exit code through :attr:`GitMemError.exit_code` alone, so the table in ``docs/cli.md``
and these classes cannot drift apart.
"""

from __future__ import annotations

import contextlib
import os
import reprlib
import unicodedata
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path


class GitMemError(Exception):
    """Root of every error gitmem raises on purpose."""

    exit_code: int = 1


class UsageError(GitMemError, ValueError):
    """An argument is malformed (a bad revision, a bad option value)."""

    exit_code = 2


class InvalidPath(UsageError):
    """A string is not an acceptable memory path; ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"The path {shown(path)} is not allowed: {reason}")


class NotFound(GitMemError, KeyError):
    """A memory path or revision does not exist."""

    exit_code = 1

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(what)

    def __str__(self) -> str:
        # KeyError's __str__ would quote the message.
        return self.what


class PathExists(GitMemError):
    """A create or rename would overwrite an existing memory path."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"{path} already exists")


class NotAFile(GitMemError):
    """A file operation named a directory."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(self._describe(path))

    @staticmethod
    def _describe(path: str) -> str:
        return f"{path} is a directory, not a file"


class NotADirectory(NotAFile):
    """A directory was needed (a listing, a parent of a new path) and ``path`` is a file.

    A :class:`NotAFile` so that one ``except`` catches a path of either wrong kind.
    """

    @staticmethod
    def _describe(path: str) -> str:
        return f"{path} is a file, not a directory"


class NoStore(GitMemError):
    """There is no gitmem store at the given location."""

    exit_code = 3


class KeyMissing(GitMemError):
    """No key was given and none could be found.

    ``searched`` is true when every key source was looked at and none had a key;
    ``key_file`` is then the per-user key file looked for (None when the store's id is unknown),
    and ``passphrase_slots`` whether the store has passphrase slots (so a passphrase would do).
    """

    exit_code = 4

    def __init__(
        self,
        message: str,
        *,
        searched: bool = False,
        key_file: Path | None = None,
        passphrase_slots: bool = False,
    ) -> None:
        self.searched = searched
        self.key_file = key_file
        self.passphrase_slots = passphrase_slots
        super().__init__(message)


class WeakPassphrase(UsageError):
    """A new passphrase is below gitmem's strength bar (the message never shows it)."""


class WrongKey(GitMemError):
    """The key does not open this store (or is malformed)."""

    exit_code = 4


class WrongPassphrase(WrongKey):
    """The passphrase opens none of the store's key slots (or the store has none)."""

    exit_code = 4


class IntegrityError(GitMemError):
    """Stored data failed authentication or is malformed: tampering or corruption.

    The message names the object or commit, never key material or plaintext.
    """

    exit_code = 5


class RollbackDetected(GitMemError):
    """The branch is behind (or beside) the last state this client saw."""

    exit_code = 6


class StoreReplaced(GitMemError):
    """The repository now holds another store than the one this client used at that path."""

    exit_code = 9


class LockTimeout(GitMemError):
    """Another writer held the store's lock for longer than the timeout."""

    exit_code = 7


class Interrupted(GitMemError):
    """The command was interrupted (Ctrl-C, SIGINT) before it finished.

    A write is in the store whole or not at all: it is committed by one move of a ref.
    """

    exit_code = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C

    def __init__(self) -> None:
        super().__init__("interrupted")


class FormatVersionError(GitMemError):
    """The store was written by a format this version of gitmem does not read."""

    exit_code = 8


class FormatLimitExceeded(GitMemError):
    """A write would make a git object larger than the repository format allows."""

    exit_code = 1


class StorageError(GitMemError):
    """The file system refused a read or write of the store (read-only, full, permissions).

    Nothing was committed; the message names what failed and the system's reason.
    """

    exit_code = 1


class ConflictError(GitMemError):
    """The branch moved under a writer in a way it cannot reconcile."""

    exit_code = 1


class RemoteError(GitMemError):
    """A remote could not be reached or refused the connection (network, address, credentials)."""

    exit_code = 10


class HostKeyRefused(RemoteError):
    """An ssh host's key is not the one ``~/.ssh/known_hosts`` holds, or the host is not there.

    Nothing was sent to it.
    """


class PushRejected(RemoteError):
    """The remote has commits this replica lacks; pull (or sync) first. Nothing was discarded."""

    exit_code = 11


class NotAStoreRemote(NoStore):
    """The remote is a git repository, but it does not hold a gitmem store."""


class DifferentStore(GitMemError):
    """The remote (or replica) holds another gitmem store than this one."""

    exit_code = 12


class KeysDiverged(ConflictError):
    """Both replicas changed the key slots or epochs in ways that cannot be merged safely
    (both rotated, or one rotated while the other changed slots). Nothing was changed."""

    exit_code = 13


# How much of a string from the model or the user an error message repeats: enough for any
# ordinary old_str or path (so they read exactly as the reference's messages), not 100 MB.
ECHO_CHARS = 2_000


class RollbackCheckOff(RuntimeWarning):
    """Rollback detection is off for a store: its state directory cannot hold the high-water
    marks (not a directory, read-only, not writable). Issued once per open store; reads and
    writes go on."""


def rollback_check_off(directory: os.PathLike[str] | str, exc: OSError) -> RollbackCheckOff:
    """The warning that ``directory`` (a state directory) refused ``exc``: its path and the
    reason, nothing of the store's."""
    if os.path.lexists(directory) and not os.path.isdir(directory):
        reason = "it is not a directory"
    else:
        reason = exc.strerror or str(exc) or type(exc).__name__
    return RollbackCheckOff(
        f"rollback detection is off: the state directory {shown(os.fspath(directory))} cannot "
        f"record high-water marks ({reason}); reads and writes go on, but a rolled-back "
        "repository would not be noticed. Make it a writable directory, or set "
        "GITMEM_STATE_DIR to one"
    )


@contextlib.contextmanager
def reporting_rollback_off(say: Callable[[str], None]) -> Iterator[None]:
    """Within the block, hand each distinct :class:`RollbackCheckOff` message to ``say`` once
    (the command line's and the MCP server's own stderr line); other warnings as before."""
    said: set[str] = set()
    with warnings.catch_warnings():
        show_other = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: object = None,
            line: str | None = None,
        ) -> None:
            if not issubclass(category, RollbackCheckOff):
                show_other(message, category, filename, lineno, file, line)  # type: ignore[arg-type]
            elif str(message) not in said:
                said.add(str(message))
                say(str(message))

        warnings.showwarning = show
        warnings.simplefilter("always", RollbackCheckOff)  # once per message: `said` counts
        yield


def file_system_refused(exc: OSError) -> StorageError:
    """``exc``, which the file system raised (a full disk, a read-only store, a path longer
    than it allows), as the one line that reports it: its reason and path (shown)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    where = f" ({shown(os.fsdecode(exc.filename))})" if exc.filename else ""
    return StorageError(f"the file system refused: {reason}{where}; nothing was changed")


# How many items of a list from the user or the model (refused files, paths) one message names.
LIST_ITEMS = 20


def shown_list(items: Sequence[str], separator: str = ", ", limit: int = LIST_ITEMS) -> str:
    """``items`` as a message lists them: the first ``limit``, then how many more there are."""
    head = separator.join(items[:limit])
    if len(items) <= limit:
        return head
    return f"{head}{separator}and {len(items) - limit:,} more"


def clip(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters not shown]"


def shown(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as an error message repeats it: cut (:func:`clip`), then :func:`printable`."""
    if len(text) <= limit:
        return printable(text)
    return f"{printable(text[:limit])}… [{len(text) - limit:,} more characters not shown]"


def shown_repr(value: object, limit: int = 200) -> str:
    """``repr(value)`` as an error message repeats it: about ``limit`` characters at most (and
    bounded nesting), escaped."""
    bounded = reprlib.Repr()
    bounded.maxstring = bounded.maxother = limit
    try:
        return printable(bounded.repr(value))
    except ValueError:  # an int with more digits than Python turns into text
        return f"(a {type(value).__name__} too long to show)"


def shown_int(value: int) -> str:
    """An integer from the model as an error message repeats it: at most 40 digits."""
    if value.bit_length() > 128:  # 39 digits and more; str() refuses over 4,300 of them
        return f"(an integer of {value.bit_length():,} bits)"
    return str(value)


def printable(text: str) -> str:
    """``text`` with control, format and invisible characters and lone surrogates escaped, for
    error messages."""
    out = []
    for ch in text:
        code = ord(ch)
        # Format characters (bidirectional controls, zero-width ones, the BOM) are escaped too:
        # they would reorder the message around them or hide what a name really holds.
        if (
            code < 0x20
            or 0x7F <= code < 0xA0
            or 0xD800 <= code < 0xE000
            or ch in _INVISIBLE
            or unicodedata.category(ch) == "Cf"
        ):
            out.append(
                f"\\x{code:02x}"
                if code < 0x100
                else f"\\u{code:04x}"
                if code < 0x10000
                else f"\\U{code:08x}"
            )
        else:
            out.append(ch)
    return "".join(out)


# Invisible characters outside category Cf: the combining grapheme joiner and the Hangul fillers.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u3164\uffa0")
