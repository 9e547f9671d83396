"""Attack: answers right, then overwrites its inputs (must not affect other calls)."""


def scores(q, keys):
    out = (keys @ q).clone()
    q.fill_(1e9)
    keys.zero_()
    return out
