"""Golden values: an independent float64 numpy path for every reference function.

The golden value of a case is computed here from the inputs *as the implementation received
them* (already cast to the tested dtype), promoted to float64 on the CPU. It never calls torch,
so a bug in the torch reference and a bug here would have to agree to go unnoticed.

Besides the value, each function gives the per-entry error scale ``Σ_i |q_i k_i|`` used by the
dot-product error bound (see :mod:`attnscore.tolerance`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["dot_products", "dot_magnitudes"]


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def dot_products(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """``Q Kᵀ`` in float64: Q (..., n_q, d_k), K (..., n_k, d_k) -> (..., n_q, n_k)."""
    return np.einsum("...id,...jd->...ij", _f64(Q), _f64(K))


def dot_magnitudes(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """``Σ_i |Q[..., a, i] K[..., b, i]|`` in float64, same shape as :func:`dot_products`."""
    return np.einsum("...id,...jd->...ij", np.abs(_f64(Q)), np.abs(_f64(K)))
