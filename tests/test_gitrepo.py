"""gitmem's own readers of raw git objects (git_objects.parse_tree / parse_commit / _read_loose).

Valid objects must read exactly as libgit2 reads them; anything git's writer would not make
must be an IntegrityError, never a wrong answer or another exception.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import zlib
from pathlib import Path

import pygit2
import pytest
from helpers_repo import checkpoint_loose

from gitmem.errors import FormatLimitExceeded, IntegrityError
from gitmem.git import files as git_files
from gitmem.git import objects as git_objects
from gitmem.git import repo as git_repo
from gitmem.git.objects import BLOB_MODE, TREE_MODE, TreeEntry, parse_commit, parse_tree
from gitmem.git.refs import BRANCH
from gitmem.git.repo import GitRepo

# Each test runs in every write mode of the platform (tests/conftest.py, write_mode).
pytestmark = pytest.mark.usefixtures("write_mode")

ID_A = "a" * 40
ID_B = "0123456789abcdef0123456789abcdef01234567"


def entry(mode: bytes, name: bytes, oid: str = ID_A) -> bytes:
    return mode + b" " + name + b"\0" + bytes.fromhex(oid)


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo.init(tmp_path / "r.git")


def write_loose(repo: GitRepo, kind: bytes, payload: bytes) -> str:
    """Store an object as git would, whatever its content (no parse check)."""
    raw = kind + b" " + str(len(payload)).encode() + b"\0" + payload
    oid = hashlib.sha1(raw).hexdigest()
    target = repo.path / "objects" / oid[:2] / oid[2:]
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(zlib.compress(raw))
    return oid


def test_trees_read_as_libgit2_reads_them(repo: GitRepo) -> None:
    blob = repo.write_blob(b"x")
    inner = repo.write_tree([TreeEntry("f", blob, BLOB_MODE)])
    names = ["a", "a.b", "a-", "b", "ü", "c00000000", "h", "Z", "a0"]
    entries = [TreeEntry(n, blob, BLOB_MODE) for n in names] + [
        TreeEntry("ab", inner, TREE_MODE),
        TreeEntry("a0", inner, TREE_MODE),
    ]
    oid = repo.write_tree(entries)
    ours = repo.read_tree(oid)
    checkpoint_loose(repo)  # with the redo log, objects reach the repository at checkpoints
    git = pygit2.Repository(str(repo.path))
    theirs = [TreeEntry(str(e.name), str(e.id), int(e.filemode)) for e in git[oid]]  # type: ignore[attr-defined]
    assert ours == theirs
    assert repo.read_tree(repo.empty_tree()) == []


def test_commits_read_as_libgit2_reads_them(repo: GitRepo) -> None:
    tree = repo.empty_tree()
    first = repo.write_commit(tree, [], b"first\n\nbody\n\n", time=1)
    second = repo.write_commit(tree, [first, first], b"second", time=2)
    checkpoint_loose(repo)
    git = pygit2.Repository(str(repo.path))
    for oid in (first, second):
        info = repo.read_commit(oid)
        commit = git[oid]
        assert isinstance(commit, pygit2.Commit)
        assert info.tree == str(commit.tree_id)
        assert info.parents == tuple(str(p) for p in commit.parent_ids)
        assert info.message == commit.raw_message


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(entry(b"100644", b"b") + entry(b"100644", b"a"), id="out of order"),
        pytest.param(entry(b"100644", b"a") + entry(b"100644", b"a"), id="duplicate"),
        pytest.param(entry(b"100644", b"a") + entry(b"40000", b"a"), id="file and tree"),
        pytest.param(entry(b"40000", b"a") + entry(b"100644", b"a.b"), id="tree sorts as a/"),
        pytest.param(entry(b"040000", b"a"), id="leading zero"),
        pytest.param(entry(b"100648", b"a"), id="not octal"),
        pytest.param(entry(b"", b"a"), id="no mode"),
        pytest.param(entry(b"100644", b""), id="empty name"),
        pytest.param(entry(b"100644", b"a/b"), id="slash"),
        pytest.param(entry(b"100644", b"\xff"), id="not utf-8"),
        pytest.param(entry(b"100644", b"a")[:-1], id="short id"),
        pytest.param(b"100644 a", id="no nul"),
        pytest.param(b"100644a\0" + bytes(20), id="no space"),
        pytest.param(b"1006440000 a\0" + bytes(20), id="long mode"),
    ],
)
def test_malformed_trees_are_refused(data: bytes) -> None:
    with pytest.raises(IntegrityError, match="tree t is malformed"):
        parse_tree(data, "t")


def test_a_well_formed_tree_parses() -> None:
    # git's order: a tree's name sorts as if it ended in "/" ("a" < "a.b" < "a0.c" < "a0/").
    data = (
        entry(b"100644", b"a")
        + entry(b"100644", b"a.b")
        + entry(b"100755", b"a0.c")
        + entry(b"100664", b"a0.d")  # a mode git no longer writes: read digit by digit
        + entry(b"40000", b"a0", ID_B)
    )
    assert parse_tree(data, "t") == [
        TreeEntry("a", ID_A, BLOB_MODE),
        TreeEntry("a.b", ID_A, BLOB_MODE),
        TreeEntry("a0.c", ID_A, 0o100755),
        TreeEntry("a0.d", ID_A, 0o100664),
        TreeEntry("a0", ID_B, TREE_MODE),
    ]


AUTHOR = b"author a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"tree " + ID_A.encode() + b"\n" + AUTHOR, id="no blank line"),
        pytest.param(b"parent " + ID_A.encode() + b"\n" + AUTHOR + b"\nm", id="no tree"),
        pytest.param(b"tree " + ID_A.upper().encode() + b"\n" + AUTHOR + b"\nm", id="upper hex"),
        pytest.param(b"tree " + ID_A[:39].encode() + b"\n" + AUTHOR + b"\nm", id="short tree"),
        pytest.param(
            b"tree " + ID_A.encode() + b"\nparent xyz\n" + AUTHOR + b"\nm", id="bad parent"
        ),
        pytest.param(b"tree " + ID_A.encode() + b"\n\nm", id="no author"),
    ],
)
def test_malformed_commits_are_refused(data: bytes) -> None:
    with pytest.raises(IntegrityError, match=r"commit c is malformed|is not an object id"):
        parse_commit(data, "c")


def test_extra_commit_headers_are_ignored_as_git_does() -> None:
    # Headers after the committer are not parents, even one that says so (git ignores it too).
    data = (
        b"tree " + ID_A.encode() + b"\nparent " + ID_B.encode() + b"\n" + AUTHOR
        + b"encoding UTF-8\nparent " + ID_A.encode() + b"\ngpgsig x\n y\n\nthe message"
    )  # fmt: skip
    info = parse_commit(data, "c")
    assert (info.tree, info.parents, info.message) == (ID_A, (ID_B,), b"the message")


def test_objects_of_the_wrong_kind_are_refused(repo: GitRepo) -> None:
    blob = repo.write_blob(b"not a tree")
    tree = repo.empty_tree()
    with pytest.raises(IntegrityError, match=f"object {blob} should be a tree"):
        repo.read_tree(blob)
    with pytest.raises(IntegrityError, match=f"object {tree} should be a commit"):
        repo.read_commit(tree)
    with pytest.raises(IntegrityError, match=f"object {tree} should be a blob"):
        repo.read_blob(tree)
    with pytest.raises(IntegrityError, match="is missing from the repository"):
        repo.read_blob(ID_A)


def test_a_malformed_tree_on_disk_is_an_integrity_error(repo: GitRepo) -> None:
    oid = write_loose(repo, b"tree", entry(b"100644", b"b") + entry(b"100644", b"a"))
    with pytest.raises(IntegrityError, match="out of order"):
        repo.read_tree(oid)


def test_packed_objects_read_the_same(repo: GitRepo) -> None:
    blob = repo.write_blob(b"payload")
    tree = repo.write_tree([TreeEntry("f", blob, BLOB_MODE)])
    commit = repo.write_commit(tree, [], b"m", time=1)
    repo.create_ref("refs/heads/main", commit)
    before = (repo.read_blob(blob), repo.read_tree(tree), repo.read_commit(commit))
    repo.gc(grace=0)
    assert not any((repo.path / "objects" / blob[:2]).glob("*"))
    assert (repo.read_blob(blob), repo.read_tree(tree), repo.read_commit(commit)) == before


@pytest.mark.needs_log  # a checkpoint writes a pack only with the log
def test_a_packed_object_is_read_from_its_pack_without_opening_a_loose_file(
    repo: GitRepo,
) -> None:
    # Packs are read first, by a libgit2 database of the packs alone: a loose file under the
    # same id (here another object's bytes, which would fail its hash check) is not opened,
    # neither by gitmem's own loose reader nor by libgit2 (whose whole database reads by
    # prefix, asking every backend). Each look was a failed open per object read.
    oid = repo.write_blob(b"packed")
    repo.checkpoint(clear=True)
    assert not (repo.path / "objects" / oid[:2]).exists()
    path = repo.path / "objects" / oid[:2] / oid[2:]
    path.parent.mkdir()
    path.write_bytes(zlib.compress(b"blob 5\0other"))
    assert repo.read_blob(oid) == b"packed"
    path.unlink()
    # Not in a pack: read from its loose file, by gitmem, its hash checked.
    loose = write_loose(repo, b"blob", b"loose")
    assert repo.read_blob(loose) == b"loose"
    bad = repo.path / "objects" / loose[:2] / loose[2:]
    bad.write_bytes(zlib.compress(b"blob 5\0other"))
    with pytest.raises(IntegrityError, match="does not match its id"):
        repo.read_blob(loose)


@pytest.mark.needs_log  # a checkpoint writes a pack only with the log
def test_a_damaged_pack_gives_way_to_a_loose_copy(tmp_path: Path) -> None:
    repo = GitRepo.init(tmp_path / "r.git")
    oid = repo.write_blob(b"a blob in one pack")
    repo.checkpoint(clear=True)
    (pack,) = (repo.path / "objects" / "pack").glob("*.pack")
    data = bytearray(pack.read_bytes())
    data[-20 - 4 - 3] ^= 0xFF  # a byte of the object's data (before its checksum, the trailer)
    pack.chmod(0o600)
    pack.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=f"object {oid} is corrupt"):
        GitRepo(repo.path).read_blob(oid)
    # As git does, a damaged packed copy gives way to a loose one (read and checked here).
    write_loose(repo, b"blob", b"a blob in one pack")
    assert GitRepo(repo.path).read_blob(oid) == b"a blob in one pack"


def test_objects_borrowed_from_another_repository_are_read(repo: GitRepo, tmp_path: Path) -> None:
    # A repository made with `git clone --shared` names another's objects in
    # objects/info/alternates: an object in neither its packs nor its loose files is read
    # through libgit2's whole database, which follows them.
    lender = GitRepo.init(tmp_path / "lender.git")
    packed = lender.write_blob(b"lent, packed")
    lender.checkpoint(clear=True)
    loose = write_loose(lender, b"blob", b"lent, loose")
    (repo.path / "objects" / "info" / "alternates").write_text(
        str(lender.path / "objects") + "\n", encoding="utf-8"
    )
    assert repo.read_blob(packed) == b"lent, packed"
    assert repo.read_blob(loose) == b"lent, loose"
    with pytest.raises(IntegrityError, match="missing"):
        repo.read_blob("1" * 40)


def test_a_store_flushes_after_another_on_its_file_system_was_deleted(tmp_path: Path) -> None:
    # Flushes are shared per file system; each flushes through its own repository's path.
    for name in ("first.git", "second.git"):
        repo = GitRepo.init(tmp_path / name)
        blob = repo.write_blob(b"x")
        repo.create_ref("refs/gitmem/meta", blob)
        assert repo.ref("refs/gitmem/meta") == blob
        shutil.rmtree(tmp_path / name)


# -- sizes: what the format allows each kind (docs/design.md, "Sizes") ----------------------------


def test_writes_larger_than_the_format_allows_are_refused(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob = repo.write_blob(b"x")
    monkeypatch.setattr(git_repo, "MAX_TREE_BYTES", 100)
    monkeypatch.setattr(git_repo, "MAX_COMMIT_BYTES", 300)
    monkeypatch.setattr(git_repo, "MAX_BLOB_BYTES", 10)
    with pytest.raises(FormatLimitExceeded, match="refused to write a tree"):
        repo.write_tree([TreeEntry(f"name{i}", blob, BLOB_MODE) for i in range(4)])
    with pytest.raises(FormatLimitExceeded, match="refused to write a commit"):
        repo.write_commit(repo.empty_tree(), [], b"m" * 200, time=1)
    with pytest.raises(FormatLimitExceeded, match="refused to write a blob"):
        repo.write_blob(b"x" * 11)


def test_an_object_inflating_past_its_declared_size_is_refused(repo: GitRepo) -> None:
    payload = b"twelve bytes"
    raw = b"blob 5\0" + payload
    oid = hashlib.sha1(raw).hexdigest()
    target = repo.path / "objects" / oid[:2] / oid[2:]
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(zlib.compress(raw))
    with pytest.raises(IntegrityError, match="header is malformed"):
        repo.read_blob(oid)


def test_a_blob_over_the_callers_bound_is_refused_before_inflating(repo: GitRepo) -> None:
    oid = repo.write_blob(b"y" * 5000)
    with pytest.raises(IntegrityError, match="declares 5,000 bytes, more than a gitmem blob"):
        repo.read_blob(oid, 4999)
    assert repo.read_blob(oid, 5000) == b"y" * 5000


def test_a_fifo_in_place_of_a_loose_object_is_an_error_not_a_hang(repo: GitRepo) -> None:
    oid = repo.write_blob(b"z")
    checkpoint_loose(repo)
    path = repo.path / "objects" / oid[:2] / oid[2:]
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(IntegrityError, match="cannot be read: not a regular file"):
        repo.read_blob(oid)


# -- refs: loose refs are read without libgit2, exactly as libgit2 reads them ------------------


@pytest.mark.parametrize(
    "content",
    [
        f"{ID_B}\n",
        ID_B,
        f"{ID_B} and whatever follows whitespace\n",
        f"{ID_B}\r\n",
        ID_B.upper() + "\n",
        f"{ID_B}x\n",
        ID_B[:39] + "\n",
        "",
        "\n",
        "ref: refs/heads/other\n",
        "not an object id at all, but forty characters long\n",
        ("g" * 40) + "\n",
    ],
)
def test_loose_refs_read_as_libgit2_reads_them(repo: GitRepo, content: str) -> None:
    (repo.path / "refs" / "heads" / "main").write_text(content)
    try:
        target = pygit2.Repository(str(repo.path)).references["refs/heads/main"].target
        theirs: str | None = str(target) if isinstance(target, pygit2.Oid) else "symbolic"
    except (pygit2.GitError, ValueError):
        theirs = None
    if theirs is None:
        with pytest.raises(IntegrityError, match="the ref refs/heads/main is corrupt"):
            repo.ref("refs/heads/main")
    elif theirs == "symbolic":
        with pytest.raises(IntegrityError, match="is symbolic"):
            repo.ref("refs/heads/main")
    else:
        assert repo.ref("refs/heads/main") == theirs


def test_packed_and_linked_refs_are_read_too(repo: GitRepo, tmp_path: Path) -> None:
    heads = repo.path / "refs" / "heads"
    (repo.path / "packed-refs").write_text(f"{ID_A} refs/heads/packed\n")
    assert repo.ref("refs/heads/packed") == ID_A
    assert repo.ref("refs/heads/missing") is None
    (tmp_path / "elsewhere").write_text(f"{ID_B}\n")
    (heads / "linked").symlink_to(tmp_path / "elsewhere")
    assert repo.ref("refs/heads/linked") == ID_B
    # Neither a FIFO nor a directory is ever opened as a ref, directly or through a link.
    os.mkfifo(tmp_path / "fifo")
    (heads / "to-fifo").symlink_to(tmp_path / "fifo")
    os.mkfifo(heads / "fifo")
    (heads / "dir").mkdir()
    for name in ("to-fifo", "fifo", "dir"):
        with pytest.raises(IntegrityError, match="is not a regular file"):
            repo.ref(f"refs/heads/{name}")


def test_reflogs_stay_off_when_the_config_changes_after_it_was_found_clean(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config found clean is not parsed again while it is the same file; any change to it
    (rewritten in place, or replaced) is looked at under the next lock."""
    # Every config counts as old enough to be remembered (in a test it is seconds old at most).
    monkeypatch.setattr(git_files, "_RACY_SECONDS", -60.0)
    monkeypatch.setattr(git_files, "_RACY_FINE_SECONDS", -60.0)
    config = repo.path / "config"
    for change in ("in place", "replaced"):
        with repo.write_lock(5):
            pass
        assert repo.config._clean_config is not None  # remembered as clean
        text = config.read_text() + "[core]\n\tlogAllRefUpdates = always\n"
        if change == "in place":
            with config.open("a") as handle:
                handle.write("[core]\n\tlogAllRefUpdates = always\n")
        else:
            (repo.path / "config.new").write_text(text)
            os.replace(repo.path / "config.new", config)
        with repo.write_lock(5):
            setting = pygit2.Repository(str(repo.path)).config["core.logAllRefUpdates"]
            assert str(setting) == "false", change


# -- objects: written as loose files by gitmem, byte for byte what libgit2 writes --------------


def test_objects_are_written_as_libgit2_writes_them(repo: GitRepo) -> None:
    git = pygit2.Repository(str(repo.path))
    blob = repo.write_blob(b"some bytes\0\xff")
    assert blob == str(git.create_blob(b"some bytes\0\xff"))
    tree = repo.write_tree([TreeEntry("b", blob, BLOB_MODE)])
    checkpoint_loose(repo)
    assert git[tree].type == pygit2.enums.ObjectType.TREE
    parents: list[str] = []
    for message in (b"first", b"second\n\nwith lines\n", b"\xffbinary"):
        seq = len(parents) + 1
        ours = repo.write_commit(tree, parents, message, time=seq)
        signature = pygit2.Signature("gitmem", "gitmem@invalid", seq, 0)
        oids = [pygit2.Oid(hex=p) for p in parents]
        theirs = git.create_commit(None, signature, signature, message, git[tree].id, oids)
        assert ours == str(theirs)
        assert repo.read_commit(ours).message == message
        parents = [*parents, ours]
    # Written again, an object is the same file; no temporary file is left behind.
    assert repo.write_blob(b"some bytes\0\xff") == blob
    assert not [p for p in (repo.path / "objects").iterdir() if p.name.startswith("tmp")]
    assert repo.read_blob(blob) == b"some bytes\0\xff"


@pytest.mark.parametrize("size", [0, 1, 300, 65534, 65535, 65536, 3 * 65535 + 7])
def test_loose_objects_are_zlib_streams_any_reader_inflates(repo: GitRepo, size: int) -> None:
    payload = os.urandom(size)
    oid = repo.objects.write_loose(b"blob", payload)  # how a checkpoint before packs wrote objects
    stream = (repo.path / "objects" / oid[:2] / oid[2:]).read_bytes()
    assert zlib.decompress(stream) == b"blob %d\0" % size + payload
    assert len(stream) <= git_objects._deflate_bound(size + 16)  # what the reader allows
    assert repo.read_blob(oid) == payload
    git = pygit2.Repository(str(repo.path))
    assert git.odb.read(oid)[1] == payload


def test_a_ref_known_by_its_file_is_read_again_once_the_file_changes(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ref file is remembered by its identity only once it is old enough that any change
    must show in its times; a ref moved by anyone (a new file) is read again."""
    ref = repo.path / "refs" / "heads" / "main"
    ref.write_text(f"{ID_A}\n")
    assert repo.ref(BRANCH) == ID_A
    assert BRANCH not in repo.refs._refs  # just written: not remembered (git's racy rule)
    # Every file counts as old enough.
    monkeypatch.setattr(git_files, "_RACY_SECONDS", -60.0)
    monkeypatch.setattr(git_files, "_RACY_FINE_SECONDS", -60.0)
    assert repo.ref(BRANCH) == ID_A
    assert BRANCH in repo.refs._refs
    moved = repo.write_blob(b"another commit, as far as the ref is concerned")
    checkpoint_loose(repo)
    git = pygit2.Repository(str(repo.path))
    git.references.create(BRANCH, pygit2.Oid(hex=moved), force=True)  # another program moves it
    assert repo.ref(BRANCH) == moved
    ref.unlink()
    assert repo.ref(BRANCH) is None
    os.mkfifo(ref)
    with pytest.raises(IntegrityError, match="is not a regular file"):
        repo.ref(BRANCH)


def test_a_file_is_settled_only_well_after_its_last_change() -> None:
    """git's racy rule: sub-second timestamps (a tick coarse) settle after 50 ms, whole-second
    ones (FAT, old ext3) after two seconds."""

    def changed_at(ns: int) -> os.stat_result:
        seconds = ns / 1e9
        times = (int(seconds),) * 3 + (seconds,) * 3 + (ns,) * 3
        return os.stat_result((0o100600, 1, 1, 1, 0, 0, 41, *times))

    fine, coarse = changed_at(1_000_000_007), changed_at(1_000_000_000)
    assert fine.st_ctime_ns == 1_000_000_007 and coarse.st_ctime_ns == 1_000_000_000
    assert not git_files.settled(fine, fine.st_ctime + 0.01)
    assert git_files.settled(fine, fine.st_ctime + 0.06)
    assert not git_files.settled(coarse, coarse.st_ctime + 1.5)
    assert git_files.settled(coarse, coarse.st_ctime + 2.5)


def _open_removed_packs(repo: GitRepo) -> list[str]:
    """The files of ``repo``'s pack directory this process holds open though they are gone."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(repo.path / "objects" / "pack")) and "(deleted)" in target:
                held.append(target)
    return held


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
@pytest.mark.needs_log  # a checkpoint writes a pack only with the log
def test_maintenance_lets_go_of_the_packs_it_removes(repo: GitRepo) -> None:
    # Both libgit2 handles a reader keeps (the repository, and the database of its packs that
    # objects are read through first) are dropped once gc removes packs: their files go.
    blobs = []
    for i in range(3):
        blobs.append(repo.write_blob(b"blob %d" % i))
        repo.checkpoint(clear=True)
    tree = repo.write_tree([TreeEntry(f"f{i}", oid, BLOB_MODE) for i, oid in enumerate(blobs)])
    repo.create_ref(BRANCH, repo.write_commit(tree, [], b"m", time=1))
    assert len(list((repo.path / "objects" / "pack").glob("*.pack"))) >= 3
    assert [repo.read_blob(oid) for oid in blobs] == [b"blob 0", b"blob 1", b"blob 2"]
    repo.gc(grace=0)
    assert _open_removed_packs(repo) == []
    assert repo.read_blob(blobs[-1]) == b"blob 2"


def test_gitmem_gitrepo_keeps_the_names_python_api_md_gives() -> None:
    from gitmem import gitrepo

    assert gitrepo.GitRepo is GitRepo
    assert gitrepo.EXIT_LOCK_SECONDS == git_repo.EXIT_LOCK_SECONDS
    assert gitrepo.publish_logged is git_repo.publish_logged
