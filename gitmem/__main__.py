"""``python -m gitmem``: the ``gitmem`` command, a Ctrl-C at any moment of it included.

The package's ``__init__`` imports nothing, so the command's start-up imports all happen in
``_gitmem_entry.main``, which reports an interrupt among them as one line and exit code 130,
as the installed ``gitmem`` command does.
"""

from _gitmem_entry import main

main()
