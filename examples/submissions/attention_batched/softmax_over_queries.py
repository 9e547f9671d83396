"""Scaled dot-product attention for (batch, n, d) inputs with the softmax over the wrong axis.

Wrong on the course's interface (examples/specs/attention_batched.yaml): dim=1 of the (B, n_q, n_k)
scores is the queries axis, so the weights of each key sum to one instead of each query's."""

import math

import torch


def attention(Q, K, V, mask=None):
    B, N, D = Q.shape
    scores = Q @ K.transpose(1, 2) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=1) @ V
