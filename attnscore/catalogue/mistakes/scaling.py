"""Mistakes of scaling: no scale, the wrong one, or a constant factor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import (
    attention,
    multihead,
    per_head_scaled,
    raw_dot_product,
    scaled,
    scaled_dot_product,
    through_general_attention,
)
from attnscore.catalogue.mistakes.registry import add
from attnscore.catalogue.mistakes.shared import (
    attention_with,
    or_changed,
    qk_pair,
    qkvm,
    scale_factor,
    softmax_weights,
    to_output,
)
from attnscore.maths import reference
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.contract import Contract
from attnscore.maths.families.multihead import attend, conventions, parts_of, rotation_of

# ---------------------------------------------------------------------------------------------
# scaling


def _with_scale(c: Contract, args: tuple[torch.Tensor, ...], scale: Callable[[torch.Tensor], float]) -> torch.Tensor:
    """The contract's scores (or attention) with the scores multiplied by ``scale(Q)`` instead of the right scale."""
    if attention(c):
        return attention_with(softmax_weights, scale, *qkvm(c, args))
    Q, K = qk_pair(c, args)
    return to_output(c, (Q @ K.transpose(-2, -1)) * scale(Q))


def _scaled_by(scale: Callable[[torch.Tensor], float]) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn``: :func:`_with_scale` with ``scale(Q)``, a wrong scale of its own."""

    def wrong(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        return _with_scale(c, args, scale)

    return wrong


add(
    "not_scaled",
    "scores not divided by √d_k",
    lambda c: scaled(c) or through_general_attention(c),
    "your scores equal Q Kᵀ without the 1/√d_k factor: divide the scores by √d_k (d_k = the key width), or "
    "multiply them by the scale you are given",
)(or_changed(_scaled_by(lambda Q: 1.0), AttentionChange(options=(("scale", 1.0),))))


add(
    "scaled_by_dk",
    "divided by d_k (or by √d_k twice)",
    scaled,
    "your scores equal Q Kᵀ / d_k: divide by √d_k once (not by d_k, and not by √d_k twice)",
)(_scaled_by(lambda Q: 1.0 / Q.shape[-1]))


add(
    "scaled_by_half_dk",
    "d_k ** 1/2 (divided by d_k/2)",
    scaled,
    "your scores equal Q Kᵀ / (d_k / 2): d_k ** 1/2 is read as (d_k ** 1) / 2 because ** binds tighter than /; "
    "write d_k ** 0.5 or math.sqrt(d_k)",
)(_scaled_by(lambda Q: 2.0 / Q.shape[-1]))


add(
    "scaled_by_two_dk",
    "S / d_k ** 1/2 inline (divided by 2·d_k)",
    scaled,
    "your scores equal Q Kᵀ / (2·d_k): in S / d_k ** 1/2, ** binds tighter than / and the divisions run left to "
    "right, so it is (S / d_k) / 2; write S / d_k ** 0.5 or S / math.sqrt(d_k)",
)(_scaled_by(lambda Q: 0.5 / Q.shape[-1]))


def _by_sqrt_d_model(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    """Scores divided by √d_model: the heads' own width times their count (every head of a Q with a
    heads axis; multi-head attention's ``d_model``)."""
    if multihead(c):
        p = parts_of(c, *args)
        causal, pairing = conventions(c)
        d_model = p.x.shape[-1]
        return attend(
            p.x, p.context, p.W_q, p.W_k, p.W_v, p.W_o, p.num_heads, causal=causal,
            rotation=rotation_of(p, pairing, p.x.device), scale=1.0 / float(np.sqrt(d_model)),
        )  # fmt: skip
    return _with_scale(c, args, lambda Q: 1.0 / float(np.sqrt(Q.shape[-1] * (Q.shape[-3] if Q.ndim >= 3 else 1))))


add(
    "scaled_by_sqrt_d_model",
    "divided by √d_model instead of √d_k",
    per_head_scaled,
    "your scores are divided by √(heads·d_k) = √d_model: with heads, scale by the per-head width √d_k "
    "(d_k = d_head = d_model / num_heads)",
)(_by_sqrt_d_model)


_FIT_ENTRIES = 2_000_000  # score entries evaluated at once while fitting a scale ratio


def _fit_scale_ratio(c: Contract, args: tuple[torch.Tensor, ...], got: np.ndarray) -> dict[str, float] | None:
    """The constant ``r`` for which scores scaled by ``r/√d_k`` give ``got`` (least squares), or None.

    Scores are linear in ``r``; attention is fitted on a grid of ``log2 r`` in [-6, 6], refined by
    golden-section search. The fitted ``r`` is only a candidate: the diagnosis confirms it.
    """
    if not np.isfinite(got).all():
        return None
    if scaled_dot_product(c):
        Q, K = qk_pair(c, args)
        g = to_output(c, (Q @ K.transpose(-2, -1)) * scale_factor(c, Q)).double().numpy()
        if g.shape != got.shape or not np.isfinite(g).all() or not (g * g).sum() > 0:
            return None
        r = float((got * g).sum() / (g * g).sum())
        return {"r": r} if np.isfinite(r) and r > 0 else None
    Q, K, V, m = qkvm(c, args)
    S0 = (Q @ K.transpose(-2, -1)) * scale_factor(c, Q)  # (..., n_q, n_k)
    target = torch.as_tensor(got, dtype=S0.dtype)
    if not torch.isfinite(S0).all() or target.shape != torch.broadcast_shapes(S0.shape[:-1], V.shape[:-2] + (1,)) + (
        V.shape[-1],
    ):
        return None

    keep = torch.broadcast_to(m, S0.shape).unsqueeze(0)  # (1, ..., n_q, n_k): one rank above S0

    if S0.numel() > _FIT_ENTRIES:
        return None  # too large to fit here; a name needs evidence we cannot afford to gather
    chunk = max(1, _FIT_ENTRIES // max(1, S0.numel()))

    def error(log_r: torch.Tensor) -> torch.Tensor:  # (G,) -> (G,), a few grid points at a time
        parts = []
        for part in log_r.split(chunk):
            r = torch.exp2(part).reshape(-1, *[1] * S0.ndim)
            out = reference.attention_weights(r * S0, keep) @ V  # (g, ..., n_q, d_v)
            parts.append(((out - target) ** 2).flatten(1).sum(dim=1))
        return torch.cat(parts)

    grid = torch.linspace(-6.0, 6.0, 193, dtype=S0.dtype)
    best = int(torch.argmin(error(grid)))
    lo, hi = float(grid[max(best - 1, 0)]), float(grid[min(best + 1, len(grid) - 1)])
    golden = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(60):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        ea, eb = error(torch.tensor([a, b], dtype=S0.dtype)).tolist()
        lo, hi = (lo, b) if ea <= eb else (a, hi)
    return {"r": float(2.0 ** ((lo + hi) / 2.0))}


@add(
    "scaled_by_constant_factor",
    "scores scaled by a constant factor times 1/√d_k",
    scaled,
    "your scores are scaled by a constant factor r = {r} times the right scale 1/√d_k, for every d_k (an extra "
    "constant in the scale, a temperature, or a factor applied to Q and to K): multiply Q Kᵀ by exactly 1/√d_k "
    "(math.sqrt(d_k) with d_k = Q.shape[-1])",
    fit=_fit_scale_ratio,
    defaults=(("r", 0.5),),
)
def _scaled_by_constant_factor(c: Contract, spec: Any, *args: torch.Tensor, r: float = 0.5) -> torch.Tensor:
    return _with_scale(c, args, lambda Q: r / float(np.sqrt(Q.shape[-1])))


@add(
    "scaled_raw_scores",
    "raw scores divided by √d_k",
    raw_dot_product,
    "your scores are divided by √d_k: this function returns raw scores q · k, without scaling",
)
def _scaled_raw(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    Q, K = qk_pair(c, args)
    return to_output(c, (Q @ K.transpose(-2, -1)) / float(np.sqrt(Q.shape[-1])))
