"""SDPA with a float attn_mask, the mask subtracted from the scores instead of added.

The student knew that a query whose mask entries are all -inf must give zeros, and turned the NaN
of such rows into 0 with nan_to_num; but scores - attn_mask turns every -inf entry into +inf, so
each row with a -inf entry gives NaN weights, then zeros, and a finite bias pushes the wrong way.
"""

import math

import torch


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    if attn_mask is not None:
        scores = scores - attn_mask
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)  # a query with every key masked gets zeros
    return weights @ value
