"""The instructor's reference for question softmax (CS336 assignment 1), and the mistakes to name.

Trusted instructor code: the grader imports it in its own process, never in the student's worker.
softmax(in_features, dim) normalises `dim` of a tensor of any shape; the max along `dim` is
subtracted first, so logits around ±1000 give finite weights."""

import torch
from torch import Tensor


def softmax(in_features: Tensor, dim: int) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `dim`; same shape, dtype and device as `in_features`."""
    shifted = in_features - in_features.amax(dim=dim, keepdim=True)  # the largest entry of each row is 0
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)


def no_max_subtraction(in_features: Tensor, dim: int) -> Tensor:
    """exp(x) / sum(exp(x)): exp(1000) is inf (inf/inf = NaN) and exp(-1000) is 0 (0/0 = NaN)."""
    exps = torch.exp(in_features)
    return exps / exps.sum(dim=dim, keepdim=True)


def normalised_over_first_axis(in_features: Tensor, dim: int) -> Tensor:
    """The `dim` argument ignored: the softmax runs over axis 0 (the batch), not the one asked."""
    return softmax(in_features, 0)
