"""Correct: einsum over the shared d_k axis, batch dims broadcast."""

import torch


def score_matrix(Q, K):
    return torch.einsum("...id,...jd->...ij", Q, K)
