"""Mistake: q @ keys instead of keys @ q (works only when keys is square)."""


def scores(q, keys):
    return q @ keys
