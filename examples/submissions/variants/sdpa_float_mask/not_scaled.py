import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None):
    scores = query @ key.transpose(-2, -1)
    if attn_mask is not None:
        scores = scores + attn_mask
    w = torch.softmax(scores, dim=-1)
    return torch.nan_to_num(w) @ value
