"""A headless Chromium driven over the DevTools protocol, with only the standard library.

For the report page's tests and benchmark: start Chromium on 127.0.0.1 with a private profile,
open a page, evaluate JavaScript in it, and record what it tried to load and what it logged.
The DevTools protocol runs over a WebSocket; the few lines of RFC 6455 a client needs (masked
text frames out, plain frames in) are here rather than a dependency.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO
from urllib.parse import urlsplit

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) on PATH, else None."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def chromium_flags(profile: Path) -> list[str]:
    """The flags of a quiet headless Chromium with its own ``profile`` directory."""
    flags = [
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--mute-audio",
        f"--user-data-dir={profile}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return flags


class WebSocket:
    """A client WebSocket carrying text messages (enough for the DevTools protocol)."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {parts.path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        self.reader: BinaryIO = self.sock.makefile("rb")
        status = self.reader.readline()
        if b" 101 " not in status:
            raise ConnectionError(f"the WebSocket handshake failed: {status!r}")
        while self.reader.readline() not in (b"\r\n", b""):
            pass

    def send(self, text: str) -> None:
        """Send one text message."""
        payload = text.encode()
        mask = os.urandom(4)
        size = len(payload)
        if size < 126:
            head = struct.pack("!BB", 0x81, 0x80 | size)
        elif size < 1 << 16:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, size)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, size)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def _exactly(self, count: int) -> bytes:
        data = self.reader.read(count)
        if len(data) != count:
            raise ConnectionError("the browser closed the connection")
        return data

    def receive(self) -> str:
        """The next text message (control frames are answered or skipped)."""
        message = b""
        while True:
            first, second = self._exactly(2)
            opcode, size = first & 0x0F, second & 0x7F
            if size == 126:
                size = struct.unpack("!H", self._exactly(2))[0]
            elif size == 127:
                size = struct.unpack("!Q", self._exactly(8))[0]
            mask = self._exactly(4) if second & 0x80 else None
            payload = self._exactly(size)
            if mask is not None:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("the browser closed the connection")
            if opcode == 0x9:  # ping: answer with a pong carrying the same data
                pong = os.urandom(4)
                body = bytes(b ^ pong[i % 4] for i, b in enumerate(payload))
                self.sock.sendall(struct.pack("!BB", 0x8A, 0x80 | len(payload)) + pong + body)
                continue
            if opcode in (0x1, 0x2, 0x0):
                message += payload
                if first & 0x80:
                    return message.decode()

    def close(self) -> None:
        """Close the connection."""
        self.reader.close()
        self.sock.close()


class Browser:
    """A headless Chromium with one page, driven over the DevTools protocol.

    ``requests`` lists every URL the page asked to load; ``logs`` every console message, log
    entry (a Content-Security-Policy violation is one) and uncaught exception.
    """

    def __init__(self, chromium: str, *, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="gitmem-chromium-"))
        command = [chromium, *chromium_flags(self.profile)]
        command += ["--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"]
        self.process = subprocess.Popen(
            [*command, "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.requests: list[str] = []
        self.logs: list[str] = []
        self.next_id = 0
        try:
            port = self._port()
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as answer:
                targets = json.load(answer)
            page = next(t for t in targets if t.get("type") == "page")
            self.ws = WebSocket(page["webSocketDebuggerUrl"], timeout)
            for domain in ("Page", "Runtime", "Network", "Log"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _port(self) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with status {self.process.returncode}")
            try:
                lines = marker.read_text().splitlines()
            except FileNotFoundError:
                lines = []
            if lines and lines[0].isdigit():
                return int(lines[0])
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its DevTools port")

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.consoleAPICalled":
            self.logs.append("console: " + " ".join(str(a.get("value")) for a in params["args"]))
        elif method == "Log.entryAdded":
            entry = params["entry"]
            self.logs.append(f"log ({entry.get('source')}): {entry.get('text')}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.logs.append(f"exception: {text}")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events meanwhile are recorded)."""
        self.next_id += 1
        ident = self.next_id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.receive())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self._event(message)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript ``expression`` in the page (JSON-like values)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str = "window.__reportReady === true") -> float:
        """Navigate to ``url`` and wait until ``ready`` is true; the seconds that took."""
        started = time.perf_counter()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + self.timeout
        while not self.evaluate(f"!!({ready})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} was not ready after {self.timeout:.0f} s")
            time.sleep(0.01)
        return time.perf_counter() - started

    def close(self) -> None:
        """Stop the browser and remove its profile."""
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
