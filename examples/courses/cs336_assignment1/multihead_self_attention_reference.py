"""The instructor's reference for the multi-head self-attention questions (CS336 assignment 1), its
own property and the mistakes to name.

Trusted instructor code: the grader imports it in its own process, never in a student's worker.
Causal multi-head self-attention given its four projection weights, stored as nn.Linear stores them
(d_out, d_in), so a projection is x @ W.T; head h is the h-th d_k-wide slice of a projection's
output (columns h·d_k to (h+1)·d_k), d_k = d_v = d_model / num_heads; token i attends to the
tokens j <= i. Question mha grades `multihead_self_attention` (d_model and num_heads passed
by name); question mha_module grades the module MultiHeadSelfAttention against
`two_head_self_attention` (its constructor, not its forward, takes them). The mistakes serve both:
called without the keywords, they use two heads."""

import math

import torch
from torch import Tensor

from attnscore import instructor


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


def two_head_self_attention(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features):
    """multihead_self_attention with two heads, d_model read from the input: the module question's
    reference (MultiHeadSelfAttention(d_model, num_heads=2) built by the grader)."""
    d_model = in_features.shape[-1]
    return multihead_self_attention(
        q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, d_model=d_model, num_heads=2
    )


def multihead_self_attention_loop(
    q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, d_model=None, num_heads=2
):
    """The same attention written another way, one batch item, token and head at a time, straight
    from the handout's equations: the specs' reference_check (attnscore verify compares the two)."""
    d_model = in_features.shape[-1]
    d_k = d_model // num_heads
    batch, seq = in_features.shape[0], in_features.shape[1]
    out = torch.zeros_like(in_features)
    for b in range(batch):
        x = in_features[b]
        q, k, v = x @ q_proj_weight.T, x @ k_proj_weight.T, x @ v_proj_weight.T
        for i in range(seq):
            concatenated = []
            for h in range(num_heads):
                cols = slice(h * d_k, (h + 1) * d_k)
                scores = torch.stack([q[i, cols] @ k[j, cols] for j in range(i + 1)]) / math.sqrt(d_k)
                weights = torch.softmax(scores, dim=0)
                concatenated.append(sum(weights[j] * v[j, cols] for j in range(i + 1)))
            out[b, i] = torch.cat(concatenated) @ o_proj_weight.T
    return out


@instructor.property(
    "future_tokens_ignored",
    statement="Changing the last token leaves the outputs of every earlier token unchanged (causal).",
    max_value=1.0,
)
def future_tokens_ignored(inputs, call):
    x = inputs["in_features"]
    if x.shape[-2] < 2:
        return None  # one token: it has no future
    changed = x.clone()
    changed[..., -1, :] = changed[..., -1, :] + 1.0
    weights = [inputs[name] for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight", "o_proj_weight")]
    before, after = call(*weights, x), call(*weights, changed)
    if not torch.allclose(before[..., :-1, :], after[..., :-1, :], rtol=1e-4, atol=1e-5):
        return (
            "changing only the last token changed the outputs of earlier tokens: token i must attend to the "
            "tokens j <= i only (a causal mask, True on and below the diagonal)"
        )
    return None


@instructor.mistake(
    "causal_mask_ignored",
    feedback=(
        "your output matches attention without the causal mask: every token attends to the tokens after it "
        "too. Mask the scores of keys j > i (torch.triu(..., diagonal=1)) before the softmax."
    ),
)
def causal_mask_ignored(
    q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, d_model=None, num_heads=2
):
    return _attention(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, num_heads, causal=False)


@instructor.mistake(
    "heads_split_without_transpose",
    feedback=(
        "your heads are cut from the flat (seq, d_model) rows: view(batch, num_heads, seq, d_k) mixes tokens. "
        "Split the last dim, (batch, seq, num_heads, d_k), then move the heads before seq (transpose(1, 2), or "
        "rearrange '... seq (h d) -> ... h seq d'), and undo both before the output projection."
    ),
)
def heads_split_without_transpose(
    q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, d_model=None, num_heads=2
):
    return _attention(
        q_proj_weight,
        k_proj_weight,
        v_proj_weight,
        o_proj_weight,
        in_features,
        num_heads,
        split_heads_by_columns=False,
    )


@instructor.mistake(
    "scale_uses_d_model",
    feedback=(
        "your scores are divided by √d_model, the full width; each head's scores are divided by √d_k, "
        "d_k = d_model / num_heads, its own width."
    ),
)
def scale_uses_d_model(
    q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, d_model=None, num_heads=2
):
    width = in_features.shape[-1]
    return _attention(
        q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features, num_heads, scale_width=width
    )
