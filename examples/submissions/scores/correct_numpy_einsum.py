"""Correct: numpy einsum, returning an ndarray."""

import numpy as np


def scores(q, keys):
    q = np.asarray(q)
    keys = np.asarray(keys)
    return np.einsum("d,kd->k", q, keys)
