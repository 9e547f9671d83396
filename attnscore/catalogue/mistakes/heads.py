"""Mistakes of multi-head attention with its four projections: the head split, the projections'
layout, the output projection, the causal mask and where RoPE is applied.

Each is multi-head attention (:func:`attnscore.maths.families.multihead.attend`) with one of its
hooks turned, so the mistakes apply to every form that has the feature (self, cross, packed
``c_attn``, RoPE): :mod:`attnscore.catalogue.families`'s ``multihead*`` selectors.
"""

from __future__ import annotations

from typing import Any

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import multihead, multihead_causal, multihead_rotary, multihead_separate_weights
from attnscore.catalogue.mistakes.registry import add
from attnscore.maths.contract import Contract
from attnscore.maths.families.multihead import attend, causal_keep, conventions, parts_of, rotation_of
from attnscore.maths.rotary import rotate

__all__ = ["attend_with_hooks"]


def attend_with_hooks(c: Contract, args: tuple[torch.Tensor, ...], **hooks: Any) -> torch.Tensor:
    """The multi-head contract ``c``'s attention on ``args`` (in its parameter order) with ``hooks``
    (:func:`~attnscore.maths.families.multihead.attend`'s keywords) turned: ``(..., n_q, d_model)`` in
    ``x``'s dtype. Without hooks it is the reference (the spec's causal convention, and RoPE at the
    call's positions and theta for the RoPE form); ``rotation=`` replaces the per-head rotation of the
    queries and keys (the RoPE mistakes of :mod:`attnscore.catalogue.mistakes.rotary`)."""
    p = parts_of(c, *args)
    causal, pairing = conventions(c)
    given: dict[str, Any] = {"causal": causal, "rotation": rotation_of(p, pairing, p.x.device)}
    return attend(p.x, p.context, p.W_q, p.W_k, p.W_v, p.W_o, p.num_heads, **(given | hooks))


def _reshaped(t: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(..., n, d_model)`` viewed as ``(..., heads, n, d_head)`` without moving the heads' axis."""
    *batch, n, d = t.shape
    return t.reshape(*batch, num_heads, n, d // num_heads)


def _reshaped_back(t: torch.Tensor) -> torch.Tensor:
    """``(..., heads, n, d_head)`` viewed back as ``(..., n, d_model)`` without a transpose."""
    *batch, h, n, d_head = t.shape
    return t.reshape(*batch, n, h * d_head)


@add(
    "heads_reshaped_without_transpose",
    "heads split by a reshape to (b, h, n, d) without a transpose",
    multihead,
    "your heads are cut from the flat (seq, d_model) rows: x.view(batch, num_heads, seq, d_head) mixes tokens "
    "into one head. Split the last dim, view(batch, seq, num_heads, d_head), then move the heads before seq "
    "(transpose(1, 2)), and undo both (transpose, then reshape) before the output projection",
)
def _heads_reshaped(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return attend_with_hooks(c, args, split=_reshaped, merge=_reshaped_back)


@add(
    "projection_x_times_w",
    "projections computed as x @ W, not x @ W.T",
    multihead_separate_weights,
    "your projections are x @ W: the weights are stored as nn.Linear stores them, (d_out, d_in), so a "
    "projection is x @ W.T (what nn.functional.linear(x, W) computes)",
)
def _x_times_w(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return attend_with_hooks(c, args, project=lambda t, W: t @ W)


@add(
    "output_projection_omitted",
    "the concatenated heads returned without W_o",
    multihead,
    "your output is the concatenated heads themselves: multiply them by the output projection, "
    "concat(heads) @ W_o.T, before returning",
)
def _output_projection_omitted(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    p = parts_of(c, *args)
    causal, pairing = conventions(c)
    return attend(
        p.x, p.context, p.W_q, p.W_k, p.W_v, None, p.num_heads, causal=causal,
        rotation=rotation_of(p, pairing, p.x.device),
    )  # fmt: skip


@add(
    "causal_mask_missing",
    "no causal mask: every token sees the tokens after it",
    multihead_causal,
    "every token attends to the tokens after it too: token i may only attend to tokens j <= i. Mask the "
    "scores of keys j > i (torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)) with -inf before the softmax",
)
def _causal_mask_missing(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return attend_with_hooks(c, args, causal=False)


def _shifted_keep(args: tuple[torch.Tensor, ...], c: Contract, offset: int) -> torch.Tensor:
    p = parts_of(c, *args)
    return torch.as_tensor(causal_keep(p.x.shape[-2], p.context.shape[-2], offset), device=p.x.device)


def _diagonal_masked_nan(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    """The same mask with torch's softmax over a fully masked first row: NaN there."""
    out = attend_with_hooks(c, args, keep=_shifted_keep(args, c, -1))
    out = out.clone()
    out[..., 0, :] = float("nan")
    return out


@add(
    "causal_diagonal_masked",
    "causal mask shifted by one: each token's own key masked",
    multihead_causal,
    "your causal mask also hides each token's own key (triu with diagonal=0, or tril(diagonal=-1)): token i "
    "attends to tokens j <= i, itself included; mask only j > i (torch.triu(..., diagonal=1))",
    forms=(_diagonal_masked_nan,),
)
def _diagonal_masked(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return attend_with_hooks(c, args, keep=_shifted_keep(args, c, -1))


@add(
    "causal_one_future_key_kept",
    "causal mask shifted by one: the next token's key kept",
    multihead_causal,
    "your causal mask lets each token see the next one (triu with diagonal=2, or tril(diagonal=1)): token i "
    "attends only to tokens j <= i; mask every j > i (torch.triu(..., diagonal=1))",
)
def _one_future_key(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return attend_with_hooks(c, args, keep=_shifted_keep(args, c, 1))


@add(
    "rope_on_values",
    "RoPE applied to the values too",
    multihead_rotary,
    "your values are rotated too: RoPE rotates only the queries and the keys (so that their scores depend on "
    "the offset of their positions); the values enter the weighted sum as projected",
)
def _rope_on_values(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return attend_with_hooks(c, args, rotate_values=True)


@add(
    "rope_before_head_split",
    "RoPE applied across the whole d_model before the head split",
    multihead_rotary,
    "your RoPE rotates the projected queries and keys across the whole d_model, before the heads are split: "
    "each head is a d_head-wide vector of its own, rotated with the frequencies theta^(-2i/d_head) of its own "
    "width. Split the heads first, then apply RoPE to each head's queries and keys",
)
def _rope_before_split(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    p = parts_of(c, *args)
    _, pairing = conventions(c)
    positions = torch.as_tensor(p.token_positions, device=p.x.device)
    theta = p.theta

    def whole(t: torch.Tensor) -> torch.Tensor:
        return rotate(t, positions, float(theta or 0), pairing)

    return attend_with_hooks(c, args, rotation=None, model_rotation=whole)
