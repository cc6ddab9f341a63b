"""`gitmem clone`, `remote`, `push`, `pull`, `sync` on the command line: output, exit codes."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem import MemoryStore, generate_key
from gitmem.cli import main
from gitmem.paths import parse


@pytest.fixture
def setup(tmp_path: Path, key: str) -> tuple[Path, Path, dict[str, str]]:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--bare", "-q", str(origin)], check=True)
    store = MemoryStore.init(tmp_path / "a.git", key)
    store.create(parse("/memories/notes.md"), "1\n2\n3\n")
    return tmp_path / "a.git", origin, {"GITMEM_KEY": key}


def run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_remote_push_clone_pull_sync(
    setup: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    a, origin, env = setup
    assert run(env, "--repo", str(a), "remote", "add", "origin", str(origin)) == (
        0,
        f"Added remote origin: {origin}\n",
        "",
    )
    code, out, _ = run(env, "--repo", str(a), "remote", "list", "--json")
    assert code == 0 and json.loads(out) == {"name": "origin", "url": str(origin)}
    code, out, _ = run(env, "--repo", str(a), "push")
    assert code == 0 and out.startswith("Pushed ")
    b = tmp_path / "b.git"
    code, out, _ = run(env, "clone", str(origin), str(b), "--json")
    body = json.loads(out)
    assert code == 0 and body["seq"] == 1 and body["url"] == str(origin)
    MemoryStore.open(a, env["GITMEM_KEY"]).str_replace(parse("/memories/notes.md"), "1\n", "one\n")
    MemoryStore.open(b, env["GITMEM_KEY"]).str_replace(
        parse("/memories/notes.md"), "3\n", "three\n"
    )
    code, out, _ = run(env, "--repo", str(a), "sync")
    assert (code, out.split()[0]) == (0, "Pushed")
    code, out, _ = run(env, "--repo", str(b), "sync", "--json")
    body = json.loads(out)
    assert code == 0 and body["action"] == "merged+pushed" and body["conflicts"] == []
    assert body["merge"]["command"] == "merge"
    code, out, _ = run(env, "--repo", str(a), "pull", "origin")
    assert code == 0 and out.startswith("Fast-forwarded to ")
    assert MemoryStore.open(a, env["GITMEM_KEY"]).files() == {
        "/memories/notes.md": "one\n2\nthree\n"
    }
    assert run(env, "--repo", str(a), "remote", "remove", "origin")[0] == 0
    assert run(env, "--repo", str(a), "remote", "list")[1] == ""


def test_conflict_lines_and_exit_codes(
    setup: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    a, origin, env = setup
    run(env, "--repo", str(a), "push", str(origin))
    b = tmp_path / "b.git"
    assert run(env, "clone", str(origin), str(b))[0] == 0
    MemoryStore.open(a, env["GITMEM_KEY"]).str_replace(
        parse("/memories/notes.md"), "2\n", "two (a)\n"
    )
    MemoryStore.open(b, env["GITMEM_KEY"]).str_replace(
        parse("/memories/notes.md"), "2\n", "two (b)\n"
    )
    # Not pulled yet: the push is refused (exit 11), as JSON on stderr with --json.
    assert run(env, "--repo", str(a), "push", str(origin))[0] == 0
    code, _, err = run(env, "--repo", str(b), "push", "--json")
    assert code == 11 and json.loads(err)["error"] == "PushRejected"
    code, out, _ = run(env, "--repo", str(b), "sync")
    assert code == 0
    assert "conflict: /memories/notes.md changed on both sides; the other version is at " in out
    # Unreachable (10), not a store (3), a different store (12), a wrong key on clone (4).
    assert run(env, "--repo", str(a), "pull", str(tmp_path / "none.git"))[0] == 10
    plain = tmp_path / "plain.git"
    subprocess.run(["git", "init", "--bare", "-q", str(plain)], check=True)
    blob = (
        subprocess.run(
            ["git", "--git-dir", str(plain), "hash-object", "-w", "--stdin"],
            input=b"x",
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    subprocess.run(["git", "--git-dir", str(plain), "update-ref", "refs/tags/x", blob], check=True)
    assert run(env, "--repo", str(a), "pull", str(plain))[0] == 3
    other = MemoryStore.init(tmp_path / "other.git", env["GITMEM_KEY"])
    other.create(parse("/memories/x.md"), "x\n")
    assert run(env, "--repo", str(a), "pull", str(other.path))[0] == 12
    code, _, err = run({"GITMEM_KEY": generate_key()}, "clone", str(origin), str(tmp_path / "c"))
    assert code == 4 and err.startswith("gitmem: error: ") and not (tmp_path / "c").exists()


def test_unknown_remote_removal_names_the_remote(setup: tuple[Path, Path, dict[str, str]]) -> None:
    a, _, env = setup
    assert run(env, "--repo", str(a), "remote", "remove", "nosuch") == (
        1,
        "",
        "gitmem: error: no remote named 'nosuch'\n",
    )


@pytest.mark.parametrize("where", ["none.git", "afile"])
def test_a_local_remote_where_there_is_no_repository_says_so(
    setup: tuple[Path, Path, dict[str, str]], tmp_path: Path, where: str
) -> None:
    # libgit2 reports a local path that does not exist as "unsupported URL protocol".
    a, _, env = setup
    (tmp_path / "afile").write_text("x")
    target = tmp_path / where
    for command in (["--repo", str(a), "push"], ["--repo", str(a), "pull"], ["clone"]):
        args = [*command, str(target)] + ([str(tmp_path / "c.git")] if command == ["clone"] else [])
        code, out, err = run(env, *args)
        assert (code, out) == (10, ""), args
        assert err == f"gitmem: error: cannot reach the remote {target}: no git repository there\n"
    assert not (tmp_path / "c.git").exists() and not (tmp_path / "none.git").exists()


def test_a_clone_into_the_path_of_a_deleted_store_makes_the_replica(
    setup: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    a, origin, env = setup
    assert run(env, "--repo", str(a), "push", str(origin))[0] == 0
    # This client once used another store at x.git (and at the empty directory y.git).
    x, y = tmp_path / "x.git", tmp_path / "y.git"
    for path in (x, y):
        assert run(env, "init", str(path))[0] == 0
        MemoryStore.open(path, env["GITMEM_KEY"]).create(parse("/memories/old.md"), "old\n")
        subprocess.run(["rm", "-rf", str(path)], check=True)
    y.mkdir()
    for path in (x, y):
        code, out, err = run(env, "clone", str(origin), str(path))
        assert (code, err) == (0, ""), err
        assert out.startswith(f"Cloned store {MemoryStore.open(a, env['GITMEM_KEY']).store_id} ")
        code, out, err = run(env, "--repo", str(path), "cat", "/memories/notes.md")
        assert (code, out, err) == (0, "1\n2\n3\n", "")


def test_a_cli_merge_is_labelled_with_the_merging_machine(
    setup: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    a, origin, env = setup
    assert run(env, "--repo", str(a), "push", str(origin))[0] == 0
    b = tmp_path / "b.git"
    assert run(env, "clone", str(origin), str(b))[0] == 0
    MemoryStore.open(a, env["GITMEM_KEY"]).create(parse("/memories/a.md"), "a\n")
    MemoryStore.open(b, env["GITMEM_KEY"]).create(parse("/memories/b.md"), "b\n")
    assert run(env, "--repo", str(a), "push", str(origin))[0] == 0
    host = socket.gethostname().split(".", 1)[0]
    code, _, err = run(env, "--repo", str(b), "pull", str(origin))
    assert (code, err) == (0, "")
    code, out, _ = run(env, "--repo", str(b), "log", "-n", "1", "--json")
    assert (json.loads(out)["session"], json.loads(out)["command"]) == (f"cli@{host}", "merge")
    # GITMEM_SESSION names it as it names every other change from the command line.
    MemoryStore.open(a, env["GITMEM_KEY"]).create(parse("/memories/a2.md"), "a\n")
    MemoryStore.open(b, env["GITMEM_KEY"]).create(parse("/memories/b2.md"), "b\n")
    assert run(env, "--repo", str(a), "push", str(origin))[0] == 0
    labelled = {**env, "GITMEM_SESSION": "desktop"}
    assert run(labelled, "--repo", str(b), "sync", str(origin))[0] == 0
    code, out, _ = run(env, "--repo", str(b), "log", "--first-parent", "--json")
    mine = [(json.loads(line)["session"], json.loads(line)["paths"]) for line in out.splitlines()]
    assert [paths for _, paths in mine[1:]] == [
        ["/memories/b2.md"],
        ["/memories/a.md"],
        ["/memories/b.md"],
        ["/memories/notes.md"],
    ]
    assert mine[0][0] == "desktop"
