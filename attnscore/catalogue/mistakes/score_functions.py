"""Wrong score functions: softmax applied to scores, cosine, absolute values, bilinear and additive slips."""

from __future__ import annotations

from typing import Any

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import additive, bilinear, dot_product, many_keys, score_function
from attnscore.catalogue.mistakes.registry import add
from attnscore.catalogue.mistakes.shared import correct_result, qk_pair, scale_factor, to_output
from attnscore.maths import reference
from attnscore.maths.contract import Contract

# ---------------------------------------------------------------------------------------------
# wrong score functions


@add(
    "softmax_applied",
    "softmax applied to raw scores",
    lambda c: score_function(c) and many_keys(c),
    "your scores equal softmax of the scores (each row sums to 1): raw scores must not be normalised",
)
def _softmax_applied(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return torch.softmax(correct_result(c, *args), dim=-1)


@add(
    "cosine_similarity",
    "cosine similarity instead of the dot product",
    dot_product,
    "your scores equal the cosine similarity q·k / (|q| |k|): the score is the plain dot product, "
    "so vector lengths matter",
)
def _cosine(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    Q, K = qk_pair(c, args)
    Qn, Kn = torch.nn.functional.normalize(Q, dim=-1), torch.nn.functional.normalize(K, dim=-1)
    return to_output(c, (Qn @ Kn.transpose(-2, -1)) * scale_factor(c, Q))


@add(
    "absolute_value",
    "absolute value of the scores",
    lambda c: dot_product(c) or bilinear(c),
    "your scores are never negative (|q · k|): a key pointing away from the query has a negative score",
)
def _absolute(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return correct_result(c, *args).abs()


@add(
    "bilinear_w_transposed",
    "Q Wᵀ Kᵀ instead of Q W Kᵀ",
    bilinear,
    "your scores equal Q Wᵀ Kᵀ: the bilinear score is q_iᵀ W k_j, with W of shape (d_q, d_k) untransposed",
)
def _bilinear_wt(c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    return Q @ W.T @ K.transpose(-2, -1)


@add(
    "additive_no_tanh",
    "additive score without tanh",
    additive,
    "your scores equal vᵀ(W_q q + W_k k): apply tanh to W_q q + W_k k before the dot product with v",
)
def _additive_no_tanh(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    return ((Q @ W_q.T).unsqueeze(-2) + (K @ W_k.T).unsqueeze(-3)) @ v


@add(
    "additive_tanh_after_v",
    "tanh applied after the dot product with v",
    additive,
    "your scores equal tanh(vᵀ(W_q q + W_k k)): tanh belongs inside, on the hidden vector W_q q + W_k k, "
    "and the dot product with v comes after it: vᵀ tanh(W_q q + W_k k) (so a score can exceed 1 in size)",
)
def _additive_tanh_after_v(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    return torch.tanh(((Q @ W_q.T).unsqueeze(-2) + (K @ W_k.T).unsqueeze(-3)) @ v)


@add(
    "additive_projection_not_transposed",
    "Q W_q instead of Q W_qᵀ",
    additive,
    "your projections are Q @ W_q and K @ W_k: W_q and W_k have shape (d_a, d_k) and map a query to W_q q, "
    "so rows of Q are projected by Q @ W_q.T (and K @ W_k.T); without the transpose the code only runs "
    "because d_a = d_k here",
)
def _additive_projection_not_transposed(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    return torch.tanh((Q @ W_q).unsqueeze(-2) + (K @ W_k).unsqueeze(-3)) @ v  # needs d_a = d_k


@add(
    "additive_weights_swapped",
    "W_q applied to keys and W_k to queries",
    additive,
    "your scores use W_k on the queries and W_q on the keys: project queries with W_q and keys with W_k",
)
def _additive_swapped(
    c: Contract, spec: Any, Q: torch.Tensor, K: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    return reference.additive_scores(Q, K, W_k, W_q, v)
