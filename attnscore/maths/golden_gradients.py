"""Golden gradients: the backward pass of every contract in float64 numpy, and the allowed error of each.

:func:`contract_gradients` and :func:`contract_gradient_scales` answer for any contract by asking
its family's module (:mod:`attnscore.maths.families`: the closed forms of
:mod:`attnscore.maths.gradient_formulas` and :mod:`attnscore.maths.keyword_gradients` bound to the
family's options); :func:`gradient_allowed` turns a scale into the allowed error of each entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from attnscore.boundary import gradients as boundary_gradients
from attnscore.boundary.dtypes import LOW_PRECISION, SMALLEST_SUBNORMAL, UNIT_ROUNDOFF
from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.contract import Contract
from attnscore.maths.families.base import Family
from attnscore.maths.families.registry import family_of
from attnscore.maths.gradient_formulas import cleaned
from attnscore.maths.tolerance import Tolerance, allowed_error

__all__ = [
    "NOT_DIFFERENTIATED",
    "differentiable_parameters",
    "contract_gradients",
    "contract_gradient_scales",
    "gradient_allowed",
    "keyword_attention_options",
]

Args = Mapping[str, np.ndarray]


NOT_DIFFERENTIATED = boundary_gradients.NOT_DIFFERENTIATED
"""Float parameters whose gradient is never asked for (a mask, the ALiBi slopes): the boundary's own
set, so the grader never asks for what the worker does not differentiate."""


def differentiable_parameters(contract: Contract) -> tuple[str, ...]:
    """The contract's parameters a gradient is asked for, in parameter order: all but its bool
    masks and :data:`NOT_DIFFERENTIATED` (a float ``attn_mask``, ``alibi_slopes``).

    >>> from attnscore.maths.contracts import get_contract
    >>> differentiable_parameters(get_contract("kernel_attention"))
    ('query', 'key', 'value')
    """
    skipped = contract.bool_parameters | contract.int_parameters | NOT_DIFFERENTIATED  # masks, lengths, offsets
    return tuple(n for n in contract.parameter_names if n not in skipped)


def contract_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    """The float64 gradients of ``contract``'s output with respect to each differentiable parameter.

    Args:
        contract: a contract of :data:`attnscore.maths.contracts.CONTRACTS` (keyed by its own
            parameter names, not a spec's renaming).
        args: the call's arguments (already cast to the tested dtype).
        d_out: the upstream gradient, of the output's shape (``()`` for ``score``).

    Returns:
        ``{parameter: gradient}`` for :func:`differentiable_parameters`, each of its argument's shape.

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


def gradient_allowed(
    tol: Tolerance,
    golden_grad: np.ndarray,
    scale: np.ndarray,
    n: int,
    dtype: str,
    reference_grad: np.ndarray | None = None,
) -> np.ndarray:
    """Per-entry allowed absolute error of one gradient, same shape as ``golden_grad`` (float64).

    Args:
        tol: the spec's tolerance.
        golden_grad: the float64 gradient (:func:`contract_gradients`).
        scale, n: its error scale ``M`` and sum length (:func:`contract_gradient_scales`).
        dtype: the tested dtype.
        reference_grad: for float16/bfloat16, the reference's own gradient computed in ``dtype``
            (torch autograd of the reference); required there.

    Rules: ``close`` is the dtype's ``close`` rule on the gradient; otherwise (``dot_bound``,
    ``exact``, ``ratio`` in float32/float64) ``factor · n · u · M + u·|g| + (n + 1)`` subnormals,
    with the spec's factor (2 for ``exact``: a gradient is rarely exact where the forward is). In
    float16/bfloat16 the ratio rule, as forward (FlashAttention's tests): at most ``factor`` (the
    spec's for ``ratio``, else 2) times the reference's own largest error in that dtype, with the
    dtype's ``close`` atol, one ulp of each entry and one low-precision rounding of each term summed in
    float32 (``u·M + n·u_fp32·M``) as floors.

    Raises:
        ValueError: a float16/bfloat16 dtype without ``reference_grad``.

    Example (float32, a gradient entry of 1 with magnitude 1 over 2 terms, factor 2):
        >>> allowed = gradient_allowed(Tolerance(), np.array([1.0]), np.array([1.0]), 2, "float32")
        >>> float(allowed[0] / 2**-24).__round__(6)
        5.0
    """
    g = np.nan_to_num(np.asarray(golden_grad, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    M = cleaned(scale)
    u = UNIT_ROUNDOFF[dtype]
    if tol.mode == "close":
        return allowed_error(tol, g, dtype, n, M)
    if dtype in LOW_PRECISION:
        if reference_grad is None:
            raise ValueError(f"gradient_allowed: {dtype} needs the reference's own {dtype} gradient (ratio rule)")
        factor = tol.factor if tol.mode == "ratio" else 2.0
        ratio = Tolerance("ratio", factor=factor).ratio_allowed(g, reference_grad, dtype)
        floor = u * M + max(n, 1) * UNIT_ROUNDOFF["float32"] * M + u * np.abs(g)
        return np.maximum(ratio, floor + (n + 1) * SMALLEST_SUBNORMAL[dtype])
    factor = 2.0 if tol.mode == "exact" else tol.factor
    return factor * max(n, 1) * u * M + u * np.abs(g) + (n + 1) * SMALLEST_SUBNORMAL[dtype]
