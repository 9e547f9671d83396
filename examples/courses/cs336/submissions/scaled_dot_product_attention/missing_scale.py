"""Scaled dot-product attention without the 1/sqrt(d_k) scale.

Wrong on the course's interface (examples/courses/cs336/scaled_dot_product_attention*.yaml): the
softmax is taken over the raw scores Q Kᵀ, so every weight is too sharp whenever d_k > 1."""

import torch
from einops import einsum


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = einsum(Q, K, "... q d, ... k d -> ... q k")
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return einsum(torch.softmax(scores, dim=-1), V, "... q k, ... k d -> ... q d")
