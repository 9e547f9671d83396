"""Mistake: multiplies elementwise but never sums over d_k."""


def scores(q, keys):
    return keys * q
