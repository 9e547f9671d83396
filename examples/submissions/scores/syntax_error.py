"""Mistake: a syntax error (a missing colon)."""


def scores(q, keys)
    return keys @ q
