"""The instructor's own reference for softmax_own_reference.yaml: softmax over one dim, with the
known mistakes students make and a property of its own (attnscore.instructor).

Trusted code: attnscore imports it in the grading process only; no student's worker ever sees it.
"""

import torch

from attnscore import instructor


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Softmax of x over dim, stable for large logits: exp(x - max) / sum(exp(x - max))."""
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)


@instructor.mistake(
    "no_max_subtraction",
    feedback="exp of a large score overflows to inf, and inf/inf is NaN: subtract the max over dim first "
    "(x - x.amax(dim, keepdim=True)); softmax does not change when every score moves by the same amount",
)
def softmax_without_max(x: torch.Tensor, dim: int) -> torch.Tensor:
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


@instructor.mistake(
    "softmax_over_first_dim",
    feedback="the weights are normalised over the first dim instead of dim: pass dim to the max and the sum "
    "(x.amax(dim=dim, keepdim=True), e.sum(dim=dim, keepdim=True))",
)
def softmax_over_first_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    e = torch.exp(x - x.amax(dim=0, keepdim=True))
    return e / e.sum(dim=0, keepdim=True)


@instructor.property("shift_invariant", statement="Adding 3 to every score leaves the softmax unchanged.")
def shift_invariant(inputs, call):
    # call() gives the graded function's output as float64; the tolerance fits every tested dtype (bfloat16 too)
    x = inputs["x"]
    plain, shifted = call(x), call(x + 3.0)
    if not torch.allclose(plain, shifted, rtol=2e-2, atol=1e-2, equal_nan=True):
        worst = float((plain - shifted).abs().nan_to_num(nan=float("inf")).max())
        return f"softmax(x + 3) differs from softmax(x) by up to {worst:.3g}; only differences of scores matter"
    return None
