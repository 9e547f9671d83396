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
``dot_bound`` with the ratio's factor, which is also the rule's floor). A backward call in
float16/bfloat16 always measures the reference's own gradients. The reference runs once per call
for both, and every allowed error is a rule of :mod:`attnscore.maths.tolerance`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from attnscore.boundary.calls import to_torch
from attnscore.boundary.dtypes import LOW_PRECISION
from attnscore.boundary.lazy_torch import torch
from attnscore.maths.contract import Contract
from attnscore.maths.golden_gradients import golden_backward
from attnscore.maths.tolerance import Tolerance, allowed_error, gradient_allowed

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
        gradients, n, scales = golden_backward(contract, args, upstream) if upstream is not None else ({}, 0, {})
        # The reference's own error in ``dtype``: one run of it on the CPU gives its output (the ratio
        # rule, measured) and, for a backward call in float16/bfloat16, its gradients by torch autograd.
        own_output, own_gradients = None, {}
        measure_output = tolerance.mode == "ratio" and reference == "measured"
        measure_gradients = upstream is not None and dtype in LOW_PRECISION
        if measure_output or measure_gradients:
            names = contract.differentiable_parameters if measure_gradients else ()
            tensors = [to_torch(a, dtype).requires_grad_(name in names) for name, a in args.items()]
            out = contract.reference(*tensors)
            if measure_gradients and upstream is not None:
                out.backward(to_torch(upstream, dtype))
            own_output = out.detach().to(torch.float64).numpy() if measure_output else None
            own_gradients = {
                name: (t.grad if t.grad is not None else torch.zeros_like(t)).detach().to(torch.float64).numpy()
                for name, t in zip(args, tensors, strict=True)
                if name in names
            }
        d_k, scale = contract.error_scale(args)
        terms = contract.low_precision_terms(args, dtype, tolerance.factor) if dtype in LOW_PRECISION else None
        allowed = allowed_error(tolerance, golden, dtype, d_k, scale, contract.operand_sums(args), terms, own_output)
        gradients_allowed = {
            name: gradient_allowed(tolerance, g, scales[name], n, dtype, own_gradients.get(name))
            for name, g in gradients.items()
        }
    return Expectation(golden, allowed, gradients, gradients_allowed)
