"""Mistake: returns softmax weights instead of raw scores."""

import torch


def score_matrix(Q, K):
    return torch.softmax(Q @ K.transpose(-2, -1), dim=-1)
