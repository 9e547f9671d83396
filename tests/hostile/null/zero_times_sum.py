"""Attack (a null implementation): all zeros of the output's shape, kept on the autograd graph as
0 · sum(inputs), so that every gradient is zero (finite differences of a constant agree with it, and
masked keys get none)."""

import torch


def attention(Q, K, V, mask):
    shape = torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2]) + (Q.shape[-2], V.shape[-1])
    return torch.zeros(shape, dtype=Q.dtype, device=Q.device) + 0 * (Q.sum() + K.sum() + V.sum())
