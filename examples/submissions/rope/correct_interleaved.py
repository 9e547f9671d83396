"""A correct RoPE, interleaved pairs (x[2i], x[2i+1]), the table built for each call in x's precision
(float64 angles for float64 inputs, float32 otherwise)."""

import torch


def rope(x, token_positions, theta):
    d_k = x.shape[-1]
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    inv_freq = 1.0 / (theta ** (torch.arange(0, d_k, 2, device=x.device, dtype=work) / d_k))  # (d_k/2,)
    angle = token_positions.to(work)[:, None] * inv_freq  # (seq, d_k/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., seq, d_k/2, 2)
    return out.flatten(-2)
