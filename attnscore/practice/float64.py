"""The independent float64 solver of ``--verify``: the reference implementation and plain torch.

Each problem kind re-solves its problems through this object (``Kind.independent``), so the kinds
stay free of torch and of :mod:`attnscore.maths` (they are vendored into PrairieLearn questions),
while the check stays independent of the exact solver: the givens are rounded to the nearest
float64 values and recomputed by :func:`attnscore.maths.reference.score`,
:func:`~attnscore.maths.reference.scores`, :func:`~attnscore.maths.reference.score_matrix`
and ``torch`` in float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from attnscore.boundary.lazy_torch import torch
from attnscore.maths import reference

__all__ = ["TorchFloat64", "FLOAT64"]


def _t(values: Any) -> torch.Tensor:
    """Exact givens -> float64 tensor (the float nearest each shown value)."""

    def conv(v: Any) -> Any:
        return [conv(x) for x in v] if isinstance(v, (list, tuple)) else float(v)

    return torch.tensor(conv(values), dtype=torch.float64)


class TorchFloat64:
    """:class:`attnscore.practice.kinds.base.Float64` by the reference implementation and torch (float64)."""

    def score(self, q: Sequence[Any], k: Sequence[Any]) -> float:
        """``q · k`` by :func:`attnscore.maths.reference.score` (shapes ``(d_k,)``)."""
        return float(reference.score(_t(q), _t(k)))

    def scores(self, q: Sequence[Any], keys: Sequence[Sequence[Any]]) -> list[float]:
        """``K q`` by :func:`attnscore.maths.reference.scores` (``(d_k,)``, ``(n_k, d_k)`` -> ``(n_k,)``)."""
        out: list[float] = reference.scores(_t(q), _t(keys)).tolist()
        return out

    def score_matrix(self, Q: Sequence[Sequence[Any]], K: Sequence[Sequence[Any]]) -> list[list[float]]:
        """``Q Kᵀ`` by :func:`attnscore.maths.reference.score_matrix` (``(n_q, n_k)``)."""
        out: list[list[float]] = reference.score_matrix(_t(Q), _t(K)).tolist()
        return out

    def dot(self, q: Sequence[Any], k: Sequence[Any]) -> float:
        """``q · k`` by ``torch.dot``."""
        return float(torch.dot(_t(q), _t(k)))

    def scaled(self, q: Sequence[Any], k: Sequence[Any]) -> float:
        """``q · k / sqrt(d_k)`` by ``torch.dot``."""
        tq = _t(q)
        return float(torch.dot(tq, _t(k)) / math.sqrt(tq.shape[0]))

    def segment_dot(self, q: Sequence[Any], k: Sequence[Any], indices: Sequence[int]) -> float:
        """``sum(q[j] * k[j] for j in indices)`` in float64."""
        tq, tk = _t(q), _t(k)
        return float(sum(tq[j] * tk[j] for j in indices))

    def softmax(self, values: Sequence[float]) -> list[float]:
        """``torch.softmax`` of ``values`` (shape ``(n,)``) in float64."""
        out: list[float] = torch.softmax(torch.tensor(list(values), dtype=torch.float64), dim=0).tolist()
        return out

    def total(self, values: Sequence[float]) -> float:
        """The float64 sum of ``values`` (torch)."""
        return float(torch.tensor(list(values), dtype=torch.float64).sum())

    def descending(self, values: Sequence[float]) -> tuple[int, ...]:
        """The positions of ``values`` from largest to smallest (``torch.argsort``)."""
        return tuple(torch.argsort(torch.tensor(list(values), dtype=torch.float64), descending=True).tolist())


#: The solver ``--verify`` uses.
FLOAT64 = TorchFloat64()
