"""The problem family record: what a validated family file declares (read by ``families.py``).

This module needs only the standard library, so it is copied into PrairieLearn questions with the
generators (``vendor.py``); reading and validating family files (YAML) lives in
:mod:`attnscore.practice.families`. The kinds (:mod:`attnscore.practice.kinds`) read it; it reads none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

__all__ = ["MC_TEMPLATES", "Family"]

MC_TEMPLATES = ("highest_key", "true_statement", "scaled_value")
"""The multiple-choice templates a family may declare (:mod:`attnscore.practice.kinds.multiple_choice`)."""


@dataclass(frozen=True)
class Family:
    """One validated problem family (fields as in :mod:`attnscore.practice.families`).

    ``values`` is ``(min, max, step)`` of the entries shown, exact; ``d_k``, ``n_k`` and
    ``shapes`` are the sizes to draw from; ``path`` is the file it came from.
    """

    id: str
    version: int
    kind: str
    title: str
    path: str
    intro: str = ""
    values: tuple[Fraction, Fraction, Fraction] = (Fraction(-4), Fraction(4), Fraction(1))
    d_k: tuple[int, ...] = (2,)
    n_k: tuple[int, ...] = (3,)
    shapes: tuple[tuple[int, int, int], ...] = ((2, 2, 2),)
    places: int = 3
    max_attempts: int = 200
    max_duplicate_rate: float = 0.05
    mode: str = "exact"
    multipliers: tuple[int, ...] = (1, 2, 3, 4)
    templates: tuple[str, ...] = MC_TEMPLATES
    featured: tuple[dict[str, Any], ...] = field(default=())

    def grid(self) -> tuple[Fraction, ...]:
        """The entries students see: ``min, min + step, ..., max`` (exact)."""
        lo, hi, step = self.values
        count = int((hi - lo) / step)
        return tuple(lo + i * step for i in range(count + 1))
