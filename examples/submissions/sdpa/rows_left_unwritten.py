"""SDPA with a bool attn_mask, the output allocated with torch.empty and written row by row.

Only the rows of queries that keep a key are written; a query whose keys are all masked out keeps
whatever the memory of torch.empty held (SDPA gives the zero vector there). The values in those
rows change from call to call, so no mistake can be named from them: the feedback says which rows
are wrong and why such rows usually are.
"""

import math

import torch


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        key = key.repeat_interleave(query.shape[-3] // key.shape[-3], dim=-3)
        value = value.repeat_interleave(query.shape[-3] // value.shape[-3], dim=-3)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    keep = torch.ones_like(scores, dtype=torch.bool) if attn_mask is None else attn_mask.expand(scores.shape)
    out = torch.empty(*scores.shape[:-1], value.shape[-1], dtype=query.dtype)
    has_key = keep.any(dim=-1)  # (..., n_q)
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    full = weights @ value.expand(*scores.shape[:-2], *value.shape[-2:])
    out[has_key] = full[has_key]
    return out
