"""Mistake: applies softmax, turning raw scores into weights."""

import torch


def scores(q, keys):
    return torch.softmax(keys @ q, dim=-1)
