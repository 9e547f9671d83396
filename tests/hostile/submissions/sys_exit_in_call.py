"""Attack: sys.exit(0) during a call."""
import sys


def scores(q, keys):
    sys.exit(0)
