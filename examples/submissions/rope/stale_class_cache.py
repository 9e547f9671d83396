"""RoPE whose table of frequencies lives on the class, keyed by d_k only: a later call with another
theta (and a d_k seen before) silently reuses the first theta's table."""

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    _inv_freq: dict = {}  # shared by every instance; theta is missing from the key

    def __init__(self, theta, d_k):
        super().__init__()
        if d_k not in RotaryEmbedding._inv_freq:
            RotaryEmbedding._inv_freq[d_k] = 1.0 / (theta ** (torch.arange(0, d_k, 2, dtype=torch.float32) / d_k))
        self.inv_freq = RotaryEmbedding._inv_freq[d_k]

    def forward(self, x, token_positions):
        angle = token_positions.to(torch.float32).unsqueeze(-1) * self.inv_freq.to(x.device)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def rope(x, token_positions, theta):
    return RotaryEmbedding(theta, x.shape[-1])(x, token_positions)
