"""Causal attention (:attr:`ContractFamily.CAUSAL`): a causal flag instead of a mask, aligned
top-left (``causal_attention_top_left``: key ``j <= i``) or bottom-right
(``causal_attention_bottom_right``: ``j <= i + n_k − n_q``). Reference
:func:`attnscore.maths.reference.causal_attention`, golden
:func:`attnscore.maths.golden.causal_attention`; the error bound, key view and gradients are
attention's (:mod:`attnscore.maths.families.attention`) with the causal keep mask."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.maths import golden, reference
from attnscore.maths.contract import Args, Contract
from attnscore.maths.error_scales import attention_error, attention_low_terms
from attnscore.maths.families.attention import attention_scales
from attnscore.maths.families.base import Gradients, Scales, absolute_args, no_unused_keys, not_general_attention
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import causal_attention, f64
from attnscore.maths.key_view import key_view

if TYPE_CHECKING:
    import torch

MEMBER = ContractFamily.CAUSAL
SHARED_MASKS = False


def _causal(alignment: str) -> Contract:
    def with_mask(a: Args) -> dict[str, np.ndarray]:
        keep = golden.causal_keep(np.shape(a["Q"])[-2], np.shape(a["K"])[-2], alignment)
        return {"Q": a["Q"], "K": a["K"], "V": a["V"], "mask": keep}

    def ref(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return reference.causal_attention(Q, K, V, alignment)

    return Contract(
        name=f"causal_attention_{alignment}",
        family=MEMBER,
        parameters=(("Q", ("...", "n_q", "d_k")), ("K", ("...", "n_k", "d_k")), ("V", ("...", "n_k", "d_v"))),
        returns=("...", "n_q", "d_v"),
        reference=ref,
        golden_fn=lambda a: golden.causal_attention(a["Q"], a["K"], a["V"], alignment),
        error_fn=lambda a: attention_error(with_mask(a)),
        low_error_fn=lambda a, dtype, factor: attention_low_terms(with_mask(a), dtype, factor),
        bound_text="u·(error of scores and weights propagated through V)",
        key_view_fn=lambda a: key_view(with_mask(a)),
    )


CONTRACTS = (_causal("top_left"), _causal("bottom_right"))


def alignment(contract: Contract) -> str:
    """``"top_left"`` or ``"bottom_right"``: where a causal contract aligns its mask."""
    return "top_left" if contract.name.endswith("top_left") else "bottom_right"


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """Attention's gradients with the causal keep mask of the contract's alignment."""
    a = {n: np.asarray(args[n]) for n in contract.parameter_names}
    grads = causal_attention(a["Q"], a["K"], a["V"], alignment(contract), f64(d_out))
    return dict(zip(("Q", "K", "V"), grads, strict=True))


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """Attention's :func:`~attnscore.maths.families.attention.attention_scales` with the causal keep mask."""
    _, dO = absolute_args(contract, args, d_out)
    n_q, n_k = np.shape(args["Q"])[-2], np.shape(args["K"])[-2]
    return attention_scales(args, golden.causal_keep(n_q, n_k, alignment(contract)), dO)


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> None:
    """None: causal attention is graded by attention's closed forms."""
    return None


# no keywords: the causal flag is the contract itself, not a keyword
unused_keys = no_unused_keys
attention_changed = not_general_attention
