"""gitmem: an encrypted, versioned memory store backed by git, for Claude's memory tool."""

from ._version import __version__
from .crypto import generate_key
from .errors import (
    ConflictError,
    FormatVersionError,
    GitMemError,
    IntegrityError,
    InvalidPath,
    KeyMissing,
    LockTimeout,
    NoStore,
    NotAFile,
    NotFound,
    PathExists,
    RollbackDetected,
    UsageError,
    WrongKey,
)
from .paths import MemoryPath
from .paths import parse as parse_path
from .store import MemoryStore, Operation, VerifyReport
from .tool import AsyncGitMemoryTool, GitMemoryTool

__all__ = [
    "AsyncGitMemoryTool",
    "ConflictError",
    "FormatVersionError",
    "GitMemError",
    "GitMemoryTool",
    "IntegrityError",
    "InvalidPath",
    "KeyMissing",
    "LockTimeout",
    "MemoryPath",
    "MemoryStore",
    "NoStore",
    "NotAFile",
    "NotFound",
    "Operation",
    "PathExists",
    "RollbackDetected",
    "UsageError",
    "VerifyReport",
    "WrongKey",
    "__version__",
    "generate_key",
    "parse_path",
]
