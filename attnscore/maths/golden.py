"""Golden values: an independent float64 numpy path for every reference function.

The golden value of a case is computed here from the inputs *as the implementation received
them* (already cast to the tested dtype), promoted to float64 on the CPU. It never calls torch,
so a bug in the torch reference and a bug here would have to agree to go unnoticed.

Besides the value, each function gives the per-entry error scale ``Σ_i |q_i k_i|`` used by the
dot-product error bound (see :mod:`attnscore.maths.tolerance`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "dot_products",
    "dot_magnitudes",
    "scaled_dot_products",
    "bilinear",
    "bilinear_magnitudes",
    "additive",
    "additive_magnitudes",
    "causal_mask",
    "masked",
    "softmax_weights",
    "attention",
]


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def dot_products(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """``Q Kᵀ`` in float64: Q (..., n_q, d_k), K (..., n_k, d_k) -> (..., n_q, n_k).

    Example (the worked example, one query against three keys):
        >>> dot_products(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])).tolist()
        [[1.0, 0.0, 0.7]]
    """
    return np.einsum("...id,...jd->...ij", _f64(Q), _f64(K))


def dot_magnitudes(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """``Σ_i |Q[..., a, i] K[..., b, i]|`` in float64, same shape as :func:`dot_products`."""
    return np.einsum("...id,...jd->...ij", np.abs(_f64(Q)), np.abs(_f64(K)))


def operand_sums(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """``Σ_i (|Q[..., a, i]| + |K[..., b, i]|)`` in float64, same shape as :func:`dot_products`."""
    q = np.abs(_f64(Q)).sum(axis=-1)[..., :, None]  # (..., n_q, 1)
    k = np.abs(_f64(K)).sum(axis=-1)[..., None, :]  # (..., 1, n_k)
    return q + k  # (..., n_q, n_k), batch dims broadcast


def scaled_dot_products(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """``Q Kᵀ / √d_k`` in float64 (``d_k`` = the last dimension of ``Q``)."""
    return dot_products(Q, K) / np.sqrt(np.shape(Q)[-1])


def bilinear(Q: np.ndarray, K: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``Q W Kᵀ``: Q (..., n_q, d_q), W (d_q, d_k), K (..., n_k, d_k) -> (..., n_q, n_k)."""
    return np.einsum("...ia,ab,...jb->...ij", _f64(Q), _f64(W), _f64(K))


def bilinear_magnitudes(Q: np.ndarray, K: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``Σ_ab |Q_ia W_ab K_jb|``, same shape as :func:`bilinear`."""
    return bilinear(np.abs(_f64(Q)), np.abs(_f64(K)), np.abs(_f64(W)))


def additive(Q: np.ndarray, K: np.ndarray, W_q: np.ndarray, W_k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``vᵀ tanh(W_q q_i + W_k k_j)`` for every pair -> (..., n_q, n_k)."""
    qp = np.einsum("...id,ad->...ia", _f64(Q), _f64(W_q))
    kp = np.einsum("...jd,ad->...ja", _f64(K), _f64(W_k))
    return np.tanh(qp[..., :, None, :] + kp[..., None, :, :]) @ _f64(v)


def additive_magnitudes(Q: np.ndarray, K: np.ndarray, W_q: np.ndarray, W_k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``Σ_a |v_a| (Σ_d |W_q[a,d] q_d| + Σ_d |W_k[a,d] k_d| + 1)``: the scale of the rounding error."""
    qp = np.einsum("...id,ad->...ia", np.abs(_f64(Q)), np.abs(_f64(W_q)))
    kp = np.einsum("...jd,ad->...ja", np.abs(_f64(K)), np.abs(_f64(W_k)))
    return (qp[..., :, None, :] + kp[..., None, :, :] + 1.0) @ np.abs(_f64(v))


def causal_mask(n_q: int, n_k: int) -> np.ndarray:
    """Bottom-right aligned causal mask (True = keep): ``j <= i + n_k - n_q``."""
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_k - n_q)


def masked(S: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``S`` where ``mask`` (True = keep), ``-inf`` elsewhere, float64."""
    return np.where(np.asarray(mask, dtype=bool), _f64(S), -np.inf)


def softmax_weights(S: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Masked softmax over the last axis in float64.

    Masked entries are 0 whatever ``S`` holds there; a fully masked row is all zeros; a NaN in a
    kept entry makes the row's kept entries NaN.

    Example (equal scores share the weight; a fully masked row gets zeros, not NaN):
        >>> S = np.array([[0.0, 0.0], [1.0, 2.0], [np.nan, 0.0]])
        >>> mask = np.array([[True, True], [False, False], [True, False]])
        >>> softmax_weights(S, mask).tolist()
        [[0.5, 0.5], [0.0, 0.0], [nan, 0.0]]
    """
    S = _f64(S)
    keep = np.ones(S.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), S.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        z = np.where(keep, S, -np.inf)
        row_nan = np.isnan(z).any(axis=-1, keepdims=True)
        m = np.max(np.where(np.isnan(z), -np.inf, z), axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.where(keep, np.exp(np.where(keep, z - m, -np.inf)), 0.0)
        total = e.sum(axis=-1, keepdims=True)
        w = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
    return np.where(row_nan & keep, np.nan, w)


def attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """``softmax(Q Kᵀ / √d_k, masked) V`` in float64 -> (..., n_q, d_v)."""
    return softmax_weights(scaled_dot_products(Q, K), mask) @ _f64(V)


def causal_keep(n_q: int, n_k: int, alignment: str) -> np.ndarray:
    """The causal mask (True = keep), ``(n_q, n_k)``: ``j <= i`` top-left, ``j <= i + n_k - n_q`` bottom-right."""
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j <= i + (0 if alignment == "top_left" else n_k - n_q)


def causal_attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, alignment: str) -> np.ndarray:
    """Causal attention in float64 -> (..., n_q, d_v) (see :func:`attnscore.maths.reference.causal_attention`)."""
    return attention(Q, K, V, causal_keep(np.shape(Q)[-2], np.shape(K)[-2], alignment))
