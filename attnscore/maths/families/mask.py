"""Masked scores (:attr:`ContractFamily.MASK`): ``masked_fill(S, ~mask, -inf)``, exact in every
dtype. Reference :func:`attnscore.maths.reference.masked_scores`, golden
:func:`attnscore.maths.golden.masked`; the gradient passes ``dO`` through the kept entries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from attnscore.maths import golden, reference
from attnscore.maths.contract import Contract
from attnscore.maths.families.base import MASK, Gradients, Scales, no_unused_keys, not_general_attention
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import f64, masked

MEMBER = ContractFamily.MASK
SHARED_MASKS = False

CONTRACTS = (
    Contract(
        name="masked_scores",
        family=MEMBER,
        parameters=(("S", ("...", "n_q", "n_k")), ("mask", MASK)),
        returns=("...", "n_q", "n_k"),
        reference=reference.masked_scores,
        bool_parameters=frozenset({"mask"}),
        golden_fn=lambda a: golden.masked(a["S"], a["mask"]),
        error_fn=lambda a: (1, np.zeros(np.shape(a["S"]))),
        bound_text="u·|S| (masking is exact)",
    ),
)


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """``dS = dO`` at the kept entries, 0 at the masked ones."""
    return {"S": masked(np.asarray(args["S"]), np.asarray(args["mask"]), f64(d_out))}


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """Masking is exact: no error."""
    return 1, {"S": np.zeros(np.shape(args["S"]))}


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> None:
    """None: masked scores are not a variant of general attention."""
    return None


# no keywords; a mask argument is the catalogue's own question (masked)
unused_keys = no_unused_keys
attention_changed = not_general_attention
