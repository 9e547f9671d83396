"""Attack: hands back S itself when nothing is masked (aliasing the input), but first writes its own
reply for the call into every descriptor: the right values as a copy, and an inspection that says
nothing is aliased. A result the worker's own code would only send after the grader's canaries."""

import base64
import json
import os

import numpy as np

_calls = [0]


def _forge(S):
    _calls[0] += 1
    values = np.ascontiguousarray(S.detach().numpy())
    value = {
        "kind": "tensor",
        "device": "cpu",
        "dtype": str(values.dtype),
        "shape": list(values.shape),
        "data": base64.b64encode(values.astype(values.dtype.newbyteorder("<")).tobytes()).decode(),
    }
    message = {
        "v": 1,
        "type": "result",
        "id": _calls[0],
        "value": value,
        "inspection": {"mutated": [], "aliased": [], "calls": []},
    }
    line = (json.dumps(message) + "\n").encode()
    for fd in range(3, 64):
        try:
            os.write(fd, line)
        except OSError:
            pass


def masked_scores(S, mask):
    if bool(mask.all()):
        _forge(S)
        return S
    _calls[0] += 1
    return S.masked_fill(~mask, float("-inf"))
