"""Function contracts: what a graded function takes and returns, and how its truth is computed.

A contract ties a spec's ``function.contract`` name to the reference implementation
(:mod:`attnscore.maths.reference`), the independent float64 golden path (:mod:`attnscore.maths.golden`),
the parameters' shapes in the shape legend, the per-entry error scale used by the tolerance, and
a hypothesis strategy for its arguments.

The first three contracts (``score``, ``scores``, ``score_matrix``) are views of one
computation, ``S = Q Kᵀ``; ``scaled_score_matrix`` is ``S/√d_k``. They also say how their
arguments become ``(Q, K)`` (``to_qk``) and back (``pack``), so the Q Kᵀ properties reach them
all. The others (bilinear, additive, masking, weights, attention) only have their own golden
function, error scale and argument strategy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.maths import golden, reference
from attnscore.maths.contract import Args, Contract, QKView
from attnscore.maths.error_scales import (
    as_float64,
    attention_error,
    attention_low_terms,
    weights_error,
    weights_low_terms,
)
from attnscore.maths.family import ContractFamily
from attnscore.maths.flash_contract import flash_attention_2_contract
from attnscore.maths.key_view import KeyView, key_view, weights_key_view
from attnscore.maths.sequence_contracts import flash_attn_contract
from attnscore.maths.variant_contracts import MASK, kernel_attention_contract, sdpa_contract
from attnscore.maths.varlen_contracts import flash_attn_varlen_contract, key_padding_contract

if TYPE_CHECKING:
    import torch
else:
    from attnscore.boundary.lazy_torch import torch

__all__ = ["CONTRACTS", "QK_CONTRACTS", "get_contract"]


def _qk_view(
    name: str,
    parameters: tuple[tuple[str, tuple[str, ...]], ...],
    returns: tuple[str, ...],
    ref: Callable[..., torch.Tensor],
    qk_operands: Callable[..., tuple[Any, Any]],
    from_scores: Callable[[np.ndarray], np.ndarray],
    pack: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]],
    *,
    batched: bool,
    single_query: bool,
    single_key: bool,
    scaled: bool = False,
) -> Contract:
    def to_qk(a: Args) -> tuple[np.ndarray, np.ndarray]:
        Q, K = qk_operands(*(as_float64(a, n) for n, _ in parameters))
        return np.asarray(Q), np.asarray(K)

    def gold(a: Args) -> np.ndarray:
        Q, K = to_qk(a)
        S = golden.scaled_dot_products(Q, K) if scaled else golden.dot_products(Q, K)
        return from_scores(S)

    def error(a: Args) -> tuple[int, np.ndarray]:
        Q, K = to_qk(a)
        mags = golden.dot_magnitudes(Q, K)
        if scaled:
            mags = mags / np.sqrt(Q.shape[-1]) + np.abs(golden.scaled_dot_products(Q, K))
        return int(Q.shape[-1]), from_scores(mags)

    def operands(a: Args) -> np.ndarray:
        Q, K = to_qk(a)
        return from_scores(golden.operand_sums(Q, K))

    return Contract(
        name=name,
        parameters=parameters,
        returns=returns,
        reference=ref,
        golden_fn=gold,
        error_fn=error,
        qk=QKView(qk_operands, to_qk, from_scores, pack, operands, scaled),
        batched=batched,
        single_query=single_query,
        single_key=single_key,
    )


def _matrix_view(name: str, ref: Callable[..., torch.Tensor], scaled: bool = False) -> Contract:
    """``Q (..., n_q, d_k)``, ``K (..., n_k, d_k)`` -> ``(..., n_q, n_k)``: ``Q Kᵀ`` itself (scaled by
    ``1/√d_k`` when ``scaled``)."""
    return _qk_view(
        name,
        (("Q", ("...", "n_q", "d_k")), ("K", ("...", "n_k", "d_k"))),
        ("...", "n_q", "n_k"),
        ref,
        lambda Q, K: (Q, K),
        lambda S: S,
        lambda Q, K: {"Q": Q, "K": K},
        batched=True,
        single_query=False,
        single_key=False,
        scaled=scaled,
    )


def _causal(alignment: str) -> Contract:
    def with_mask(a: Args) -> dict[str, np.ndarray]:
        keep = golden.causal_keep(np.shape(a["Q"])[-2], np.shape(a["K"])[-2], alignment)
        return {"Q": a["Q"], "K": a["K"], "V": a["V"], "mask": keep}

    def ref(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return reference.causal_attention(Q, K, V, alignment)

    return Contract(
        name=f"causal_attention_{alignment}",
        family=ContractFamily.CAUSAL,
        parameters=(("Q", ("...", "n_q", "d_k")), ("K", ("...", "n_k", "d_k")), ("V", ("...", "n_k", "d_v"))),
        returns=("...", "n_q", "d_v"),
        reference=ref,
        golden_fn=lambda a: golden.causal_attention(a["Q"], a["K"], a["V"], alignment),
        error_fn=lambda a: attention_error(with_mask(a)),
        low_error_fn=lambda a, dtype, factor: attention_low_terms(with_mask(a), dtype, factor),
        bound_text="u·(error of scores and weights propagated through V)",
        key_view_fn=lambda a: key_view(with_mask(a)),
    )


def _kept(a: Args, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A bool mask argument, or every key kept where the call leaves it out."""
    return np.asarray(a[name], dtype=bool) if a.get(name) is not None else np.ones(shape, dtype=bool)


def _attention_view(a: Args) -> KeyView:
    n_q, n_k = np.shape(a["Q"])[-2], np.shape(a["K"])[-2]
    return key_view({"Q": a["Q"], "K": a["K"], "V": a["V"], "mask": _kept(a, "mask", (n_q, n_k))})


CONTRACTS: dict[str, Contract] = {
    c.name: c
    for c in (
        _qk_view(
            "score",
            (("q", ("d_k",)), ("k", ("d_k",))),
            (),
            reference.score,
            lambda q, k: (q[None, :], k[None, :]),
            lambda S: S[0, 0],
            lambda Q, K: {"q": Q[0], "k": K[0]},
            batched=False,
            single_query=True,
            single_key=True,
        ),
        _qk_view(
            "scores",
            (("q", ("d_k",)), ("keys", ("n_k", "d_k"))),
            ("n_k",),
            reference.scores,
            lambda q, keys: (q[None, :], keys),
            lambda S: S[0],
            lambda Q, K: {"q": Q[0], "keys": K},
            batched=False,
            single_query=True,
            single_key=False,
        ),
        _matrix_view("score_matrix", reference.score_matrix),
        _matrix_view("scaled_score_matrix", reference.scaled_score_matrix, scaled=True),
        Contract(
            name="bilinear_scores",
            parameters=(("Q", ("...", "n_q", "d_q")), ("K", ("...", "n_k", "d_k")), ("W", ("d_q", "d_k"))),
            returns=("...", "n_q", "n_k"),
            reference=reference.bilinear_scores,
            golden_fn=lambda a: golden.bilinear(a["Q"], a["K"], a["W"]),
            error_fn=lambda a: (
                int(np.shape(a["Q"])[-1] + np.shape(a["K"])[-1]),
                golden.bilinear_magnitudes(a["Q"], a["K"], a["W"]),
            ),
            bound_text="(d_q + d_k)·u·Σ|q_a W_ab k_b|",
        ),
        Contract(
            name="additive_scores",
            parameters=(
                ("Q", ("...", "n_q", "d_k")),
                ("K", ("...", "n_k", "d_k")),
                ("W_q", ("d_a", "d_k")),
                ("W_k", ("d_a", "d_k")),
                ("v", ("d_a",)),
            ),
            returns=("...", "n_q", "n_k"),
            reference=reference.additive_scores,
            golden_fn=lambda a: golden.additive(a["Q"], a["K"], a["W_q"], a["W_k"], a["v"]),
            error_fn=lambda a: (
                int(np.shape(a["Q"])[-1] + np.shape(a["v"])[-1] + 4),
                golden.additive_magnitudes(a["Q"], a["K"], a["W_q"], a["W_k"], a["v"]),
            ),
            bound_text="(d_k + d_a + 4)·u·Σ_a |v_a|(|W_q q|_a + |W_k k|_a + 1)",
        ),
        Contract(
            name="masked_scores",
            family=ContractFamily.MASK,
            parameters=(("S", ("...", "n_q", "n_k")), ("mask", MASK)),
            returns=("...", "n_q", "n_k"),
            reference=reference.masked_scores,
            bool_parameters=frozenset({"mask"}),
            golden_fn=lambda a: golden.masked(a["S"], a["mask"]),
            error_fn=lambda a: (1, np.zeros(np.shape(a["S"]))),
            bound_text="u·|S| (masking is exact)",
        ),
        Contract(
            name="attention_weights",
            family=ContractFamily.WEIGHTS,
            parameters=(("S", ("...", "n_q", "n_k")), ("mask", MASK)),
            returns=("...", "n_q", "n_k"),
            reference=reference.attention_weights,
            bool_parameters=frozenset({"mask"}),
            golden_fn=lambda a: golden.softmax_weights(a["S"], a["mask"]),
            error_fn=lambda a: weights_error(a["S"], a["mask"]),
            low_error_fn=lambda a, dtype, factor: weights_low_terms(a["S"], a["mask"]),
            bound_text="n_k·u·(w·(1 + |s| + |max s|) + 1/n_k)",
            key_view_fn=lambda a: weights_key_view(a["S"], _kept(a, "mask", np.shape(a["S"]))),
        ),
        Contract(
            name="attention",
            family=ContractFamily.ATTENTION,
            parameters=(
                ("Q", ("...", "n_q", "d_k")),
                ("K", ("...", "n_k", "d_k")),
                ("V", ("...", "n_k", "d_v")),
                ("mask", MASK),
            ),
            returns=("...", "n_q", "d_v"),
            reference=reference.attention,
            bool_parameters=frozenset({"mask"}),
            golden_fn=lambda a: golden.attention(a["Q"], a["K"], a["V"], a["mask"]),
            error_fn=attention_error,
            low_error_fn=attention_low_terms,
            bound_text="u·(error of scores and weights propagated through V)",
            key_view_fn=_attention_view,
        ),
        _causal("top_left"),
        _causal("bottom_right"),
        sdpa_contract(),
        sdpa_contract(float_mask=True),
        kernel_attention_contract(),
        flash_attn_contract(),
        flash_attention_2_contract(),
        flash_attn_varlen_contract(),
        key_padding_contract(),
    )
}

QK_CONTRACTS = tuple(name for name, c in CONTRACTS.items() if c.is_qk_view)


def get_contract(name: str) -> Contract:
    """Return the contract called ``name``; raise KeyError naming the known ones."""
    try:
        return CONTRACTS[name]
    except KeyError:
        raise KeyError(f"unknown contract {name!r}; known: {', '.join(sorted(CONTRACTS))}") from None
