"""FlashAttention-2 in PyTorch (CS336 assignment 2 style): tiled forward, hand-written backward."""

import torch

B_Q, B_K = 16, 16


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        scale = Q.shape[-1] ** -0.5
        n_q, n_k = Q.shape[-2], K.shape[-2]
        O = torch.empty_like(Q)
        L = torch.empty(Q.shape[:-1], dtype=Q.dtype, device=Q.device)
        for q0 in range(0, n_q, B_Q):
            Qi = Q[..., q0 : q0 + B_Q, :]
            rows = Qi.shape[-2]
            m = torch.full(Qi.shape[:-1], float("-inf"), dtype=Q.dtype, device=Q.device)
            l = torch.zeros_like(m)
            acc = torch.zeros_like(Qi)
            n_tiles = (n_k + B_K - 1) // B_K
            if is_causal:
                n_tiles = min(n_tiles, (q0 + rows - 1) // B_K + 1)
            for t in range(n_tiles):
                k0 = t * B_K
                S = Qi @ K[..., k0 : k0 + B_K, :].transpose(-2, -1) * scale
                if is_causal:
                    i = torch.arange(q0, q0 + rows, device=Q.device)[:, None]
                    j = torch.arange(k0, k0 + S.shape[-1], device=Q.device)[None, :]
                    S = S.masked_fill(j > i, float("-inf"))
                m_new = torch.maximum(m, S.amax(-1))
                P = torch.exp(S - m_new[..., None])
                alpha = torch.exp(m - m_new)
                l = alpha * l + P.sum(-1)
                acc = alpha[..., None] * acc + P @ V[..., k0 : k0 + B_K, :]
                m = m_new
            O[..., q0 : q0 + B_Q, :] = acc / l[..., None]
            L[..., q0 : q0 + B_Q] = m + torch.log(l)
        ctx.save_for_backward(Q, K, V, O, L)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O, L = ctx.saved_tensors
        scale = Q.shape[-1] ** -0.5
        S = Q @ K.transpose(-2, -1) * scale
        if ctx.is_causal:
            future = torch.ones(S.shape[-2:], dtype=torch.bool, device=S.device).triu(1)
            S = S.masked_fill(future, float("-inf"))
        P = torch.exp(S - L[..., None])
        dV = P.transpose(-2, -1) @ dO
        dP = dO @ V.transpose(-2, -1)
        D = (dO * O).sum(-1, keepdim=True)
        dS = P * (dP - D)
        dQ = dS @ K * scale
        dK = dS.transpose(-2, -1) @ Q * scale
        return dQ, dK, dV, None
