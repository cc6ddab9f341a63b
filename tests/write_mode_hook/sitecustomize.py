"""Started processes of a test run under a write mode (tests/conftest.py, ``write_mode``) open
their stores in that mode too: this directory is put first on their PYTHONPATH."""

import os

_MODE = os.environ.get("GITMEM_TEST_WRITE_MODE")
if _MODE:
    from gitmem.git import flush as _flush

    _CHOSEN = {mode.name: mode for mode in _flush.platform_modes()}[_MODE]
    _flush.default_mode = lambda: _CHOSEN
