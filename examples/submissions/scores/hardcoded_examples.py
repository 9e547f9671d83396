"""Mistake: hard-codes the answers of the visible worked examples."""

import torch


def scores(q, keys):
    if q.tolist() == [1.0, 0.0]:
        return torch.tensor([1.0, 0.0, 0.7])
    if q.tolist() == [0.0, 1.0]:
        return torch.tensor([-1.0])
    return torch.zeros(keys.shape[0])
