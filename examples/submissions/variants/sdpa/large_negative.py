import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, scale=None, enable_gqa=False):
    if scale is None:
        scale = 1 / math.sqrt(query.shape[-1])
    if enable_gqa:
        rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(rep, dim=-3)
        value = value.repeat_interleave(rep, dim=-3)
    scores = query @ key.transpose(-2, -1) * scale
    scores = scores.masked_fill(~attn_mask, -1e9)
    return torch.softmax(scores, dim=-1) @ value
