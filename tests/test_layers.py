"""The package's layers hold: no module imports one of its own layer or above.

``LAYERS`` is the one declaration of the order, lowest first, and ``GIT_LAYERS`` the order
inside the git storage (``gitmem/git/``); ARCHITECTURE.md ("Code map") says the same in prose.
Imports under ``TYPE_CHECKING`` and inside functions count too: a lower layer that needs
something of a higher one gets a seam (a protocol, a callback) instead. ``UPWARD_CALLS`` names
the exceptions, each an import inside a function, with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gitmem"
DESIGN = PACKAGE.parent / "docs" / "design.md"
ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"

LAYERS: list[set[str]] = [
    {"_version", "errors", "forksafe"},
    {"crypto"},  # below format: the format's key slots carry Argon2id parameters
    # buckets: the shape of split directories (format 4), below tree, which reads and writes it
    {
        "fsutil",
        "idle",
        "knownhosts",
        "paths",
        "textops",
        "secrets",
        "format",
        "workers",
        "chunking",
        "cache",
        "buckets",
        "shardmap",
    },
    {"git"},  # the git storage, a subpackage layered in turn (GIT_LAYERS)
    {"keysource", "highwater", "gitrepo"},  # gitrepo: compatibility names for python-api.md
    {"tree", "replica", "keyslots"},
    {"snapshot", "editor"},
    {"render", "merge", "keymerge", "strength"},
    {"limits"},
    {"options", "view", "operation"},
    {"expiry", "revisions", "syncresult", "keyadmin", "redaction", "verify"},
    {"store"},
    {"transfer", "redact"},
    {"history", "initstore", "sync", "autosync", "commands"},
    {"tool", "report", "search"},
    {"mcp_server"},
    {"demo"},
    {"cli"},
    {"__init__", "__main__"},
]
RANK = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}
# The layers of the git storage, lowest first: objects and refs know nothing of the redo log,
# which sits over them; maintenance reads through a protocol (objects.Reader) that the
# repository fills; only repo composes them all.
GIT_LAYERS: list[set[str]] = [
    {"wal", "files"},  # the redo log's bytes; what the layers share about files
    {"pack", "handle", "flush"},  # packs gitmem writes; opening with libgit2; the write mode
    {"objects", "refs", "config", "lock"},
    {"redo", "maintenance", "remotes"},
    {"repo"},
    {"__init__"},
]
GIT_RANK = {name: rank for rank, layer in enumerate(GIT_LAYERS) for name in layer}
# Imports that go up a layer, allowed only inside a function (run when it is called, after both
# modules are loaded, so they form no import cycle), each with its reason.
UPWARD_CALLS: dict[tuple[str, str], str] = {
    ("store", "sync"): "MemoryStore.clone, pull, push, sync, add_remote and remove_remote are "
    "gitmem.sync's functions, which write merges through MemoryStore.write",
    ("store", "redact"): "MemoryStore.redact is gitmem.redact's function, which rewrites "
    "history through the store's reads and writes",
}
# The one module (or subpackage) that may import each heavy dependency.
ONLY_IMPORTER = {"pygit2": "git", "cryptography": "crypto", "zxcvbn": "strength"}


def modules() -> list[tuple[tuple[str, ...], Path]]:
    """Every module of the package as its dotted parts below ``gitmem`` and its file."""
    found = []
    for file in sorted(PACKAGE.rglob("*.py")):
        parts = file.relative_to(PACKAGE).with_suffix("").parts
        found.append((parts, file))
    return found


def top(parts: tuple[str, ...]) -> str:
    """The top-level module (or subpackage) of the package that ``parts`` belongs to."""
    return parts[0] if parts else "__init__"


def is_module(parts: tuple[str, ...]) -> bool:
    return (PACKAGE.joinpath(*parts).with_suffix(".py")).is_file() or (
        PACKAGE.joinpath(*parts) / "__init__.py"
    ).is_file()


def imported(parts: tuple[str, ...], file: Path) -> list[tuple[tuple[str, ...], int, str]]:
    """The package modules ``file`` imports (as parts below gitmem), with line numbers, and the
    third-party top-level names it imports (as a string, with an empty tuple)."""
    package = parts[:-1]  # what a relative import starts from, for modules and __init__ alike
    out: list[tuple[tuple[str, ...], int, str]] = []
    for node in ast.walk(ast.parse(file.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = base + tuple(node.module.split(".")) if node.module else base
            elif node.module and node.module.split(".")[0] == "gitmem":
                target = tuple(node.module.split(".")[1:])
            else:
                out.append(((), node.lineno, (node.module or "").split(".")[0]))
                continue
            names = [(*target, alias.name) for alias in node.names]
            members = [n for n in names if is_module(n)]
            out.extend((t, node.lineno, "") for t in (members or [target]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                dotted = alias.name.split(".")
                if dotted[0] == "gitmem":
                    out.append((tuple(dotted[1:]), node.lineno, ""))
                else:
                    out.append(((), node.lineno, dotted[0]))
    return out


def in_functions(file: Path) -> set[int]:
    """The lines of the imports in ``file`` that run only when a function is called."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(file.read_text("utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines.update(
                inner.lineno
                for inner in ast.walk(node)
                if isinstance(inner, ast.Import | ast.ImportFrom)
            )
    return lines


def upward_call(here: str, there: str, line: int, file: Path) -> bool:
    """Whether the import of ``there`` by ``here`` at ``line`` is one ``UPWARD_CALLS`` allows."""
    return (here, there) in UPWARD_CALLS and line in in_functions(file)


def test_every_module_has_a_layer() -> None:
    missing = sorted({top(parts) for parts, _ in modules()} - RANK.keys())
    assert missing == [], f"add these modules to LAYERS (and ARCHITECTURE.md): {missing}"


MODULES = modules()


@pytest.mark.parametrize(("parts", "file"), MODULES, ids=[".".join(p) for p, _ in MODULES])
def test_no_module_imports_its_own_layer_or_above(parts: tuple[str, ...], file: Path) -> None:
    here = top(parts)
    problems = []
    for target, line, external in imported(parts, file):
        if external:
            owner = ONLY_IMPORTER.get(external)
            if owner is not None and owner != here:
                problems.append(f"line {line}: {external} may only be imported by {owner}")
            continue
        there = top(target)
        if there == here or upward_call(here, there, line, file):
            continue  # within one module or subpackage, or an allowed call upward
        if RANK[there] >= RANK[here]:
            problems.append(
                f"line {line}: {here} (layer {RANK[here]}) imports {there} (layer {RANK[there]})"
            )
    assert problems == []


def sub(parts: tuple[str, ...]) -> str:
    """The module of the git storage that ``parts`` (below ``gitmem``) names."""
    return parts[1] if len(parts) > 1 else "__init__"


GIT_MODULES = [(parts, file) for parts, file in MODULES if top(parts) == "git"]


def test_every_git_module_has_a_layer() -> None:
    missing = sorted({sub(parts) for parts, _ in GIT_MODULES} - GIT_RANK.keys())
    assert missing == [], f"add these modules to GIT_LAYERS (and ARCHITECTURE.md): {missing}"


@pytest.mark.parametrize(("parts", "file"), GIT_MODULES, ids=[".".join(p) for p, _ in GIT_MODULES])
def test_no_git_module_imports_its_own_layer_or_above(parts: tuple[str, ...], file: Path) -> None:
    here = sub(parts)
    problems = []
    for target, line, external in imported(parts, file):
        if external or top(target) != "git":
            continue
        there = sub(target)
        if GIT_RANK[there] >= GIT_RANK[here]:
            problems.append(
                f"line {line}: git.{here} (layer {GIT_RANK[here]}) imports git.{there} "
                f"(layer {GIT_RANK[there]})"
            )
    assert problems == []


def test_no_import_cycle() -> None:
    """No module of the package reaches itself through its imports (a cycle would need an
    import sideways or up, which the tests above refuse; this says which modules form it)."""
    graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for parts, file in MODULES:
        node = parts[:-1] if parts[-1] == "__init__" else parts
        graph.setdefault(node, set()).update(
            t
            for t, line, external in imported(parts, file)
            if not external and is_module(t) and not upward_call(top(parts), top(t), line, file)
        )
    done: set[tuple[str, ...]] = set()

    def visit(node: tuple[str, ...], path: list[tuple[str, ...]]) -> None:
        if node in path:
            cycle = [*path[path.index(node) :], node]
            raise AssertionError("import cycle: " + " -> ".join(".".join(n) for n in cycle))
        if node in done:
            return
        for target in sorted(graph.get(node, ())):
            visit(target, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])


def test_the_storage_is_imported_only_through_its_modules() -> None:
    """Nothing outside ``gitmem/git/`` imports the subpackage itself or ``repo``'s layers by
    way of ``gitmem.git`` (its ``__init__`` exports nothing): each import names its module."""
    for parts, file in MODULES:
        if top(parts) == "git":
            continue
        for target, line, external in imported(parts, file):
            if not external and target == ("git",):
                raise AssertionError(f"{'.'.join(parts)} line {line} imports gitmem.git itself")


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "paths.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .store import X\n"
    )
    found = [top(t) for t, _, ext in imported(("paths",), bad) if not ext]
    assert found == ["store"] and RANK["store"] > RANK["paths"]


def test_an_allowed_upward_import_is_allowed_only_inside_a_function(tmp_path: Path) -> None:
    for here, there in UPWARD_CALLS:
        check_upward_call(tmp_path, here, there)


def check_upward_call(tmp_path: Path, here: str, there: str) -> None:
    module_level = tmp_path / "module_level.py"
    module_level.write_text(f"from . import {there}\n")
    inside = tmp_path / "inside.py"
    inside.write_text(f"def f() -> None:\n    from . import {there}\n")
    assert not upward_call(here, there, 1, module_level)
    assert upward_call(here, there, 2, inside)
    assert not upward_call("paths", there, 2, inside)


# Reaching into another object's private attributes, allowed only here, each with its reason.
PRIVATE_ACCESS_ALLOWED: set[tuple[str, str]] = set()


@pytest.mark.parametrize(("parts", "file"), MODULES, ids=[".".join(p) for p, _ in MODULES])
def test_no_module_uses_another_ones_private_names(parts: tuple[str, ...], file: Path) -> None:
    here = top(parts)
    if here == "demo":
        return  # the demo's stand-ins use their own classes' internals
    problems: list[str] = []
    for node in ast.walk(ast.parse(file.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.level or node.module == "gitmem"):
            problems.extend(
                f"line {node.lineno}: imports {alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and alias.name != "__version__"
            )
            continue
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") or (
            isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        ):
            continue
        if (here, ast.unparse(node)) not in PRIVATE_ACCESS_ALLOWED:
            problems.append(f"line {node.lineno}: uses {ast.unparse(node)}")
    assert problems == []


def test_the_code_map_names_every_module_in_layer_order() -> None:
    text = ARCHITECTURE.read_text("utf-8")
    start = text.index("\n## Code map\n")
    code_map = text[start : text.index("\n## ", start + 1)]
    items = re.findall(r"^\d+\. (.*?)(?=^\d+\. |\Z)", code_map, flags=re.M | re.S)
    assert len(items) == len(LAYERS)
    for item, layer in zip(items, LAYERS, strict=True):
        named = set(re.findall(r"`([a-z_]+)`", item))
        assert layer <= named, f"the code map's item for {sorted(layer)} misses {layer - named}"


def test_the_code_map_names_every_git_module_in_layer_order() -> None:
    text = ARCHITECTURE.read_text("utf-8")
    code_map = text[text.index("\n## Code map\n") :]
    item = re.search(r"^\d+\. \*\*`git`.*?(?=^\d+\. )", code_map, flags=re.M | re.S)
    assert item is not None, "the code map has no item for the git storage"
    layers = re.findall(r"^   [a-z]\. (.*?)(?=^   [a-z]\. |\Z)", item.group(0), flags=re.M | re.S)
    assert len(layers) == len(GIT_LAYERS) - 1  # __init__ aside
    for text_of_layer, layer in zip(layers, GIT_LAYERS, strict=False):
        named = set(re.findall(r"`([a-z_]+)`", text_of_layer))
        assert layer <= named, f"the code map's git layer {sorted(layer)} misses {layer - named}"


def test_the_design_contents_list_every_section() -> None:
    text = DESIGN.read_text("utf-8")
    contents = text[text.index("## Contents\n") : text.index("\n## ", text.index("## Contents"))]
    listed = re.findall(r"^\d+\. \[(.*?)\]\(#(.*?)\)", contents, flags=re.M)
    sections = [h for h in re.findall(r"^## (.*)$", text, flags=re.M) if h != "Contents"]
    assert [title for title, _ in listed] == sections
    for title, anchor in listed:
        assert anchor == re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
