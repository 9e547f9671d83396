"""Correct: one parameter, weight (d_q, d_k); forward returns Q W Kᵀ."""

import torch
from torch import nn


class BilinearScore(nn.Module):
    def __init__(self, d_q, d_k, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_q, d_k))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, Q, K):
        return Q @ self.weight @ K.transpose(-2, -1)  # (..., n_q, d_q) (d_q, d_k) (..., d_k, n_k)
