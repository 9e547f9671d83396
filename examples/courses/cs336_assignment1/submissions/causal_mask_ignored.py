"""Multi-head self-attention without the causal mask.

Wrong on both multi-head questions (the function and the module share one forward): every token
attends to the tokens after it too. With one token, nothing changes; from two tokens on, the first
token's output mixes in the second's value."""

import math

import torch
from einops import einsum, rearrange
from jaxtyping import Bool, Float
from torch import Tensor, nn


def softmax(in_features: Float[Tensor, " ..."], dim: int) -> Float[Tensor, " ..."]:
    shifted = in_features - in_features.amax(dim=dim, keepdim=True)  # the largest entry becomes 0
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
    return einsum(softmax(scores, dim=-1), V, "... queries keys, ... keys d_v -> ... queries d_v")


class Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2 / (in_features + out_features))
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)

    def forward(self, x: Float[Tensor, " ... d_in"]) -> Float[Tensor, " ... d_out"]:
        return einsum(x, self.weight, "... d_in, d_out d_in -> ... d_out")


def _causal_self_attention(
    x: Float[Tensor, " ... seq d_model"],
    q_proj_weight: Float[Tensor, " d_model d_model"],
    k_proj_weight: Float[Tensor, " d_model d_model"],
    v_proj_weight: Float[Tensor, " d_model d_model"],
    o_proj_weight: Float[Tensor, " d_model d_model"],
    num_heads: int,
) -> Float[Tensor, " ... seq d_model"]:
    def heads(w: Tensor) -> Tensor:
        projected = einsum(x, w, "... seq d_in, d_out d_in -> ... seq d_out")
        return rearrange(projected, "... seq (heads d_k) -> ... heads seq d_k", heads=num_heads)

    out = scaled_dot_product_attention(heads(q_proj_weight), heads(k_proj_weight), heads(v_proj_weight))
    out = rearrange(out, "... heads seq d_v -> ... seq (heads d_v)")
    return einsum(out, o_proj_weight, "... seq d_v, d_model d_v -> ... seq d_model")


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, device=None, dtype=None):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)

    def forward(self, x: Float[Tensor, " ... seq d_model"]) -> Float[Tensor, " ... seq d_model"]:
        return _causal_self_attention(
            x,
            self.q_proj.weight,
            self.k_proj.weight,
            self.v_proj.weight,
            self.output_proj.weight,
            self.num_heads,
        )


def multihead_self_attention(
    q_proj_weight: Float[Tensor, " d_model d_model"],
    k_proj_weight: Float[Tensor, " d_model d_model"],
    v_proj_weight: Float[Tensor, " d_model d_model"],
    o_proj_weight: Float[Tensor, " d_model d_model"],
    in_features: Float[Tensor, " ... seq d_model"],
    d_model: int,
    num_heads: int,
) -> Float[Tensor, " ... seq d_model"]:
    assert q_proj_weight.shape == (d_model, d_model)
    return _causal_self_attention(in_features, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, num_heads)
