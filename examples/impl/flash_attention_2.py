"""Correct FlashAttention-2 ``torch.autograd.Function`` submissions, each written another way.

What students hand in for CS336 assignment 2's FlashAttention-2 (PyTorch part) and similar
assignments: ``forward(ctx, Q, K, V, is_causal=False)`` tiled with an online softmax, saving the
logsumexp ``L`` ``(..., n_q)``, and a hand-written ``backward(ctx, dO)``. Each gets full marks for
its values on ``specs/flash_attention_2.yaml`` and ``specs/flash_attention_2_causal.yaml``
(``tests/catalogue/test_flash_attention.py``), in process and in the sandbox. :class:`RecomputeBackward`
runs torch.autograd inside its backward, which those specs' ``hand_written_backward`` rule forbids:
graded from this file (which holds it), every style loses that rule's point.

- :class:`TiledTwoLoops`: query tiles × key tiles as in the handout's Algorithm 1, tiled Algorithm 2 backward;
- :func:`get_flashattention_autograd_function_pytorch`: the handout's factory, returning a class that
  works in base 2 (``exp2``) with tiles 32 × 8 and saves ``L`` converted to natural log;
- :class:`RecomputeBackward`: key tiles only, vectorised over queries; the backward recomputes the
  attention with autograd from the saved inputs (recompute-in-backward);
- :class:`ReturnsLogsumexp`: returns ``(O, L)`` (a spec with ``logsumexp: {in: returned}``);
- :class:`Float32Accumulation`: float16/bfloat16 inputs accumulated in float32, ``L`` kept in float32;
- :class:`SavesMaxToo`: saves the running max as well, so ``L`` is found by its position
  (a spec with ``logsumexp: {in: saved_tensors, index: 4}``).

Shapes: Q ``(..., n_q, d)``, K and V ``(..., n_k, d)``; ``is_causal`` keeps key ``j`` for query
``i`` when ``j <= i`` (top-left).
"""

from __future__ import annotations

# ruff: noqa: E741, N801  (O, L, l: the paper's names)
import math

import torch

__all__ = [
    "TiledTwoLoops",
    "get_flashattention_autograd_function_pytorch",
    "RecomputeBackward",
    "ReturnsLogsumexp",
    "Float32Accumulation",
    "SavesMaxToo",
    "STYLES",
]


def _causal_fill(S, q0, k0, is_causal):
    """S (..., Bq, Bk) of query rows q0.. and key columns k0..: future keys set to -inf."""
    if not is_causal:
        return S
    i = torch.arange(q0, q0 + S.shape[-2], device=S.device)[:, None]
    j = torch.arange(k0, k0 + S.shape[-1], device=S.device)[None, :]
    return S.masked_fill(j > i, float("-inf"))


def _flash_forward(Q, K, V, is_causal, Bq=16, Bk=16):
    """Algorithm 1: per query tile, an online softmax over the key tiles it needs. -> O, L."""
    scale = Q.shape[-1] ** -0.5
    n_q, n_k = Q.shape[-2], K.shape[-2]
    O = torch.empty(Q.shape[:-1] + (V.shape[-1],), dtype=Q.dtype, device=Q.device)
    L = torch.empty(Q.shape[:-1], dtype=Q.dtype, device=Q.device)
    for q0 in range(0, n_q, Bq):
        Qi = Q[..., q0 : q0 + Bq, :]
        rows = Qi.shape[-2]
        m = torch.full(Qi.shape[:-1], float("-inf"), dtype=Q.dtype, device=Q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(Qi.shape[:-1] + (V.shape[-1],), dtype=Q.dtype, device=Q.device)
        for k0 in range(0, n_k, Bk):
            if is_causal and k0 > q0 + rows - 1:
                break  # this key tile and every later one lie after the tile's last query
            S = _causal_fill(Qi @ K[..., k0 : k0 + Bk, :].transpose(-2, -1) * scale, q0, k0, is_causal)
            m_new = torch.maximum(m, S.amax(-1))
            P = torch.exp(S - m_new[..., None])
            alpha = torch.exp(m - m_new)
            l = alpha * l + P.sum(-1)
            acc = alpha[..., None] * acc + P @ V[..., k0 : k0 + Bk, :]
            m = m_new
        O[..., q0 : q0 + Bq, :] = acc / l[..., None]
        L[..., q0 : q0 + Bq] = m + torch.log(l)
    return O, L


def _flash_backward(Q, K, V, O, L, dO, is_causal, Bq=16, Bk=16):
    """Algorithm 2: per key tile, over the query tiles that see it; D = rowsum(dO ⊙ O)."""
    scale = Q.shape[-1] ** -0.5
    n_q, n_k = Q.shape[-2], K.shape[-2]
    D = (dO * O).sum(-1)  # (..., n_q)
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for k0 in range(0, n_k, Bk):
        Kj, Vj = K[..., k0 : k0 + Bk, :], V[..., k0 : k0 + Bk, :]
        for q0 in range(0, n_q, Bq):
            if is_causal and k0 > q0 + min(Bq, n_q - q0) - 1:
                continue
            Qi, dOi = Q[..., q0 : q0 + Bq, :], dO[..., q0 : q0 + Bq, :]
            S = _causal_fill(Qi @ Kj.transpose(-2, -1) * scale, q0, k0, is_causal)
            P = torch.exp(S - L[..., q0 : q0 + Bq, None])
            dV[..., k0 : k0 + Bk, :] += P.transpose(-2, -1) @ dOi
            dP = dOi @ Vj.transpose(-2, -1)
            dS = P * (dP - D[..., q0 : q0 + Bq, None])
            dQ[..., q0 : q0 + Bq, :] += dS @ Kj * scale
            dK[..., k0 : k0 + Bk, :] += dS.transpose(-2, -1) @ Qi * scale
    return dQ, dK, dV


class TiledTwoLoops(torch.autograd.Function):
    """Query tiles × key tiles of 16 forward (Algorithm 1) and backward (Algorithm 2)."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        O, L = _flash_forward(Q, K, V, is_causal)
        ctx.save_for_backward(Q, K, V, O, L)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O, L = ctx.saved_tensors
        dQ, dK, dV = _flash_backward(Q, K, V, O, L, dO, ctx.is_causal)
        return dQ, dK, dV, None


def get_flashattention_autograd_function_pytorch():
    """The handout's factory: a Function in base 2 (exp2, log2 e folded into the scale), tiles 32 × 8."""
    log2e = 1.0 / math.log(2.0)

    class FlashAttentionBase2(torch.autograd.Function):
        @staticmethod
        def forward(ctx, Q, K, V, is_causal=False):
            Bq, Bk = 32, 8
            scale2 = Q.shape[-1] ** -0.5 * log2e  # scores in base 2: S·log2 e
            n_q, n_k = Q.shape[-2], K.shape[-2]
            O = torch.empty_like(Q)
            L = torch.empty(Q.shape[:-1], dtype=Q.dtype, device=Q.device)
            for q0 in range(0, n_q, Bq):
                Qi = Q[..., q0 : q0 + Bq, :]
                m = torch.full(Qi.shape[:-1], float("-inf"), dtype=Q.dtype, device=Q.device)
                l = torch.zeros_like(m)
                acc = torch.zeros_like(Qi)
                last = q0 + Qi.shape[-2] - 1
                for k0 in range(0, n_k if not is_causal else min(n_k, last + 1), Bk):
                    S2 = _causal_fill(
                        torch.einsum("...id,...jd->...ij", Qi, K[..., k0 : k0 + Bk, :]) * scale2, q0, k0, is_causal
                    )
                    m_new = torch.maximum(m, S2.amax(-1))
                    P = torch.exp2(S2 - m_new[..., None])
                    alpha = torch.exp2(m - m_new)
                    l = alpha * l + P.sum(-1)
                    acc = alpha[..., None] * acc + torch.einsum("...ij,...jd->...id", P, V[..., k0 : k0 + Bk, :])
                    m = m_new
                O[..., q0 : q0 + Bq, :] = acc / l[..., None]
                L[..., q0 : q0 + Bq] = (m + torch.log2(l)) / log2e  # saved in natural log, as asked
            ctx.save_for_backward(Q, K, V, O, L)
            ctx.is_causal = is_causal
            return O

        @staticmethod
        def backward(ctx, dO):
            Q, K, V, O, L = ctx.saved_tensors
            dQ, dK, dV = _flash_backward(Q, K, V, O, L, dO, ctx.is_causal, Bq=32, Bk=8)
            return dQ, dK, dV, None

    return FlashAttentionBase2


def _naive(Q, K, V, is_causal):
    S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if is_causal:
        S = S.masked_fill(torch.ones(S.shape[-2:], dtype=torch.bool, device=S.device).triu(1), float("-inf"))
    return torch.softmax(S, dim=-1) @ V


def _key_tiles(Q, K, V, is_causal, Bk=24):
    """One loop over key tiles of 24 (not a power of two), every query at once."""
    scale = 1.0 / math.sqrt(Q.shape[-1])
    m = torch.full(Q.shape[:-1], float("-inf"), dtype=Q.dtype)
    l = torch.zeros_like(m)
    acc = torch.zeros(Q.shape[:-1] + (V.shape[-1],), dtype=Q.dtype)
    for k0 in range(0, K.shape[-2], Bk):
        S = _causal_fill(Q @ K[..., k0 : k0 + Bk, :].mT * scale, 0, k0, is_causal)
        m_new = torch.maximum(m, S.amax(-1))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # a row with no key yet
        P = torch.exp(S - safe[..., None])
        alpha = torch.exp(m - safe)
        l = l * alpha + P.sum(-1)
        acc = acc * alpha[..., None] + P @ V[..., k0 : k0 + Bk, :]
        m = m_new
    return acc / l[..., None], m + torch.log(l)


class RecomputeBackward(torch.autograd.Function):
    """Key tiles forward; the backward recomputes attention from Q, K, V with autograd."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        O, L = _key_tiles(Q, K, V, is_causal)
        ctx.save_for_backward(Q, K, V, L)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, _ = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_(True) for t in (Q, K, V))
            out = _naive(q, k, v, ctx.is_causal)
            dQ, dK, dV = torch.autograd.grad(out, (q, k, v), dO)
        return dQ, dK, dV, None


class ReturnsLogsumexp(torch.autograd.Function):
    """Returns (O, L) and ignores L's upstream gradient (L is marked non-differentiable)."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        O, L = _key_tiles(Q, K, V, is_causal, Bk=7)
        ctx.save_for_backward(Q, K, V, O, L)
        ctx.mark_non_differentiable(L)
        ctx.is_causal = is_causal
        return O, L

    @staticmethod
    def backward(ctx, dO, dL):
        Q, K, V, O, L = ctx.saved_tensors
        dQ, dK, dV = _flash_backward(Q, K, V, O, L, dO, ctx.is_causal, Bq=5, Bk=7)
        return dQ, dK, dV, None


class Float32Accumulation(torch.autograd.Function):
    """Low-precision inputs: every tile's sums in float32 (at least: float64 inputs stay float64), O
    cast back, L kept in the accumulation dtype."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        acc = torch.promote_types(Q.dtype, torch.float32)
        O32, L = _flash_forward(Q.to(acc), K.to(acc), V.to(acc), is_causal, Bq=16, Bk=32)
        ctx.save_for_backward(Q, K, V, O32, L)
        ctx.is_causal = is_causal
        return O32.to(Q.dtype)

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O32, L = ctx.saved_tensors
        acc = O32.dtype
        dQ, dK, dV = _flash_backward(Q.to(acc), K.to(acc), V.to(acc), O32, L, dO.to(acc), ctx.is_causal, 16, 32)
        return dQ.to(Q.dtype), dK.to(K.dtype), dV.to(V.dtype), None


class SavesMaxToo(torch.autograd.Function):
    """Saves (Q, K, V, O, L, m): two tensors of shape (..., n_q), L at index 4."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        O, L = _flash_forward(Q, K, V, is_causal, Bq=8, Bk=64)
        S = Q @ K.transpose(-2, -1) * Q.shape[-1] ** -0.5
        m = _causal_fill(S, 0, 0, is_causal).amax(-1)
        ctx.save_for_backward(Q, K, V, O, L, m)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O, L, _ = ctx.saved_tensors
        dQ, dK, dV = _flash_backward(Q, K, V, O, L, dO, ctx.is_causal, Bq=8, Bk=64)
        return dQ, dK, dV, None


STYLES = {
    "tiled_two_loops": (TiledTwoLoops, {}),
    "factory_base2": (get_flashattention_autograd_function_pytorch, {"factory": True}),
    "recompute_backward": (RecomputeBackward, {}),
    "returns_logsumexp": (ReturnsLogsumexp, {"logsumexp": {"in": "returned"}}),
    "float32_accumulation": (Float32Accumulation, {}),
    "saves_max_too": (SavesMaxToo, {"logsumexp": {"in": "saved_tensors", "index": 4}}),
}
"""name -> (the object handed in, the spec's ``function`` fields it needs beyond the bundled spec's)."""
