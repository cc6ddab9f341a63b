"""The ``gitmem`` command's entry point: a Ctrl-C at any moment ends it with one line and 130.

This module lives outside the ``gitmem`` package on purpose. Importing anything inside it runs
``gitmem/__init__.py`` first, whose imports (pygit2, cryptography, the store) are most of the
command's start-up, and a Ctrl-C there would reach Python's top level as a traceback. Here the
interrupt is caught around the imports too; once the command runs, ``gitmem.cli`` reports it
the same way (in JSON with ``--json``).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C
INTERRUPTED_LINE = "gitmem: error: interrupted\n"


def main() -> None:
    """Run the ``gitmem`` command (``gitmem.cli.main``)."""
    try:
        standard_streams()
        from gitmem.cli import main as command
    except KeyboardInterrupt:
        interrupted()
    command(prog_name="gitmem")


def standard_streams() -> None:
    """Open the null device on each of stdin, stdout and stderr that the caller closed
    (``gitmem log >&-``), as git does.

    Python leaves ``sys.stdout`` None then, and every command failed with a traceback; and the
    next file opened (a lock, a pack) would get the closed descriptor's number, so that a
    library writing to "stdout" would write into the repository.
    """
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115


def interrupted() -> NoReturn:
    """End the process for a Ctrl-C: one line on stderr, exit code 130."""
    # A second Ctrl-C (people press it again when nothing seems to happen) must not interrupt
    # the report itself with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stderr.write(INTERRUPTED_LINE)
    sys.stderr.flush()
    sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
