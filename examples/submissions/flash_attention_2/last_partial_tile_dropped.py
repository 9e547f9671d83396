"""FlashAttention-2 in PyTorch (CS336 assignment 2 style): tiled forward, hand-written backward.

Catalogued mistake: last_partial_tile_dropped. The tile counts are n // tile, so the rows of the last,
partial query tile are never written and the keys of the last, partial key tile never read; the
course's n = 128 is a multiple of the tile size, so its own test passes."""

import math

import torch

Q_TILE, K_TILE = 16, 16


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        batch, n_queries, d = Q.shape
        n_keys = K.shape[-2]
        scale = 1 / math.sqrt(d)
        T_q = n_queries // Q_TILE
        T_k = n_keys // K_TILE
        O = torch.zeros(batch, n_queries, d, dtype=Q.dtype, device=Q.device)
        L = torch.zeros(batch, n_queries, dtype=Q.dtype, device=Q.device)
        for i in range(T_q):
            Q_i = Q[:, i * Q_TILE : (i + 1) * Q_TILE, :]
            O_i = torch.zeros_like(Q_i)
            l_i = torch.zeros(batch, Q_TILE, dtype=Q.dtype, device=Q.device)
            m_i = torch.full((batch, Q_TILE), float("-inf"), dtype=Q.dtype, device=Q.device)
            for j in range(T_k):
                K_j = K[:, j * K_TILE : (j + 1) * K_TILE, :]
                V_j = V[:, j * K_TILE : (j + 1) * K_TILE, :]
                S_ij = Q_i @ K_j.transpose(-1, -2) * scale
                if is_causal:
                    rows = torch.arange(i * Q_TILE, (i + 1) * Q_TILE, device=Q.device)[:, None]
                    cols = torch.arange(j * K_TILE, (j + 1) * K_TILE, device=Q.device)[None, :]
                    S_ij = S_ij.masked_fill(cols > rows, float("-inf"))
                m_new = torch.maximum(m_i, S_ij.max(dim=-1).values)
                P_ij = torch.exp(S_ij - m_new[..., None])
                correction = torch.exp(m_i - m_new)
                l_i = correction * l_i + P_ij.sum(dim=-1)
                O_i = correction[..., None] * O_i + P_ij @ V_j
                m_i = m_new
            O[:, i * Q_TILE : (i + 1) * Q_TILE, :] = O_i / l_i[..., None]
            L[:, i * Q_TILE : (i + 1) * Q_TILE] = m_i + torch.log(l_i)
        ctx.save_for_backward(Q, K, V, O, L)
        ctx.is_causal = is_causal
        return O

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O, L = ctx.saved_tensors
        scale = 1 / math.sqrt(Q.shape[-1])
        S = Q @ K.transpose(-1, -2) * scale
        if ctx.is_causal:
            future = torch.ones(S.shape[-2:], dtype=torch.bool, device=S.device).triu(1)
            S = S.masked_fill(future, float("-inf"))
        P = torch.exp(S - L[..., None])
        dV = P.transpose(-1, -2) @ dO
        dP = dO @ V.transpose(-1, -2)
        D = (O * dO).sum(dim=-1, keepdim=True)
        dS = P * (dP - D)
        return dS @ K * scale, dS.transpose(-1, -2) @ Q * scale, dV, None
