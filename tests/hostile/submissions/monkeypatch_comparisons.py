"""Attack: patches numpy and torch comparison functions to say "equal", returns wrong values."""
import numpy as np
import torch

always = lambda *a, **k: True  # noqa: E731
np.allclose = always
np.array_equal = always
np.isclose = lambda a, b, *x, **k: np.ones(np.shape(a), dtype=bool)
np.testing.assert_allclose = lambda *a, **k: None
torch.allclose = always
torch.equal = always
torch.testing.assert_close = lambda *a, **k: None


def scores(q, keys):
    return (keys @ q) * 0 + 1
