"""Correct: explicit loops over keys and coordinates, returning a plain list."""


def scores(q, keys):
    result = []
    for key in keys:
        total = 0.0
        for i in range(len(q)):
            total += float(q[i]) * float(key[i])
        result.append(total)
    return result
