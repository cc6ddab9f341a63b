"""``python -m gitmem``: the same as the ``gitmem`` command."""

from .cli import main

main(prog_name="gitmem")
