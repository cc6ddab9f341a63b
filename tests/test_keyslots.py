"""Key slots: known answers, tampering, bounds, unlock order, management, and no key leaks."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers_keys import append_with_epoch_zero
from helpers_repo import published

from gitmem import MemoryStore, crypto, generate_key, keyadmin, keyslots
from gitmem import format as fmt
from gitmem.cli import main
from gitmem.crypto import KdfParams, StoreKeys
from gitmem.errors import (
    IntegrityError,
    KeyMissing,
    UsageError,
    WeakPassphrase,
    WrongKey,
    WrongPassphrase,
)
from gitmem.format import StoreMeta
from gitmem.git.refs import BRANCH, META_REF
from gitmem.git.repo import GitRepo
from gitmem.keysource import user_key_path, write_key_file
from gitmem.paths import MemoryPath, parse
from gitmem.tree import TreeCodec

VECTORS = json.loads((Path(__file__).parent / "vectors" / "key_slots.json").read_text())
FAST = KdfParams(64, 1, 1)  # cheap Argon2id for tests; the CLI always uses the default
NOTE = parse("/memories/note.md")


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# -- known answers -----------------------------------------------------------------------------


@pytest.mark.parametrize("vector", VECTORS["argon2id"])
def test_argon2id_known_answers(vector: dict[str, Any]) -> None:
    params = KdfParams(vector["memory_kib"], vector["iterations"], vector["lanes"])
    kek = crypto.passphrase_kek(vector["passphrase"].encode(), h(vector["salt"]), params)
    assert kek.hex() == vector["kek"]


def test_rfc9106_second_option_is_the_default() -> None:
    assert KdfParams() == KdfParams(memory_kib=65536, iterations=3, lanes=4)
    assert crypto.SLOT_SALT_BYTES == 16


def test_raw_key_kek_known_answer() -> None:
    (vector,) = VECTORS["raw_key_kek"]
    assert crypto.raw_key_kek(h(vector["key"]), h(vector["salt"])).hex() == vector["kek"]


def test_wrap_known_answer_and_unwrap() -> None:
    (v,) = VECTORS["wrap"]
    wrapped = crypto.wrap_secret(h(v["kek"]), h(v["secret"]), h(v["ad"]), nonce=h(v["nonce"]))
    assert wrapped.hex() == v["wrapped"]
    assert crypto.unwrap_secret(h(v["kek"]), wrapped, h(v["ad"])) == h(v["secret"])
    assert crypto.slot_public(h(v["secret"])).hex() == v["public"]
    for i in range(len(wrapped)):  # every byte of the wrapped secret is authenticated
        bad = bytearray(wrapped)
        bad[i] ^= 1
        assert crypto.unwrap_secret(h(v["kek"]), bytes(bad), h(v["ad"])) is None
    assert crypto.unwrap_secret(h(v["kek"]), wrapped, h(v["ad"]) + b"x") is None
    assert crypto.unwrap_secret(h(v["kek"]), wrapped[:-1], h(v["ad"])) is None


def test_seal_known_answer_and_open() -> None:
    (v,) = VECTORS["seal"]
    public = crypto.slot_public(h(v["secret"]))
    sealed = crypto.seal_to(
        public, h(v["plaintext"]), h(v["ad"]), ephemeral=h(v["ephemeral"]), nonce=h(v["nonce"])
    )
    assert sealed.hex() == v["sealed"]
    assert crypto.open_sealed(h(v["secret"]), sealed, h(v["ad"])) == h(v["plaintext"])
    for i in (0, 31, 32, 44, len(sealed) - 1):
        bad = bytearray(sealed)
        bad[i] ^= 1
        with pytest.raises(IntegrityError):
            crypto.open_sealed(h(v["secret"]), bytes(bad), h(v["ad"]))


# -- the slot format ----------------------------------------------------------------------------


@pytest.fixture
def slotted(repo_path: Path, key: str) -> MemoryStore:
    """A store with its initial key slot and a passphrase slot "alice" (cheap Argon2id)."""
    store = MemoryStore.open(repo_path, key, create=True)
    store.create(NOTE, "hello")
    store.add_key(passphrase="alice's passphrase", label="alice", kdf=FAST)
    return store


def meta_json(repo_path: Path) -> dict[str, Any]:
    repo = GitRepo(repo_path)
    oid = repo.ref(META_REF)
    assert oid is not None
    body: dict[str, Any] = dict(json.loads(repo.read_blob(oid)))
    return body


def plant_meta(repo_path: Path, body: dict[str, Any]) -> None:
    repo = GitRepo(repo_path)
    old = repo.ref(META_REF)
    data = json.dumps(body, sort_keys=True, indent=1).encode() + b"\n"
    repo.update_ref(META_REF, repo.write_blob(data), old)


def passphrase_slot(body: dict[str, Any]) -> dict[str, Any]:
    (slot,) = [s for s in body["slots"] if s["kind"] == "passphrase"]
    assert isinstance(slot, dict)
    return slot


def test_slot_fields(slotted: MemoryStore, repo_path: Path) -> None:
    body = meta_json(repo_path)
    assert body["format"] == 6 and body["epochs"] == []  # slots in format 6
    slot = passphrase_slot(body)
    assert set(slot) == {"slot", "kind", "kdf", "salt", "public", "private", "keyring", "label"}
    assert slot["kdf"] == {"name": "argon2id", "memory_kib": 64, "iterations": 1, "lanes": 1}
    assert len(base64.b64decode(slot["salt"])) == 16
    # The label is encrypted, and no field has room for a host, user or time in plaintext:
    # the id is random hex and every other field is fixed-size binary or the KDF's numbers.
    assert "alice" not in json.dumps(body)
    assert len(slot["slot"]) == 8 and int(slot["slot"], 16) >= 0
    sizes = {"public": 32, "private": 60, "keyring": 96}
    assert {name: len(base64.b64decode(slot[name])) for name in sizes} == sizes


def flip(text: str) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[len(raw) // 2] ^= 1
    return base64.b64encode(bytes(raw)).decode()


TAMPERS = {
    "slot": lambda s: s.update(slot="0badc0de"),
    "kind": lambda s: s.update(kind="key"),
    "salt": lambda s: s.update(salt=flip(s["salt"])),
    "public": lambda s: s.update(public=flip(s["public"])),
    "private": lambda s: s.update(private=flip(s["private"])),
    "keyring": lambda s: s.update(keyring=flip(s["keyring"])),
    "label": lambda s: s.update(label=flip(s["label"])),
    "memory": lambda s: s["kdf"].update(memory_kib=128),
    "iterations": lambda s: s["kdf"].update(iterations=2),
    "lanes": lambda s: s["kdf"].update(lanes=2),
    "kdf name": lambda s: s["kdf"].update(name="argon2i"),
}


@pytest.mark.parametrize("field", sorted(TAMPERS))
def test_each_tampered_field_fails(slotted: MemoryStore, repo_path: Path, field: str) -> None:
    body = meta_json(repo_path)
    TAMPERS[field](passphrase_slot(body))
    plant_meta(repo_path, body)
    with pytest.raises((WrongKey, IntegrityError)):
        store = MemoryStore.open(repo_path, passphrase="alice's passphrase")
        store.key_slots()  # a tampered label shows when the labels are read


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[KdfParams]:
    """Every Argon2id derivation gitmem asks for, recorded before it runs."""
    seen: list[KdfParams] = []
    real = crypto.passphrase_kek

    def counting(passphrase: bytes, salt: bytes, params: KdfParams) -> bytes:
        seen.append(params)
        return real(passphrase, salt, params)

    monkeypatch.setattr(crypto, "passphrase_kek", counting)
    return seen


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"memory_kib": 4 * 1024 * 1024}, "KiB of Argon2id memory"),
        ({"memory_kib": 2**64}, "KiB of Argon2id memory"),
        ({"iterations": 10**9}, "passes"),
        ({"lanes": 2**24}, "lanes"),
        ({"iterations": 0}, "passes"),
        ({"memory_kib": "65536"}, "malformed"),
        ({"memory_kib": True}, "malformed"),
        ({"memory_kib": None}, "malformed"),
    ],
)
def test_planted_costs_are_refused_before_deriving(
    slotted: MemoryStore,
    repo_path: Path,
    derivations: list[KdfParams],
    change: dict[str, Any],
    message: str,
) -> None:
    body = meta_json(repo_path)
    passphrase_slot(body)["kdf"].update(change)
    plant_meta(repo_path, body)
    with pytest.raises(IntegrityError, match=message):
        MemoryStore.open(repo_path, passphrase="alice's passphrase")
    assert derivations == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s.pop("kdf"),
        lambda s: s["kdf"].pop("lanes"),
        lambda s: s.update(salt=base64.b64encode(b"short").decode()),
        lambda s: s.update(salt=base64.b64encode(bytes(17)).decode()),
        lambda s: s.update(private=s["private"][:-8]),
        lambda s: s.update(keyring=base64.b64encode(bytes(97)).decode()),
        lambda s: s.update(label=base64.b64encode(bytes(1000)).decode()),
        lambda s: s.update(public="not base64!"),
        lambda s: s.update(slot="../../etc"),
    ],
)
def test_truncated_and_oversized_fields(
    slotted: MemoryStore, repo_path: Path, derivations: list[KdfParams], damage: Any
) -> None:
    body = meta_json(repo_path)
    damage(passphrase_slot(body))
    plant_meta(repo_path, body)
    with pytest.raises(IntegrityError):
        MemoryStore.open(repo_path, passphrase="alice's passphrase")
    assert derivations == []


def test_too_many_slots_refused(slotted: MemoryStore, repo_path: Path) -> None:
    body = meta_json(repo_path)
    body["slots"] = body["slots"] * 40
    plant_meta(repo_path, body)
    with pytest.raises(IntegrityError):
        StoreMeta.from_bytes(GitRepo(repo_path).read_blob(GitRepo(repo_path).ref(META_REF) or ""))


def test_wrong_passphrase_costs_one_derivation(
    slotted: MemoryStore, repo_path: Path, derivations: list[KdfParams]
) -> None:
    with pytest.raises(WrongPassphrase, match="the passphrase does not open") as info:
        MemoryStore.open(repo_path, passphrase="wrong")
    assert info.value.exit_code == 4
    assert len(derivations) == 1


# -- unlock order ------------------------------------------------------------------------------


def test_unlock_order(
    slotted: MemoryStore, repo_path: Path, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def opened_by(**kwargs: Any) -> str | None:
        return MemoryStore.open(repo_path, **kwargs).keyring_slot()

    slots = {s["label"]: s["slot"] for s in slotted.key_slots()}
    initial, alice = slots["initial key"], slots["alice"]
    other = generate_key()
    # key= wins over passphrase=, which wins over the environment.
    assert opened_by(key=key, passphrase="wrong") == initial
    monkeypatch.setenv("GITMEM_KEY", other)
    assert opened_by(passphrase="alice's passphrase") == alice
    with pytest.raises(WrongKey):  # GITMEM_KEY (a key that is not in a slot) is tried first
        opened_by()
    monkeypatch.setenv("GITMEM_KEY", key)
    monkeypatch.setenv("GITMEM_KEY_FILE", str(tmp_path / "missing"))
    monkeypatch.setenv("GITMEM_PASSPHRASE", "wrong")
    assert opened_by() == initial  # GITMEM_KEY before GITMEM_KEY_FILE and GITMEM_PASSPHRASE
    monkeypatch.delenv("GITMEM_KEY")
    with pytest.raises(KeyMissing):  # then GITMEM_KEY_FILE
        opened_by()
    monkeypatch.delenv("GITMEM_KEY_FILE")
    write_key_file(user_key_path(slotted.store_id), crypto.decode_key(key))
    with pytest.raises(WrongPassphrase):  # GITMEM_PASSPHRASE before the per-user key file
        opened_by()
    monkeypatch.delenv("GITMEM_PASSPHRASE")
    asked: list[int] = []

    def prompt() -> str:
        asked.append(1)
        return "alice's passphrase"

    assert opened_by(prompt=prompt) == initial and not asked  # the key file before the prompt
    user_key_path(slotted.store_id).unlink()
    assert opened_by(prompt=prompt) == alice and asked == [1]


# -- slots planted to make opening slow ---------------------------------------------------------

AT_THE_BOUNDS = KdfParams(crypto.ARGON2_MAX_MEMORY_KIB, crypto.ARGON2_MAX_ITERATIONS, 4)
HOLDER = "the holder's own passphrase"


@pytest.fixture
def stand_in_kdf(monkeypatch: pytest.MonkeyPatch) -> list[KdfParams]:
    """Every Argon2id derivation gitmem asks for, recorded, with a hash standing in for Argon2id:
    slots at the bounds cost nothing, and what is checked is which slots are tried, not time."""
    seen: list[KdfParams] = []

    def stand_in(passphrase: bytes, salt: bytes, params: KdfParams) -> bytes:
        params.check()
        seen.append(params)
        costs = b"%d/%d/%d/" % (params.memory_kib, params.iterations, params.lanes)
        return hashlib.sha256(costs + salt + passphrase).digest()

    monkeypatch.setattr(crypto, "passphrase_kek", stand_in)
    return seen


def with_planted_slots(
    repo_path: Path, key: str, planted: KdfParams, holder: KdfParams, count: int = 2
) -> str:
    """A store whose metadata holds ``count`` passphrase slots of cost ``planted`` that nobody's
    passphrase opens, ahead of the holder's slot (cost ``holder``); returns the holder's slot."""
    store = MemoryStore.open(repo_path, key, create=True)
    store.create(NOTE, "hello")
    for n in range(count):
        store.add_key(passphrase=f"planted {n} {os.urandom(8).hex()}", kdf=planted)
    return store.add_key(passphrase=HOLDER, label="holder", kdf=holder)


def work(params: list[KdfParams]) -> int:
    return sum(p.memory_kib * p.iterations for p in params)


def test_expensive_planted_slots_are_tried_after_cheaper_ones(
    repo_path: Path, key: str, stand_in_kdf: list[KdfParams]
) -> None:
    holder = with_planted_slots(repo_path, key, AT_THE_BOUNDS, FAST)
    stand_in_kdf.clear()
    opened = MemoryStore.open(repo_path, passphrase=HOLDER, check_rollback=False)
    assert opened.keyring_slot() == holder and stand_in_kdf == [FAST]


def test_the_slot_a_passphrase_opened_last_is_tried_first(
    repo_path: Path, key: str, stand_in_kdf: list[KdfParams], tmp_path: Path
) -> None:
    holder = with_planted_slots(repo_path, key, FAST, FAST, count=3)
    stand_in_kdf.clear()
    state = tmp_path / "state"
    opened = MemoryStore.open(repo_path, passphrase=HOLDER, state_dir=state)
    assert opened.keyring_slot() == holder and len(stand_in_kdf) == 4  # the metadata's order
    stand_in_kdf.clear()
    again = MemoryStore.open(repo_path, passphrase=HOLDER, state_dir=state)
    assert again.keyring_slot() == holder and len(stand_in_kdf) == 1
    # The hint is the slot id and nothing else; without the state directory, no hint.
    (hint,) = state.glob("*/passphrase-slot")
    assert hint.read_text() == holder + "\n" and hint.stat().st_mode & 0o777 == 0o600
    stand_in_kdf.clear()
    MemoryStore.open(repo_path, passphrase=HOLDER, state_dir=state, check_rollback=False)
    assert len(stand_in_kdf) == 4
    # A hint naming a slot that is gone, or damaged, only means the usual order.
    for damaged in ("0badf00d\n", "not a slot id\n", "\x00" * 70000):
        hint.write_text(damaged)
        stand_in_kdf.clear()
        assert MemoryStore.open(repo_path, passphrase=HOLDER, state_dir=state).keyring_slot()
        assert len(stand_in_kdf) == 4 and hint.read_text() == holder + "\n"


def test_the_argon2id_work_of_one_open_is_bounded(
    repo_path: Path, key: str, stand_in_kdf: list[KdfParams]
) -> None:
    with_planted_slots(repo_path, key, AT_THE_BOUNDS, FAST, count=3)
    stand_in_kdf.clear()
    with pytest.raises(WrongPassphrase) as info:
        MemoryStore.open(repo_path, passphrase="not anybody's passphrase", check_rollback=False)
    assert work(stand_in_kdf) <= keyslots.MAX_UNLOCK_WORK == 32 * 1024 * 1024
    assert stand_in_kdf == [FAST, AT_THE_BOUNDS]  # the cheapest first, then up to the bound
    assert str(info.value) == (
        f"the passphrase was tried against 2 of the 4 passphrase slots of the store at "
        f"{repo_path} and opens none of them; the rest were not tried, since they would take "
        "this open past gitmem's bound of 32 GiB of Argon2id memory times passes (someone may "
        "have planted expensive slots). Open the store with a key or another passphrase and "
        "remove the slots you do not know (`gitmem key list`, `gitmem key remove SLOT`)"
    )
    # A slot at the bounds still opens after cheaper ones were tried.
    other = repo_path.with_name("other.git")
    holder = with_planted_slots(other, generate_key(), FAST, AT_THE_BOUNDS, count=3)
    stand_in_kdf.clear()
    assert MemoryStore.open(other, passphrase=HOLDER).keyring_slot() == holder
    assert stand_in_kdf == [FAST] * 3 + [AT_THE_BOUNDS]


def test_passphrase_sources_skipped_without_passphrase_slots(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    write_key_file(user_key_path(store.store_id), crypto.decode_key(key))
    monkeypatch.setenv("GITMEM_PASSPHRASE", "set for another store")
    assert MemoryStore.open(repo_path).store_id == store.store_id
    with pytest.raises(WrongPassphrase, match="no passphrase slots"):
        MemoryStore.open(repo_path, passphrase="explicit")


def test_store_created_with_a_passphrase(repo_path: Path) -> None:
    store = MemoryStore.init(repo_path, None, passphrase="the only way in", kdf=FAST)
    store.create(NOTE, "x")
    assert [s["kind"] for s in store.key_slots()] == ["passphrase"]
    again = MemoryStore.open(repo_path, passphrase="the only way in")
    assert again.read_text(NOTE) == "x"
    with pytest.raises(KeyMissing):
        MemoryStore.open(repo_path)


# -- managing slots ---------------------------------------------------------------------------


def test_add_list_passwd_remove(slotted: MemoryStore, repo_path: Path, key: str) -> None:
    bob = slotted.add_key(passphrase="bob's passphrase", label="bob", kdf=FAST)
    listed = slotted.key_slots()
    assert [(s["label"], s["kind"]) for s in listed] == [
        ("initial key", "key"),
        ("alice", "passphrase"),
        ("bob", "passphrase"),
    ]
    assert [s["current"] for s in listed] == [True, False, False]
    slotted.change_passphrase(bob, "bob's newer passphrase", kdf=FAST)
    with pytest.raises(WrongPassphrase):
        MemoryStore.open(repo_path, passphrase="bob's passphrase")
    as_bob = MemoryStore.open(repo_path, passphrase="bob's newer passphrase")
    assert as_bob.keyring_slot() == bob and as_bob.read_text(NOTE) == "hello"
    assert [s["label"] for s in as_bob.key_slots()][2] == "bob"
    slotted.remove_key(bob)
    with pytest.raises(WrongPassphrase):
        MemoryStore.open(repo_path, passphrase="bob's newer passphrase")
    with pytest.raises(UsageError, match="no key slot"):
        slotted.remove_key(bob)


def test_keyadmin_changes_each_slot_with_one_keys_commit(slotted: MemoryStore) -> None:
    store: keyadmin.KeyedStore = slotted  # what MemoryStore.add_key and its siblings call
    carol = keyadmin.add_key(store, passphrase="carol's passphrase", label="carol", kdf=FAST)
    assert [s["label"] for s in keyadmin.key_slots(store)] == ["initial key", "alice", "carol"]
    keyadmin.check_passphrase_slot(store, carol)
    epoch = keyadmin.rotate_keys(store)
    assert keyadmin.remove_key(store, carol) == epoch + 1
    newest = [(op.command, op.record.detail) for op in slotted.log()][:3]
    assert newest == [
        ("keys", {"action": "remove", "epoch": epoch + 1}),
        ("keys", {"action": "rotate", "epoch": epoch}),
        ("keys", {"action": "add"}),
    ]


def test_own_passphrase_change_keeps_open_stores_working(
    slotted: MemoryStore, repo_path: Path
) -> None:
    alice = MemoryStore.open(repo_path, passphrase="alice's passphrase")
    slot = alice.keyring_slot()
    assert slot is not None
    alice.change_passphrase(slot, "alice's new passphrase", kdf=FAST)
    assert [s["current"] for s in alice.key_slots()] == [False, True]
    # Someone else's change gives the slot a new secret: an open store of it must reopen.
    slotted.change_passphrase(slot, "reset by admin", kdf=FAST)
    with pytest.raises(WrongKey, match=r"open the store .* again"):
        alice.key_slots()


SPLICES = {
    "the wrapped secret": ("salt", "kdf", "private"),
    "the wrapped secret and public key": ("salt", "kdf", "private", "public"),
    "the whole slot": ("salt", "kdf", "private", "public", "keyring", "label"),
}


@pytest.mark.parametrize("rotate", [True, False], ids=["then rotate", "alone"])
@pytest.mark.parametrize("splice", sorted(SPLICES))
def test_an_old_passphrase_reads_nothing_written_after_its_change(
    slotted: MemoryStore, repo_path: Path, splice: str, rotate: bool
) -> None:
    # The attack: someone who knows alice's old passphrase takes her slot's old fields from
    # any earlier metadata blob (history keeps them all) and puts them into the current one.
    # A change of passphrase that kept the slot's X25519 secret let the old passphrase unwrap
    # the very secret every later epoch key is sealed to.
    alice = MemoryStore.open(repo_path, passphrase="alice's passphrase")
    slot = alice.keyring_slot()
    assert slot is not None
    before = passphrase_slot(meta_json(repo_path))
    elsewhere = MemoryStore.open(repo_path, passphrase="alice's passphrase")
    assert alice.change_passphrase(slot, "alice's new passphrase", kdf=FAST) == 1
    if rotate:
        alice.rotate_keys()
    after = parse("/memories/after.md")
    alice.create(after, "written after the change")  # the changing store keeps working
    # Another process opened with the old passphrase must open the store again.
    with pytest.raises(WrongKey, match="was given a new passphrase"):
        elsewhere.read_text(after)
    body = meta_json(repo_path)
    current = passphrase_slot(body)
    assert current["public"] != before["public"]
    # Offline: the old secret, unwrapped with the old passphrase, opens nothing current.
    old_slot = fmt.Slot.from_json(before)
    assert old_slot.kdf is not None
    kek = crypto.passphrase_kek(b"alice's passphrase", old_slot.salt, old_slot.kdf)
    secret = crypto.unwrap_secret(kek, old_slot.private, old_slot.params_ad(alice.keys.store_id))
    assert secret is not None
    ad = b"gitmem/keyring/v2" + alice.keys.store_id + slot.encode()
    with pytest.raises(IntegrityError):
        crypto.open_sealed(secret, base64.b64decode(current["keyring"]), ad)
    # Through gitmem, with the old fields spliced into the current metadata.
    current.update({name: before[name] for name in SPLICES[splice]})
    plant_meta(repo_path, body)
    with pytest.raises((WrongPassphrase, IntegrityError)):
        spliced = MemoryStore.open(repo_path, passphrase="alice's passphrase", check_rollback=False)
        spliced.read_text(after)


def test_refuse_to_remove_the_last_way_in(repo_path: Path) -> None:
    store = MemoryStore.init(repo_path, None, passphrase="only one way in", kdf=FAST)
    (slot,) = store.key_slots()
    with pytest.raises(UsageError, match="last way into this store"):
        store.remove_key(slot["slot"])
    v1 = MemoryStore.open(repo_path.with_name("v1.git"), generate_key(), create=True)
    with pytest.raises(UsageError, match="the only way in"):
        v1.remove_key("00000000")


def test_remove_while_another_holder_has_the_store_open(
    slotted: MemoryStore, repo_path: Path
) -> None:
    alice = MemoryStore.open(repo_path, passphrase="alice's passphrase")
    slot = alice.keyring_slot()
    assert slot is not None
    slotted.remove_key(slot)
    with pytest.raises(WrongKey, match="was removed"):
        alice.add_key(passphrase="sneaky passphrase", kdf=FAST)
    with pytest.raises(WrongPassphrase):
        MemoryStore.open(repo_path, passphrase="alice's passphrase")
    assert [s["label"] for s in slotted.key_slots()] == ["initial key"]


def test_label_checked(slotted: MemoryStore) -> None:
    with pytest.raises(UsageError):
        slotted.add_key(passphrase="the test passphrase", label="x" * 300, kdf=FAST)
    with pytest.raises(UsageError):
        slotted.add_key(passphrase="the test passphrase", label="evil\x1b[2J", kdf=FAST)
    with pytest.raises(UsageError, match="empty"):
        slotted.add_key(passphrase="", kdf=FAST)


# -- the strength of a new passphrase -----------------------------------------------------------

WEAK = ["a", "x", " ", "1234", "password", "passwordpassword", "aaaaaaaaaaaaaaaa", "x" * 100]
TOO_WEAK = r"^the new passphrase is too weak: .*--allow-weak-passphrase"


def refused_quietly(weak: str, attempt: Any) -> None:
    """``attempt()`` raises WeakPassphrase (exit code 2) without showing ``weak``."""
    with pytest.raises(WeakPassphrase, match=TOO_WEAK) as info:
        attempt()
    assert info.value.exit_code == 2
    if len(weak) > 3:  # shorter ones are in any sentence
        assert weak not in str(info.value) and weak not in repr(info.value)


@pytest.mark.parametrize("weak", WEAK)
def test_weak_passphrases_are_refused_before_anything_is_written(
    slotted: MemoryStore, repo_path: Path, tmp_path: Path, derivations: list[KdfParams], weak: str
) -> None:
    alice = next(s["slot"] for s in slotted.key_slots() if s["label"] == "alice")
    head, meta = slotted.head(), meta_json(repo_path)
    refused_quietly(weak, lambda: slotted.add_key(passphrase=weak, kdf=FAST))
    refused_quietly(weak, lambda: slotted.add_key(passphrase=weak, key=generate_key(), kdf=FAST))
    refused_quietly(weak, lambda: slotted.change_passphrase(alice, weak, kdf=FAST))
    new = tmp_path / "new.git"
    refused_quietly(weak, lambda: MemoryStore.init(new, None, passphrase=weak, kdf=FAST))
    refused_quietly(weak, lambda: MemoryStore.open(new, passphrase=weak, create=True))
    assert not new.exists()
    assert slotted.head() == head and meta_json(repo_path) == meta and derivations == []
    # The override takes it, on every path.
    added = slotted.add_key(passphrase=weak, kdf=FAST, allow_weak_passphrase=True)
    assert MemoryStore.open(repo_path, passphrase=weak).keyring_slot() == added
    slotted.change_passphrase(alice, weak, kdf=FAST, allow_weak_passphrase=True)
    made = MemoryStore.init(new, None, passphrase=weak, kdf=FAST, allow_weak_passphrase=True)
    assert MemoryStore.open(new, passphrase=weak).store_id == made.store_id
    other = tmp_path / "other.git"
    MemoryStore.open(other, passphrase=weak, create=True, allow_weak_passphrase=True)
    assert MemoryStore.open(other, passphrase=weak).keyring_slot() is not None


def test_an_empty_passphrase_is_refused_even_with_the_override(slotted: MemoryStore) -> None:
    with pytest.raises(UsageError, match="the passphrase is empty"):
        slotted.add_key(passphrase="", kdf=FAST, allow_weak_passphrase=True)


def test_cli_refuses_weak_passphrases_unless_told(
    repo_path: Path, key: str, tmp_path: Path
) -> None:
    MemoryStore.open(repo_path, key, create=True)
    runner = CliRunner()
    env = {"GITMEM_REPO": str(repo_path), "GITMEM_KEY": key}
    weak = "password1234"
    added = runner.invoke(main, ["key", "add"], input=weak + "\n", env=env)
    assert added.exit_code == 2 and weak not in added.output
    assert added.output.startswith("gitmem: error: the new passphrase is too weak: ")
    assert "--allow-weak-passphrase" in added.output
    assert MemoryStore.open(repo_path, key).key_slots() == []  # nothing was added
    added = runner.invoke(
        main, ["key", "add", "--allow-weak-passphrase", "--json"], input=weak + "\n", env=env
    )
    assert added.exit_code == 0, added.output
    slot = json.loads(added.output)["slot"]
    changed = runner.invoke(main, ["key", "passwd", slot], input="letmein\n", env=env)
    assert changed.exit_code == 2 and "letmein" not in changed.output
    assert "too weak" in changed.output
    assert MemoryStore.open(repo_path, passphrase=weak).keyring_slot() == slot
    changed = runner.invoke(
        main, ["key", "passwd", slot, "--allow-weak-passphrase"], input="letmein\n", env=env
    )
    assert changed.exit_code == 0, changed.output
    assert MemoryStore.open(repo_path, passphrase="letmein").keyring_slot() == slot
    target = tmp_path / "p.git"
    made = runner.invoke(main, ["init", str(target)], env={"GITMEM_PASSPHRASE": weak})
    assert made.exit_code == 2 and weak not in made.output and "too weak" in made.output
    assert not target.exists()
    made = runner.invoke(
        main, ["init", str(target), "--allow-weak-passphrase"], env={"GITMEM_PASSPHRASE": weak}
    )
    assert made.exit_code == 0, made.output
    assert MemoryStore.open(target, passphrase=weak).keyring_slot() is not None


# -- no key material anywhere -----------------------------------------------------------------

CANARY_PASSPHRASE = "canary-passphrase-7f3a9c"


def repository_bytes(path: Path) -> Iterator[bytes]:
    for file in path.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            yield data
            inflated = b""
            with contextlib.suppress(zlib.error):
                inflated = zlib.decompress(data)
            yield inflated


def test_canary_never_stored_or_shown(repo_path: Path, tmp_path: Path) -> None:
    key = generate_key()
    raw = crypto.decode_key(key)
    store = MemoryStore.open(repo_path, key, create=True)
    store.create(NOTE, "text")
    slot = store.add_key(passphrase=CANARY_PASSPHRASE, label="canary", kdf=FAST)
    opened = MemoryStore.open(repo_path, passphrase=CANARY_PASSPHRASE)
    needles = [CANARY_PASSPHRASE.encode(), raw, key.encode(), raw.hex().encode()]
    needles += [base64.b64encode(raw), *opened.keyring.epochs]  # type: ignore[union-attr]
    for data in repository_bytes(repo_path):
        for needle in needles:
            assert needle not in data
    shown = [repr(opened), repr(opened.keyring), str(opened.key_slots()), repr(opened.keys)]
    failures: list[BaseException] = []
    for attempt in (
        lambda: MemoryStore.open(repo_path, passphrase=CANARY_PASSPHRASE + "x"),
        lambda: MemoryStore.open(repo_path, key=key[:-2]),
        lambda: opened.remove_key(CANARY_PASSPHRASE),
        lambda: opened.add_key(passphrase=CANARY_PASSPHRASE, label="\x00" + key),
    ):
        with pytest.raises(Exception) as info:
            attempt()
        failures.append(info.value)
    shown += [str(exc) for exc in failures] + [repr(exc) for exc in failures]
    env = {"GITMEM_REPO": str(repo_path), "GITMEM_PASSPHRASE": CANARY_PASSPHRASE}
    runner = CliRunner()
    for args in (["key", "list"], ["key", "list", "--json"], ["key", "remove", slot + "0"]):
        result = runner.invoke(main, args, env=env)
        shown.append(result.output + (result.stderr if result.stderr_bytes else ""))
    result = runner.invoke(main, ["key", "list"], env={**env, "GITMEM_PASSPHRASE": "bad"})
    shown.append(result.output)
    for text in shown:
        for secret in (CANARY_PASSPHRASE, key, raw.hex()):
            assert secret not in text


# -- the command line --------------------------------------------------------------------------


def test_cli_key_commands(repo_path: Path, key: str) -> None:
    MemoryStore.open(repo_path, key, create=True)
    runner = CliRunner()
    env = {"GITMEM_REPO": str(repo_path), "GITMEM_KEY": key}
    added = runner.invoke(
        main, ["key", "add", "--label", "laptop"], input="pass one of two\n", env=env
    )
    assert added.exit_code == 0, added.output
    assert added.output.startswith("Added key slot ") and added.output.endswith(" (laptop)\n")
    listed = runner.invoke(main, ["key", "list", "--json"], env=env)
    rows = [json.loads(line) for line in listed.output.splitlines()]
    assert [(r["label"], r["kind"], r["current"]) for r in rows] == [
        ("initial key", "key", True),
        ("laptop", "passphrase", False),
    ]
    initial, laptop = rows[0]["slot"], rows[1]["slot"]
    by_pass = {"GITMEM_REPO": str(repo_path), "GITMEM_PASSPHRASE": "pass one of two"}
    text = runner.invoke(main, ["key", "list"], env=by_pass)
    assert text.output == f"  {initial}  key         initial key\n* {laptop}  passphrase  laptop\n"
    assert runner.invoke(main, ["key", "remove", initial], env=by_pass).exit_code == 0
    last = runner.invoke(main, ["key", "remove", laptop], env=by_pass)
    assert last.exit_code == 2 and "last way into this store" in last.output
    changed = runner.invoke(main, ["key", "passwd", laptop], input="pass two of two\n", env=by_pass)
    assert (
        changed.exit_code == 0
        and changed.output
        == f"Changed the passphrase of key slot {laptop}; new writes use key epoch 2\n"
    )
    wrong = runner.invoke(main, ["key", "list"], env=by_pass)
    assert wrong.exit_code == 4
    assert wrong.output == f"gitmem: error: the passphrase does not open the store at {repo_path}\n"
    empty = runner.invoke(
        main, ["key", "add"], input="", env={**by_pass, "GITMEM_PASSPHRASE": "pass two of two"}
    )
    assert empty.exit_code == 2 and "no passphrase on stdin" in empty.output


def test_cli_init_with_a_passphrase(tmp_path: Path) -> None:
    runner = CliRunner()
    target = tmp_path / "p.git"
    made = runner.invoke(
        main, ["init", str(target)], env={"GITMEM_PASSPHRASE": "pp for the new store"}
    )
    assert made.exit_code == 0, made.output
    assert not list(Path(os.environ["XDG_CONFIG_HOME"]).glob("**/*.key"))
    listed = runner.invoke(
        main,
        ["--repo", str(target), "key", "list", "--json"],
        env={"GITMEM_PASSPHRASE": "pp for the new store"},
    )
    assert json.loads(listed.output)["kind"] == "passphrase"


def test_missing_key_names_the_passphrase_sources(repo_path: Path) -> None:
    MemoryStore.init(repo_path, None, passphrase="the test passphrase", kdf=FAST)
    with pytest.raises(KeyMissing, match="GITMEM_PASSPHRASE"):
        MemoryStore.open(repo_path)


def test_slots_travel_with_a_plain_git_clone(slotted: MemoryStore, tmp_path: Path) -> None:
    bob = slotted.add_key(passphrase="bob's passphrase", label="bob", kdf=FAST)
    head = slotted.head_operation()
    assert head is not None and head.command == "keys" and head.record.detail == {"action": "add"}
    copy = tmp_path / "copy.git"
    subprocess.run(
        ["git", "clone", "--bare", "-q", str(published(slotted.path)), str(copy)],
        check=True,
        capture_output=True,
    )
    replica = MemoryStore.open(copy, passphrase="bob's passphrase")
    assert replica.keyring_slot() == bob and replica.read_text(NOTE) == "hello"
    assert [s["label"] for s in replica.key_slots()] == ["initial key", "alice", "bob"]
    assert replica.verify().ok


# -- key epochs: rotation and revocation -------------------------------------------------------


def head_record(repo_path: Path) -> tuple[bytes, bytes]:
    """The sealed record of the head commit and its associated data."""
    repo = GitRepo(repo_path)
    head = repo.ref(BRANCH)
    assert head is not None
    info = repo.read_commit(head)
    ad = fmt.record_ad(
        StoreMeta.from_bytes(repo.read_blob(repo.ref(META_REF) or "")).store_id,
        info.tree,
        info.parents,
    )
    return fmt.decode_message(info.message), ad


def test_rotation_seals_new_writes_with_a_new_key(
    slotted: MemoryStore, repo_path: Path, key: str
) -> None:
    before = slotted.head()
    old = StoreKeys.derive(crypto.decode_key(key), slotted.keys.store_id)
    assert slotted.rotate_keys() == 1
    rotate = slotted.head_operation()
    assert rotate is not None and rotate.command == "keys" and rotate.parents == (before,)
    assert rotate.epoch == 1 and rotate.paths == ()
    assert rotate.record.detail == {"action": "rotate", "epoch": 1}
    slotted.create(parse("/memories/new.md"), "written after the rotation")
    sealed, ad = head_record(repo_path)
    with pytest.raises(IntegrityError):
        old.open_record(sealed, ad)
    assert slotted.keys.open_record(sealed, ad)
    # The new file's name, header and chunks open with the new epoch only.
    new_node = slotted.snapshot().lookup(parse("/memories/new.md"))
    assert new_node is not None
    with pytest.raises(IntegrityError):
        TreeCodec(GitRepo(repo_path), old).read_file(new_node.oid)
    head = slotted.head_operation()
    assert head is not None
    with pytest.raises(IntegrityError):
        TreeCodec(GitRepo(repo_path), old).load_dir(head.tree, MemoryPath(()))
    # Old epochs stay readable to every current holder, by key and by passphrase.
    for holder in (MemoryStore.open(repo_path, key), slotted):
        assert holder.read_text(NOTE) == "hello"
        assert holder.read_text(NOTE, rev=before) == "hello"
        assert [op.command for op in holder.log()] == ["create", "keys", "keys", "create"]
        assert holder.verify().ok
    alice = MemoryStore.open(repo_path, passphrase="alice's passphrase")
    assert alice.read_text(parse("/memories/new.md")) == "written after the rotation"
    restored = alice.restore(before or "")
    assert restored is not None
    assert restored.epoch == 1 and alice.files() == {"/memories/note.md": "hello"}


def test_removed_passphrase_opens_nothing_written_afterwards(
    slotted: MemoryStore, repo_path: Path
) -> None:
    bob = slotted.add_key(passphrase="bob's passphrase", label="bob", kdf=FAST)
    repo = GitRepo(repo_path)
    kept_meta = repo.ref(META_REF)  # bob's copy of the store, taken before his removal
    old_head = slotted.head()
    assert slotted.remove_key(bob) == 1
    slotted.create(parse("/memories/after.md"), "bob must not read this")
    # Bob fetches the new objects into his old copy: his slot still opens his old keys...
    old = repo.ref(META_REF)
    assert kept_meta is not None and old is not None
    repo.update_ref(META_REF, kept_meta, old)
    as_bob = MemoryStore.open(repo_path, passphrase="bob's passphrase", check_rollback=False)
    assert as_bob.keyring_slot() == bob and as_bob.read_operation(old_head or "").command == "keys"
    # ...and they open nothing written after the removal.
    with pytest.raises(IntegrityError, match="failed authentication"):
        as_bob.read_text(NOTE)
    sealed, ad = head_record(repo_path)
    with pytest.raises(IntegrityError):
        as_bob.keys.open_record(sealed, ad)


def test_a_retired_key_cannot_append(slotted: MemoryStore, repo_path: Path, key: str) -> None:
    slotted.rotate_keys()
    head = slotted.head_operation()
    assert head is not None
    # A holder of a removed slot knows epoch 0 and can write the repository: a commit sealed
    # with it on top of the rotation is refused.
    append_with_epoch_zero(repo_path, key, slotted.keys.store_id, head)
    with pytest.raises(IntegrityError, match="older key epoch than its parent"):
        MemoryStore.open(repo_path, key).read_text(NOTE)
    report = MemoryStore.open(repo_path, key, check_rollback=False).verify()
    assert any("older key epoch" in problem for problem in report.problems)


def test_rotate_and_remove_while_another_holder_has_the_store_open(
    slotted: MemoryStore, repo_path: Path
) -> None:
    other = MemoryStore.open(repo_path, passphrase="alice's passphrase")
    assert other.read_text(NOTE) == "hello"
    slotted.rotate_keys()
    assert other.read_text(NOTE) == "hello"  # catches up from its slot, no passphrase needed
    written = other.create(parse("/memories/b.md"), "from the other holder")
    assert written.epoch == 1 and other.keys.epoch == 1
    slot = other.keyring_slot()
    assert slot is not None
    slotted.remove_key(slot)
    assert slotted.read_text(parse("/memories/b.md")) == "from the other holder"
    with pytest.raises(WrongKey, match="was removed"):
        other.read_text(NOTE)
    with pytest.raises(WrongKey, match="was removed"):
        other.create(parse("/memories/c.md"), "refused")
    assert slotted.kind(parse("/memories/c.md")) is None


def test_rotate_an_empty_store_and_a_store_without_slots(repo_path: Path, key: str) -> None:
    store = MemoryStore.open(repo_path, key, create=True)
    with pytest.raises(UsageError, match="no key slots"):
        store.rotate_keys()
    store.add_key(passphrase="the test passphrase", kdf=FAST)
    assert store.rotate_keys() == 1 and store.head() is None
    op = store.create(NOTE, "first")
    assert op.epoch == 1
    assert store.rotate_keys() == 2
    again = MemoryStore.open(repo_path, passphrase="the test passphrase")
    assert again.keys.epoch == 2 and again.read_text(NOTE) == "first"


def test_cli_rotate(slotted: MemoryStore, repo_path: Path, key: str) -> None:
    runner = CliRunner()
    env = {"GITMEM_REPO": str(repo_path), "GITMEM_KEY": key}
    result = runner.invoke(main, ["key", "rotate"], env=env)
    assert result.exit_code == 0 and result.output == "New writes use key epoch 1\n"
    result = runner.invoke(main, ["key", "rotate", "--json"], env=env)
    assert json.loads(result.output) == {"epoch": 2}
    alice = next(s for s in slotted.key_slots() if s["label"] == "alice")["slot"]
    result = runner.invoke(main, ["key", "remove", alice, "--json"], env=env)
    assert json.loads(result.output) == {"removed": alice, "epoch": 3}
    log = runner.invoke(main, ["log", "--json"], env=env)
    commands = [json.loads(line)["command"] for line in log.output.splitlines()]
    assert commands == ["keys"] * 4 + ["create"]


_HOLDER = """
import sys
from gitmem import MemoryStore
from gitmem.errors import GitMemError
store = MemoryStore.open(sys.argv[1], passphrase="alice's passphrase")
print("ready", store.read_text("/memories/note.md"), flush=True)
for line in sys.stdin:
    try:
        if line.strip() == "read":
            print("read", store.read_text("/memories/note.md"), flush=True)
        else:
            op = store.create("/memories/" + line.strip() + ".md", "from the holder")
            print("wrote", op.epoch, flush=True)
    except GitMemError as exc:
        print("error", type(exc).__name__, flush=True)
"""


def test_rotate_and_remove_while_another_process_holds_the_store_open(
    slotted: MemoryStore, repo_path: Path
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(repo_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None

    def ask(line: str) -> str:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write(line + "\n")
        holder.stdin.flush()
        return holder.stdout.readline().strip()

    try:
        assert holder.stdout.readline().strip() == "ready hello"
        slotted.rotate_keys()
        assert ask("read") == "read hello"
        assert ask("after-rotate") == "wrote 1"
        alice = next(s for s in slotted.key_slots() if s["label"] == "alice")["slot"]
        slotted.remove_key(alice)
        assert ask("read") == "error WrongKey"
        assert ask("after-remove") == "error WrongKey"
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stdout.close()
    assert slotted.read_text(parse("/memories/after-rotate.md")) == "from the holder"
    assert slotted.kind(parse("/memories/after-remove.md")) is None
    assert slotted.verify().ok


def test_cli_key_files_are_owner_only_under_umask_0(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        runner = CliRunner()
        made = runner.invoke(main, ["init", str(tmp_path / "s.git")])
        assert made.exit_code == 0, made.output
        env = {"GITMEM_REPO": str(tmp_path / "s.git")}
        added = runner.invoke(main, ["key", "add"], input="the test passphrase\n", env=env)
        assert added.exit_code == 0, added.output
    finally:
        os.umask(old)
    (key_file,) = Path(os.environ["XDG_CONFIG_HOME"]).glob("gitmem/keys/*.key")
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert key_file.parent.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "s.git").stat().st_mode & 0o777 == 0o700


def test_a_plain_clone_after_removal_carries_the_new_epoch(
    slotted: MemoryStore, tmp_path: Path
) -> None:
    bob = slotted.add_key(passphrase="bob's passphrase", label="bob", kdf=FAST)
    slotted.remove_key(bob)
    slotted.create(parse("/memories/after.md"), "after")
    copy = tmp_path / "copy.git"
    subprocess.run(
        ["git", "clone", "--bare", "-q", str(published(slotted.path)), str(copy)],
        check=True,
        capture_output=True,
    )
    with pytest.raises(WrongPassphrase):
        MemoryStore.open(copy, passphrase="bob's passphrase")
    alice = MemoryStore.open(copy, passphrase="alice's passphrase")
    assert alice.keys.epoch == 1 and alice.read_text(parse("/memories/after.md")) == "after"
    assert alice.verify().ok


def test_a_write_right_after_another_holder_rotated_seals_in_the_new_epoch(
    slotted: MemoryStore, repo_path: Path
) -> None:
    other = MemoryStore.open(repo_path, passphrase="alice's passphrase")
    other.create(parse("/memories/b.md"), "before")
    slotted.rotate_keys()
    # No read in between: the write itself notices that the metadata ref moved.
    written = other.create(parse("/memories/c.md"), "after")
    assert written.epoch == 1 and other.keys.epoch == 1
    assert slotted.read_text(parse("/memories/c.md")) == "after"


@pytest.mark.parametrize("which", ["unknown", "a key slot"])
def test_key_passwd_refuses_a_slot_before_asking_for_the_passphrase(
    repo_path: Path, key: str, which: str
) -> None:
    # The slot was checked only after the new passphrase had been read (typed twice on a
    # terminal), so a mistyped slot id wasted it, and an empty stdin was blamed instead.
    store = MemoryStore.open(repo_path, key, create=True)
    store.add_key(passphrase="pass one of two", kdf=FAST)
    key_slot = next(row["slot"] for row in store.key_slots() if row["kind"] == "key")
    slot = "0badf00d" if which == "unknown" else key_slot
    env = {"GITMEM_REPO": str(repo_path), "GITMEM_KEY": key}
    result = CliRunner().invoke(main, ["key", "passwd", slot], input="", env=env)
    assert result.exit_code == 2, result.output
    assert ("no key slot" if which == "unknown" else "holds a key") in result.output
    assert "passphrase on stdin" not in result.output
    with pytest.raises(UsageError, match="not a passphrase"):
        store.check_passphrase_slot(key_slot)
