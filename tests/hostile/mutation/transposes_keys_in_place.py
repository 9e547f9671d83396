"""Held-out mistake: transposes K in place (metadata only; the bytes are unchanged), right values."""


def scaled_score_matrix(Q, K):
    K.transpose_(-2, -1)
    return Q @ K / Q.shape[-1] ** 0.5
