"""Correct: broadcasts the batch dims explicitly with torch.broadcast_shapes, then multiplies."""

import torch


def score_matrix(Q, K):
    batch = torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    Q = Q.expand(*batch, *Q.shape[-2:])
    K = K.expand(*batch, *K.shape[-2:])
    return Q @ K.transpose(-2, -1)  # (..., n_q, d_k) @ (..., d_k, n_k) -> (..., n_q, n_k)
