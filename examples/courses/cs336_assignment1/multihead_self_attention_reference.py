"""The instructor's reference for the multi-head self-attention questions (CS336 assignment 1).

Trusted instructor code: the grader imports it in its own process, never in the student's worker.
Causal multi-head self-attention given its four projection weights, stored as nn.Linear stores them
(d_out, d_in), so a projection is x @ W.T; the heads are the consecutive d_k-wide slices of the
projected width (head h = columns h·d_k to (h+1)·d_k), d_k = d_v = d_model / num_heads; token i
attends to tokens j <= i."""

import math

import torch
from torch import Tensor


def _attention(
    q_proj_weight: Tensor,
    k_proj_weight: Tensor,
    v_proj_weight: Tensor,
    o_proj_weight: Tensor,
    in_features: Tensor,
    num_heads: int,
    *,
    causal: bool = True,
    split_heads_by_columns: bool = True,
    scale_width: int | None = None,
) -> Tensor:
    *batch, seq, d_model = in_features.shape
    d_k = d_model // num_heads

    def heads(w: Tensor) -> Tensor:
        projected = in_features @ w.T  # (..., seq, d_model) @ (d_model, d_model) -> (..., seq, d_model)
        if split_heads_by_columns:
            return projected.reshape(*batch, seq, num_heads, d_k).transpose(-3, -2)  # (..., heads, seq, d_k)
        return projected.reshape(*batch, num_heads, seq, d_k)  # the mistake: rows cut across tokens

    q, k, v = heads(q_proj_weight), heads(k_proj_weight), heads(v_proj_weight)
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_width or d_k)  # (..., heads, seq, seq)
    if causal:
        future = torch.ones(seq, seq, dtype=torch.bool, device=in_features.device).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))  # the diagonal is always kept: no empty row
    out = torch.softmax(scores, dim=-1) @ v  # (..., heads, seq, d_k)
    if split_heads_by_columns:
        out = out.transpose(-3, -2)  # (..., seq, heads, d_k)
    return out.reshape(*batch, seq, d_model) @ o_proj_weight.T  # (..., seq, d_model)


def multihead_self_attention(
    q_proj_weight: Tensor,
    k_proj_weight: Tensor,
    v_proj_weight: Tensor,
    o_proj_weight: Tensor,
    in_features: Tensor,
    d_model: int,
    num_heads: int,
) -> Tensor:
    """Causal multi-head self-attention: weights (d_model, d_model), in_features (..., seq, d_model)."""
    return _attention(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, num_heads)


def causal_mask_ignored(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, d_model, num_heads):
    """Every token attends to every token, the future included."""
    return _attention(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, num_heads, causal=False)


def heads_split_without_transpose(
    q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, d_model, num_heads
):
    """view(batch, heads, seq, d_k) straight from (batch, seq, d_model): heads cut across tokens."""
    return _attention(
        q_proj_weight,
        k_proj_weight,
        v_proj_weight,
        o_proj_weight,
        in_features,
        num_heads,
        split_heads_by_columns=False,
    )


def scaled_by_sqrt_d_model(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, d_model, num_heads):
    """Scores divided by √d_model, the full width, instead of √d_k, one head's width."""
    return _attention(
        q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, num_heads, scale_width=d_model
    )


def two_head_self_attention(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features):
    """multihead_self_attention with num_heads = 2 and d_model read from the input: the reference
    of the module question, whose constructor (not its forward) takes d_model and num_heads."""
    d_model = in_features.shape[-1]
    return multihead_self_attention(
        q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, d_model=d_model, num_heads=2
    )
