"""Practice problems as plain frozen data: givens, questions, exact answers, worked solution.

A :class:`Problem` is what every renderer and exporter reads; none of them computes anything.
Numeric answers are exact :class:`~fractions.Fraction` values computed from the numbers shown to
the student; their key text and tolerance follow the rounding rule in
:mod:`attnscore.practice.numbers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from attnscore.practice.numbers import answer_text, is_rounded, tolerance_for
from attnscore.practice.richtext import Rich, text

__all__ = ["NumericAnswer", "ChoiceAnswer", "Question", "Problem", "Arrow", "which_key"]


@dataclass(frozen=True)
class NumericAnswer:
    """One blank to fill with a number.

    Attributes:
        name: a short identifier, unique in its problem (``"score"``, ``"s_2"``, ``"w_1"``).
        label: how the blank is named to the student (math, e.g. ``q \\cdot k``).
        exact: the exact answer.
        places: decimals the student gives; also fixes the key's rounding and tolerance.
    """

    name: str
    label: Rich
    exact: Fraction
    places: int

    @property
    def key(self) -> str:
        """The key as text: exact when it fits in ``places`` decimals, else rounded half away from zero."""
        return answer_text(self.exact, self.places)

    @property
    def rounded(self) -> bool:
        """Whether :attr:`key` is a rounded value."""
        return is_rounded(self.exact, self.places)

    @property
    def tolerance(self) -> Fraction:
        """Absolute tolerance: half a unit in the last requested place (never relative)."""
        return tolerance_for(self.places)


@dataclass(frozen=True)
class ChoiceAnswer:
    """A multiple-choice blank with exactly one correct option.

    Attributes:
        name: a short identifier, unique in its problem.
        options: the options in display order (A, B, C, ...); pairwise distinct.
        correct: 0-based position of the correct option.
        claims: per option, a machine-checkable claim (plain data) that an independent solver
            re-evaluates in :mod:`attnscore.practice.verify`.
        shuffled: whether the correct position was drawn at random (False when the options have
            a natural order, e.g. "key 1, key 2, key 3").
    """

    name: str
    options: tuple[Rich, ...]
    correct: int
    claims: tuple[tuple[Any, ...], ...]
    shuffled: bool = False


@dataclass(frozen=True)
class Question:
    """One lettered part of a problem: a prompt and its blanks."""

    part: str
    prompt: Rich
    numeric: tuple[NumericAnswer, ...] = ()
    choice: ChoiceAnswer | None = None


def which_key(part: str, prompt: str, name: str, n: int, best: int, claim: str) -> Question:
    """Question ``part``: which of ``n`` keys ``prompt`` asks for, as the choice ``name`` between
    "Key 1" .. "Key n" in their natural order, ``best`` (0-based) correct, option ``j`` claiming
    ``(claim, j)``."""
    options = tuple(text(f"Key {j + 1}") for j in range(n))
    return Question(part, text(prompt), choice=ChoiceAnswer(name, options, best, tuple((claim, j) for j in range(n))))


@dataclass(frozen=True)
class Arrow:
    """A 2-D vector to draw in the problem's figure (exact coordinates)."""

    label: str
    x: Fraction
    y: Fraction
    role: str  # "query" or "key"


@dataclass(frozen=True)
class Problem:
    """One practice problem, ready to render.

    Attributes:
        family_id, family_version, kind, title: from the family file.
        index: the variant's 0-based index, or ``None`` for a fixed (featured / command-line) problem.
        seed: the seed of the ``givens`` stream, printed in the answer key (``None`` when fixed).
        base_seed, student: the arguments that regenerate the variant.
        givens: the numbers shown to the student, as exact plain data (for solvers and figures).
        statement: paragraphs shown before the questions.
        questions: the lettered parts.
        solution: the worked solution, paragraph by paragraph.
        figure: 2-D vectors to draw, empty when a figure would not help.
        attempts: draws needed before the constraints accepted the variant.
    """

    family_id: str
    family_version: int
    kind: str
    title: str
    index: int | None
    seed: int | None
    base_seed: int | None
    student: str | None
    givens: Mapping[str, Any]
    statement: tuple[Rich, ...]
    questions: tuple[Question, ...]
    solution: tuple[Rich, ...]
    figure: tuple[Arrow, ...] = ()
    attempts: int = 1
    intro: str = field(default="")

    @property
    def uid(self) -> str:
        """A stable identifier: ``family-v1-s42-alice-0007`` or ``family-v1-featured-01``."""
        if self.index is None:
            return f"{self.family_id}-v{self.family_version}-fixed-{self.givens.get('_fixed', 1):02d}"
        student = f"-{self.student}" if self.student else ""
        return f"{self.family_id}-v{self.family_version}-s{self.base_seed}{student}-{self.index:04d}"
