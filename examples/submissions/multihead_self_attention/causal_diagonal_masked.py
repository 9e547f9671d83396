"""Wrong: triu(diagonal=0) also masks each token's own key (token 0 is left with none: NaN)."""

import math

import torch


def multihead_self_attention(x, W_q, W_k, W_v, W_o, num_heads):
    *batch, seq, d_model = x.shape
    d_head = d_model // num_heads

    def heads(t):
        return t.view(*batch, seq, num_heads, d_head).transpose(-3, -2)

    q, k, v = heads(x @ W_q.T), heads(x @ W_k.T), heads(x @ W_v.T)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(diagonal=0)
    out = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
    return out.transpose(-3, -2).reshape(*batch, seq, d_model) @ W_o.T
