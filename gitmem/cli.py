"""The ``gitmem`` command: thin click commands over :class:`gitmem.MemoryStore`.

Each command opens the store, calls the library, and prints. Errors are turned into a message
and an exit code in exactly one place (:class:`GitMemGroup`), from the exit code on the
exception's class; with ``--json`` the message is one JSON object on stderr.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from ._version import __version__
from .crypto import decode_key, encode_key, generate_key
from .errors import GitMemError, UsageError
from .keysource import user_key_path, write_key_file
from .store import MemoryStore, Operation

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    """What the group's options say, shared with every command through the click context."""

    repo: str | None = None
    json_errors: bool = False
    _store: MemoryStore | None = field(default=None, repr=False)

    def store(self) -> MemoryStore:
        """Open the store named by ``--repo`` / ``GITMEM_REPO`` (once per invocation)."""
        if self._store is None:
            if not self.repo:
                raise UsageError("no store given: pass --repo PATH or set GITMEM_REPO")
            self._store = MemoryStore.open(self.repo, session=cli_session())
        return self._store


pass_state = click.make_pass_decorator(CliState, ensure=True)


def cli_session() -> str:
    """The session label of changes made from the command line."""
    return os.environ.get("GITMEM_SESSION") or "cli"


def fail(exc: GitMemError, json_errors: bool) -> NoReturn:
    """Report ``exc`` on stderr and exit with its code."""
    if json_errors:
        body = {"error": type(exc).__name__, "message": str(exc), "exit_code": exc.exit_code}
        click.echo(json.dumps(body), err=True)
    else:
        click.echo(f"gitmem: error: {exc}", err=True)
    sys.exit(exc.exit_code)


class GitMemGroup(click.Group):
    """A click group that maps every :class:`GitMemError` to its message and exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a GitMemError becomes one line (or JSON object) and an exit code."""
        try:
            return super().invoke(ctx)
        except GitMemError as exc:
            state = ctx.find_object(CliState)
            fail(exc, state.json_errors if state else False)


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.ensure_object(CliState).json_errors = True
    return value


def json_option(func: F) -> F:
    """``--json``: one JSON object per line on stdout, and fatal errors as JSON on stderr."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=True,
        callback=_set_json,
        help="Print one JSON object per line (and errors as JSON on stderr).",
    )(func)


def emit_json(obj: dict[str, Any]) -> None:
    """Print one JSON object on one line."""
    click.echo(json.dumps(obj, ensure_ascii=False, sort_keys=True))


@click.group(cls=GitMemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--repo",
    envvar="GITMEM_REPO",
    metavar="PATH",
    help="The store (a bare git repository). Default: $GITMEM_REPO.",
)
@click.version_option(__version__, prog_name="gitmem")
@click.pass_context
def main(ctx: click.Context, repo: str | None) -> None:
    """gitmem: an encrypted, versioned memory store for Claude's memory tool.

    The key comes from $GITMEM_KEY, the file named by $GITMEM_KEY_FILE, or the per-user key
    file that `gitmem init` writes.
    """
    ctx.ensure_object(CliState).repo = repo


@main.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--print-key", is_flag=True, help="Print the new key once instead of saving it.")
@pass_state
def init(state: CliState, path: Path | None, print_key: bool) -> None:
    """Create a store and its key.

    The key is saved to an owner-only file in your config directory (or printed with
    --print-key). Losing the key loses the memory: back it up somewhere safe.
    """
    target = path or (Path(state.repo) if state.repo else None)
    if target is None:
        raise UsageError("give the new store's PATH (or --repo / GITMEM_REPO)")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} already exists and is not empty")
    env_key = os.environ.get("GITMEM_KEY")
    key = decode_key(env_key) if env_key else decode_key(generate_key())
    store = MemoryStore.init(target, key)
    click.echo(f"Created an encrypted gitmem store at {target}")
    click.echo(f"Store id: {store.store_id}")
    if print_key:
        click.echo("Key (shown once; store it safely, e.g. in GITMEM_KEY or a 0600 file):")
        click.echo(encode_key(key))
    elif env_key:
        click.echo("Key: the one in GITMEM_KEY (not saved anywhere else)")
    else:
        key_path = user_key_path(store.store_id)
        write_key_file(key_path, key)
        click.echo(f"Key saved to {key_path} (owner-only).")
    click.echo("Losing the key loses the memory: keep a backup of it.")


def _log_line(op: Operation) -> str:
    paths = " -> ".join(op.paths) if op.command == "rename" else " ".join(op.paths)
    when = op.record.time.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return f"{op.commit[:10]}  {when}  {op.session}  {op.command}  {paths}"


@main.command()
@click.option("-n", "--max-count", type=click.IntRange(min=0), help="Show at most N operations.")
@json_option
@pass_state
def log(state: CliState, max_count: int | None, as_json: bool) -> None:
    """Show the memory's history, newest first."""
    store = state.store()
    for index, op in enumerate(store.log()):
        if max_count is not None and index >= max_count:
            break
        if as_json:
            emit_json(op.to_json())
        else:
            click.echo(_log_line(op))


@main.command()
@click.argument("rev")
@json_option
@pass_state
def restore(state: CliState, rev: str, as_json: bool) -> None:
    """Make the memory what it was at REV, as one new commit (history is kept)."""
    op = state.store().restore(rev)
    if as_json:
        emit_json(op.to_json())
    else:
        click.echo(
            f"Restored the memory as of {op.record.detail['from'][:10]} in new commit "
            f"{op.commit[:10]} ({len(op.paths)} path(s) changed)"
        )


@main.command()
@json_option
@pass_state
def verify(state: CliState, as_json: bool) -> None:
    """Authenticate every commit and decrypt every object; exit 5 when anything fails."""
    report = state.store().verify()
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
        status = "ok" if report.ok else f"FAILED ({len(report.problems)} problem(s))"
        click.echo(f"verified {report.commits} commit(s), {report.objects} object(s): {status}")
    if not report.ok:
        sys.exit(5)


@main.command("accept-head")
@pass_state
def accept_head(state: CliState) -> None:
    """Trust the branch as it is now, after a deliberate rollback of the repository."""
    op = state.store().accept_head()
    where = "an empty store" if op is None else f"operation #{op.seq} ({op.commit[:10]})"
    click.echo(f"This client now trusts the store at {where}.")


@main.command()
@click.option(
    "--store",
    "store_path",
    type=click.Path(path_type=Path),
    help="Keep the demo store at PATH (its key is saved like `gitmem init` does).",
)
@click.option("--offline", is_flag=True, help="Use the scripted stand-in even with an API key.")
@click.option("--model", help="The model id to use with the real API.")
def demo(store_path: Path | None, offline: bool, model: str | None) -> None:
    """Run three sessions of the progress-log pattern on a fresh store, then show the log.

    Without ANTHROPIC_API_KEY (or with --offline) the replies come from a scripted stand-in
    for the Messages API on 127.0.0.1, not from Claude; the SDK's real tool runner drives the
    real GitMemoryTool either way.
    """
    from .demo import run_store_demo

    use_real_api = bool(os.environ.get("ANTHROPIC_API_KEY")) and not offline
    if store_path is not None and store_path.exists() and any(store_path.iterdir()):
        raise UsageError(f"{store_path} already exists and is not empty")
    with tempfile.TemporaryDirectory(prefix="gitmem-demo-") as scratch:
        repo = store_path or Path(scratch) / "memory.git"
        key = generate_key()
        state_dir = Path(scratch) / "state"
        run_store_demo(
            repo, key, out=sys.stdout, use_real_api=use_real_api, model=model, state_dir=state_dir
        )
        store = MemoryStore.open(repo, key, state_dir=state_dir)
        click.echo("\n$ gitmem log")
        for op in store.log():
            click.echo(_log_line(op))
        if store_path is not None:
            key_path = user_key_path(store.store_id)
            write_key_file(key_path, decode_key(key))
            click.echo(f"\nThe store is at {repo}; its key is in {key_path}.")
            click.echo(f"Try: gitmem --repo {repo} log --json")
        else:
            click.echo("\nThe demo store was temporary; `gitmem demo --store PATH` keeps one.")
