"""What one call must return: the one question a case asks of ``maths/``.

:func:`expect` answers, for a contract, a call's arguments as the implementation receives them, the
tested dtype and the tolerance: the float64 golden value, the allowed error of every entry, and for
a backward call the golden gradients and their allowed errors (:class:`Expectation`). The grader's
cases (:mod:`attnscore.check.cases`) and the spec loader's rule that a tolerance must be able to
fail a trivial answer (:mod:`attnscore.spec.tolerances`) both ask it, so that what a spec is
checked against when it is loaded is what its calls are graded against.

The ``ratio`` tolerance compares with the reference's own error in the tested dtype. Grading
measures it (``reference="measured"``: the torch reference run in that dtype on the CPU); the
loader cannot (a property draws other inputs than a worked example's, and loading a spec imports
no torch), so it asks for the a-priori bound of that error (``reference="a_priori"``: the
``dot_bound`` with the ratio's factor, which is also the rule's floor: :func:`ratio_floor`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from attnscore.boundary.calls import to_torch
from attnscore.boundary.dtypes import LOW_PRECISION
from attnscore.boundary.lazy_torch import torch
from attnscore.maths import golden_gradients
from attnscore.maths.contract import Contract
from attnscore.maths.tolerance import ErrorTerms, Tolerance, allowed_error, ratio_floor

__all__ = ["Expectation", "OwnError", "expect"]

OwnError = Literal["measured", "a_priori"]
"""How the ``ratio`` tolerance learns the reference's own error: run it, or bound it (see the module)."""


@dataclass(frozen=True)
class Expectation:
    """What one call must return, and how far it may be off.

    Attributes:
        golden: the float64 golden value, the result's shape.
        allowed: the allowed absolute error of every entry of ``golden`` (float64, same shape).
        gradients: for a backward call, each differentiable parameter's float64 golden gradient
            (by the contract's parameter names, each the parameter's shape); empty otherwise.
        gradients_allowed: the allowed absolute error of every entry of each gradient (same keys
            and shapes as ``gradients``).
    """

    golden: np.ndarray
    allowed: np.ndarray
    gradients: dict[str, np.ndarray] = field(default_factory=dict)
    gradients_allowed: dict[str, np.ndarray] = field(default_factory=dict)


def expect(
    contract: Contract,
    args: Mapping[str, np.ndarray],
    dtype: str,
    tolerance: Tolerance,
    *,
    upstream: np.ndarray | None = None,
    reference: OwnError = "measured",
) -> Expectation:
    """The golden value and allowed error of one call (and of its gradients, given ``upstream``).

    Args:
        contract: the (configured) contract.
        args: the call's arguments by the contract's parameter names, as the implementation
            receives them (cast to ``dtype``; masks bool, integer parameters int32).
        dtype: the tested dtype (``"float32"``, ...): it sets ``u``, the ``close`` defaults and, in
            float16/bfloat16, the contract's low-precision budget
            (:meth:`attnscore.maths.contract.Contract.low_precision_terms`).
        tolerance: the spec's (or the worked example's) tolerance.
        upstream: the upstream gradient ``dO`` (the output's shape, cast to ``dtype``) of a
            backward call, or None for a forward call only.
        reference: how the ``ratio`` mode learns the reference's own error (:data:`OwnError`);
            ``"a_priori"`` needs no torch. Ignored for the other modes, except that gradients in
            float16/bfloat16 always measure the reference's (``gradient_allowed``'s rule).

    Returns:
        An :class:`Expectation`; non-finite golden entries keep their value (NaN and infinities are
        compared by placement), their allowed error is whatever the bound gives there.

    Raises:
        ValueError: ``upstream`` for a contract without closed-form gradients.

    Example:
        >>> from attnscore.maths.contracts import get_contract
        >>> args = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])}
        >>> e = expect(get_contract("scores"), args, "float32", Tolerance())
        >>> e.golden.tolist(), (e.allowed / 2**-24).round(6).tolist()
        ([1.0, 0.0, 0.7], [5.0, 0.0, 3.5])
    """
    with np.errstate(all="ignore"):
        golden = contract.golden(args)
        d_k, scale = contract.error_scale(args)
        operands = contract.operand_sums(args)
        ratio = tolerance.mode == "ratio"
        # the ratio rule's floor, and the loader's bound of the reference's own error: ``factor``
        # roundings of each term (ratio_floor); any other mode is its own bound
        bound = ratio_floor(tolerance) if ratio else tolerance
        allowed = allowed_error(bound, golden, dtype, d_k, scale, operands, _terms(contract, args, dtype, bound.factor))
        if ratio and reference == "measured":
            measured = _reference_output(contract, args, dtype)
            allowed = np.maximum(tolerance.ratio_allowed(golden, measured, dtype), allowed)
        if upstream is None:
            return Expectation(golden, allowed)
        gradients = golden_gradients.contract_gradients(contract, args, upstream)
        n, scales = golden_gradients.contract_gradient_scales(contract, args, upstream)
        own = _reference_gradients(contract, args, upstream, dtype) if dtype in LOW_PRECISION else {}
        gradients_allowed = {
            name: golden_gradients.gradient_allowed(tolerance, g, scales[name], n, dtype, own.get(name))
            for name, g in gradients.items()
        }
    return Expectation(golden, allowed, gradients, gradients_allowed)


def _terms(contract: Contract, args: Mapping[str, np.ndarray], dtype: str, factor: float) -> ErrorTerms | None:
    """The contract's float16/bfloat16 budget for a bound with ``factor``; None in float32/float64."""
    return contract.low_precision_terms(args, dtype, factor) if dtype in LOW_PRECISION else None


def _reference_output(contract: Contract, args: Mapping[str, np.ndarray], dtype: str) -> np.ndarray:
    """The reference run in ``dtype`` on the CPU, as float64 (the ``ratio`` mode's own error)."""
    out = contract.reference(*[to_torch(a, dtype) for a in args.values()])
    return out.detach().to(torch.float64).numpy()


def _reference_gradients(
    contract: Contract, args: Mapping[str, np.ndarray], upstream: np.ndarray, dtype: str
) -> dict[str, np.ndarray]:
    """torch autograd of the reference run in ``dtype`` on the CPU, float64, by parameter name."""
    names = golden_gradients.differentiable_parameters(contract)
    tensors = [to_torch(a, dtype) for a in args.values()]
    for name, t in zip(args, tensors, strict=True):
        if name in names:
            t.requires_grad_(True)
    out = contract.reference(*tensors)
    out.backward(to_torch(upstream, dtype))
    return {
        name: (t.grad if t.grad is not None else torch.zeros_like(t)).detach().to(torch.float64).numpy()
        for name, t in zip(args, tensors, strict=True)
        if name in names
    }
