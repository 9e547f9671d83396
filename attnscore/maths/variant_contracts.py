"""The contracts of the attention variants real kernels implement: ``sdpa``, a drop-in for
``torch.nn.functional.scaled_dot_product_attention``, configured per spec by its keywords
(:meth:`attnscore.maths.contract.Contract.configured`). Reference :mod:`attnscore.maths.variants`,
golden :mod:`attnscore.maths.golden_variants`; the error bound is attention's
(:mod:`attnscore.maths.error_scales`) on the equivalent plain attention arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from attnscore.maths import golden, golden_variants, variants
from attnscore.maths.contract import Args, Contract, Keyword
from attnscore.maths.error_scales import as_float64, attention_error, attention_low_terms

__all__ = ["MASK", "sdpa_contract"]

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
        if has_mask:
            keep = np.asarray(a["attn_mask"], dtype=bool) & keep
        S_shape = np.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,)) + (n_k,)
        return {"Q": Q, "K": K, "V": V, "mask": np.broadcast_to(keep, S_shape)}

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
        keyword_parameters=base.keyword_parameters & frozenset(kept),
        reference=ref,
        golden_fn=gold,
        error_fn=lambda a: attention_error(as_attention(a)),
        low_error_fn=lambda a, dtype, factor: attention_low_terms(as_attention(a), dtype, factor),
        options=tuple(sorted(options.items())),
    )


def sdpa_contract() -> Contract:
    """``torch.nn.functional.scaled_dot_product_attention`` with ``dropout_p = 0``, its keywords fixed
    by the spec (:meth:`Contract.configured`); reference :func:`attnscore.maths.variants.general_attention`,
    golden :func:`attnscore.maths.golden_variants.general_attention`, the error bound of ``attention``."""
    parameters = (
        ("query", ("...", "n_q", "d_k")),
        ("key", ("...", "n_k", "d_k")),
        ("value", ("...", "n_k", "d_v")),
        ("attn_mask", MASK),
    )
    unconfigured = Contract(
        name="sdpa",
        kind="sdpa",
        parameters=parameters,
        returns=("...", "n_q", "d_v"),
        reference=variants.general_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        bool_parameters=frozenset({"attn_mask"}),
        keyword_parameters=frozenset({"attn_mask"}),
        optional_parameters=frozenset({"attn_mask"}),
        keywords=_SDPA_KEYWORDS,
        configure=_sdpa_configure,
        samples=(
            ((("scale", 0.5), ("enable_gqa", True)), tuple(n for n, _ in parameters)),
            ((("is_causal", True),), ("query", "key", "value")),
        ),
        bound_text="u·(error of scores and weights propagated through V)",
    )
    return _sdpa_configure(unconfigured, {}, unconfigured.parameter_names)
