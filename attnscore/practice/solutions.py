"""Worked solutions: turn a family and its givens into a :class:`~attnscore.practice.problem.Problem`.

The givens (exact numbers, option order) fully determine the problem, so a featured example,
a ``--q/--k`` problem and a generated variant go through the same code. Every answer is computed
with :class:`fractions.Fraction` from the values shown to the student, by the family's kind
(``Kind.build`` in :mod:`attnscore.practice.kinds`, from the building blocks in
:mod:`attnscore.practice.worked`); the independent float64 check lives in
:mod:`attnscore.practice.verify`.

Raises :class:`Rejected` when the givens make a degenerate problem (a tie for "highest", a zero
answer outside the perpendicular family, duplicate options, a key on a rounding halfway point).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attnscore.practice import kinds
from attnscore.practice.claims import claim_text_length
from attnscore.practice.family import Family
from attnscore.practice.kinds.scaled_value import scaled_option_value, scaled_option_values
from attnscore.practice.kinds.softmax import CONCEPTS
from attnscore.practice.problem import Problem
from attnscore.practice.worked import Rejected, common_places, dot, number_text, sign_word, vector_text

__all__ = [
    "Rejected",
    "build_problem",
    "dot",
    "sign_word",
    "scaled_option_value",
    "scaled_option_values",
    "number_text",
    "vector_text",
    "common_places",
    "claim_text_length",
    "CONCEPTS",
]


def build_problem(
    family: Family,
    givens: Mapping[str, Any],
    *,
    index: int | None = None,
    seed: int | None = None,
    base_seed: int | None = None,
    student: str | None = None,
    attempts: int = 1,
) -> Problem:
    """Build the problem, its exact answers and its worked solution from ``givens``.

    Args:
        family: the validated family.
        givens: exact numbers (Fractions) in the kind's layout (see :mod:`attnscore.practice.generators`).
        index, seed, base_seed, student: where the variant came from (``None`` for fixed problems).
        attempts: draws the generator needed (for acceptance reports).

    Raises:
        Rejected: the givens make a degenerate problem.
        UnknownKindError: ``family.kind`` is not a registered kind.
    """
    parts = kinds.get(family.kind).build(family, givens)
    return Problem(
        family_id=family.id,
        family_version=family.version,
        kind=family.kind,
        title=family.title,
        index=index,
        seed=seed,
        base_seed=base_seed,
        student=student,
        givens=dict(givens),
        statement=parts["statement"],
        questions=parts["questions"],
        solution=parts["solution"],
        figure=parts["figure"],
        attempts=attempts,
        intro=family.intro,
    )
