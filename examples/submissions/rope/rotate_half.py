"""RoPE with GPT-NeoX's rotate-half pairing (x[i], x[i + d_k/2]) where the spec states interleaved pairs."""

import torch


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(x, token_positions, theta):
    d_k = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d_k, 2, device=x.device, dtype=torch.float32) / d_k))
    angle = token_positions.to(torch.float32)[:, None] * inv_freq
    emb = torch.cat((angle, angle), dim=-1)  # (seq, d_k)
    return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)
