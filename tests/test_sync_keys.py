"""Key changes across replicas: a pull adopts a rotation or new slots through the replica's own
slot, a removed holder learns nothing new, and diverged keys merge or are refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers_keys import append_with_epoch_zero

from gitmem import MemoryStore, WrongKey
from gitmem.cli import main
from gitmem.crypto import KdfParams
from gitmem.editor import TreeEditor
from gitmem.errors import IntegrityError, KeysDiverged
from gitmem.git.refs import BRANCH, META_REF
from gitmem.git.repo import GitRepo
from gitmem.operation import Operation
from gitmem.paths import parse
from gitmem.store import Change

FAST = KdfParams(64, 1, 1)  # cheap Argon2id for tests


def write(store: MemoryStore, name: str, text: str) -> None:
    store.create(parse(f"/memories/{name}"), text, overwrite=True)


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    path = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--bare", "-q", str(path)], check=True)
    return path


@pytest.fixture
def first(tmp_path: Path, key: str, origin: Path) -> MemoryStore:
    store = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state-a")
    write(store, "notes.md", "before\n")
    store.add_key(passphrase="bob's passphrase", label="bob", kdf=FAST)
    store.add_remote("origin", str(origin))
    store.push()
    return store


def clone(origin: Path, tmp_path: Path, key: str, name: str) -> MemoryStore:
    return MemoryStore.clone(
        str(origin), tmp_path / f"{name}.git", key, state_dir=tmp_path / f"state-{name}"
    )


def refs(store: MemoryStore) -> tuple[str | None, str | None]:
    return store.repo.ref(BRANCH), store.repo.ref(META_REF)


@pytest.mark.parametrize("how", ["pull", "sync"])
def test_rotation_reaches_a_replica(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str, how: str
) -> None:
    second = clone(origin, tmp_path, key, "b")
    assert first.rotate_keys() == 1
    write(first, "after.md", "sealed in epoch 1\n")
    first.push()
    getattr(second, how)()
    assert second.read_text(parse("/memories/after.md")) == "sealed in epoch 1\n"
    assert second.repo.ref(META_REF) == first.repo.ref(META_REF)
    write(second, "from-b.md", "b\n")
    head = second.head_operation()
    assert head is not None and head.epoch == 1
    second.sync()
    first.pull()
    assert first.read_text(parse("/memories/from-b.md")) == "b\n"
    # A fresh open of the replica reads its own (now current) metadata.
    reopened = MemoryStore.open(second.path, key, state_dir=tmp_path / "state-b")
    assert reopened.files() == first.files()
    assert first.verify().ok and second.verify().ok and reopened.verify().ok


def test_rotation_then_divergent_writes_merge_in_the_new_epoch(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    second = clone(origin, tmp_path, key, "b")
    first.rotate_keys()
    write(first, "a.md", "a\n")
    first.push()
    write(second, "b.md", "b\n")  # still epoch 0: it has not seen the rotation
    result = second.sync()
    assert result.action == "merged+pushed"
    merge = second.head_operation()
    assert merge is not None and merge.command == "merge" and merge.epoch == 1
    first.pull()
    assert first.files() == second.files()
    assert first.verify().ok and second.verify().ok


def test_removed_holder_cannot_pull_what_follows(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    clone(origin, tmp_path, key, "b")
    bob = MemoryStore.open(
        tmp_path / "b.git", passphrase="bob's passphrase", state_dir=tmp_path / "state-b"
    )
    bob_slot = bob.keyring_slot()
    assert bob_slot is not None
    first.remove_key(bob_slot)
    write(first, "secret.md", "after bob left\n")
    first.push()
    before = refs(bob)
    with pytest.raises(WrongKey, match="removed"):
        bob.pull()
    with pytest.raises(WrongKey, match="removed"):
        bob.sync()
    assert refs(bob) == before
    assert "/memories/secret.md" not in bob.files()
    # The refused pull kept none of what it fetched; fetched on purpose, the new commit's
    # objects are there, but bob's keys do not open them.
    new_head = first.head()
    assert new_head is not None and not bob.repo.has(new_head)
    bob.repo.fetch(str(origin), [BRANCH])
    assert bob.repo.has(new_head)
    with pytest.raises(IntegrityError):
        bob.read_operation(new_head)


def test_a_passphrase_changed_on_the_remote_opens_nothing_new_on_a_replica(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    clone(origin, tmp_path, key, "b")
    bob = MemoryStore.open(
        tmp_path / "b.git", passphrase="bob's passphrase", state_dir=tmp_path / "state-b"
    )
    bob_slot = bob.keyring_slot()
    assert bob_slot is not None
    assert first.change_passphrase(bob_slot, "bob's brand new passphrase", kdf=FAST) == 1
    write(first, "secret.md", "after the change\n")
    first.push()
    before = refs(bob)
    with pytest.raises(WrongKey, match=r"was given a new passphrase .* clone the store again"):
        bob.pull()
    assert refs(bob) == before and "/memories/secret.md" not in bob.files()
    # What the message says works: a new clone opens with the new passphrase only.
    copy = tmp_path / "c.git"
    subprocess.run(["git", "clone", "--bare", "-q", str(origin), str(copy)], check=True)
    with pytest.raises(WrongKey):
        MemoryStore.open(copy, passphrase="bob's passphrase", check_rollback=False)
    again = MemoryStore.open(copy, passphrase="bob's brand new passphrase", check_rollback=False)
    assert again.read_text(parse("/memories/secret.md")) == "after the change\n"


def test_slots_added_on_both_sides_are_united(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    second = clone(origin, tmp_path, key, "b")
    carol = first.add_key(passphrase="carol's passphrase", label="carol", kdf=FAST)
    dave = second.add_key(passphrase="dave's passphrase", label="dave", kdf=FAST)
    write(first, "a.md", "a\n")
    write(second, "b.md", "b\n")
    first.sync()
    assert second.sync().action == "merged+pushed"
    assert first.sync().action == "fast-forward"
    assert first.repo.ref(META_REF) == second.repo.ref(META_REF)
    slots = {slot["slot"] for slot in first.key_slots()}
    assert {carol, dave} <= slots and len(slots) == 4
    for store in (first, second):
        for passphrase in ("carol's passphrase", "dave's passphrase"):
            opened = MemoryStore.open(store.path, passphrase=passphrase, check_rollback=False)
            assert opened.files() == first.files()
        assert store.verify().ok


def divergence(first: MemoryStore, second: MemoryStore, kind: str) -> None:
    if kind == "both rotated":
        first.rotate_keys()
        second.rotate_keys()
    else:
        first.rotate_keys()
        second.add_key(passphrase="dave's passphrase", label="dave", kdf=FAST)


@pytest.mark.parametrize("kind", ["both rotated", "rotated vs added"])
def test_diverged_keys_are_refused_and_change_nothing(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str, kind: str
) -> None:
    second = clone(origin, tmp_path, key, "b")
    divergence(first, second, kind)
    write(first, "a.md", "a\n")
    write(second, "b.md", "b\n")
    first.push()
    before = refs(second)
    objects = sorted(second.repo.all_object_ids())
    with pytest.raises(KeysDiverged, match="both changed the store's keys"):
        second.sync()
    assert refs(second) == before
    # Refused: what the pull fetched is not kept.
    assert sorted(second.repo.all_object_ids()) == objects
    assert second.files().keys() == {"/memories/notes.md", "/memories/b.md"}
    assert second.verify().ok and first.verify().ok
    result = CliRunner().invoke(
        main,
        ["--repo", str(second.path), "pull"],
        env={"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(tmp_path / "state-b")},
    )
    assert result.exit_code == 13, result.output
    assert refs(second) == before
    assert GitRepo(second.path).ref(META_REF) == before[1]


def test_a_retired_key_cannot_append_through_a_remote(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    second = clone(origin, tmp_path, key, "b")
    first.rotate_keys()
    first.push()
    second.pull()
    # A removed holder knows epoch 0 and can write the remote: a commit sealed with it on top
    # of the rotation is refused by the pull, before the branch moves.
    head = first.head_operation()
    assert head is not None
    append_with_epoch_zero(origin, key, first.keys.store_id, head)
    before = refs(second)
    with pytest.raises(IntegrityError, match="older key epoch than its parent"):
        second.pull()
    assert refs(second) == before
    assert second.verify().ok


def edit_host_meta(origin: Path) -> str:
    """Plant a slot in the host's refs/gitmem/meta, as someone who can write the host (and
    holds no key) can; returns the planted blob's id."""
    git = ["git", "--git-dir", str(origin)]
    old = subprocess.run([*git, "cat-file", "blob", META_REF], capture_output=True, check=True)
    body = json.loads(old.stdout)
    body["slots"].append(dict(body["slots"][-1], slot="0badc0de"))
    data = json.dumps(body, sort_keys=True, indent=1).encode() + b"\n"
    made = subprocess.run(
        [*git, "hash-object", "-w", "--stdin"], input=data, capture_output=True, check=True
    )
    planted = made.stdout.decode().strip()
    subprocess.run([*git, "update-ref", META_REF, planted], check=True)
    return planted


def test_a_host_s_edited_metadata_is_neither_cloned_nor_pulled(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    # `gitmem clone` took the host's refs/gitmem/meta as it was: the planted slot became the
    # new replica's, its first write stamped it, and `key list` failed from then on.
    slots = [slot["slot"] for slot in first.key_slots()]
    planted = edit_host_meta(origin)
    second = clone(origin, tmp_path, key, "b")
    assert second.repo.ref(META_REF) == first.repo.ref(META_REF) != planted
    write(second, "b.md", "b\n")
    assert [slot["slot"] for slot in second.key_slots()] == slots
    second.push()
    first.pull()
    assert first.repo.ref(META_REF) == second.repo.ref(META_REF)
    assert [slot["slot"] for slot in first.key_slots()] == slots
    assert first.rotate_keys() == 1
    assert first.verify().ok and second.verify().ok


def test_a_removed_holders_fork_is_refused(
    first: MemoryStore, origin: Path, tmp_path: Path, key: str
) -> None:
    # A removed holder writes in the replica she kept from before the removal and force-pushes
    # it over the host's branch. A replica that knows the rotation but not the host's new state
    # (its mark of the host reset by `remote remove` and `add`, or one that got the rotation from
    # another replica) merged her writes with exit 0, and verify said ok.
    clone(origin, tmp_path, key, "m")
    mallory = MemoryStore.open(
        tmp_path / "m.git", passphrase="bob's passphrase", state_dir=tmp_path / "state-m"
    )
    bob = mallory.keyring_slot()
    assert bob is not None
    other = clone(origin, tmp_path, key, "b")
    first.remove_key(bob)
    write(first, "after.md", "after the removal\n")
    first.push()
    other.pull(str(first.path))  # the rotation, from the first replica directly
    write(mallory, "mallory.md", "injected\n")
    mallory.checkpoint()
    subprocess.run(
        ["git", "--git-dir", str(mallory.path), "push", "-q", "--force", str(origin), BRANCH],
        check=True,
    )
    first.remove_remote("origin")
    first.add_remote("origin", str(origin))
    for replica, state in ((first, "state-a"), (other, "state-b")):
        before = refs(replica)
        for how in ("pull", "sync"):
            with pytest.raises(IntegrityError, match="older than this replica's newest"):
                getattr(replica, how)()
        result = CliRunner().invoke(
            main,
            ["--repo", str(replica.path), "pull"],
            env={"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(tmp_path / state)},
        )
        assert result.exit_code == 5, result.output
        assert "sealed in key epoch 0, older than this replica's newest (1)" in result.output
        assert refs(replica) == before
        assert "/memories/mallory.md" not in replica.files()
        assert replica.verify().ok
    # A merge that took her head in anyway (as before this was refused) is what verify flags.
    forked = subprocess.run(
        ["git", "--git-dir", str(origin), "rev-parse", BRANCH], capture_output=True, check=True
    )
    # The refused pulls kept none of her objects: fetched on purpose for this merge.
    first.repo.fetch(str(origin), [BRANCH])
    theirs = first.read_operation(forked.stdout.decode().strip())
    assert theirs.epoch == 0

    def take(head: Operation | None, tree: TreeEditor) -> Change[None]:
        assert head is not None
        return Change((), None, tree=head.tree, merged=theirs)

    first.write("merge", take)
    problems = first.verify().problems
    assert any(
        f"it merged in commit {theirs.commit}, sealed in an older key epoch" in p for p in problems
    ), problems
