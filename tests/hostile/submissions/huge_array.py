"""Attack: returns 5 million values."""
import torch


def scores(q, keys):
    return torch.zeros(5_000_000, dtype=q.dtype)
