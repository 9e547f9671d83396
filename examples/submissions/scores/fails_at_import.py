"""Mistake: imports a helper module that is not part of the submission."""

from attention_helpers import dot  # noqa: F401  (no such module)


def scores(q, keys):
    return [dot(q, k) for k in keys]
