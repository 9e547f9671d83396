"""Correct: causal multi-head self-attention, heads split by columns (view, then transpose)."""

import math

import torch


def multihead_self_attention(x, W_q, W_k, W_v, W_o, num_heads):
    *batch, seq, d_model = x.shape
    d_head = d_model // num_heads

    def heads(t):
        return t.view(*batch, seq, num_heads, d_head).transpose(-3, -2)  # (..., heads, seq, d_head)

    q, k, v = heads(x @ W_q.T), heads(x @ W_k.T), heads(x @ W_v.T)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (..., heads, seq, d_head)
    out = out.transpose(-3, -2).reshape(*batch, seq, d_model)
    return out @ W_o.T
