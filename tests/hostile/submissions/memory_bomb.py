"""Attack: allocates 64 GB of Python memory."""


def scores(q, keys):
    blob = bytearray(64 * 1024**3)
    return keys @ q + len(blob)
