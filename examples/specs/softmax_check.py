"""A second, independent softmax for softmax_own_reference.yaml (function.reference_check): plain
Python loops in float64, which `attnscore verify` compares with the reference on drawn inputs."""

import math

import torch


def softmax_loops(x: torch.Tensor, dim: int) -> torch.Tensor:
    moved = x.movedim(dim, -1)
    rows = moved.reshape(-1, moved.shape[-1]).tolist()
    out = []
    for row in rows:
        top = max(row)
        e = [math.exp(v - top) for v in row]
        total = sum(e)
        out.append([v / total for v in e])
    return torch.tensor(out, dtype=x.dtype).reshape(moved.shape).movedim(-1, dim)
