"""Golden gradients of general attention in a contract's own layout: the engine the keyword
families (SDPA, the kernel variants, FlashAttention's layout, key padding, packed batches) bind to
their options (:mod:`attnscore.maths.families`). :func:`attnscore.maths.gradient_formulas.general_attention`
with the family's :func:`~attnscore.maths.golden_variants.general_attention_parts` options, the
query, key and value by the contract's own names, and their error scales."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from attnscore.maths import golden_variants
from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.gradient_formulas import cleaned, f64, general_attention, unbroadcast, weights_rounding

__all__ = ["keyword_gradients", "keyword_gradient_scales", "keyword_unused_keys"]

Args = Mapping[str, np.ndarray]


def _heads_first(x: Any, heads_last: bool) -> np.ndarray:
    """FlashAttention's ``(b, n, h, d)`` as ``(b, h, n, d)`` when ``heads_last`` (its own inverse);
    otherwise unchanged (float64)."""
    x = f64(x)
    return np.swapaxes(x, -3, -2) if heads_last else x


def keyword_gradients(
    names: Sequence[str], args: Args, d_out: Any, options: AttentionOptions, heads_last: bool = False
) -> dict[str, np.ndarray]:
    """The float64 gradients of general attention with ``options`` with respect to its query, key and
    value: :func:`general_attention`, in the contract's own layout.

    A key/value head shared by a group of query heads (``enable_gqa``, ``h_kv < h_q``) gets the sum
    of its group's gradients; a softcap multiplies the score gradient by ``1 − tanh²(s / cap)``;
    ``attn_mask`` and ``alibi_slopes`` get none (:data:`attnscore.boundary.gradients.NOT_DIFFERENTIATED`).

    Args:
        names: the contract's parameter names, the query, key and value first
            (``query``/``key``/``value`` or ``q``/``k``/``v``).
        args: its arguments by those names.
        d_out: the upstream gradient, of the output's shape (``(b, n_q, h_q, d_v)`` for ``flash_attn``).
        options: the :func:`~attnscore.maths.golden_variants.general_attention_parts` options of the
            call, whole (a family's ``attention_options``).
        heads_last: the layout is FlashAttention's ``(b, n, h, d)`` (else heads first).

    Returns:
        ``{query name: dQ, key name: dK, value name: dV}``, float64 arrays of the inputs' shapes.

    Example (``scale = 1``, one query, two equal keys: ``P = [½, ½]``):
        >>> g = keyword_gradients(("query", "key", "value"), {"query": np.array([[1.0]]),
        ...     "key": np.array([[0.0], [0.0]]), "value": np.array([[1.0], [3.0]])}, np.array([[1.0]]),
        ...     AttentionOptions(scale=1.0))
        >>> g["key"].tolist(), g["value"].tolist()
        ([[-0.5], [0.5]], [[0.5], [0.5]])
    """
    q, k, v = names[:3]
    dq, dk, dv = general_attention(
        _heads_first(args[q], heads_last),
        _heads_first(args[k], heads_last),
        _heads_first(args[v], heads_last),
        _heads_first(d_out, heads_last),
        options=options,
    )
    return {q: _heads_first(dq, heads_last), k: _heads_first(dk, heads_last), v: _heads_first(dv, heads_last)}


def keyword_gradient_scales(
    names: Sequence[str], args: Args, d_out: Any, options: AttentionOptions, heads_last: bool = False
) -> tuple[int, dict[str, np.ndarray]]:
    """``(n, {name: M})``, the error scale of each gradient entry of :func:`keyword_gradients` (as
    :func:`attnscore.maths.golden_gradients.contract_gradient_scales` for attention, through every variant).

    ``M`` is :func:`keyword_gradients`'s computation on absolute values, every difference made a
    sum, each weight carried with its own rounding error ``P ⊙ (1 + |b| + |max b|)`` (``b`` the
    biased score) plus the score's own error ``P ⊙ e_s`` (``e_s`` as in
    :func:`attnscore.maths.error_scales.general_attention_error`: the product
    ``d_k·|scale|·Σ|q_i k_i|``, the cap, the bias and its addition); a softcap's derivative
    ``1 − t²`` (``t = tanh(s/cap)``) is carried as ``1 + 2t² + 2|t|(1 − t²)·e_s/cap`` (the
    cancellation in ``1 − t²`` and the score's error moving it); the group sum of GQA adds the
    group size to ``n``, the longest sum's length.
    """
    q, k, v = names[:3]
    Q, K, V = (_heads_first(args[n], heads_last) for n in (q, k, v))
    dO = np.abs(cleaned(_heads_first(d_out, heads_last)))
    two_d = Q.ndim == 2
    if two_d:
        Q, K, V, dO = Q[None], K[None], V[None], dO[None]
        if options.alibi_slopes is not None:
            options = replace(options, alibi_slopes=np.reshape(options.alibi_slopes, (1,)))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        parts = golden_variants.general_attention_parts(Q, K, V, options)
        H_q, n_q, d_k = Q.shape[-3:]
        n_k, d_v = K.shape[-2], V.shape[-1]
        group = H_q // K.shape[-3]
        kv_head = np.arange(H_q) // group
        aQ, aK, aV = np.abs(cleaned(Q)), np.abs(cleaned(K)), np.abs(cleaned(V))
        aK_h, aV_h = aK[..., kv_head, :, :], aV[..., kv_head, :, :]  # (..., H_q, n_k, d)
        s = 1.0 / np.sqrt(d_k) if options.scale is None else abs(float(options.scale))
        keep = np.isfinite(parts.biased)  # (*batch, H_q, n_q, n_k)
        mags = s * np.einsum("...id,...jd->...ij", aQ, aK_h)  # |scale|·Σ|q_i k_i|
        err_S = cleaned(d_k * mags + np.abs(parts.scores))  # the scaled product
        cap = options.softcap
        slope_error = np.ones_like(err_S)
        if cap is not None:
            t = np.tanh(parts.scores / float(cap))
            slope = 1.0 - t * t
            slope_error = 1.0 + 2.0 * t * t + 2.0 * np.abs(t) * slope * err_S / float(cap)
            err_S = (err_S + np.abs(parts.scores)) * slope + 2.0 * np.abs(parts.capped)
        bias = np.where(keep, parts.biased - parts.capped, 0.0)
        err_S = np.where(keep, cleaned(err_S + 2.0 * np.abs(bias) + np.abs(parts.biased)), 0.0)
        P = np.nan_to_num(parts.weights)
        A = weights_rounding(parts.biased, keep) + P * err_S  # (*batch, H_q, n_q, n_k)
        dV_h = np.einsum("...ij,...id->...jd", A, dO)  # (*batch, H_q, n_k, d_v)
        dP = np.einsum("...id,...jd->...ij", dO, aV_h)
        D = np.sum(dP * A, axis=-1, keepdims=True)
        dB = A * (dP + D) * slope_error
        dQ = s * np.einsum("...ij,...jd->...id", dB, aK_h)
        dK_h = s * np.einsum("...ij,...id->...jd", dB, aQ)

    def per_kv_head(g: np.ndarray) -> np.ndarray:
        return g.reshape(*g.shape[:-3], K.shape[-3], group, *g.shape[-2:]).sum(axis=-3)

    grads = [
        unbroadcast(dQ, Q.shape),
        unbroadcast(per_kv_head(dK_h), K.shape),
        unbroadcast(per_kv_head(dV_h), V.shape),
    ]
    if two_d:
        grads = [g[0] for g in grads]
    n = int(d_k + n_k + d_v + n_q + group) + 2
    return n, {name: cleaned(_heads_first(g, heads_last)) for name, g in zip((q, k, v), grads, strict=True)}


def keyword_unused_keys(
    names: Sequence[str], args: Args, options: AttentionOptions, heads_last: bool = False
) -> dict[str, np.ndarray]:
    """The keys that no query keeps under ``options`` (a bool ``attn_mask``, causal, a window), for
    the key and the value, in the contract's own layout: the rule a family's ``unused_keys`` gives.

    A key/value head counts as kept when any query head of its group keeps it (``enable_gqa``). A
    finite bias (ALiBi) never leaves a key out.

    Args:
        names, args, options, heads_last: as :func:`keyword_gradients`.

    Returns:
        ``{key name: unused, value name: unused}``, the same bool array for both: ``(..., H_kv, n_k)``
        heads first, ``(b, n_k, h_kv)`` when ``heads_last``, ``(n_k,)`` for 2-D inputs.

    Example (causal, two queries over two keys: the second key is kept by the second query only):
        >>> one = np.ones((1, 2, 1))
        >>> causal = AttentionOptions(is_causal=True)
        >>> keyword_unused_keys(("q", "k", "v"), {"q": one, "k": one, "v": one}, causal)["k"].tolist()
        [[False, False]]
    """
    q, k, v = names[:3]
    Q, K, V = (_heads_first(args[n], heads_last) for n in (q, k, v))
    two_d = Q.ndim == 2
    if two_d:
        Q, K, V = Q[None], K[None], V[None]
        options = replace(options, alibi_slopes=None)  # a finite bias never leaves a key out
    with np.errstate(all="ignore"):
        keep = np.isfinite(golden_variants.general_attention_parts(Q, K, V, options).biased)  # (*b, H_q, n_q, n_k)
    H_kv = K.shape[-3]
    grouped = keep.reshape(*keep.shape[:-3], H_kv, keep.shape[-3] // H_kv, *keep.shape[-2:])
    unused = ~grouped.any(axis=(-3, -2))  # (*b, H_kv, n_k): no query of the group keeps the key
    if heads_last:
        unused = np.swapaxes(unused, -2, -1)  # (b, n_k, h_kv), the key's layout without d
    elif two_d:
        unused = unused[0]
    return {k: unused, v: unused}
