"""Golden gradients: the backward pass of every contract and variant in float64 numpy, by closed forms.

Shape legend: ``...`` batch dims, ``H_q``/``H_kv`` query and key/value heads, ``n_q`` queries,
``n_k`` keys, ``d_k`` query/key width, ``d_v`` value width. ``d_*`` is the gradient of a scalar
loss ``ℓ`` with respect to ``*``; the upstream gradient ``d_out`` (``dO``) is that of the output.

torch is never imported: these are the closed forms, so a wrong autograd graph in the torch
reference and a wrong formula here would have to agree to go unnoticed (the tests compare the two
in float64). With ``S = scale · Q Kᵀ`` (masked entries ``-inf``), ``P = softmax(S)`` row-wise and
``O = P V``:

- ``dV = Pᵀ dO`` and ``dP = dO Vᵀ``;
- ``dS = P ⊙ (dP − D)`` with ``D = rowsum(dP ⊙ P) = rowsum(dO ⊙ O)`` (the softmax Jacobian);
  a masked entry has ``P = 0``, so it gets no gradient, and a fully masked row (output the constant
  zero vector) gets none at all;
- ``dQ = scale · dS K`` and ``dK = scale · dSᵀ Q``.

Source: the softmax Jacobian ``∂p_i/∂s_j = p_i (δ_ij − p_j)``; Dao (2023), FlashAttention-2,
Algorithm 2 (the same ``D`` and ``dS``). Batch dims that broadcast (a 2-D ``K`` against a 3-D
``Q``) get the sum of the gradient over the dims they were broadcast along, as autograd gives.

Besides the gradients, :func:`attnscore.maths.golden_gradients.contract_gradient_scales` gives per
entry of each gradient the magnitude ``M`` of the same computation carried out on absolute values
(every difference made a sum, each softmax weight with its own rounding error), and the length
``n`` of its longest sum: the allowed error is about ``factor · n · u · M`` (:mod:`attnscore.maths.tolerance`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from attnscore.maths import golden, golden_variants
from attnscore.maths.attention_options import AttentionOptions

__all__ = [
    "dot_products",
    "scaled_dot_products",
    "bilinear",
    "additive",
    "masked",
    "softmax_weights",
    "attention",
    "causal_attention",
    "general_attention",
    "weights_rounding",
    "cleaned",
    "f64",
    "unbroadcast",
    "keep_mask",
]


def f64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` over the dims that ``shape`` was broadcast along (leading ones and size-1 ones)."""
    g = np.asarray(g)
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    ones = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if ones:
        g = g.sum(axis=ones, keepdims=True)
    return g.reshape(shape)


def keep_mask(mask: Any, shape: tuple[int, ...]) -> np.ndarray:
    if mask is None:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(np.asarray(mask, dtype=bool), shape)


def dot_products(Q: Any, K: Any, dS: Any) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of ``S = Q Kᵀ``: ``dQ = dS K`` ``(..., n_q, d_k)``, ``dK = dSᵀ Q`` ``(..., n_k, d_k)``.

    Example (one query, two keys, the upstream picks the second score):
        >>> dQ, dK = dot_products([[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]], [[0.0, 1.0]])
        >>> dQ.tolist(), dK.tolist()
        ([[5.0, 6.0]], [[0.0, 0.0], [1.0, 2.0]])
    """
    Q, K, dS = f64(Q), f64(K), f64(dS)
    dQ = np.einsum("...ij,...jd->...id", dS, K)  # (..., n_q, n_k) @ (..., n_k, d_k)
    dK = np.einsum("...ij,...id->...jd", dS, Q)  # (..., n_k, n_q) @ (..., n_q, d_k)
    return unbroadcast(dQ, Q.shape), unbroadcast(dK, K.shape)


def scaled_dot_products(Q: Any, K: Any, dS: Any) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of ``S = Q Kᵀ / √d_k``: those of :func:`dot_products` divided by ``√d_k``."""
    root = np.sqrt(np.shape(Q)[-1])
    dQ, dK = dot_products(Q, K, dS)
    return dQ / root, dK / root


def bilinear(Q: Any, K: Any, W: Any, dS: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ``S = Q W Kᵀ``: ``dQ = dS K Wᵀ``, ``dK = dSᵀ Q W``, ``dW = Σ_batch Qᵀ dS K`` ``(d_q, d_k)``."""
    Q, K, W, dS = f64(Q), f64(K), f64(W), f64(dS)
    dQ = np.einsum("...ij,...jb,ab->...ia", dS, K, W)
    dK = np.einsum("...ij,...ia,ab->...jb", dS, Q, W)
    dW = np.einsum("...ij,...ia,...jb->...ab", dS, Q, K)
    return unbroadcast(dQ, Q.shape), unbroadcast(dK, K.shape), unbroadcast(dW, W.shape)


def additive(
    Q: Any, K: Any, W_q: Any, W_k: Any, v: Any, dS: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ``S_ij = vᵀ tanh(W_q q_i + W_k k_j)``: ``(dQ, dK, dW_q, dW_k, dv)``.

    With ``t = tanh(h)``, ``h_ija = (W_q q_i)_a + (W_k k_j)_a``: ``dv = Σ_ij dS_ij t_ij``,
    ``dh_ija = dS_ij v_a (1 − t_ija²)``, ``dq_i = Σ_j dh_ij W_q``, ``dk_j = Σ_i dh_ij W_k``,
    ``dW_q = Σ_ij dh_ij q_iᵀ``, ``dW_k = Σ_ij dh_ij k_jᵀ``.
    """
    Q, K, W_q, W_k, v, dS = f64(Q), f64(K), f64(W_q), f64(W_k), f64(v), f64(dS)
    qp = np.einsum("...id,ad->...ia", Q, W_q)  # (..., n_q, d_a)
    kp = np.einsum("...jd,ad->...ja", K, W_k)  # (..., n_k, d_a)
    t = np.tanh(qp[..., :, None, :] + kp[..., None, :, :])  # (..., n_q, n_k, d_a)
    dh = dS[..., None] * v * (1.0 - t * t)  # (..., n_q, n_k, d_a)
    dq_proj = dh.sum(axis=-2)  # (..., n_q, d_a)
    dk_proj = dh.sum(axis=-3)  # (..., n_k, d_a)
    dQ = np.einsum("...ia,ad->...id", dq_proj, W_q)
    dK = np.einsum("...ja,ad->...jd", dk_proj, W_k)
    dW_q = np.einsum("...ia,...id->...ad", dq_proj, np.broadcast_to(Q, (*dq_proj.shape[:-1], Q.shape[-1])))
    dW_k = np.einsum("...ja,...jd->...ad", dk_proj, np.broadcast_to(K, (*dk_proj.shape[:-1], K.shape[-1])))
    dv = np.einsum("...ij,...ija->...a", dS, t)
    return (
        unbroadcast(dQ, Q.shape),
        unbroadcast(dK, K.shape),
        unbroadcast(dW_q, W_q.shape),
        unbroadcast(dW_k, W_k.shape),
        unbroadcast(dv, v.shape),
    )


def masked(S: Any, mask: Any, d_out: Any) -> np.ndarray:
    """Gradient of ``masked_fill(S, ~mask, -inf)`` with respect to ``S``: ``d_out`` where kept, 0 where masked."""
    S = f64(S)
    return unbroadcast(
        np.where(keep_mask(mask, np.broadcast_shapes(S.shape, np.shape(d_out))), f64(d_out), 0.0), S.shape
    )


def _softmax_backward(P: np.ndarray, dP: np.ndarray) -> np.ndarray:
    """``dS = P ⊙ (dP − rowsum(dP ⊙ P))``: 0 wherever ``P`` is 0 (masked keys, fully masked rows)."""
    D = np.sum(dP * P, axis=-1, keepdims=True)  # (..., n_q, 1)
    return P * (dP - D)


def softmax_weights(S: Any, mask: Any, d_out: Any) -> np.ndarray:
    """Gradient of the masked softmax ``P`` (:func:`attnscore.maths.golden.softmax_weights`) w.r.t. ``S``.

    Example (two equal scores: ``P = [½, ½]``; pushing the first weight up moves the scores apart):
        >>> softmax_weights([[0.0, 0.0]], None, [[1.0, 0.0]]).tolist()
        [[0.25, -0.25]]
    """
    S = f64(S)
    P = golden.softmax_weights(S, mask)
    return unbroadcast(_softmax_backward(P, f64(d_out)), S.shape)


def attention(
    Q: Any, K: Any, V: Any, mask: Any, d_out: Any, scale: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ``O = softmax(scale · Q Kᵀ, masked) V``: ``(dQ, dK, dV)`` (module docstring's forms).

    Args:
        Q: ``(..., n_q, d_k)``; K: ``(..., n_k, d_k)``; V: ``(..., n_k, d_v)``.
        mask: bool, True = keep, broadcasting to ``(..., n_q, n_k)``, or None.
        d_out: ``(..., n_q, d_v)``, the upstream gradient ``dO``.
        scale: the factor on ``Q Kᵀ``; None means ``1/√d_k``.

    Returns:
        float64 arrays of the shapes of ``Q``, ``K`` and ``V``.

    Example (one query, two keys with equal scores, so ``P = [½, ½]``):
        >>> dQ, dK, dV = attention([[1.0]], [[0.0], [0.0]], [[1.0], [3.0]], None, [[1.0]], scale=1.0)
        >>> dQ.tolist(), dK.tolist(), dV.tolist()
        ([[0.0]], [[-0.5], [0.5]], [[0.5], [0.5]])
    """
    Q, K, V, dO = f64(Q), f64(K), f64(V), f64(d_out)
    s = 1.0 / np.sqrt(Q.shape[-1]) if scale is None else float(scale)
    P = golden.softmax_weights(s * golden.dot_products(Q, K), mask)  # (..., n_q, n_k)
    dV = np.einsum("...ij,...id->...jd", P, dO)  # Pᵀ dO: (..., n_k, d_v)
    dP = np.einsum("...id,...jd->...ij", dO, V)  # dO Vᵀ: (..., n_q, n_k)
    dS = _softmax_backward(P, dP)
    dQ = s * np.einsum("...ij,...jd->...id", dS, K)
    dK = s * np.einsum("...ij,...id->...jd", dS, Q)
    return unbroadcast(dQ, Q.shape), unbroadcast(dK, K.shape), unbroadcast(dV, V.shape)


def causal_attention(Q: Any, K: Any, V: Any, alignment: str, d_out: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of causal attention (``"top_left"`` or ``"bottom_right"``): :func:`attention` with the causal mask."""
    keep = golden.causal_keep(np.shape(Q)[-2], np.shape(K)[-2], alignment)
    return attention(Q, K, V, keep, d_out)


def general_attention(
    query: Any,
    key: Any,
    value: Any,
    d_out: Any,
    d_lse: Any = None,
    options: AttentionOptions | None = None,
    **keywords: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of :func:`attnscore.maths.golden_variants.general_attention_parts` (every variant):
    ``(d_query, d_key, d_value)``.

    Args:
        query, key, value: as there (``(..., H_q, n_q, d_k)``, ``(..., H_kv, n_k, d_k)``,
            ``(..., H_kv, n_k, d_v)``, or 2-D for one head).
        d_out: ``(..., H_q, n_q, d_v)``, the upstream gradient of the output.
        d_lse: optional ``(..., H_q, n_q)``, the upstream gradient of the logsumexp
            (``∂ lse_i / ∂ biased_ij = P_ij``), for a backward that also differentiates the saved ``L``.
        options, keywords: the variant options of ``general_attention_parts``, whole (an
            :class:`~attnscore.maths.attention_options.AttentionOptions`) or by name (``attn_mask``,
            ``is_causal``, ``alignment``, ``window``, ``scale``, ``softcap``, ``alibi_slopes``, ``key_lengths``).

    Returns:
        float64 arrays of the shapes of ``query``, ``key`` and ``value``. A key/value head shared by
        a group of query heads gets the sum of its group's gradients; a softcap multiplies the
        score gradient by ``1 − tanh²(s / cap)``; the mask, slopes and lengths get none (a float
        mask's gradient, ``dS``, is never asked for).

    Raises:
        ValueError: as ``general_attention_parts``.
    """
    o = AttentionOptions.of(options, keywords, "general_attention")
    Q, K, V = f64(query), f64(key), f64(value)
    if Q.ndim == 2:
        slopes = None if o.alibi_slopes is None else np.reshape(f64(o.alibi_slopes), (1,))
        dq, dk, dv = general_attention(
            Q[None], K[None], V[None], f64(d_out)[None], None if d_lse is None else f64(d_lse)[None],
            replace(o, alibi_slopes=slopes),
        )  # fmt: skip
        return dq[0], dk[0], dv[0]
    parts = golden_variants.general_attention_parts(Q, K, V, o)
    H_q, d_k = Q.shape[-3], Q.shape[-1]
    group = H_q // K.shape[-3]
    kv_head = np.arange(H_q) // group
    K_h, V_h = K[..., kv_head, :, :], V[..., kv_head, :, :]  # (..., H_q, n_k, d)
    P = parts.weights  # (*batch, H_q, n_q, n_k)
    dO = f64(d_out)
    dV_h = np.einsum("...ij,...id->...jd", P, dO)  # (*batch, H_q, n_k, d_v)
    dP = np.einsum("...id,...jd->...ij", dO, V_h)
    dB = _softmax_backward(P, dP)
    if d_lse is not None:
        dB = dB + P * f64(d_lse)[..., None]
    s = 1.0 / np.sqrt(d_k) if o.scale is None else float(o.scale)
    softcap = o.softcap
    if softcap is not None:
        t = np.tanh(parts.scores / float(softcap))
        dB = dB * (1.0 - t * t)  # d(cap·tanh(x/cap))/dx
    dQ = s * np.einsum("...ij,...jd->...id", dB, K_h)
    dK_h = s * np.einsum("...ij,...id->...jd", dB, Q)  # (*batch, H_q, n_k, d_k)

    def per_kv_head(g: np.ndarray) -> np.ndarray:
        return g.reshape(*g.shape[:-3], K.shape[-3], group, *g.shape[-2:]).sum(axis=-3)

    return unbroadcast(dQ, Q.shape), unbroadcast(per_kv_head(dK_h), K.shape), unbroadcast(per_kv_head(dV_h), V.shape)


def weights_rounding(S: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``P ⊙ (1 + |s| + |max s|)``: each weight with the size of its own rounding error (relative)."""
    P = np.nan_to_num(golden.softmax_weights(S, keep))
    with np.errstate(invalid="ignore"):
        z = np.where(keep & np.isfinite(S), S, -np.inf)
        m = np.max(z, axis=-1, keepdims=True, initial=-np.inf)
        ok = keep & np.isfinite(z - m)
        spread = np.where(ok, np.abs(z) + np.abs(np.where(np.isfinite(m), m, 0.0)), 0.0)
    return P * (1.0 + spread)


def cleaned(x: np.ndarray) -> np.ndarray:
    return np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
