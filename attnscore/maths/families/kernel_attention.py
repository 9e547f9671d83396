"""An attention kernel with FlashAttention's options in SDPA's layout
(:attr:`ContractFamily.KERNEL_ATTENTION`), its keywords fixed per spec (:class:`KernelOptions`):
``f(query, key, value, alibi_slopes=None, *, scale=None, is_causal=False, softcap=None)``;
grouped-query heads, ``softcap``, ``alibi_slopes`` and causal aligned bottom-right. The
``alibi_layout`` convention says the slopes' shape, as FlashAttention takes either: ``heads``
(``(h_q,)``, one slope per head, the default) or ``batch_heads`` (``(..., h_q)``, one per batch
item and head). Its error bound is :func:`kernel_attention_error`, in float16/bfloat16
:func:`kernel_attention_low_terms`.

Reference :func:`attnscore.maths.variants.general_attention`, golden
:func:`attnscore.maths.golden_variants.general_attention`, gradients
:mod:`attnscore.maths.keyword_gradients`.
Source: FlashAttention's README and ``flash_attn_func``; Gemma 2 (softcap); Press et al. (2022) (ALiBi).
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
from attnscore.maths.error_scales import as_float64, attention_low_terms, general_attention_error, kv_grouped
from attnscore.maths.families.base import GeneralGradients, UnusedKeys, options_of
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import f64
from attnscore.maths.key_view import key_view
from attnscore.maths.options import Options, causal_keyword, convention, keyword, scale_keyword
from attnscore.maths.tolerance import ErrorTerms

if TYPE_CHECKING:
    import torch

MEMBER = ContractFamily.KERNEL_ATTENTION
SHARED_MASKS = False


ALIBI_LAYOUTS = {"heads": ("h_q",), "batch_heads": ("...", "h_q")}
"""The shapes ``alibi_slopes`` may have, by the ``alibi_layout`` convention's value (FlashAttention's
``alibi_slopes``: ``(nheads,)`` or ``(batch_size, nheads)``)."""


@dataclass(frozen=True)
class KernelOptions(Options):
    """The kernel's keywords, as a spec fixes them, and the ALiBi slopes' layout."""

    scale: float | None = scale_keyword()
    is_causal: bool = causal_keyword("bottom_right", "bottom-right, FlashAttention's causal")
    softcap: float | None = keyword(
        "positive_or_null",
        None,
        "cap > 0: cap · tanh(s / cap) on the scaled scores, before the causal mask and the ALiBi bias "
        "(FlashAttention, Gemma 2); null means no cap",
    )
    alibi_layout: str = convention(
        "heads",
        "the shape of alibi_slopes: heads, (h_q,), one slope per head; batch_heads, (..., h_q), one per batch "
        "item and head (FlashAttention takes either)",
        tuple(ALIBI_LAYOUTS),
    )


def kernel_attention_error(a: Args, options: KernelOptions) -> tuple[int, np.ndarray]:
    """``(1, scale)``: the reference's own error per output entry, in units of ``u``, of
    :func:`attnscore.maths.variants.general_attention` with ``options`` (``scale``, ``is_causal``
    bottom-right, ``softcap``; ``alibi_slopes`` from ``a`` when given) on ``a``'s ``query``
    ``(..., H_q, n_q, d_k)``, ``key``/``value`` ``(..., H_kv, n_k, d)``: see
    :func:`attnscore.maths.error_scales.general_attention_error`.
    """
    slopes = a.get("alibi_slopes")
    return general_attention_error(
        a,
        AttentionOptions(
            is_causal=bool(options.is_causal),
            alignment="bottom_right",
            scale=options.scale,
            softcap=options.softcap,
            alibi_slopes=None if slopes is None else as_float64(a, "alibi_slopes"),
        ),
    )


def kernel_attention_low_terms(a: Args, options: KernelOptions, dtype: str, factor: float) -> ErrorTerms:
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
    scale = options.scale
    if scale is not None:
        Q = Q * (float(scale) * np.sqrt(d_k))
    K, V = kv_grouped(Q, K), kv_grouped(Q, V)
    S_shape = np.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,)) + (n_k,)
    keep = np.ones((n_q, n_k), dtype=bool)
    if options.is_causal:
        keep = golden.causal_keep(n_q, n_k, "bottom_right")
    terms: dict[str, Any] = {"Q": Q, "K": K, "V": V, "mask": np.broadcast_to(keep, S_shape)}
    if options.softcap is not None:
        terms["softcap"] = float(options.softcap)
    if a.get("alibi_slopes") is not None:
        slopes = as_float64(a, "alibi_slopes")  # (H_q,) or (*batch, H_q)
        distance = np.abs(np.arange(n_q)[:, None] + (n_k - n_q) - np.arange(n_k)[None, :])  # (n_q, n_k)
        bias = -slopes[..., None, None] * distance  # (..., H_q, n_q, n_k)
        S_shape = np.broadcast_shapes(S_shape, bias.shape)
        terms["mask"] = np.broadcast_to(keep, S_shape)
        terms["bias"] = np.broadcast_to(bias, S_shape)
        terms["bias_rounding"] = np.abs(terms["bias"])
    return attention_low_terms(terms, dtype, factor)


def _configure(base: Contract, options: KernelOptions, kept: tuple[str, ...]) -> Contract:
    """The ``kernel_attention`` contract for fixed keywords (``scale``, ``is_causal``, ``softcap``)
    and its kept parameters (``alibi_slopes`` optional)."""
    is_causal, scale, softcap = bool(options.is_causal), options.scale, options.softcap
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

    layout = ALIBI_LAYOUTS[options.alibi_layout]
    parameters = tuple((n, layout if n == "alibi_slopes" else legend) for n, legend in base.parameters if n in kept)
    return dataclasses.replace(
        base,
        parameters=parameters,
        keyword_parameters=base.keyword_parameters & frozenset(kept),
        reference=ref,
        golden_fn=gold,
        error_fn=lambda a: kernel_attention_error(a, options),
        low_error_fn=lambda a, dtype, factor: kernel_attention_low_terms(a, options, dtype, factor),
        options=options,
        key_view_fn=lambda a: key_view(_as_attention(a, is_causal)),
    )


def _as_attention(a: Args, is_causal: bool) -> dict[str, np.ndarray]:
    """Which keys a ``kernel_attention`` call keeps, as plain attention arguments: K and V grouped,
    the causal rule aligned bottom-right (ALiBi and the cap change weights, never which keys take part)."""
    Q, K, V = as_float64(a, "query"), as_float64(a, "key"), as_float64(a, "value")
    K, V = kv_grouped(Q, K), kv_grouped(Q, V)
    n_q, n_k = Q.shape[-2], K.shape[-2]
    keep = golden.causal_keep(n_q, n_k, "bottom_right") if is_causal else np.ones((n_q, n_k), dtype=bool)
    return {"Q": Q, "K": K, "V": V, "mask": keep}


def kernel_attention_contract() -> Contract:
    """An attention kernel with FlashAttention's options in SDPA's layout:
    ``f(query (..., h_q, n_q, d_k), key (..., h_kv, n_k, d_k), value (..., h_kv, n_k, d_v),
    alibi_slopes (h_q,) = None, *, scale=None, is_causal=False, softcap=None) -> (..., h_q, n_q, d_v)``;
    ``alibi_slopes`` ``(..., h_q)`` with the ``alibi_layout`` convention ``batch_heads``.

    Query head ``h`` uses key/value head ``h // (h_q / h_kv)`` (grouped-query attention); the scores
    ``scale · Q Kᵀ`` (``scale`` default ``1/√d_k``) are capped as ``cap · tanh(s / cap)`` when
    ``softcap`` is set, then the ALiBi bias ``-slope_h · |i + n_k - n_q - j|`` is added and, with
    ``is_causal``, keys ``j > i + n_k - n_q`` are masked (FlashAttention's bottom-right alignment);
    softmax over the keys, times V. ``alibi_slopes`` is passed by name and is optional (a spec
    that leaves it out never passes it). The keywords are fixed per spec (``function.keywords``).
    """
    parameters = (
        ("query", ("...", "h_q", "n_q", "d_k")),
        ("key", ("...", "h_kv", "n_k", "d_k")),
        ("value", ("...", "h_kv", "n_k", "d_v")),
        ("alibi_slopes", ("h_q",)),
    )
    unconfigured = Contract(
        name="kernel_attention",
        family=MEMBER,
        parameters=parameters,
        returns=("...", "h_q", "n_q", "d_v"),
        reference=variants.general_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        keyword_parameters=frozenset({"alibi_slopes"}),
        optional_parameters=frozenset({"alibi_slopes"}),
        options=KernelOptions(),
        configure=_configure,
        samples=(
            ((("is_causal", True), ("softcap", 2.0)), ("query", "key", "value")),
            ((), tuple(n for n, _ in parameters)),
            ((("alibi_layout", "batch_heads"),), tuple(n for n, _ in parameters)),
        ),
        bound_text="u·(error of capped, biased scores and weights propagated through V)",
    )
    return _configure(unconfigured, KernelOptions(), unconfigured.parameter_names)


CONTRACTS = (kernel_attention_contract(),)


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> AttentionOptions:
    """``is_causal`` aligned bottom-right, ``scale``, ``softcap``, ``alibi_slopes`` from ``args``."""
    slopes = args.get("alibi_slopes")
    return _options(contract, None if slopes is None else f64(slopes))


def _options(contract: Contract, slopes: Any) -> AttentionOptions:
    """The options of a call with ``alibi_slopes`` ``slopes`` (None: none)."""
    options = options_of(contract, KernelOptions)
    return AttentionOptions(
        is_causal=bool(options.is_causal),
        alignment="bottom_right",
        scale=options.scale,
        softcap=options.softcap,
        alibi_slopes=slopes,
    )


def attention_changed(contract: Contract, args: tuple[Any, ...], change: AttentionChange) -> torch.Tensor:
    """The call on ``args`` (``query, key, value[, alibi_slopes]`` tensors) by general attention with
    ``change``, under :func:`attention_options`: ``(..., h_q, n_q, d_v)``."""
    named = dict(zip(contract.parameter_names, args, strict=True))
    options = _options(contract, named.get("alibi_slopes"))
    return variants.general_attention(named["query"], named["key"], named["value"], options, change=change)


_GENERAL = GeneralGradients(attention_options)
gradients = _GENERAL.gradients
gradient_scales = _GENERAL.gradient_scales


def unused_keys(contract: Contract) -> UnusedKeys | None:
    """``is_causal`` (bottom-right) can leave a key out of every query (a softcap or ALiBi never
    does): which, under :func:`attention_options`, heads first."""
    if not options_of(contract, KernelOptions).is_causal:
        return None
    return _GENERAL.unused_keys(contract)
