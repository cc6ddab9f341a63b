"""ssh host keys: why a connection's host key was refused, and trust on first use.

libgit2 checks an ssh host's key against ``~/.ssh/known_hosts`` (plain, ``[host]:port`` and
hashed entries alike) and says only whether it matched. This module tells the two refusals
apart for the message: a host with no entry at all (unknown: its key's fingerprint and how to
trust it) and a host whose entry holds another key (changed: never accepted). With
``GITMEM_SSH_TRUST_NEW=1`` an unknown host's keys are added to ``known_hosts`` first, as
OpenSSH's ``StrictHostKeyChecking=accept-new`` does; a changed key is refused all the same.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .errors import HostKeyRefused

ENV_TRUST_NEW = "GITMEM_SSH_TRUST_NEW"
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>\[[^\]]+\]|[^/:]+):(?!//)")
_SCAN_SECONDS = 5
_KNOWN_HOSTS_MAX = 4 << 20


@dataclass(frozen=True)
class SshHost:
    """Where an ssh URL connects: ``host`` and ``port`` (22 unless the URL says otherwise)."""

    host: str
    port: int = 22

    @property
    def pattern(self) -> str:
        """The host as ``known_hosts`` names it: ``host``, or ``[host]:port`` off port 22."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def ssh_host(url: str) -> SshHost | None:
    """The host an ``ssh://`` or scp-like ``user@host:path`` URL connects to; None otherwise."""
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme not in ("ssh", "git+ssh", "ssh+git") or not parts.hostname:
            return None
        try:
            port = parts.port or 22
        except ValueError:
            return None
        return SshHost(parts.hostname, port)
    found = _SCP_LIKE.match(url)
    if found is None:
        return None
    return SshHost(found.group("host").strip("[]"))


def known_hosts_file() -> Path:
    """The file libgit2 reads: ``~/.ssh/known_hosts`` of the user running gitmem."""
    return Path(os.path.expanduser("~")) / ".ssh" / "known_hosts"


def _names_match(field: str, pattern: str) -> bool:
    """Whether a ``known_hosts`` host field (a comma list, maybe hashed) names ``pattern``."""
    if field.startswith("|1|"):
        try:
            _, _, salt, digest = field.split("|", 3)
            key = base64.b64decode(salt, validate=True)
            want = base64.b64decode(digest, validate=True)
        except (ValueError, binascii.Error):
            return False
        mine = hmac.new(key, pattern.encode("utf-8"), hashlib.sha1).digest()
        return hmac.compare_digest(mine, want)
    names = [name for name in field.split(",") if not name.startswith("!")]
    return pattern in names


def has_entry(host: SshHost, path: Path | None = None) -> bool:
    """Whether ``known_hosts`` names ``host`` at all (whatever key it holds for it)."""
    path = known_hosts_file() if path is None else path
    try:
        with open(path, "rb") as handle:
            text = handle.read(_KNOWN_HOSTS_MAX).decode("utf-8", "replace")
    except OSError:
        return False
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[0].startswith("#"):
            continue
        if fields[0].startswith("@"):  # @cert-authority, @revoked: a marker before the names
            fields = fields[1:]
            if len(fields) < 3:
                continue
        if _names_match(fields[0], host.pattern):
            return True
    return False


def fingerprint(blob_base64: str) -> str:
    """An OpenSSH key fingerprint (``SHA256:...``) of a key in ``known_hosts`` form."""
    digest = hashlib.sha256(base64.b64decode(blob_base64)).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def scan(host: SshHost) -> list[str]:
    """The host's public keys as ``known_hosts`` lines (``ssh-keyscan``); [] when it cannot
    tell (no ``ssh-keyscan``, no answer within a few seconds)."""
    program = shutil.which("ssh-keyscan")
    if program is None:
        return []
    try:
        done = subprocess.run(
            [program, "-T", str(_SCAN_SECONDS), "-p", str(host.port), "--", host.host],
            capture_output=True,
            timeout=_SCAN_SECONDS * 3,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    lines = []
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        fields = line.split()
        if len(fields) >= 3 and not line.startswith("#"):
            try:
                fingerprint(fields[2])
            except (ValueError, binascii.Error):
                continue
            lines.append(f"{host.pattern} {fields[1]} {fields[2]}")
    return lines


def _trust(lines: list[str], path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))


def refused(url: str) -> HostKeyRefused | None:
    """Why the ssh host of ``url`` is refused, as the error to raise; None when it is trusted
    now on first use (``GITMEM_SSH_TRUST_NEW=1`` and no entry for the host before)."""
    host = ssh_host(url)
    where = url if host is None else host.pattern
    path = known_hosts_file()
    if host is not None and has_entry(host, path):
        return HostKeyRefused(
            f"the ssh host key of {where} does not match the one {path} holds for it (REMOTE "
            "HOST IDENTIFICATION HAS CHANGED): someone may be in the middle, or the host was "
            "given a new key. Nothing was sent. If the host's owner confirms the new key, "
            f"remove the old one (ssh-keygen -R '{where}') and connect again"
        )
    keys = [] if host is None else scan(host)
    if keys and os.environ.get(ENV_TRUST_NEW) == "1":
        _trust(keys, path)
        return None
    prints = ", ".join(
        sorted({f"{line.split()[1]} {fingerprint(line.split()[2])}" for line in keys})
    )
    shown = f" (host key {prints})" if prints else ""
    port = "" if host is None or host.port == 22 else f"-p {host.port} "
    name = where if host is None else host.host
    return HostKeyRefused(
        f"the ssh host {where} is not in {path}{shown}, so its host key cannot be checked. "
        "Nothing was sent. Check the fingerprint with the host's owner, then trust it with "
        f"`ssh-keyscan {port}{name} >> {path}` (or connect once with ssh), or set "
        f"{ENV_TRUST_NEW}=1 to trust a host's key the first time gitmem connects to it"
    )
