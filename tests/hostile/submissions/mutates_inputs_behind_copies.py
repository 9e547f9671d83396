"""Attack: at import, makes torch build every tensor from a buffer as a private copy (so that the
worker's own inputs would no longer share the grader's memory), then answers right and overwrites
its inputs, hoping the grader never sees the change. The worker builds inputs with torch's
functions bound before the import: the inputs are still the shared memory, and the change is seen."""

import torch

_frombuffer = torch.frombuffer
torch.frombuffer = lambda *args, **kwargs: _frombuffer(*args, **kwargs).clone()


def scores(q, keys):
    out = (keys @ q).clone()
    q.fill_(1e9)
    keys.zero_()
    return out
