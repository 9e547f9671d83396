"""Attack: allocates a 400 GB tensor."""
import torch


def scores(q, keys):
    return torch.ones(100_000_000_000) @ q
