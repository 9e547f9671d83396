"""Wrong: the weight is stored as (d_k, d_q), nn.Linear's (out, in) habit, and transposed in forward."""

import torch
from torch import nn


class BilinearScore(nn.Module):
    def __init__(self, d_q, d_k, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_k, d_q))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, Q, K):
        return Q @ self.weight.T @ K.transpose(-2, -1)
