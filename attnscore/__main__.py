"""``python -m attnscore``: the same as the ``attnscore`` command."""

from attnscore.cli import main

if __name__ == "__main__":
    main(prog_name="attnscore")
