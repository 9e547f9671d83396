"""Correct, in two files: the dot product lives in a helper module next to this one."""

from helper import dot


def scores(q, keys):
    """One score per key: q · keys[j]."""
    return dot(keys, q)
