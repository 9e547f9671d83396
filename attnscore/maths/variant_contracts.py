"""The contracts of the attention variants real kernels implement, configured per spec by their
keywords (:meth:`attnscore.maths.contract.Contract.configured`):

- ``sdpa``, a drop-in for ``torch.nn.functional.scaled_dot_product_attention``; its error bound is
  attention's (:mod:`attnscore.maths.error_scales`) on the equivalent plain attention arguments;
- ``sdpa_float_mask``, the same drop-in with a float ``attn_mask`` added to the scaled scores
  (``-inf`` masks); its error bound is :func:`kernel_attention_error`'s with the mask as the bias;
- ``kernel_attention``, an attention kernel with FlashAttention's options (grouped-query heads,
  ``softcap``, ``alibi_slopes``, causal aligned bottom-right) in SDPA's ``(..., H, n, d)`` layout:
  ``f(query, key, value, alibi_slopes=None, *, scale=None, is_causal=False, softcap=None)``; its
  error bound is :func:`kernel_attention_error`, in float16/bfloat16 :func:`kernel_attention_low_terms`.

Reference :mod:`attnscore.maths.variants`, golden :mod:`attnscore.maths.golden_variants`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.maths import golden, golden_variants, variants
from attnscore.maths.contract import Args, Contract, Keyword
from attnscore.maths.error_scales import as_float64, attention_error, attention_low_terms
from attnscore.maths.family import ContractFamily
from attnscore.maths.key_view import key_view
from attnscore.maths.tolerance import ErrorTerms

if TYPE_CHECKING:
    import torch
else:
    from attnscore.boundary.lazy_torch import torch

__all__ = ["MASK", "kernel_attention_contract", "kernel_attention_error", "kernel_attention_low_terms", "sdpa_contract"]

MASK = ("...", "n_q", "n_k")
"""The shape legend of a mask over the scores."""


_SDPA_KEYWORDS = (
    Keyword("dropout_p", "zero", 0.0, "dropout probability; 0 (a deterministic reference)"),
    Keyword(
        "is_causal", "bool", False, "keep key j for query i only when j <= i (top-left, torch.ones(n_q, n_k).tril())"
    ),
    Keyword("scale", "positive_or_null", None, "the factor of Q Kᵀ; null means 1/√d_k"),
    Keyword(
        "enable_gqa",
        "bool",
        False,
        "K and V may have fewer heads (axis -3) than Q: head h uses KV head h // (H_q / H_kv)",
    ),
)


def _kv_grouped(Q: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``X`` (K or V) with each KV head repeated for its group of query heads (``repeat_interleave``
    on axis -3: ``h0 h0 h1 h1``), when ``X`` has fewer heads than ``Q``."""
    if Q.ndim >= 3 and X.ndim >= 3 and X.shape[-3] not in (Q.shape[-3], 1):
        return np.repeat(X, Q.shape[-3] // X.shape[-3], axis=-3)
    return X


def _sdpa_configure(base: Contract, options: Mapping[str, Any], kept: tuple[str, ...]) -> Contract:
    """The SDPA contract for fixed keywords (``is_causal``, ``scale``, ``enable_gqa``, ``dropout_p``)
    and its kept parameters (``attn_mask`` optional)."""
    is_causal = bool(options.get("is_causal", False))
    scale = options.get("scale")
    enable_gqa = bool(options.get("enable_gqa", False))
    if is_causal and "attn_mask" in kept:
        raise ValueError(
            "keyword is_causal: expected false when attn_mask is a parameter (SDPA refuses both), found true; "
            "leave attn_mask out of function.parameters for a causal spec"
        )
    has_mask = "attn_mask" in kept
    float_mask = has_mask and "attn_mask" in base.additive_parameters  # added to the scores, -inf masks

    def ref(
        query: Any,
        key: Any,
        value: Any,
        attn_mask: Any = None,
        dropout_p: float = 0.0,
        is_causal: bool = is_causal,
        scale: float | None = scale,
        enable_gqa: bool = enable_gqa,
    ) -> torch.Tensor:
        # SDPA's signature; dropout_p is 0 and GQA heads are grouped whenever K has fewer heads.
        return variants.general_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)

    def gold(a: Args) -> np.ndarray:
        mask = a["attn_mask"] if has_mask else None
        return golden_variants.general_attention(
            a["query"], a["key"], a["value"], attn_mask=mask, is_causal=is_causal, scale=scale
        )

    def as_attention(a: Args) -> dict[str, np.ndarray]:
        """The plain ``attention`` contract's arguments with the same scores, weights and output:
        Q rescaled so that ``Q' Kᵀ/√d_k = scale·Q Kᵀ``, K and V grouped, the causal mask folded in."""
        Q, K, V = as_float64(a, "query"), as_float64(a, "key"), as_float64(a, "value")
        d_k, n_q, n_k = Q.shape[-1], Q.shape[-2], K.shape[-2]
        if scale is not None:
            Q = Q * (float(scale) * np.sqrt(d_k))
        K, V = _kv_grouped(Q, K), _kv_grouped(Q, V)
        keep = np.ones((n_q, n_k), dtype=bool)
        if is_causal:
            keep = golden.causal_keep(n_q, n_k, "top_left")
        S_shape = np.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,)) + (n_k,)
        if float_mask:  # the float mask's -inf entries mask; the others are a bias on the scores
            bias = as_float64(a, "attn_mask")
            keep = ~np.isneginf(bias) & keep
            S_shape = np.broadcast_shapes(S_shape, bias.shape)
            keep = np.broadcast_to(keep, S_shape)
            return {"Q": Q, "K": K, "V": V, "mask": keep, "bias": np.where(keep, np.broadcast_to(bias, S_shape), 0.0)}
        if has_mask:
            keep = np.asarray(a["attn_mask"], dtype=bool) & keep
        return {"Q": Q, "K": K, "V": V, "mask": np.broadcast_to(keep, S_shape)}

    def error(a: Args) -> tuple[int, np.ndarray]:
        if not float_mask:
            return attention_error(as_attention(a))
        mask = as_float64(a, "attn_mask")
        return _variant_error(a, is_causal=is_causal, alignment="top_left", scale=scale, attn_mask=mask)

    parameters = base.parameters
    returns = base.returns
    if enable_gqa:  # the heads axis is explicit: H_q query heads over H_kv key/value heads
        heads = {"query": "h_q", "key": "h_kv", "value": "h_kv", "attn_mask": "h_q"}
        parameters = tuple((n, ("...", heads[n], *legend[1:])) for n, legend in base.parameters)
        returns = ("...", "h_q", *base.returns[1:])
    return dataclasses.replace(
        base,
        parameters=tuple(p for p in parameters if p[0] in kept),
        returns=returns,
        bool_parameters=base.bool_parameters & frozenset(kept),
        additive_parameters=base.additive_parameters & frozenset(kept),
        keyword_parameters=base.keyword_parameters & frozenset(kept),
        reference=ref,
        golden_fn=gold,
        error_fn=error,
        low_error_fn=lambda a, dtype, factor: attention_low_terms(as_attention(a), dtype, factor),
        options=tuple(sorted(options.items())),
        key_view_fn=lambda a: key_view(as_attention(a)),
    )


def sdpa_contract(float_mask: bool = False) -> Contract:
    """``torch.nn.functional.scaled_dot_product_attention`` with ``dropout_p = 0``, its keywords fixed
    by the spec (:meth:`Contract.configured`); reference :func:`attnscore.maths.variants.general_attention`,
    golden :func:`attnscore.maths.golden_variants.general_attention`.

    ``float_mask=False``: the ``sdpa`` contract, a bool ``attn_mask`` (True = takes part), the error
    bound of ``attention``. ``float_mask=True``: the ``sdpa_float_mask`` contract, ``attn_mask`` a
    float mask of the query's dtype, cast to the tested dtype like the other float inputs, added to
    the scaled scores ``scale · Q Kᵀ + attn_mask`` (after the scale, as SDPA adds it); ``-inf``
    entries mask their key, and a query whose entries are all ``-inf`` gets the zero vector
    (PyTorch 2.5+). Its error bound is :func:`kernel_attention_error`'s with the mask as the bias
    (the bias's magnitude adds to the score scale); in float16/bfloat16 ``attention``'s budget on
    the biased scores (:func:`attnscore.maths.error_scales.attention_low_terms`).
    Source: PyTorch's ``scaled_dot_product_attention`` documentation (attn_mask: "a float mask of
    the same type as query, key, value that is added to the attention score").
    """
    parameters = (
        ("query", ("...", "n_q", "d_k")),
        ("key", ("...", "n_k", "d_k")),
        ("value", ("...", "n_k", "d_v")),
        ("attn_mask", MASK),
    )
    everything = tuple(n for n, _ in parameters)
    unconfigured = Contract(
        name="sdpa_float_mask" if float_mask else "sdpa",
        family=ContractFamily.SDPA,
        parameters=parameters,
        returns=("...", "n_q", "d_v"),
        reference=variants.general_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        bool_parameters=frozenset() if float_mask else frozenset({"attn_mask"}),
        additive_parameters=frozenset({"attn_mask"}) if float_mask else frozenset(),
        keyword_parameters=frozenset({"attn_mask"}),
        optional_parameters=frozenset({"attn_mask"}),
        keywords=_SDPA_KEYWORDS,
        configure=_sdpa_configure,
        samples=(
            ((("scale", 0.5), ("enable_gqa", True)), everything),
            ((("enable_gqa", True),), everything),
        )
        if float_mask
        else (
            ((("scale", 0.5), ("enable_gqa", True)), everything),
            ((("is_causal", True),), ("query", "key", "value")),
        ),
        bound_text=(
            "u·(error of scores, bias and weights propagated through V)"
            if float_mask
            else "u·(error of scores and weights propagated through V)"
        ),
    )
    return _sdpa_configure(unconfigured, {}, unconfigured.parameter_names)


_KERNEL_KEYWORDS = (
    Keyword("scale", "positive_or_null", None, "the factor of Q Kᵀ; null means 1/√d_k"),
    Keyword(
        "is_causal",
        "bool",
        False,
        "keep key j for query i only when j <= i + n_k - n_q (bottom-right, FlashAttention's causal)",
    ),
    Keyword(
        "softcap",
        "positive_or_null",
        None,
        "cap > 0: cap · tanh(s / cap) on the scaled scores, before the causal mask and the ALiBi bias "
        "(FlashAttention, Gemma 2); null means no cap",
    ),
)


def kernel_attention_error(a: Args, options: Mapping[str, Any]) -> tuple[int, np.ndarray]:
    """``(1, scale)``: the reference's own error per output entry, in units of ``u``, of
    :func:`attnscore.maths.variants.general_attention` with ``options`` (``scale``, ``is_causal``
    bottom-right, ``softcap``; ``alibi_slopes`` from ``a`` when given) on ``a``'s ``query``
    ``(..., H_q, n_q, d_k)``, ``key``/``value`` ``(..., H_kv, n_k, d)``.

    Each kept score ``b = cap·tanh(s/cap) - slope·|i + n_k - n_q - j|`` is off by at most
    ``e_s = d_k·|scale|·Σ|q_i k_i| + |s|`` before the cap (the product and the scale), then
    ``(e_s + |s|)·(1 - tanh²(s/cap)) + 2|cap·tanh(s/cap)|`` after it (the division, carried by the
    cap's slope, then ``tanh`` and the product: a saturated score's error vanishes), and
    ``2|bias| + |b|`` more for the bias and its addition. As for plain attention
    (:func:`attention_error`), a score error ``δ`` moves a weight by ``w·2·max δ`` and the
    softmax's and ``P V``'s roundings add ``(n_k + 2)·w`` and ``n_k·w``, each carried by ``|v|``
    and summed over the kept keys.
    """
    slopes = a.get("alibi_slopes")
    return _variant_error(
        a,
        is_causal=bool(options.get("is_causal", False)),
        alignment="bottom_right",
        scale=options.get("scale"),
        softcap=options.get("softcap"),
        alibi_slopes=None if slopes is None else as_float64(a, "alibi_slopes"),
    )


def _variant_error(
    a: Args,
    *,
    is_causal: bool,
    alignment: str,
    scale: float | None,
    softcap: float | None = None,
    alibi_slopes: np.ndarray | None = None,
    attn_mask: np.ndarray | None = None,
) -> tuple[int, np.ndarray]:
    """``(1, scale)`` of :func:`kernel_attention_error` for any of the variant options: the bias
    (ALiBi, a float ``attn_mask``) is ``biased - capped`` at the kept entries (``-inf`` float-mask
    entries are masked, so they add nothing)."""
    Q, K, V = as_float64(a, "query"), as_float64(a, "key"), as_float64(a, "value")
    parts = golden_variants.general_attention_parts(
        Q,
        K,
        V,
        attn_mask=attn_mask,
        is_causal=is_causal,
        alignment=alignment,
        scale=scale,
        softcap=softcap,
        alibi_slopes=alibi_slopes,
    )
    K_h, V_h = _kv_grouped(Q, K), _kv_grouped(Q, V)  # (..., H_q, n_k, d)
    d_k, n_k = Q.shape[-1], K.shape[-2]
    factor = abs(float(scale)) if scale is not None else 1.0 / np.sqrt(d_k)
    kept = np.isfinite(parts.biased)  # (..., H_q, n_q, n_k)
    with np.errstate(invalid="ignore", over="ignore"):
        mags = factor * np.einsum("...id,...jd->...ij", np.abs(Q), np.abs(K_h))  # |scale|·Σ|q_i k_i|
        bias = np.where(kept, parts.biased - parts.capped, 0.0)
        err_S = d_k * mags + np.abs(parts.scores)  # the scaled product
        cap = softcap
        if cap is not None:  # through cap·tanh(s/cap), slope 1 - tanh², plus its own three roundings
            slope = 1.0 - np.square(np.tanh(parts.scores / float(cap)))
            err_S = (err_S + np.abs(parts.scores)) * slope + 2.0 * np.abs(parts.capped)
        err_S = np.where(kept, err_S + 2.0 * np.abs(bias) + np.abs(parts.biased), 0.0)
        row = np.max(np.nan_to_num(err_S, nan=0.0, posinf=0.0), axis=-1, keepdims=True)
        W = np.nan_to_num(parts.weights)
        per_key = (W * (2.0 * row + n_k + 2.0) + n_k * W)[..., None] * np.abs(V_h)[..., None, :, :]
        per_key = np.where(kept[..., None], np.nan_to_num(per_key, nan=0.0, posinf=0.0), 0.0)
    return 1, per_key.sum(axis=-2)  # (..., H_q, n_q, n_k, d_v) summed over keys -> (..., H_q, n_q, d_v)


def kernel_attention_low_terms(a: Args, options: Mapping[str, Any], dtype: str, factor: float) -> ErrorTerms:
    """The float16/bfloat16 budget (:class:`~attnscore.maths.tolerance.ErrorTerms`) of
    :func:`attnscore.maths.variants.general_attention` with ``options`` (``scale``, ``is_causal``
    bottom-right, ``softcap``; ``alibi_slopes`` from ``a``) on ``a``, for a kernel that rounds in
    ``dtype`` and accumulates in float32: attention's budget
    (:func:`attnscore.maths.error_scales.attention_low_terms`) on ``Q`` rescaled so that
    ``Q' Kᵀ/√d_k = scale·Q Kᵀ`` and K, V grouped, with the cap ``cap·tanh(s/cap)`` (its slope
    carries the scores' errors; the division, ``tanh`` and the product are rounded) and the ALiBi
    bias ``-slope·|i + n_k - n_q - j|`` (the product rounded, then the addition) on the kept scores.
    """
    Q, K, V = as_float64(a, "query"), as_float64(a, "key"), as_float64(a, "value")
    d_k, n_q, n_k = Q.shape[-1], Q.shape[-2], K.shape[-2]
    scale = options.get("scale")
    if scale is not None:
        Q = Q * (float(scale) * np.sqrt(d_k))
    K, V = _kv_grouped(Q, K), _kv_grouped(Q, V)
    S_shape = np.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,)) + (n_k,)
    keep = np.ones((n_q, n_k), dtype=bool)
    if options.get("is_causal"):
        keep = golden.causal_keep(n_q, n_k, "bottom_right")
    terms: dict[str, Any] = {"Q": Q, "K": K, "V": V, "mask": np.broadcast_to(keep, S_shape)}
    if options.get("softcap") is not None:
        terms["softcap"] = float(options["softcap"])
    if a.get("alibi_slopes") is not None:
        slopes = as_float64(a, "alibi_slopes")  # (H_q,) or (*batch, H_q)
        distance = np.abs(np.arange(n_q)[:, None] + (n_k - n_q) - np.arange(n_k)[None, :])  # (n_q, n_k)
        bias = -slopes[..., None, None] * distance  # (..., H_q, n_q, n_k)
        S_shape = np.broadcast_shapes(S_shape, bias.shape)
        terms["mask"] = np.broadcast_to(keep, S_shape)
        terms["bias"] = np.broadcast_to(bias, S_shape)
        terms["bias_rounding"] = np.abs(terms["bias"])
    return attention_low_terms(terms, dtype, factor)


def _kernel_configure(base: Contract, options: Mapping[str, Any], kept: tuple[str, ...]) -> Contract:
    """The ``kernel_attention`` contract for fixed keywords (``scale``, ``is_causal``, ``softcap``)
    and its kept parameters (``alibi_slopes`` optional)."""
    is_causal = bool(options.get("is_causal", False))
    scale, softcap = options.get("scale"), options.get("softcap")
    has_alibi = "alibi_slopes" in kept

    def ref(
        query: Any,
        key: Any,
        value: Any,
        alibi_slopes: Any = None,
        *,
        scale: float | None = scale,
        is_causal: bool = is_causal,
        softcap: float | None = softcap,
    ) -> torch.Tensor:
        # FlashAttention's options; causal and ALiBi distances aligned bottom-right as it does
        return variants.general_attention(
            query,
            key,
            value,
            is_causal=is_causal,
            alignment="bottom_right",
            scale=scale,
            softcap=softcap,
            alibi_slopes=alibi_slopes,
        )

    def gold(a: Args) -> np.ndarray:
        return golden_variants.general_attention(
            a["query"],
            a["key"],
            a["value"],
            is_causal=is_causal,
            alignment="bottom_right",
            scale=scale,
            softcap=softcap,
            alibi_slopes=a["alibi_slopes"] if has_alibi else None,
        )

    fixed = dict(options)
    return dataclasses.replace(
        base,
        parameters=tuple(p for p in base.parameters if p[0] in kept),
        keyword_parameters=base.keyword_parameters & frozenset(kept),
        reference=ref,
        golden_fn=gold,
        error_fn=lambda a: kernel_attention_error(a, fixed),
        low_error_fn=lambda a, dtype, factor: kernel_attention_low_terms(a, fixed, dtype, factor),
        options=tuple(sorted(options.items())),
        key_view_fn=lambda a: key_view(_kernel_as_attention(a, is_causal)),
    )


def _kernel_as_attention(a: Args, is_causal: bool) -> dict[str, np.ndarray]:
    """Which keys a ``kernel_attention`` call keeps, as plain attention arguments: K and V grouped,
    the causal rule aligned bottom-right (ALiBi and the cap change weights, never which keys take part)."""
    Q, K, V = as_float64(a, "query"), as_float64(a, "key"), as_float64(a, "value")
    K, V = _kv_grouped(Q, K), _kv_grouped(Q, V)
    n_q, n_k = Q.shape[-2], K.shape[-2]
    keep = golden.causal_keep(n_q, n_k, "bottom_right") if is_causal else np.ones((n_q, n_k), dtype=bool)
    return {"Q": Q, "K": K, "V": V, "mask": keep}


def kernel_attention_contract() -> Contract:
    """An attention kernel with FlashAttention's options in SDPA's layout:
    ``f(query (..., h_q, n_q, d_k), key (..., h_kv, n_k, d_k), value (..., h_kv, n_k, d_v),
    alibi_slopes (h_q,) = None, *, scale=None, is_causal=False, softcap=None) -> (..., h_q, n_q, d_v)``.

    Query head ``h`` uses key/value head ``h // (h_q / h_kv)`` (grouped-query attention); the scores
    ``scale · Q Kᵀ`` (``scale`` default ``1/√d_k``) are capped as ``cap · tanh(s / cap)`` when
    ``softcap`` is set, then the ALiBi bias ``-slope_h · |i + n_k - n_q - j|`` is added and, with
    ``is_causal``, keys ``j > i + n_k - n_q`` are masked (FlashAttention's bottom-right alignment);
    softmax over the keys, times V. ``alibi_slopes`` is passed by name and is optional (a spec
    that leaves it out never passes it). The keywords are fixed per spec (``function.keywords``).
    Reference :func:`attnscore.maths.variants.general_attention`, golden
    :func:`attnscore.maths.golden_variants.general_attention`, error :func:`kernel_attention_error`.
    Source: FlashAttention's README and ``flash_attn_func``; Gemma 2 (softcap); Press et al. (2022) (ALiBi).
    """
    parameters = (
        ("query", ("...", "h_q", "n_q", "d_k")),
        ("key", ("...", "h_kv", "n_k", "d_k")),
        ("value", ("...", "h_kv", "n_k", "d_v")),
        ("alibi_slopes", ("h_q",)),
    )
    unconfigured = Contract(
        name="kernel_attention",
        family=ContractFamily.KERNEL_ATTENTION,
        parameters=parameters,
        returns=("...", "h_q", "n_q", "d_v"),
        reference=variants.general_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        keyword_parameters=frozenset({"alibi_slopes"}),
        optional_parameters=frozenset({"alibi_slopes"}),
        keywords=_KERNEL_KEYWORDS,
        configure=_kernel_configure,
        samples=(
            ((("is_causal", True), ("softcap", 2.0)), ("query", "key", "value")),
            ((), tuple(n for n, _ in parameters)),
        ),
        bound_text="u·(error of capped, biased scores and weights propagated through V)",
    )
    return _kernel_configure(unconfigured, {}, unconfigured.parameter_names)
