"""RoPE with frequencies theta^(-i/d_k): arange(d_k // 2) / d_k where arange(0, d_k, 2) / d_k was meant."""

import torch


def rope(x, token_positions, theta):
    d_k = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(d_k // 2, device=x.device, dtype=torch.float32) / d_k))
    angle = token_positions.to(torch.float32)[:, None] * inv_freq
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
