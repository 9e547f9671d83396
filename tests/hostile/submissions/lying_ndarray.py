"""Attack: an ndarray subclass whose comparisons and conversions claim success."""
import numpy as np


class Liar(np.ndarray):
    def __eq__(self, other):
        return True

    def __array_ufunc__(self, *args, **kwargs):
        return True

    def __array__(self, dtype=None, copy=None):
        return np.array([1.0, 0.0, 0.7])

    def tolist(self):
        return [1.0, 0.0, 0.7]


def scores(q, keys):
    return np.ones(len(keys)).view(Liar)
