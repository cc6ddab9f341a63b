"""git objects, loose and packed: their encoding, and reading and writing them in the object
database. Nothing here knows of the redo log: it holds objects of its own, and the repository
(``repo.py``) asks it before asking this.

Object ids cross the package's boundary as 40-character hex strings so that nothing above it
depends on pygit2 types.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple, Protocol

import pygit2
from pygit2.enums import FileMode, ObjectType

from ..errors import FormatLimitExceeded, IntegrityError
from ..format import MAX_BLOB_BYTES, MAX_COMMIT_BYTES, MAX_TREE_BYTES
from ..fsutil import DIR_MODE, NEW_FILE_FLAGS, read_regular_file, write_all
from . import wal
from .files import PROCESS
from .handle import SIGNATURE, Handle
from .pack import zlib_stored

TREE_MODE = int(FileMode.TREE)
BLOB_MODE = int(FileMode.BLOB)
# Loose objects written by gitmem itself (Objects.write_loose): the temporary file's prefix and
# the file mode git gives objects (read-only; owner-only, as every file gitmem makes).
_TMP_OBJECT = "tmp_obj_gitmem-"
_OBJECT_FILE_MODE = 0o400
_TMP_SEQ = itertools.count()
_TYPE_NAMES = {
    int(ObjectType.COMMIT): b"commit",
    int(ObjectType.TREE): b"tree",
    int(ObjectType.BLOB): b"blob",
    int(ObjectType.TAG): b"tag",
}
_HEX = frozenset(b"0123456789abcdef")
# Whether loose objects' hashes are checked on read. Always on; tests turn it off (with
# libgit2's check) to stand in for a SHA-1 second preimage and reach the checks behind it.
_CHECK_LOOSE_HASHES = True
_OCTAL = frozenset(b"01234567")
# What an object reachable from some ref may be, for a reader that does not know its type.
ANY_KIND = {
    b"commit": MAX_COMMIT_BYTES,
    b"tree": MAX_TREE_BYTES,
    b"blob": MAX_BLOB_BYTES,
    b"tag": MAX_COMMIT_BYTES,
}

_TYPE_CODES = {name: code for code, name in _TYPE_NAMES.items()}
GITLINK = 0o160000
_HEX_NAMES = frozenset(f"{i:02x}" for i in range(256))
_HEX_TEXT = frozenset("0123456789abcdef")
# The temporary files an object writer killed mid-write leaves: gitmem's own (Objects.write_loose,
# in objects/) and libgit2's (in objects/ or a fan-out directory).
TEMPORARY_OBJECT_PREFIXES = (_TMP_OBJECT, "tmp_object_git2_")


class TreeEntry(NamedTuple):
    """One entry of a git tree: raw ``name``, ``oid`` (hex) and git ``mode``."""

    name: str
    oid: str
    mode: int


@dataclass(frozen=True)
class CommitInfo:
    """What a commit says: its id, tree id, parent ids and message bytes."""

    oid: str
    tree: str
    parents: tuple[str, ...]
    message: bytes


class Reader(Protocol):
    """What walks the objects of a repository need: every object, the redo log's too."""

    def has(self, oid: str) -> bool: ...

    def read_any(self, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes]: ...

    def ref(self, name: str) -> str | None: ...


class Objects:
    """The object database of the repository ``handle`` opens: loose objects and packs."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._objects = str(handle.path / "objects")

    def write_loose(self, kind: bytes, payload: bytes) -> str:
        """Store an object as a loose file, as git does, and return its id.

        Where writes are flushed by ``syncfs`` (see :func:`flush.sync`) nothing here is fsynced, and
        this takes four system calls: create a unique temporary file in ``objects/``, write the
        deflated object, close it, rename it to ``objects/xx/<rest of the id>`` (a fan-out
        directory missing is made, owner-only, and the rename tried again). libgit2 makes about
        fifteen for the same file (it first looks for the object, rescans the pack directory
        when it is missing, and links then unlinks). An object already there as a loose file is
        not written again (one ``stat``): replacing it, by a rename of a file not yet flushed,
        could let a power loss keep the rename and lose the data of an object that was durable
        (``benchmarks/crash_states.py --small-log`` replays such power losses).
        """
        oid = wal.object_id(kind, payload)
        if os.path.lexists(f"{self._objects}/{oid[:2]}/{oid[2:]}"):
            return oid
        data = zlib_stored(b"%s %d\0" % (kind, len(payload)) + payload)
        tmp = f"{self._objects}/{_TMP_OBJECT}{PROCESS[0]}-{threading.get_ident()}-{next(_TMP_SEQ)}"
        fd = os.open(tmp, NEW_FILE_FLAGS, _OBJECT_FILE_MODE)  # O_EXCL: never another's file
        try:
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
            final = f"{self._objects}/{oid[:2]}/{oid[2:]}"
            try:
                os.rename(tmp, final)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(f"{self._objects}/{oid[:2]}", DIR_MODE)
                os.rename(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return oid

    def write_odb(self, kind: bytes, payload: bytes) -> str:
        """Store an object through libgit2 (which fsyncs it where the write mode asks)."""
        return str(self._handle.git.odb.write(_TYPE_CODES[kind], payload))

    def read_stored(self, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes] | None:
        """:meth:`GitRepo.read_any` from the object database alone; None when ``oid`` is not there.

        Packs first, as git reads, through a libgit2 database of the packs alone: libgit2's
        own database would look for the loose file at every read (``Odb.read`` reads by prefix,
        which asks every backend), and so would a loose read tried first, a failed ``open`` per
        object, which a cold load of a large directory would pay for each of its trees. Then the
        loose file, read here; then, for a store that borrows objects (``alternates``), the
        whole database as before. A packed copy that fails to read (a damaged pack) gives way
        to a loose copy, as in git; without one its error stands.
        """
        try:
            found = self.read_packed(self._handle.packs, oid, limits)
        except IntegrityError:
            loose = read_loose(self._objects, oid, limits)
            if loose is None:
                raise
            return loose
        if found is not None:
            return found
        loose = read_loose(self._objects, oid, limits)
        if loose is not None:
            return loose
        return self.read_packed(self._handle.git.odb, oid, limits)

    @staticmethod
    def read_packed(
        odb: pygit2.Odb, oid: str, limits: Mapping[bytes, int]
    ) -> tuple[bytes, bytes] | None:
        """``(type, payload)`` of ``oid`` read by libgit2 from ``odb``, its header checked
        first; None when ``odb`` lacks it."""
        try:
            otype, size = odb.read_header(oid)
            found = _TYPE_NAMES.get(otype, b"")
            check_declared(oid, found, size, limits)
            otype, data = odb.read(oid)
        except KeyError:
            return None
        except (ValueError, OSError, pygit2.GitError) as exc:
            # pygit2 raises OSError for libgit2's OS-class errors: a pack that is truncated,
            # unreadable or gone while a multi-pack index still names it.
            raise IntegrityError(f"object {oid} is corrupt: {exc}") from None
        if _TYPE_NAMES.get(otype, b"") != found or len(data) != size:
            raise IntegrityError(f"object {oid} is corrupt: it differs from its header")
        return found, data

    def exists(self, oid: str) -> bool:
        """True when object ``oid`` is in the object database."""
        return bool(self._handle.git.odb.exists(oid))


# The modes git writes, by their text: an entry's mode is looked up here, and only another is
# checked digit by digit (parse_tree's loop is most of reading a big split directory's trees).
_MODES = {b"%o" % mode: mode for mode in (0o40000, 0o100644, 0o100755, 0o120000, 0o160000)}
_new_tree_entry: Callable[[tuple[str, str, int]], TreeEntry] = partial(tuple.__new__, TreeEntry)


def parse_tree(data: bytes, oid: str) -> list[TreeEntry]:
    """The entries of a raw git tree, checked as strictly as git's own writer makes them.

    Each entry is ``MODE SP NAME NUL ID`` (mode in octal without leading zeros, id as 20 raw
    bytes). Names must be UTF-8 without ``/``, each used once, in git's order (a tree's name
    sorts as if it ended in ``/``): one canonical form per content, as git fsck demands.
    """
    entries: list[TreeEntry] = []
    names: set[bytes] = set()
    previous = b""
    pos, end = 0, len(data)
    find = data.find
    while pos < end:
        space = find(b" ", pos, pos + 8)
        nul = find(b"\0", space + 1) if space > pos else -1
        name = data[space + 1 : nul]
        if nul < 0 or nul + 21 > end or not name or b"/" in name or name in names:
            raise IntegrityError(f"tree {oid} is malformed")
        mode_text = data[pos:space]
        mode = _MODES.get(mode_text)
        if mode is None:
            if mode_text[:1] == b"0" or not set(mode_text) <= _OCTAL:
                raise IntegrityError(f"tree {oid} is malformed")
            mode = int(mode_text, 8)
        key = name + b"/" if mode == TREE_MODE else name
        if key <= previous:
            raise IntegrityError(f"tree {oid} is malformed: its entries are out of order")
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            raise IntegrityError(f"tree {oid} is malformed: a name is not UTF-8") from None
        entries.append(_new_tree_entry((text, data[nul + 1 : nul + 21].hex(), mode)))
        names.add(name)
        previous = key
        pos = nul + 21
    return entries


def parse_commit(data: bytes, oid: str) -> CommitInfo:
    """What a raw git commit says: ``tree``, then ``parent`` lines, then author and committer
    (anything after them up to the blank line is ignored, as git does), then the message."""
    head, sep, message = data.partition(b"\n\n")
    lines = head.split(b"\n")
    if not sep or not lines[0].startswith(b"tree "):
        raise IntegrityError(f"commit {oid} is malformed")
    count = 1
    while count < len(lines) and lines[count].startswith(b"parent "):
        count += 1
    after = lines[count : count + 2]
    if [line.split(b" ", 1)[0] for line in after] != [b"author", b"committer"]:
        raise IntegrityError(f"commit {oid} is malformed")
    tree = _hex_id(lines[0][5:], oid)
    parents = tuple(_hex_id(line[7:], oid) for line in lines[1:count])
    return CommitInfo(oid=oid, tree=tree, parents=parents, message=message)


def tag_target(data: bytes, oid: str) -> str:
    first = data.split(b"\n", 1)[0]
    if not first.startswith(b"object "):
        raise IntegrityError(f"tag {oid} is malformed")
    return _hex_id(first[7:], oid)


def _id_bytes(oid: str) -> bytes:
    """A full object id as written in a commit; ValueError for anything else."""
    value = oid.encode()
    if len(value) != 40 or not set(value) <= _HEX:
        raise ValueError(f"{oid!r} is not a full object id")
    return value


def _hex_id(value: bytes, oid: str) -> str:
    if len(value) != 40 or not set(value) <= _HEX:
        raise IntegrityError(f"object {oid} is malformed: {value[:48]!r} is not an object id")
    return value.decode()


def check_size(what: str, size: int, limit: int) -> None:
    if size > limit:
        raise FormatLimitExceeded(
            f"refused to write a {what} of {size:,} bytes: the repository format allows at "
            f"most {limit:,}. Nothing was written."
        )


def check_declared(oid: str, kind: bytes, size: int, limits: Mapping[bytes, int]) -> None:
    """Refuse an object, from its header alone, whose type or size ``limits`` does not allow."""
    limit = limits.get(kind)
    if limit is None:
        wanted = " or ".join(k.decode() for k in limits)
        raise IntegrityError(f"object {oid} should be a {wanted}")
    if size > limit:
        raise IntegrityError(
            f"object {oid} is corrupt: it declares {size:,} bytes, more than a gitmem "
            f"{kind.decode()} may have ({limit:,})"
        )


def _deflate_bound(size: int) -> int:
    """The longest zlib stream of ``size`` bytes (zlib's ``compressBound``, any level)."""
    return size + (size >> 12) + (size >> 14) + (size >> 25) + 13


# An object header is "<type> <decimal size>\0": "commit 67108864\0" is 16 bytes.
_HEADER_MAX = 32


def read_loose(objects: str, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes] | None:
    """``(type, payload)`` of loose object ``oid``, hash-verified; None when it is not loose.

    Inflates only the header first; the rest only if its type and size are allowed, and never
    more than the size it declares.
    """
    largest = max(limits.values())
    try:
        data = read_regular_file(f"{objects}/{oid[:2]}/{oid[2:]}", _deflate_bound(largest + 32))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            wanted = " or ".join(k.decode() for k in limits)
            raise IntegrityError(
                f"object {oid} is corrupt: its loose file is longer than a gitmem {wanted} may be"
            ) from None
        raise IntegrityError(f"object {oid} cannot be read: {exc.strerror or exc}") from None
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, _HEADER_MAX)
        nul = raw.find(b"\0")
        kind, _, size_text = raw[: max(nul, 0)].partition(b" ")
        if nul < 0 or not size_text.isdigit() or len(size_text) > 20:
            raise IntegrityError(f"object {oid} is corrupt: its header is malformed")
        size = int(size_text)
        check_declared(oid, kind, size, limits)
        total = nul + 1 + size
        if len(raw) <= total:
            # One byte more than declared: a longer object shows itself without inflating it.
            raw += inflater.decompress(inflater.unconsumed_tail, total + 1 - len(raw))
        if len(raw) == total and not inflater.eof:
            raw += inflater.decompress(inflater.unconsumed_tail, 1)  # reaches the checksum
    except zlib.error:
        raise IntegrityError(f"object {oid} is corrupt: it does not inflate") from None
    if len(raw) != total:
        raise IntegrityError(f"object {oid} is corrupt: its header is malformed")
    if not inflater.eof:
        raise IntegrityError(f"object {oid} is corrupt: its loose file is truncated")
    if _CHECK_LOOSE_HASHES and hashlib.sha1(raw).hexdigest() != oid:
        raise IntegrityError(f"object {oid} is corrupt: its content does not match its id")
    return kind, raw[nul + 1 :]


def commit_bytes(tree: str, parents: Sequence[str], message: bytes, *, time: int) -> bytes:
    """The raw git commit of ``tree`` with ``parents`` and ``message``, by gitmem's neutral
    identity at ``time`` seconds since the epoch, offset +0000 (author and committer), as
    :func:`parse_commit` reads it."""
    if b"\0" in message:
        raise ValueError("a commit message cannot hold a NUL byte")
    if time < 0:
        raise ValueError(f"a commit time cannot be negative ({time})")
    signature = b"%s <%s> %d +0000" % (SIGNATURE.name.encode(), SIGNATURE.email.encode(), time)
    lines = [b"tree " + _id_bytes(tree)] + [b"parent " + _id_bytes(p) for p in parents]
    lines += [b"author " + signature, b"committer " + signature]
    return b"\n".join(lines) + b"\n\n" + message


def tree_bytes(entries: list[TreeEntry]) -> bytes:
    """The raw git tree of ``entries``: sorted as git sorts (a tree's name as if it ended in
    ``/``), each entry ``MODE SP NAME NUL ID`` with the mode in octal without leading zeros. A
    name given twice keeps its last entry, as libgit2's tree builder does."""

    def order(entry: TreeEntry) -> bytes:
        name = entry.name.encode("utf-8")
        return name + b"/" if entry.mode == TREE_MODE else name

    return b"".join(
        b"%o %s\0%s" % (entry.mode, entry.name.encode("utf-8"), bytes.fromhex(entry.oid))
        for entry in sorted({entry.name: entry for entry in entries}.values(), key=order)
    )


def loose_objects(objects: Path) -> list[str]:
    """Every loose object id (a name that is not one is left alone)."""
    found: list[str] = []
    for fanout in sorted(_HEX_NAMES & set(os.listdir(objects))):
        for name in os.listdir(objects / fanout):
            oid = fanout + name
            if len(oid) == 40 and set(oid) <= _HEX_TEXT:
                found.append(oid)
    return found
