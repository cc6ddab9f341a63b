"""Size limits: how big one file and the whole memory may grow, and how much one ``view`` shows.

Writes are checked before anything is stored (:class:`LimitedEditor`), from sizes the encrypted
file headers already hold, so no file content is decrypted to enforce a limit. A write is refused
only when it *grows* something past its cap: a file or store already over a newly lowered cap
stays readable and may still be shortened or deleted. Reads over ``max_view_chars`` are cut at a
whole line and say how to page on with ``view_range``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cache import BoundedCache
from .editor import TreeEditor
from .errors import GitMemError, UsageError, shown_repr
from .format import KIND_DIR
from .paths import MemoryPath
from .render import LINE_NUMBER_WIDTH
from .tree import Node, TreeCodec

KIB = 1024
MIB = 1024 * KIB
DEFAULT_MAX_FILE_BYTES = 1 * MIB
DEFAULT_MAX_STORE_BYTES = 64 * MIB
DEFAULT_MAX_VIEW_CHARS = 50_000
# Room for the longest header (a 1,024-byte path) and the paging note, so a cut view always
# shows at least part of one line.
MIN_VIEW_CHARS = 2_048
_SIZE_CACHE_ENTRIES = 1 << 16
# Root totals kept apart from the directories' (see StoreSizer): every write makes a new root,
# and only the newest few are ever asked for again.
_ROOT_CACHE_ENTRIES = 64


class LimitExceeded(GitMemError):
    """A write would grow a file or the store past a configured limit; nothing was written."""

    def __init__(self, message: str, *, limit: str, cap: int, actual: int) -> None:
        self.limit = limit
        self.cap = cap
        self.actual = actual
        super().__init__(message)


@dataclass(frozen=True)
class Limits:
    """Size limits of one store; ``None`` switches a limit off.

    ``max_file_bytes`` and ``max_store_bytes`` count plaintext UTF-8 bytes (the store: every
    file at the head, hidden ones included); ``max_view_chars`` counts the characters of one
    ``view`` result.
    """

    max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES
    max_store_bytes: int | None = DEFAULT_MAX_STORE_BYTES
    max_view_chars: int | None = DEFAULT_MAX_VIEW_CHARS

    def __post_init__(self) -> None:
        for name in ("max_file_bytes", "max_store_bytes", "max_view_chars"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(
                    f"{name} must be a positive integer or None, not {shown_repr(value)}"
                )
        if self.max_view_chars is not None and self.max_view_chars < MIN_VIEW_CHARS:
            raise UsageError(f"max_view_chars must be at least {MIN_VIEW_CHARS:,}")

    @classmethod
    def unlimited(cls) -> Limits:
        """Every limit switched off."""
        return cls(None, None, None)

    def check_file(self, path: MemoryPath, old: int, new: int) -> None:
        """Refuse growing file ``path`` from ``old`` to ``new`` bytes past ``max_file_bytes``."""
        cap = self.max_file_bytes
        if cap is None or new <= cap or new <= old:
            return
        raise LimitExceeded(
            f"refused to write {path}: it would be {new:,} bytes, {_amount(new - cap)} over the "
            f"file size limit of {human_bytes(cap)} (max_file_bytes = {cap:,}). Nothing was "
            "written; keep memory files small, e.g. split the content into several files.",
            limit="max_file_bytes",
            cap=cap,
            actual=new,
        )

    def check_store(self, path: MemoryPath, old_total: int, new_total: int) -> None:
        """Refuse a write to ``path`` growing the store past ``max_store_bytes``."""
        cap = self.max_store_bytes
        if cap is None or new_total <= cap or new_total <= old_total:
            return
        raise LimitExceeded(
            f"refused to write {path}: the memory would hold {new_total:,} bytes in all, "
            f"{_amount(new_total - cap)} over the store size limit of {human_bytes(cap)} "
            f"(max_store_bytes = {cap:,}). Nothing was written; delete or shorten memory "
            "that is no longer needed.",
            limit="max_store_bytes",
            cap=cap,
            actual=new_total,
        )


def _amount(n: int) -> str:
    return "1 byte" if n == 1 else f"{n:,} bytes"


def human_bytes(n: int) -> str:
    """``n`` bytes in binary units when exact (``1 MiB``, ``512 KiB``), else ``n bytes``."""
    for unit, size in (("GiB", MIB * 1024), ("MiB", MIB), ("KiB", KIB)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return _amount(n)


class StoreSizer:
    """Plaintext size of committed trees, from file headers only (no content is decrypted).

    Sizes are memoized per directory tree (with its path, which its names are bound to); git
    trees are immutable, so after a write only the directories on the changed path are new, and
    a write through :class:`LimitedEditor` records its new root's total from the old one.
    """

    def __init__(self, codec: TreeCodec) -> None:
        self.codec = codec
        self._dirs: BoundedCache[tuple[str, MemoryPath], int] = BoundedCache(_SIZE_CACHE_ENTRIES)
        # Root totals, by root tree id: a cache of their own, so that the root each write makes
        # does not fill the directories' cache (a writer stays flat in memory).
        self._roots: BoundedCache[str, int] = BoundedCache(_ROOT_CACHE_ENTRIES)

    def known_tree_bytes(self, root: str | None) -> int | None:
        """:meth:`tree_bytes` if it is known without reading anything, else None."""
        return 0 if not root else self._roots.get(root)

    def remember_tree_bytes(self, root: str, total: int) -> None:
        """Record that root tree ``root`` (written by this process) holds ``total`` bytes."""
        self._roots.put(root, total)

    def tree_bytes(self, root: str | None) -> int:
        """The sum of the sizes of every file in root tree ``root`` (0 for an empty store)."""
        return 0 if not root else self.dir_bytes(root, MemoryPath(()))

    def dir_bytes(self, oid: str, path: MemoryPath) -> int:
        """The size of everything below directory tree ``oid`` found at ``path``."""
        cached = self._roots.get(oid) if path.is_root else self._dirs.get((oid, path))
        if cached is not None:
            return cached
        # Children before parents with an explicit stack, never recursion: the depth of a tree
        # is the data's, and a deep one must not exhaust Python's stack.
        totals: dict[tuple[str, MemoryPath], int] = {}
        stack: list[tuple[str, MemoryPath, bool]] = [(oid, path, False)]
        while stack:
            dir_oid, at, below_done = stack.pop()
            key = (dir_oid, at)
            if key in totals:
                continue
            nodes = self.codec.load_dir(dir_oid, at).nodes
            if not below_done:
                stack.append((dir_oid, at, True))
                for name, node in nodes.items():
                    if node.kind != KIND_DIR:
                        continue
                    child = (node.oid, at.child(name))
                    known = self._dirs.get(child)
                    if known is not None:
                        totals[child] = known
                    else:
                        stack.append((*child, False))
                continue
            total = 0
            for name, node in nodes.items():
                if node.kind == KIND_DIR:
                    total += totals[(node.oid, at.child(name))]
                else:
                    total += self.codec.file_size(node.oid)
            totals[key] = total
            if at.is_root:
                self._roots.put(dir_oid, total)
            else:
                self._dirs.put(key, total)
        return totals[(oid, path)]

    def node_bytes(self, node: Node, path: MemoryPath) -> int:
        """The size of a committed file or directory ``node`` at ``path``."""
        if node.kind == KIND_DIR:
            return self.dir_bytes(node.oid, path)
        return self.codec.file_size(node.oid)


class LimitedEditor(TreeEditor):
    """A :class:`TreeEditor` that refuses, before storing anything, a file write over a limit.

    It keeps the running size of the edited memory (the head's size, computed only when a write
    grows something, plus every put and remove so far), so a transaction of several writes is
    checked as a whole. :meth:`write` records the new tree's size, so that the next write's
    check costs nothing (the whole memory is measured only on the first write of a process, or
    after another process wrote, and then only the directories that changed).
    """

    def __init__(
        self, codec: TreeCodec, root: str | None, limits: Limits, sizer: StoreSizer
    ) -> None:
        super().__init__(codec, root)
        self.limits = limits
        self.sizer = sizer
        self._root_oid = root
        self.delta = 0
        # False once an edit changed sizes without adding to ``delta`` (a graft).
        self._exact = True

    def total_bytes(self) -> int:
        """The plaintext size of the memory as edited so far."""
        return self.sizer.tree_bytes(self._root_oid) + self.delta

    def put_file(self, path: MemoryPath, data: bytes) -> None:
        """Write ``data`` at ``path`` unless that grows the file or store past a limit."""
        old = self._current_file_bytes(path)
        new = len(data)
        self.limits.check_file(path, old, new)
        if self.limits.max_store_bytes is not None and new > old:
            total = self.total_bytes()
            self.limits.check_store(path, total, total + new - old)
        super().put_file(path, data)
        self.delta += new - old

    def remove(self, path: MemoryPath) -> None:
        """Remove ``path``, keeping the running size exact."""
        freed = self.measure(path, self.sizer.node_bytes)
        super().remove(path)
        self.delta -= freed

    def graft(self, path: MemoryPath, node: Node) -> None:
        """Put the committed ``node`` at ``path`` (a restore); the running size stops being
        tracked (a restore is not size-checked: it brings back what the store held)."""
        super().graft(path, node)
        self._exact = False

    def write(self) -> str:
        """Store the changed trees; the new root's size is recorded when it is known exactly."""
        root = super().write()
        before = self.sizer.known_tree_bytes(self._root_oid)
        if self._exact and before is not None:
            self.sizer.remember_tree_bytes(root, before + self.delta)
        return root

    def _current_file_bytes(self, path: MemoryPath) -> int:
        node = self.file_at(path)
        return 0 if node is None else self.codec.file_size(node.oid)


# -- reads ------------------------------------------------------------------------------------

# Room kept for the paging note; the longest note (ten-digit numbers) is well under it, so a
# cut result never exceeds ``max_chars``.
_NOTE_ROOM = 256


def fit_file_view(text: str, total_lines: int, range_end: int, max_chars: int | None) -> str:
    """Cut a file ``view`` result to ``max_chars``, at a whole numbered line, with a paging note.

    ``text`` is :func:`gitmem.render.view_file`'s output, ``total_lines`` the file's line count
    and ``range_end`` the last line the caller asked for (``-1``: the end). Results that fit are
    returned unchanged.
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    header, _, body = text.partition("\n")
    rows = body.split("\n")
    number = rows[0][:LINE_NUMBER_WIDTH].strip()
    if not number.isdigit():
        return text[:max_chars]
    first = int(number)
    end = total_lines if range_end == -1 else min(range_end, total_lines)
    budget = max_chars - len(header) - 1 - _NOTE_ROOM
    shown = _rows_that_fit(rows, budget)
    limit = f"view shows at most {max_chars:,} characters"
    if shown:
        last = first + len(shown) - 1
        note = (
            f"... output truncated after line {last} of {total_lines} ({limit}): "
            f"call view with view_range [{last + 1}, {end}] to see more"
        )
        return header + "\n" + "\n".join([*shown, note])
    # One line longer than the whole budget: show its start, since view_range cannot split it.
    prefix = LINE_NUMBER_WIDTH + 1
    cut = rows[0][: budget - 1]
    note = (
        f"... line {first} is cut after {len(cut) - prefix:,} of its "
        f"{len(rows[0]) - prefix:,} characters ({limit})"
    )
    if first < end:
        note += f"; call view with view_range [{first + 1}, {end}] to see the lines after it"
    return header + "\n" + cut + "\n" + note


def fit_directory_view(text: str, max_chars: int | None) -> str:
    """Cut a directory ``view`` result to ``max_chars`` at a whole entry, with a note."""
    if max_chars is None or len(text) <= max_chars:
        return text
    header, _, body = text.partition("\n")
    rows = body.split("\n")
    shown = _rows_that_fit(rows, max_chars - len(header) - 1 - _NOTE_ROOM)
    # The first row is the directory itself; the counts are of the entries below it.
    note = (
        f"... listing truncated after {max(0, len(shown) - 1)} of {len(rows) - 1} entries "
        f"(view shows at most {max_chars:,} characters): view a subdirectory to see the rest"
    )
    return header + "\n" + "\n".join([*shown, note])


def _rows_that_fit(rows: list[str], budget: int) -> list[str]:
    """The leading rows whose text plus one newline each fits in ``budget`` characters."""
    used = 0
    for index, row in enumerate(rows):
        used += len(row) + 1
        if used > budget:
            return rows[:index]
    return rows


__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_STORE_BYTES",
    "DEFAULT_MAX_VIEW_CHARS",
    "LimitExceeded",
    "LimitedEditor",
    "Limits",
    "StoreSizer",
    "fit_directory_view",
    "fit_file_view",
    "human_bytes",
]
