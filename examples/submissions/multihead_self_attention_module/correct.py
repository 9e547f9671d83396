"""Causal multi-head self-attention as CS336 assignment 1 asks for it: a module whose projections are
q_proj, k_proj, v_proj and output_proj (nn.Linear without bias), with a causal mask kept as a buffer."""

import math

import torch
from torch import nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, max_seq_len: int = 64):
        super().__init__()
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)
        future = torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).triu(diagonal=1)
        self.register_buffer("future", future, persistent=False)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        *batch, seq, _ = x.shape
        return x.reshape(*batch, seq, self.num_heads, self.d_head).transpose(-3, -2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *batch, seq, d_model = x.shape
        q, k, v = self._heads(self.q_proj(x)), self._heads(self.k_proj(x)), self._heads(self.v_proj(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        scores = scores.masked_fill(self.future[:seq, :seq], float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.output_proj(out.transpose(-3, -2).reshape(*batch, seq, d_model))
