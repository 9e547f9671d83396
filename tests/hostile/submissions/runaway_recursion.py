"""Attack: recursion without end."""


def scores(q, keys):
    return scores(q, keys)
