"""PyTorch's ``scaled_dot_product_attention`` (:attr:`ContractFamily.SDPA`), its keywords fixed per
spec (:class:`SDPAOptions`):

- ``sdpa``, a drop-in for ``torch.nn.functional.scaled_dot_product_attention`` with a bool
  ``attn_mask`` (True = takes part); its error bound is attention's
  (:mod:`attnscore.maths.error_scales`) on the equivalent plain attention arguments;
- ``sdpa_float_mask``, the same drop-in with a float ``attn_mask`` added to the scaled scores
  (``-inf`` masks); its error bound is
  :func:`~attnscore.maths.error_scales.general_attention_error`'s with the mask as the bias.

Reference :func:`attnscore.maths.variants.general_attention`, golden
:func:`attnscore.maths.golden_variants.general_attention` (``is_causal`` top-left, GQA heads grouped
``h0 h0 h1 h1``), gradients :mod:`attnscore.maths.keyword_gradients`.
Source: PyTorch's ``scaled_dot_product_attention`` documentation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.maths import golden, golden_variants, variants
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.contract import Args, Contract
from attnscore.maths.error_scales import (
    as_float64,
    attention_error,
    attention_low_terms,
    general_attention_error,
    kv_grouped,
)
from attnscore.maths.families.base import MASK, GeneralGradients, UnusedKeys, options_of
from attnscore.maths.family import ContractFamily
from attnscore.maths.key_view import key_view
from attnscore.maths.options import Options, causal_keyword, dropout_keyword, keyword, scale_keyword

if TYPE_CHECKING:
    import torch

MEMBER = ContractFamily.SDPA
SHARED_MASKS = False


@dataclass(frozen=True)
class SDPAOptions(Options):
    """SDPA's keywords, as a spec fixes them (``dropout_p`` is always 0)."""

    dropout_p: float = dropout_keyword()
    is_causal: bool = causal_keyword("top_left", "top-left, torch.ones(n_q, n_k).tril()")
    scale: float | None = scale_keyword()
    enable_gqa: bool = keyword(
        "bool", False, "K and V may have fewer heads (axis -3) than Q: head h uses KV head h // (H_q / H_kv)"
    )


def _configure(base: Contract, options: SDPAOptions, kept: tuple[str, ...]) -> Contract:
    """The SDPA contract for fixed keywords (``is_causal``, ``scale``, ``enable_gqa``, ``dropout_p``)
    and its kept parameters (``attn_mask`` optional)."""
    is_causal, scale = bool(options.is_causal), options.scale
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
        enable_gqa: bool = bool(options.enable_gqa),
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
        K, V = kv_grouped(Q, K), kv_grouped(Q, V)
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
        return general_attention_error(
            a, AttentionOptions(is_causal=is_causal, alignment="top_left", scale=scale, attn_mask=mask)
        )

    parameters = base.parameters
    returns = base.returns
    if options.enable_gqa:  # the heads axis is explicit: H_q query heads over H_kv key/value heads
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
        options=options,
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
    (PyTorch 2.5+). Its error bound is :func:`~attnscore.maths.error_scales.general_attention_error`'s
    with the mask as the bias (the bias's magnitude adds to the score scale); in float16/bfloat16
    ``attention``'s budget on the biased scores (:func:`attnscore.maths.error_scales.attention_low_terms`).
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
        family=MEMBER,
        parameters=parameters,
        returns=("...", "n_q", "d_v"),
        reference=variants.general_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        bool_parameters=frozenset() if float_mask else frozenset({"attn_mask"}),
        additive_parameters=frozenset({"attn_mask"}) if float_mask else frozenset(),
        keyword_parameters=frozenset({"attn_mask"}),
        optional_parameters=frozenset({"attn_mask"}),
        options=SDPAOptions(),
        configure=_configure,
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
    return _configure(unconfigured, SDPAOptions(), unconfigured.parameter_names)


CONTRACTS = (sdpa_contract(), sdpa_contract(float_mask=True))


def attention_options(contract: Contract, args: Mapping[str, Any]) -> AttentionOptions:
    """``attn_mask`` from ``args`` (arrays or tensors), ``is_causal`` aligned top-left, ``scale``."""
    options = options_of(contract, SDPAOptions)
    return AttentionOptions(
        attn_mask=args.get("attn_mask"), is_causal=bool(options.is_causal), alignment="top_left", scale=options.scale
    )


def attention_changed(contract: Contract, args: tuple[Any, ...], change: AttentionChange) -> torch.Tensor:
    """The call on ``args`` (``query, key, value[, attn_mask]`` tensors) by general attention with
    ``change``, under :func:`attention_options`: ``(..., h_q, n_q, d_v)``."""
    named = dict(zip(contract.parameter_names, args, strict=True))
    options = attention_options(contract, named)
    return variants.general_attention(named["query"], named["key"], named["value"], options, change=change)


_GENERAL = GeneralGradients(attention_options)
gradients = _GENERAL.gradients
gradient_scales = _GENERAL.gradient_scales


def unused_keys(contract: Contract) -> UnusedKeys | None:
    """A bool ``attn_mask`` or ``is_causal`` can leave a key out of every query: which, under
    :func:`attention_options`, heads first."""
    if "attn_mask" not in contract.bool_parameters and not options_of(contract, SDPAOptions).is_causal:
        return None
    return _GENERAL.unused_keys(contract)
