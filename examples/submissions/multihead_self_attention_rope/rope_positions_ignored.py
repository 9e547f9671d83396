"""Wrong: RoPE at positions 0, 1, ..., seq - 1 (torch.arange), whatever token_positions says; right
only when the positions are consecutive (a test with arange(seq) + c cannot see it either)."""

import math

import torch


class CausalSelfAttentionWithRoPE:
    def __init__(self, W_q, W_k, W_v, W_o, num_heads, theta):
        self.weights = (W_q, W_k, W_v, W_o)
        self.num_heads = num_heads
        self.theta = theta

    def rotate(self, t):
        seq, d = t.shape[-2], t.shape[-1]
        positions = torch.arange(seq, device=t.device, dtype=torch.float64)  # token_positions not used
        inv_freq = self.theta ** (-torch.arange(0, d, 2, dtype=torch.float64, device=t.device) / d)
        angle = torch.outer(positions, inv_freq)
        cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)
        out = torch.empty_like(t)
        out[..., 0::2] = t[..., 0::2] * cos - t[..., 1::2] * sin
        out[..., 1::2] = t[..., 0::2] * sin + t[..., 1::2] * cos
        return out

    def __call__(self, x):
        W_q, W_k, W_v, W_o = self.weights
        n, d_model = x.shape[-2], x.shape[-1]
        d_head = d_model // self.num_heads
        split = lambda t: t.unflatten(-1, (self.num_heads, d_head)).transpose(-3, -2)  # noqa: E731
        q, k, v = split(x @ W_q.T), split(x @ W_k.T), split(x @ W_v.T)
        q, k = self.rotate(q), self.rotate(k)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d_head)
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device))
        weights = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)
        return (weights @ v).transpose(-3, -2).flatten(-2) @ W_o.T


def multihead_self_attention_rope(x, W_q, W_k, W_v, W_o, num_heads, theta, token_positions):
    return CausalSelfAttentionWithRoPE(W_q, W_k, W_v, W_o, num_heads, theta)(x)
