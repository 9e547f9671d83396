import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None):
    scale = 1 / math.sqrt(query.shape[-1])
    scores = query @ key.transpose(-2, -1) * scale
    if attn_mask is not None:
        scores = scores - attn_mask
    w = torch.softmax(scores, dim=-1)
    return torch.nan_to_num(w) @ value
