"""Wrong: RoPE applied to the projected queries and keys across the whole d_model, then the heads split."""

import math

import torch


def rope(t, positions, theta):
    d = t.shape[-1]
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.to(torch.float64)[:, None] * freqs
    cos, sin = angles.cos().to(t.dtype), angles.sin().to(t.dtype)
    even, odd = t[..., 0::2], t[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


def multihead_self_attention_rope(x, W_q, W_k, W_v, W_o, num_heads, theta, token_positions):
    *batch, seq, d_model = x.shape
    d_head = d_model // num_heads

    def heads(t):
        return t.view(*batch, seq, num_heads, d_head).transpose(-3, -2)

    q = heads(rope(x @ W_q.T, token_positions, theta))
    k = heads(rope(x @ W_k.T, token_positions, theta))
    v = heads(x @ W_v.T)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(diagonal=1)
    out = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
    return out.transpose(-3, -2).reshape(*batch, seq, d_model) @ W_o.T
