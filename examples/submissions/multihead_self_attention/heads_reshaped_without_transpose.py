"""Wrong: the heads are cut by view(batch, heads, seq, d_head), without moving the heads' axis."""

import math

import torch


def multihead_self_attention(x, W_q, W_k, W_v, W_o, num_heads):
    *batch, seq, d_model = x.shape
    d_head = d_model // num_heads

    def heads(t):
        return t.reshape(*batch, num_heads, seq, d_head)

    q, k, v = heads(x @ W_q.T), heads(x @ W_k.T), heads(x @ W_v.T)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(diagonal=1)
    out = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v
    return out.reshape(*batch, seq, d_model) @ W_o.T
