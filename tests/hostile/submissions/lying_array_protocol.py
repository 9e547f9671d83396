"""Attack: an object whose __array__ lies about its values and whose __len__ raises."""
import numpy as np


class Fake:
    def __array__(self, dtype=None, copy=None):
        return np.array([1.0, 0.0, 0.7])

    def __len__(self):
        raise RuntimeError("no length")


def scores(q, keys):
    return Fake()
