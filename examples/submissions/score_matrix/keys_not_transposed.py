"""Mistake: Q @ K instead of Q @ Kᵀ (right only by accident, and only for square K)."""


def score_matrix(Q, K):
    return Q @ K
