"""Softmax weights over the keys with a mask (:attr:`ContractFamily.WEIGHTS`). Reference
:func:`attnscore.maths.reference.attention_weights`, golden
:func:`attnscore.maths.golden.softmax_weights`, error :func:`attnscore.maths.error_scales.weights_error`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from attnscore.maths import golden, reference
from attnscore.maths.contract import Args, Contract
from attnscore.maths.error_scales import weights_error, weights_low_terms
from attnscore.maths.families.base import MASK, Gradients, Scales, absolute_args, no_unused_keys, not_general_attention
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import f64, keep_mask, softmax_weights, unbroadcast, weights_rounding
from attnscore.maths.key_view import weights_key_view

MEMBER = ContractFamily.WEIGHTS
SHARED_MASKS = False


def kept(a: Args, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A bool mask argument, or every key kept where the call leaves it out."""
    return np.asarray(a[name], dtype=bool) if a.get(name) is not None else np.ones(shape, dtype=bool)


CONTRACTS = (
    Contract(
        name="attention_weights",
        family=MEMBER,
        parameters=(("S", ("...", "n_q", "n_k")), ("mask", MASK)),
        returns=("...", "n_q", "n_k"),
        reference=reference.attention_weights,
        bool_parameters=frozenset({"mask"}),
        golden_fn=lambda a: golden.softmax_weights(a["S"], a["mask"]),
        error_fn=lambda a: weights_error(a["S"], a["mask"]),
        low_error_fn=lambda a, dtype, factor: weights_low_terms(a["S"], a["mask"]),
        bound_text="n_k·u·(w·(1 + |s| + |max s|) + 1/n_k)",
        key_view_fn=lambda a: weights_key_view(a["S"], kept(a, "mask", np.shape(a["S"]))),
    ),
)


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """The softmax Jacobian: ``dS = P ⊙ (dO − rowsum(dO ⊙ P))``."""
    return {"S": softmax_weights(np.asarray(args["S"]), np.asarray(args["mask"]), f64(d_out))}


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """Each weight with its own rounding ``P ⊙ (1 + |s| + |max s|)``, the Jacobian's difference made a sum."""
    a, dO = absolute_args(contract, args, d_out)
    S = a["S"]
    keep = keep_mask(a["mask"], S.shape)
    A = weights_rounding(f64(args["S"]), keep)
    D = np.sum(dO * A, axis=-1, keepdims=True)
    return int(S.shape[-1]) + 2, {"S": unbroadcast(A * (dO + D), S.shape)}


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> None:
    """None: the weights are not a variant of general attention."""
    return None


# no keywords; a mask argument is the catalogue's own question (masked)
unused_keys = no_unused_keys
attention_changed = not_general_attention
