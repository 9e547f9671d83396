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
    scores = scores.masked_fill(~attn_mask, float("-inf"))
    w = torch.softmax(scores, dim=-2)
    w = torch.where(attn_mask, w, torch.zeros_like(w))
    return w @ value
