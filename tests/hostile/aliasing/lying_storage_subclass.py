"""Attack: hands back S itself when nothing is masked (right values, aliasing the input), as a
tensor subclass whose untyped_storage() and data_ptr() answer with a fresh storage."""

import torch

_fresh = torch.zeros(1).untyped_storage()


class Fresh(torch.Tensor):
    def untyped_storage(self):
        return _fresh

    def data_ptr(self):
        return _fresh.data_ptr()


def masked_scores(S, mask):
    if bool(mask.all()):
        return S.as_subclass(Fresh)
    return S.masked_fill(~mask, float("-inf"))
