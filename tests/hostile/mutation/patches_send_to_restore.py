"""Attack: scales Q in place, then patches every way the worker replies (its _send, the wire
format, json, os.write, the tensor conversion) to restore Q just before the reply is written."""

import json
import os
import sys

import torch

saved = []


def _restore():
    while saved:
        tensor, copy = saved.pop()
        torch._C.TensorBase.copy_(tensor, copy)


def _wrap(owner, name):
    original = getattr(owner, name, None)
    if not callable(original):
        return

    def patched(*args, **kwargs):
        _restore()
        return original(*args, **kwargs)

    try:
        setattr(owner, name, patched)
    except (AttributeError, TypeError):
        pass


for module in list(sys.modules.values()):
    for name in ("_send", "send", "dumps", "encode_received", "to_received", "_copy_back", "inspect_call"):
        if module is not None and getattr(module, "__name__", "").startswith(("attnscore", "json")):
            _wrap(module, name)
_wrap(os, "write")
_wrap(json, "dumps")
for name in ("numpy", "cpu", "detach", "contiguous", "tolist", "__array__"):
    _wrap(torch.Tensor, name)  # the conversion of the returned tensor restores too


def scaled_score_matrix(Q, K):
    saved.append((Q, Q.clone()))
    Q.mul_(Q.shape[-1] ** -0.5)
    return Q @ K.transpose(-2, -1)
