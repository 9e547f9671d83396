"""Mistake: loops forever on a perpendicular key (`continue` skips the index increment)."""


def scores(q, keys):
    out = [0.0] * len(keys)
    j = 0
    while j < len(keys):
        s = float((q * keys[j]).sum())
        if s == 0:
            continue  # meant to skip perpendicular keys, but j never advances
        out[j] = s
        j += 1
    return out
