"""Real git servers on 127.0.0.1 for sync tests: ``git daemon``, smart HTTP (``http-backend``)
and ``sshd``.

Each is started and stopped by the tests that use it, serves only a temporary directory, and
listens on loopback only.
"""

from __future__ import annotations

import base64
import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

GIT_CORE = Path("/usr/lib/git-core")


def git_tool(name: str) -> str | None:
    """The path of a git helper program (``git-daemon``, ``git-http-backend``), or None."""
    candidate = GIT_CORE / name
    if candidate.is_file():
        return str(candidate)
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout
    found = Path(exec_path.strip()) / name
    return str(found) if found.is_file() else shutil.which(name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bare_repo(root: Path, name: str) -> Path:
    """An empty bare repository ``root/name`` that accepts pushes over HTTP too."""
    path = root / name
    subprocess.run(["git", "init", "--bare", "-q", str(path)], check=True)
    subprocess.run(
        ["git", "--git-dir", str(path), "config", "http.receivepack", "true"], check=True
    )
    return path


@contextlib.contextmanager
def git_daemon(root: Path) -> Iterator[str]:
    """``git daemon`` serving ``root`` with pushes enabled; yields ``git://127.0.0.1:PORT``."""
    daemon = git_tool("git-daemon")
    assert daemon is not None, "git-daemon is missing (install git)"
    port = free_port()
    proc = subprocess.Popen(
        [
            daemon,
            "--reuseaddr",
            "--listen=127.0.0.1",
            f"--port={port}",
            f"--base-path={root}",
            "--export-all",
            "--enable=receive-pack",
            "--informative-errors",
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, proc)
        yield f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def git_http(root: Path, token: str | None = None) -> Iterator[str]:
    """Smart HTTP through ``git http-backend`` (CGI); with ``token``, Basic auth is required.

    Yields ``http://127.0.0.1:PORT``.
    """
    found = git_tool("git-http-backend")
    assert found is not None, "git-http-backend is missing (install git)"
    backend: str = found

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._cgi()

        def do_POST(self) -> None:
            self._cgi()

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", ""):
                # libgit2 streams pushes with chunked transfer encoding.
                parts: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _cgi(self) -> None:
            if token is not None:
                expected = base64.b64encode(f"x-access-token:{token}".encode()).decode()
                if self.headers.get("Authorization") != f"Basic {expected}":
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="gitmem-test"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            path, _, query = self.path.partition("?")
            body = self._body()
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_ADDR": "127.0.0.1",
                "REMOTE_USER": "gitmem-test",
            }
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            out = subprocess.run([backend], input=body, env=env, capture_output=True).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            if not _:
                head, _, payload = out.partition(b"\n\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def pausing_proxy(upstream: str, after_bytes: int, pause: Callable[[], None]) -> Iterator[str]:
    """A TCP proxy on 127.0.0.1 in front of ``upstream`` (``git://HOST:PORT``): the first
    connection whose replies reach ``after_bytes`` is held there while ``pause()`` runs (on the
    proxy's thread), then goes on. Yields ``git://127.0.0.1:PORT``."""
    host, _, port = upstream.removeprefix("git://").partition(":")
    listener = socket.create_server(("127.0.0.1", 0))
    paused = threading.Event()
    threads: list[threading.Thread] = []
    sockets: list[socket.socket] = [listener]

    def pump(source: socket.socket, sink: socket.socket, hold: bool) -> None:
        sent = 0
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if hold and not paused.is_set() and sent + len(data) >= after_bytes:
                    cut = after_bytes - sent
                    sink.sendall(data[:cut])
                    paused.set()
                    pause()
                    sink.sendall(data[cut:])
                else:
                    sink.sendall(data)
                sent += len(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                server = socket.create_connection((host, int(port)))
                sockets.extend((client, server))
                for source, sink, hold in ((client, server, False), (server, client, True)):
                    thread = threading.Thread(target=pump, args=(source, sink, hold), daemon=True)
                    threads.append(thread)
                    thread.start()

    acceptor = threading.Thread(target=serve, daemon=True)
    acceptor.start()
    try:
        yield f"git://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in [acceptor, *threads]:
            thread.join(timeout=10)


def _wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the git daemon exited at start")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("the git daemon did not start listening")


def all_object_bytes(repo: Path) -> list[bytes]:
    """The content of every object in ``repo`` (loose or packed), as git itself reads them."""
    listing = subprocess.run(
        ["git", "--git-dir", str(repo), "cat-file", "--batch-all-objects", "--batch-check"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.split()
    oids = listing[0::3]
    out = subprocess.run(
        ["git", "--git-dir", str(repo), "cat-file", "--batch"],
        input="\n".join(oids).encode() + b"\n",
        capture_output=True,
        check=True,
    ).stdout
    return [out]


SSHD = Path("/usr/sbin/sshd")


@dataclass(frozen=True)
class SshServer:
    """An ``sshd`` on 127.0.0.1: ``url(path)`` reaches a repository, ``host_key`` is its public
    key as ``TYPE BASE64``, ``user_key`` the private key it lets in (``GITMEM_SSH_KEY``)."""

    port: int
    host_key: str
    user_key: Path

    def url(self, path: Path) -> str:
        return f"ssh://{getpass.getuser()}@127.0.0.1:{self.port}{path}"

    @property
    def pattern(self) -> str:
        return f"[127.0.0.1]:{self.port}"


@contextlib.contextmanager
def sshd(root: Path) -> Iterator[SshServer]:
    """``sshd`` with its own host key and config in ``root``, on loopback only, letting in one
    key of its own (for the user running the tests); stopped on exit."""
    if not SSHD.is_file():
        if os.environ.get("CI"):
            raise RuntimeError("sshd is missing: .ci/run installs openssh-server")
        pytest.skip("sshd is missing (apt-get install openssh-server)")
    root.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "user_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)], check=True
        )
    shutil.copy(root / "user_key.pub", root / "authorized_keys")
    os.chmod(root / "authorized_keys", 0o600)
    port = free_port()
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPidFile {root / 'sshd.pid'}\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
    with open(root / "sshd.log", "wb") as log:
        proc = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(root / "sshd_config")],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        _wait_for_port(port, proc)
        host_key = " ".join((root / "host_key.pub").read_text().split()[:2])
        yield SshServer(port, host_key, root / "user_key")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def silent_host() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts every connection and never sends a byte; yields it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.05)  # a blocked accept() would not notice the socket closed
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(10)
        server.close()
        for conn in held:
            conn.close()
