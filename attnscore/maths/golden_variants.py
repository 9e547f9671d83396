"""Golden values for every attention variant: an independent float64 numpy twin of :mod:`attnscore.maths.variants`.

Shape legend: ``...`` batch dims, ``H_q`` query heads, ``H_kv`` key/value heads, ``n_q`` queries,
``n_k`` keys, ``d_k`` query/key width, ``d_v`` value width. Layout is SDPA's ``(..., H, n, d)``.

Everything is computed in float64 on the CPU from the inputs as given (any dtype numpy can
promote, ``ml_dtypes.bfloat16`` included); torch is never imported, so a bug in the torch
reference and one here would have to agree to go unnoticed. The stages, in order:

1. ``scores = scale · Q Kᵀ`` with query head ``h`` reading KV head ``h // (H_q / H_kv)``
   (grouped-query attention; SDPA ``enable_gqa`` repeats with ``repeat_interleave``, FlashAttention
   and ONNX's reference ``np.repeat`` the same way); ``scale`` defaults to ``1/√d_k``;
2. ``capped = cap · tanh(scores / cap)`` (Gemma 2 / FlashAttention ``softcap``), on the scaled
   scores, before any bias or mask (ONNX ``Attention``: "softcap before mask");
3. ``biased = capped + float mask − slope·|i + offset − j|``, and ``-inf`` wherever a bool mask is
   False, the causal or window rule drops the key, or the key is past its batch item's valid length;
4. ``weights = softmax(biased)`` over keys, a row whose every entry is ``-inf`` giving zeros;
5. ``output = weights V`` and ``lse = log Σ_j exp(biased_ij)`` (natural log; ``-inf`` for a fully
   masked row), what FlashAttention saves as ``softmax_lse``.

Alignment: query ``i`` sits at key position ``i + offset``, ``offset`` = 0 (``"top_left"``, SDPA's
``is_causal``), ``n_k − n_q`` (``"bottom_right"``, FlashAttention ≥ 2.1), an int (the KV-cache
length, as ONNX aligns it with ``past_key``) or one int per batch item (ONNX's external cache:
``nonpad_kv_seqlen[b] − n_q``; ``flash_attn_with_kvcache``'s ``cache_seqlens``). Causal keeps
``j ≤ i + offset``; a window ``(left, right)`` keeps ``i + offset − left ≤ j ≤ i + offset + right``
(−1: that side unbounded; FlashAttention's ``window_size``). A negative offset is allowed: rows
with ``i + offset < 0`` are fully masked under causal attention (ONNX's out-of-contract regime).

Arguments are assumed valid (the torch reference validates them with ``ScoreInputError``); shapes
are still checked and a mismatch raises ``ValueError`` naming the argument.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from attnscore.maths.attention_options import AttentionOptions

__all__ = ["AttentionParts", "general_attention_parts", "general_attention", "varlen_attention"]


@dataclass(frozen=True)
class AttentionParts:
    """Every stage of one attention computation, float64 numpy arrays.

    Attributes:
        scores: ``(..., H_q, n_q, n_k)``, ``scale · Q Kᵀ``.
        capped: ``(..., H_q, n_q, n_k)``, ``cap · tanh(scores / cap)``; equal to ``scores`` without a cap.
        biased: ``(..., H_q, n_q, n_k)``, ``capped`` + float mask + ALiBi, ``-inf`` where masked.
        weights: ``(..., H_q, n_q, n_k)``, softmax of ``biased`` over keys; a fully masked row is 0.
        output: ``(..., H_q, n_q, d_v)``, ``weights V``.
        lse: ``(..., H_q, n_q)``, natural-log logsumexp of ``biased``; ``-inf`` for a fully masked row.
    """

    scores: np.ndarray
    capped: np.ndarray
    biased: np.ndarray
    weights: np.ndarray
    output: np.ndarray
    lse: np.ndarray


_FIELDS = ("scores", "capped", "biased", "weights", "output", "lse")


def _f64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _require(ok: bool, argument: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{argument}: {message}")


def _offset(alignment: Any, n_q: int, n_k: int, batch: tuple[int, ...]) -> int | np.ndarray:
    """Where query 0 sits among the keys: 0, ``n_k - n_q``, the given int, or ``(*batch, 1, 1, 1)`` per-item offsets."""
    if isinstance(alignment, (int, np.integer)) and not isinstance(alignment, bool):
        return int(alignment)
    if not isinstance(alignment, str):
        offsets = np.asarray(alignment)
        _require(offsets.dtype.kind in "iu", "alignment", f"expected integer offsets, found dtype {offsets.dtype}")
        if offsets.ndim == 0:
            return int(offsets)
        _require(
            offsets.shape == batch, "alignment", f"expected one offset per batch item {batch}, found {offsets.shape}"
        )
        return offsets.astype(np.int64).reshape(*batch, 1, 1, 1)  # (*batch, 1, 1, 1) against (..., H_q, n_q, n_k)
    _require(
        alignment in ("top_left", "bottom_right"),
        "alignment",
        f"expected 'top_left', 'bottom_right' or an int, found {alignment!r}",
    )
    return 0 if alignment == "top_left" else n_k - n_q


def _softmax_and_lse(biased: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row softmax and natural-log logsumexp of ``biased`` (..., n_q, n_k); all ``-inf`` rows -> 0 and ``-inf``."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        row_max = np.max(biased, axis=-1, keepdims=True, initial=-np.inf)  # (..., n_q, 1); no keys: -inf
        empty = np.isneginf(row_max)  # a row with no key left
        shift = np.where(empty, 0.0, row_max)
        e = np.exp(biased - shift)  # exp(-inf) = 0 at masked keys
        total = e.sum(axis=-1, keepdims=True)  # (..., n_q, 1), >= 1 unless empty (or NaN)
        weights = np.where(empty | np.isneginf(biased), 0.0, e / np.where(empty, 1.0, total))  # masked: 0 even by a NaN
        lse = np.where(empty, -np.inf, shift + np.log(np.where(empty, 1.0, total)))[..., 0]  # (..., n_q)
    return weights, lse


def general_attention_parts(
    query: Any, key: Any, value: Any, options: AttentionOptions | None = None, **keywords: Any
) -> AttentionParts:
    """Every stage of attention with every variant, in float64 (see the module docstring for the order).

    The options come whole (``options``, an :class:`~attnscore.maths.attention_options.AttentionOptions`)
    or by name (``keywords``, each described below), never both.

    Args:
        query: ``(..., H_q, n_q, d_k)``.
        key: ``(..., H_kv, n_k, d_k)``, ``H_q % H_kv == 0``; batch dims broadcast with ``query``'s.
        value: ``(..., H_kv, n_k, d_v)``.
        attn_mask: bool (True = the key takes part) or float (added to the capped scores, ``-inf``
            masks), broadcasting from the right to ``(..., H_q, n_q, n_k)`` as SDPA's does.
        is_causal: keep only keys ``j <= i + offset``.
        alignment: ``"top_left"`` (offset 0), ``"bottom_right"`` (``n_k - n_q``), an int offset, or
            integers of the batch shape (one offset per batch item).
        window: ``(left, right)``, keep ``i + offset - left <= j <= i + offset + right``; -1 = unbounded.
        scale: multiplies ``Q Kᵀ``; None means ``1/√d_k``.
        softcap: ``cap > 0``: ``cap · tanh(s / cap)`` on the scaled scores; None: no cap.
        alibi_slopes: ``(H_q,)`` or ``(B, H_q)`` (``B`` = the batch dims): adds ``-slope·|i + offset - j|``.
        key_lengths: valid keys per batch item, shape of the batch dims (``(B,)``): masks keys ``j >= len``.

    Returns:
        :class:`AttentionParts`, float64 numpy arrays.

    Raises:
        ValueError: ranks or widths that do not fit, heads that do not divide, an unknown alignment.

    Example (two keys, one query, scale 1; the mask adds -1 to key 1; causal bottom-right keeps both):
        >>> p = general_attention_parts([[[[1.0, 0.0]]]], [[[[1.0, 0.0], [1.0, 0.0]]]], [[[[2.0], [4.0]]]],
        ...     attn_mask=np.array([0.0, -np.log(3.0)]), scale=1.0)
        >>> p.weights.round(6).tolist(), p.output.round(6).tolist()
        ([[[[0.75, 0.25]]]], [[[[2.5]]]])
    """
    o = AttentionOptions.of(options, keywords, "general_attention_parts")
    Q, K, V = _f64(query), _f64(key), _f64(value)
    if Q.ndim == 2:  # one head, no batch: give it a head axis and take it away at the end
        _require(
            K.ndim == 2 and V.ndim == 2,
            "key",
            f"expected 2-D key and value with a 2-D query, found {K.shape}, {V.shape}",
        )
        slopes = None if o.alibi_slopes is None else np.reshape(_f64(o.alibi_slopes), (1,))
        p = general_attention_parts(Q[None], K[None], V[None], replace(o, alibi_slopes=slopes))
        return AttentionParts(*(getattr(p, f)[0] for f in _FIELDS))
    _require(Q.ndim >= 3, "query", f"expected (..., H_q, n_q, d_k), found shape {Q.shape}")
    _require(K.ndim >= 3, "key", f"expected (..., H_kv, n_k, d_k), found shape {K.shape}")
    _require(V.ndim >= 3, "value", f"expected (..., H_kv, n_k, d_v), found shape {V.shape}")
    H_q, n_q, d_k = Q.shape[-3:]
    H_kv, n_k, d_k2 = K.shape[-3:]
    _require(d_k2 == d_k, "key", f"expected last dim d_k={d_k} (query's), found {d_k2}")
    _require(
        V.shape[-3] == H_kv and V.shape[-2] == n_k, "value", f"expected (..., {H_kv}, {n_k}, d_v), found {V.shape}"
    )
    _require(H_kv > 0 and H_q % H_kv == 0, "key", f"expected H_kv dividing H_q={H_q}, found H_kv={H_kv}")
    group = H_q // H_kv
    kv_head = np.arange(H_q) // group  # query head h reads KV head h // group: h0 h0 h1 h1
    K_h = K[..., kv_head, :, :]  # (..., H_q, n_k, d_k)
    V_h = V[..., kv_head, :, :]  # (..., H_q, n_k, d_v)
    batch = np.broadcast_shapes(Q.shape[:-3], K.shape[:-3], V.shape[:-3])

    s = (1.0 / np.sqrt(d_k)) if o.scale is None else float(o.scale)
    scores = s * np.einsum("...hid,...hjd->...hij", Q, K_h)  # (..., H_q, n_q, n_k)
    scores = np.broadcast_to(scores, (*batch, H_q, n_q, n_k)).copy()
    if o.softcap is None:
        capped = scores.copy()
    else:
        _require(float(o.softcap) > 0, "softcap", f"expected a cap > 0 or None, found {o.softcap}")
        capped = float(o.softcap) * np.tanh(scores / float(o.softcap))

    offset = _offset(o.alignment, n_q, n_k, batch)
    i = np.arange(n_q)[:, None]  # (n_q, 1)
    j = np.arange(n_k)[None, :]  # (1, n_k)
    pos = i + offset  # the query's position among the keys: (n_q, 1), or (*batch, 1, n_q, 1) per item
    keep = np.ones((*batch, H_q, n_q, n_k), dtype=bool)
    bias = np.zeros((*batch, H_q, n_q, n_k))
    if o.attn_mask is not None:
        m = np.asarray(o.attn_mask)
        _require(
            m.ndim <= len(batch) + 3, "attn_mask", f"expected at most {len(batch) + 3} dims, found shape {m.shape}"
        )
        try:
            np.broadcast_shapes(m.shape, keep.shape)
        except ValueError:
            _require(False, "attn_mask", f"shape {m.shape} does not broadcast to {keep.shape}")
        if m.dtype == np.bool_:
            keep &= m
        else:
            with np.errstate(invalid="ignore"):
                bias = bias + _f64(m)
            keep &= ~np.isneginf(_f64(m))  # a -inf entry masks whatever the score is (+inf, NaN): ONNX's rule
    if o.is_causal:
        keep &= j <= pos
    left, right = o.window
    if left >= 0:
        keep &= j >= pos - left
    if right >= 0:
        keep &= j <= pos + right
    if o.alibi_slopes is not None:
        slopes = _f64(o.alibi_slopes)
        _require(
            slopes.shape in ((H_q,), (*batch, H_q)),
            "alibi_slopes",
            f"expected (H_q,) or (*batch, H_q) = {(*batch, H_q)}, found {slopes.shape}",
        )
        bias = bias - slopes[..., :, None, None] * np.abs(pos - j)  # (..., H_q, n_q, n_k)
    if o.key_lengths is not None:
        lengths = np.asarray(o.key_lengths)
        _require(lengths.shape == batch, "key_lengths", f"expected the batch shape {batch}, found {lengths.shape}")
        keep &= j < lengths.reshape(*batch, 1, 1, 1)  # (..., 1, 1, 1) against (..., H_q, n_q, n_k)
    with np.errstate(invalid="ignore"):
        biased = np.where(keep, capped + bias, -np.inf)  # (..., H_q, n_q, n_k)
    weights, lse = _softmax_and_lse(biased)
    output = np.einsum("...hij,...hjd->...hid", weights, V_h)  # (..., H_q, n_q, d_v)
    return AttentionParts(scores, capped, biased, weights, output, lse)


def general_attention(
    query: Any, key: Any, value: Any, options: AttentionOptions | None = None, **keywords: Any
) -> np.ndarray:
    """The output ``(..., H_q, n_q, d_v)`` of :func:`general_attention_parts` (same arguments)."""
    return general_attention_parts(query, key, value, options, **keywords).output


def varlen_attention(
    query: Any, key: Any, value: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, options: AttentionOptions | None = None
) -> np.ndarray:
    """Attention over a packed batch, as ``flash_attn_varlen_func`` takes it, in float64.

    Args:
        query: ``(total_q, H_q, d_k)``: the batch's queries packed along axis 0.
        key: ``(total_k, H_kv, d_k)``; value: ``(total_k, H_kv, d_v)``.
        cu_seqlens_q, cu_seqlens_k: ``(B + 1,)`` ints, ``0 = c_0 <= c_1 <= ... = total``: sequence
            ``b`` owns rows ``c_b .. c_{b+1} - 1``.
        options: those of :func:`general_attention_parts`, one value (None: plain attention), except
            ``key_lengths``; ``alignment``
            and ``window`` apply per sequence (``"bottom_right"`` uses that sequence's lengths);
            ``alibi_slopes`` of shape ``(B, H_q)`` give sequence ``b`` row ``b``, ``B`` alignment
            offsets give sequence ``b`` offset ``b``; ``attn_mask`` is over
            the packed layout, broadcasting from the right to ``(H_q, total_q, total_k)``, and
            sequence ``b`` uses its diagonal block (rows ``cu_q[b]..``, columns ``cu_k[b]..``).

    Returns:
        ``(total_q, H_q, d_v)`` float64: each sequence attends only to its own keys.

    Raises:
        ValueError: offsets that are not ``(B + 1,)`` non-decreasing from 0 to the totals.
    """
    o = AttentionOptions() if options is None else options
    _require(o.key_lengths is None, "key_lengths", "not an option of varlen_attention (cu_seqlens_k sets the lengths)")
    Q, K, V = _f64(query), _f64(key), _f64(value)
    cq = np.asarray(cu_seqlens_q).astype(np.int64)
    ck = np.asarray(cu_seqlens_k).astype(np.int64)
    _require(
        Q.ndim == 3 and K.ndim == 3 and V.ndim == 3,
        "query",
        f"expected packed (total, H, d) inputs, found {Q.shape}, {K.shape}, {V.shape}",
    )
    for name, c, total in (("cu_seqlens_q", cq, Q.shape[0]), ("cu_seqlens_k", ck, K.shape[0])):
        _require(
            c.ndim == 1 and c.size >= 2 and c[0] == 0 and c[-1] == total and bool(np.all(np.diff(c) >= 0)),
            name,
            f"expected non-decreasing offsets from 0 to {total}, found {c.tolist()}",
        )
    _require(cq.size == ck.size, "cu_seqlens_k", f"expected {cq.size} offsets like cu_seqlens_q, found {ck.size}")
    slopes, mask, alignment = o.alibi_slopes, o.attn_mask, o.alignment
    per_sequence = not isinstance(alignment, (str, int, np.integer)) and np.ndim(alignment) == 1
    _require(
        not per_sequence or np.shape(alignment) == (cq.size - 1,),
        "alignment",
        f"expected {cq.size - 1} offsets, one per sequence, found {np.shape(alignment)}",
    )
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask), (Q.shape[1], Q.shape[0], K.shape[0]))  # (H_q, total_q, total_k)
    out = np.zeros((Q.shape[0], Q.shape[1], V.shape[2]))
    for b in range(cq.size - 1):
        q = Q[cq[b] : cq[b + 1]].transpose(1, 0, 2)  # (H_q, n_q_b, d_k)
        k = K[ck[b] : ck[b + 1]].transpose(1, 0, 2)  # (H_kv, n_k_b, d_k)
        v = V[ck[b] : ck[b + 1]].transpose(1, 0, 2)  # (H_kv, n_k_b, d_v)
        s = None if slopes is None else (_f64(slopes) if np.ndim(slopes) == 1 else _f64(slopes)[b])
        m = None if mask is None else mask[:, cq[b] : cq[b + 1], ck[b] : ck[b + 1]]  # (H_q, n_q_b, n_k_b)
        a = int(np.asarray(alignment)[b]) if per_sequence else alignment
        seq = general_attention(q, k, v, replace(o, attn_mask=m, alibi_slopes=s, alignment=a))  # (H_q, n_q_b, d_v)
        out[cq[b] : cq[b + 1]] = seq.transpose(1, 0, 2)
    return out
