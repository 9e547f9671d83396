"""The instructor's reference for question softmax (CS336 assignment 1), its own property and the
mistakes to name.

Trusted instructor code: the grader imports it in its own process, never in a student's worker.
softmax(in_features, dim) normalises `dim` of a tensor of any shape; the max along `dim` is
subtracted first, so logits around ±1000 give finite weights. The decorators of
attnscore.instructor register a property and two known mistakes; outside a spec load they register
nothing, so this file also imports as a plain module."""

import torch
from torch import Tensor

from attnscore import instructor


def softmax(in_features: Tensor, dim: int) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `dim`; same shape, dtype and device as `in_features`."""
    shifted = in_features - in_features.amax(dim=dim, keepdim=True)  # the largest entry of each row is 0
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)


def softmax_from_logsumexp(in_features: Tensor, dim: int) -> Tensor:
    """The same weights another way, exp(x - logsumexp(x)): the spec's reference_check."""
    return torch.exp(in_features - torch.logsumexp(in_features, dim=dim, keepdim=True))


@instructor.property(
    "shift_by_100_changes_nothing",
    statement="Adding 100 to every logit leaves the weights unchanged (the course's own overflow test).",
    max_value=5.0,
)
def shift_by_100_changes_nothing(inputs, call):
    x = torch.round(inputs["in_features"] * 2) / 2  # on a grid of 1/2: x and x + 100 exact even in bfloat16
    plain, shifted = call(x), call(x + 100)
    if not torch.allclose(shifted, plain, rtol=1e-4, atol=1e-6):  # NaN is never close
        worst = (shifted - plain).abs().nan_to_num(nan=float("inf")).max().item()
        return (
            f"softmax(x + 100) differs from softmax(x) (largest difference {worst:.3g}): exp(x + 100) overflows "
            "unless the max along dim is subtracted before exp"
        )
    return None


@instructor.mistake(
    "no_max_subtraction",
    feedback=(
        "your softmax computes exp(x) / sum(exp(x)) without subtracting the max along dim first: exp(1000) "
        "is inf and exp(-1000) is 0, so large or very negative logits give NaN. Subtract "
        "x.amax(dim=dim, keepdim=True) before exp; the weights do not change."
    ),
)
def no_max_subtraction(in_features: Tensor, dim: int) -> Tensor:
    exps = torch.exp(in_features)
    return exps / exps.sum(dim=dim, keepdim=True)


@instructor.mistake(
    "normalised_over_first_axis",
    feedback=(
        "your weights are normalised over the first axis, not over dim: use the dim argument in every "
        "reduction (amax and sum along dim, keepdim=True)."
    ),
)
def normalised_over_first_axis(in_features: Tensor, dim: int) -> Tensor:
    return softmax(in_features, 0)
