"""``python -m attnscore``: the same as the ``attnscore`` command."""

from attnscore.cli import run

if __name__ == "__main__":
    run()
