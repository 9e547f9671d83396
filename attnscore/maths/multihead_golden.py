"""Multi-head attention in float64 numpy: the independent twin of the ``multihead`` family's torch
reference, the reference's own error per output entry, and the pieces of the chain rule its
gradients are made of (:mod:`attnscore.maths.families.multihead` binds them to its contracts).

Shapes: ``x (..., n_q, d_model)``, ``context (..., n_k, d_model)``, each weight ``(d_model, d_model)``
stored as ``nn.Linear`` stores it (a projection is ``t @ W.T``); head ``h`` is columns
``h·d_head .. (h+1)·d_head − 1``; float64 throughout. Sources: Vaswani et al. (2017), section 3.2.2;
Su et al. (2021), eq. 34 for RoPE; the error terms as in :mod:`attnscore.maths.error_scales`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from attnscore.boundary.dtypes import UNIT_ROUNDOFF
from attnscore.maths import golden
from attnscore.maths.error_scales import attention_error, attention_low_terms
from attnscore.maths.rotary import pair_indices, rotate_golden, seq_positions
from attnscore.maths.tolerance import ErrorTerms

__all__ = [
    "Parts",
    "attend_golden",
    "causal_keep",
    "error_budget",
    "heads_of",
    "keep_of",
    "merged",
    "pair_sum",
    "signed_heads",
    "sum_to",
    "weight_grad",
]


class Parts(NamedTuple):
    """One call's arguments in the general form: ``x (..., n_q, d_model)``, ``context (..., n_k,
    d_model)`` (``x`` itself for self-attention), the four weights ``(d_model, d_model)``, the head
    count, and for the RoPE form ``token_positions (seq,)`` and ``theta`` (else None)."""

    x: Any
    context: Any
    W_q: Any
    W_k: Any
    W_v: Any
    W_o: Any
    num_heads: int
    token_positions: Any = None
    theta: int | None = None


def causal_keep(n_q: int, n_k: int, offset: int = 0) -> np.ndarray:
    """``(n_q, n_k)`` bool: query ``i`` keeps key ``j`` when ``j <= i + offset`` (``offset`` 0: the
    top-left causal mask).

    >>> causal_keep(2, 3).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0]]
    """
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + offset


def heads_of(t: np.ndarray, h: int) -> np.ndarray:
    """``(..., n, d_model) -> (..., h, n, d_head)`` in numpy (columns of each head)."""
    return np.moveaxis(t.reshape(*t.shape[:-1], h, t.shape[-1] // h), -2, -3)


def merged(t: np.ndarray) -> np.ndarray:
    """``(..., h, n, d_head) -> (..., n, h·d_head)`` in numpy."""
    moved = np.moveaxis(t, -3, -2)
    return moved.reshape(*moved.shape[:-2], moved.shape[-2] * moved.shape[-1])


def keep_of(p: Parts, causal: bool) -> np.ndarray:
    n_q, n_k = p.x.shape[-2], p.context.shape[-2]
    return causal_keep(n_q, n_k) if causal else np.ones((n_q, n_k), dtype=bool)


def attend_golden(p: Parts, causal: bool, pairing: str = "interleaved") -> np.ndarray:
    """Multi-head attention in float64 numpy, independent of :func:`attend`: ``(..., n_q, d_model)``."""
    h = p.num_heads
    Q = heads_of(np.einsum("...nc,dc->...nd", p.x, p.W_q), h)  # (..., h, n_q, d_head)
    K = heads_of(np.einsum("...nc,dc->...nd", p.context, p.W_k), h)
    V = heads_of(np.einsum("...nc,dc->...nd", p.context, p.W_v), h)
    if p.theta is not None:
        positions = np.asarray(p.token_positions, dtype=np.float64)
        Q, K = rotate_golden(Q, positions, p.theta, pairing), rotate_golden(K, positions, p.theta, pairing)
    S = np.einsum("...id,...jd->...ij", Q, K) / np.sqrt(Q.shape[-1])  # (..., h, n_q, n_k)
    W = golden.softmax_weights(S, keep_of(p, causal))
    C = merged(np.einsum("...ij,...jd->...id", W, V))  # (..., n_q, d_model)
    return np.einsum("...nc,dc->...nd", C, p.W_o)


class _Err(NamedTuple):
    """An error per entry as ``rounding`` (units of the tested dtype's ``u``) and ``accumulation``
    (units of the accumulating dtype's ``u``: float32 for float16/bfloat16, else the tested one)."""

    rounding: np.ndarray
    accumulation: np.ndarray


def _projected(t: np.ndarray, W: np.ndarray, e: _Err | None) -> tuple[np.ndarray, _Err]:
    """``t @ W.T`` and its error: each product rounded once, the ``d``-term sum accumulated, and
    ``t``'s own error ``e`` carried by ``|W|``."""
    y = t @ W.T
    m = np.abs(t) @ np.abs(W).T  # Σ|t_c W_dc|
    r, acc = m, W.shape[-1] * m
    if e is not None:
        r, acc = r + e.rounding @ np.abs(W).T, acc + e.accumulation @ np.abs(W).T
    return y, _Err(r, acc)


def pair_sum(t: np.ndarray, pairing: str) -> np.ndarray:
    """Each coordinate's value replaced by the sum over its RoPE pair (``t_a + t_b`` at ``a`` and ``b``)."""
    a, b = pair_indices(t.shape[-1], pairing)
    out = np.empty_like(t)
    out[..., a] = out[..., b] = t[..., a] + t[..., b]
    return out


def _rotated(t: np.ndarray, e: _Err, p: Parts, pairing: str) -> tuple[np.ndarray, _Err]:
    """RoPE of ``t (..., h, n, d_head)`` and its error: the pair's errors (a rotation mixes the
    two), the cosines' and sines' rounding and the products (``6·(|t_a| + |t_b|)``), and the angle
    ``m·θ_i`` computed in the accumulating precision (``2(|m θ_i| + 1)·(|t_a| + |t_b|)``)."""
    positions = seq_positions(np.asarray(p.token_positions, dtype=np.float64))  # (seq,)
    assert p.theta is not None  # only called for the RoPE form
    y = rotate_golden(t, positions, p.theta, pairing)
    d = t.shape[-1]
    freqs = np.power(float(p.theta), -2.0 * np.arange(d // 2) / d)
    per = np.empty((positions.shape[-1], d))  # |m θ_i| at both coordinates of pair i: (n, d_head)
    ai, bi = pair_indices(d, pairing)
    per[:, ai] = per[:, bi] = np.abs(positions)[:, None] * freqs[None, :]
    mags = pair_sum(np.abs(t), pairing)
    r = pair_sum(e.rounding, pairing) + 6.0 * mags
    acc = pair_sum(e.accumulation, pairing) + 2.0 * (per + 1.0) * mags
    return y, _Err(r, acc)


def error_budget(p: Parts, causal: bool, pairing: str, dtype: str | None, factor: float = 1.0) -> ErrorTerms:
    """The reference's own error per output entry, ``(..., n_q, d_model)``, as
    :class:`~attnscore.maths.tolerance.ErrorTerms`; ``dtype`` None for float32/float64 (one ``u``:
    rounding and accumulation alike), else float16/bfloat16 (products rounded in it, sums in float32).

    Each projection ``t @ W.T`` is off by ``Σ|t_c W_dc|`` roundings plus ``d_model`` times that
    accumulated; RoPE mixes each pair's errors and adds its cosines', sines' and angles' roundings;
    an error ``δq``, ``δk`` moves the scores by ``(δq·|k| + |q|·δk)/√d_head`` and so the output by
    ``Σ_j w_j |δs_j| |v_j − o|`` (first order: the amplification ``exp(2·max δs)`` of a large score
    error is capped at ``e``, since a worst case that compounds every rounding of a float16/bfloat16
    projection through the softmax bounds nothing a real run shows); an error ``δv`` by
    ``Σ_j w_j δv_j``; attention's own error is
    :func:`~attnscore.maths.error_scales.attention_error` (float16/bfloat16:
    :func:`~attnscore.maths.error_scales.attention_low_terms`); the concatenated heads' error is
    carried by ``|W_o|`` and the output projection adds its own dot-product error.
    """
    h, d = p.num_heads, p.x.shape[-1]
    Q, eQ = _projected(p.x, p.W_q, None)
    K, eK = _projected(p.context, p.W_k, None)
    V, eV = _projected(p.context, p.W_v, None)
    Q, K, V = heads_of(Q, h), heads_of(K, h), heads_of(V, h)  # (..., h, n, d_head)
    eQ, eK, eV = (_Err(heads_of(e.rounding, h), heads_of(e.accumulation, h)) for e in (eQ, eK, eV))
    if p.theta is not None:
        Q, eQ = _rotated(Q, eQ, p, pairing)
        K, eK = _rotated(K, eK, p, pairing)
    keep = np.broadcast_to(keep_of(p, causal), np.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,)) + (K.shape[-2],))
    s = 1.0 / np.sqrt(Q.shape[-1])
    W = np.nan_to_num(golden.softmax_weights(s * golden.dot_products(Q, K), keep))  # (..., h, n_q, n_k)
    O_h = W @ V  # (..., h, n_q, d_head)
    spread = np.abs(V[..., None, :, :] - O_h[..., :, None, :])  # |v_j − o_i|: (..., h, n_q, n_k, d_head)
    aQ, aK = np.abs(Q), np.abs(K)

    def scores_moved(eq: np.ndarray, ek: np.ndarray) -> np.ndarray:
        return s * (eq @ np.swapaxes(aK, -1, -2) + aQ @ np.swapaxes(ek, -1, -2))  # (..., h, n_q, n_k)

    u = UNIT_ROUNDOFF[dtype] if dtype is not None else 0.0
    u32 = UNIT_ROUNDOFF["float32"] if dtype is not None else 0.0
    dS_r, dS_a = scores_moved(eQ.rounding, eK.rounding), scores_moved(eQ.accumulation, eK.accumulation)
    amp = np.exp(np.minimum(2.0 * factor * np.max(np.where(keep, u * dS_r + u32 * dS_a, 0.0), axis=-1), 1.0))
    amp = amp[..., None]  # (..., h, n_q, 1)

    def carried(dS: np.ndarray, ev: np.ndarray) -> np.ndarray:
        moved = np.einsum("...ij,...ijd->...id", W * np.where(keep, dS, 0.0), spread)
        return amp * moved + W @ ev  # (..., h, n_q, d_head)

    heads_args = {"Q": Q, "K": K, "V": V, "mask": keep}
    if dtype is None:
        _, own = attention_error(heads_args)
        own_r, own_a, own_f = own, np.zeros_like(own), np.zeros_like(own)
    else:
        terms = attention_low_terms(heads_args, dtype, factor)
        own_r, own_a = np.asarray(terms.rounding), np.asarray(terms.accumulation)
        own_f = np.broadcast_to(np.asarray(terms.floor, dtype=np.float64), own_r.shape)
    eC = _Err(merged(own_r + carried(dS_r, eV.rounding)), merged(own_a + carried(dS_a, eV.accumulation)))
    _, eO = _projected(merged(O_h), p.W_o, eC)
    floor = merged(own_f) @ np.abs(p.W_o).T + 4.0 * (d + 1)
    return ErrorTerms(eO.rounding, eO.accumulation, floor)


def sum_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``g`` summed over the leading dims it has beyond ``shape`` and over broadcast ones."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def weight_grad(dY: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``dW`` of ``Y = t @ W.T``: ``Σ dYᵀ t`` over every leading dim, ``(d_out, d_in)``."""
    shape = np.broadcast_shapes(dY.shape[:-1], t.shape[:-1])
    dY = np.broadcast_to(dY, shape + dY.shape[-1:]).reshape(-1, dY.shape[-1])  # (tokens, d_out)
    t = np.broadcast_to(t, shape + t.shape[-1:]).reshape(-1, t.shape[-1])  # (tokens, d_in)
    return dY.T @ t


def signed_heads(p: Parts, causal: bool, pairing: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each head's queries and keys (rotated for RoPE), values and attention output, float64:
    ``(..., h, n, d_head)`` each."""
    h = p.num_heads
    Q, K, V = heads_of(p.x @ p.W_q.T, h), heads_of(p.context @ p.W_k.T, h), heads_of(p.context @ p.W_v.T, h)
    if p.theta is not None:
        positions = np.asarray(p.token_positions, dtype=np.float64)
        Q, K = rotate_golden(Q, positions, p.theta, pairing), rotate_golden(K, positions, p.theta, pairing)
    S = np.einsum("...id,...jd->...ij", Q, K) / np.sqrt(Q.shape[-1])  # (..., h, n_q, n_k)
    return Q, K, V, golden.softmax_weights(S, keep_of(p, causal)) @ V
