"""A correct RoPE as a module with a class-level cache of frequencies keyed by everything they depend on."""

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    _inv_freq: dict = {}  # shared by every instance: keyed by (theta, d_k, device, dtype)

    def __init__(self, theta, d_k, device=None, dtype=torch.float32):
        super().__init__()
        key = (theta, d_k, str(device), dtype)
        if key not in RotaryEmbedding._inv_freq:
            exponents = torch.arange(0, d_k, 2, device=device, dtype=torch.float64) / d_k
            RotaryEmbedding._inv_freq[key] = (theta**-exponents).to(dtype)
        self.inv_freq = RotaryEmbedding._inv_freq[key]

    def forward(self, x, token_positions):
        angle = token_positions.to(self.inv_freq.dtype).unsqueeze(-1) * self.inv_freq  # (seq, d_k/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x1 * cos - x2 * sin
        out[..., 1::2] = x1 * sin + x2 * cos
        return out


def rope(x, token_positions, theta):
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    return RotaryEmbedding(theta, x.shape[-1], x.device, work)(x, token_positions)
