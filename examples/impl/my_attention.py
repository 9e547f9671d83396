"""An engineer's attention functions, tested against attnscore's specs.

    attnscore test --impl examples.impl.my_attention:scaled_score_matrix --spec specs/scaled_score_matrix.yaml
    pytest --attnscore-impl=examples.impl.my_attention:attention --attnscore-spec=specs/attention.yaml

``buggy_attention_weights`` is deliberately wrong (it forgets the mask), to show a failure report.
"""

from __future__ import annotations

import math

import torch


def scores(q: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Raw scores of one query against n_k keys: (d_k,), (n_k, d_k) -> (n_k,)."""
    return torch.einsum("d,kd->k", q, keys)


def score_matrix(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Q Kᵀ: (..., n_q, d_k), (..., n_k, d_k) -> (..., n_q, n_k)."""
    return torch.matmul(Q, K.transpose(-2, -1))


def scaled_score_matrix(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Q Kᵀ / √d_k with d_k the per-head width."""
    return torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])


def attention_weights(S: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked softmax over the keys; fully masked rows are zeros."""
    weights = torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask, weights, torch.zeros((), dtype=S.dtype, device=S.device))


def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """softmax(Q Kᵀ / √d_k, masked) V."""
    return attention_weights(scaled_score_matrix(Q, K), mask) @ V


def buggy_attention_weights(S: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Wrong on purpose: the mask is ignored."""
    return torch.softmax(S, dim=-1)
