"""The only way a string becomes a memory path, and the rules a *new* name must follow.

A :class:`MemoryPath` is a tuple of NFC-normalized components below ``/memories``. Everything
hostile is refused by :func:`parse`, before any store is touched, so no refused path can cause a
write. Names that are only confusing or unportable (invisible characters, a trailing dot, a
sibling differing only in case or in look-alike characters, a path deeper than
:data:`MAX_DEPTH`) are refused by
:func:`check_new_entry` when a write would add them, so a store that already holds one stays
readable, and the name can still be renamed away or deleted.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import InvalidPath, printable, shown_repr

ROOT = "/memories"
MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 1024
# Components a new path may have (the file's own name included). Real memory trees are a few
# levels deep; the bound keeps every tree small enough to show and export anywhere. Nothing walks
# trees recursively, so a deeper path in an older store still works (see docs/safeguards.md).
MAX_DEPTH = 64

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
_PERCENT_U = re.compile(r"%[uU]([0-9A-Fa-f]{4})")
# Rounds of percent-decoding tried when looking for encoded traversal; real names are not
# encoded more than twice, and each round can only shorten the string.
_DECODE_ROUNDS = 4
# Overlong UTF-8 (a code point spelt with more bytes than it needs): never valid UTF-8, but
# lenient decoders turn C0 AE into "." and C0 AF into "/". Two-, three- and four-byte forms.
_OVERLONG = re.compile(
    rb"[\xc0\xc1][\x80-\xbf]|\xe0[\x80-\x9f][\x80-\xbf]|\xf0[\x80-\x8f][\x80-\xbf]{2}"
)
# Characters that display as a slash or backslash but that NFKC leaves alone (the fullwidth and
# small forms NFKC folds are caught by parse): fraction slash, division slash, set minus, big
# solidus and reverse solidus, the box-drawing diagonals.
_SLASH_LOOKALIKES = frozenset("\u2044\u2215\u2216\u29f8\u29f9\u2571\u2572")
# Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt, which Python's
# unicodedata does not expose): characters a renderer shows as nothing, like U+00AD SOFT HYPHEN,
# U+034F COMBINING GRAPHEME JOINER and the Hangul fillers, besides the format characters (Cf).
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_ZWNJ, _ZWJ = "\u200c", "\u200d"
_VARIATION_SELECTORS = ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
_TAG_BLACK_FLAG, _TAG_CANCEL = "\U0001f3f4", "\U000e007f"
_VIRAMA = 9  # the canonical combining class of a virama (RFC 5892, CONTEXTJ)


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
        raise InvalidPath(shown_repr(raw), f"a path must be a string, not {type(raw).__name__}")
    path = raw
    if not path:
        raise InvalidPath(path, "the path is empty; memory paths start with /memories")
    if len(path) > MAX_PATH_BYTES:
        # Every character is a byte or more: refused before any per-character work, so a
        # 10 MB path costs no more than a short one.
        raise InvalidPath(path, f"it is longer than {MAX_PATH_BYTES} bytes")
    if path.isascii():
        # The only ASCII characters the loop below refuses are the controls (and DEL).
        if not path.isprintable():
            raise InvalidPath(path, "it contains a control character")
    else:
        _refuse_unprintable(path)
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


def _refuse_unprintable(path: str) -> None:
    """Refuse lone surrogates, control characters and bidirectional controls in ``path``."""
    for ch in path:
        code = ord(ch)
        if 0xD800 <= code < 0xE000:
            raise InvalidPath(path, "it contains a lone surrogate (not valid Unicode text)")
        if code < 0x20 or 0x7F <= code < 0xA0 or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            raise InvalidPath(path, "it contains a control character")
        if ch in _BIDI_CONTROLS:
            # Bidirectional overrides make a name display as something it is not.
            raise InvalidPath(path, "it contains a bidirectional text control character")


def _refuse_encoded_traversal(path: str) -> None:
    """Refuse every encoded spelling of ``.``, ``..``, ``/`` and ``\\``.

    Percent-encoding to any depth (``%2e``, ``%252e``, IIS's ``%u002e``), overlong UTF-8 inside
    it (``%c0%ae``, ``%e0%80%ae``) and the NFKC look-alikes it may decode to (``%ef%bc%8e``,
    a fullwidth full stop) are all one thing to a server that decodes leniently.
    """
    slashes = (path if path.isascii() else unicodedata.normalize("NFKC", path)).count("/")
    current = path
    for _ in range(_DECODE_ROUNDS):
        if not _PERCENT.search(current) and not _PERCENT_U.search(current):
            return
        decoded = _lenient_unquote(current)
        folded = unicodedata.normalize("NFKC", decoded)
        if "\\" in folded or folded.count("/") != slashes:
            raise InvalidPath(path, "it contains a percent-encoded separator")
        if any(c in (".", "..") for c in folded.split("/")):
            raise InvalidPath(path, "it contains percent-encoded traversal")
        current = decoded


def _lenient_unquote(text: str) -> str:
    """Percent-decode ``text`` as a lenient server would: overlong UTF-8 becomes its character."""
    text = _PERCENT_U.sub(lambda m: chr(int(m.group(1), 16)), text)
    raw = _OVERLONG.sub(_overlong_char, urllib.parse.unquote_to_bytes(text))
    return raw.decode("utf-8", errors="replace")


def _overlong_char(match: re.Match[bytes]) -> bytes:
    raw = match.group()
    bits = {2: 0x1F, 3: 0x0F, 4: 0x07}[len(raw)]
    code = raw[0] & bits
    for byte in raw[1:]:
        code = (code << 6) | (byte & 0x3F)
    # A surrogate spelt overlong stays invalid (it decodes to U+FFFD below).
    return chr(code).encode("utf-8", errors="surrogatepass")


def _check_component(path: str, component: str) -> str:
    if component in (".", ".."):
        raise InvalidPath(path, f"'{component}' components are not allowed")
    # ASCII is its own NFKC and NFC form.
    ascii_only = component.isascii()
    folded = component if ascii_only else unicodedata.normalize("NFKC", component)
    if folded in (".", "..") or "/" in folded or "\\" in folded:
        raise InvalidPath(path, "a component is a look-alike of '.', '..' or a separator")
    name = component if ascii_only else unicodedata.normalize("NFC", component)
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


# -- new names ----------------------------------------------------------------------------------


def check_new_entry(parent: MemoryPath, name: str, siblings: Iterable[str]) -> None:
    """Refuse adding entry ``name`` to directory ``parent``, which holds ``siblings``, when the
    new path would be more than :data:`MAX_DEPTH` deep, when ``name`` breaks a rule of
    :func:`new_name_problem`, or when it collides with a sibling on a case-insensitive or
    normalizing file system (raises :class:`InvalidPath`)."""
    path = parent.child(name)
    if len(path.parts) > MAX_DEPTH:
        raise InvalidPath(
            str(path), f"it is {len(path.parts)} levels deep; new paths may have {MAX_DEPTH}"
        )
    problem = new_name_problem(name)
    if problem is not None:
        raise InvalidPath(str(path), problem)
    for other in siblings:
        clash = name_clash(name, other)
        if clash is not None:
            raise InvalidPath(str(path), clash)


def name_clash(name: str, other: str) -> str | None:
    """Why ``name`` may not be beside its sibling ``other`` (see :func:`check_new_entry`), or
    None when it may: a case twin (one file on a case-insensitive, normalizing file system), or
    a look-alike (one :func:`skeleton` after case folding). Two ASCII names are never
    look-alikes ("rn" and "m", "l" and "1"): the rule is for a letter of another script
    standing in for one of this one."""
    if other == name:
        return None
    key, folded = fold_name(name), fold_name(other)
    if folded == key:
        return (
            f"it differs from the existing {printable(repr(other))} only in case or Unicode "
            "form; the two would be one file on Windows and macOS"
        )
    if not (other.isascii() and name.isascii()) and (
        _skeleton_of_folded(folded) == _skeleton_of_folded(key)
    ):
        return (
            f"it looks the same as the existing {printable(repr(other))}: they differ only in "
            "look-alike characters (Unicode's confusables), so one would be taken for the other"
        )
    return None


def fold_name(name: str) -> str:
    """The key under which case-insensitive, normalizing file systems (NTFS, APFS) see ``name``."""
    if name.isascii():
        # ASCII is its own NFD, and folds by lower-casing A-Z alone: cheaper than the two
        # normalizations, on every name of a directory whose fold index is built (a cold
        # create's twin check).
        return name.lower()
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", name).casefold())


def skeleton(name: str) -> str:
    """Unicode TS #39's skeleton of ``name``: NFD, each character replaced by its prototype in
    Unicode's confusables.txt, NFD again. Names with one skeleton look alike."""
    mapped = unicodedata.normalize("NFD", name).translate(_prototypes())
    return unicodedata.normalize("NFD", mapped)


def twin_key(name: str) -> str:
    """The key a sibling that ``name`` may not be added beside shares with it (a case twin, a
    look-alike, or both; maybe more names, which :func:`name_clash` tells apart): the
    :func:`skeleton` of its :func:`fold_name`, with the expansions of ASCII characters'
    skeletons collapsed, so that an ASCII name's key is a few byte operations."""
    folded = fold_name(name)
    if folded.isascii():
        raw = folded.encode("ascii").translate(_ASCII_KEY, b"'\"`").replace(b"rn", b"m")
        return raw.decode("ascii")
    return _collapse(skeleton(folded))


def _collapse(skeleton: str) -> str:
    """``skeleton`` with quotes dropped, ``rn`` read as ``m`` and ``º/₀`` as ``%``: the
    prototypes ASCII characters expand to, made one character (or none) again."""
    for quote in "'\"":
        skeleton = skeleton.replace(quote, "")
    return skeleton.replace("rn", "m").replace("\u00ba/\u2080", "%")


_ASCII_KEY = bytes.maketrans(b"01|", b"Oll")


# The skeleton of each ASCII character that is not its own (confusables.txt; a test checks them
# against gitmem/confusables.txt), so that an ASCII name never loads the table. None of them is,
# or maps to, a combining mark or a character replaced after it: replacing them one after the
# other is the skeleton.
_ASCII_PROTOTYPES = (
    ('"', "''"),
    ("%", "\u00ba/\u2080"),
    ("0", "O"),
    ("1", "l"),
    ("I", "l"),
    ("`", "'"),
    ("m", "rn"),
    ("|", "l"),
)


def _skeleton_of_folded(folded: str) -> str:
    if not folded.isascii():
        return skeleton(folded)
    for char, prototype in _ASCII_PROTOTYPES:
        if char in folded:
            folded = folded.replace(char, prototype)
    return folded


@functools.cache
def _prototypes() -> dict[int, str]:
    """confusables.txt's mapping (the copy shipped as gitmem/confusables.txt), read once."""
    text = importlib.resources.files(__package__).joinpath("confusables.txt").read_text("utf-8")
    table: dict[int, str] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            source, target = line.split(";")
            table[int(source, 16)] = "".join(chr(int(code, 16)) for code in target.split())
    return table


def new_name_problem(name: str) -> str | None:
    """Why ``name`` may not be given to a new file or directory, or None when it may.

    Refused: invisible and format characters (category Cf and Unicode's default-ignorable code
    points) except where a name needs one to be spelt (a joiner inside an emoji sequence or
    after a virama, a non-joiner between Arabic-script letters, a variation selector after a
    visible character, the tag letters of a subdivision flag); characters that display as a
    slash; and a trailing dot or space, which Windows drops.
    """
    if name.endswith(".") or unicodedata.category(name[-1]) == "Zs":
        return "a name may not end with a dot or a space (Windows drops them)"
    if name.isascii():
        return None  # no ASCII character is invisible, a format character or a slash look-alike
    for index, ch in enumerate(name):
        if ch in _SLASH_LOOKALIKES:
            return f"it contains {_codepoint(ch)}, which looks like a slash"
        if _invisible(ch) and not _needed_here(name, index):
            return f"it contains the invisible or formatting character {_codepoint(ch)}"
    return None


def _codepoint(ch: str) -> str:
    return f"U+{ord(ch):04X} {unicodedata.name(ch, '')}".rstrip()


def _invisible(ch: str) -> bool:
    code = ord(ch)
    if unicodedata.category(ch) == "Cf":
        return True
    return any(low <= code <= high for low, high in _DEFAULT_IGNORABLE)


def _needed_here(name: str, index: int) -> bool:
    """True when the invisible character at ``index`` is part of how ``name`` is spelt."""
    ch = name[index]
    before = name[index - 1] if index else ""
    after = name[index + 1] if index + 1 < len(name) else ""
    code = ord(ch)
    if any(low <= code <= high for low, high in _VARIATION_SELECTORS):
        return bool(before) and not _invisible(before)
    if ch in (_ZWJ, _ZWNJ) and before and unicodedata.combining(before) == _VIRAMA:
        return True
    if ch == _ZWJ:
        return _emoji_before(name, index) and bool(after) and _is_emoji(after)
    if ch == _ZWNJ:
        return _arabic_letter(before) and _arabic_letter(after)
    if 0xE0020 <= code <= 0xE007F:
        return _in_flag_tags(name, index)
    return False


def _is_emoji(ch: str) -> bool:
    return unicodedata.category(ch) == "So"


def _emoji_before(name: str, index: int) -> bool:
    """True when an emoji (with any variation selector or skin tone) ends just before ``index``."""
    pos = index - 1
    while pos >= 0 and (name[pos] == "\ufe0f" or 0x1F3FB <= ord(name[pos]) <= 0x1F3FF):
        pos -= 1
    return pos >= 0 and _is_emoji(name[pos])


def _arabic_letter(ch: str) -> bool:
    return bool(ch) and unicodedata.category(ch) == "Lo" and "ARABIC" in unicodedata.name(ch, "")


def _in_flag_tags(name: str, index: int) -> bool:
    """True inside a subdivision flag: U+1F3F4, tag letters, U+E007F CANCEL TAG."""
    start = index
    while start > 0 and 0xE0020 <= ord(name[start - 1]) <= 0xE007E:
        start -= 1
    end = index
    while end < len(name) and 0xE0020 <= ord(name[end]) <= 0xE007E:
        end += 1
    if name[index] == _TAG_CANCEL:
        end = index
    closed = end < len(name) and name[end] == _TAG_CANCEL
    return start > 0 and name[start - 1] == _TAG_BLACK_FLAG and closed and end > start
