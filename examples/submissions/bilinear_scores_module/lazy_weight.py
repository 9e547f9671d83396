"""Correct: the weight is created lazily, its shape taken from the first inputs (as nn.LazyLinear does)."""

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin


class BilinearScore(LazyModuleMixin, nn.Module):
    def __init__(self, d_q=None, d_k=None, bias=False):
        super().__init__()
        self.weight = nn.UninitializedParameter()

    def initialize_parameters(self, Q, K):
        if self.has_uninitialized_params():
            with torch.no_grad():
                self.weight.materialize((Q.shape[-1], K.shape[-1]))
                nn.init.xavier_uniform_(self.weight)

    def forward(self, Q, K):
        return Q @ self.weight @ K.transpose(-2, -1)
