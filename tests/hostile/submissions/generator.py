"""Attack: returns a generator instead of values."""


def scores(q, keys):
    return (float(k @ q) for k in keys)
