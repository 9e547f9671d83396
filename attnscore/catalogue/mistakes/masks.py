"""Mistakes of masks and softmax: the mask ignored, inverted or added; large negative fills; NaN rows; wrong axes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import (
    attention,
    gives_weights,
    keys_masked_by_own_rule,
    masked,
    rows_can_be_fully_masked,
    sdpa_bool_mask,
    sdpa_float_mask,
    through_general_attention,
    weights,
)
from attnscore.catalogue.mistakes.registry import add
from attnscore.catalogue.mistakes.shared import attention_with, changed_attention, or_changed, qkvm
from attnscore.maths import reference
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.contract import Contract

# ---------------------------------------------------------------------------------------------
# masks and softmax


def _masked_variant(
    c: Contract,
    args: tuple[torch.Tensor, ...],
    logits_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    weights_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Apply a wrong masking rule ``logits_fn(S, mask)`` in the contract's own setting."""

    def weights(S: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits_fn(S, mask), dim=-1) if weights_fn is None else weights_fn(S, mask)

    if c.name == "masked_scores":
        return logits_fn(*args)
    if c.name == "attention_weights":
        return weights(*args)
    Q, K, V, mask = qkvm(c, args)
    return attention_with(weights, lambda Q: 1.0 / float(np.sqrt(Q.shape[-1])), Q, K, V, mask)


def _weighing(weights: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn``: the scores as they are, turned into wrong weights by ``weights(S, mask)``
    (:func:`_masked_variant`)."""

    def wrong(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        return _masked_variant(c, args, lambda S, m: S, weights)

    return wrong


@add(
    "softmax_without_max_subtraction",
    "softmax without subtracting the row max",
    weights,
    "exp of large logits overflows to inf (inf/inf = NaN): subtract each row's max before exp, or use torch.softmax",
)
def _unstable(c: Contract, spec: Any, S: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    e = torch.where(mask, torch.exp(S), torch.zeros((), dtype=S.dtype))
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(mask, e / total, torch.zeros((), dtype=S.dtype))


def _mask_ignored(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _masked_variant(c, args, lambda S, m: S.clone())


add(
    "mask_ignored",
    "mask ignored",
    lambda c: masked(c) or sdpa_bool_mask(c),
    "masked keys still count: your result equals the unmasked one; set masked scores to -inf before softmax",
)(or_changed(_mask_ignored, AttentionChange(options=(("attn_mask", None),))))


@add(
    "mask_inverted",
    "mask inverted (True = drop)",
    masked,
    "your mask is inverted: True means keep this key; you dropped the kept keys and kept the masked ones",
)
def _mask_inverted(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def rule(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return S.masked_fill(m, float("-inf"))

    if c.name == "masked_scores":
        return rule(*args)
    return _masked_variant(c, args, rule, lambda S, m: reference.attention_weights(S, ~m))


@add(
    "additive_mask_nan",
    "(1 - mask)·(-inf) added to the scores",
    masked,
    "you added (1 - mask)·(-inf) to the scores: 0·(-inf) is NaN at every kept entry; use "
    "scores.masked_fill(~mask, float('-inf')) or torch.where",
)
def _additive_mask(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _masked_variant(c, args, lambda S, m: S + (1 - m.to(S.dtype)) * float("-inf"))


LARGE_NEGATIVE = -100.0  # a fill value at or below this is "a large negative number", not a score


def _fit_fill(c: Contract, args: tuple[torch.Tensor, ...], got: np.ndarray) -> dict[str, float] | None:
    """The large finite negative fill ``F`` read from the output: masked scores hold ``F`` (filled) or
    ``S + F`` (added as a bias), the same ``F`` at every masked entry with a finite score.

    Weights hide ``F`` (any large ``F`` gives a masked key weight 0), so there it is -1e9, and
    the forms tell filling (a query with no kept key gets 1/n_k each) from adding (softmax of the
    row's raw scores) apart.
    """
    if c.name != "masked_scores":
        return {"fill": -1e9}
    S, mask = (np.asarray(a.double().numpy() if a.dtype != torch.bool else a.numpy()) for a in args)
    S, mask = np.broadcast_arrays(S, mask)
    if got.shape != S.shape:
        return None
    spots = ~mask & np.isfinite(S)
    if not spots.any():
        return None
    for values in (got[spots], got[spots] - S[spots]):
        fill = float(np.median(values))
        if np.isfinite(fill) and fill <= LARGE_NEGATIVE and np.allclose(values, fill, rtol=1e-6, atol=0.0):
            return {"fill": fill}
    return None


def _fill_large_negative(c: Contract, spec: Any, *args: torch.Tensor, fill: float = -1e9) -> torch.Tensor:
    if through_general_attention(c):
        return changed_attention(c, args, AttentionChange(fill=fill))
    return _masked_variant(c, args, lambda S, m: S.masked_fill(~m, fill))


def _add_large_negative(c: Contract, spec: Any, *args: torch.Tensor, fill: float = -1e9) -> torch.Tensor:
    def rule(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return S + torch.where(m, torch.zeros((), dtype=S.dtype), torch.full((), fill, dtype=S.dtype))

    if through_general_attention(c):
        return changed_attention(c, args, AttentionChange(fill=fill, fill_added=True))
    return _masked_variant(c, args, rule)


@add(
    "masked_with_large_negative",
    "a large negative number instead of -inf for masked scores",
    keys_masked_by_own_rule,
    "you set masked scores to a large finite negative number (-1e9, -1e4, torch.finfo(dtype).min, or such a "
    "number added to the scores) instead of -inf: a masked score must be exactly -inf, and a query whose keys "
    "are all masked then gets weights from the masked scores (equal weights 1/n_k: the mean of the values) "
    "instead of zeros; use scores.masked_fill(~mask, float('-inf')) and give the fully masked rows zero weights "
    "(e.g. torch.where(mask, torch.softmax(masked, dim=-1), 0))",
    forms=(_add_large_negative,),
    fit=_fit_fill,
    defaults=(("fill", -1e9),),
)
def _masked_with_large_negative(c: Contract, spec: Any, *args: torch.Tensor, fill: float = -1e9) -> torch.Tensor:
    return _fill_large_negative(c, spec, *args, fill=fill)


@add(
    "mask_added_as_neg_inf_bias",
    "the mask added as a -inf bias: S + where(mask, 0, -inf)",
    masked,
    "you mask by adding -inf to the masked scores (S + where(mask, 0, -inf), a float mask of 0 and -inf, or "
    "where(mask, S, S - inf)): that is right for a finite masked score, but a masked score of +inf or NaN "
    "gives inf + (-inf) = NaN instead of -inf, and after "
    "softmax a query whose keys are all masked gets NaN (softmax of all -inf); replace the masked scores instead "
    "of adding to them, scores.masked_fill(~mask, float('-inf')), and give a query with no kept key zero "
    "weights (e.g. torch.where(mask, weights, 0))",
)
def _neg_inf_bias(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    def rule(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return S + torch.where(m, torch.zeros((), dtype=S.dtype), torch.full((), float("-inf"), dtype=S.dtype))

    return _masked_variant(c, args, rule, lambda S, m: torch.softmax(rule(S, m), dim=-1))


def _nan_to_num_softmax(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return torch.nan_to_num(torch.softmax(S.masked_fill(~m, float("-inf")), dim=-1))


add(
    "nan_hidden_after_softmax",
    "torch.nan_to_num after softmax",
    lambda c: gives_weights(c) and masked(c),
    "your weights hide a NaN: torch.nan_to_num (or replacing NaN by 0) after softmax turns a row whose kept key "
    "has a NaN score into zeros, so the caller never sees the bad input; let that NaN through and zero only the "
    "masked entries, e.g. torch.where(mask, torch.softmax(masked, dim=-1), 0)",
)(_weighing(_nan_to_num_softmax))


def _exp_times_mask(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    e = torch.exp(S - S.max(dim=-1, keepdim=True).values) * m  # the max includes the masked keys
    return e / e.sum(dim=-1, keepdim=True)


add(
    "mask_applied_after_exp",
    "exp(S - max over all keys) times the mask",
    lambda c: gives_weights(c) and masked(c),
    "you multiply exp(S - max) by the mask after taking the max over every key, masked ones included: a masked "
    "key with a huge score (or inf, or NaN) sets the max, the kept keys' exp underflow to 0 and the row becomes "
    "0/0 = NaN; mask before the max: scores.masked_fill(~mask, float('-inf')), then softmax (and zero rows "
    "with no kept key)",
)(_weighing(_exp_times_mask))


def _nan_fully_masked(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _masked_variant(
        c,
        args,
        lambda S, m: S.masked_fill(~m, float("-inf")),
        lambda S, m: torch.softmax(S.masked_fill(~m, float("-inf")), dim=-1),
    )


def _nan_rows_can_show(c: Contract) -> bool:
    """A query can keep no key and the output is made of softmax weights: the weights, attention and
    every variant of general attention, but SDPA's float mask (a row of ``-inf`` entries), where the
    same mistake is ``sdpa_float_mask_nan_rows`` in SDPA's words."""
    return (gives_weights(c) or through_general_attention(c)) and rows_can_be_fully_masked(c) and not sdpa_float_mask(c)


add(
    "nan_fully_masked",
    "NaN for fully masked rows",
    _nan_rows_can_show,
    "a query whose keys are all masked gets NaN (softmax of all -inf); the convention here is all-zero "
    "weights: replace the NaN rows (e.g. torch.where(mask, weights, 0))",
)(or_changed(_nan_fully_masked, AttentionChange(zero_masked=False)))


def _softmax_over_queries_zeroed(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    out = torch.softmax(S.masked_fill(~m, float("-inf")), dim=-2)
    return torch.where(m, out, torch.zeros((), dtype=S.dtype))


def _softmax_over_queries(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    # as written: a key no query keeps is NaN
    return torch.softmax(S.masked_fill(~m, float("-inf")), dim=-2)


add(
    "softmax_wrong_axis",
    "softmax over the queries axis",
    lambda c: gives_weights(c) or through_general_attention(c),
    "your softmax runs over the queries (dim=-2, or dim=1 of a (batch, n_q, n_k) tensor): each query's weights "
    "over the keys must sum to 1, so use dim=-1",
    forms=(or_changed(_weighing(_softmax_over_queries_zeroed), AttentionChange(softmax_axis=-2)),),
)(or_changed(_weighing(_softmax_over_queries), AttentionChange(softmax_axis=-2, zero_masked=False)))


@add(
    "uniform_weights",
    "uniform weights",
    lambda c: gives_weights(c) and masked(c),
    "your weights are uniform (1/n_k for every key): the weights are softmax of the scores",
)
def _uniform(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    if c.name == "attention_weights":
        S = args[0]
        return torch.full_like(S, 1.0 / S.shape[-1])
    Q, K, V, _ = args
    return V.mean(dim=-2, keepdim=True).expand(*torch.broadcast_shapes(Q.shape[:-1], V.shape[:-2] + (1,)), V.shape[-1])


@add(
    "returned_weights",
    "attention weights returned instead of weights @ V",
    attention,
    "your result is the attention weights softmax(Q Kᵀ / √d_k), shape (..., n_q, n_k), not the output: multiply "
    "them by the values and return weights @ V, shape (..., n_q, d_v) (only the output, not (output, weights))",
)
def _returned_weights(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    Q, K, V, mask = qkvm(c, args)
    S = (Q @ K.transpose(-2, -1)) / float(np.sqrt(Q.shape[-1]))  # (..., n_q, n_k)
    return reference.attention_weights(S, mask)  # missing: @ V


_NOT_WEIGHTS = (
    "raw scores are not weights: they can be negative and need not sum to one; softmax turns them into "
    "weights (exp makes them positive, dividing by the row's sum makes them sum to one)"
)


def _masked_scores_as_weights(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return S.masked_fill(~m, 0.0)


add(
    "scores_used_as_weights",
    "raw scores used as weights (no softmax)",
    gives_weights,
    f"your weights are the raw scores themselves: {_NOT_WEIGHTS}; apply torch.softmax over the keys (dim=-1)",
)(_weighing(_masked_scores_as_weights))


def _scores_over_their_sum(S: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    kept = S.masked_fill(~m, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


add(
    "scores_divided_by_their_sum",
    "scores divided by their sum instead of softmax",
    gives_weights,
    f"your weights are the scores divided by their row's sum: {_NOT_WEIGHTS}; a negative score stays "
    "negative and a row summing to 0 divides by 0: use torch.softmax over the keys (dim=-1)",
)(_weighing(_scores_over_their_sum))
