"""Eleven correct ``attention(Q, K, V, mask)`` implementations whose backward passes differ in style.

Each one is right forward and backward (the gradient properties give it full marks: see
``tests/sweeps/test_gradient_styles.py``); they are what students hand in for a FlashAttention-style
assignment, written the many ways such solutions are written: plain autograd, a tiled forward with
an online softmax and autograd's backward, ``torch.autograd.Function`` classes with a hand-written
backward (saving ``P``, or FlashAttention-2's logsumexp ``L`` and recomputing ``P = exp(S − L)``),
recomputation in backward, float32 accumulation for low-precision inputs, and the softmax written out.

Shapes: Q ``(..., n_q, d_k)``, K ``(..., n_k, d_k)``, V ``(..., n_k, d_v)``, mask bool (True = keep)
broadcasting to ``(..., n_q, n_k)``; a query whose keys are all masked gets the zero vector.
"""

from __future__ import annotations

# ruff: noqa: E741  (O and l are the paper's names: output, running sum)
import torch

__all__ = ["STYLES"]


def naive(Q, K, V, mask):
    """Plain autograd: masked_fill, softmax, masked weights (and fully masked rows) set to 0."""
    S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    P = torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask, P, torch.zeros_like(P)) @ V  # a NaN in a kept key still shows


def einsum_where(Q, K, V, mask):
    """einsum and torch.where: masked weights are exactly 0 without NaN."""
    S = torch.einsum("...id,...jd->...ij", Q, K) * Q.shape[-1] ** -0.5
    S = torch.where(mask, S, torch.full_like(S, float("-inf")))
    keep = mask.expand_as(S).any(dim=-1, keepdim=True)
    S = torch.where(keep, S, torch.zeros_like(S))  # a fully masked row: any finite scores
    P = torch.where(mask, torch.softmax(S, dim=-1), torch.zeros_like(S))
    return torch.einsum("...ij,...jd->...id", P, V)


def logsumexp_form(Q, K, V, mask):
    """P = exp(S − logsumexp(S)) (the form a FlashAttention backward recomputes)."""
    S = (Q @ K.transpose(-2, -1)) * (1.0 / Q.shape[-1] ** 0.5)
    S = S.masked_fill(~mask, float("-inf"))
    L = torch.logsumexp(S, dim=-1, keepdim=True)
    L = torch.where(torch.isneginf(L), torch.zeros_like(L), L)
    return torch.exp(S - L) @ V  # exp(-inf) = 0 at masked keys and fully masked rows


def _online(Q, K, V, mask, tile):
    """A tiled forward with the online softmax (running max m, sum l, output acc): (O, L)."""
    n_k = K.shape[-2]
    scale = Q.shape[-1] ** -0.5
    shape = torch.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,))
    m = torch.full(shape, float("-inf"), dtype=Q.dtype, device=Q.device)
    l = torch.zeros(shape, dtype=Q.dtype, device=Q.device)
    acc = torch.zeros((*shape, V.shape[-1]), dtype=Q.dtype, device=Q.device)
    for j0 in range(0, n_k, tile):
        S = (Q @ K[..., j0 : j0 + tile, :].transpose(-2, -1)) * scale
        S = S.masked_fill(~mask[..., j0 : j0 + tile], float("-inf"))
        m_new = torch.maximum(m, S.amax(dim=-1))
        safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        alpha = torch.exp(m - safe)  # rescale what was summed so far
        p = torch.exp(S - safe[..., None])
        l = alpha * l + p.sum(dim=-1)
        acc = alpha[..., None] * acc + p @ V[..., j0 : j0 + tile, :]
        m = m_new
    empty = l == 0  # no key kept (a NaN score keeps its NaN)
    O = torch.where(empty[..., None], torch.zeros_like(acc), acc / torch.where(empty, torch.ones_like(l), l)[..., None])
    L = torch.where(empty, torch.full_like(l, float("-inf")), m + torch.log(torch.where(empty, torch.ones_like(l), l)))
    return O, L


def tiled_autograd(Q, K, V, mask):
    """An online-softmax tiled forward (key tiles of 3) and autograd's backward through it."""
    return _online(Q, K, V, mask, 3)[0]


class SavedWeights(torch.autograd.Function):
    """Hand-written backward from the saved weights P."""

    @staticmethod
    def forward(ctx, Q, K, V, mask):
        scale = Q.shape[-1] ** -0.5
        P = torch.softmax((Q @ K.transpose(-2, -1) * scale).masked_fill(~mask, float("-inf")), -1)
        P = torch.where(mask, P, torch.zeros_like(P))
        ctx.save_for_backward(Q, K, V, P)
        ctx.scale = scale
        return P @ V

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, P = ctx.saved_tensors
        dV = _sum_to(P.transpose(-2, -1) @ dO, V.shape)
        dP = dO @ V.transpose(-2, -1)
        dS = P * (dP - (dP * P).sum(-1, keepdim=True))
        dQ = _sum_to(dS @ K * ctx.scale, Q.shape)
        dK = _sum_to(dS.transpose(-2, -1) @ Q * ctx.scale, K.shape)
        return dQ, dK, dV, None


def _sum_to(g, shape):
    """A gradient summed over the dims its input was broadcast along."""
    while g.dim() > len(shape):
        g = g.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdim=True)
    return g


class FlashAttention2(torch.autograd.Function):
    """FlashAttention-2: tiled forward saving O and the logsumexp L; backward recomputes P = exp(S − L)
    tile by tile with D = rowsum(dO ⊙ O). Query tiles of 3, key tiles of 2 (no size is a multiple)."""

    @staticmethod
    def forward(ctx, Q, K, V, mask):
        O, L = _online(Q, K, V, mask, 2)
        ctx.save_for_backward(Q, K, V, mask, O, L)
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, mask, O, L = ctx.saved_tensors
        scale = Q.shape[-1] ** -0.5
        D = (dO * O).sum(-1)  # (..., n_q)
        Lf = torch.where(torch.isfinite(L), L, torch.zeros_like(L))
        shape = torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
        dQ = torch.zeros((*shape, *Q.shape[-2:]), dtype=Q.dtype)
        dK = torch.zeros((*shape, *K.shape[-2:]), dtype=Q.dtype)
        dV = torch.zeros((*shape, *V.shape[-2:]), dtype=Q.dtype)
        n_q, n_k = Q.shape[-2], K.shape[-2]
        for i0 in range(0, n_q, 3):
            qi = Q[..., i0 : i0 + 3, :]
            for j0 in range(0, n_k, 2):
                S = (qi @ K[..., j0 : j0 + 2, :].transpose(-2, -1)) * scale
                keep = mask[..., i0 : i0 + 3, j0 : j0 + 2].expand(*S.shape)
                P = torch.where(
                    keep & torch.isfinite(L[..., i0 : i0 + 3, None]),
                    torch.exp(S - Lf[..., i0 : i0 + 3, None]),
                    torch.zeros_like(S),
                )
                do = dO[..., i0 : i0 + 3, :]
                dV[..., j0 : j0 + 2, :] += P.transpose(-2, -1) @ do
                dP = do @ V[..., j0 : j0 + 2, :].transpose(-2, -1)
                dS = P * (dP - D[..., i0 : i0 + 3, None])
                dQ[..., i0 : i0 + 3, :] += dS @ K[..., j0 : j0 + 2, :] * scale
                dK[..., j0 : j0 + 2, :] += dS.transpose(-2, -1) @ qi * scale
        return _sum_to(dQ, Q.shape), _sum_to(dK, K.shape), _sum_to(dV, V.shape), None


class Recompute(torch.autograd.Function):
    """Saves only the inputs; backward recomputes the forward under autograd and differentiates it."""

    @staticmethod
    def forward(ctx, Q, K, V, mask):
        ctx.save_for_backward(Q, K, V, mask)
        return naive(Q, K, V, mask)

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, mask = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_(True) for t in (Q, K, V))
            out = naive(q, k, v, mask)
            dQ, dK, dV = torch.autograd.grad(out, (q, k, v), dO)
        return dQ, dK, dV, None


def checkpointed(Q, K, V, mask):
    """torch.utils.checkpoint: the forward is recomputed during backward."""
    from torch.utils.checkpoint import checkpoint

    return checkpoint(naive, Q, K, V, mask, use_reentrant=False)


def float32_accumulation(Q, K, V, mask):
    """Low-precision inputs computed in float32 (and float64 kept as is), the output in the inputs' dtype."""
    work = torch.float64 if Q.dtype == torch.float64 else torch.float32
    return naive(Q.to(work), K.to(work), V.to(work), mask).to(Q.dtype)


class Float32Backward(torch.autograd.Function):
    """A hand-written backward that accumulates in float32 for half inputs."""

    @staticmethod
    def forward(ctx, Q, K, V, mask):
        ctx.save_for_backward(Q, K, V, mask)
        return float32_accumulation(Q, K, V, mask)

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, mask = ctx.saved_tensors
        work = torch.float64 if Q.dtype == torch.float64 else torch.float32
        grads = SavedWeights.backward(_Saved(Q.to(work), K.to(work), V.to(work), mask), dO.to(work))
        return tuple(g.to(Q.dtype) for g in grads[:3]) + (None,)


class _Saved:
    """A stand-in ctx for SavedWeights.backward, computing P itself."""

    def __init__(self, Q, K, V, mask):
        self.scale = Q.shape[-1] ** -0.5
        P = torch.softmax((Q @ K.transpose(-2, -1) * self.scale).masked_fill(~mask, float("-inf")), -1)
        self.saved_tensors = (Q, K, V, torch.where(mask, P, torch.zeros_like(P)))


def manual_softmax(Q, K, V, mask):
    """The softmax written out: subtract the kept maximum, exponentiate the kept scores, divide by their sum."""
    S = torch.matmul(Q, K.transpose(-2, -1)) * Q.shape[-1] ** -0.5
    S = S.masked_fill(~mask, float("-inf"))
    peak = S.amax(dim=-1, keepdim=True)
    peak = torch.where(torch.isneginf(peak), torch.zeros_like(peak), peak).detach()  # any shift is exact
    E = torch.where(mask, torch.exp(S - peak), torch.zeros_like(S))
    total = E.sum(dim=-1, keepdim=True)
    P = E / torch.where(total == 0, torch.ones_like(total), total)
    return torch.matmul(P, V)


STYLES = {
    "naive": naive,
    "einsum_where": einsum_where,
    "logsumexp_form": logsumexp_form,
    "tiled_autograd": tiled_autograd,
    "saved_weights_function": SavedWeights,
    "flash_attention_2_function": FlashAttention2,
    "recompute_function": Recompute,
    "checkpointed": checkpointed,
    "float32_accumulation": float32_accumulation,
    "float32_backward_function": Float32Backward,
    "manual_softmax": manual_softmax,
}
"""Style name -> the implementation (a function, or an autograd Function class called through ``.apply``)."""
