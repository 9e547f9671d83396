"""Held-out mistake: W.t_() turns W around in place (metadata only), and uses it the other way round."""


def bilinear_scores(Q, K, W):
    W.t_()
    return Q @ W.t() @ K.transpose(-2, -1)
