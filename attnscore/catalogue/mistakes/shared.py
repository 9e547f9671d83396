"""Helpers the mistakes share: every Q Kᵀ view as (Q, K) and back, the causal keep mask, the right answer."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import causal, scaled, through_general_attention
from attnscore.maths import reference
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.contract import Contract
from attnscore.maths.families.registry import family_of

# ---------------------------------------------------------------------------------------------
# helpers: every Q Kᵀ view as (Q, K) and back


def qk_pair(c: Contract, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Q, K)`` of the arguments: the contract's own geometry for Q Kᵀ views, else the first two."""
    return c.qk.operands(*args) if c.qk is not None else (args[0], args[1])


def to_output(c: Contract, S: torch.Tensor) -> torch.Tensor:
    """Scores ``S`` (..., n_q, n_k) back in the contract's output shape."""
    return c.qk.from_scores(S) if c.qk is not None else S  # type: ignore[arg-type, return-value]


def scale_factor(c: Contract, Q: torch.Tensor) -> float:
    return 1.0 / float(np.sqrt(Q.shape[-1])) if scaled(c) else 1.0


def causal_keep(Q: torch.Tensor, K: torch.Tensor, alignment: str) -> torch.Tensor:
    """The causal mask (True = keep), ``(n_q, n_k)``: ``j <= i`` top-left, ``j <= i + n_k - n_q`` bottom-right."""
    n_q, n_k = Q.shape[-2], K.shape[-2]
    keep = torch.ones(n_q, n_k, dtype=torch.bool, device=Q.device)
    return keep.tril() if alignment == "top_left" else keep.tril(n_k - n_q)


def alignment_of(c: Contract) -> str:
    return "top_left" if c.name.endswith("top_left") else "bottom_right"


def qkvm(c: Contract, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """``(Q, K, V, mask)`` of an attention contract; the causal flag form gets its causal mask."""
    if causal(c):
        Q, K, V = args
        return Q, K, V, causal_keep(Q, K, alignment_of(c))
    return args


def correct_result(c: Contract, *args: torch.Tensor) -> torch.Tensor:
    return c.reference(*args)


def attention_with(
    weights_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    scale: Callable[[torch.Tensor], float],
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    S = (Q @ K.transpose(-2, -1)) * scale(Q)
    return weights_fn(S, mask) @ V


def softmax_weights(S: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return reference.attention_weights(S, mask)


def changed_attention(c: Contract, args: tuple[torch.Tensor, ...], change: AttentionChange) -> torch.Tensor:
    """A variant of general attention's call on ``args`` (its own layout and keywords) with one step of
    general attention done another way (``change``): its family maps the call
    (:meth:`attnscore.maths.families.base.Family.attention_changed`), so a mistake built as a change
    applies to every family that can show it (:func:`attnscore.catalogue.families.through_general_attention`).

    Raises:
        ValueError: ``c`` is not a variant of general attention.
    """
    out = family_of(c).attention_changed(c, tuple(args), change)
    if out is None:
        raise ValueError(f"contract {c.name!r}: expected a variant of general attention, found another family")
    return out


def changing(change: AttentionChange, section: str) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn`` (or form) for variants of general attention only: :func:`changed_attention`;
    ``section`` is the catalogue module that registers it (``__name__``: the catalogue's order)."""

    def wrong(c: Contract, spec: object, *args: torch.Tensor) -> torch.Tensor:
        return changed_attention(c, args, change)

    wrong.__module__ = section
    return wrong


def or_changed(plain: Callable[..., torch.Tensor], change: AttentionChange) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn`` (or form): ``plain(c, spec, *args)`` on the plain contracts (scores, masks,
    weights, attention), and on a variant of general attention the same mistake as ``change``
    (:func:`changed_attention`), in the variant's own layout and keywords."""

    def wrong(c: Contract, spec: object, *args: torch.Tensor) -> torch.Tensor:
        if through_general_attention(c):
            return changed_attention(c, args, change)
        return plain(c, spec, *args)

    wrong.__doc__, wrong.__module__ = plain.__doc__, plain.__module__  # the catalogue orders by section
    return wrong
