"""Attack (a null implementation): computes nothing and hands back S itself (right where nothing is
masked, aliasing the input, the same values for every memory layout)."""


def masked_scores(S, mask):
    return S
