"""Attack: dereferences a null pointer."""
import ctypes


def scores(q, keys):
    ctypes.string_at(0)
    return keys @ q
