"""Template ``scaled_value`` of kind ``multiple_choice``: which option is ``q · k / sqrt(d_k)``?

Givens: ``q``, ``k`` (``d_k`` in {4, 16, 64}) and ``options``, the claims of the four options in
display order: the right scaling ``("sqrt",)`` among three mistakes, each ``("d",)``,
``("half_d",)``, ``("none",)``, ``("times_sqrt",)`` or ``("slip", i)`` (a sign slip in term ``i``
of the dot product). The right option's rank by magnitude is drawn uniformly; all four share its
sign and its number of integer digits and are printed with one number of decimals, so that
neither length nor sign singles it out.
"""

from __future__ import annotations

import itertools
import math as _math
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction
from math import isqrt
from typing import TYPE_CHECKING, Any

from attnscore.practice.claims import EPS
from attnscore.practice.drawing import place, scaled_pair
from attnscore.practice.kinds.base import Float64, Givens, Parts, Vector
from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import ChoiceAnswer, Question
from attnscore.practice.richtext import display, math, text
from attnscore.practice.worked import (
    Rejected,
    check_distinct,
    common_places,
    describe_long,
    dot,
    letters,
    num,
    vec,
)

if TYPE_CHECKING:
    from attnscore.practice.family import Family

__all__ = [
    "scaled_widths",
    "draw",
    "solution",
    "option_values",
    "independent",
    "scaled_option_value",
    "scaled_option_values",
]


def scaled_widths(fam: Family) -> list[int]:
    """Widths for "which scaled score": d_k = 1 is left out (dividing by sqrt(1) changes nothing)."""
    return [d for d in fam.d_k if d in (4, 16, 64)] or [4, 16, 64]


def draw(fam: Family, setup: Mapping[str, Any], rng: random.Random, crng: random.Random) -> Givens:
    """One attempt: a query and key of a width drawn per attempt, and the four options."""
    grid = fam.grid()
    template = setup["template"]
    d = rng.choice(scaled_widths(fam))  # per attempt: some target ranks are rare at one width
    q, k = scaled_pair(rng, grid, d)
    if (q[0] * k[0] + q[-1] * k[-1] if d > 4 else dot(q, k)) == 0:  # long vectors come in two halves
        raise Rejected("zero answer")
    return {"template": template, "q": q, "k": k, "options": _scaled_options(q, k, setup["ranks"], rng, crng)}


def _scaled_mistakes(q: Sequence[Fraction], k: Sequence[Fraction]) -> list[tuple[Any, ...]]:
    """Claims of the wrong scalings offered as distractors (see the module docstring)."""
    d = len(q)
    out: list[tuple[Any, ...]] = [("d",), ("none",), ("times_sqrt",)]
    if d >= 16:
        out.append(("half_d",))
    out += [("slip", i) for i in range(d if d <= 4 else 2)]
    return out


def _pick_distractors(
    right: Any, pool: Sequence[Any], features: Any, targets: Sequence[int], rng: random.Random
) -> list[Any]:
    """Three of ``pool`` such that ``right`` has exactly the target rank by every feature.

    ``features(option)`` returns a tuple of feature values; ties with ``right`` are not allowed
    (a tie would leave the rank to the position). Raises Rejected when no triple fits.
    """
    right_values = features(right)
    pool_values = [features(o) for o in pool]
    ties = {j for j, v in enumerate(pool_values) if any(a == b for a, b in zip(v, right_values, strict=True))}
    below = [[v[f] < right_values[f] for f in range(len(targets))] for v in pool_values]
    fits = [
        triple
        for triple in itertools.combinations([j for j in range(len(pool)) if j not in ties], 3)
        if all(sum(below[j][f] for j in triple) == target for f, target in enumerate(targets))
    ]
    if not fits:
        raise Rejected("distractor ranks")
    return [pool[j] for j in rng.choice(fits)]


def _scaled_options(
    q: Sequence[Fraction], k: Sequence[Fraction], ranks: Sequence[int], rng: random.Random, crng: random.Random
) -> tuple[tuple[Any, ...], ...]:
    """The right scaling and three mistakes of its sign; its rank by magnitude is ``ranks[0]``.

    All four share the sign and the number of integer digits and are printed with a common
    number of decimals, so their texts have one length: length and sign single out nothing.
    """
    claims = [("sqrt",), *_scaled_mistakes(q, k)]
    value = dict(zip(claims, scaled_option_values(claims, q, k), strict=True))
    right = value[("sqrt",)]

    def digits(v: Fraction) -> int:
        return len(str(int(abs(v))))

    pool = [c for c, v in value.items() if c != ("sqrt",) and v * right > 0 and digits(v) == digits(right)]
    chosen = _pick_distractors(("sqrt",), pool, lambda c: (abs(value[c]),), ranks[:1], rng)
    crng.shuffle(chosen)
    options, _ = place(("sqrt",), chosen, crng)
    return tuple(options)


_SCALINGS = {
    "sqrt": "the right scaling",
    "d": "dividing by d_k instead of its square root",
    "half_d": "dividing by d_k / 2 instead of the square root of d_k",
    "none": "forgetting to scale",
    "times_sqrt": "multiplying by the square root instead of dividing",
}


def _terms(q: Sequence[Fraction], k: Sequence[Fraction]) -> list[Fraction]:
    """The dot product's terms as a student writes them: one per entry, or one per constant half."""
    d = len(q)
    if d <= 4:
        return [a * b for a, b in zip(q, k, strict=True)]
    half = d // 2
    if any(len(set(v[:half])) != 1 or len(set(v[half:])) != 1 for v in (q, k)):
        return [dot(q[:half], k[:half]), dot(q[half:], k[half:])]
    return [half * q[0] * k[0], half * q[-1] * k[-1]]


def scaled_option_value(claim: Sequence[Any], q: Sequence[Fraction], k: Sequence[Fraction]) -> Fraction:
    """The exact value of one "which scaled score" option (``claim`` as in the generator's ``options``).

    ``("sqrt",)`` is ``q · k / sqrt(d_k)``; ``("d",)``, ``("half_d",)``, ``("none",)`` and
    ``("times_sqrt",)`` divide by ``d_k``, by ``d_k / 2``, not at all, or multiply by ``sqrt(d_k)``;
    ``("slip", i)`` is the right scaling of the dot product with term ``i``'s sign flipped.

    Raises:
        ValueError: an unknown claim.
    """
    return scaled_option_values([claim], q, k)[0]


def scaled_option_values(
    claims: Sequence[Sequence[Any]], q: Sequence[Fraction], k: Sequence[Fraction]
) -> list[Fraction]:
    """:func:`scaled_option_value` of several claims, computing ``q · k`` once.

    Raises:
        ValueError: an unknown claim.
    """
    d = len(q)
    root = isqrt(d)
    terms = _terms(q, k)
    halves = d > 4 and all(len(set(v[: d // 2])) == 1 and len(set(v[d // 2 :])) == 1 for v in (q, k))
    s = sum(terms, Fraction(0)) if halves else dot(q, k)  # two products instead of d_k when in halves
    values = {"sqrt": s / root, "d": s / d, "half_d": s / Fraction(d, 2), "none": s, "times_sqrt": s * root}
    out = []
    for claim in claims:
        if claim[0] == "slip":
            out.append((s - 2 * terms[claim[1]]) / root)
        elif claim[0] in values:
            out.append(values[claim[0]])
        else:
            raise ValueError(f"unknown scaled-score option {tuple(claim)!r}")
    return out


def _mistake_text(claim: Sequence[Any], d: int) -> str:
    if claim[0] != "slip":
        return _SCALINGS[claim[0]]
    if d <= 4:
        return f"a sign slip in the product of entry {claim[1] + 1}"
    return f"a sign slip in the {('first', 'second')[claim[1]]} half's products"


def solution(fam: Family, g: Mapping[str, Any]) -> Parts:
    """The question, its options and the worked solution naming each mistake."""
    q = g["q"]
    k = g["k"]
    options = tuple((o,) if isinstance(o, str) else tuple(o) for o in g["options"])
    d = len(q)
    raw = dot(q, k)
    if raw == 0:
        raise Rejected("zero answer")
    values = scaled_option_values(options, q, k)
    opts = tuple(math(t) for t in common_places(values))
    check_distinct(opts)
    right = options.index(("sqrt",))
    if d > 6:
        givens = describe_long("q", q) + text("; ") + describe_long("k", k) + text(".")
    else:
        givens = display(f"q = {vec(q)}, \\qquad k = {vec(k)}")
    mistakes = "; ".join(
        f"{format_exact(v)} comes from {_mistake_text(o, d)}"
        for o, v in zip(options, values, strict=True)
        if o != ("sqrt",)
    )
    return {
        "statement": (text("A query and a key of width ") + math(f"d_k = {d}") + text(":"), givens),
        "questions": (
            Question(
                "a",
                text("What is the scaled score ") + math("q \\cdot k / \\sqrt{d_k}") + text("?"),
                choice=ChoiceAnswer("scaled", opts, right, tuple(("scaled", *o) for o in options), shuffled=True),
            ),
        ),
        "solution": (
            math(f"q \\cdot k = {num(raw)}")
            + text(" and ")
            + math(f"\\sqrt{{{d}}} = {isqrt(d)}")
            + text(", so ")
            + math(f"q \\cdot k / \\sqrt{{d_k}} = {num(values[right])}")
            + text(f". Answer: {letters(len(options))[right]}."),
            text(f"The other options are common mistakes: {mistakes}."),
        ),
        "figure": (),
    }


def option_values(claims: Sequence[Sequence[Any]], q: Vector, k: Vector, f64: Float64) -> list[float]:
    """The float64 value of each option, re-derived from its claim ``("scaled", what, ...)``."""
    d = len(q)
    raw, root = f64.dot(q, k), _math.sqrt(d)
    values = {"sqrt": raw / root, "d": raw / d, "half_d": raw / (d / 2), "none": raw, "times_sqrt": raw * root}
    out = []
    for claim in claims:
        if claim[1] == "slip":  # one term of the dot product with its sign flipped
            segments = [range(i, i + 1) for i in range(d)] if d <= 4 else [range(0, d // 2), range(d // 2, d)]
            out.append((raw - 2 * f64.segment_dot(q, k, segments[claim[2]])) / root)
        else:
            out.append(values[claim[1]])
    return out


def independent(g: Mapping[str, Any], claims: Sequence[tuple[Any, ...]], f64: Float64) -> set[int]:
    """The options whose value is the float64 ``q · k / sqrt(d_k)``."""
    q, k = g["q"], g["k"]
    right = f64.dot(q, k) / _math.sqrt(len(q))
    values = option_values(claims, q, k, f64)
    return {i for i, v in enumerate(values) if abs(v - right) <= EPS}
