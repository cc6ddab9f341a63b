"""ssh remotes: the host key must be the one ``~/.ssh/known_hosts`` holds, as ssh and git insist.

Against a real ``sshd`` on 127.0.0.1 with its own host key: an unknown host is refused with its
key's fingerprint and how to trust it, unless trust on first use is asked for; a changed key
is always refused; plain, ``[host]:port`` and hashed entries are all honoured.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers_git_servers import SshServer, sshd

from gitmem import MemoryStore
from gitmem.cli import main
from gitmem.errors import HostKeyRefused, UsageError
from gitmem.knownhosts import SshHost, has_entry, ssh_host
from gitmem.paths import parse


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    with sshd(tmp_path_factory.mktemp("sshd")) as running:
        yield running


@pytest.fixture
def setup(
    server: SshServer, tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[MemoryStore, Path, Path]:
    monkeypatch.setenv("GITMEM_SSH_KEY", str(server.user_key))
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--bare", "-q", str(origin)], check=True)
    store = MemoryStore.init(tmp_path / "a.git", key, state_dir=tmp_path / "state")
    store.create(parse("/memories/notes.md"), "1\n")
    known = Path(os.environ["HOME"]) / ".ssh" / "known_hosts"
    return store, origin, known


def fingerprint(host_key: str) -> str:
    digest = hashlib.sha256(base64.b64decode(host_key.split()[1])).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def remote_heads(origin: Path) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(origin), "for-each-ref"], capture_output=True, text=True
    ).stdout


def write_known(known: Path, line: str) -> None:
    known.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    known.write_text(line + "\n")


def test_an_unknown_host_is_refused_with_its_fingerprint(
    server: SshServer, setup: tuple[MemoryStore, Path, Path]
) -> None:
    store, origin, known = setup
    with pytest.raises(HostKeyRefused) as refused:
        store.push(server.url(origin))
    message = str(refused.value)
    assert message.startswith(f"the ssh host {server.pattern} is not in {known} (host key ")
    assert fingerprint(server.host_key) in message
    assert f"ssh-keyscan -p {server.port} 127.0.0.1 >> {known}" in message
    assert "GITMEM_SSH_TRUST_NEW=1" in message
    assert remote_heads(origin) == ""  # nothing was sent
    assert not known.exists()  # and nothing trusted behind the user's back


def test_a_changed_host_key_is_refused_and_says_host_key(
    server: SshServer, setup: tuple[MemoryStore, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, origin, known = setup
    other = " ".join(server.user_key.with_suffix(".pub").read_text().split()[:2])
    write_known(known, f"{server.pattern} {other}")
    # Trust on first use never covers a key that changed.
    for trust in ("0", "1"):
        monkeypatch.setenv("GITMEM_SSH_TRUST_NEW", trust)
        with pytest.raises(HostKeyRefused, match=r"host key of .* does not match") as refused:
            store.push(server.url(origin))
        assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in str(refused.value)
        assert f"ssh-keygen -R '{server.pattern}'" in str(refused.value)
    assert remote_heads(origin) == ""
    assert known.read_text() == f"{server.pattern} {other}\n"


def test_plain_and_hashed_entries_let_the_host_in(
    server: SshServer, setup: tuple[MemoryStore, Path, Path], tmp_path: Path, key: str
) -> None:
    store, origin, known = setup
    write_known(known, f"{server.pattern} {server.host_key}")
    assert store.push(server.url(origin)).action == "pushed"
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True, capture_output=True)
    assert known.read_text().startswith("|1|")
    assert has_entry(SshHost("127.0.0.1", server.port), known)
    clone = MemoryStore.clone(
        server.url(origin), tmp_path / "b.git", key, state_dir=tmp_path / "state-b"
    )
    assert clone.files() == store.files()


def test_trust_on_first_use_records_the_key_then_checks_it(
    server: SshServer,
    setup: tuple[MemoryStore, Path, Path],
    key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, origin, known = setup
    monkeypatch.setenv("GITMEM_SSH_TRUST_NEW", "1")
    assert store.push(server.url(origin)).action == "pushed"
    assert f"{server.pattern} {server.host_key}" in known.read_text().splitlines()
    assert known.stat().st_mode & 0o077 == 0
    store.create(parse("/memories/more.md"), "2\n")
    monkeypatch.delenv("GITMEM_SSH_TRUST_NEW")
    assert store.push(server.url(origin)).action == "pushed"


def test_the_command_line_refuses_an_unknown_host(
    server: SshServer, setup: tuple[MemoryStore, Path, Path], key: str
) -> None:
    store, origin, _ = setup
    store.close()
    result = CliRunner().invoke(
        main,
        ["--repo", str(store.path), "push", server.url(origin)],
        env={"GITMEM_KEY": key, "GITMEM_STATE_DIR": str(store.path.parent / "state")},
    )
    assert result.exit_code == 10
    assert result.stderr.startswith(f"gitmem: error: the ssh host {server.pattern} is not in ")
    assert remote_heads(origin) == ""


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("ssh://git@example.org/r.git", SshHost("example.org")),
        ("ssh://git@example.org:2222/r.git", SshHost("example.org", 2222)),
        ("git@example.org:team/r.git", SshHost("example.org")),
        ("example.org:r.git", SshHost("example.org")),
        ("https://example.org/r.git", None),
        ("git://example.org/r.git", None),
        ("/srv/r.git", None),
    ],
)
def test_which_urls_are_ssh(url: str, host: SshHost | None) -> None:
    assert ssh_host(url) == host


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n", "holds key text"),
        ("gitmem-key-1:" + "A" * 43, "holds a gitmem store key"),
        ("{missing}", "which is not a file"),
    ],
)
def test_a_gitmem_ssh_key_that_is_no_key_file_is_refused_without_showing_it(
    server: SshServer,
    setup: tuple[MemoryStore, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    says: str,
) -> None:
    store, origin, known = setup
    write_known(known, f"{server.pattern} {server.host_key}")
    value = value.format(missing=store.path.parent / "no-such-key")
    monkeypatch.setenv("GITMEM_SSH_KEY", value)
    with pytest.raises(UsageError, match=says) as refused:
        store.push(server.url(origin))
    if "not a file" not in says:
        assert value.strip() not in str(refused.value)
        assert "b3BlbnNzaC1rZXktdjE" not in str(refused.value)
    assert remote_heads(origin) == ""
