"""Correct: nn.functional.linear for the projections, PyTorch's SDPA with is_causal=True per head."""

import torch.nn.functional as F


def multihead_self_attention(x, W_q, W_k, W_v, W_o, num_heads):
    *batch, seq, d_model = x.shape

    def heads(t):
        return t.unflatten(-1, (num_heads, d_model // num_heads)).transpose(-3, -2)

    q, k, v = heads(F.linear(x, W_q)), heads(F.linear(x, W_k)), heads(F.linear(x, W_v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(out.transpose(-3, -2).flatten(-2), W_o)
