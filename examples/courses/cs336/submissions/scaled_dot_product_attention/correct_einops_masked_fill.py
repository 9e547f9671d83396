"""Scaled dot-product attention as many CS336 students write it: einops, jaxtyping, masked_fill(-inf).

Correct on the course's interface (examples/courses/cs336/scaled_dot_product_attention*.yaml): the
`...` of the einsum patterns takes the third-order (batch, n, d) and the fourth-order
(batch, heads, n, d) inputs alike; the mask is optional. A query with every key masked comes out
NaN (-inf everywhere, then the softmax), which the course never asks about."""

import math

import torch
from einops import einsum
from jaxtyping import Bool, Float
from torch import Tensor


def softmax(x: Float[Tensor, " ..."], dim: int) -> Float[Tensor, " ..."]:
    shifted = x - x.max(dim=dim, keepdim=True).values  # subtract the max for stability
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(
    Q: Float[Tensor, " ... queries d_k"],
    K: Float[Tensor, " ... keys d_k"],
    V: Float[Tensor, " ... keys d_v"],
    mask: Bool[Tensor, " ... queries keys"] | None = None,
) -> Float[Tensor, " ... queries d_v"]:
    d_k = Q.shape[-1]
    scores = einsum(Q, K, "... queries d_k, ... keys d_k -> ... queries keys") / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return einsum(weights, V, "... queries keys, ... keys d_v -> ... queries d_v")
