"""The FlashAttention-2 reference as a ``torch.autograd.Function`` (its family:
:mod:`attnscore.maths.families.flash_attention_2`).

Its own module because defining a ``torch.autograd.Function`` subclass imports torch, which loading
a spec does not need (:mod:`attnscore.boundary.lazy_torch`).
"""

from __future__ import annotations

# ruff: noqa: E741  (O and L: the paper's names for the output and the logsumexp)
from typing import Any

import torch

from attnscore.maths.unbroadcast import sum_to_shape

__all__ = ["FlashReference"]


class FlashReference(torch.autograd.Function):
    """The reference as the assignment asks for it: a ``torch.autograd.Function`` whose forward
    saves ``(Q, K, V, O, L)`` (``L`` at index 4) and whose backward is FlashAttention-2's
    (Algorithm 2, untiled): ``P = exp(S − L)``, ``dV = Pᵀ dO``, ``dP = dO Vᵀ``, ``D = rowsum(dO ⊙ O)``,
    ``dS = P ⊙ (dP − D)``, ``dQ = dS K / √d``, ``dK = dSᵀ Q / √d``.

    >>> Q = torch.tensor([[1.0], [1.0]], requires_grad=True)
    >>> O = FlashReference.apply(Q, torch.zeros(2, 1), torch.tensor([[3.0], [5.0]]), True)
    >>> O.detach().tolist(), O.grad_fn.saved_tensors[4].tolist()[0]
    ([[3.0], [4.0]], 0.0)
    """

    @staticmethod
    def forward(ctx: Any, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
        scale = Q.shape[-1] ** -0.5
        S = (Q @ K.transpose(-2, -1)) * scale  # (..., n_q, d) @ (..., d, n_k) -> (..., n_q, n_k)
        if is_causal:
            keep = torch.ones(S.shape[-2:], dtype=torch.bool, device=S.device).tril()
            S = S.masked_fill(~keep, float("-inf"))
        L = torch.logsumexp(S, dim=-1)  # (..., n_q)
        O = torch.softmax(S, dim=-1) @ V  # (..., n_q, d); exp(S - L) would carry L's rounding in low precision
        ctx.save_for_backward(Q, K, V, O, L)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx: Any, dO: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        Q, K, V, O, L = ctx.saved_tensors
        scale = Q.shape[-1] ** -0.5
        S = (Q @ K.transpose(-2, -1)) * scale
        if ctx.is_causal:
            keep = torch.ones(S.shape[-2:], dtype=torch.bool, device=S.device).tril()
            S = S.masked_fill(~keep, float("-inf"))
        P = torch.exp(S - L[..., None])  # (..., n_q, n_k)
        dV = P.transpose(-2, -1) @ dO
        dP = dO @ V.transpose(-2, -1)
        D = (dO * O).sum(dim=-1, keepdim=True)  # (..., n_q, 1)
        dS = P * (dP - D)
        return (
            sum_to_shape(dS @ K * scale, Q.shape),
            sum_to_shape(dS.transpose(-2, -1) @ Q * scale, K.shape),
            sum_to_shape(dV, V.shape),
            None,
        )
