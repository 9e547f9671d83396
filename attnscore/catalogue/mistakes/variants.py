"""Mistakes of the attention variants real kernels implement: SDPA's scale, bool mask, KV heads, causal alignment."""

from __future__ import annotations

from typing import Any

import torch

from attnscore.catalogue.families import sdpa_bool_mask, sdpa_causal, sdpa_grouped_heads, sdpa_scale_given
from attnscore.catalogue.mistakes.registry import add
from attnscore.maths import variants
from attnscore.maths.contract import Contract

# ---------------------------------------------------------------------------------------------
# scaled_dot_product_attention (the ``sdpa`` contract; keywords in ``contract.options``)


def _sdpa_with(c: Contract, args: tuple[torch.Tensor, ...], **changed: Any) -> torch.Tensor:
    """SDPA on the contract's arguments with its configured keywords, some ``changed``."""
    named = dict(zip(c.parameter_names, args, strict=True))
    options = {
        "attn_mask": named.get("attn_mask"),
        "is_causal": bool(c.option("is_causal")),
        "scale": c.option("scale"),
        **changed,
    }
    return variants.general_attention(named["query"], named["key"], named["value"], **options)


@add(
    "sdpa_scale_ignored",
    "scale keyword ignored",
    sdpa_scale_given,
    "the scores are divided by √d_k whatever scale says: multiply Q Kᵀ by the scale you are given "
    "(SDPA's default 1/√d_k applies only when scale is None)",
)
def _scale_ignored(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _sdpa_with(c, args, scale=None)


@add(
    "sdpa_bool_mask_inverted",
    "bool attn_mask read as True = masked out",
    sdpa_bool_mask,
    "in SDPA a bool attn_mask is True where the key takes part (the opposite of nn.MultiheadAttention's "
    "key_padding_mask): keep the keys where the mask is True",
)
def _bool_mask_inverted(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    named = dict(zip(c.parameter_names, args, strict=True))
    return _sdpa_with(c, args, attn_mask=~named["attn_mask"])


@add(
    "kv_heads_tiled",
    "KV heads tiled (h0 h1 h0 h1) instead of grouped",
    sdpa_grouped_heads,
    "query head h uses key/value head h // (H_q / H_kv) (h0 h0 h1 h1, repeat_interleave), "
    "not h % H_kv (h0 h1 h0 h1, repeat or tile)",
)
def _kv_heads_tiled(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    named = dict(zip(c.parameter_names, args, strict=True))
    Q, K, V = named["query"], named["key"], named["value"]
    groups = Q.shape[-3] // K.shape[-3]
    lead = (1,) * (K.ndim - 3)
    K = K.repeat(*lead, groups, 1, 1)  # (..., H_kv, n_k, d_k) -> (..., H_q, n_k, d_k): h0 h1 h0 h1
    V = V.repeat(*lead, groups, 1, 1)
    return _sdpa_with(c, (Q, K, V, *args[3:]))


@add(
    "sdpa_causal_bottom_right",
    "is_causal aligned bottom-right",
    sdpa_causal,
    "is_causal in SDPA is top-left (torch.ones(n_q, n_k).tril(): query i keeps keys j <= i); you aligned "
    "the last query with the last key (j <= i + n_k - n_q), FlashAttention's KV-cache convention",
)
def _causal_bottom_right(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _sdpa_with(c, args, alignment="bottom_right")


@add(
    "sdpa_is_causal_ignored",
    "is_causal ignored",
    sdpa_causal,
    "every query attends to every key: with is_causal=True query i keeps only keys j <= i",
)
def _is_causal_ignored(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _sdpa_with(c, args, is_causal=False)
