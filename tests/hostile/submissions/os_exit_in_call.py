"""Attack: os._exit(0) during a call."""
import os


def scores(q, keys):
    os._exit(0)
