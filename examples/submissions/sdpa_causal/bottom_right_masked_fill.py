"""SDPA with is_causal=True, the causal mask aligned bottom-right (the last query with the last key).

tril(n_k - n_q) is FlashAttention's KV-cache convention, not SDPA's top-left torch.ones(L, S).tril().
With more queries than keys the first queries keep no key under it, and masked_fill(-inf) followed
by a plain softmax gives them NaN.
"""

import math

import torch


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    n_q, n_k = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool, device=query.device).tril(n_k - n_q)
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ value
