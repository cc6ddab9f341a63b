"""The user documentation's code blocks run as written (tests/docex.py says how).

Each document's blocks run in order in a scratch directory, with the hermetic home of
conftest.py; nothing reaches the network or the Anthropic API. A block that cannot run here
carries ``<!-- skip: next "why" -->`` in the document, and the number of those is pinned below,
so that a new one is a reviewed change of this file.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from docex import Context, compare, evaluate, parse, run_document, run_shell
from helpers_git_servers import sshd
from test_docs_cli import _all_error_classes
from test_history import built_once

import gitmem
import gitmem.errors
import gitmem.mcp_server
import gitmem.options
import gitmem.paths
import gitmem.search
from gitmem.crypto import decode_key
from gitmem.demo.progress_log import run_store_demo
from gitmem.keysource import user_key_path, write_key_file
from gitmem.knownhosts import known_hosts_file, refused
from gitmem.limits import LimitExceeded

DOCUMENTS = [
    "README.md",
    "docs/quickstart.md",
    "docs/python-api.md",
    "docs/cli.md",
    "docs/sync.md",
    "docs/mcp.md",
    "docs/security.md",
    "docs/safeguards.md",
]

# Blocks marked "skip: next" in each document, each with its reason there.
SKIPS: dict[str, int] = {name: 0 for name in DOCUMENTS} | {"README.md": 2}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return built_once(tmp_path_factory)


@pytest.fixture
def context(tmp_path: Path) -> Context:
    work = tmp_path / "work"
    work.mkdir()
    return Context(directory=work, home=Path(os.environ["HOME"]), checks=CHECKS)


def test_every_fenced_block_is_an_example() -> None:
    """No block escapes the lexer (as an odd fence or indentation could make it)."""
    for name in DOCUMENTS:
        document = parse(name)
        fences = re.findall(r"^[ \t]*```", document.text, flags=re.M)
        blocks = [r for _, r in document.regions if r.evaluator is evaluate]
        assert len(fences) == 2 * len(blocks) > 0, name


@pytest.mark.parametrize("name", DOCUMENTS)
def test_document(
    name: str,
    context: Context,
    built: tuple[Path, str],
    utc: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The venv's gitmem first on PATH, as after quickstart.md's `. .venv/bin/activate`.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    setup = SETUPS.get(name)
    if setup is not None:
        setup(context, built)
    outcome = run_document(name, context)
    assert len(outcome.skipped) == SKIPS[name], outcome.skipped
    assert all(reason for reason in outcome.skipped.values())
    assert outcome.ran


def demo_store(repo: Path) -> str:
    """The demo's three sessions (initializer, worker-1, worker-2) at ``repo``; its key."""
    made = gitmem.init_store(repo)
    made.store.close()
    key = made.key_file.read_text().strip() if made.key_file else ""
    with open(os.devnull, "w") as sink:
        run_store_demo(repo, key, out=sink)
    return key


DRIFTS = {
    "output": "<!-- docex: stdout gitmem --repo history.git sessions -->\n```\nSESSION\n```\n",
    "error": "<!-- docex: stderr exit=2 gitmem --repo history.git show x -->\n```\nerr\n```\n",
    "undeclared": "```\ngitmem log\n```\n",
    "usage": "<!-- docex: usage -->\n```\ngitmem log [--sessions NAME]\n```\n",
    "signature": "<!-- docex: signature -->\n```python\ngitmem.init_store(p, save_key=True)\n```\n",
    "call": "<!-- docex: signature -->\n```python\ngitmem.init_store(p, save=True)\n```\n",
    "shell": "```sh\ngitmem --repo history.git log --command bogus\n```\n",
    "python": "```python\nimport gitmem\nassert gitmem.generate_key() == ''\n```\n",
    "tested-by": "<!-- docex: tested-by tests/test_readme.py::no_such_test -->\n```\n```\n",
    "server": "<!-- docex: server-command -->\n```sh\nclaude mcp add -- gitmem mcp --bogus\n```\n",
}


@pytest.mark.parametrize("drift", DRIFTS)
def test_a_block_that_drifted_fails(
    drift: str, context: Context, built: tuple[Path, str], tmp_path: Path, utc: None
) -> None:
    shutil.copytree(built[0], context.directory / "history.git")
    context.env["GITMEM_KEY"] = built[1]
    doc = tmp_path / "doc.md"
    doc.write_text("```python\nimport gitmem\n```\n" + DRIFTS[drift])
    with pytest.raises(AssertionError, match=r"doc\.md, line"):
        run_document(doc, context)


def history(context: Context, built: tuple[Path, str]) -> None:
    """docs/cli.md's examples use the demo's store; its outputs are of test_history's seven
    operations (1 June 2025, UTC) in history.git."""
    demo_store(context.directory / "agent-memory.git")
    shutil.copytree(built[0], context.directory / "history.git")
    with gitmem.MemoryStore.open(context.directory / "history.git", built[1]) as store:
        write_key_file(user_key_path(store.store_id), decode_key(built[1]))


def key_missing(shown: str, context: Context) -> None:
    """The error of a store whose key is nowhere: agent-memory.git with its key file moved."""
    with gitmem.MemoryStore.open(context.directory / "agent-memory.git") as store:
        key_file = user_key_path(store.store_id)
    key_file.rename(key_file.with_suffix(".moved"))
    try:
        result = context.gitmem(["--repo", "agent-memory.git", "log"])
    finally:
        key_file.with_suffix(".moved").rename(key_file)
    assert result.exit_code == 4
    compare(shown, result.stderr, context)


def completion(shown: str, context: Context) -> None:
    """Each shell's line makes its completion script; bash's runs (zsh and fish are not here)."""
    for shell in re.findall(r"_GITMEM_COMPLETE=(\w+)_source gitmem", shown):
        env = {**os.environ, "_GITMEM_COMPLETE": f"{shell}_source"}
        script = subprocess.run(
            [Path(sys.executable).with_name("gitmem")], env=env, capture_output=True, text=True
        )
        assert script.returncode == 0 and "_GITMEM_COMPLETE" in script.stdout, script.stderr
    (bash,) = [line for line in shown.splitlines() if "bash_source" in line]
    run = subprocess.run(
        ["bash", "-c", f"{bash} && complete -p gitmem"],
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0 and "gitmem" in run.stdout, run.stderr


def forge(context: Context, built: tuple[Path, str]) -> None:
    """docs/sync.md's first machine: ~/memory.git, and a local bare repository for the forge."""
    gitmem.init_store(context.home / "memory.git").store.close()
    bare = context.directory / "forge.git"
    subprocess.run(["git", "init", "--bare", "-q", str(bare)], check=True)
    context.stand_ins["git@github.com:me/agent-memory.git"] = str(bare)


def second_machine(shown: str, context: Context) -> None:
    """docs/sync.md's second machine: a home of its own, the first machine's key copied over."""
    with gitmem.MemoryStore.open(context.home / "memory.git") as store:
        key = user_key_path(store.store_id).read_text().strip()
    home = context.directory / "second-home"
    first = dict(context.env)
    context.env |= {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }
    try:
        run_shell(shown.replace("'gitmem-key-1:…'", key), context)
        assert gitmem.MemoryStore.open(home / "memory.git", key).verify().ok
    finally:
        context.env = first


def unknown_ssh_host(shown: str, context: Context) -> None:
    """docs/sync.md's refusal of an ssh host missing from known_hosts, from a real sshd on
    127.0.0.1 (its name, port, key and the known_hosts path aside)."""
    with sshd(context.directory / "sshd") as server:
        why = refused(server.url(Path("/memory.git")))
    assert why is not None
    message = (
        str(why)
        .replace(server.pattern, "[git.example.org]:2222")
        .replace(f"-p {server.port} 127.0.0.1", "-p 2222 git.example.org")
        .replace(str(known_hosts_file()), "/home/me/.ssh/known_hosts")
    )
    message = re.sub(r"SHA256:[A-Za-z0-9+/]+", "SHA256:...", message)
    assert f"gitmem: error: {message}" == shown.strip()


def mcp_store(context: Context, built: tuple[Path, str]) -> None:
    """The store docs/mcp.md's Python client serves, in its working directory."""
    gitmem.init_store(context.directory / "agent-memory.git").store.close()


def key_text(shown: str, context: Context) -> None:
    decode_key(shown.strip())  # the checksum holds: it is a key's text


def store_replaced(shown: str, context: Context) -> None:
    """A client that used one store at a path, finding another store there."""
    repo, other = context.directory / "replaced.git", context.directory / "other.git"
    for path in (repo, other):  # each key in its per-user key file, as gitmem init leaves it
        with gitmem.init_store(path).store as store:
            store.create("/memories/a.md", "a\n")
    shutil.rmtree(repo)
    shutil.copytree(other, repo)  # what someone who can write the repository can do
    result = context.gitmem(["--repo", str(repo), "log"])
    assert result.exit_code == 9, result.output
    compare(shown, result.stderr.replace(str(repo), "PATH"), context)


def limit_errors(shown: str, context: Context) -> None:
    """The two refusals, 10 bytes over the default limits (the store's, measured from Python)."""
    tool = gitmem.GitMemoryTool(context.directory / "limits.git", key=gitmem.generate_key())
    with pytest.raises(ToolError) as file_error:
        tool.call(
            {"command": "create", "path": "/memories/notes.md", "file_text": "x" * (2**20 + 10)}
        )
    with pytest.raises(LimitExceeded) as store_error:
        gitmem.Limits().check_store(gitmem.parse_path("/memories/c.md"), 0, 64 * 2**20 + 10)
    tool.close()
    compare(shown, f"{file_error.value}\nError: {store_error.value}\n", context)


def truncated_view(shown: str, context: Context) -> None:
    """A 3000-line file whose view stops after line 812."""
    text = "x" * 153 + "\n" + "\n".join("x" * 53 for _ in range(2999))
    with gitmem.GitMemoryTool(
        context.directory / "view.git",
        key=gitmem.generate_key(),
        limits=gitmem.Limits(max_file_bytes=2**20),
    ) as tool:
        tool.call({"command": "create", "path": "/memories/log.md", "file_text": text})
        view = tool.call({"command": "view", "path": "/memories/log.md"})
    lines = view.splitlines()
    compare(
        shown,
        "\n".join([lines[0], lines[1][:8] + "...", lines[-2][:8] + "...", lines[-1]]) + "\n",
        context,
    )


def secret_errors(shown: str, context: Context) -> None:
    aws = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    github = "ghp_" + "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY" + "Zz99"
    url = "https://me:" + "hunter2hunter2" + "@example.com/x"
    texts = [f"one\ntwo\nkey {aws}\n", f"{github}\nx\n{url}\n{github}\n"]
    errors = []
    with gitmem.GitMemoryTool(context.directory / "secrets.git", key=gitmem.generate_key()) as tool:
        for index, text in enumerate(texts):
            with pytest.raises(ToolError) as error:
                tool.call({"command": "create", "path": f"/memories/{index}.md", "file_text": text})
            errors.append(str(error.value))
    compare(shown, "\n".join(errors) + "\n", context)


PROGRESS = "# Progress\n- [x] setup\n- [ ] tests\n"
LAPTOP, DESKTOP = "- [x] tests - 12 pass", "- [ ] tests: 2 failing; see notes"


def conflict(context: Context) -> Path:
    """docs/sync.md's two replicas that both edited one line; the desktop's, after its sync.

    As in the doc, the laptop's head id sorts first (its version keeps the path): the ids are
    random, so the scenario is played until it does (half the time).
    """
    desktop = context.directory / "desktop.git"
    if desktop.exists():
        return desktop
    for attempt in range(20):
        place = context.directory / f"conflict-{attempt}"
        bare = place / "forge.git"
        subprocess.run(["git", "init", "--bare", "-q", str(bare)], check=True)
        key = gitmem.generate_key()
        with gitmem.MemoryStore.init(place / "laptop.git", key, session="laptop") as laptop:
            laptop.create("/memories/progress.md", PROGRESS)
            laptop.add_remote("origin", str(bare))
            laptop.push()
            with gitmem.MemoryStore.clone(
                str(bare), place / "desktop.git", key, session="desktop"
            ) as other:
                other.str_replace("/memories/progress.md", "- [ ] tests", DESKTOP)
                laptop.str_replace("/memories/progress.md", "- [ ] tests", LAPTOP)
                laptop.push()
                if (laptop.head() or "") < (other.head() or ""):
                    other.sync()
                    (place / "desktop.git").rename(desktop)
                    context.env["GITMEM_KEY"] = key
                    return desktop
    raise AssertionError("the laptop's id never sorted first")


def conflict_view(shown: str, context: Context) -> None:
    result = context.gitmem(["--repo", str(conflict(context)), "view", "/memories"])
    assert result.exit_code == 0, result.output
    compare(shown, result.stdout, context)


def conflict_log(shown: str, context: Context) -> None:
    """The transcript's commands, on the desktop's replica (times aside)."""
    repo = str(conflict(context))
    transcript = ""
    for line in shown.splitlines():
        if line.startswith("$ gitmem "):
            result = context.gitmem(["--repo", repo, *shlex.split(line)[2:]])
            assert result.exit_code == 0, result.output
            transcript += f"{line}\n{result.stdout}"
    time = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    compare(re.sub(time, "TIME", shown), re.sub(time, "TIME", transcript), context)


def memory_store(context: Context, built: tuple[Path, str]) -> None:
    """The store docs/safeguards.md's examples open (made by `gitmem init`, say)."""
    gitmem.init_store(context.directory / "memory.git").store.close()


SETUPS = {
    "docs/cli.md": history,
    "docs/sync.md": forge,
    "docs/mcp.md": mcp_store,
    "docs/safeguards.md": memory_store,
}
CHECKS = {
    "key-missing": key_missing,
    "completion": completion,
    "key-text": key_text,
    "store-replaced": store_replaced,
    "limit-errors": limit_errors,
    "truncated-view": truncated_view,
    "secret-errors": secret_errors,
    "conflict-view": conflict_view,
    "conflict-log": conflict_log,
    "second-machine": second_machine,
    "unknown-ssh-host": unknown_ssh_host,
}


# -- what docs/cli.md's prose quotes -----------------------------------------------------------

CLI_MD = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()

# (text docs/cli.md quotes, the command, its exit code, what its stderr then says)
CLI_PROSE = [
    ("log --session nosuch", ["log", "--session", "nosuch"], 2, "nosuch"),
    ("log --command bogus", ["log", "--command", "bogus"], 2, "bogus"),
    (
        "`gitmem: no operations match`",
        ["log", "--command", "expire"],
        0,
        "gitmem: no operations match\n",
    ),
    ("`gitmem: no changes`", ["diff", "HEAD", "HEAD"], 0, "gitmem: no changes\n"),
    ("unknown revision 'x'", ["show", "x"], 2, "unknown revision 'x'"),
    ("no operation of session 'x'", ["show", "session:x"], 2, "no operation of session 'x'"),
    (
        "the memory has no operation that old",
        ["show", "@{2000-01-01}"],
        2,
        "the memory has no operation that old",
    ),
    ("history is not that long", ["show", "HEAD~99"], 2, "history is not that long"),
    (
        "A revision is at most 1,000 characters",
        ["show", "a" * 1001],
        2,
        "a revision is at most 1,000 characters",
    ),
    ('`gitmem restore "$REV"`', ["restore", ""], 2, "error"),
    ("(`gitmem log progress.md`)", ["log", "progress.md"], 2, "/memories/progress.md"),
    ("`99999999999d`", ["log", "--since", "99999999999d"], 2, "error"),
    ("giving two different revisions is a usage", ["show", "HEAD", "--rev", "HEAD~1"], 2, "error"),
    ("an existing store included, is refused (exit code 2)", ["init", "history.git"], 2, "error"),
]


@pytest.mark.parametrize(
    ("quote", "args", "code", "said"), CLI_PROSE, ids=[c[0] for c in CLI_PROSE]
)
def test_what_cli_md_says_the_commands_do(
    quote: str, args: list[str], code: int, said: str, context: Context, built: tuple[Path, str]
) -> None:
    assert quote in " ".join(CLI_MD.split())
    shutil.copytree(built[0], context.directory / "history.git")
    context.env |= {"GITMEM_KEY": built[1], "GITMEM_REPO": "history.git"}
    result = context.gitmem(args)
    assert (result.exit_code, said in result.stderr) == (code, True), result.output
    if code == 0:
        json = context.gitmem([*args, "--json"])  # the empty output is the answer
        assert (json.exit_code, json.stdout, json.stderr) == (0, "", "")


def test_empty_store_and_empty_file_messages(context: Context) -> None:
    assert "`gitmem: the store has no history`" in CLI_MD and "`gitmem: PATH is empty`" in CLI_MD
    context.env["GITMEM_KEY"] = gitmem.generate_key()
    gitmem.MemoryStore.init(context.directory / "e.git", context.env["GITMEM_KEY"]).close()
    for command in (["log"], ["sessions"]):
        result = context.gitmem(["--repo", "e.git", *command])
        assert (result.exit_code, result.stderr) == (0, "gitmem: the store has no history\n")
    with gitmem.MemoryStore.open(context.directory / "e.git", context.env["GITMEM_KEY"]) as store:
        store.create("/memories/empty.md", "")
    result = context.gitmem(["--repo", "e.git", "blame", "/memories/empty.md"])
    assert (result.exit_code, result.stderr) == (0, "gitmem: /memories/empty.md is empty\n")


# -- what docs/python-api.md's prose says ------------------------------------------------------

API_MD = " ".join(
    (Path(__file__).resolve().parent.parent / "docs" / "python-api.md").read_text().split()
)


def test_what_python_api_md_says_options_refuse(tmp_path: Path, key: str) -> None:
    assert (
        "An empty `session`, one longer than 256 characters (`gitmem.options.MAX_SESSION_CHARS`: "
        "the label is recorded in every commit) or holding a control character or a lone "
        "surrogate, or a negative or NaN `lock_timeout`, or an empty string as `state_dir` (or "
        "as the store's path) is a `UsageError`; a `session` or `remote` that is not a string, "
        "a `lock_timeout` that is not a number, `limits` that are not a `gitmem.Limits`, a "
        "`check_rollback` that is not a bool, or `options` that are not a `StoreOptions` a "
        "`TypeError`, raised before anything is created."
    ) in API_MD
    repo = tmp_path / "m.git"
    bad: list[tuple[dict[str, Any], type[Exception]]] = [
        ({"session": ""}, gitmem.UsageError),
        ({"session": "s" * 257}, gitmem.UsageError),
        ({"session": "two\nlines"}, gitmem.UsageError),
        ({"session": "s\udcff"}, gitmem.UsageError),
        ({"lock_timeout": -1.0}, gitmem.UsageError),
        ({"lock_timeout": float("nan")}, gitmem.UsageError),
        ({"session": 3}, TypeError),
        ({"lock_timeout": "1"}, TypeError),
        ({"state_dir": ""}, gitmem.UsageError),
        ({"remote": 3}, TypeError),
        ({"limits": {}}, TypeError),
        ({"check_rollback": 1}, TypeError),
        ({"options": {}}, TypeError),
    ]
    for settings, error in bad:
        with pytest.raises(error):
            gitmem.GitMemoryTool(repo, key=key, **settings)
        assert not repo.exists()


def test_what_python_api_md_says_network_timeouts_refuse(tmp_path: Path, key: str) -> None:
    assert (
        "A `network_timeout` (or a `timeout=` of `clone`, `push`, `pull`, `sync`) that is not "
        "more than 0 and at most 86400 seconds is a `UsageError`, one that is not a number a "
        "`TypeError`."
    ) in API_MD
    repo = tmp_path / "m.git"
    bad: list[tuple[object, type[Exception]]] = [
        (0, gitmem.UsageError),
        (-1.0, gitmem.UsageError),
        (float("nan"), gitmem.UsageError),
        (86401, gitmem.UsageError),
        ("30", TypeError),
        (True, TypeError),
    ]
    for value, error in bad:
        with pytest.raises(error):
            gitmem.GitMemoryTool(repo, key=key, network_timeout=value)  # type: ignore[arg-type]
        assert not repo.exists()
        with pytest.raises(error):
            gitmem.MemoryStore.clone(str(repo), tmp_path / "c.git", key, timeout=value)  # type: ignore[arg-type]
        assert not (tmp_path / "c.git").exists()


def test_what_python_api_md_says_paths_refuse(store: gitmem.MemoryStore) -> None:
    assert '(`paths="/memories/a.md"` instead of `paths=["/memories/a.md"]`)' in API_MD
    store.create("/memories/a.md", "a\n")
    with pytest.raises(TypeError):
        store.restore("HEAD", paths="/memories/a.md")
    with pytest.raises(TypeError):
        store.read_text(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        gitmem.GitMemoryTool(store, session="x")


def test_every_command_a_record_names_is_a_log_filter(context: Context) -> None:
    """sync.md: a pull that combines two histories commits a `merge`; `log --command merge`
    lists those, and cli.md's --command list is the library's."""
    options = re.search(r"`--command CMD`: only operations of one command \(([^)]*)\)", CLI_MD)
    assert options is not None
    assert re.findall(r"`(\w+)`", options[1]) == list(gitmem.history.COMMANDS)
    count = ["nine", "ten", "eleven"][len(gitmem.history.COMMANDS) - 9]
    assert f"is not one of the {count} (`log --command bogus`)" in " ".join(CLI_MD.split())
    key = gitmem.generate_key()
    bare = context.directory / "forge.git"
    subprocess.run(["git", "init", "--bare", "-q", str(bare)], check=True)
    with gitmem.MemoryStore.init(context.directory / "a.git", key, session="a") as a:
        a.create("/memories/a.md", "a\n")
        a.add_remote("origin", str(bare))
        a.push()
        with gitmem.MemoryStore.clone(str(bare), context.directory / "b.git", key) as b:
            b.create("/memories/b.md", "b\n")
            a.create("/memories/c.md", "c\n")
            a.push()
            merge = b.sync().merge
    assert merge is not None
    context.env["GITMEM_KEY"] = key
    result = context.gitmem(["--repo", "b.git", "log", "--command", "merge", "--json"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["commit"] for line in result.stdout.splitlines()] == [merge.commit]


# -- the API tables ------------------------------------------------------------------------------


def _table_calls(doc: str, column: int) -> list[tuple[str, str, str]]:
    """``(section heading, callee, arguments)`` of each `f(args)` in ``column`` of doc's tables."""
    text = (Path(__file__).resolve().parent.parent / doc).read_text()
    found = []
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line
        elif line.startswith("|") and not line.startswith("|--"):
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            if len(cells) > column:
                for call in re.finditer(r"`([A-Za-z_][\w.]*)\(([^`]*)\)`", cells[column]):
                    found.append((heading, call[1], call[2]))
    return found


def _callee(heading: str, name: str) -> Any:
    if name.startswith("store."):
        return getattr(gitmem.MemoryStore, name.removeprefix("store."))
    if "." in name:
        return eval(name, {"gitmem": gitmem, "MemoryStore": gitmem.MemoryStore})
    modules = {"gitmem.history": gitmem.history, "gitmem.search": gitmem.search}
    owner = next((m for h, m in modules.items() if h in heading), gitmem.MemoryStore)
    return getattr(owner, name)


@pytest.mark.parametrize(("doc", "column"), [("docs/python-api.md", 0), ("docs/cli.md", 1)])
def test_the_api_tables_name_real_parameters(doc: str, column: int) -> None:
    """Each call in python-api.md's method tables and cli.md's "Python equivalents" names
    parameters the callable has, and every parameter it requires."""
    calls = _table_calls(doc, column)
    assert len(calls) > 20
    wrong = {}
    for heading, name, args in calls:
        shown = ast.parse(f"def _({args}): pass").body[0]
        assert isinstance(shown, ast.FunctionDef)
        names = [a.arg for a in [*shown.args.args, *shown.args.kwonlyargs]]
        actual = inspect.signature(_callee(heading, name)).parameters
        unknown = [n for n in names if n not in actual and n != "self"]
        required = [
            p.name
            for p in actual.values()
            if p.default is p.empty
            and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
            and p.name not in (*names, "self", "cls")
        ]
        if unknown or required:
            wrong[f"{doc}: {name}({args})"] = (unknown, required)
    assert wrong == {}


def test_the_safeguards_table_gives_the_defaults() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "safeguards.md").read_text()
    limits = gitmem.Limits()
    rows = {
        f"| largest file | 1 MiB ({limits.max_file_bytes:,} bytes) |": limits.max_file_bytes
        == 2**20,
        "| largest memory (all files at the head) | 64 MiB |": limits.max_store_bytes == 64 * 2**20,
        f"| longest `view` result | {limits.max_view_chars:,} characters |": True,
        f"| deepest new path | {gitmem.paths.MAX_DEPTH} components |": True,
        f"| longest session label | {gitmem.options.MAX_SESSION_CHARS} characters": True,
        f"| input repeated in an error | {gitmem.errors.ECHO_CHARS:,} characters;": True,
    }
    assert [row for row, holds in rows.items() if row not in text or not holds] == []
    assert "`Limits.max_view_chars` (at least 2,048)" in text
    gitmem.Limits(max_view_chars=2048)
    with pytest.raises(gitmem.UsageError):
        gitmem.Limits(max_view_chars=2047)


@pytest.mark.parametrize("option", ["--repo", "--key-file"])
def test_demo_refuses_a_store_it_would_ignore(option: str, context: Context) -> None:
    """cli.md: `gitmem demo` takes no --repo or --key-file; given before its name (where the
    group accepts them), they were silently ignored and the demo ran on a store of its own."""
    assert "`gitmem demo` makes its own store and takes no `--repo` or `--key-file`." in CLI_MD
    result = context.gitmem([option, "mine.git", "demo", "--offline"])
    assert result.exit_code == 2, result.output
    assert f"takes no {option}" in result.stderr and "--store PATH" in result.stderr
    assert list(context.directory.iterdir()) == []


def test_demo_runs_with_a_store_named_by_the_environment(context: Context) -> None:
    """GITMEM_REPO exported for the other commands (quickstart.md, step 5) is no mistake."""
    context.env["GITMEM_REPO"] = "mine.git"
    result = context.gitmem(["demo", "--offline", "--store", "demo.git"])
    assert result.exit_code == 0, result.output
    assert not (context.directory / "mine.git").exists()


def test_python_api_md_error_table_is_the_classes() -> None:
    """Each class in python-api.md's error table is gitmem's, with the exit code and the bases
    the row gives it ("(a `NoStore`)", "(also a `KeyError`)")."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "python-api.md").read_text()
    table = text.split("## Errors", 1)[1].split("\n\n")[2]
    wrong, seen = [], []
    for line in table.splitlines()[2:]:
        names, _meaning, code = [c.strip() for c in line.strip("|").split(" | ")]
        for name, inside in re.findall(r"`(\w+)`(?: \(([^)]*)\))?", names):
            seen.append(name)
            cls = getattr(gitmem, name, None) or getattr(gitmem.errors, name, None)
            if cls is None:
                wrong.append(f"{name}: no such class")
                continue
            if cls.exit_code != int(code):
                wrong.append(f"{name}: exit code {cls.exit_code}, table {code}")
            for base in re.findall(r"\ban? `(\w+)`", inside):
                expected = getattr(builtins, base, None) or getattr(gitmem, base)
                if not issubclass(cls, expected):
                    wrong.append(f"{name}: not a {base}")
    assert wrong == []
    # Interrupted (130) is the command line's own (a Ctrl-C), in cli.md's table.
    cli_only = {"Interrupted"}
    missing = [c.__name__ for c in _all_error_classes() if c.exit_code != 1]
    missing = [name for name in missing if name not in cli_only]
    assert [name for name in missing if name not in seen] == []


def test_mcp_md_tools_table_names_each_tools_parameters() -> None:
    """Each audit tool's row in mcp.md names exactly the parameters its input schema has, and the
    memory tool's fields are the ones listed under the table."""
    from gitmem.mcp_server import AUDIT_TOOLS, RESTORE_TOOL, memory_input_schema

    text = (Path(__file__).resolve().parent.parent / "docs" / "mcp.md").read_text()
    rows = dict(re.findall(r"^\| `(memory\w*)` \| (.*) \|$", text, flags=re.M))
    assert set(rows) == {"memory", *(t.name for t in (*AUDIT_TOOLS, RESTORE_TOOL))}
    wrong = {}
    for tool in (*AUDIT_TOOLS, RESTORE_TOOL):
        words = set(re.findall(r"`(\w+)`", rows[tool.name]))
        shown = words & ({*tool.input_schema["properties"]} | {"rev", "path", "paths"})
        if shown != set(tool.input_schema["properties"]):
            wrong[tool.name] = (sorted(shown), sorted(tool.input_schema["properties"]))
    assert wrong == {}
    fields = re.search(
        r"The `memory` tool's input has exactly the memory tool's fields \(([^)]*)\)",
        " ".join(text.split()),
    )
    assert fields is not None
    assert set(re.findall(r"`(\w+)`", fields[1])) == set(memory_input_schema()["properties"])


def test_every_time_and_age_cli_md_shows_is_accepted() -> None:
    """The spellings in cli.md's "Times" section parse (the one it calls an error does not),
    and so do expire's and gc's AGE examples."""
    from gitmem.revisions import parse_time

    times = CLI_MD.split("\n## Times\n", 1)[1].split("\n## ", 1)[0]
    shown = [t for t in re.findall(r"`([^`]+)`", times) if re.match(r"[\d]|now|today|yest", t)]
    assert len(shown) == 14
    for text in shown:
        if text == "99999999999d":
            with pytest.raises(gitmem.UsageError):
                parse_time(text)
        else:
            parse_time(text)
    expire = CLI_MD.split("### `gitmem expire`", 1)[1].split("\n### ", 1)[0]
    ages = re.findall(r"`(\d\w*)`", expire)
    assert {"90d", "12h", "2w", "1d12h"} <= set(ages)
    for age in ages:
        gitmem.parse_duration(age)
