"""gitmem: an encrypted, versioned memory store backed by git, for Claude's memory tool."""

# Importing the package imports nothing: every public name is loaded from its module on first
# use (PEP 562). The store pulls in pygit2 and cryptography, the tools the anthropic SDK, which
# take most of a second. Loaded eagerly here, they would run inside runpy's import of the
# package for ``python -m gitmem``, before any code of ours could catch a Ctrl-C, and every
# ``import gitmem.x`` would pay for all of them. Nothing from ``typing`` either, for the same
# reason: mypy reads a module-level ``TYPE_CHECKING`` as typing's.
TYPE_CHECKING = False

if TYPE_CHECKING:
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
        RollbackCheckOff,
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
    from .sync import SyncResult
    from .tool import AsyncGitMemoryTool, GitMemoryTool

# Each public name: (its module, its name there).
_EXPORTS = {
    "__version__": ("_version", "__version__"),
    "generate_key": ("crypto", "generate_key"),
    **{
        name: ("errors", name)
        for name in (
            "ConflictError",
            "DifferentStore",
            "FormatVersionError",
            "GitMemError",
            "IntegrityError",
            "InvalidPath",
            "KeyMissing",
            "KeysDiverged",
            "LockTimeout",
            "NoStore",
            "NotADirectory",
            "NotAFile",
            "NotAStoreRemote",
            "NotFound",
            "PathExists",
            "PushRejected",
            "RemoteError",
            "RollbackCheckOff",
            "RollbackDetected",
            "StoreReplaced",
            "UsageError",
            "WrongKey",
        )
    },
    "ExpiryResult": ("expiry", "ExpiryResult"),
    "FileAge": ("expiry", "FileAge"),
    "parse_duration": ("expiry", "parse_duration"),
    "NewStore": ("initstore", "NewStore"),
    "init_store": ("initstore", "init_store"),
    "LimitExceeded": ("limits", "LimitExceeded"),
    "Limits": ("limits", "Limits"),
    "StoreOptions": ("options", "StoreOptions"),
    "MemoryPath": ("paths", "MemoryPath"),
    "parse_path": ("paths", "parse"),
    "SecretRefused": ("secrets", "SecretRefused"),
    "MemoryStore": ("store", "MemoryStore"),
    "Operation": ("store", "Operation"),
    "VerifyReport": ("store", "VerifyReport"),
    "SyncResult": ("sync", "SyncResult"),
    "AsyncGitMemoryTool": ("tool", "AsyncGitMemoryTool"),
    "GitMemoryTool": ("tool", "GitMemoryTool"),
}


if not TYPE_CHECKING:  # mypy sees the imports above instead

    def __getattr__(name: str) -> object:
        import importlib

        where = _EXPORTS.get(name)
        if where is None:
            if name.startswith("__"):
                raise AttributeError(f"module 'gitmem' has no attribute {name!r}")
            # A submodule not imported yet (``gitmem.history`` after ``import gitmem``).
            try:
                return importlib.import_module(f"{__name__}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{__name__}.{name}":
                    raise
                raise AttributeError(f"module 'gitmem' has no attribute {name!r}") from None
        module, attribute = where
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        globals()[name] = value  # later uses are plain global lookups
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


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
    "RollbackCheckOff",
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
