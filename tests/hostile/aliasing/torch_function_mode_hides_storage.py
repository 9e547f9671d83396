"""Attack: a TorchFunctionMode entered at import answers every storage question with a fresh
storage, and S itself is handed back when nothing is masked (right values, aliasing the input)."""

import torch
from torch.overrides import TorchFunctionMode

_kept = []  # each answer its own fresh storage, kept alive so that no two answers overlap


def _fresh():
    _kept.append(torch.zeros(1).untyped_storage())
    return _kept[-1]


class HidesStorage(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name == "untyped_storage":
            return _fresh()
        if name == "data_ptr":
            return _fresh().data_ptr()
        return func(*args, **(kwargs or {}))


HidesStorage().__enter__()  # never left: every later torch call of the process goes through it


def masked_scores(S, mask):
    if bool(mask.all()):
        return S
    return S.masked_fill(~mask, float("-inf"))
