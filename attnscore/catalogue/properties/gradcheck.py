"""``gradcheck``: the submission's backward against finite differences of its own forward, in float64.

This is the check ``torch.autograd.gradcheck(f, inputs, fast_mode=True)`` makes, done by the
grader from the submission's own outputs, so that it runs wherever the submission runs (the
sandboxed worker included) and needs no golden gradient: for each differentiable input ``x`` (never
a mask or the ALiBi slopes, :attr:`attnscore.maths.contract.Contract.differentiable_parameters`) a random
direction ``u`` of ``x``'s shape is drawn, and the directional derivative of ``⟨dO, f⟩`` along it
is computed twice:

- analytically, from the backward call: ``⟨dx, u⟩`` with ``dx`` the gradient the submission's
  backward gave ``x`` for the upstream gradient ``dO``;
- numerically, by central differences of two forward calls: ``⟨dO, f(x + h·u) − f(x − h·u)⟩ / 2h``
  with ``h = 1e-6`` (gradcheck's ``eps``).

They must agree within gradcheck's default ``atol = 1e-5`` and ``rtol = 1e-3`` (the truncation error
of a central difference is ``O(h²)``, its rounding error in float64 ``O(u/h) ≈ 1e-10``). Every call is
made in float64, whatever the tested dtype, on small inputs (each size at most 3): ``2·k + 1``
calls per example for ``k`` differentiable inputs; an output entry equal in both forward calls (a masked
``-inf`` score) contributes nothing. A failure names the input whose gradient is wrong
and both numbers.

Source: PyTorch, ``torch.autograd.gradcheck`` (``fast_mode``: ``vᵀ J u`` against central
differences, eps 1e-6, atol 1e-5, rtol 1e-3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.gradients import WithGradients
from attnscore.catalogue.families import differentiable
from attnscore.catalogue.properties.gradients import gradient_arrival_failure
from attnscore.catalogue.properties.registry import Args, CheckContext, Property, register
from attnscore.maths.contracts import Contract
from attnscore.maths.display import format_number
from attnscore.maths.lazy_hypothesis import composite, hnp, st
from attnscore.maths.strategies import legend_sizes, random_args

__all__ = ["GradcheckExample", "EPS", "ATOL", "RTOL", "directional_failure"]

EPS = 1e-6
"""The finite-difference step ``h`` (``torch.autograd.gradcheck``'s ``eps``)."""
ATOL = 1e-5
"""The absolute tolerance (gradcheck's ``atol``)."""
RTOL = 1e-3
"""The relative tolerance (gradcheck's ``rtol``)."""


@dataclass(frozen=True)
class GradcheckExample:
    """One drawn example: the arguments, a direction per differentiable input, the upstream gradient.

    Attributes:
        args: the call's arguments by the contract's parameter names (float64; masks bool).
        directions: ``{input: u}``, each of its input's shape, entries in ``[-1, 1]``.
        d_out: ``dO``, the output's shape.
    """

    args: Args
    directions: dict[str, np.ndarray]
    d_out: np.ndarray


def _unit(max_value: float) -> st.SearchStrategy[float]:
    return st.floats(-max_value, max_value, allow_nan=False, allow_subnormal=False, width=64)


@composite
def _examples(draw: Callable[..., Any], c: Contract, max_value: float) -> GradcheckExample:
    sizes = draw(legend_sizes(c, max_size=3))
    args = draw(random_args(c, max_value, sizes=sizes))
    if "mask" in args:  # most rows keep a key (a fully masked row's output is the constant 0)
        mask = args["mask"].copy()
        n_q, n_k = mask.shape[-2:]
        mask[..., np.arange(n_q), np.arange(n_q) % n_k] = True
        args = {**args, "mask": mask}
    args = {n: (np.asarray(a, dtype=np.float64) if np.asarray(a).dtype != np.bool_ else a) for n, a in args.items()}
    directions = {
        n: draw(hnp.arrays(np.float64, np.shape(args[n]), elements=_unit(1.0))) for n in c.differentiable_parameters
    }
    with np.errstate(all="ignore"):
        shape = np.shape(c.golden(args))
    d_out = draw(hnp.arrays(np.float64, shape, elements=_unit(1.0)))
    return GradcheckExample(args, directions, d_out)


def _calls(c: Contract, ex: GradcheckExample) -> list[Args]:
    """``x + h·u`` and ``x − h·u`` for each differentiable input in turn, then the backward call at ``x``."""
    calls: list[Args] = []
    for name, u in ex.directions.items():
        for sign in (1.0, -1.0):
            calls.append({**ex.args, name: ex.args[name] + sign * EPS * u})
    return [*calls, dict(ex.args)]


def directional_failure(name: str, analytical: float, numerical: float) -> str | None:
    """What is wrong with input ``name``'s gradient along its direction, or None when both agree.

    >>> directional_failure("K", 0.5, 0.5000001) is None
    True
    >>> directional_failure("K", 1.0, 0.5)  # doctest: +NORMALIZE_WHITESPACE
    'gradcheck: the gradient with respect to K disagrees with finite differences of the forward:
    along a random direction u, <dK, u> = 1, but <dO, f(K + h·u) - f(K - h·u)> / 2h = 0.5
    (h = 1e-06, float64; allowed 1e-05 + 0.001·|numerical|)'
    """
    if np.isfinite(analytical) and abs(analytical - numerical) <= ATOL + RTOL * abs(numerical):
        return None
    return (
        f"gradcheck: the gradient with respect to {name} disagrees with finite differences of the forward: "
        f"along a random direction u, <d{name}, u> = {format_number(analytical, 'float64')}, but "
        f"<dO, f({name} + h·u) - f({name} - h·u)> / 2h = {format_number(numerical, 'float64')} "
        f"(h = {EPS:g}, float64; allowed {ATOL:g} + {RTOL:g}·|numerical|)"
    )


def _check(ctx: CheckContext) -> str | None:
    out = ctx.outputs[-1]
    if not isinstance(out, WithGradients):
        return "no gradients came back from this call (the runner did not run the backward pass)"
    ex: GradcheckExample = ctx.example
    spec_names = dict(zip(ctx.contract.parameter_names, ctx.args[-1], strict=True))
    dO = np.asarray(ex.d_out, dtype=np.float64)
    for k, (param, u) in enumerate(ex.directions.items()):
        name = spec_names[param]
        grad = out.gradients.get(name)
        unusable = gradient_arrival_failure(name, grad, np.shape(u), missing=grad is None)
        if unusable:
            return f"gradcheck: {unusable}"
        plus, minus = ctx.values(2 * k), ctx.values(2 * k + 1)
        if np.shape(plus) != np.shape(dO) or np.shape(minus) != np.shape(dO):
            return None  # a forward of the wrong shape is the other properties' concern
        with np.errstate(all="ignore"):
            diff = np.where(plus == minus, 0.0, plus - minus)  # a masked -inf score stays -inf: no change
            numerical = float(np.sum(dO * diff) / (2.0 * EPS))
            analytical = float(np.sum(np.asarray(grad, dtype=np.float64) * u))
        problem = directional_failure(name, analytical, numerical)
        if problem:
            return problem
    return None


register(
    Property(
        name="gradcheck",
        summary=(
            "torch.autograd.gradcheck's fast mode in float64 on small inputs: along a random direction of each "
            "float input, the backward's gradient agrees with central finite differences of the forward."
        ),
        strategy=_examples,
        applies=differentiable,
        calls=_calls,
        upstream=lambda c, ex: ex.d_out,
        check=_check,
        golden=False,
        default_max_value=2.0,
        tags=("gradients",),
        dtype="float64",
    )
)
