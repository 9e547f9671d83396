"""Correct: Q times K with its last two axes swapped."""


def score_matrix(Q, K):
    return Q @ K.transpose(-2, -1)
