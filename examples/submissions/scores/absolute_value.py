"""Mistake: takes absolute values, so anti-aligned keys look like good matches."""


def scores(q, keys):
    return (keys @ q).abs()
