"""A Ctrl-C at any moment of the ``gitmem`` command: exit code 130, one line, no traceback.

Each interrupt is placed deterministically, never by a timer: during the start-up imports by an
import hook that sends the process SIGINT as a chosen module is about to be imported, and
during a command by sending SIGINT once the process is blocked reading stdin.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gitmem

ROOT = Path(__file__).resolve().parents[1]
LINE = "gitmem: error: interrupted\n"

# Imported first in the child (sitecustomize): a finder that interrupts the import of $KILL_AT.
HOOK = """\
import os, signal, sys

class _InterruptAt:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == os.environ.get("KILL_AT"):
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _InterruptAt)
"""

# The child gets Python's own SIGINT handling even when the tests run where SIGINT is ignored
# (a background job): SIG_DFL survives the exec, and Python then installs its handler.
LAUNCH = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', sys.argv[1], *sys.argv[2:]])"
)


def popen(
    tmp_path: Path, key: str, *args: str, kill_at: str = "", module: str = "_gitmem_entry"
) -> subprocess.Popen[str]:
    """``gitmem ARGS`` run by the entry point that pyproject.toml installs as the command (or
    ``python -m MODULE``)."""
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {
        **os.environ,
        "GITMEM_KEY": key,
        "KILL_AT": kill_at,
        "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT)]),
    }
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCH, module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_the_installed_command_is_the_entry_point_that_catches_interrupts() -> None:
    # The console script must not import the gitmem package before the interrupt is caught.
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^gitmem = "_gitmem_entry:main"$', pyproject, re.MULTILINE)


@pytest.mark.parametrize(
    "module", ["gitmem", "pygit2", "cryptography", "click", "gitmem.store", "gitmem.cli"]
)
def test_an_interrupt_while_the_command_starts_is_one_line_and_130(
    tmp_path: Path, key: str, module: str
) -> None:
    repo = tmp_path / "m.git"
    gitmem.MemoryStore.init(repo, key)
    proc = popen(tmp_path, key, "--repo", str(repo), "log", kill_at=module)
    assert finish(proc) == (130, "", LINE)


@pytest.mark.parametrize("module", ["pygit2", "cryptography", "click", "gitmem.store"])
def test_python_m_gitmem_is_the_same_command_and_catches_interrupts_too(
    tmp_path: Path, key: str, module: str
) -> None:
    # `python -m gitmem` imported the whole package (gitmem/__init__) inside runpy, before any
    # code of gitmem's could catch a Ctrl-C: a traceback and a death by SIGINT instead.
    repo = tmp_path / "m.git"
    gitmem.MemoryStore.init(repo, key)
    args = ("--repo", str(repo), "log")
    proc = popen(tmp_path, key, *args, kill_at=module, module="gitmem")
    assert finish(proc) == (130, "", LINE)
    assert finish(popen(tmp_path, key, *args, module="gitmem")) == (
        0,
        "",
        "gitmem: the store has no history\n",
    )


def test_importing_gitmem_imports_nothing_until_a_name_is_used() -> None:
    code = (
        "import sys; before = set(sys.modules); import gitmem; "
        "print(sorted(m for m in set(sys.modules) - before if m != 'gitmem')); "
        # MemoryStore's replication (gitmem.sync, a layer above the store) is loaded only when
        # a replica method is called.
        "import gitmem.store; alone = 'gitmem.sync' in sys.modules; "
        "from gitmem import MemoryStore, GitMemoryTool, __version__; "
        "print(alone, 'gitmem.sync' in sys.modules); "
        "print(gitmem.history.__name__, MemoryStore.__module__, GitMemoryTool.__module__)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out == "[]\nFalse False\ngitmem.history gitmem.store gitmem.tool\n"
    with pytest.raises(AttributeError, match="has no attribute 'nosuch'"):
        _ = gitmem.nosuch  # type: ignore[attr-defined]
    assert set(gitmem.__all__) <= set(dir(gitmem))


def test_an_interrupt_in_a_command_is_one_line_or_json_and_130(tmp_path: Path, key: str) -> None:
    repo = tmp_path / "m.git"
    gitmem.MemoryStore.init(repo, key)
    # The mcp command imports its server module only once it runs.
    plain = popen(tmp_path, key, "--repo", str(repo), "mcp", kill_at="gitmem.mcp_server")
    assert finish(plain) == (130, "", LINE)
    as_json = popen(tmp_path, key, "--repo", str(repo), "--json", "mcp", kill_at="mcp")
    code, out, err = finish(as_json)
    assert (code, out) == (130, "")
    assert json.loads(err) == {"error": "Interrupted", "exit_code": 130, "message": "interrupted"}


def test_an_interrupt_while_a_command_waits_writes_nothing(tmp_path: Path, key: str) -> None:
    repo = tmp_path / "m.git"
    gitmem.MemoryStore.init(repo, key)
    # `key add` reads the new passphrase from stdin, which stays open: it waits in read(0).
    proc = popen(tmp_path, key, "--repo", str(repo), "key", "add")
    try:
        syscall = Path(f"/proc/{proc.pid}/syscall")
        if not os.access(syscall, os.R_OK):
            pytest.skip("no /proc/PID/syscall to see the process wait (Linux only)")
        deadline = time.monotonic() + 120
        while not syscall.read_text().startswith("0 0x0 "):  # read() on fd 0
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert finish(proc) == (130, "", LINE)
    finally:
        proc.kill()
        proc.wait()
    assert gitmem.MemoryStore.open(repo, key).key_slots() == []
