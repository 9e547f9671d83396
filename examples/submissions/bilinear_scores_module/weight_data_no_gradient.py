"""Wrong: forward reads self.weight.data, so no gradient reaches the weight (the values are right)."""

import torch
from torch import nn


class BilinearScore(nn.Module):
    def __init__(self, d_q, d_k, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_q, d_k))

    def forward(self, Q, K):
        return Q @ self.weight.data @ K.transpose(-2, -1)
