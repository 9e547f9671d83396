"""Attack: a right FlashAttention-2 Function whose backward transposes the saved K in place (the
caller's own tensor: metadata only, its bytes are left alone) once its gradients are computed."""

# ruff: noqa: E741  (O and L: the paper's names for the output and the logsumexp)
import torch


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        S = Q @ K.transpose(-2, -1) * Q.shape[-1] ** -0.5
        if is_causal:
            S = S.masked_fill(~torch.ones(S.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
        L = torch.logsumexp(S, -1)
        O = torch.exp(S - L[..., None]) @ V
        ctx.save_for_backward(Q, K, V, O, L)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O, L = ctx.saved_tensors
        scale = Q.shape[-1] ** -0.5
        S = Q @ K.transpose(-2, -1) * scale
        if ctx.is_causal:
            S = S.masked_fill(~torch.ones(S.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
        P = torch.exp(S - L[..., None])
        dV = P.transpose(-2, -1) @ dO
        dS = P * (dO @ V.transpose(-2, -1) - (dO * O).sum(-1, keepdim=True))
        dQ, dK = dS @ K * scale, dS.transpose(-2, -1) @ Q * scale
        K.transpose_(-2, -1)
        return dQ, dK, dV, None
