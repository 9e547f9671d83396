"""The reference's own error per output entry, in units of the dtype's unit roundoff ``u``: what a
contract's ``error_fn`` and ``low_error_fn`` return for the softmax weights and for attention, derived
from a rounding analysis of each step (scores, max subtraction, exponentials, the weighted sum).

Inputs are float64 numpy arrays by parameter name (``Q (..., n_q, d_k)``, ``K (..., n_k, d_k)``,
``V (..., n_k, d_v)``, ``mask`` broadcastable to ``(..., n_q, n_k)``); outputs have the contract's
output shape.
"""

from __future__ import annotations

import numpy as np

from attnscore.boundary.dtypes import SMALLEST_SUBNORMAL, UNIT_ROUNDOFF
from attnscore.maths import golden, golden_variants
from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.contract import Args
from attnscore.maths.tolerance import ErrorTerms

__all__ = [
    "as_float64",
    "attention_error",
    "attention_low_terms",
    "general_attention_error",
    "kv_grouped",
    "weights_error",
    "weights_low_terms",
]


def as_float64(a: Args, name: str) -> np.ndarray:
    """Argument ``name`` of ``a`` as a float64 array."""
    return np.asarray(a[name], dtype=np.float64)


def weights_error(S: np.ndarray, mask: np.ndarray | None) -> tuple[int, np.ndarray]:
    """Softmax error scale: ``w·(1 + |s| + |max s|)`` plus a floor of one unit per row (``1/n_k``).

    Rounding each score by a relative ``u`` moves ``s_i - logsumexp(s)`` by up to ``u·(|s_i| + |max s|)``,
    so any backward-stable softmax (max subtraction, or ``exp(s - logsumexp(s))``) stays inside.
    """
    S = np.asarray(S, dtype=np.float64)
    w = golden.softmax_weights(S, mask)
    keep = np.ones(S.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), S.shape)
    with np.errstate(invalid="ignore"):
        z = np.where(keep & np.isfinite(S), S, -np.inf)
        m = np.max(z, axis=-1, keepdims=True)
        spread = np.where(keep & np.isfinite(z - m), np.abs(z) + np.abs(m), 0.0)
    n_k = S.shape[-1]
    return n_k, np.nan_to_num(w) * (1.0 + spread) + 1.0 / n_k


def _softmax_parts(S: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(W, gap, spread)`` of a masked softmax: weights (NaN as 0), ``|s - max s|`` and ``|s| + |max s|``
    at kept finite entries (0 elsewhere)."""
    w = golden.softmax_weights(S, keep)
    with np.errstate(invalid="ignore"):
        z = np.where(keep & np.isfinite(S), S, -np.inf)
        m = np.max(z, axis=-1, keepdims=True)
        ok = keep & np.isfinite(z - m)
        gap = np.where(ok, np.abs(z - m), 0.0)
        spread = np.where(ok, np.abs(z) + np.abs(m), 0.0)
    return np.nan_to_num(w), gap, spread


def _neg_log(W: np.ndarray) -> np.ndarray:
    """``|log w|`` where ``w > 0``, else 0."""
    with np.errstate(divide="ignore"):
        return np.where(W > 0, -np.log(np.where(W > 0, W, 1.0)), 0.0)


def weights_low_terms(S: np.ndarray, mask: np.ndarray | None) -> ErrorTerms:
    """Softmax in float16/bfloat16, accumulated in float32 (:class:`ErrorTerms`).

    Rounded in the low precision, relative to ``w_i``: ``s_i - max s`` (the inputs are exact, so
    the subtraction is rounded once: ``|s_i - max s|``, at most ``|log w_i|``), or ``log w_i``
    itself for ``exp(log_softmax(s))`` (``|log w_i|``), then ``exp``, the row sum and the division;
    the row sum's rounding moves every weight by the weighted mean of the exponents' errors.
    Accumulated in float32: the float32 budget of a softmax computed in float32
    (``n_k·(w·(1 + |s| + |max s|) + 1/n_k)``). Floor: ``2 + n_k·w`` subnormals (each
    ``exp`` that underflows, over the row sum). A row sum accumulated in the low precision (every
    weight doubled for 4,096 equal float16 scores) does not fit.
    """
    S = np.asarray(S, dtype=np.float64)
    keep = np.ones(S.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), S.shape)
    W, gap, spread = _softmax_parts(S, keep)
    n_k = S.shape[-1]
    mean_gap = np.sum(W * gap, axis=-1, keepdims=True)
    rounding = W * (3.0 + _neg_log(W) + mean_gap)
    accumulation = n_k * (W * (1.0 + spread) + 1.0 / max(n_k, 1))
    return ErrorTerms(rounding, accumulation, 2.0 + n_k * W)


def attention_low_terms(a: Args, dtype: str, factor: float) -> ErrorTerms:
    """Attention in float16/bfloat16 with float32 accumulation (:class:`ErrorTerms`).

    Scores ``s = Q Kᵀ/√d_k``: rounded in the low precision up to ``2|s| + Σ|q_i k_i|/√d_k`` (a
    query scaled first and the product's result, or the product and the division, or ``√d_k``
    rounded too), accumulated in float32 ``d_k·Σ|q_i k_i|/√d_k``, floor ``d_k + 1 + Σ(|q_i| + |k_i|)``
    subnormals. Softmax renormalises, so a score error ``δs_j`` (or a rounded exponent
    ``s_j - max s``) moves the output by ``Σ_j w_j δs_j (v_j - o)``: it is carried by ``|v_j - o|``,
    not ``|v_j|``, and amplified by ``exp(2·max_j δs_j)`` when it is not small (huge scores in
    bfloat16). Each weight's own roundings (``exp``, the division, the cast before ``P V``, and
    ``log w_j`` for ``exp(log_softmax)``) are carried by ``|v_j|``; the row sum's rounding scales
    the whole output (``2|o|``); ``P V`` and the softmax's sums are accumulated in float32
    (``(2 n_k + 2)·Σ_j w_j |v_j|``).

    With ``a["softcap"]`` (``cap > 0``) the scores are ``c = cap·tanh(s/cap)``: the slope
    ``1 - tanh²(s/cap)`` carries ``s``'s errors (a saturated score's vanish) and ``s/cap``, ``tanh``
    and the product are rounded (``|s|`` before the slope, ``2|c|`` after). With ``a["bias"]`` (a
    float mask or the ALiBi bias, broadcastable to the scores, finite where ``a["mask"]`` keeps the
    key), the softmax runs on ``b = c + bias``: the addition is rounded once more (``|b|``), plus
    ``a["bias_rounding"]`` when the bias is itself computed (ALiBi's ``slope · distance``: ``|bias|``),
    and the weights, the exponents' gaps and spreads are those of ``b`` (a bias of magnitude
    ``|bias|`` adds to the score scale).
    """
    Q, K, V = as_float64(a, "Q"), as_float64(a, "K"), as_float64(a, "V")
    d_k, n_k = Q.shape[-1], K.shape[-2]
    u, u32, sub = UNIT_ROUNDOFF[dtype], UNIT_ROUNDOFF["float32"], SMALLEST_SUBNORMAL[dtype]
    raw = golden.scaled_dot_products(Q, K)
    cap = a.get("softcap")
    with np.errstate(invalid="ignore", over="ignore"):
        capped = raw if cap is None else float(cap) * np.tanh(raw / float(cap))
    S = capped
    kept = np.broadcast_to(np.asarray(a["mask"], dtype=bool), S.shape)
    bias = None
    if a.get("bias") is not None:  # a bias added to the (capped) scores: b = s + bias, rounded once more
        bias = np.broadcast_to(np.where(kept, as_float64(a, "bias"), 0.0), S.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            S = capped + bias
    W, gap, spread = _softmax_parts(S, kept)
    with np.errstate(invalid="ignore", over="ignore"):
        mags = golden.dot_magnitudes(Q, K) / np.sqrt(d_k)
        fin = kept & np.isfinite(S) & np.isfinite(mags)

        def clean(x: np.ndarray) -> np.ndarray:
            return np.where(fin, np.nan_to_num(x, nan=0.0, posinf=0.0), 0.0)

        r_s = 2.0 * np.abs(raw) + mags
        a_s = d_k * mags
        f_s = d_k + 1.0 + golden.operand_sums(Q, K)
        if cap is not None:  # cap·tanh(s/cap): its slope 1 - tanh² carries s's error; s/cap, tanh and cap·t rounded
            slope = 1.0 - np.square(np.tanh(raw / float(cap)))
            r_s = (r_s + np.abs(raw)) * slope + 2.0 * np.abs(capped)
            a_s = a_s * slope
        if bias is not None:  # the addition, and the bias's own rounding (ALiBi's slope · distance)
            own = a.get("bias_rounding")
            r_s = r_s + np.abs(S) + (0.0 if own is None else np.broadcast_to(as_float64(a, "bias_rounding"), S.shape))
        r_s, a_s, f_s = clean(r_s), clean(a_s), clean(f_s)
        delta = factor * (u * r_s + u32 * a_s) + sub * f_s  # the scores' own allowed error
        amp = np.exp(np.minimum(2.0 * np.max(delta, axis=-1, keepdims=True), 50.0))[..., None]  # (..., n_q, 1, 1)
        Vk = np.where(kept[..., None], np.nan_to_num(V[..., None, :, :], nan=0.0, posinf=0.0, neginf=0.0), 0.0)
        Wk = W[..., None]  # (..., n_q, n_k, 1)
        out = np.sum(Wk * Vk, axis=-2, keepdims=True)  # (..., n_q, 1, d_v)
        dev, size = np.abs(Vk - out), np.abs(Vk)  # (..., n_q, n_k, d_v)

        def keys(x: np.ndarray, carried: np.ndarray) -> np.ndarray:
            return np.sum(x[..., None] * carried, axis=-2)  # (..., n_q, n_k, d_v) -> (..., n_q, d_v)

        o = np.abs(out[..., 0, :])
        amp = amp[..., 0, :]
        rounding = amp * keys(W * (r_s + gap), dev) + keys(W * (3.0 + _neg_log(W)), size) + 2.0 * o
        accumulation = amp * keys(W * (a_s + spread), dev) + (2.0 * n_k + 2.0) * keys(W, size)
        floor = amp * keys(W * f_s, dev) + keys(np.where(kept, 2.0 + n_k * W, 0.0), size) + 2.0
    return ErrorTerms(rounding, accumulation, floor)


SUBNORMAL_WEIGHT_FLOOR = 2.0 * SMALLEST_SUBNORMAL["float32"] / UNIT_ROUNDOFF["float32"]
"""Per unit of ``|v_j|``, in the bound's units of ``u``: a weight that falls into float32's subnormal
range (``exp(−100)``) is rounded to a multiple of the smallest subnormal, so ``w_j v_j`` is off by up
to half a subnormal times ``|v_j|`` whatever ``u`` says (an absolute floor: in float64 it amounts to
about 1e-53, below every normal number). float16 and bfloat16 have their own floor
(:func:`attention_low_terms`)."""


def attention_error(a: Args) -> tuple[int, np.ndarray]:
    """``(1, scale)``: the float32/float64 error of softmax(Q Kᵀ/√d_k, masked) V per output entry,
    in units of ``u``: each kept key's weight error (the scores' and the softmax's rounding) carried
    by ``|v_j|``, and :data:`SUBNORMAL_WEIGHT_FLOOR` per ``|v_j|``."""
    Q, K, V = as_float64(a, "Q"), as_float64(a, "K"), as_float64(a, "V")
    d_k, n_k = Q.shape[-1], K.shape[-2]
    S = golden.scaled_dot_products(Q, K)
    w = golden.softmax_weights(S, a["mask"])
    kept = np.broadcast_to(np.asarray(a["mask"], dtype=bool), S.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        # Masked keys contribute nothing, whatever they hold (NaN, inf); a non-finite kept key makes
        # its row's golden value non-finite, which is compared by placement, not by this bound.
        err_S = np.where(kept, d_k * golden.dot_magnitudes(Q, K) / np.sqrt(d_k) + np.abs(S), 0.0)  # units of u
        row = np.max(np.nan_to_num(err_S, nan=0.0, posinf=0.0), axis=-1, keepdims=True)
        W = np.nan_to_num(w)
        per_key = (W * (2.0 * row + n_k + 2.0) + n_k * W + SUBNORMAL_WEIGHT_FLOOR)[..., None] * np.abs(V)[
            ..., None, :, :
        ]
        per_key = np.where(kept[..., None], np.nan_to_num(per_key, nan=0.0, posinf=0.0), 0.0)
    return 1, per_key.sum(axis=-2)  # (..., n_q, n_k, d_v) summed over keys -> (..., n_q, d_v)


def kv_grouped(Q: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``X`` (K or V) with each KV head repeated for its group of query heads (``repeat_interleave``
    on axis -3: ``h0 h0 h1 h1``), when ``X`` has fewer heads than ``Q``."""
    if Q.ndim >= 3 and X.ndim >= 3 and X.shape[-3] not in (Q.shape[-3], 1):
        return np.repeat(X, Q.shape[-3] // X.shape[-3], axis=-3)
    return X


def general_attention_error(a: Args, options: AttentionOptions) -> tuple[int, np.ndarray]:
    """``(1, scale)``: the reference's own error per output entry, in units of ``u``, of
    :func:`attnscore.maths.golden_variants.general_attention_parts` with ``options`` on ``a``'s
    ``query`` ``(..., H_q, n_q, d_k)``, ``key``/``value`` ``(..., H_kv, n_k, d)``.

    Each kept score ``b = cap·tanh(s/cap) + bias`` (the ALiBi bias ``-slope·|i + n_k - n_q - j|``, or
    a float ``attn_mask``'s finite entries; ``-inf`` entries mask their key) is off by at most
    ``e_s = d_k·|scale|·Σ|q_i k_i| + |s|`` before the cap (the product and the scale), then
    ``(e_s + |s|)·(1 - tanh²(s/cap)) + 2|cap·tanh(s/cap)|`` after it (the division, carried by the
    cap's slope, then ``tanh`` and the product: a saturated score's error vanishes), and
    ``2|bias| + |b|`` more for the bias and its addition. As for plain attention
    (:func:`attention_error`), a score error ``δ`` moves a weight by ``w·2·max δ`` and the
    softmax's and ``P V``'s roundings add ``(n_k + 2)·w`` and ``n_k·w``, each carried by ``|v|``
    and summed over the kept keys.
    """
    Q, K, V = as_float64(a, "query"), as_float64(a, "key"), as_float64(a, "value")
    parts = golden_variants.general_attention_parts(Q, K, V, options)
    K_h, V_h = kv_grouped(Q, K), kv_grouped(Q, V)  # (..., H_q, n_k, d)
    d_k, n_k = Q.shape[-1], K.shape[-2]
    factor = abs(float(options.scale)) if options.scale is not None else 1.0 / np.sqrt(d_k)
    kept = np.isfinite(parts.biased)  # (..., H_q, n_q, n_k)
    with np.errstate(invalid="ignore", over="ignore"):
        mags = factor * np.einsum("...id,...jd->...ij", np.abs(Q), np.abs(K_h))  # |scale|·Σ|q_i k_i|
        bias = np.where(kept, parts.biased - parts.capped, 0.0)
        err_S = d_k * mags + np.abs(parts.scores)  # the scaled product
        cap = options.softcap
        if cap is not None:  # through cap·tanh(s/cap), slope 1 - tanh², plus its own three roundings
            slope = 1.0 - np.square(np.tanh(parts.scores / float(cap)))
            err_S = (err_S + np.abs(parts.scores)) * slope + 2.0 * np.abs(parts.capped)
        err_S = np.where(kept, err_S + 2.0 * np.abs(bias) + np.abs(parts.biased), 0.0)
        row = np.max(np.nan_to_num(err_S, nan=0.0, posinf=0.0), axis=-1, keepdims=True)
        W = np.nan_to_num(parts.weights)
        per_key = (W * (2.0 * row + n_k + 2.0) + n_k * W)[..., None] * np.abs(V_h)[..., None, :, :]
        per_key = np.where(kept[..., None], np.nan_to_num(per_key, nan=0.0, posinf=0.0), 0.0)
    return 1, per_key.sum(axis=-2)  # (..., H_q, n_q, n_k, d_v) summed over keys -> (..., H_q, n_q, d_v)
