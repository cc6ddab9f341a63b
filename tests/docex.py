"""Run the code blocks of the user documentation: the machinery of tests/test_docs_examples.py.

Sybil finds the fenced blocks (its Markdown lexer handles blocks indented in lists) and the
``<!-- skip: next "why" -->`` comments that mark a block which cannot run here. Every other block
is checked according to its language, or to the HTML comment on the line just before it:

- ``python``: run, in order, in one namespace per document, in the document's scratch directory;
- ``sh``: each line runs: ``gitmem ...`` through click's CliRunner (exit code 0 expected),
  ``export NAME=VALUE`` sets the environment of the later lines, anything else runs in bash;
- ``json``: must parse;
- no language: needs a directive saying what it shows, else the block fails.

A document's setup may give local stand-ins for what a test cannot reach (a forge's URL), which
replace that text in every block.

Directives (invisible to readers, one HTML comment on the line above the block)::

    <!-- docex: stdout gitmem ARGS -->          the block is the output of the command
    <!-- docex: stderr exit=N gitmem ARGS -->   the block is its error output, exit code N
    <!-- docex: usage -->                       a synopsis: each option exists on the command
    <!-- docex: signature -->                   Python calls: each a signature or a valid call
    <!-- docex: check NAME -->                  CHECKS[NAME](block text, context) in the test
    <!-- docex: server-command -->              each gitmem command line in it parses
    <!-- docex: tested-by FILE::TEST -->         another test runs this block as written

In compared text, a hex id stands for any id of the same length (the same id always for the
same one), ``HEX...`` or ``…`` for any text, and the test's home directory is ``/home/me``.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import os
import re
import shlex
import subprocess
import sys
import unittest
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner, Result
from sybil import Document, Example, Region
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer
from sybil.parsers.markdown.skip import SkipParser

from gitmem.cli import main

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

DIRECTIVE = re.compile(r"<!--\s*docex:\s*(?P<name>[\w-]+)\s*(?P<args>.*?)\s*-->\s*\Z")


@dataclass
class Block:
    """One fenced block: its language (``""`` for none), directive, and text."""

    language: str
    directive: str
    args: str
    text: str


@dataclass
class Context:
    """What the blocks of one document share: a scratch directory and an environment."""

    directory: Path
    home: Path
    env: dict[str, str] = field(default_factory=dict)
    runner: CliRunner = field(default_factory=CliRunner)
    checks: Mapping[str, Callable[[str, Context], None]] = field(default_factory=dict)
    # Local stand-ins for what a test cannot reach (a forge's URL), replaced in every block.
    stand_ins: dict[str, str] = field(default_factory=dict)
    last: Result | None = None

    def gitmem(self, args: list[str]) -> Result:
        """``gitmem ARGS`` in the scratch directory, as a user's shell would run it."""
        old = Path.cwd()
        os.chdir(self.directory)
        try:
            self.last = self.runner.invoke(main, args, env=self.env, catch_exceptions=False)
        finally:
            os.chdir(old)
        return self.last


class BlockParser:
    """Every fenced block of a document, with the docex directive on the line above it."""

    lexer = RawFencedCodeBlockLexer(
        info_pattern=re.compile(r"(?P<language>[^\n]*)$\n", re.MULTILINE)
    )

    def __call__(self, document: Document) -> list[Region]:
        regions = []
        for region in self.lexer(document):
            before = document.text[: region.start].rstrip("\n").rsplit("\n", 1)[-1].strip()
            found = DIRECTIVE.match(before)
            block = Block(
                language=str(region.lexemes["language"]).strip(),
                directive=found["name"] if found else "",
                args=found["args"] if found else "",
                text=str(region.lexemes["source"]),
            )
            regions.append(Region(region.start, region.end, block, evaluate))
        return regions


def parse(name: str | Path) -> Document:
    """Document ``name`` (relative to the checkout) with its blocks and skip comments."""
    return Document.parse(str(ROOT / name), SkipParser(), BlockParser())


@dataclass
class Outcome:
    """What running one document's blocks did."""

    ran: list[int] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)


def run_document(name: str | Path, context: Context) -> Outcome:
    """Run every block of document ``name`` in order; the first failure raises."""
    document = parse(name)
    document.namespace["__docex__"] = context
    document.namespace["__name__"] = "__docex__"
    outcome = Outcome()
    for example in document.examples():
        if example.region.evaluator is not evaluate:
            example.evaluate()  # a skip directive: arms the skip of the next block
            continue
        try:
            example.evaluate()
        except unittest.SkipTest as skip:
            outcome.skipped[example.line] = str(skip)
            continue
        outcome.ran.append(example.line)
    return outcome


def evaluate(example: Example) -> str | None:
    context: Context = example.namespace["__docex__"]
    block: Block = example.parsed
    for text, stand_in in context.stand_ins.items():
        block = replace(block, text=block.text.replace(text, stand_in))
    where = f"{example.path}, line {example.line}"
    try:
        if block.directive:
            DIRECTIVES[block.directive](block, context, example)
        elif block.language == "python":
            run_python(block, example)
        elif block.language == "sh":
            run_shell(block.text, context)
        elif block.language == "json":
            import json

            json.loads(block.text)
        else:
            raise AssertionError(
                'a block without a language needs a "<!-- docex: ... -->" directive or a '
                '"<!-- skip: next "why" -->" on the line above it'
            )
    except AssertionError as error:
        raise AssertionError(f"{where}: {error}") from error
    return None


# -- languages ----------------------------------------------------------------------------


def run_python(block: Block, example: Example) -> None:
    context: Context = example.namespace["__docex__"]
    # The block's own line numbers in tracebacks.
    code = compile("\n" * example.line + block.text, example.path, "exec")
    old = Path.cwd()
    os.chdir(context.directory)
    try:
        exec(code, example.namespace)
    finally:
        os.chdir(old)


def run_shell(text: str, context: Context) -> None:
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        home = context.env.get("HOME", str(context.home))  # a second machine's, in a check
        words = [home + w[1:] if w.startswith("~") else w for w in words]
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            context.env[name] = value
        elif words[0] == "gitmem":
            result = context.gitmem(words[1:])
            assert result.exit_code == 0, f"{line}\n{result.output}"
        else:
            env = {**os.environ, **context.env, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
            run = subprocess.run(
                ["bash", "-c", line], cwd=context.directory, env=env, capture_output=True, text=True
            )
            assert run.returncode == 0, f"{line}\n{run.stdout}{run.stderr}"


# -- comparing shown output -----------------------------------------------------------------

HEX = r"\b[0-9a-f]{10,40}\b"
WILD = r"\b[0-9a-f]{2,}(?:\.\.\.|…)|\.\.\.|…"


def compare(shown: str, actual: str, context: Context) -> None:
    """``actual`` is what the doc shows, up to ids, elisions and the home directory."""
    actual = actual.replace(str(context.home), "/home/me")
    parts = re.split(f"({HEX}|{WILD})", shown)
    pattern = ""
    for index, part in enumerate(parts):
        if index % 2 == 0:
            pattern += re.escape(part)
        elif re.fullmatch(HEX, part):
            pattern += f"([0-9a-f]{{{len(part)}}})"
        else:
            pattern += ".*?"
    found = re.fullmatch(pattern, actual, flags=re.S)
    if found is None:
        diff = difflib.unified_diff(
            shown.splitlines(), actual.splitlines(), "shown", "actual", lineterm=""
        )
        raise AssertionError("the output differs:\n" + "\n".join(diff))
    ids = [p for p in parts[1::2] if re.fullmatch(HEX, p)]
    mapping: dict[str, str] = {}
    for doc_id, real in zip(ids, found.groups(), strict=True):
        previous = mapping.setdefault(doc_id[:10], real[:10])
        assert previous == real[:10], f"{doc_id} stands for two commits ({previous}, {real})"
    assert len(set(mapping.values())) == len(mapping), f"two ids stand for one commit: {mapping}"


# -- directives -----------------------------------------------------------------------------


def output(stream: str) -> Callable[[Block, Context, Example], None]:
    def check(block: Block, context: Context, example: Example) -> None:
        args = block.args
        code = 0
        if args.startswith("exit="):
            first, args = args.split(None, 1)
            code = int(first.removeprefix("exit="))
        words = shlex.split(args)
        assert words[0] == "gitmem", block.args
        result = context.gitmem(words[1:])
        assert result.exit_code == code, (result.exit_code, result.output)
        compare(block.text, result.stdout if stream == "stdout" else result.stderr, context)

    return check


def usage(block: Block, context: Context, example: Example) -> None:
    """Each synopsis line names a command whose options are all the ones it shows."""
    for line in block.text.splitlines():
        line = line.split("  #")[0]
        if not line.startswith("gitmem "):
            assert line.startswith(" "), line  # a continuation
            words = re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line)
        else:
            command: click.Command = main
            for name in re.sub(r"--repo \S+", "", line).split()[1:]:
                if not isinstance(command, click.Group) or name not in command.commands:
                    break
                command = command.commands[name]
            assert command is not main, line
            words = re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line)
        known = {opt for p in [*command.params, *main.params] for opt in p.opts + p.secondary_opts}
        unknown = [w for w in words if w not in known]
        assert unknown == [], f"{line!r}: not options of the command: {unknown}"


def tested_by(block: Block, context: Context, example: Example) -> None:
    file, _, test = block.args.partition("::")
    source = (ROOT / file).read_text()
    assert re.search(rf"^def {test}\(", source, flags=re.M), f"no test {block.args}"


def server_command(block: Block, context: Context, example: Example) -> None:
    """The gitmem command line in a client's configuration is one gitmem accepts."""
    text = block.text
    if block.language == "json":
        import json

        servers = json.loads(text)["mcpServers"].values()
        lines = [[s["command"], *s["args"]] for s in servers]
    else:
        lines = []
        for line in text.replace("\\\n", " ").splitlines():
            if line.startswith("args:"):
                line = "gitmem " + line.removeprefix("args:")
                line = re.sub(r"\[([^]]*)\]", r"\1", line)  # every optional part at once
            elif " -- " in line:
                line = line.split(" -- ", 1)[1]
            else:
                continue
            lines.append(shlex.split(line))
    assert lines, "no gitmem command line found"
    for words in lines:
        assert Path(words[0]).name == "gitmem", words
        # --help is eager: it answers only once every option before it has parsed.
        result = context.runner.invoke(main, [*words[1:], "--help"])
        assert result.exit_code == 0, (words, result.output)


def check(block: Block, context: Context, example: Example) -> None:
    context.checks[block.args](block.text, context)


def signature(block: Block, context: Context, example: Example) -> None:
    """Each call shown is either the callee's whole signature (every parameter, its kind and
    default) or a call that signature accepts."""
    namespace = example.namespace
    for callee_name, args in calls(re.sub(r"#[^\n]*", "", block.text)):
        actual = expanded_signature(eval(callee_name, namespace))
        try:
            shown: ast.stmt | None = ast.parse(f"def _({args}): pass").body[0]
        except SyntaxError:
            shown = None
        if isinstance(shown, ast.FunctionDef):
            problems = signature_problems(shown.args, actual, namespace)
            assert not problems, f"{callee_name}: {problems}"
        else:
            node = ast.parse(f"_({args})", mode="eval").body
            assert isinstance(node, ast.Call)
            keywords = {k.arg: None for k in node.keywords if k.arg}
            actual.bind(*[None] * len(node.args), **keywords)


def calls(text: str) -> list[tuple[str, str]]:
    """``(callee, arguments)`` for each outermost call in ``text``."""
    found: list[tuple[str, str, int]] = []
    for match in re.finditer(r"([A-Za-z_][\w.]*)\(", text):
        if found and match.start() < found[-1][2]:
            continue  # inside the previous call
        depth, index = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            index += 1
        found.append((match[1], text[match.end() : index - 1], index))
    return [(name, args) for name, args, _ in found]


def expanded_signature(callee: Any) -> inspect.Signature:
    """The signature with ``**settings: Unpack[Settings]`` spelled out as StoreOptions' fields."""
    from gitmem.options import Settings, StoreOptions

    actual = inspect.signature(callee)
    params = [p for p in actual.parameters.values() if p.kind is not p.VAR_KEYWORD]
    if len(params) < len(actual.parameters):
        # The documented defaults, not the tests' (conftest turns idle publishing off).
        saved = os.environ.pop("GITMEM_PUBLISH_IDLE", None)
        try:
            defaults, param = StoreOptions(), params[0]
        finally:
            if saved is not None:
                os.environ["GITMEM_PUBLISH_IDLE"] = saved
        for name in Settings.__annotations__:
            default = getattr(defaults, name)
            annotation = Settings.__annotations__[name]
            params.append(
                inspect.Parameter(name, param.KEYWORD_ONLY, default=default, annotation=annotation)
            )
    return actual.replace(parameters=params)


def signature_problems(
    shown: ast.arguments, actual: inspect.Signature, namespace: dict[str, Any]
) -> list[str]:
    """How the shown parameters differ from ``actual``."""
    positional = [*shown.posonlyargs, *shown.args]
    with_defaults = [a.arg for a in positional][len(positional) - len(shown.defaults) :]
    defaults: dict[str, ast.expr] = dict(zip(with_defaults, shown.defaults, strict=True))
    kw_defaults = zip(shown.kwonlyargs, shown.kw_defaults, strict=True)
    defaults |= {a.arg: d for a, d in kw_defaults if d is not None}
    names = [a.arg for a in positional] + [a.arg for a in shown.kwonlyargs]
    checked = list(names)
    problems = []
    if shown.kwarg is not None:  # "**settings": StoreOptions' fields as keywords
        from gitmem.options import Settings

        names += [n for n in Settings.__annotations__ if n not in names]
    missing = [n for n in actual.parameters if n not in names]
    if missing:
        problems.append(f"not shown: {missing}")
    for name in checked:
        param = actual.parameters.get(name)
        if param is None:
            problems.append(f"no parameter {name}")
            continue
        keyword_only = name in [a.arg for a in shown.kwonlyargs]
        if keyword_only != (param.kind is param.KEYWORD_ONLY):
            problems.append(f"{name}: keyword-only is {param.kind is param.KEYWORD_ONLY}")
        if name in defaults:
            value = eval(ast.unparse(defaults[name]), namespace)
            # A keyword setting typed "X | None" takes None for "the default".
            none_ok = value is None and "None" in str(param.annotation)
            if param.default is param.empty or (param.default != value and not none_ok):
                problems.append(f"{name}: default is {param.default!r}, shown {value!r}")
        elif param.default is not param.empty:
            problems.append(f"{name}: has a default ({param.default!r}), shown without")
    return problems


DIRECTIVES: dict[str, Callable[[Block, Context, Example], None]] = {
    "stdout": output("stdout"),
    "stderr": output("stderr"),
    "usage": usage,
    "signature": signature,
    "check": check,
    "server-command": server_command,
    "tested-by": tested_by,
}
