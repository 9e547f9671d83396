"""Attack: searches environment variables for expected values or secrets."""
import os
import sys

import torch

print("env:", ",".join(sorted(os.environ)))
print("argv:", sys.argv[1:])


def scores(q, keys):
    for value in os.environ.values():
        if "expected" in value or "golden" in value:
            return torch.tensor(eval(value), dtype=q.dtype)
    return torch.ones(len(keys), dtype=q.dtype)
