"""Attack: scales Q and transposes K in place; a local object in a reference cycle restores both
from its finalizer, which the collector runs on the first allocation after the call returns."""

import gc

import torch

gc.set_threshold(1, 1_000_000, 1_000_000)  # collect the youngest objects on every allocation


class _Restore:
    def __init__(self, Q, K):
        self.Q, self.K, self.copy, self.cycle = Q, K, Q.clone(), self

    def __del__(self):
        self.K.transpose_(-2, -1)
        torch._C.TensorBase.copy_(self.Q, self.copy)


def scaled_score_matrix(Q, K):
    out = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    keep = _Restore(Q, K)  # garbage once this frame is gone: only its own cycle holds it then
    Q.mul_(2.0)
    K.transpose_(-2, -1)
    gc.enable()
    del keep
    return out
