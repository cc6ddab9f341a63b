"""One vocabulary on the command line: options wherever a user puts them, revisions positional
(``--rev`` still works), ``--until`` for time bounds, ``--`` before paths; filters that match
nothing are never silent; errors in the command line's own words."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner
from test_cli import Gitmem, _run
from test_history import built_once

from gitmem import GitMemoryTool, MemoryStore, generate_key
from gitmem.cli import main
from gitmem.demo.progress_log import ToolCall, _describe
from gitmem.errors import KeyMissing, NoStore
from gitmem.keysource import config_dir, user_key_path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return built_once(tmp_path_factory)


@pytest.fixture
def gm(built: tuple[Path, str], tmp_path: Path, utc: None) -> Gitmem:
    target = tmp_path / "store.git"
    shutil.copytree(built[0], target)
    return Gitmem(target, built[1])


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


# -- options wherever a user puts them ------------------------------------------------------


def test_global_options_work_before_or_after_the_command(gm: Gitmem, tmp_path: Path) -> None:
    env = {"GITMEM_KEY": gm.key}
    before = invoke("--repo", str(gm.repo), "log", env=env)
    assert before[0] == 0 and len(before[1].splitlines()) == 7
    assert invoke("log", "--repo", str(gm.repo), env=env) == before
    assert (
        invoke("log", "--repo", str(gm.repo), "-n", "2", env=env)[1].splitlines()
        == (before[1].splitlines()[:2])
    )
    # The command's --repo overrides $GITMEM_REPO (and the group's --repo).
    elsewhere = {**env, "GITMEM_REPO": str(tmp_path / "none")}
    assert invoke("log", "--repo", str(gm.repo), env=elsewhere) == before
    assert invoke("--repo", str(tmp_path / "none"), "log", "--repo", str(gm.repo), env=env) == (
        before
    )
    # --json before the command is --json after it, for output and for errors.
    assert invoke("--json", "--repo", str(gm.repo), "log", env=env) == invoke(
        "--repo", str(gm.repo), "log", "--json", env=env
    )
    code, out, err = invoke("--json", "--repo", str(gm.repo), "show", "nosuch", env=env)
    assert (code, out, json.loads(err)["error"]) == (2, "", "UsageError")
    # --color and --no-pager after the command.
    coloured = invoke("log", "-n", "1", "--repo", str(gm.repo), "--color", "always", env=env)
    assert "\x1b[33m" in coloured[1]
    assert invoke("log", "--no-pager", "--repo", str(gm.repo), env=env) == before


def test_key_file_option_before_or_after_the_command(gm: Gitmem, tmp_path: Path) -> None:
    key_file = tmp_path / "store.key"
    key_file.write_text(gm.key + "\n")
    key_file.chmod(0o600)
    expected = invoke("--repo", str(gm.repo), "log", env={"GITMEM_KEY": gm.key})
    assert invoke("--key-file", str(key_file), "--repo", str(gm.repo), "log") == expected
    assert invoke("log", "--repo", str(gm.repo), "--key-file", str(key_file)) == expected
    # --key-file comes before GITMEM_KEY.
    other = {"GITMEM_KEY": generate_key()}
    assert invoke("log", "--repo", str(gm.repo), "--key-file", str(key_file), env=other) == (
        expected
    )
    missing = invoke("log", "--repo", str(gm.repo), "--key-file", str(tmp_path / "nope"))
    assert missing == (4, "", f"gitmem: error: the key file {tmp_path / 'nope'} does not exist\n")


def test_init_with_key_file_saves_or_uses_it(tmp_path: Path) -> None:
    key_file = tmp_path / "keys" / "memory.key"
    code, out, _ = invoke("init", str(tmp_path / "a.git"), "--key-file", str(key_file))
    assert code == 0
    assert f"Key saved to {key_file} (owner-only).\n" in out
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert not (tmp_path / "home").exists()  # no per-user key file besides it
    # The same key opens a second store made with it, and both open with --key-file only.
    code, out, _ = invoke("init", str(tmp_path / "b.git"), "--key-file", str(key_file))
    assert (code, f"Key: the one in {key_file}\n" in out) == (0, True)
    for name in ("a.git", "b.git"):
        assert invoke("--repo", str(tmp_path / name), "--key-file", str(key_file), "log")[0] == 0
    both = invoke("init", str(tmp_path / "c.git"), "--key-file", str(key_file), "--print-key")
    assert both == (2, "", "gitmem: error: give --print-key or --key-file, not both\n")


# -- one vocabulary -------------------------------------------------------------------------


def test_revisions_are_positional_everywhere_and_rev_still_works(
    gm: Gitmem, tmp_path: Path
) -> None:
    c = gm.ids()
    old = c[1][:10]
    for command, target in [
        ("cat", "/memories/notes.md"),
        ("blame", "/memories/notes.md"),
        ("view", "/memories/notes.md"),
    ]:
        positional = gm.ok(command, old, target)
        assert positional == gm.ok(command, "--rev", old, target)
        assert positional == gm.ok(command, target, "--rev", old)
        assert positional == gm.ok(command, old, target, "--rev", old)  # the same one twice
    assert gm.ok("cat", old, "/memories/notes.md") == "one\nTWO\nthree\n"
    assert gm.ok("cat", c[0][:10], "/memories/notes.md") == "one\ntwo\nthree\n"
    assert gm.ok("log", old) == gm.ok("log", "--rev", old)
    assert gm.ok("log", old).splitlines()[0].startswith(old)
    assert gm.ok("show", old) == gm.ok("show", "--rev", old)
    assert gm.ok("show", old).startswith(f"operation {c[1]}\n")
    assert json.loads(gm.ok("export", old, str(tmp_path / "a"), "--json"))["commit"] == c[1]
    assert json.loads(gm.ok("export", "--rev", old, str(tmp_path / "b"), "--json")) == {
        "commit": c[1],
        "dir": str(tmp_path / "b"),
        "files": 1,
        "directories": 0,
    }
    preview = gm.ok("restore", old, "--dry-run")
    assert preview == gm.ok("restore", "--rev", old, "--dry-run")
    for args, message in [
        (("cat", "HEAD", "/memories/notes.md", "--rev", "HEAD~1"), "two revisions given"),
        (("log", "HEAD", "--rev", "HEAD~1"), "two revisions given (HEAD, HEAD~1): give one"),
        (("cat",), "give the memory path"),
        (("cat", "HEAD", "HEAD~1", "/memories/notes.md"), "give [REV] MEMORY PATH"),
        (("export",), "give the directory"),
    ]:
        result = gm(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr, (args, result.stderr)


def test_until_is_the_time_bound_everywhere_and_before_still_works(gm: Gitmem) -> None:
    at = "2025-06-01T10:01:30Z"  # after alice's two operations, before bob's first
    c = gm.ids()
    expected = gm.ok("restore", c[1][:10], "--dry-run")
    assert gm.ok("restore", "--until", at, "--dry-run") == expected
    assert gm.ok("restore", "--before", at, "--dry-run") == expected
    assert [line[:10] for line in gm.ok("log", "--until", at).splitlines()] == [
        c[1][:10],
        c[0][:10],
    ]
    both = gm("restore", "--until", at, "--session", "bob")
    assert both.exit_code == 2
    assert "give exactly one of REV, --session NAME or --until TIME" in both.stderr


def test_diff_takes_options_after_the_double_dash(gm: Gitmem) -> None:
    stat = gm.ok("diff", "HEAD~3", "--stat", "/memories/dir/n.md")
    assert stat == (" /memories/dir/n.md | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n")
    assert gm.ok("diff", "HEAD~3", "--", "/memories/dir/n.md", "--stat") == stat
    assert gm.ok("diff", "HEAD~3", "HEAD", "--", "/memories/dir/n.md", "--stat") == stat
    assert gm.ok("log", "--", "/memories/other.md", "-n", "1") == gm.ok("log", "-n", "1")
    # After `--` everything positional is a memory path.
    after = gm("diff", "HEAD~3", "--", "HEAD~1")
    assert after.exit_code == 2
    assert "The path HEAD~1 is not allowed: every memory path must start with" in after.stderr


def test_a_memory_path_without_its_slash_is_not_called_an_unknown_revision(gm: Gitmem) -> None:
    # `gitmem log progress.md` said only "unknown revision 'progress.md'".
    for args in (["log", "notes.md"], ["log", "memories/notes.md"], ["restore", "dir/n.md"]):
        result = gm(*args)
        assert result.exit_code == 2, args
        word = args[-1]
        assert result.stderr == (
            f"gitmem: error: {word!r} is not a revision; memory paths start with /memories/ "
            f"(/memories/{word.removeprefix('memories/')}?)\n"
        )
    # Revisions that may hold a '.' or '/' are still revisions.
    assert gm("log", "session:a/b.c").stderr == (
        "gitmem: error: unknown revision 'session:a/b.c': no operation of session 'a/b.c'\n"
    )


def test_an_empty_revision_is_refused_not_taken_for_head(gm: Gitmem) -> None:
    # `gitmem restore "$REV"` with REV unset recorded a restore of HEAD (a commit that changes
    # nothing), and `gitmem diff ""` said "no changes".
    before = gm.ids()
    for args in (
        ["restore", ""],
        ["show", ""],
        ["diff", ""],
        ["log", ""],
        ["cat", "", "/memories/dir/n.md"],
    ):
        result = gm(*args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith("gitmem: error: the revision is empty"), result.stderr
    assert gm.ids() == before


# -- filters that match nothing -------------------------------------------------------------


def test_unknown_session_or_command_is_an_error_like_restore(gm: Gitmem) -> None:
    restore = gm("restore", "--session", "nosuch")
    log = gm("log", "--session", "nosuch")
    assert restore.exit_code == log.exit_code == 2
    assert log.stdout == ""
    assert log.stderr == "gitmem: error: no operation of session 'nosuch'\n"
    bogus = gm("log", "--command", "bogus")
    assert (bogus.exit_code, bogus.stdout) == (2, "")
    assert bogus.stderr == (
        "gitmem: error: unknown command 'bogus': one of create, str_replace, insert, delete, "
        "rename, restore, import, expire, keys, merge, redact\n"
    )
    as_json = gm("log", "--session", "nosuch", "--json")
    assert json.loads(as_json.stderr)["message"] == "no operation of session 'nosuch'"


def test_an_empty_result_says_so_on_stderr(gm: Gitmem, tmp_path: Path) -> None:
    # A known session and command, but nothing at once: not an error, and not silent.
    empty = gm("log", "--session", "alice", "--command", "delete")
    assert (empty.exit_code, empty.stdout, empty.stderr) == (0, "", "gitmem: no operations match\n")
    later = gm("log", "--since", "2099-01-01")
    assert (later.exit_code, later.stdout, later.stderr) == (0, "", "gitmem: no operations match\n")
    # With --json the empty output is the answer; stderr stays for errors.
    quiet = gm("log", "--since", "2099-01-01", "--json")
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (0, "", "")
    # The session is known if any operation has it, whatever the other filters say.
    assert gm("log", "--session", "carol", "/memories/notes.md").stderr == (
        "gitmem: no operations match\n"
    )
    CliRunner().invoke(main, ["init", str(tmp_path / "new.git")])
    for command in ("log", "sessions"):
        fresh = invoke("--repo", str(tmp_path / "new.git"), command)
        assert fresh == (0, "", "gitmem: the store has no history\n")


# -- errors in the command line's words -----------------------------------------------------


def test_missing_key_names_every_source_tried(gm: Gitmem) -> None:
    store_id = gm.store().store_id
    per_user = user_key_path(store_id)
    code, out, err = invoke("--repo", str(gm.repo), "log")
    assert (code, out) == (4, "")
    assert err == (
        f"gitmem: error: no key for {gm.repo}: GITMEM_KEY and GITMEM_KEY_FILE are not set, and "
        f"the per-user key file {per_user} does not exist. Give --key-file FILE, set GITMEM_KEY "
        f"to the key text or GITMEM_KEY_FILE to a file holding it, or save the key (mode 0600) "
        f"as {per_user}\n"
    )
    assert "key=" not in err
    # The library's own wording names the same file; neither holds key material.

    with pytest.raises(KeyMissing) as info:
        MemoryStore.open(gm.repo)
    assert str(per_user) in str(info.value) and gm.key not in str(info.value)
    assert info.value.key_file == per_user


def test_a_mistyped_store_path_says_no_store_is_there(gm: Gitmem, tmp_path: Path) -> None:
    # The per-user key file of the real store exists; the typo names a path with nothing there.
    typo = tmp_path / "stroe.git"
    with pytest.raises(KeyMissing) as info:
        GitMemoryTool(typo)
    assert str(info.value).startswith(
        f"no gitmem store at {typo}, and no key to create one with: no key given: pass key=..."
    )
    assert not typo.exists()


def test_json_error_keys_are_in_the_documented_order(gm: Gitmem) -> None:
    result = gm("show", "nosuch", "--json")
    assert result.stderr == (
        '{"error": "UsageError", "exit_code": 2, "message": "unknown revision \'nosuch\'"}\n'
    )
    docs = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    assert '{"error": "UsageError", "exit_code": 2, "message": ' in docs


# -- plurals --------------------------------------------------------------------------------


def test_counts_are_worded_in_the_singular_and_plural() -> None:
    def create(text: str) -> str:
        call = ToolCall(
            {"command": "create", "path": "/memories/a.md", "file_text": text}, "", False
        )
        return _describe(call)

    assert create("one\n") == "create /memories/a.md (1 line)"
    assert create("one\ntwo\n") == "create /memories/a.md (2 lines)"


# -- the installed command ------------------------------------------------------------------


def test_installed_command_takes_options_after_the_command(gm: Gitmem) -> None:
    env = {**os.environ, "TZ": "UTC"}
    env.pop("GITMEM_KEY", None)
    key_file = gm.repo.parent / "k"
    key_file.write_text(gm.key)
    key_file.chmod(0o600)
    run = _run("log", "-n", "1", "--repo", str(gm.repo), "--key-file", str(key_file), env=env)
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout.endswith("  carol  delete       /memories/other.md\n")
    stat = _run(
        "diff", "HEAD~3", "--", "/memories/dir/n.md", "--stat", "--repo", str(gm.repo),
        "--key-file", str(key_file), env=env,
    )  # fmt: skip
    assert (stat.returncode, stat.stderr) == (0, "")
    assert stat.stdout.endswith(" 1 file changed, 1 insertion(+), 1 deletion(-)\n")
    nosuch = _run("log", "--session", "nosuch", "--repo", str(gm.repo), env={**env,
                  "GITMEM_KEY": gm.key})  # fmt: skip
    assert (nosuch.returncode, nosuch.stdout) == (2, "")


# -- init adopts what GitMemoryTool adopts --------------------------------------------------


def _empty_bare(path: Path) -> Path:
    pygit2.init_repository(str(path), bare=True)
    return path


def _bare_with_history(path: Path) -> Path:
    repo = pygit2.init_repository(str(path), bare=True)
    signature = pygit2.Signature("a", "a@example.com")
    tree = repo.TreeBuilder().write()
    repo.create_commit("refs/heads/master", signature, signature, "m", tree, [])
    return path


def _non_empty_dir(path: Path) -> Path:
    path.mkdir()
    (path / "keep.txt").write_text("keep me")
    return path


@pytest.mark.parametrize(
    ("make", "adopted"),
    [
        (lambda p: p, True),  # nothing there
        (lambda p: (p.mkdir(), p)[1], True),  # an empty directory
        (_empty_bare, True),
        (_bare_with_history, False),
        (_non_empty_dir, False),
    ],
    ids=["missing", "empty-dir", "empty-bare-repo", "bare-repo-with-history", "non-empty-dir"],
)
def test_init_and_the_tool_adopt_the_same_places(
    tmp_path: Path, make: Callable[[Path], Path], adopted: bool
) -> None:
    by_cli = make(tmp_path / "cli.git")
    by_tool = make(tmp_path / "tool.git")
    code, out, err = invoke("init", str(by_cli))
    key = generate_key()
    if adopted:
        assert (code, err) == (0, ""), out
        assert out.startswith(f"Created an encrypted gitmem store at {by_cli}\n")
        assert invoke("--repo", str(by_cli), "verify")[0] == 0
        GitMemoryTool(by_tool, key=key).call({"command": "view", "path": "/memories"})
        assert MemoryStore.open(by_tool, key).verify().ok
        return
    assert (code, out) == (2, "")
    assert err == (
        f"gitmem: error: {by_cli} already exists and is neither empty nor an empty git repository\n"
    )
    with pytest.raises(NoStore):
        GitMemoryTool(by_tool, key=key)
    if (by_cli / "keep.txt").exists():
        assert (by_cli / "keep.txt").read_text() == "keep me"


def test_init_refuses_an_existing_store(tmp_path: Path) -> None:
    assert invoke("init", str(tmp_path / "s.git"))[0] == 0
    code, _, err = invoke("init", str(tmp_path / "s.git"))
    assert code == 2 and "already exists and is neither empty" in err


def test_two_inits_at_once_the_loser_is_told_the_store_exists_and_keeps_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both found the path vacant; the second one's store creation found the first one's store,
    # which its new key cannot open. It said "the key does not open the store" (exit 4).
    assert invoke("init", str(tmp_path / "s.git"))[0] == 0
    keys = sorted((config_dir() / "keys").iterdir())
    monkeypatch.setattr(MemoryStore, "vacant", staticmethod(lambda path: True))
    code, out, err = invoke("init", str(tmp_path / "s.git"))
    assert (code, out) == (2, "")
    assert err == (
        f"gitmem: error: {tmp_path / 's.git'} already holds a gitmem store, which this key does "
        "not open (another process may have just created it); nothing was written\n"
    )
    assert sorted((config_dir() / "keys").iterdir()) == keys


def test_an_export_beside_the_store_writes_no_memory_path_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A memory file named like the store's branch, exported with --force into the directory
    # holding the store, overwrote the branch ref: the store was broken.
    monkeypatch.chdir(tmp_path)
    key = generate_key()
    store = MemoryStore.init("m.git", key)
    store.create("/memories/notes.md", "fine\n")
    store.create("/memories/m.git/refs/heads/main", "0" * 40 + "\n")
    store.close()
    before = (tmp_path / "m.git" / "refs" / "heads" / "main").read_bytes()
    code, _, err = invoke("--repo", "m.git", "export", ".", "--force", env={"GITMEM_KEY": key})
    assert (code, err) == (
        2,
        "gitmem: error: cannot export into .: /memories/m.git would be written inside the "
        "store's repository m.git; export somewhere else. Nothing was written.\n",
    )
    assert (tmp_path / "m.git" / "refs" / "heads" / "main").read_bytes() == before
    assert not (tmp_path / "notes.md").exists()
    MemoryStore.open("m.git", key).delete("/memories/m.git")
    assert invoke("--repo", "m.git", "export", ".", "--force", env={"GITMEM_KEY": key})[0] == 0
    assert (tmp_path / "notes.md").read_text() == "fine\n"


def test_neither_the_key_nor_an_export_is_written_inside_the_store(tmp_path: Path) -> None:
    # `init S --key-file S/k.key` saved the key in the repository, and `export HEAD S/plain`
    # wrote the plaintext there: whoever copies or backs up the store would get both.
    store = tmp_path / "s.git"
    code, _, err = invoke("init", str(store), "--key-file", str(store / "k.key"))
    assert (code, err) == (
        2,
        f"gitmem: error: the key file {store / 'k.key'} would be inside the store {store}: keep "
        "it outside the repository (whoever has both reads everything)\n",
    )
    assert not store.exists()
    assert invoke("init", str(store), "--key-file", str(tmp_path / "k.key"))[0] == 0
    link = tmp_path / "link"
    link.symlink_to(store)
    for target in (store / "plain", store, link / "objects" / "x"):
        code, _, err = invoke(
            "--repo", str(store), "--key-file", str(tmp_path / "k.key"), "export", str(target)
        )
        assert code == 2, target
        assert "is inside the store's repository" in err
    assert not (store / "plain").exists() and not (store / "objects" / "x").exists()


@pytest.mark.parametrize("home", ["relative", ""])
def test_a_home_directory_that_is_not_absolute_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: str
) -> None:
    # The key was saved under a path relative to the working directory (or under /.config for
    # an empty HOME), where no run from another directory would look for it.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.delenv("XDG_STATE_HOME")
    code, out, err = invoke("init", "s.git", env={"HOME": home})
    assert (code, out) == (2, "")
    assert err == (
        f"gitmem: error: the home directory {home!r} is not an absolute path: set HOME (or "
        "XDG_CONFIG_HOME) to one\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_relative_xdg_directory_is_ignored_as_the_spec_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"XDG_CONFIG_HOME": "cfg", "XDG_STATE_HOME": "state"}
    assert invoke("init", "s.git", env=env)[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.git"]
    assert len(list((Path(os.environ["HOME"]) / ".config" / "gitmem" / "keys").iterdir())) == 1


@pytest.mark.parametrize("variable", ["GITMEM_CONFIG_DIR", "GITMEM_STATE_DIR"])
def test_a_relative_gitmem_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # GITMEM_CONFIG_DIR=rel saved the new key under ./rel/keys, which no run from another
    # directory finds; GITMEM_STATE_DIR=rel kept the high-water marks there.
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke("init", "s.git", env={variable: "rel"})
    assert (code, out) == (2, "")
    assert err == (
        f"gitmem: error: {variable} is 'rel', which is not an absolute path: what gitmem keeps "
        "there would not be found from another working directory; set it to an absolute path\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# -- a misspelled memory path ---------------------------------------------------------------


def test_a_misspelled_path_names_the_file_it_resembles(gm: Gitmem) -> None:
    # The head holds /memories/dir/n.md; HEAD~5 still held /memories/notes.md.
    cat = gm("cat", "/memories/dir/m.md")
    assert (cat.exit_code, cat.stdout) == (1, "")
    assert cat.stderr == (
        "gitmem: error: /memories/dir/m.md does not exist (did you mean /memories/dir/n.md?)\n"
    )
    old = gm("cat", "HEAD~5", "/memories/note.md")
    assert old.stderr == (
        "gitmem: error: /memories/note.md does not exist at HEAD~5 "
        "(did you mean /memories/notes.md?)\n"
    )
    blame = gm("blame", "/memories/dir/nn.md")
    assert (blame.exit_code, blame.stderr) == (
        1,
        "gitmem: error: /memories/dir/nn.md does not exist (did you mean /memories/dir/n.md?)\n",
    )
    log = gm("log", "/memories/dir/m.md")
    assert (log.exit_code, log.stdout, log.stderr) == (
        0,
        "",
        "gitmem: no operations match (did you mean /memories/dir/n.md?)\n",
    )
    # Nothing alike: no guess.
    far = gm("cat", "/memories/zzzzzz.txt")
    assert far.stderr == "gitmem: error: /memories/zzzzzz.txt does not exist\n"


def test_log_help_lists_every_command_a_record_can_name() -> None:
    code, out, _ = invoke("log", "--help")
    assert code == 0
    folded = " ".join(out.split())
    assert (
        "(create, str_replace, insert, delete, rename, restore, import, expire, keys, merge, "
        "redact)" in (folded)
    )
