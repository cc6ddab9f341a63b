"""gitmem: an encrypted, versioned memory store backed by git, for Claude's memory tool."""

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .crypto import generate_key
from .errors import (
    ConflictError,
    DifferentStore,
    FormatVersionError,
    GitMemError,
    IntegrityError,
    InvalidPath,
    KeyMissing,
    KeysDiverged,
    LockTimeout,
    NoStore,
    NotADirectory,
    NotAFile,
    NotAStoreRemote,
    NotFound,
    PathExists,
    PushRejected,
    RemoteError,
    RollbackDetected,
    StoreReplaced,
    UsageError,
    WrongKey,
)
from .expiry import ExpiryResult, FileAge, parse_duration
from .initstore import NewStore, init_store
from .limits import LimitExceeded, Limits
from .options import StoreOptions
from .paths import MemoryPath
from .paths import parse as parse_path
from .secrets import SecretRefused
from .store import MemoryStore, Operation, VerifyReport
from .sync import SyncResult  # also installs MemoryStore's replication seam

if TYPE_CHECKING:
    from .tool import AsyncGitMemoryTool, GitMemoryTool
else:

    def __getattr__(name: str) -> Any:
        # The tool classes import the anthropic SDK, which takes seconds; the CLI and the
        # library layer do not need it, so it is loaded on first use of either class.
        if name in ("GitMemoryTool", "AsyncGitMemoryTool"):
            from . import tool

            return getattr(tool, name)
        raise AttributeError(f"module 'gitmem' has no attribute {name!r}")


__all__ = [
    "AsyncGitMemoryTool",
    "ConflictError",
    "DifferentStore",
    "ExpiryResult",
    "FileAge",
    "FormatVersionError",
    "GitMemError",
    "GitMemoryTool",
    "IntegrityError",
    "InvalidPath",
    "KeyMissing",
    "KeysDiverged",
    "LimitExceeded",
    "Limits",
    "LockTimeout",
    "MemoryPath",
    "MemoryStore",
    "NewStore",
    "NoStore",
    "NotADirectory",
    "NotAFile",
    "NotAStoreRemote",
    "NotFound",
    "Operation",
    "PathExists",
    "PushRejected",
    "RemoteError",
    "RollbackDetected",
    "SecretRefused",
    "StoreOptions",
    "StoreReplaced",
    "SyncResult",
    "UsageError",
    "VerifyReport",
    "WrongKey",
    "__version__",
    "generate_key",
    "init_store",
    "parse_duration",
    "parse_path",
]
