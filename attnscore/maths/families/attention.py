"""Attention with a mask argument (:attr:`ContractFamily.ATTENTION`):
``softmax(Q Kᵀ / √d_k, masked) V``. Reference :func:`attnscore.maths.reference.attention`, golden
:func:`attnscore.maths.golden.attention`, error :func:`attnscore.maths.error_scales.attention_error`
(float16/bfloat16: :func:`~attnscore.maths.error_scales.attention_low_terms`); gradients by the
closed form of :func:`attnscore.maths.gradient_formulas.attention`. Its mask may come shared by the
batch or with size-1 batch dims. :func:`attention_scales` is shared with the causal family."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from attnscore.maths import golden, reference
from attnscore.maths.contract import Args, Contract
from attnscore.maths.error_scales import attention_error, attention_low_terms
from attnscore.maths.families.base import MASK, Gradients, Scales, absolute_args, no_unused_keys, not_general_attention
from attnscore.maths.families.weights import kept
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import attention, cleaned, f64, keep_mask, unbroadcast, weights_rounding
from attnscore.maths.key_view import KeyView, key_view

MEMBER = ContractFamily.ATTENTION
SHARED_MASKS = True


def _attention_view(a: Args) -> KeyView:
    n_q, n_k = np.shape(a["Q"])[-2], np.shape(a["K"])[-2]
    return key_view({"Q": a["Q"], "K": a["K"], "V": a["V"], "mask": kept(a, "mask", (n_q, n_k))})


CONTRACTS = (
    Contract(
        name="attention",
        family=MEMBER,
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
)


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """``dV = Pᵀ dO``, ``dS = P ⊙ (dP − D)``, ``dQ = dS K/√d_k``, ``dK = dSᵀ Q/√d_k``."""
    a = {n: np.asarray(args[n]) for n in contract.parameter_names}
    return dict(zip(("Q", "K", "V"), attention(a["Q"], a["K"], a["V"], a["mask"], f64(d_out)), strict=True))


def attention_scales(args: Mapping[str, np.ndarray], keep_arg: Any, dO: np.ndarray) -> Scales:
    """``(n, {"Q", "K", "V": M})`` of attention over ``args``' ``Q``, ``K``, ``V`` with the keep mask
    ``keep_arg`` (broadcastable to the scores) and ``|dO|``: each weight with its own rounding and
    the scores' error ``d_k · Σ|q_i k_i| · scale`` on top, every difference made a sum."""
    Q, K, V = (f64(args[n]) for n in ("Q", "K", "V"))
    n_q, n_k, d_k, d_v = Q.shape[-2], K.shape[-2], Q.shape[-1], V.shape[-1]
    s = 1.0 / np.sqrt(d_k)
    with np.errstate(invalid="ignore", over="ignore"):
        S = s * golden.dot_products(Q, K)
        keep = keep_mask(keep_arg, S.shape)
        A = weights_rounding(S, keep) + np.nan_to_num(golden.softmax_weights(S, keep)) * cleaned(
            d_k * s * golden.dot_magnitudes(Q, K)
        )
    aQ, aK, aV = np.abs(cleaned(Q)), np.abs(cleaned(K)), np.abs(cleaned(V))
    dV = np.einsum("...ij,...id->...jd", A, dO)
    dP = np.einsum("...id,...jd->...ij", dO, aV)
    D = np.sum(dP * A, axis=-1, keepdims=True)
    dS = A * (dP + D)
    dQ = s * np.einsum("...ij,...jd->...id", dS, aK)
    dK = s * np.einsum("...ij,...id->...jd", dS, aQ)
    grads = {"Q": unbroadcast(dQ, Q.shape), "K": unbroadcast(dK, K.shape), "V": unbroadcast(dV, V.shape)}
    return int(d_k + n_k + d_v + n_q) + 2, grads


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """:func:`attention_scales` with the call's mask."""
    a, dO = absolute_args(contract, args, d_out)
    return attention_scales(args, a["mask"], dO)


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> None:
    """None: attention with a mask argument is graded by its own closed forms."""
    return None


# no keywords; a mask argument is the catalogue's own question (masked)
unused_keys = no_unused_keys
attention_changed = not_general_attention
