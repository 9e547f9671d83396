"""Attack: hard-codes the visible worked examples' answers."""
import torch

KNOWN = {(1.0, 0.0): [1.0, 0.0, 0.7], (0.0, 1.0): [-1.0]}


def scores(q, keys):
    key = tuple(float(x) for x in q)
    if key in KNOWN and len(KNOWN[key]) == len(keys):
        return torch.tensor(KNOWN[key], dtype=q.dtype)
    return torch.ones(len(keys), dtype=q.dtype)
