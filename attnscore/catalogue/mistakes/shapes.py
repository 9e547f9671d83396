"""Mistakes of shapes and axes: keys not transposed, axes reversed, the output transposed."""

from __future__ import annotations

from typing import Any

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import bilinear, dot_product, many_keys, many_queries, score_function
from attnscore.catalogue.mistakes.registry import add
from attnscore.catalogue.mistakes.shared import correct_result, qk_pair, scale_factor
from attnscore.maths.contract import Contract

# ---------------------------------------------------------------------------------------------
# shapes and axes


@add(
    "keys_not_transposed",
    "Q K instead of Q Kᵀ",
    lambda c: dot_product(c) and many_queries(c),
    "your scores equal Q K (K not transposed), which pairs rows with columns: use Q @ K.transpose(-2, -1)",
)
def _keys_not_transposed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    Q, K = qk_pair(c, args)
    return (Q @ K) * scale_factor(c, Q)


@add(
    "all_axes_reversed",
    ".T on batched keys",
    lambda c: (dot_product(c) or bilinear(c)) and many_queries(c),
    "your result mixes batch items: K.T (or .permute with every axis reversed) also swaps the batch axes; "
    "swap only the last two with K.transpose(-2, -1)",
)
def _all_axes_reversed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    K_T = args[1].permute(*reversed(range(args[1].ndim)))  # what K.T does to a batched K
    if c.name == "bilinear_scores":
        Q, W = args[0], args[2]
        return Q @ W @ K_T  # (b, n_q, d_q) @ (d_q, d_k) @ (d_k, n_k, b): runs when b = d_k = n_k
    Q = args[0]
    return (Q @ K_T) * scale_factor(c, Q)


@add(
    "output_transposed",
    "K Qᵀ instead of Q Kᵀ",
    lambda c: score_function(c) and many_queries(c),
    "your matrix is transposed (K Qᵀ): rows must be queries and columns keys, shape (..., n_q, n_k)",
)
def _output_transposed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return correct_result(c, *args).transpose(-2, -1)


@add(
    "keys_reversed",
    "keys in reverse order",
    lambda c: dot_product(c) and many_keys(c),
    "your scores come out in reverse key order: column j must be the score of key j",
)
def _keys_reversed(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return torch.flip(correct_result(c, *args), dims=[-1])


@add(
    "elementwise_not_summed",
    "q * k without the sum",
    lambda c: dot_product(c) and not many_queries(c),
    "your result is the elementwise product q * k: a dot product also sums over the d_k coordinates",
)
def _elementwise(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return args[1] * args[0]
