"""Scaled dot-product attention that unpacks the shape and keeps the leading dims as they come.

Correct on the course's interface (examples/courses/cs336/scaled_dot_product_attention*.yaml):
`*batch, n_q, d_k = Q.shape` takes both the third- and the fourth-order inputs the course passes;
the mask defaults to None and then every key is kept; masked scores become -1e9 (a query with every
key masked would get the mean of V, which the course never asks about)."""

import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    *batch, n_q, d_k = Q.shape
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (*batch, n_q, n_k)
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(-1e9, dtype=scores.dtype))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V  # (*batch, n_q, d_v)
