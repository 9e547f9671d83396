"""Mistakes of precision, side effects and shortcuts: half or float32 work, float64 results, placeholders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import every, masked_scores
from attnscore.catalogue.mistakes.registry import add
from attnscore.catalogue.mistakes.shared import correct_result
from attnscore.maths.contract import Contract

# ---------------------------------------------------------------------------------------------
# precision, side effects, shortcuts


def _computed_in(dtype: str) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn``: the reference on the float arguments cast to ``dtype`` (``"float16"``), its
    result cast back to the first float argument's dtype (the other arguments as they are)."""

    def wrong(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        given = next(a.dtype for a in args if a.dtype.is_floating_point)
        out = c.reference(*[a.to(getattr(torch, dtype)) if a.dtype.is_floating_point else a for a in args])
        return out.to(given)

    return wrong


add(
    "computed_in_float16",
    "computed in float16",
    lambda c: not masked_scores(c),
    "your result has float16 rounding errors (or overflow): compute in the inputs' dtype, do not cast to half",
    not_dtypes=("float16",),
)(_computed_in("float16"))


add(
    "computed_in_float32",
    "float64 inputs computed in float32",
    # masked_scores only copies its inputs and its generated inputs are float32 values, so a float32
    # detour leaves no trace there (exact comparison): not a mistake its cases can show
    lambda c: not masked_scores(c),
    "your result has float32 rounding errors although the inputs are float64: part of your computation runs in "
    "float32 (e.g. .float(), softmax(x.float()).type_as(x), a float32 buffer or numpy array); compute in the "
    "inputs' dtype",
    computes_in="float32",
    dtypes=("float64",),
)(_computed_in("float32"))


@add(
    "returned_float64",
    "a float64 result for float32 inputs",
    every,
    "your result is float64 although the inputs are not (e.g. torch.tensor(a_numpy_result), .double() or a "
    "float64 constant): the values are right, but the result must keep the inputs' dtype; compute in torch in "
    "the inputs' dtype, or convert back with .to(<first input>.dtype)",
)
def _returned_float64(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    # Right values, wrong dtype: the value diagnosis never matches it (it equals the golden value);
    # the dtype_device_follow_inputs property names it when the output really is float64.
    return correct_result(c, *[a.double() if a.dtype.is_floating_point else a for a in args])


@add(
    "inputs_mutated",
    "inputs changed in place",
    every,
    "your function changes its inputs in place (e.g. Q.mul_(...), S.masked_fill_(...)); compute into new tensors",
)
def _mutated(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    out = correct_result(c, *args)
    args[0].add_(1.0)
    return out


@add(
    "hard_coded_examples",
    "hard-coded worked examples",
    every,
    "your function returns a worked example's answer for other inputs: it looks hard-coded; compute the result "
    "from the inputs",
)
def _hard_coded(c: Contract, spec: Any, *args: torch.Tensor) -> Any:
    examples = list(getattr(spec, "worked_examples", ()))
    for ex in examples:
        given = [a.detach().cpu().double().numpy() if a.dtype != torch.bool else a.cpu().numpy() for a in args]
        if all(
            g.shape == np.shape(v) and np.allclose(g, v, rtol=1e-3, atol=1e-3)
            for g, v in zip(given, ex.inputs.values(), strict=False)
        ):
            return torch.tensor(ex.expected, dtype=args[0].dtype)
    if examples:
        return torch.tensor(examples[0].expected, dtype=args[0].dtype)
    return torch.zeros(())


@add("all_zeros", "all zeros", every, "your result is all zeros: compute the values instead of returning a placeholder")
def _zeros(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(correct_result(c, *args))


def _shape_of_answer(c: Contract, *args: torch.Tensor) -> torch.Tensor:
    """The right answer, for its shape, dtype and device only (a null implementation uses nothing else)."""
    with torch.no_grad():
        return correct_result(c, *[a.detach() for a in args])


def _null_zeros(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    """A fresh zero tensor of the answer's shape and dtype: no graph, no gradient."""
    return torch.zeros_like(_shape_of_answer(c, *args))


def _null_input(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    """The first input handed back as it is (the output shares its memory)."""
    return args[0]


def _null_function(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    """A ``torch.autograd.Function`` with no real forward or backward: zeros of the answer's shape,
    zero gradients for every float input, nothing saved."""
    answer = _shape_of_answer(c, *args)

    class Placeholder(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *given: torch.Tensor) -> torch.Tensor:
            ctx.floats = [a.is_floating_point() for a in given]
            ctx.shapes = [a.shape for a in given]
            return torch.zeros_like(answer)

        @staticmethod
        def backward(ctx: Any, d_out: torch.Tensor) -> Any:
            return tuple(
                torch.zeros(shape, dtype=d_out.dtype, device=d_out.device) if floating else None
                for floating, shape in zip(ctx.floats, ctx.shapes, strict=True)
            )

    return Placeholder.apply(*args)


@add(
    "null_implementation",
    "computes nothing",
    every,
    "your function computes nothing from its inputs (a placeholder: zeros, an input handed back, 0 · sum(inputs) "
    "kept on the autograd graph, a Function whose forward and backward do no work): compute the result itself",
    forms=(_null_zeros, _null_input, _null_function),
    scores_zero=True,
)
def _null_zero_times_sum(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    """Zeros of the answer's shape kept on the graph as ``0 · sum(inputs)``: every gradient is zero,
    finite differences of the constant agree with it, and no masked entry gets a gradient."""
    zeros = torch.zeros_like(_shape_of_answer(c, *args))
    floats = [a for a in args if a.is_floating_point()]
    if not floats or not zeros.is_floating_point():
        return zeros
    total = torch.stack([a.sum().to(zeros.dtype) for a in floats]).sum()
    return zeros + 0 * total
