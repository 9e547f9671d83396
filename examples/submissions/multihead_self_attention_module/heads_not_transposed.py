"""Heads cut with a reshape but no transpose: (batch, seq, d_model) read as (batch, heads, seq, d_head)."""

import math

import torch
from torch import nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *batch, seq, d_model = x.shape
        q, k, v = (p(x).reshape(*batch, self.num_heads, seq, self.d_head) for p in (self.q_proj, self.k_proj, self.v_proj))
        future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(diagonal=1)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(self.d_head)).masked_fill(future, float("-inf"))
        return self.output_proj((torch.softmax(scores, dim=-1) @ v).reshape(*batch, seq, d_model))
