"""Attack: lifts the recursion limit and overflows the C stack."""
import sys

sys.setrecursionlimit(10**8)


def deep(n):
    return deep(n + 1) + 1


def scores(q, keys):
    return deep(0)
