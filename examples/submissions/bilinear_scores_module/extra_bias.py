"""Wrong: a bias parameter is made although the spec builds the module with bias=False."""

import torch
from torch import nn


class BilinearScore(nn.Module):
    def __init__(self, d_q, d_k, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_q, d_k))
        self.bias = nn.Parameter(torch.zeros(1))  # the flag is ignored

    def forward(self, Q, K):
        return Q @ self.weight @ K.transpose(-2, -1) + self.bias
