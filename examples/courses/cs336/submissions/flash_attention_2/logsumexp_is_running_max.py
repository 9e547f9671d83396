"""FlashAttention-2 in PyTorch that saves the running max where the logsumexp belongs.

Wrong on the course's interface (examples/courses/cs336/flash_attention_2.yaml): O is right, but
the forward saves L = m (the running max) instead of L = m + log(l), so the saved L is wrong and the
backward's recomputed P = exp(S - L) is not normalised, which makes every gradient wrong too."""

import math

import torch

TILE = 16


class FlashAttention2PyTorch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        batch, n_q, d = Q.shape
        n_k = K.shape[-2]
        scale = 1 / math.sqrt(d)
        O = torch.empty_like(Q)
        L = torch.empty(batch, n_q, dtype=Q.dtype, device=Q.device)
        for i in range(0, n_q, TILE):
            Q_i = Q[:, i : i + TILE]
            m = torch.full(Q_i.shape[:-1], float("-inf"), dtype=Q.dtype, device=Q.device)
            l = torch.zeros_like(m)
            O_i = torch.zeros_like(Q_i)
            for j in range(0, n_k, TILE):
                S_ij = Q_i @ K[:, j : j + TILE].transpose(-2, -1) * scale
                m_new = torch.maximum(m, S_ij.max(dim=-1).values)
                P_ij = torch.exp(S_ij - m_new.unsqueeze(-1))
                l = torch.exp(m - m_new) * l + P_ij.sum(dim=-1)
                O_i = torch.exp(m - m_new).unsqueeze(-1) * O_i + P_ij @ V[:, j : j + TILE]
                m = m_new
            O[:, i : i + TILE] = O_i / l.unsqueeze(-1)
            L[:, i : i + TILE] = m  # the running max, not m + log(l)
        ctx.save_for_backward(L, Q, K, V, O)
        return O

    @staticmethod
    def backward(ctx, dO):
        L, Q, K, V, O = ctx.saved_tensors
        scale = 1 / math.sqrt(Q.shape[-1])
        P = torch.exp(Q @ K.transpose(-2, -1) * scale - L.unsqueeze(-1))
        dV = P.transpose(-2, -1) @ dO
        dP = dO @ V.transpose(-2, -1)
        dS = P * (dP - (O * dO).sum(dim=-1, keepdim=True))
        return dS @ K * scale, dS.transpose(-2, -1) @ Q * scale, dV, None


def get_flashattention_autograd_function_pytorch():
    return FlashAttention2PyTorch
