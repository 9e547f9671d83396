"""Golden gradients: the backward pass of every contract in float64 numpy, and the error scale of each.

:func:`contract_gradients` and :func:`contract_gradient_scales` answer for any contract by asking
its family's module (:mod:`attnscore.maths.families`: the closed forms of
:mod:`attnscore.maths.gradient_formulas` and :mod:`attnscore.maths.keyword_gradients` bound to the
family's options); :func:`golden_backward` gives both at once, asking the family once. The allowed
error of each entry is a tolerance rule (:func:`attnscore.maths.tolerance.gradient_allowed`); which
parameters get a gradient is the contract's
(:attr:`attnscore.maths.contract.Contract.differentiable_parameters`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.contract import Contract
from attnscore.maths.families.base import Family
from attnscore.maths.families.registry import family_of

__all__ = [
    "contract_gradients",
    "contract_gradient_scales",
    "golden_backward",
    "keyword_attention_options",
]

Args = Mapping[str, np.ndarray]


def contract_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    """The float64 gradients of ``contract``'s output with respect to each differentiable parameter.

    Args:
        contract: a contract of :data:`attnscore.maths.contracts.CONTRACTS` (keyed by its own
            parameter names, not a spec's renaming).
        args: the call's arguments (already cast to the tested dtype).
        d_out: the upstream gradient, of the output's shape (``()`` for ``score``).

    Returns:
        ``{parameter: gradient}`` for the contract's
        :attr:`~attnscore.maths.contract.Contract.differentiable_parameters`, each of its argument's shape.

    Raises:
        ValueError: a contract with no closed form here (none of the bundled ones).

    Example (``score(q, k) = q · k``: ``dq = dO·k``, ``dk = dO·q``):
        >>> from attnscore.maths.contracts import get_contract
        >>> g = contract_gradients(get_contract("score"), {"q": np.array([1.0, 2.0]), "k": np.array([3.0, 4.0])}, 2.0)
        >>> g["q"].tolist(), g["k"].tolist()
        ([6.0, 8.0], [2.0, 4.0])
    """
    return _family(contract).gradients(contract, args, d_out)


def contract_gradient_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    """``(n, {parameter: M})``: the error scale of each gradient entry.

    ``M`` is the gradient's computation on absolute values, every difference made a sum (the
    softmax Jacobian's ``dP − D`` becomes ``|dP| + |D|``), each softmax weight carried with its own
    rounding error ``P ⊙ (1 + |s| + |max s|)``, and for attention the scores' own error
    ``d_k · Σ|q_i k_i| · scale`` on top; ``n`` is the longest sum's length. A backward-stable
    implementation's error is at most about ``factor · n · u · M`` per entry. The keyword
    contracts (``sdpa``, ``kernel_attention``, ``flash_attn``):
    :func:`attnscore.maths.keyword_gradients.keyword_gradient_scales`.
    """
    return _family(contract).gradient_scales(contract, args, d_out)


def golden_backward(
    contract: Contract, args: Args, d_out: Any
) -> tuple[dict[str, np.ndarray], int, dict[str, np.ndarray]]:
    """``(gradients, n, scales)``: :func:`contract_gradients` and :func:`contract_gradient_scales`
    of one backward call, its family asked once.

    Raises:
        ValueError: a contract with no closed form here (none of the bundled ones).
    """
    family = _family(contract)
    gradients = family.gradients(contract, args, d_out)
    n, scales = family.gradient_scales(contract, args, d_out)
    return gradients, n, scales


def _family(contract: Contract) -> Family:
    """The contract's family module; a contract of no known family has no closed-form gradient."""
    try:
        return family_of(contract)
    except ValueError:
        raise ValueError(
            f"contract {contract.name!r}: no closed-form gradient (family {str(contract.family)!r})"
        ) from None


def keyword_attention_options(contract: Contract, args: Args) -> AttentionOptions:
    """The :func:`attnscore.maths.golden_variants.general_attention_parts` options of a configured
    keyword contract (``sdpa``: ``attn_mask``, ``is_causal`` top-left, ``scale``; ``kernel_attention``:
    ``is_causal`` bottom-right, ``scale``, ``softcap``, ``alibi_slopes``; ``flash_attn``: ``causal``
    bottom-right, ``window_size``, ``softmax_scale``; key padding: ``key_lengths``, ``scale``), its
    arguments taken from ``args``: its family's ``attention_options``.

    Raises:
        ValueError: a contract whose family is not a variant of general attention with keywords
            (:data:`attnscore.maths.family.KEYWORD_FAMILIES`).
    """
    options = _family(contract).attention_options(contract, args)
    if options is None:
        raise ValueError(f"contract {contract.name!r}: not a keyword contract (family {str(contract.family)!r})")
    return options
