"""``python -m attnscore``: the same as the ``attnscore`` command."""

from attnscore.cli import main

main(prog_name="attnscore")
