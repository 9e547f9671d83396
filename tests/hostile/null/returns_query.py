"""Attack (a null implementation): a torch.autograd.Function whose forward hands back Q (the input
itself: right shape and dtype for d_v = d_k) and whose backward passes dO through to Q."""

import torch


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        return Q

    @staticmethod
    def backward(ctx, dO):
        return dO, None, None, None
