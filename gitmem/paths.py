"""The only way a string becomes a memory path.

A :class:`MemoryPath` is a tuple of NFC-normalized components below ``/memories``. Everything
hostile is refused here, before any store is touched, so no refused path can cause a write.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import InvalidPath

ROOT = "/memories"
MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 1024

# Device names Windows refuses whatever the extension; refused so an export never breaks there.
_WINDOWS_RESERVED = frozenset(
    ["con", "prn", "aux", "nul"]
    + [f"com{i}" for i in range(10)]
    + [f"lpt{i}" for i in range(10)]
    + ["com¹", "com²", "com³", "lpt¹", "lpt²", "lpt³"]
)
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_DRIVE = re.compile(r"^[A-Za-z]:")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
# Rounds of percent-decoding tried when looking for encoded traversal; real names are not
# encoded more than twice, and each round can only shorten the string.
_DECODE_ROUNDS = 4


@dataclass(frozen=True, order=True)
class MemoryPath:
    """A validated path under ``/memories``: ``parts`` are its NFC components (empty = root)."""

    parts: tuple[str, ...]

    def __str__(self) -> str:
        return ROOT + "".join("/" + p for p in self.parts)

    @property
    def is_root(self) -> bool:
        """True for ``/memories`` itself."""
        return not self.parts

    @property
    def name(self) -> str:
        """The last component ('' for the root)."""
        return self.parts[-1] if self.parts else ""

    @property
    def parent(self) -> MemoryPath:
        """The containing directory (the root is its own parent)."""
        return MemoryPath(self.parts[:-1])

    def child(self, name: str) -> MemoryPath:
        """This path extended by one already-validated component."""
        return MemoryPath((*self.parts, name))

    def is_within(self, other: MemoryPath) -> bool:
        """True when this path equals ``other`` or lies below it."""
        return self.parts[: len(other.parts)] == other.parts

    def relative(self) -> str:
        """The path below the root, without a leading slash ('' for the root)."""
        return "/".join(self.parts)


MEMORIES_ROOT = MemoryPath(())


def parse(raw: object) -> MemoryPath:
    """Turn ``raw`` into a :class:`MemoryPath` or raise :class:`InvalidPath`.

    Accepts ``/memories``, ``/memories/`` and ``/memories/a/b`` (repeated slashes fold). Refuses
    anything outside the root, ``.`` and ``..`` components, backslashes, percent-encoded or
    NFKC look-alike traversal, control characters, lone surrogates, ``.git`` in any case,
    Windows drive letters and device names, and over-long components or paths.
    """
    if not isinstance(raw, str):
        raise InvalidPath(repr(raw), f"a path must be a string, not {type(raw).__name__}")
    path = raw
    if not path:
        raise InvalidPath(path, "the path is empty; memory paths start with /memories")
    for ch in path:
        code = ord(ch)
        if 0xD800 <= code < 0xE000:
            raise InvalidPath(path, "it contains a lone surrogate (not valid Unicode text)")
        if code < 0x20 or 0x7F <= code < 0xA0 or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            raise InvalidPath(path, "it contains a control character")
        if ch in _BIDI_CONTROLS:
            # Bidirectional overrides make a name display as something it is not.
            raise InvalidPath(path, "it contains a bidirectional text control character")
    if "\\" in path:
        raise InvalidPath(path, "backslashes are not allowed; use / between components")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidPath(path, f"it is longer than {MAX_PATH_BYTES} bytes")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise InvalidPath(path, "every memory path must start with /memories/")
    _refuse_encoded_traversal(path)

    parts: list[str] = []
    for component in path[len(ROOT) :].split("/"):
        if component == "":
            continue
        parts.append(_check_component(path, component))
    result = MemoryPath(tuple(parts))
    # NFC can lengthen a name (composition exclusions such as U+0958 decompose), so the limit
    # holds for the stored form too: every accepted path must parse again as itself.
    if len(str(result).encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidPath(path, f"it is longer than {MAX_PATH_BYTES} bytes")
    return result


def _refuse_encoded_traversal(path: str) -> None:
    current = path
    for _ in range(_DECODE_ROUNDS):
        if not _PERCENT.search(current):
            return
        decoded = urllib.parse.unquote(current, errors="replace")
        if "\\" in decoded or decoded.count("/") != path.count("/"):
            raise InvalidPath(path, "it contains a percent-encoded separator")
        if any(c in (".", "..") for c in decoded.split("/")):
            raise InvalidPath(path, "it contains percent-encoded traversal")
        current = decoded


def _check_component(path: str, component: str) -> str:
    if component in (".", ".."):
        raise InvalidPath(path, f"'{component}' components are not allowed")
    folded = unicodedata.normalize("NFKC", component)
    if folded in (".", "..") or "/" in folded or "\\" in folded:
        raise InvalidPath(path, "a component is a look-alike of '.', '..' or a separator")
    name = unicodedata.normalize("NFC", component)
    if len(name.encode("utf-8")) > MAX_COMPONENT_BYTES:
        raise InvalidPath(path, f"a component is longer than {MAX_COMPONENT_BYTES} bytes")
    lowered = folded.casefold()
    if lowered == ".git" or lowered.rstrip(". ") == ".git":
        raise InvalidPath(path, "'.git' components are not allowed")
    if _DRIVE.match(folded):
        raise InvalidPath(path, "a component looks like a Windows drive letter")
    stem = lowered.split(".", 1)[0].rstrip(" ")
    if stem in _WINDOWS_RESERVED:
        raise InvalidPath(path, f"'{component}' is a reserved device name on Windows")
    return name


MemoryPathLike = str | MemoryPath
"""What public methods accept as a memory path: the text (parsed) or a parsed path."""


def as_path(value: MemoryPathLike) -> MemoryPath:
    """``value`` as a :class:`MemoryPath`: parsed when a ``str`` (:class:`InvalidPath` if not
    allowed), returned as is when already one; anything else is a :class:`TypeError`.

    The one conversion point for every public method that takes a memory path.
    """
    if isinstance(value, MemoryPath):
        return value
    if isinstance(value, str):
        return parse(value)
    raise TypeError(f"a memory path must be a str or MemoryPath, not {type(value).__name__}")


def as_paths(values: Iterable[MemoryPathLike]) -> list[MemoryPath]:
    """Each of ``values`` through :func:`as_path`; one bare path (not in a list) is a TypeError."""
    if isinstance(values, (str, MemoryPath)):
        raise TypeError(f"expected a list of memory paths, not one path: write [{str(values)!r}]")
    return [as_path(value) for value in values]
