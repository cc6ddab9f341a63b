"""The ``gitmem`` command: thin click commands over :class:`gitmem.MemoryStore`.

Each command opens the store, calls the library (:mod:`gitmem.history` for the audit commands),
and prints. Errors are turned into a message and an exit code in exactly one place
(:class:`GitMemGroup`), from the exit code on the exception's class; with ``--json`` the message
is one JSON object on stderr. Human output is coloured and paged only on a terminal; ``--json``
output is one object per line, streamed. ``docs/cli.md`` documents every command.

The options every command shares (:func:`shared_options`: ``--repo``, ``--key-file``,
``--color``, ``--no-pager``) are added to each command by :class:`GitMemGroup`, so they work
before or after the command's name, and a new command gets them by being added to the group.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar

import click
from click.core import ParameterSource
from click.shell_completion import CompletionItem

from . import history, report, search
from . import paths as memory_paths
from ._version import __version__
from .crypto import decode_key, encode_key, generate_key
from .errors import (
    GitMemError,
    IntegrityError,
    Interrupted,
    KeyMissing,
    UsageError,
    file_system_refused,
    reporting_rollback_off,
    shown,
    shown_repr,
)
from .fsutil import is_within, refuse_key_text
from .initstore import init_store
from .keysource import (
    ENV_KEY,
    ENV_KEY_FILE,
    ENV_PASSPHRASE,
    SECRET_VARIABLES,
    read_key_file,
    write_key_file,
)
from .options import check_session_label
from .paths import MemoryPath
from .render import plural, table_cells, table_line
from .revisions import SESSION_PREFIX, parse_time
from .store import MemoryStore, Operation, close_for_exit
from .syncresult import SyncResult

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    """What the options say, shared with every command through the click context."""

    repo: str | None = None
    key_file: Path | None = None
    as_json: bool = False
    color: bool | None = None  # None: colour only when writing to a terminal
    pager: bool = True
    _store: MemoryStore | None = field(default=None, repr=False)

    def colour(self) -> bool:
        """Whether human output is coloured: ``--color``, else ``NO_COLOR``, else a terminal."""
        if self.color is None:
            return not os.environ.get("NO_COLOR") and _isatty(sys.stdout)
        return self.color

    def key(self) -> bytes | None:
        """The key of ``--key-file``, or None to look in the environment and key files."""
        return None if self.key_file is None else read_key_file(self.key_file)

    def store(self, session: str | None = None) -> MemoryStore:
        """Open the store named by ``--repo`` / ``GITMEM_REPO`` (once per invocation); its
        writes are labelled ``session`` (default: :func:`cli_session`).
        """
        if self._store is None:
            if not self.repo:
                raise UsageError("no store given: pass --repo PATH or set GITMEM_REPO")
            prompt = ask_passphrase if _isatty(sys.stdin) else None
            self._store = MemoryStore.open(
                self.repo, self.key(), session=session or cli_session(), prompt=prompt
            )
        return self._store

    def publish_writes(self) -> None:
        """Before the process ends: publish what this command wrote (a checkpoint of the
        clearing kind), so that a store no gitmem process is writing is a plain git repository.
        The writes are durable in the log already: a failure is a warning, not the command's."""
        if self._store is None:
            return
        warning = close_for_exit(self._store)
        if warning is not None:
            click.echo(f"gitmem: warning: {warning}", err=True)


pass_state = click.make_pass_decorator(CliState, ensure=True)


def ask_passphrase() -> str:
    """The store's passphrase, asked on the terminal without echo."""
    text: str = click.prompt("Passphrase", hide_input=True, err=True)
    return text


def new_passphrase() -> str:
    """A new passphrase: asked twice on a terminal, else the first line of stdin."""
    if _isatty(sys.stdin):
        text: str = click.prompt(
            "New passphrase", hide_input=True, confirmation_prompt=True, err=True
        )
        return text
    line = sys.stdin.readline()
    if line.endswith("\n"):
        line = line[:-1]
    if line.endswith("\r"):
        line = line[:-1]
    if not line:
        raise UsageError("no passphrase on stdin (give the new passphrase as its first line)")
    return line


def cli_session() -> str:
    """The session label of changes made from the command line."""
    return os.environ.get("GITMEM_SESSION") or "cli"


def merge_session() -> str:
    """The session label of merges made from the command line: ``GITMEM_SESSION``, or
    ``cli@HOST``, so that a merged history shows which machine joined the lines."""
    if os.environ.get("GITMEM_SESSION"):
        return cli_session()
    host = socket.gethostname().split(".", 1)[0]
    label = f"cli@{host}"
    try:
        check_session_label(label)
    except UsageError:
        return "cli"
    return label if host else "cli"


def error_message(exc: GitMemError, state: CliState | None) -> str:
    """``exc``'s message in the command line's words (the library's may name Python calls)."""
    if isinstance(exc, KeyMissing) and exc.searched:
        # The library suggests `key=...`; on the command line the sources are options and files.
        store = state.repo if state is not None and state.repo else "the store"
        where = (
            f"the per-user key file {exc.key_file} does not exist"
            if exc.key_file is not None
            else "this store has no per-user key file yet"
        )
        if exc.passphrase_slots:
            return (
                f"no key for {store}: {ENV_KEY}, {ENV_KEY_FILE} and {ENV_PASSPHRASE} are not set, "
                f"{where}, and stdin is not a terminal to ask for a passphrase. Set "
                f"{ENV_PASSPHRASE} to the passphrase of one of its key slots, give --key-file "
                f"FILE, or set {ENV_KEY} to the key text or {ENV_KEY_FILE} to a file holding it"
            )
        return (
            f"no key for {store}: {ENV_KEY} and {ENV_KEY_FILE} are not set, and {where}. "
            f"Give --key-file FILE, set {ENV_KEY} to the key text or {ENV_KEY_FILE} to a file "
            "holding it"
            + (f", or save the key (mode 0600) as {exc.key_file}" if exc.key_file else "")
        )
    return str(exc)


def fail(exc: GitMemError, state: CliState | None) -> NoReturn:
    """Report ``exc`` on stderr and exit with its code."""
    message = error_message(exc, state)
    if state is not None and state.as_json:
        body = {"error": type(exc).__name__, "message": message, "exit_code": exc.exit_code}
        click.echo(json_line(body), err=True)
    else:
        click.echo(f"gitmem: error: {message}", err=True)
    sys.exit(exc.exit_code)


def warn(text: str, state: CliState | None) -> None:
    """Report a lapsed safeguard on stderr (``gitmem: warning: ...``, or a JSON object with
    ``--json``); the command goes on and its exit code is unchanged."""
    if state is not None and state.as_json:
        click.echo(json_line({"warning": "RollbackCheckOff", "message": text}), err=True)
    else:
        click.echo(f"gitmem: warning: {text}", err=True)


def interrupted(state: CliState | None) -> NoReturn:
    """Report a Ctrl-C as :class:`Interrupted` (exit code 130); a second one is ignored, so
    that it cannot break the report off with a traceback."""
    with contextlib.suppress(ValueError):  # not the main thread: it cannot set handlers
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    fail(Interrupted(), state)


def note(text: str) -> None:
    """Tell a person something on stderr that is not an error (``gitmem: no operations match``).

    Not with ``--json``: there the empty output is the answer, and stderr stays for errors.
    """
    ctx = click.get_current_context(silent=True)
    state = None if ctx is None else ctx.find_object(CliState)
    if state is None or not state.as_json:
        click.echo(f"gitmem: {text}", err=True)


# `--` separates revisions from memory paths, as in git. Click would end option parsing there,
# so `diff A -- PATH --stat` would take `--stat` for a path; the token is swapped for this mark,
# which no argument from argv can equal (argv strings cannot hold NUL).
PATHS_MARK = "\0--"


class GitMemCommand(click.Command):
    """A command whose positional arguments may hold a ``--`` with options after it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse ``args``; in commands taking revisions and paths, ``--`` is kept as a mark."""
        variadic = any(isinstance(p, click.Argument) and p.nargs == -1 for p in self.params)
        if variadic and "--" in args:
            at = args.index("--")
            args = [*args[:at], PATHS_MARK, *args[at + 1 :]]
        return super().parse_args(ctx, args)


class GitMemGroup(click.Group):
    """The ``gitmem`` group: shared options on every command, and the one error translator."""

    command_class = GitMemCommand

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Add ``cmd`` with the shared options it does not define itself.

        A command marked :func:`without_store` gets no ``--repo``/``--key-file``: it would
        ignore them.
        """
        own = {param.name for param in cmd.params}
        if getattr(cmd.callback, "without_store", False):
            own |= {"repo", "key_file"}
        cmd.params.extend(p for p in shared_options() if p.name not in own)
        super().add_command(cmd, name)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """Parse the arguments; a Ctrl-C meanwhile ends the process as in :meth:`invoke`."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except KeyboardInterrupt:
            interrupted(None)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a GitMemError becomes one line (or JSON object) and an exit code."""
        try:
            try:
                with reporting_rollback_off(lambda text: warn(text, ctx.find_object(CliState))):
                    return super().invoke(ctx)
            finally:
                (ctx.find_object(CliState) or CliState()).publish_writes()
        except KeyboardInterrupt:
            # Click would print "Aborted!" and exit 1, as for any failure.
            interrupted(ctx.find_object(CliState))
        except GitMemError as exc:
            fail(exc, ctx.find_object(CliState))
        except BrokenPipeError:
            # The reader went away (`gitmem log | head`): stop quietly with git's status.
            _silence_stdout()
            sys.exit(EXIT_BROKEN_PIPE)
        except OSError as exc:
            # The environment failed (a full disk, a read-only store), not the command: one
            # line, no traceback. A write moves its ref last, so nothing is half written.
            fail(file_system_refused(exc), ctx.find_object(CliState))


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for git in the same case


def _silence_stdout() -> None:
    # Python flushes stdout at exit; with the pipe gone that would raise again.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def without_store(func: F) -> F:
    """Mark a command that opens no store given by ``--repo`` (``gitmem demo``)."""
    func.without_store = True  # type: ignore[attr-defined]
    return func


# -- options every command shares -------------------------------------------------------------
# Each callback writes into CliState, so the value is the same whether the option came before
# the command's name or after it (the later one wins).


def _set_repo(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        try:
            refuse_key_text(value, "the value (of --repo or GITMEM_REPO)")
        except UsageError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
        ctx.ensure_object(CliState).repo = value


def _set_key_file(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.ensure_object(CliState).key_file = value


def _set_color(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    ctx.ensure_object(CliState).color = {"always": True, "never": False}.get(value)


def _disable_pager(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(CliState).pager = False


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    state = ctx.ensure_object(CliState)
    state.as_json = state.as_json or value
    return state.as_json


class LocalPath(click.Path):
    """A file system path argument; an empty one is refused. ``Path("")`` is ``.``, so
    ``gitmem export HEAD "$OUT"`` with ``OUT`` unset would write the plaintext memory into
    the working directory."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "":
            self.fail("an empty string is not a path", param, ctx)
        try:
            refuse_key_text(value, "the value")
        except UsageError as exc:
            self.fail(str(exc), param, ctx)
        return super().convert(value, param, ctx)


def shared_options(*, repo_envvar: str | None = None) -> list[click.Option]:
    """The options of the group that every command also accepts after its name.

    Only the group's ``--repo`` reads ``$GITMEM_REPO``, so a command's ``--repo`` overrides it.
    """
    return [
        click.Option(
            ["--repo"],
            envvar=repo_envvar,
            metavar="PATH",
            expose_value=False,
            callback=_set_repo,
            help="The store (a bare git repository). Default: $GITMEM_REPO.",
        ),
        click.Option(
            ["--key-file"],
            type=LocalPath(path_type=Path, dir_okay=False),
            metavar="FILE",
            expose_value=False,
            callback=_set_key_file,
            help="Read the key from FILE (before $GITMEM_KEY, $GITMEM_KEY_FILE, key files).",
        ),
        click.Option(
            ["--color"],
            type=click.Choice(["auto", "always", "never"]),
            expose_value=False,
            callback=_set_color,
            help="Colour human output: auto (the default) = on a terminal unless NO_COLOR is set.",
        ),
        click.Option(
            ["--no-pager"],
            is_flag=True,
            expose_value=False,
            callback=_disable_pager,
            help="Never page long output (default: $PAGER or less, on a terminal).",
        ),
    ]


_JSON_FLAG: dict[str, Any] = {
    "is_flag": True,
    "callback": _set_json,
    "help": "Print one JSON object per line (and errors as JSON on stderr).",
}


def json_option(func: F) -> F:
    """``--json`` on a command, passed to it as ``as_json``.

    One JSON object per line on stdout, and fatal errors as JSON on stderr;
    ``gitmem --json COMMAND`` and ``gitmem COMMAND --json`` are the same.
    """
    return click.option("--json", "as_json", **_JSON_FLAG)(func)


def weak_passphrase_option(func: F) -> F:
    """``--allow-weak-passphrase`` on a command that sets a new passphrase, passed as
    ``allow_weak``."""
    return click.option(
        "--allow-weak-passphrase",
        "allow_weak",
        is_flag=True,
        help="Accept a new passphrase below the strength bar (see docs/security.md).",
    )(func)


def rev_option(func: F) -> F:
    """``--rev REV``: the older spelling of a command's positional REV, kept for scripts."""
    return click.option(
        "--rev", "rev_option", metavar="REV", help="The same as the positional REV."
    )(func)


def emit_json(obj: dict[str, Any]) -> None:
    """Print one JSON object on one line."""
    click.echo(json_line(obj))


def json_line(obj: dict[str, Any]) -> str:
    """One JSON object as one line (keys sorted, UTF-8 kept)."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


def _isatty(stream: IO[Any]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


_FLUSH_SECONDS = 0.2


@contextlib.contextmanager
def _secrets_hidden() -> Iterator[None]:
    """The process's environment without :data:`SECRET_VARIABLES` while in the block (the
    environment a program started then inherits), then as it was."""
    hidden = {name: os.environ.pop(name) for name in SECRET_VARIABLES if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(hidden)


def emit_lines(state: CliState, lines: Iterable[str], *, page: bool = True) -> None:
    """Print ``lines`` (each without its newline) as they come.

    On a terminal (stdin and stdout both) and unless paging is off, through ``$PAGER`` (less
    with ``LESS=FRX`` by default, so one screenful just prints). Otherwise written with the
    first line flushed at once and the rest at least every 0.2 s, so a reader of a pipe sees
    the start of a long history before its end is read.
    """
    stdout = sys.stdout
    if page and state.pager and _isatty(sys.stdin) and _isatty(stdout):
        os.environ.setdefault("LESS", "FRX")
        text = (line + "\n" for line in lines)
        # The first line opens the store (reading its key, perhaps from the environment) before
        # the pager starts, which must not inherit a secret.
        first = next(text, "")
        with _secrets_hidden():
            click.echo_via_pager(chain([first], text), color=state.colour())
        return
    flushed: float | None = None
    for line in lines:
        stdout.write(line + "\n")
        now = time.monotonic()
        if flushed is None or now - flushed >= _FLUSH_SECONDS:
            stdout.flush()
            flushed = now
    stdout.flush()


@contextlib.contextmanager
def progress_bar(label: str, *, enabled: bool = True) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr for the block, only when stderr is a terminal.

    Yields ``update(done, total)``; the bar appears at the first update with a total.
    """
    stderr = sys.stderr
    if not enabled or not _isatty(stderr):
        yield lambda _done, _total: None
        return
    with contextlib.ExitStack() as stack:
        bars: list[Any] = []
        shown = [0]

        def update(done: int, total: int) -> None:
            if not bars:
                if total <= 0:
                    return
                bar = click.progressbar(length=total, label=label, file=stderr, width=30)
                bars.append(stack.enter_context(bar))
            step = min(done, bars[0].length) - shown[0]
            if step > 0:
                bars[0].update(step)
                shown[0] += step

        yield update


def terminal_width() -> int | None:
    """The width human tables are cut to: the terminal's (``$COLUMNS`` first) when stdout is
    one; None (nothing cut) when it is a pipe or a file, as git cuts only for a terminal."""
    return shutil.get_terminal_size().columns if _isatty(sys.stdout) else None


def style(text: str, **styles: Any) -> str:
    """``text`` with ANSI styles when this command's output is coloured, else unchanged."""
    if not text or not any(styles.values()):
        return text
    ctx = click.get_current_context(silent=True)
    state = None if ctx is None else ctx.find_object(CliState)
    return click.style(text, **styles) if state is not None and state.colour() else text


# Memory text and session labels come from whoever wrote the memory: in human output their
# control characters are shown escaped, so that none can drive the reader's terminal.
_CONTROL = {code: f"\\x{code:02x}" for code in [*range(0x20), *range(0x7F, 0xA0)] if code != 0x09}


def visible(text: str) -> str:
    """``text`` with control characters other than tab escaped (``\\x1b``)."""
    return text.translate(_CONTROL)


def local_time(moment: datetime, *, offset: bool = False) -> str:
    """``moment`` in the local time zone: ``2025-06-01 14:30:00`` (``+0200`` with ``offset``)."""
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S" + (" %z" if offset else ""))


def memory_path(raw: str) -> MemoryPath:
    """A memory path argument (``/memories/...``); a refused one is a usage error."""
    return memory_paths.parse(raw)


def split_revs_and_paths(args: Sequence[str], max_revs: int) -> tuple[list[str], list[MemoryPath]]:
    """Arguments that start with ``/`` (or follow ``--``) are memory paths, those before them
    revisions."""
    revs: list[str] = []
    found: list[MemoryPath] = []
    after_mark = False
    for arg in args:
        if arg == PATHS_MARK:
            after_mark = True
        elif after_mark or arg.startswith("/"):
            found.append(memory_path(arg))
        elif found:
            raise UsageError(f"{shown_repr(arg)} comes after a path: give revisions before paths")
        elif ("/" in arg or "." in arg) and not arg.startswith(SESSION_PREFIX) and "@{" not in arg:
            # No revision has these outside a session name or a time: a path without its '/'.
            hint = f"/memories/{arg.removeprefix('memories/')}"
            raise UsageError(
                f"{shown_repr(arg)} is not a revision; memory paths start with /memories/ "
                f"({shown(hint)}?)"
            )
        else:
            revs.append(arg)
    if len(revs) > max_revs:
        raise UsageError(
            f"too many revisions ({', '.join(revs)}): at most {max_revs}; memory paths start "
            "with /memories"
        )
    return revs, found


def _typo_hint(store: MemoryStore, paths: Sequence[MemoryPath]) -> str:
    """`` (did you mean X?)`` for the first path missing at the head that resembles a file there."""
    snapshot = store.snapshot()
    for path in paths:
        if snapshot.lookup(path) is None:
            near = history.similar_file(snapshot, path)
            if near is not None:
                return f" (did you mean {shown(str(near))}?)"
    return ""


def one_rev(positional: Sequence[str], option: str | None) -> str | None:
    """The revision given as ``REV`` or as ``--rev REV`` (the same one if both)."""
    given = {*positional, *([option] if option is not None else [])}
    if len(given) > 1:
        raise UsageError(f"two revisions given ({', '.join(sorted(given))}): give one")
    return next(iter(given), None)


# What only a revision looks like: HEAD or @, session:NAME or @{TIME}, with ~N and ^ suffixes.
_REVISION_WORD = re.compile(r"(?:HEAD|@|session:.+|@\{[^}]*\})(?:~\d*|\^)*")


def rev_and_target(args: Sequence[str], option: str | None, what: str) -> tuple[str | None, str]:
    """``[REV] TARGET``: the revision (also from ``--rev``) and the last argument."""
    words = [arg for arg in args if arg != PATHS_MARK]
    if not words:
        raise UsageError(f"give the {what}")
    if len(words) == 1 and PATHS_MARK not in args and _REVISION_WORD.fullmatch(words[0]):
        # `gitmem export HEAD~1` (the directory forgotten) wrote the plaintext memory into a
        # new directory named HEAD~1.
        also = f" (for a directory of that name, write ./{words[0]})" if what == "directory" else ""
        raise UsageError(f"{shown_repr(words[0])} is a revision: give the {what} after it{also}")
    if len(words) > 2:
        raise UsageError(f"too many arguments ({' '.join(words)}): give [REV] {what.upper()}")
    if what == "memory path" and len(words) == 2 and words[0].startswith("/"):
        if words[1].startswith("/"):
            # Two paths: no revision starts with "/", so the first is no misplaced revision.
            raise UsageError(
                f"give one memory path, not two ({shown_repr(words[0])} and {shown_repr(words[1])})"
            )
        # `gitmem blame /memories/a.md HEAD`: said "The path HEAD is not allowed".
        raise UsageError(f"{shown_repr(words[1])} comes after a path: give revisions before paths")
    return one_rev(words[:-1], option), words[-1]


def complete_memory_path(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion of memory paths, from the head of the store (needs its key)."""
    if incomplete and not incomplete.startswith("/"):
        return []
    try:
        state = ctx.find_object(CliState) or CliState()
        repo = state.repo or os.environ.get("GITMEM_REPO")
        if not repo:
            return []
        store = MemoryStore.open(repo, state.key(), check_rollback=False)
        names = [str(p) + ("/" if node.kind == "d" else "") for p, node in store.snapshot().walk()]
    except Exception:  # completion must never print a traceback into the shell
        return []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def complete_command(
    _ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion of the memory commands a history records."""
    return [CompletionItem(c) for c in history.COMMANDS if c.startswith(incomplete)]


@click.group(cls=GitMemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gitmem")
def main() -> None:
    """gitmem: an encrypted, versioned memory store for Claude's memory tool.

    The key comes from --key-file, $GITMEM_KEY, the file named by $GITMEM_KEY_FILE,
    $GITMEM_PASSPHRASE (stores with passphrase slots), the per-user key file that `gitmem init`
    writes, or a passphrase prompt on a terminal. Revisions: a commit id (or 4+ digits of one),
    HEAD, HEAD~N, session:NAME, @{TIME}. The options above and --json also work after a
    command's name. Full reference: docs/cli.md.
    """


# The group's own options: the shared ones (with $GITMEM_REPO as --repo's default) and --json.
main.params.extend(
    [
        *shared_options(repo_envvar="GITMEM_REPO"),
        click.Option(["--json", "as_json"], expose_value=False, **_JSON_FLAG),
    ]
)


@main.command()
@click.argument("path", required=False, type=LocalPath(path_type=Path))
@click.option("--print-key", is_flag=True, help="Print the new key once instead of saving it.")
@weak_passphrase_option
@json_option
@pass_state
def init(
    state: CliState, path: Path | None, print_key: bool, allow_weak: bool, as_json: bool
) -> None:
    """Create a store and its key (in an empty directory or empty bare git repository too).

    The key is saved to an owner-only file in your config directory (or printed with
    --print-key). Losing the key loses the memory: back it up somewhere safe.
    """
    target = path or (Path(state.repo) if state.repo else None)
    if target is None:
        raise UsageError("give the new store's PATH (or --repo / GITMEM_REPO)")
    if not MemoryStore.vacant(target):
        raise UsageError(
            f"{target} already exists and is neither empty nor an empty git repository"
        )
    if print_key and state.key_file is not None:
        raise UsageError("give --print-key or --key-file, not both")
    key_path = state.key_file
    if key_path is not None and is_within(key_path, target):
        raise UsageError(
            f"the key file {key_path} would be inside the store {target}: keep it outside the "
            "repository (whoever has both reads everything)"
        )
    passphrase = os.environ.get(ENV_PASSPHRASE)
    given = os.environ.get(ENV_KEY) or os.environ.get(ENV_KEY_FILE)
    if key_path is None and passphrase and not given and not print_key:
        return _init_with_passphrase(target, passphrase, allow_weak, as_json)
    if key_path is not None:
        if key_path.exists():
            key, source = read_key_file(key_path), f"Key: the one in {key_path}"
        else:
            key, source = decode_key(generate_key()), f"Key saved to {key_path} (owner-only)."
            write_key_file(key_path, key)  # before the store: never a store without its key saved
        store = MemoryStore.init(target, key)
    else:
        # A key the user already has in the environment is used, not replaced (init_store).
        made = init_store(target, save_key=not print_key)
        store, key, key_path = made.store, made.key, made.key_file
        source = {
            "file": f"Key saved to {key_path} (owner-only).",
            ENV_KEY: f"Key: the one in {ENV_KEY} (not saved elsewhere)",
            ENV_KEY_FILE: f"Key: the one in {ENV_KEY_FILE} (not saved elsewhere)",
        }.get(made.key_source, "")
    if as_json:
        body: dict[str, Any] = {
            "store": str(target),
            "store_id": store.store_id,
            "key_file": None if key_path is None else str(key_path),
        }
        if print_key:
            body["key"] = encode_key(key)
        emit_json(body)
        return
    click.echo(f"Created an encrypted gitmem store at {target}")
    click.echo(f"Store id: {store.store_id}")
    if print_key:
        click.echo("Key (shown once; store it safely, e.g. in GITMEM_KEY or a 0600 file):")
        click.echo(encode_key(key))
    else:
        click.echo(source)
    click.echo("Losing the key loses the memory: keep a backup of it.")


# -- formatting -------------------------------------------------------------------------------

COMMAND_WIDTH = len("str_replace")
_COMMAND_COLORS = {"create": "green", "delete": "red", "expire": "red", "rename": "blue"}
_SHOWN_PATHS = 3
_WIDTH_LOOKAHEAD = 64
_STAT_BAR = 40


def paths_text(op: Operation) -> str:
    """The paths of ``op`` for one line: ``old -> new`` for a rename, else the first few."""
    if op.command == "rename" and len(op.paths) == 2:
        return f"{op.paths[0]} -> {op.paths[1]}"
    text = " ".join(op.paths[:_SHOWN_PATHS])
    if len(op.paths) > _SHOWN_PATHS:
        text += f" (+{len(op.paths) - _SHOWN_PATHS} more)"
    source = op.record.detail.get("from") if op.command == "restore" else None
    if isinstance(source, str):
        text = f"(from {source[:10]}) {text}"
    return text


def log_line(op: Operation, session_width: int = 0) -> str:
    """One operation on one line: short id, local time, session, command, paths."""
    return "  ".join(
        [
            style(op.commit[:10], fg="yellow"),
            local_time(op.record.time),
            style(visible(op.session).ljust(session_width), fg="cyan"),
            style(visible(op.command).ljust(COMMAND_WIDTH), fg=_COMMAND_COLORS.get(op.command)),
            visible(paths_text(op)),
        ]
    ).rstrip()


def stat_lines(changes: Sequence[history.FileChange]) -> list[str]:
    """``git diff --stat``-like lines: each file's changed line count and a +/- bar, a total."""
    if not changes:
        return []
    names = [
        visible(c.path if c.old_path is None else f"{c.old_path} -> {c.path}") for c in changes
    ]
    width = max(map(len, names))
    counts = [c.added + c.removed for c in changes]
    digits = len(str(max(counts)))
    scale = min(1.0, _STAT_BAR / max(max(counts), 1))
    lines = []
    for change, name, count in zip(changes, names, counts, strict=True):
        plus = max(round(change.added * scale), 1 if change.added else 0)
        minus = max(round(change.removed * scale), 1 if change.removed else 0)
        bar = style("+" * plus, fg="green") + style("-" * minus, fg="red")
        lines.append(f" {name.ljust(width)} | {str(count).rjust(digits)} {bar}".rstrip())
    added = sum(c.added for c in changes)
    removed = sum(c.removed for c in changes)
    # git's own wording: "1 file changed, 1 insertion(+), 2 deletions(-)".
    lines.append(
        f" {plural(len(changes), 'file')} changed, {plural(added, 'insertion')}(+), "
        f"{plural(removed, 'deletion')}(-)"
    )
    return lines


def patch_lines(change: history.FileChange) -> Iterator[str]:
    """A change's patch, styled like git's: bold headers, cyan hunks, green/red lines."""
    in_header = True
    for line in map(visible, change.patch_lines()):
        if line.startswith("@@"):
            in_header = False
            yield style(line, fg="cyan")
        elif in_header:
            yield style(line, bold=True)
        elif line.startswith("+"):
            yield style(line, fg="green")
        elif line.startswith("-"):
            yield style(line, fg="red")
        else:
            yield line


def patches(changes: Iterable[history.FileChange]) -> Iterator[str]:
    """The patches of ``changes``, one after the other."""
    for change in changes:
        yield from patch_lines(change)


# -- history --------------------------------------------------------------------------------


# What -p and --stat show of an operation: all its changes, or those the pickaxe matched.
ChangesOf = Callable[[Operation], list[history.FileChange]]


def _time_option(name: str, text: str) -> Callable[[F], F]:
    return click.option(name, metavar="TIME", help=text)


@main.command()
@click.argument("args", nargs=-1, metavar="[REV] [PATH]...", shell_complete=complete_memory_path)
@rev_option
@click.option("--session", metavar="NAME", help="Only operations of session NAME.")
@click.option(
    "--command",
    "command_name",
    metavar="CMD",
    shell_complete=complete_command,
    help=f"Only operations of this command ({', '.join(history.COMMANDS)}).",
)
@_time_option("--since", "Only operations at or after TIME (ISO 8601, or 90m, 2h, 3d, 1w ago).")
@_time_option("--until", "Only operations at or before TIME.")
@click.option(
    "-n", "--max-count", type=click.IntRange(min=0), metavar="N", help="Show at most N operations."
)
@click.option(
    "--first-parent",
    is_flag=True,
    help="Follow only the first parent of each merge: this replica's own line.",
)
@click.option(
    "-S", "pickaxe_text", metavar="TEXT", help="Only operations that changed how often TEXT occurs."
)
@click.option(
    "-G",
    "pickaxe_regex",
    metavar="REGEX",
    help="Only operations adding or removing a matching line.",
)
@click.option("--stat", is_flag=True, help="Add the lines added and removed per file.")
@click.option("-p", "--patch", is_flag=True, help="Add the decrypted unified diff.")
@json_option
@pass_state
def log(
    state: CliState,
    args: tuple[str, ...],
    rev_option: str | None,
    session: str | None,
    command_name: str | None,
    since: str | None,
    until: str | None,
    max_count: int | None,
    first_parent: bool,
    pickaxe_text: str | None,
    pickaxe_regex: str | None,
    stat: bool,
    patch: bool,
    as_json: bool,
) -> None:
    """Show the memory's history, newest first: one operation per line.

    Newest first by recorded time, never an operation before one made on top of it, so merged
    replicas' work reads as it happened. Starts at REV (default: HEAD). With PATHs, only
    operations that touched them (or anything below them), following renames back to earlier
    names. With -S or -G, only the operations where a text was learned or forgotten, and only
    the files that did. A session or command that matches nothing is an error; a filter that
    finds nothing says so on stderr.
    """
    revs, paths = split_revs_and_paths(args, 1)
    store = state.store()
    filters: dict[str, Any] = {
        "paths": paths,
        "session": session,
        "command": command_name,
        "since": None if since is None else parse_time(since),
        "until": None if until is None else parse_time(until),
        "max_count": max_count,
        "first_parent": first_parent,
    }
    changes_of: ChangesOf = partial(history.changes, store)
    if pickaxe_text is not None or pickaxe_regex is not None:
        if pickaxe_text is not None and pickaxe_regex is not None:
            raise UsageError("-S and -G cannot be combined: give one")
        hits = search.pickaxe(
            store, one_rev(revs, rev_option), text=pickaxe_text, regex=pickaxe_regex, **filters
        )
        # -p and --stat show only the files whose change matched, as git's pickaxe does.
        matched: dict[str, list[history.FileChange]] = {}
        found = _pickaxe_operations(hits, matched)

        def changes_of(op: Operation) -> list[history.FileChange]:
            return matched.pop(op.commit)

    else:
        found = history.log(store, one_rev(revs, rev_option), **filters)
    # The first match is looked for before any output, so that an unknown session is an error
    # and not an empty page.
    first = next(found, None)
    if first is None:
        if store.head() is None:
            note("the store has no history")
        else:
            note("no operations match" + _typo_hint(store, paths))
        return
    ops = chain([first], found)
    head = store.head_operation()
    total = max_count if max_count is not None else (0 if head is None else head.seq)
    stdout_is_terminal = _isatty(sys.stdout)
    with progress_bar("log", enabled=patch and not stdout_is_terminal) as advance:

        def counted(source: Iterator[Operation]) -> Iterator[Operation]:
            for done, op in enumerate(source, 1):
                yield op
                advance(done, total)

        if as_json:
            emit_lines(state, _log_json(store, counted(ops), stat, patch, changes_of), page=False)
        else:
            emit_lines(state, _log_text(store, counted(ops), stat, patch, changes_of))


def _pickaxe_operations(
    hits: Iterator[search.PickaxeHit], matched: dict[str, list[history.FileChange]]
) -> Iterator[Operation]:
    """The operations of ``hits``, keeping in ``matched`` the changes each one matched by."""
    for hit in hits:
        matched[hit.operation.commit] = hit.changes
        yield hit.operation


def _log_json(
    store: MemoryStore, ops: Iterator[Operation], stat: bool, patch: bool, changes_of: ChangesOf
) -> Iterator[str]:
    for op in ops:
        body = history.operation_json(store, op)
        if stat or patch:
            body["changes"] = [c.to_json(with_diff=patch) for c in changes_of(op)]
        yield json_line(body)


def _log_text(
    store: MemoryStore,
    ops: Iterator[Operation],
    stat: bool,
    patch: bool,
    changes_of: ChangesOf | None = None,
) -> Iterator[str]:
    # Align the session column on the first screenful rather than wait for the whole history.
    first = list(islice(ops, _WIDTH_LOOKAHEAD))
    width = max((len(visible(op.session)) for op in first), default=0)
    for index, op in enumerate(chain(first, ops)):
        if (stat or patch) and index:
            yield ""
        yield log_line(op, width)
        if stat or patch:
            changes = (changes_of or partial(history.changes, store))(op)
            if stat:
                yield from stat_lines(changes)
            if patch:
                yield from patches(changes)


@main.command()
@click.argument("rev", required=False)
@rev_option
@click.option("--stat", is_flag=True, help="Show lines added and removed per file, not the diff.")
@json_option
@pass_state
def show(
    state: CliState, rev: str | None, rev_option: str | None, stat: bool, as_json: bool
) -> None:
    """Show one operation (default: HEAD): its record and the diff it made."""
    store = state.store()
    given = one_rev([] if rev is None else [rev], rev_option)
    op = store.operation("HEAD" if given is None else given)
    changes = history.changes(store, op)
    if as_json:
        body = op.to_json()
        body["changes"] = [c.to_json(with_diff=True) for c in changes]
        emit_lines(state, [json_line(body)], page=False)
        return
    lines = [
        style(f"operation {op.commit}", fg="yellow"),
        f"Seq:      {op.seq}",
        f"Date:     {local_time(op.record.time, offset=True)}",
        f"Session:  {visible(op.session)}",
        f"Command:  {visible(op.command)}",
        "Paths:    " + visible((" -> " if op.command == "rename" else " ").join(op.paths)),
    ]
    if op.record.detail:
        lines.append(f"Detail:   {json.dumps(op.record.detail, sort_keys=True)}")
    if changes:
        lines.append("")
        lines.extend(stat_lines(changes) if stat else patches(changes))
    emit_lines(state, lines)


@main.command()
@click.argument("args", nargs=-1, required=True, metavar="REV [REV2] [PATH]...")
@click.option("--stat", is_flag=True, help="Show lines added and removed per file, not the diff.")
@json_option
@pass_state
def diff(state: CliState, args: tuple[str, ...], stat: bool, as_json: bool) -> None:
    """Show the changes from REV to REV2 (default: HEAD), optionally only under PATHs.

    Paths start with /memories; `--` before them is accepted, as in git. No change at all is
    said on stderr.
    """
    revs, paths = split_revs_and_paths(args, 2)
    if not revs:
        raise UsageError("give the revision to compare with, e.g. gitmem diff HEAD~1")
    changes = history.diff(state.store(), revs[0], revs[1] if len(revs) > 1 else None, paths)
    if not changes:
        note("no changes")
    if as_json:
        objects = (json_line(c.to_json(with_diff=True)) for c in changes)
        emit_lines(state, objects, page=False)
    else:
        emit_lines(state, stat_lines(changes) if stat else patches(changes))


@main.command()
@click.argument("args", nargs=-1, metavar="[REV] PATH", shell_complete=complete_memory_path)
@rev_option
@json_option
@pass_state
def blame(state: CliState, args: tuple[str, ...], rev_option: str | None, as_json: bool) -> None:
    """Show, for each line of a file, the operation that last wrote it (at REV: default HEAD).

    Each line: short id, session, local time, line number, text.
    """
    rev, path = rev_and_target(args, rev_option, "memory path")
    lines = history.blame(state.store(), memory_path(path), rev)
    if not lines:
        note(f"{path} is empty")
    if as_json:
        emit_lines(state, (json_line(b.to_json()) for b in lines), page=False)
        return
    width = max((len(visible(b.operation.session)) for b in lines), default=0)
    digits = len(str(len(lines)))

    def row(entry: history.BlameLine) -> str:
        op = entry.operation
        who = style(visible(op.session).ljust(width), fg="cyan")
        when = local_time(op.record.time)
        number = str(entry.number).rjust(digits)
        text = visible(entry.text)
        return f"{style(op.commit[:10], fg='yellow')} ({who} {when} {number}) {text}"

    emit_lines(state, (row(entry) for entry in lines))


@main.command()
@click.argument(
    "args", nargs=-1, metavar="PATTERN [REV] [--] [PATH]...", shell_complete=complete_memory_path
)
@click.option("-e", "pattern_option", metavar="PATTERN", help="The pattern (one starting with -).")
@click.option("-i", "--ignore-case", is_flag=True, help="Ignore case differences.")
@click.option("-F", "--fixed-strings", is_flag=True, help="Match PATTERN as text, not a regex.")
@click.option("-n", "--line-number", is_flag=True, help="Prefix each line with its number.")
@click.option(
    "-l", "--files-with-matches", is_flag=True, help="Print only the names of matching files."
)
@json_option
@pass_state
def grep(
    state: CliState,
    args: tuple[str, ...],
    pattern_option: str | None,
    ignore_case: bool,
    fixed_strings: bool,
    line_number: bool,
    files_with_matches: bool,
    as_json: bool,
) -> None:
    """Print the lines of memory files (at REV: default HEAD) that match PATTERN.

    PATTERN is a Python regular expression. Each line is PATH:TEXT (REV:PATH:TEXT when REV is
    given), as git grep prints. Exit code 1 when nothing matches.
    """
    words = list(args)
    if pattern_option is None:
        if not words or words[0] == PATHS_MARK:
            raise UsageError("give the pattern to look for (-e PATTERN for one starting with -)")
        pattern_option = words.pop(0)
    revs, paths = split_revs_and_paths(words, 1)
    rev = revs[0] if revs else None
    pattern = search.compile_pattern(
        pattern_option, fixed_strings=fixed_strings, ignore_case=ignore_case
    )
    matches = search.grep(state.store(), pattern, rev, paths=paths)
    first = next(matches, None)
    if first is None:
        click.get_current_context().exit(1)
    found = chain([first], matches)
    if files_with_matches:
        found_files = list(dict.fromkeys(match.path for match in found))
        if as_json:
            emit_lines(state, (json_line({"path": p}) for p in found_files), page=False)
        else:
            prefix = "" if rev is None else rev + ":"
            emit_lines(state, (style(visible(prefix + p), fg="magenta") for p in found_files))
        return
    if as_json:
        emit_lines(state, (json_line(match.to_json()) for match in found), page=False)
        return
    emit_lines(state, (grep_line(match, pattern, rev, line_number) for match in found))


def grep_line(
    match: search.GrepMatch, pattern: re.Pattern[str], rev: str | None, number: bool
) -> str:
    """One line of ``gitmem grep``, coloured as git grep colours it: names magenta, line numbers
    green, separators cyan, the matched text bold red."""
    colon = style(":", fg="cyan")
    parts = [] if rev is None else [style(visible(rev), fg="magenta")]
    parts.append(style(visible(match.path), fg="magenta"))
    if number:
        parts.append(style(str(match.line), fg="green"))
    text, at = [], 0
    for found in pattern.finditer(match.text):
        if found.end() == found.start():
            continue
        text += [visible(match.text[at : found.start()])]
        text += [style(visible(found.group()), fg="red", bold=True)]
        at = found.end()
    text.append(visible(match.text[at:]))
    return colon.join(parts) + colon + "".join(text)


@main.command()
@json_option
@pass_state
def sessions(state: CliState, as_json: bool) -> None:
    """One row per session: first and last time, operations by command, paths touched.

    Most recently active first.
    """
    found = history.sessions(state.store())
    if not found:
        note("the store has no history")
        return
    if as_json:
        emit_lines(state, (json_line(s.to_json()) for s in found), page=False)
        return
    rows = [("SESSION", "FIRST", "LAST", "OPS", "COMMANDS", "PATHS")]
    for summary in found:
        commands = " ".join(f"{c}:{n}" for c, n in sorted(summary.commands.items()))
        touched = sorted(summary.paths)
        shown = " ".join(touched[:_SHOWN_PATHS])
        if len(touched) > _SHOWN_PATHS:
            shown += f" (+{len(touched) - _SHOWN_PATHS} more)"
        rows.append(
            (
                visible(summary.session),
                local_time(summary.first.record.time),
                local_time(summary.last.record.time),
                str(summary.operations),
                visible(commands),
                visible(shown),
            )
        )
    width = terminal_width()
    table = table_cells(rows, right=(3,), shrink=(0, 4, 5), width=width)

    def line(index: int, cells: list[str]) -> str:
        text = table_line(cells, width)
        if index == 0:
            return style(text, bold=True)
        label = cells[0].rstrip()
        return text.replace(label, style(label, fg="cyan"), 1)

    emit_lines(state, (line(i, cells) for i, cells in enumerate(table)))


@main.command()
@click.argument("args", nargs=-1, metavar="[REV] PATH", shell_complete=complete_memory_path)
@rev_option
@click.option(
    "--range",
    "view_range",
    type=(int, int),
    metavar="START END",
    help="Only lines START to END (END -1: to the end), as view_range does.",
)
@json_option
@pass_state
def view(
    state: CliState,
    args: tuple[str, ...],
    rev_option: str | None,
    view_range: tuple[int, int] | None,
    as_json: bool,
) -> None:
    """Show PATH (at REV: default HEAD) exactly as Claude's memory tool `view` returns it."""
    rev, path = rev_and_target(args, rev_option, "memory path")
    store = state.store()
    text = history.view(store, path, rev, view_range or ())
    if as_json:
        commit = store.resolve(rev) if rev is not None else store.head()
        emit_json({"path": path, "commit": commit, "text": text})
    else:
        emit_lines(state, [visible(line) for line in text.split("\n")])


@main.command()
@click.argument("args", nargs=-1, metavar="[REV] PATH", shell_complete=complete_memory_path)
@rev_option
@json_option
@pass_state
def cat(state: CliState, args: tuple[str, ...], rev_option: str | None, as_json: bool) -> None:
    """Print the raw content of the memory file PATH (at REV: default HEAD)."""
    rev, path = rev_and_target(args, rev_option, "memory path")
    store = state.store()
    text = history.cat(store, memory_path(path), rev)
    if as_json:
        commit = store.resolve(rev) if rev is not None else store.head()
        emit_json({"path": str(memory_path(path)), "commit": commit, "text": text})
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


# -- restore, export, import ------------------------------------------------------------------


@main.command()
@click.argument("args", nargs=-1, metavar="[REV] [PATH]...", shell_complete=complete_memory_path)
@rev_option
@click.option(
    "--session",
    "session_name",
    metavar="NAME",
    help="Restore the memory as it was when session NAME ended (its last operation).",
)
@click.option(
    "--until",
    "--before",
    "until",
    metavar="TIME",
    help="Restore the memory as it was at TIME (ISO 8601 or 2h, 3d); --before is the same.",
)
@click.option("--dry-run", is_flag=True, help="Show the changes it would make; write nothing.")
@json_option
@pass_state
def restore(
    state: CliState,
    args: tuple[str, ...],
    rev_option: str | None,
    session_name: str | None,
    until: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Make the memory what it was at REV, as one new commit (history is kept).

    With PATHs, only those files and directories are restored. The source is REV, or
    --session NAME, or --until TIME: exactly one of them.
    """
    revs, paths = split_revs_and_paths(args, 1)
    given = one_rev(revs, rev_option)
    sources = [] if given is None else [given]
    if session_name is not None:
        sources.append(SESSION_PREFIX + session_name)
    if until is not None:
        parse_time(until)  # a malformed time is a usage error before anything else
        sources.append("@{" + until + "}")
    if len(sources) != 1:
        raise UsageError("give exactly one of REV, --session NAME or --until TIME")
    store = state.store()
    rev = sources[0]
    if dry_run:
        changes = history.restore_preview(store, rev, paths)
        if as_json:
            objects = (json_line(c.to_json(with_diff=True)) for c in changes)
            emit_lines(state, objects, page=False)
            return
        target = store.resolve(rev)
        if not changes and history.restore_matches(store, target, paths):
            click.echo(history.nothing_to_restore(target, paths, dry_run=True))
            return
        summary = f"Dry run: restoring {target[:10]} would change {plural(len(changes), 'file')}"
        emit_lines(state, chain([summary + (":" if changes else ".")], patches(changes)))
        return
    op = store.restore(rev, paths or None)
    if op is None:
        # No commit: with --json the empty output is the answer, as for other empty results.
        if not as_json:
            click.echo(history.nothing_to_restore(store.resolve(rev), paths))
        return
    if as_json:
        emit_json(op.to_json())
        return
    what = "the memory" if not paths else ", ".join(str(p) for p in paths)
    click.echo(
        f"Restored {what} as of {op.record.detail['from'][:10]} in new commit "
        f"{op.commit[:10]} ({plural(len(op.paths), 'path')} changed)"
    )


@main.command()
@click.argument("args", nargs=-1, metavar="[REV] DIR")
@rev_option
@click.option("--force", is_flag=True, help="Write into DIR even if it is not empty.")
@json_option
@pass_state
def export(
    state: CliState, args: tuple[str, ...], rev_option: str | None, force: bool, as_json: bool
) -> None:
    """Write the memory (at REV: default HEAD) as plain files under DIR, owner-only.

    /memories/a.md becomes DIR/a.md.
    """
    rev, target = rev_and_target(args, rev_option, "directory")
    if not target:  # as LocalPath: not the working directory
        raise UsageError("an empty string is not a path: give DIR")
    directory = Path(target)
    with progress_bar("export") as advance:
        summary = history.export(state.store(), directory, rev, force=force, progress=advance)
    if as_json:
        emit_json(summary.to_json())
        return
    source = "an empty memory" if summary.commit is None else summary.commit[:10]
    click.echo(
        f"Exported {plural(summary.files, 'file')} and "
        f"{plural(summary.directories, 'directory', 'directories')} of "
        f"{source} to {summary.directory} (owner-only: files 0600, directories 0700)"
    )


@main.command("report")
@click.argument("rev_range", required=False, metavar="[REV-RANGE]")
@click.option(
    "-o",
    "--output",
    type=LocalPath(path_type=Path, dir_okay=False),
    metavar="FILE",
    help=f"Write the report to FILE (default: ./{report.DEFAULT_OUTPUT}).",
)
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
@json_option
@pass_state
def report_command(
    state: CliState, rev_range: str | None, output: Path | None, force: bool, as_json: bool
) -> None:
    """Write the history as one HTML page a browser opens offline, owner-only (0600).

    REV-RANGE: REV (the history up to it), A..B (reachable from B, not from A) or A.. (up to
    HEAD); default: the whole history. The page holds the decrypted memory.
    """
    target = Path(report.DEFAULT_OUTPUT) if output is None else output
    with progress_bar("report") as advance:
        summary = report.write_report(
            state.store(), target, rev_range, force=force, progress=advance
        )
    if summary.operations == 0:
        note("the store has no history" if rev_range is None else "no operations in the range")
    if as_json:
        emit_json(summary.to_json())
        return
    click.echo(
        f"Wrote {summary.path} ({summary.bytes:,} bytes, owner-only 0600): "
        f"{plural(summary.operations, 'operation')} by {plural(summary.sessions, 'session')}, "
        f"{plural(summary.files, 'file')}; it holds the decrypted memory"
    )


@main.command("import")
@click.argument(
    "directory", metavar="DIR", type=LocalPath(path_type=Path, exists=True, file_okay=False)
)
@click.option("--replace", is_flag=True, help="Also remove memory files that are not in DIR.")
@json_option
@pass_state
def import_command(state: CliState, directory: Path, replace: bool, as_json: bool) -> None:
    """Import the files under DIR (DIR/a.md -> /memories/a.md) as one commit.

    Every file must be UTF-8 text within the store's file size limit; otherwise nothing is
    imported and the refused files are named (the first 20). Existing memory files at the
    same paths are replaced; --replace also removes the ones DIR does not have.
    """
    with progress_bar("import") as advance:
        op = history.import_(state.store(), directory, replace=replace, progress=advance)
    if op is None:
        if not as_json:
            click.echo(f"Nothing to import: the memory already holds {directory}; no commit made.")
        return
    if as_json:
        emit_json(op.to_json())
        return
    click.echo(
        f"Imported {plural(op.record.detail['files'], 'file')} from {directory} in new commit "
        f"{op.commit[:10]} ({plural(len(op.paths), 'path')} changed)"
    )


@main.command()
@json_option
@pass_state
def verify(state: CliState, as_json: bool) -> None:
    """Authenticate every commit and decrypt every object; exit 5 when anything fails."""
    store = state.store()
    with progress_bar("verify") as advance:
        total = _head_seq(store)
        report = store.verify(progress=lambda done: advance(done, total))
    if as_json:
        emit_json(
            {
                "ok": report.ok,
                "commits": report.commits,
                "objects": report.objects,
                "problems": report.problems,
            }
        )
    else:
        for problem in report.problems:
            click.echo(f"problem: {problem}")
        status = "ok" if report.ok else f"FAILED ({plural(len(report.problems), 'problem')})"
        counts = f"{plural(report.commits, 'commit')}, {plural(report.objects, 'object')}"
        click.echo(f"verified {counts}: {status}")
    if not report.ok:
        sys.exit(IntegrityError.exit_code)


def _head_seq(store: MemoryStore) -> int:
    try:
        head = store.head_operation()
    except GitMemError:
        return 0  # verify reports it
    return 0 if head is None else head.seq


@main.command("accept-head")
@json_option
@pass_state
def accept_head(state: CliState, as_json: bool) -> None:
    """Trust the branch as it is now, after a deliberate rollback of the repository."""
    op = state.store().accept_head()
    if as_json:
        emit_json(
            {"commit": None if op is None else op.commit, "seq": None if op is None else op.seq}
        )
        return
    if op is None:
        click.echo("This client now trusts the store as it is: empty, no operations yet.")
    else:
        click.echo(f"This client now trusts the store at operation #{op.seq} ({op.commit[:10]}).")


@main.command("accept-store")
@json_option
@pass_state
def accept_store(state: CliState, as_json: bool) -> None:
    """Trust the store now in the repository, after you deliberately replaced it there."""
    if not state.repo:
        raise UsageError("no store given: pass --repo PATH or set GITMEM_REPO")
    # Opening records the store as this path's; its history is still checked against what
    # this client has seen of it (elsewhere), as any store's is.
    store = MemoryStore.open(state.repo, state.key(), accept_store=True, session=cli_session())
    if as_json:
        emit_json({"store": state.repo, "store_id": store.store_id})
        return
    click.echo(f"This client now trusts the store {store.store_id} at {state.repo}.")


# -- replicas -------------------------------------------------------------------------------


_TIMEOUT_OPTION = click.option(
    "--timeout",
    type=float,
    metavar="SECONDS",
    default=None,
    help="Give up on a remote silent this long (to connect, at each read or write). "
    "Default: $GITMEM_NETWORK_TIMEOUT, else 30.",
)


@main.command()
@click.argument("url")
@click.argument("path", type=LocalPath(path_type=Path))
@_TIMEOUT_OPTION
@json_option
@pass_state
def clone(state: CliState, url: str, path: Path, timeout: float | None, as_json: bool) -> None:
    """Make a new local replica at PATH of the gitmem store at URL (its remote `origin`).

    The key is found as for any store (--key-file, GITMEM_KEY, GITMEM_KEY_FILE, or the per-user
    key file of the store's id). On any failure nothing is left at PATH.
    """
    store = MemoryStore.clone(url, path, state.key(), session=cli_session(), timeout=timeout)
    head = store.head_operation()
    if as_json:
        emit_json(
            {
                "store": str(path),
                "store_id": store.store_id,
                "url": url,
                "head": None if head is None else head.commit,
                "seq": None if head is None else head.seq,
            }
        )
        return
    where = "no operations yet" if head is None else f"operation #{head.seq} ({head.commit[:10]})"
    click.echo(f"Cloned store {store.store_id} from {url} into {path}: {where}")


@main.group(cls=GitMemGroup, invoke_without_command=False)
def remote() -> None:
    """Configure the git remotes of a replica (kept in its local git config only)."""


@remote.command("add")
@click.argument("name")
@click.argument("url")
@json_option
@pass_state
def remote_add(state: CliState, name: str, url: str, as_json: bool) -> None:
    """Add remote NAME at URL (a path, file://, git://, ssh://, user@host:path, https://)."""
    store = state.store()
    store.add_remote(name, url)
    stored = dict(store.remotes())[name]
    if as_json:
        emit_json({"name": name, "url": stored})
    else:
        click.echo(f"Added remote {name}: {stored}")


@remote.command("list")
@json_option
@pass_state
def remote_list(state: CliState, as_json: bool) -> None:
    """List the remotes: NAME and URL per line."""
    for name, url in state.store().remotes():
        if as_json:
            emit_json({"name": name, "url": url})
        else:
            click.echo(f"{name}\t{url}")


@remote.command("remove")
@click.argument("name")
@json_option
@pass_state
def remote_remove(state: CliState, name: str, as_json: bool) -> None:
    """Remove remote NAME, and this client's high-water mark of it."""
    state.store().remove_remote(name)
    if as_json:
        emit_json({"name": name, "removed": True})
    else:
        click.echo(f"Removed remote {name}")


def _sync_report(result: SyncResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_json())
        return
    head = "nothing" if result.head is None else result.head[:10]
    words = {
        "up-to-date": f"Already up to date with {result.remote} ({head}).",
        "empty": f"{result.remote} holds no store yet; nothing to pull.",
        "fast-forward": f"Fast-forwarded to {head} from {result.remote}.",
        "pushed": f"Pushed {head} to {result.remote}.",
    }
    if result.action in words:
        click.echo(words[result.action])
    else:
        pushed = " and pushed it" if result.action.endswith("+pushed") else ""
        click.echo(f"Merged {result.remote} into {head}{pushed}.")
    for conflict in result.conflicts:
        click.echo(
            f"conflict: {visible(conflict['path'])} changed on both sides; the other version "
            f"is at {visible(conflict['sibling'])}"
        )
    if result.redaction is not None:
        click.echo(
            f"{result.remote} was redacted (operation #{result.redaction.seq}, session "
            f"{visible(result.redaction.session)}): this replica's history now follows it. "
            "Run `gitmem gc` to delete the old versions from this replica now."
        )


_REMOTE_ARG = click.argument("remote_name", metavar="[REMOTE]", required=False, default="origin")


@main.command()
@_REMOTE_ARG
@_TIMEOUT_OPTION
@json_option
@pass_state
def push(state: CliState, remote_name: str, timeout: float | None, as_json: bool) -> None:
    """Send this replica's commits to REMOTE (a remote name or URL; default origin).

    Never forced: a remote with commits this replica lacks refuses (exit 11); pull or sync.
    """
    _sync_report(state.store().push(remote_name, timeout=timeout), as_json)


@main.command()
@_REMOTE_ARG
@_TIMEOUT_OPTION
@json_option
@pass_state
def pull(state: CliState, remote_name: str, timeout: float | None, as_json: bool) -> None:
    """Fetch REMOTE's commits and fast-forward, or merge them in (conflicts kept as siblings)."""
    _sync_report(state.store(merge_session()).pull(remote_name, timeout=timeout), as_json)


@main.command()
@_REMOTE_ARG
@_TIMEOUT_OPTION
@json_option
@pass_state
def sync(state: CliState, remote_name: str, timeout: float | None, as_json: bool) -> None:
    """Pull from REMOTE (merging divergent work), then push: both end at the same head."""
    _sync_report(state.store(merge_session()).sync(remote_name, timeout=timeout), as_json)


@main.command()
@click.option(
    "--store",
    "store_path",
    type=LocalPath(path_type=Path),
    help="Keep the demo store at PATH (its key is saved like `gitmem init` does).",
)
@click.option("--offline", is_flag=True, help="Use the scripted stand-in even with an API key.")
@click.option("--model", help="The model id to use with the real API.")
@without_store
def demo(store_path: Path | None, offline: bool, model: str | None) -> None:
    """Run three sessions of the progress-log pattern on a fresh store, then show the log.

    Without ANTHROPIC_API_KEY (or with --offline) the replies come from a scripted stand-in
    for the Messages API on 127.0.0.1, not from Claude; the SDK's real tool runner drives the
    real GitMemoryTool either way.
    """
    from anthropic import APIError

    from .demo.progress_log import run_store_demo

    # The group takes --repo and --key-file before any command's name; the demo would ignore
    # them and write a store of its own. (GITMEM_REPO, set for the other commands, is fine.)
    group = click.get_current_context().find_root()
    for name, flag in (("repo", "--repo"), ("key_file", "--key-file")):
        if group.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            raise UsageError(
                f"gitmem demo makes its own store and takes no {flag}: "
                "give --store PATH to keep the demo store"
            )
    use_real_api = bool(os.environ.get("ANTHROPIC_API_KEY")) and not offline
    if store_path is not None and store_path.exists() and any(store_path.iterdir()):
        raise UsageError(f"{store_path} already exists and is not empty")
    with tempfile.TemporaryDirectory(prefix="gitmem-demo-") as scratch:
        repo = store_path or Path(scratch) / "memory.git"
        key = generate_key()
        key_place = ""
        if store_path is not None:
            # Made and its key saved (as by `gitmem init`) before the demo writes: a demo that
            # fails half-way still leaves a store that opens.
            made = init_store(repo)
            key = encode_key(made.key)
            key_place = f"in {made.key_file}" if made.key_file else f"the one in {made.key_source}"
        state_dir = Path(scratch) / "state"
        try:
            run_store_demo(
                repo,
                key,
                out=sys.stdout,
                use_real_api=use_real_api,
                model=model,
                state_dir=state_dir,
            )
        except APIError as exc:
            raise GitMemError(
                f"the Anthropic API could not be used ({type(exc).__name__}: {exc}); "
                "`gitmem demo --offline` runs the demo with the scripted stand-in instead"
            ) from None
        store = MemoryStore.open(repo, key, state_dir=state_dir)
        click.echo("\n$ gitmem log")
        for line in _log_text(store, store.log(), stat=False, patch=False):
            click.echo(line)
        if store_path is not None:
            click.echo(f"\nThe store is at {repo}; its key is {key_place}.")
            click.echo(f"Try: gitmem --repo {repo} log --json")
        else:
            click.echo("\nThe demo store was temporary; `gitmem demo --store PATH` keeps one.")


@main.command()
@click.option(
    "--session",
    "session_name",
    metavar="NAME",
    help="Label every change with NAME (default: a new mcp-... label per connection).",
)
@click.option(
    "--allow-restore", is_flag=True, help="Also offer the memory_restore tool (off by default)."
)
@pass_state
def mcp(state: CliState, session_name: str | None, allow_restore: bool) -> None:
    """Serve the memory tool and read-only audit tools to an MCP client over stdio.

    Tools: memory (Claude's memory tool: view, create, str_replace, insert, delete, rename),
    memory_log, memory_show, memory_blame, memory_sessions, and memory_restore only with
    --allow-restore. Setup for Claude Code and Claude Desktop: docs/mcp.md.
    """
    from .mcp_server import serve_stdio
    from .store import new_session_label

    if session_name == "":  # `--session "$NAME"` with NAME unset: not a fresh label in secret
        raise UsageError("the session label is empty: give one, or leave out --session")
    store = state.store(session=session_name or "mcp-" + new_session_label())
    serve_stdio(store, allow_restore=allow_restore)


@main.command()
@click.option(
    "--older-than",
    required=True,
    metavar="AGE",
    help="Expire files last written more than AGE ago: 90d, 12h, 2w, 1d12h (s, m, h, d, w).",
)
@click.option("--dry-run", is_flag=True, help="List what would be removed; write nothing.")
@json_option
@pass_state
def expire(state: CliState, older_than: str, dry_run: bool, as_json: bool) -> None:
    """Remove memory files untouched for longer than AGE, as one commit.

    A file's last touch is the newest commit that wrote it (create, str_replace, insert,
    rename, restore, import); reads do not count. The commit lists what it removed, and
    `gitmem restore` of its parent brings it all back.
    """
    from .expiry import parse_duration

    result = state.store().expire(parse_duration(older_than), dry_run=dry_run)
    if as_json:
        emit_json(result.to_json())
        return
    cutoff = result.cutoff.strftime("%Y-%m-%d %H:%M:%S UTC")
    verb = "would remove" if dry_run else "removed"
    for item in result.expired:
        when = item.last_touched.strftime("%Y-%m-%d %H:%M:%S UTC")
        click.echo(f"{verb}  {item.path}  (last written {when}, {item.commit[:10]})")
    total = len(result.expired) + result.kept
    if dry_run:
        click.echo(
            f"Dry run: {len(result.expired)} of {plural(total, 'file')} untouched since {cutoff}; "
            "nothing was written."
        )
    elif result.operation is None:
        every = "the 1 file was" if total == 1 else f"all {total} files were"
        click.echo(f"Nothing to expire: {every} written since {cutoff}.")
    else:
        op = result.operation
        click.echo(
            f"Removed {len(result.expired)} of {plural(total, 'file')} untouched since {cutoff} in "
            f"commit {op.commit[:10]}; `gitmem restore {op.parents[0][:10]}` brings them back."
        )


@main.command()
@click.option(
    "--grace",
    default="2w",
    show_default=True,
    metavar="AGE",
    help="Keep unreferenced objects younger than AGE (s, m, h, d, w); 0s prunes them all.",
)
@json_option
@pass_state
def gc(state: CliState, grace: str, as_json: bool) -> None:
    """Pack the repository and prune the objects that nothing references.

    Safe while other processes read the store; writers wait for it (it holds the lock).
    History is never pruned: every commit stays, with everything it references. The first gc
    after a redaction prunes the history it rewrote at once, whatever --grace says.
    """
    from .expiry import parse_duration

    report = state.store().gc(parse_duration(grace).total_seconds())
    if as_json:
        emit_json(
            {
                "packed": report.packed,
                "pruned": report.pruned,
                "kept": report.kept,
                "removed_packs": report.removed_packs,
                "temporaries": report.temporaries,
                "bytes_before": report.bytes_before,
                "bytes_after": report.bytes_after,
                "missing": report.missing,
            }
        )
        return
    for problem in report.missing:
        click.echo(f"skipped: {problem}")
    click.echo(
        f"Packed {plural(report.packed, 'object')}; pruned {report.pruned} unreferenced, kept "
        f"{report.kept} younger than {grace}; {report.bytes_before:,} -> "
        f"{report.bytes_after:,} bytes."
    )


@main.command()
@click.argument("source", required=False, metavar="[-]")
@click.option(
    "--file",
    "text_file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="F",
    help="Read the text to redact from file F.",
)
@click.option(
    "--dry-run", is_flag=True, help="List the operations and paths holding it; write nothing."
)
@json_option
@pass_state
def redact(
    state: CliState, source: str | None, text_file: Path | None, dry_run: bool, as_json: bool
) -> None:
    """Replace a text by [redacted] in every version of every file, past and current.

    The text comes from stdin (`-`), from --file F, or is asked on a terminal: never from the
    command line. History is rewritten from the first version holding it, with one `redact`
    operation; `gitmem push` then replaces the remote's branch, which every replica adopts on
    its next pull, and the next `gitmem gc` prunes the old versions.
    """
    text = _redaction_text(source, text_file)
    result = state.store().redact(text, dry_run=dry_run)
    if as_json:
        emit_json(result.to_json())
        return
    summary = (
        f"{plural(result.versions, 'version')} of {plural(len(result.paths), 'path')}, "
        f"written by {plural(len(result.holding), 'operation')}"
    )
    if dry_run:
        click.echo(
            f"Dry run: the text is in {summary}; redacting it rewrites "
            f"{plural(result.operations, 'operation')}:"
        )
        for found in result.holding:
            row = found.to_json()
            click.echo(
                f"#{row['seq']} {row['commit'][:10]} {row['time']} {row['session']} "
                f"{row['command']} {row['path']}"
            )
        return
    assert result.operation is not None
    click.echo(
        f"Redacted {summary}, in new commit {result.operation.commit[:10]} "
        f"({plural(result.operations, 'operation')} rewritten). `gitmem push` replaces the "
        "remote's history; `gitmem gc` prunes the old versions from this repository."
    )


def _redaction_text(source: str | None, text_file: Path | None) -> str:
    """The text ``gitmem redact`` is given: stdin (``-``), a file, or a prompt on a terminal;
    one trailing line break (what ``echo`` adds) is not part of it."""
    if source is not None and source != "-":
        raise UsageError(
            "the text to redact is never given on the command line (shell history and process "
            "lists keep it): give `-` to read it from stdin, --file F, or neither to be asked"
        )
    if source is not None and text_file is not None:
        raise UsageError("give the text on stdin (-) or in a file (--file F), not both")
    if text_file is not None:
        try:
            raw = text_file.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {text_file}: {exc.strerror or exc}") from None
    elif source == "-":
        raw = sys.stdin.buffer.read()
    elif _isatty(sys.stdin):
        raw = click.prompt("Text to redact", hide_input=True, err=True).encode("utf-8")
    else:
        raise UsageError(
            "give the text to redact on stdin (`gitmem redact -`) or in a file (--file F)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("the text to redact is not UTF-8; nothing was changed") from None
    return text.removesuffix("\n").removesuffix("\r")


@main.command()
@pass_state
def checkpoint(state: CliState) -> None:
    """Publish every write the redo log holds into the git repository.

    Afterwards plain git and other git tools can read the repository (until the next write).
    Writers wait for it (it holds the lock); readers are not disturbed.
    """
    state.store().checkpoint()
    click.echo("Checkpointed: the git repository holds every write.")


# -- key slots ----------------------------------------------------------------------------------


@main.group()
def key() -> None:
    """Manage the store's key slots: passphrases and keys that open it."""


@key.command("add")
@click.option("--label", default="", metavar="L", help="A label for the new slot (encrypted).")
@weak_passphrase_option
@json_option
@pass_state
def key_add(state: CliState, label: str, allow_weak: bool, as_json: bool) -> None:
    """Add a passphrase slot.

    The new passphrase is read from stdin when it is not a terminal (its first line), and asked
    twice when it is. A store without slots gets a slot for its current key as well.
    """
    store = state.store()
    slot = store.add_key(passphrase=new_passphrase(), label=label, allow_weak_passphrase=allow_weak)
    if as_json:
        emit_json({"slot": slot, "label": label})
        return
    click.echo(f"Added key slot {slot}" + (f" ({label})" if label else ""))


@key.command("list")
@json_option
@pass_state
def key_list(state: CliState, as_json: bool) -> None:
    """List the key slots: id, kind, label; * marks the one that opened the store."""
    slots = state.store().key_slots()
    if as_json:
        for slot in slots:
            emit_json(slot)
        return
    if not slots:
        click.echo("No key slots: the store opens with its key only (gitmem key add).")
    for slot in slots:
        mark = "*" if slot["current"] else " "
        click.echo(f"{mark} {slot['slot']}  {slot['kind']:<10}  {visible(slot['label'])}")


@key.command("remove")
@click.argument("slot")
@json_option
@pass_state
def key_remove(state: CliState, slot: str, as_json: bool) -> None:
    """Remove key slot SLOT (refused for the last one) and start a new key epoch.

    Nothing written from now on opens with the removed slot's passphrase or keys.
    """
    epoch = state.store().remove_key(slot)
    if as_json:
        emit_json({"removed": slot, "epoch": epoch})
        return
    click.echo(f"Removed key slot {slot}; new writes use key epoch {epoch}")


@key.command("passwd")
@click.argument("slot")
@weak_passphrase_option
@json_option
@pass_state
def key_passwd(state: CliState, slot: str, allow_weak: bool, as_json: bool) -> None:
    """Give passphrase slot SLOT a new passphrase (read as `key add` reads it), and start a
    new key epoch.

    The old passphrase opens nothing written from now on; what it opened before stays open
    to whoever has it and a copy of the repository.
    """
    store = state.store()
    # Before the passphrase is asked for (twice, on a terminal): a mistyped slot id is told at
    # once, not after the passphrase was typed for nothing.
    store.check_passphrase_slot(slot)
    epoch = store.change_passphrase(slot, new_passphrase(), allow_weak_passphrase=allow_weak)
    if as_json:
        emit_json({"slot": slot, "epoch": epoch})
        return
    click.echo(f"Changed the passphrase of key slot {slot}; new writes use key epoch {epoch}")


def _init_with_passphrase(target: Path, passphrase: str, allow_weak: bool, as_json: bool) -> None:
    """`gitmem init` with ``GITMEM_PASSPHRASE``: one passphrase slot, no key file."""
    store = MemoryStore.init(target, None, passphrase=passphrase, allow_weak_passphrase=allow_weak)
    if as_json:
        emit_json({"store": str(target), "store_id": store.store_id, "key_file": None})
        return
    click.echo(f"Created an encrypted gitmem store at {target}")
    click.echo(f"Store id: {store.store_id}")
    click.echo(f"Key: the passphrase in {ENV_PASSPHRASE} (key slot {store.keyring_slot()}).")
    click.echo("Forgetting the passphrase loses the memory: add a second key (gitmem key add).")


@key.command("rotate")
@json_option
@pass_state
def key_rotate(state: CliState, as_json: bool) -> None:
    """Start a new key epoch: new writes use a new random key, sealed to every slot.

    Older epochs stay readable to every current slot. See docs/security.md for what rotation
    cannot undo.
    """
    epoch = state.store().rotate_keys()
    if as_json:
        emit_json({"epoch": epoch})
        return
    click.echo(f"New writes use key epoch {epoch}")
