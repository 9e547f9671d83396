"""Scaled dot-product attention with an optional mask, written with torch.where and einsum.

Correct on the course's interface (examples/specs/attention_batched.yaml): the mask defaults to None
and then every key is kept; masked scores become -1e9 (a fully masked query would get the mean of V,
which the course never asks about)."""

import math

import torch


def attention(Q, K, V, mask=None):
    d_k = Q.shape[-1]
    scores = torch.einsum("bqd,bkd->bqk", Q, K) / math.sqrt(d_k)
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(-1e9, dtype=scores.dtype))
    weights = scores.softmax(dim=-1)
    return torch.einsum("bqk,bkv->bqv", weights, V)
