import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, scale=None, enable_gqa=False):
    if enable_gqa:
        rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(rep, dim=-3)
        value = value.repeat_interleave(rep, dim=-3)
    scores = query @ key.transpose(-2, -1)
    scores = scores.masked_fill(~attn_mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    w = torch.nan_to_num(w, nan=0.0)
    return w @ value
