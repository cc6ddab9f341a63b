"""Replicas syncing through real servers on 127.0.0.1: ``git daemon`` and smart HTTP.

Three replicas write concurrently (different files, different lines of one file, the same line,
delete against edit), then sync in several orders; all converge, nothing is lost, conflicts are
siblings and in the log, every replica verifies, and no object on the server holds plaintext.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from helpers_git_servers import all_object_bytes, bare_repo, git_daemon, git_http
from helpers_repo import published

from gitmem import MemoryStore, RollbackDetected
from gitmem.errors import RemoteError
from gitmem.paths import parse

CANARY = "canary-plaintext-7f3a"
Server = Callable[[Path], AbstractContextManager[str]]
SERVERS: dict[str, Server] = {"git-daemon": git_daemon, "smart-http": git_http}


@pytest.fixture(params=sorted(SERVERS))
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``(url of an empty store repository, its path on disk)`` behind a live server."""
    root = tmp_path / "served"
    root.mkdir()
    path = bare_repo(root, "memory.git")
    with SERVERS[request.param](root) as base:
        yield f"{base}/memory.git", path


def p(name: str) -> str:
    return f"/memories/{name}"


def test_three_replicas_converge(served: tuple[str, Path], tmp_path: Path, key: str) -> None:
    url, on_disk = served
    a = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "sa", session="a")
    lines = [f"line {i} {CANARY}\n" for i in range(12)]
    a.create(p("shared.md"), "".join(lines))
    a.create(p("doomed.md"), f"old {CANARY}\n")
    a.create(p("clash.md"), "same\n")
    a.add_remote("origin", url)
    a.push()
    b = MemoryStore.clone(url, tmp_path / "b.git", key, state_dir=tmp_path / "sb", session="b")
    c = MemoryStore.clone(url, tmp_path / "c.git", key, state_dir=tmp_path / "sc", session="c")

    # Concurrent, unsynced work on all three.
    a.create(p("a.md"), f"from a {CANARY}\n")
    b.create(p("b.md"), f"from b {CANARY}\n")
    c.create(p("dir/c.md"), f"from c {CANARY}\n")
    a.str_replace(p("shared.md"), lines[1], "line 1 edited by a\n")
    b.str_replace(p("shared.md"), lines[6], "line 6 edited by b\n")
    c.str_replace(p("shared.md"), lines[10], "line 10 edited by c\n")
    a.str_replace(p("clash.md"), "same\n", "a says\n")
    b.str_replace(p("clash.md"), "same\n", "b says\n")
    a.delete(p("doomed.md"))
    c.str_replace(p("doomed.md"), "old", "kept by c")

    for store in (b, c, a, b, c, a):
        store.sync()
    files = a.files()
    assert files == b.files() == c.files()
    assert a.head() == b.head() == c.head()
    # Nothing lost: every file and every edit is there.
    shared = files[p("shared.md")]
    for edit in ("line 1 edited by a", "line 6 edited by b", "line 10 edited by c"):
        assert edit in shared
    assert files[p("a.md")].startswith("from a") and files[p("dir/c.md")].startswith("from c")
    assert files[p("b.md")].startswith("from b")
    assert files[p("doomed.md")] == f"kept by c {CANARY}\n"
    clash = sorted(v for k, v in files.items() if k.startswith(p("clash")))
    assert clash == ["a says\n", "b says\n"]
    siblings = [k for k in files if k.startswith(p("clash.conflict-"))]
    assert len(siblings) == 1 and siblings[0].endswith(".md")
    # The conflict is in the log, and in what Claude sees.
    merges = [op for op in a.log() if op.command == "merge"]
    recorded = [c for op in merges for c in op.record.detail["conflicts"]]
    assert [(c["path"], c["sibling"]) for c in recorded] == [(p("clash.md"), siblings[0])]
    kept = [k for op in merges for k in op.record.detail["kept"]]
    assert {"path": p("doomed.md"), "kind": "edit-kept"} in kept
    listed = [e.relative for e in a.listing(parse("/memories"))]
    assert siblings[0].rsplit("/", 1)[1] in listed
    for store in (a, b, c):
        assert store.verify().ok
    # The server holds only ciphertext.
    for blob in all_object_bytes(on_disk):
        for needle in (CANARY, "edited by", "a says", "clash", "doomed", "shared"):
            assert needle.encode() not in blob


def first_replica(url: str, tmp_path: Path, key: str, text: str) -> MemoryStore:
    """A store with one file, pushed to ``url`` as its ``origin``."""
    a = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "sa")
    a.create(p("n.md"), text)
    a.add_remote("origin", url)
    a.push()
    return a


def test_either_replica_merging_gives_the_same_tree(
    served: tuple[str, Path], tmp_path: Path, key: str
) -> None:
    """The merge does not depend on which side merges: X merging Y and Y merging X agree."""
    url, _ = served
    first_replica(url, tmp_path, key, "x\ny\nz\n")
    x = MemoryStore.clone(url, tmp_path / "x.git", key, state_dir=tmp_path / "sx")
    y = MemoryStore.clone(url, tmp_path / "y.git", key, state_dir=tmp_path / "sy")
    x.str_replace(p("n.md"), "x\n", "one\n")
    x.create(p("only-x.md"), "x\n")
    y.str_replace(p("n.md"), "x\n", "two\n")
    y.str_replace(p("n.md"), "z\n", "zed\n")
    # Copies of both, so that each side can merge the other from the same starting point.
    x2 = tmp_path / "x2.git"
    y2 = tmp_path / "y2.git"
    # Published first: a store used as a remote is read by libgit2's transport, which knows
    # nothing of the redo log.
    shutil.copytree(published(x.path), x2)
    shutil.copytree(published(y.path), y2)
    x.pull(str(y2))
    y_copy = MemoryStore.open(y2, key, state_dir=tmp_path / "sy2")
    y_copy.pull(str(x2))
    x_op, y_op = x.head_operation(), y_copy.head_operation()
    assert x_op is not None and y_op is not None
    assert x_op.commit != y_op.commit and x_op.tree == y_op.tree
    assert x.files() == y_copy.files()
    assert len(x.files()) == 3  # n.md, its conflict sibling, only-x.md


def test_rewound_server_branch_is_refused(
    served: tuple[str, Path], tmp_path: Path, key: str
) -> None:
    url, on_disk = served
    a = first_replica(url, tmp_path, key, "1\n")
    old = subprocess.run(
        ["git", "--git-dir", str(on_disk), "rev-parse", "main"], capture_output=True, text=True
    ).stdout.strip()
    a.create(p("m.md"), "2\n")
    a.push()
    subprocess.run(
        ["git", "--git-dir", str(on_disk), "update-ref", "refs/heads/main", old], check=True
    )
    head = a.head()
    with pytest.raises(RollbackDetected):
        a.pull()
    assert a.head() == head


def test_https_token_from_the_environment(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    bare_repo(root, "m.git")
    a = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "sa")
    a.create(p("n.md"), "1\n")
    with git_http(root, token="s3cret-token") as base:
        url = f"{base}/m.git"
        with pytest.raises(RemoteError):
            a.push(url)
        monkeypatch.setenv("GITMEM_HTTPS_TOKEN", "s3cret-token")
        assert a.push(url).action == "pushed"
        b = MemoryStore.clone(url, tmp_path / "b.git", key, state_dir=tmp_path / "sb")
        assert b.files() == a.files()
    # The token is in no file of either replica.
    for repo in (a.path, b.path):
        for file in repo.rglob("*"):
            if file.is_file():
                assert b"s3cret-token" not in file.read_bytes()


@pytest.mark.slow
def test_random_concurrent_work_converges_over_many_rounds(tmp_path: Path, key: str) -> None:
    """Long variant: three replicas, eight rounds of random edits and random sync orders."""
    import random

    rng = random.Random(9)
    root = tmp_path / "served"
    root.mkdir()
    bare_repo(root, "m.git")
    with git_daemon(root) as base:
        url = f"{base}/m.git"
        names = [f"f{i}.md" for i in range(6)]
        a = first_replica(url, tmp_path, key, "".join(f"{i}\n" for i in range(30)))
        stores = [a] + [
            MemoryStore.clone(url, tmp_path / f"r{i}.git", key, state_dir=tmp_path / f"s{i}")
            for i in range(2)
        ]
        written: set[str] = set()
        for round_number in range(8):
            for number, store in enumerate(stores):
                for _ in range(rng.randint(1, 4)):
                    token = f"r{round_number}-s{number}-{rng.randrange(10**6)}"
                    choice = rng.random()
                    text = store.read_text(p("n.md"))
                    lines = text.splitlines(keepends=True)
                    if choice < 0.4 and lines:
                        at = rng.randrange(len(lines))
                        store.str_replace(p("n.md"), text, text.replace(lines[at], token + "\n", 1))
                    elif choice < 0.8:
                        store.create(p(rng.choice(names)), token + "\n", overwrite=True)
                    else:
                        existing = [n for n in names if store.kind(p(n)) is not None]
                        if existing:
                            store.delete(p(rng.choice(existing)))
                            continue
                        store.create(p(rng.choice(names)), token + "\n", overwrite=True)
                    written.add(token)
            order = [*stores]
            rng.shuffle(order)
            for store in order + order:
                store.sync()
            files = [s.files() for s in stores]
            assert files[0] == files[1] == files[2]
            for store in stores:
                assert store.verify().ok
