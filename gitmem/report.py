"""``gitmem report``: the memory's history as one self-contained HTML page, for a person.

:func:`report_data` reads a range of the history through :mod:`gitmem.history` (operations,
their file changes, session summaries) into one JSON-ready dict; :func:`render_page` puts it in
the page (``report.html``, ``report.css``, ``report.js`` shipped beside this module), and
:func:`write_report` writes that page as ``gitmem export`` writes files: owner-only, never over
an existing file unless asked, and nothing left behind by a failure.

The page holds the decrypted memory, written by a model and so untrusted: the data goes in a
``<script type="application/json">`` with every ``<`` escaped, the page's script builds the DOM
with ``textContent`` only, and a Content-Security-Policy lets nothing load from anywhere and
nothing run but the page's own script (allowed by its hash).

File contents are stored once: each operation's change keeps its diff (what the page shows),
and each distinct content of a file is a *version*, defined by the first change that made it
(its diff applied to the version before it) or, at the start of a range, by its text. The page
rebuilds a file's content at any operation from those diffs, only when asked.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from . import history
from ._version import __version__
from .errors import StorageError, UsageError, shown, shown_repr
from .format import KIND_FILE
from .fsutil import atomic_write, is_within, open_private_file, write_all
from .history import Progress, iso_time
from .operation import Operation
from .snapshot import Snapshot
from .store import MemoryStore

DEFAULT_OUTPUT = "gitmem-report.html"
"""Where ``gitmem report`` writes when no ``-o FILE`` is given (in the working directory)."""

# Change statuses as one letter each in the page's data (a long history has many changes).
_STATUS = {"added": "A", "deleted": "D", "modified": "M", "renamed": "R"}


@dataclass(frozen=True)
class ReportSummary:
    """What :func:`write_report` wrote: the file, its size, and what it covers."""

    path: Path
    bytes: int
    operations: int
    sessions: int
    files: int
    head: str | None

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form."""
        return {
            "file": str(self.path),
            "bytes": self.bytes,
            "operations": self.operations,
            "sessions": self.sessions,
            "files": self.files,
            "head": self.head,
        }


def operations_in(store: MemoryStore, rev_range: str | None) -> list[Operation]:
    """The operations of ``rev_range``, newest first: ``REV`` (all reachable from it),
    ``A..B`` (reachable from B and not from A), ``A..`` (A..HEAD); None: the whole history."""
    if rev_range is None:
        return list(history.log(store))
    if ".." not in rev_range:
        return list(history.log(store, rev_range))
    old, _, new = rev_range.partition("..")
    if not old or ".." in new:
        raise UsageError(
            f"invalid revision range {shown_repr(rev_range)}: give REV, A..B or A.. (A..HEAD)"
        )
    excluded = {op.commit for op in store.log(old)}
    return [op for op in store.log(new or None) if op.commit not in excluded]


class _Versions:
    """Each distinct file content once: the change that first made it, or its text."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.table: list[Any] = []
        self.sizes: list[int] = []

    def known(self, text: str | None) -> int:
        """The id of ``text`` (added as plain text if new); -1 for no file."""
        if text is None:
            return -1
        found = self.ids.get(text)
        if found is None:
            found = self._add(text, text)
        return found

    def made(self, text: str | None, op_index: int, change_index: int) -> int:
        """The id of ``text`` written by change ``change_index`` of operation ``op_index``."""
        if text is None:
            return -1
        found = self.ids.get(text)
        if found is None:
            found = self._add(text, [op_index, change_index])
        return found

    def _add(self, text: str, entry: Any) -> int:
        self.ids[text] = len(self.table)
        self.table.append(entry)
        self.sizes.append(len(text.encode("utf-8")))
        return len(self.table) - 1


def _totals(store: MemoryStore, tree: str) -> tuple[int, int]:
    """Files and bytes of the memory at ``tree`` (for the state before a range's start)."""
    snapshot = Snapshot(store.codec, tree)
    files = size = 0
    for _path, node in snapshot.walk():
        if node.kind == KIND_FILE:
            files += 1
            size += len(store.codec.read_file(node.oid))
    return files, size


def report_data(
    store: MemoryStore,
    rev_range: str | None = None,
    *,
    now: datetime | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Everything the report page shows for ``rev_range`` (see :func:`operations_in`), as
    JSON-ready data.

    ``ops``: the operations newest first, each ``c`` commit, ``n`` seq, ``t`` time, ``s``
    session (an index into ``sessions``), ``k`` command, ``p`` recorded paths (indexes into
    ``paths``), ``P`` parents (10-digit ids), ``f``/``b`` files and bytes of the memory after
    it, ``d`` its record's detail (when any), and ``x`` its file changes: ``[status letter
    (A/D/M/R), path, old path or -1, version before or -1, version after or -1, lines added,
    lines removed, diff hunks]``. ``versions``: each distinct file content once, as its text
    or as ``[op index, change index]``, the change whose diff made it from its version before.
    ``summaries``: :meth:`gitmem.history.SessionSummary.to_json` of each session.
    """
    newest_first = operations_in(store, rev_range)
    oldest_first = newest_first[::-1]
    paths: dict[str, int] = {}

    def path_id(path: str) -> int:
        return paths.setdefault(path, len(paths))

    sessions = {op.session: 0 for op in newest_first}
    session_ids = {label: index for index, label in enumerate(sessions)}
    versions = _Versions()
    totals: dict[str, tuple[int, int]] = {}
    rows: list[dict[str, Any]] = []
    for index, op in enumerate(oldest_first):
        changes = history.changes(store, op)
        parent = op.parents[0] if op.parents else None
        if parent is None:
            files, size = 0, 0
        elif parent in totals:
            files, size = totals[parent]
        else:  # the range starts here: count what was there already (once per parent)
            files, size = totals[parent] = _totals(store, store.repo.read_commit(parent).tree)
        entries: list[list[Any]] = []
        for number, change in enumerate(changes):
            before = versions.known(change.before)
            after = versions.made(change.after, len(oldest_first) - 1 - index, number)
            if change.status == "added":
                files += 1
            elif change.status == "deleted":
                files -= 1
            size += (0 if after < 0 else versions.sizes[after]) - (
                0 if before < 0 else versions.sizes[before]
            )
            entries.append(
                [
                    _STATUS[change.status],
                    path_id(change.path),
                    -1 if change.old_path is None else path_id(change.old_path),
                    before,
                    after,
                    change.added,
                    change.removed,
                    "\n".join(change.diff_lines()),
                ]
            )
        totals[op.commit] = (files, size)
        row: dict[str, Any] = {
            "c": op.commit,
            "n": op.seq,
            "t": iso_time(op.record.time),
            "s": session_ids[op.session],
            "k": op.command,
            "p": [path_id(p) for p in op.paths],
            "P": [parent[:10] for parent in op.parents],
            "x": entries,
            "f": files,
            "b": size,
        }
        if op.record.detail:
            row["d"] = op.record.detail
        rows.append(row)
        if progress is not None:
            progress(index + 1, len(oldest_first))
    summaries = history.session_summaries(newest_first)
    head = newest_first[0] if newest_first else None
    return {
        "gitmem": __version__,
        "generated": iso_time(now or datetime.now(timezone.utc)),
        "store": str(store.path),
        "range": rev_range or "HEAD",
        "head": None if head is None else head.commit,
        "sessions": list(sessions),
        "summaries": [s.to_json() for s in summaries],
        "paths": list(paths),
        "versions": versions.table,
        "ops": rows[::-1],
    }


def _asset(name: str) -> str:
    return resources.files("gitmem").joinpath(name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def embedded_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: no ``<`` (so no
    ``</script>``, no ``<!--``), ``>`` and ``&`` escaped too, and the two line separators
    that end a line in older JavaScript."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def render_page(data: dict[str, Any]) -> str:
    """The report page for ``data`` (from :func:`report_data`): one HTML document that loads
    nothing from anywhere and runs only its own script."""
    style = _asset("report.css")
    script = _asset("report.js")
    policy = (
        f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
        "img-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'"
    )
    return Template(_asset("report.html")).substitute(
        policy=html.escape(policy, quote=False),  # no double quote in it
        title=html.escape(f"gitmem report: {data['store']}"),
        style=style,
        script=script,
        data=embedded_json(data),
    )


def _check_target(store: MemoryStore, target: Path, force: bool) -> None:
    if is_within(target, store.path):
        # Plaintext beside the ciphertext: whoever copies or backs up the store gets both.
        raise UsageError(
            f"cannot write {target}: it is inside the store's repository {store.path}; "
            "write the report somewhere outside it"
        )
    if target.is_dir():
        raise UsageError(f"cannot write {target}: it is a directory")
    if os.path.lexists(target) and not force:
        raise UsageError(f"{target} exists; pass --force to overwrite it")
    if not target.parent.is_dir():
        raise UsageError(f"cannot write {target}: the directory {target.parent} does not exist")


def write_report(
    store: MemoryStore,
    output: str | os.PathLike[str],
    rev_range: str | None = None,
    *,
    force: bool = False,
    progress: Progress | None = None,
) -> ReportSummary:
    """Write the report of ``rev_range`` (default: the whole history) to ``output``, mode 0600.

    An existing ``output`` is refused unless ``force``, which replaces it whole (a symbolic
    link there is replaced, not followed). Everything is read before the file is made, and a
    failure while writing leaves no file (with ``force``, the old one).
    """
    target = Path(output)
    _check_target(store, target, force)
    data = report_data(store, rev_range, progress=progress)
    page = render_page(data).encode("utf-8")
    try:
        if force:
            atomic_write(target, page)
        else:
            _write_new(target, page)
    except FileExistsError:
        raise UsageError(f"{target} exists; pass --force to overwrite it") from None
    except OSError as exc:
        where = f" ({shown(os.fsdecode(exc.filename))})" if exc.filename else ""
        raise StorageError(
            f"the file system refused: {exc.strerror or exc}{where}; no report was written"
        ) from None
    return ReportSummary(
        target,
        len(page),
        len(data["ops"]),
        len(data["sessions"]),
        len({change[1] for op in data["ops"] for change in op["x"]}),
        data["head"],
    )


def _write_new(target: Path, page: bytes) -> None:
    fd = open_private_file(target, overwrite=False)
    try:
        try:
            write_all(fd, page)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            target.unlink()
        raise


__all__ = [
    "DEFAULT_OUTPUT",
    "ReportSummary",
    "embedded_json",
    "operations_in",
    "render_page",
    "report_data",
    "write_report",
]
