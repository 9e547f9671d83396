"""A gradient summed back to its input's shape over the batch dims that were broadcast (autograd's
rule), for the hand-written backward passes (:mod:`attnscore.maths.flash_reference`, the
FlashAttention-2 mistakes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["sum_to_shape"]


def sum_to_shape(g: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """``g`` summed over the batch dims that were broadcast to reach it (autograd's rule).

    >>> import torch
    >>> sum_to_shape(torch.ones(2, 3, 4), torch.Size([1, 3, 4])).shape
    torch.Size([1, 3, 4])
    """
    while g.dim() > len(shape):
        g = g.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdim=True)
    return g
