"""Golden gradients: the backward pass of every contract in float64 numpy, and the allowed error of each.

:func:`contract_gradients` and :func:`contract_gradient_scales` answer for any contract, from the
closed forms of :mod:`attnscore.maths.gradient_formulas` (the score functions, weights, attention)
and :mod:`attnscore.maths.keyword_gradients` (the keyword contracts, packed batches);
:func:`gradient_allowed` turns a scale into the allowed error of each entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from attnscore.boundary import gradients as boundary_gradients
from attnscore.boundary.dtypes import LOW_PRECISION, SMALLEST_SUBNORMAL, UNIT_ROUNDOFF
from attnscore.maths import golden
from attnscore.maths.contracts import Contract
from attnscore.maths.family import KEYWORD_FAMILIES, ContractFamily
from attnscore.maths.gradient_formulas import (
    additive,
    attention,
    bilinear,
    causal_attention,
    cleaned,
    dot_products,
    f64,
    keep_mask,
    masked,
    scaled_dot_products,
    softmax_weights,
    unbroadcast,
    weights_rounding,
)
from attnscore.maths.gradient_formulas import general_attention as general_attention  # re-exported
from attnscore.maths.keyword_gradients import keyword_attention_options as keyword_attention_options  # re-exported
from attnscore.maths.keyword_gradients import (
    keyword_gradient_scales,
    keyword_gradients,
    varlen_gradient_scales,
    varlen_gradients,
)
from attnscore.maths.tolerance import Tolerance, allowed_error

__all__ = [
    "NOT_DIFFERENTIATED",
    "differentiable_parameters",
    "contract_gradients",
    "contract_gradient_scales",
    "gradient_allowed",
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


def _alignment(contract: Contract) -> str:
    return "top_left" if contract.name.endswith("top_left") else "bottom_right"


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
    gradients = _GRADIENTS.get(contract.family)
    if gradients is None:
        raise ValueError(f"contract {contract.name!r}: no closed-form gradient (family {str(contract.family)!r})")
    return gradients[0](contract, args, d_out)


def _closed_form(args: Args, contract: Contract, d_out: Any) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The arguments as arrays by parameter name, and ``d_out`` in float64."""
    return {n: np.asarray(args[n]) for n in contract.parameter_names}, f64(d_out)


def _score_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    """The score functions: a view of Q Kᵀ (raw or scaled), bilinear or additive scores."""
    a, dO = _closed_form(args, contract, d_out)
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


def _mask_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    a, dO = _closed_form(args, contract, d_out)
    return {"S": masked(a["S"], a["mask"], dO)}


def _weights_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    a, dO = _closed_form(args, contract, d_out)
    return {"S": softmax_weights(a["S"], a["mask"], dO)}


def _attention_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    a, dO = _closed_form(args, contract, d_out)
    return dict(zip(("Q", "K", "V"), attention(a["Q"], a["K"], a["V"], a["mask"], dO), strict=True))


def _causal_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    a, dO = _closed_form(args, contract, d_out)
    grads = causal_attention(a["Q"], a["K"], a["V"], _alignment(contract), dO)
    return dict(zip(("Q", "K", "V"), grads, strict=True))


def _flash_function_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    a, dO = _closed_form(args, contract, d_out)
    return contract_gradients(_attention(), _flash_as_attention(contract, a), dO)


def contract_gradient_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    """``(n, {parameter: M})``: the error scale of each gradient entry.

    ``M`` is the gradient's computation on absolute values, every difference made a sum (the
    softmax Jacobian's ``dP − D`` becomes ``|dP| + |D|``), each softmax weight carried with its own
    rounding error ``P ⊙ (1 + |s| + |max s|)``, and for attention the scores' own error
    ``d_k · Σ|q_i k_i| · scale`` on top; ``n`` is the longest sum's length. A backward-stable
    implementation's error is at most about ``factor · n · u · M`` per entry. The keyword
    contracts (``sdpa``, ``kernel_attention``, ``flash_attn``): :func:`keyword_gradient_scales`.
    """
    gradients = _GRADIENTS.get(contract.family)
    if gradients is None:
        raise ValueError(f"contract {contract.name!r}: no closed-form gradient (family {str(contract.family)!r})")
    return gradients[1](contract, args, d_out)


def _absolute(args: Args, contract: Contract, d_out: Any) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The arguments with non-finite entries zeroed (bool masks as they are), and ``|d_out|``."""
    a = {
        n: cleaned(args[n]) if n not in contract.bool_parameters else np.asarray(args[n])
        for n in contract.parameter_names
    }
    return a, np.abs(cleaned(d_out))


def _score_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    a, dO = _absolute(args, contract, d_out)
    if contract.is_qk_view or "W" in a:
        absolute = {n: (np.abs(x) if n not in contract.bool_parameters else x) for n, x in a.items()}
        grads = contract_gradients(contract, absolute, dO)
        if contract.qk is not None:
            Q, K = contract.qk.to_qk(a)
            n = int(max(Q.shape[-2], K.shape[-2])) + 2
        else:
            n = int(np.shape(a["K"])[-2] + np.shape(a["Q"])[-2] + np.shape(a["W"])[0] + np.shape(a["W"])[1])
        return n, grads
    # additive: |dS||v| through |W|, with the tanh's own error
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


def _mask_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    return 1, {"S": np.zeros(np.shape(args["S"]))}


def _weights_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    a, dO = _absolute(args, contract, d_out)
    S = a["S"]
    keep = keep_mask(a["mask"], S.shape)
    A = weights_rounding(f64(args["S"]), keep)
    D = np.sum(dO * A, axis=-1, keepdims=True)
    return int(S.shape[-1]) + 2, {"S": unbroadcast(A * (dO + D), S.shape)}


def _attention_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    """Attention with a mask, or with a causal flag (its alignment's keep mask)."""
    a, dO = _absolute(args, contract, d_out)
    Q, K, V = (f64(args[n]) for n in ("Q", "K", "V"))
    n_q, n_k, d_k, d_v = Q.shape[-2], K.shape[-2], Q.shape[-1], V.shape[-1]
    causal = contract.family is ContractFamily.CAUSAL
    keep_arg = golden.causal_keep(n_q, n_k, _alignment(contract)) if causal else a["mask"]
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


def _flash_function_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    return contract_gradient_scales(_attention(), _flash_as_attention(contract, args), d_out)


def _attention() -> Contract:
    """The plain ``attention`` contract (imported at use: the contract table is built after this module)."""
    from attnscore.maths.contracts import get_contract

    return get_contract("attention")


def _flash_as_attention(contract: Contract, args: Args) -> dict[str, np.ndarray]:
    """A FlashAttention-2 call's arguments as plain ``attention``'s: its causal flag as a mask."""
    Q, K = np.asarray(args["Q"]), np.asarray(args["K"])
    n_q, n_k = Q.shape[-2], K.shape[-2]
    keep = golden.causal_keep(n_q, n_k, "top_left") if contract.option("is_causal") else np.ones((n_q, n_k), bool)
    return {"Q": Q, "K": K, "V": np.asarray(args["V"]), "mask": keep}


_Gradients = Callable[[Contract, Args, Any], dict[str, np.ndarray]]
_Scales = Callable[[Contract, Args, Any], tuple[int, dict[str, np.ndarray]]]

_GRADIENTS: dict[ContractFamily, tuple[_Gradients, _Scales]] = {
    ContractFamily.SCORES: (_score_gradients, _score_scales),
    ContractFamily.MASK: (_mask_gradients, _mask_scales),
    ContractFamily.WEIGHTS: (_weights_gradients, _weights_scales),
    ContractFamily.ATTENTION: (_attention_gradients, _attention_scales),
    ContractFamily.CAUSAL: (_causal_gradients, _attention_scales),
    ContractFamily.FLASH_ATTENTION_2: (_flash_function_gradients, _flash_function_scales),
    ContractFamily.FLASH_VARLEN: (varlen_gradients, varlen_gradient_scales),
    **{family: (keyword_gradients, keyword_gradient_scales) for family in KEYWORD_FAMILIES},
}
"""Each family's closed-form gradients and their error scales (one entry per family, no branching on it)."""


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
