"""Every behaviour a spec's description states is checked by some case, and that case catches an
implementation that breaks exactly that promise (and otherwise computes the right thing)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from attnscore.check.implementation import run_impl
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]


def _right(Q, K):
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])


def _flattened_batch(Q, K):  # reshapes each input to (-1, n, d_k): breaks when the batch dims differ
    q, k = Q.reshape(-1, *Q.shape[-2:]), K.reshape(-1, *K.shape[-2:])
    return _right(q, k).reshape(*Q.shape[:-2], Q.shape[-2], K.shape[-2])


def _d_model(Q, K):  # scales by √(heads·d_k) when a head axis is present
    width = Q.shape[-1] * (Q.shape[-3] if Q.dim() >= 3 else 1)
    return Q @ K.transpose(-2, -1) / math.sqrt(width)


def _softmaxed(Q, K):
    return torch.softmax(_right(Q, K), dim=-1)


def _float64(Q, K):
    return _right(Q.double(), K.double())


def _float32(Q, K):  # always float32: right when graded in float32, wrong for float64 inputs
    return _right(Q.float(), K.float())


def _keys_as_rows(Q, K):  # the transpose: (..., n_k, n_q)
    return _right(Q, K).transpose(-2, -1)


def _attention_with(mask_of):
    def attention(Q, K, V, mask):
        S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        m = mask_of(mask)
        weights = torch.softmax(S.masked_fill(~m, float("-inf")), dim=-1)
        return torch.where(m, weights, 0.0) @ V

    return attention


_mask_on_heads = _attention_with(lambda m: m.transpose(0, 1) if m.dim() == 4 else m)  # batch mask on the heads


def _mask_per_batch_item(
    Q, K, V, mask
):  # indexes mask[b]: right for a full-rank mask, wrong for a shared (n_q, n_k) one
    if Q.dim() == 2:
        return _attention_with(lambda m: m)(Q, K, V, mask)
    outs = [_attention_with(lambda m: m)(Q[b], K[b], V[b], mask[b]) for b in range(Q.shape[0])]
    return torch.stack(outs)


def _alias_when_nothing_masked(S, mask):  # hands S itself back when every entry is kept
    return S if bool(mask.all()) else S.masked_fill(~mask, float("-inf"))


def _softmax_then_mask(Q, K, V):  # softmax over every key, then the causal mask, then renormalise
    keep = torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool).tril()
    weights = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) * keep
    return (weights / weights.sum(-1, keepdim=True)) @ V


def _causal_with(diagonal_of):
    def causal_attention(Q, K, V):
        n_q, n_k = Q.shape[-2], K.shape[-2]
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal_of(n_q, n_k))
        weights = torch.softmax((Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).masked_fill(~keep, -math.inf), -1)
        return torch.where(keep, weights, 0.0) @ V

    return causal_attention


def _zeroes_only_empty_rows(S, mask):  # torch.where(mask.any(-1), ...): NaN stays at masked keys of a NaN row
    weights = torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask.any(-1, keepdim=True), weights, 0.0)


# spec -> [(a phrase of its description, the cases that check it, an implementation breaking only it)]
PROMISES = {
    "scaled_score_matrix": [
        ("Leading dims broadcast", {"property:batch_dims_broadcast"}, _flattened_batch),
        (
            "never d_model = heads · d_k",
            {"example:two_heads", "property:scale_independent_of_heads"},
            _d_model,
        ),
        ("No softmax", {"property:scores_not_normalised"}, _softmaxed),
        ("the inputs' dtype and device", {"property:dtype_device_follow_inputs"}, _float64),
        ("the inputs' dtype and device", {"property:dtype_device_follow_inputs"}, _float32),
        ("the result has shape (..., n_q, n_k)", {"example:one_query_four_keys"}, _keys_as_rows),
    ],
    "attention": [
        (
            "a (batch, 1, n_q, n_k) padding mask shared by the heads",
            {"example:padding_mask_per_batch"},
            _mask_on_heads,
        ),
        ("or shape (n_q, n_k)", {"property:matches_reference"}, _mask_per_batch_item),
    ],
    "masked_scores": [
        ("returning a new tensor", {"property:output_not_aliased"}, _alias_when_nothing_masked),
    ],
    "attention_weights": [
        ("masked keys (mask False) getting weight exactly 0", {"example:nan_at_kept_key"}, _zeroes_only_empty_rows),
    ],
    "causal_attention": [
        (
            "top-left aligned",
            {"example:more_keys_than_queries", "example:more_queries_than_keys"},
            _causal_with(lambda n_q, n_k: n_k - n_q),  # bottom-right
        ),
        ("query i attends only to keys j <= i", {"example:square_lower_triangle"}, _causal_with(lambda n_q, n_k: n_k)),
        ("query i attends only to keys j <= i", {"example:future_key_with_huge_score"}, _softmax_then_mask),
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec_id, phrase, cases, wrong",
    [
        pytest.param(spec_id, phrase, cases, wrong, id=f"{spec_id}: {phrase}")
        for spec_id, promises in PROMISES.items()
        for phrase, cases, wrong in promises
    ],
)
def test_each_stated_behaviour_is_checked(spec_id, phrase, cases, wrong):
    """The phrase is in the description, its cases exist, and an implementation breaking it fails one of them."""
    spec = load_spec(ROOT / "specs" / f"{spec_id}.yaml")
    assert phrase in " ".join(spec.description.split())
    result = run_impl(spec, wrong, dtype="float32", shrink=False)
    verdicts = {c.id: c.passed for c in result.cases}
    assert cases <= set(verdicts), sorted(cases - set(verdicts))
    assert any(not verdicts[case] for case in cases), f"{wrong.__name__} passes {sorted(cases)}"


@pytest.mark.slow
def test_the_right_implementation_keeps_every_promise():
    """The control: the plain formula passes every case the promises name."""
    spec = load_spec(ROOT / "specs" / "scaled_score_matrix.yaml")
    result = run_impl(spec, _right, dtype="float32", shrink=False)
    assert result.score == result.max_score
