"""The head count kept in a module-level variable set by the first instance: every later instance,
built with another num_heads, splits its heads as the first one did."""

import math

import torch
from torch import nn

_HEADS = []


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        if not _HEADS:
            _HEADS.append(num_heads)
        self.num_heads = _HEADS[0]
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *batch, seq, d_model = x.shape
        h = self.num_heads
        q, k, v = (p(x).reshape(*batch, seq, h, d_model // h).transpose(-3, -2) for p in (self.q_proj, self.k_proj, self.v_proj))
        future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(diagonal=1)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(d_model // h)).masked_fill(future, float("-inf"))
        return self.output_proj((torch.softmax(scores, dim=-1) @ v).transpose(-3, -2).reshape(*batch, seq, d_model))
