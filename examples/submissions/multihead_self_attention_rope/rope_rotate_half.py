"""Wrong for this spec: RoPE in GPT-NeoX's style, pairing x[i] with x[i + d/2] (rotate-half),
where the spec states interleaved pairs (x[2i], x[2i+1])."""

import torch
import torch.nn.functional as F


def apply_rotary(t, token_positions, theta):
    half = t.shape[-1] // 2
    inv_freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64, device=t.device) / t.shape[-1])
    angle = torch.outer(token_positions.to(torch.float64), inv_freq)  # (seq, d_head/2)
    cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)
    x1, x2 = t[..., :half], t[..., half:]  # pair i is (x[i], x[i + d_head/2])
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def multihead_self_attention_rope(x, W_q, W_k, W_v, W_o, num_heads, theta, token_positions):
    q, k, v = F.linear(x, W_q), F.linear(x, W_k), F.linear(x, W_v)
    shape = (*x.shape[:-1], num_heads, x.shape[-1] // num_heads)
    q, k, v = (t.reshape(shape).transpose(-3, -2) for t in (q, k, v))  # (..., heads, seq, d_head)
    q, k = apply_rotary(q, token_positions, theta), apply_rotary(k, token_positions, theta)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(out.transpose(-3, -2).reshape(x.shape), W_o)
