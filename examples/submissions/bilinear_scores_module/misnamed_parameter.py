"""Wrong: the parameter is called W, so the grader's weight has nowhere to go."""

import torch
from torch import nn


class BilinearScore(nn.Module):
    def __init__(self, d_q, d_k, bias=False):
        super().__init__()
        self.W = nn.Parameter(torch.empty(d_q, d_k))
        nn.init.xavier_uniform_(self.W)

    def forward(self, Q, K):
        return Q @ self.W @ K.transpose(-2, -1)
