"""Not what was asked: a FlashAttention-2 "implementation" whose forward is PyTorch's own
scaled_dot_product_attention and whose backward runs torch autograd on a recomputation. Right
values everywhere; the spec's rules (no SDPA, no autograd in the backward) must cost their points."""

# ruff: noqa: E741  (O and L: the paper's names for the output and the logsumexp)
import torch
import torch.nn.functional as F


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        O = F.scaled_dot_product_attention(Q, K, V, is_causal=is_causal)
        S = Q @ K.transpose(-2, -1) * Q.shape[-1] ** -0.5
        if is_causal:
            S = S.masked_fill(~torch.ones(S.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
        ctx.save_for_backward(Q, K, V, torch.logsumexp(S, -1))
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, L = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            O = F.scaled_dot_product_attention(q, k, v, is_causal=ctx.is_causal)
            dQ, dK, dV = torch.autograd.grad(O, (q, k, v), dO)
        return dQ, dK, dV, None
