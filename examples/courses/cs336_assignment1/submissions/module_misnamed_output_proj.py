"""The module names its output projection o_proj, as the adapter's argument o_proj_weight does.

Wrong on question multihead_self_attention_module only: the course's state dict (and this
assignment) names the output projection output_proj.weight; the module registers o_proj.weight, so
the grader cannot load the output projection's weights. The function takes its weights as arguments
and is right."""

import math

import torch
from einops import einsum, rearrange
from jaxtyping import Bool, Float, Int
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


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta: float, d_k: int, max_seq_len: int, device=None):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_k, 2, device=device, dtype=torch.float32) / d_k)  # (d_k/2,)
        angles = torch.outer(torch.arange(max_seq_len, device=device, dtype=torch.float32), inv_freq)
        self.register_buffer("cos", angles.cos(), persistent=False)  # (max_seq_len, d_k/2)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: Float[Tensor, " ... seq d_k"], token_positions: Int[Tensor, " ... seq"]) -> Float[Tensor, " ... seq d_k"]:
        cos, sin = self.cos[token_positions], self.sin[token_positions]  # (..., seq, d_k/2)
        x_even, x_odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
        return rearrange(rotated, "... seq half two -> ... seq (half two)")


def _causal_self_attention(
    x: Float[Tensor, " ... seq d_model"],
    q_proj_weight: Float[Tensor, " d_model d_model"],
    k_proj_weight: Float[Tensor, " d_model d_model"],
    v_proj_weight: Float[Tensor, " d_model d_model"],
    o_proj_weight: Float[Tensor, " d_model d_model"],
    num_heads: int,
    rope: RotaryPositionalEmbedding | None = None,
    token_positions: Int[Tensor, " seq"] | None = None,
) -> Float[Tensor, " ... seq d_model"]:
    def heads(w: Tensor) -> Tensor:
        projected = einsum(x, w, "... seq d_in, d_out d_in -> ... seq d_out")
        return rearrange(projected, "... seq (heads d_k) -> ... heads seq d_k", heads=num_heads)

    seq = x.shape[-2]
    causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device))  # query i sees keys j <= i
    q, k = heads(q_proj_weight), heads(k_proj_weight)
    if rope is not None:  # each head's queries and keys, never the values
        q, k = rope(q, token_positions), rope(k, token_positions)
    out = scaled_dot_product_attention(q, k, heads(v_proj_weight), causal)
    out = rearrange(out, "... heads seq d_v -> ... seq (heads d_v)")
    return einsum(out, o_proj_weight, "... seq d_v, d_model d_v -> ... seq d_model")


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, max_seq_len: int | None = None, theta: float | None = None, device=None, dtype=None):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.rope = None if theta is None else RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len, device=device)
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.o_proj = Linear(d_model, d_model, device=device, dtype=dtype)

    def forward(self, x: Float[Tensor, " ... seq d_model"], token_positions: Int[Tensor, " seq"] | None = None) -> Float[Tensor, " ... seq d_model"]:
        return _causal_self_attention(
            x,
            self.q_proj.weight,
            self.k_proj.weight,
            self.v_proj.weight,
            self.o_proj.weight,
            self.num_heads,
            self.rope,
            token_positions,
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
