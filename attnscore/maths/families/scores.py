"""The score functions (:attr:`ContractFamily.SCORES`): dot products raw or scaled, bilinear and
additive scores, and their gradients.

The first four contracts (``score``, ``scores``, ``score_matrix``, ``scaled_score_matrix``) are
views of one computation, ``S = Q Kᵀ`` (``S/√d_k`` for the scaled one). They say how their
arguments become ``(Q, K)`` and back (:class:`~attnscore.maths.contract.QKView`), so the Q Kᵀ
properties and mistakes reach them all. Bilinear (``Q W Kᵀ``, Luong) and additive
(``vᵀ tanh(W_q q + W_k k)``, Bahdanau) scores have their own golden function and error scale.
Reference :mod:`attnscore.maths.reference`, golden :mod:`attnscore.maths.golden`, gradients
:mod:`attnscore.maths.gradient_formulas`. The score functions take no keyword.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.maths import golden, reference
from attnscore.maths.contract import Args, Contract, QKView
from attnscore.maths.error_scales import as_float64
from attnscore.maths.families.base import Gradients, Scales, no_unused_keys, not_general_attention
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import (
    additive,
    bilinear,
    cleaned,
    dot_products,
    scaled_dot_products,
    unbroadcast,
)

if TYPE_CHECKING:
    import torch

MEMBER = ContractFamily.SCORES
SHARED_MASKS = False


def _qk_view(
    name: str,
    parameters: tuple[tuple[str, tuple[str, ...]], ...],
    returns: tuple[str, ...],
    ref: Callable[..., torch.Tensor],
    qk_operands: Callable[..., tuple[Any, Any]],
    from_scores: Callable[[np.ndarray], np.ndarray],
    pack: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]],
    *,
    single_query: bool = False,
    single_key: bool = False,
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
        family=MEMBER,
        parameters=parameters,
        returns=returns,
        reference=ref,
        golden_fn=gold,
        error_fn=error,
        qk=QKView(qk_operands, to_qk, from_scores, pack, operands, scaled, single_query, single_key),
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
        scaled=scaled,
    )


CONTRACTS = (
    _qk_view(
        "score",
        (("q", ("d_k",)), ("k", ("d_k",))),
        (),
        reference.score,
        lambda q, k: (q[None, :], k[None, :]),
        lambda S: S[0, 0],
        lambda Q, K: {"q": Q[0], "k": K[0]},
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
        single_query=True,
    ),
    _matrix_view("score_matrix", reference.score_matrix),
    _matrix_view("scaled_score_matrix", reference.scaled_score_matrix, scaled=True),
    Contract(
        name="bilinear_scores",
        family=MEMBER,
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
        family=MEMBER,
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
)


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """A view of Q Kᵀ (raw or scaled): ``dQ = dS K``, ``dK = dSᵀ Q`` (times ``1/√d_k`` when scaled),
    in the view's own arguments; bilinear and additive scores by their closed forms."""
    a = {n: np.asarray(args[n]) for n in contract.parameter_names}
    dO = np.asarray(d_out, dtype=np.float64)
    if contract.qk is not None:
        Q, K = contract.qk.to_qk(a)
        dS = dO.reshape(Q.shape[:-2] + (Q.shape[-2], K.shape[-2])) if dO.ndim < 2 else dO
        grad = scaled_dot_products if contract.qk.scaled else dot_products
        dQ, dK = grad(Q, K, dS)
        return {n: np.asarray(g, dtype=np.float64) for n, g in contract.qk.pack(dQ, dK).items()}
    if "W" in a:
        return dict(zip(("Q", "K", "W"), bilinear(a["Q"], a["K"], a["W"], dO), strict=True))
    if "v" in a:
        parts = additive(a["Q"], a["K"], a["W_q"], a["W_k"], a["v"], dO)
        return dict(zip(("Q", "K", "W_q", "W_k", "v"), parts, strict=True))
    raise ValueError(f"contract {contract.name!r}: no closed-form gradient (family {str(contract.family)!r})")


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """The gradients' computation on absolute values; for additive scores ``|dS||v|`` through
    ``|W|``, with the tanh's own error."""
    a = {n: cleaned(args[n]) for n in contract.parameter_names}
    dO = np.abs(cleaned(d_out))
    if contract.is_qk_view or "W" in a:
        grads = gradients(contract, {n: np.abs(x) for n, x in a.items()}, dO)
        if contract.qk is not None:
            Q, K = contract.qk.to_qk(a)
            n = int(max(Q.shape[-2], K.shape[-2])) + 2
        else:
            n = int(np.shape(a["K"])[-2] + np.shape(a["Q"])[-2] + np.shape(a["W"])[0] + np.shape(a["W"])[1])
        return n, grads
    Q, K, W_q, W_k, v = (np.abs(a[n]) for n in ("Q", "K", "W_q", "W_k", "v"))
    hmag = np.einsum("...id,ad->...ia", Q, W_q)[..., :, None, :] + np.einsum("...jd,ad->...ja", K, W_k)[..., None, :, :]
    dh = dO[..., None] * v * (1.0 + hmag)  # (..., n_q, n_k, d_a)
    dq_proj, dk_proj = dh.sum(axis=-2), dh.sum(axis=-3)
    dW_q = np.einsum("...ia,...id->...ad", dq_proj, np.broadcast_to(Q, (*dq_proj.shape[:-1], Q.shape[-1])))
    dW_k = np.einsum("...ja,...jd->...ad", dk_proj, np.broadcast_to(K, (*dk_proj.shape[:-1], K.shape[-1])))
    dv = np.sum(dO) * np.ones_like(v)  # |tanh| <= 1: dv_a <= Σ_ij |dS_ij|
    grads = {
        "Q": unbroadcast(np.einsum("...ia,ad->...id", dq_proj, W_q), Q.shape),
        "K": unbroadcast(np.einsum("...ja,ad->...jd", dk_proj, W_k), K.shape),
        "W_q": unbroadcast(dW_q, W_q.shape),
        "W_k": unbroadcast(dW_k, W_k.shape),
        "v": dv,
    }
    n = int(Q.shape[-1] + K.shape[-2] + Q.shape[-2] + v.shape[-1] + 4)
    return n, grads


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> None:
    """None: the score functions are not a variant of general attention."""
    return None


# no keywords
unused_keys = no_unused_keys
attention_changed = not_general_attention
