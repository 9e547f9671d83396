"""Kind ``scaled_score``: the raw score ``q · k`` and the scaled score ``q · k / sqrt(d_k)``.

Givens: ``q``, ``k`` with ``d_k`` in :data:`SCALED_WIDTHS` (perfect squares, so that
``sqrt(d_k)`` is an integer); long vectors (``d_k >= 16``) are two constant halves.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from math import isqrt
from typing import TYPE_CHECKING, Any

from attnscore.practice.drawing import pair_count, scaled_pair
from attnscore.practice.kinds.base import Checker, Float64, Givens, Independent, PairKind, Parts, expect
from attnscore.practice.problem import Problem, Question
from attnscore.practice.richtext import display, math, text
from attnscore.practice.worked import approx, arrows, describe_long, dot, dot_steps, num, numeric, paren, vec

if TYPE_CHECKING:
    from attnscore.practice.family import Family

__all__ = ["SCALED_SCORE", "SCALED_WIDTHS", "ScaledScore"]

#: The widths ``d_k`` of scaled-score problems: perfect squares.
SCALED_WIDTHS = (1, 4, 16, 64)


class ScaledScore(PairKind):
    """Scale by ``sqrt(d_k)``, not by ``d_k``."""

    name = "scaled_score"
    pl_elements = ("pl-number-input",)
    zone_title = "Scaled scores"
    d_k_widths = SCALED_WIDTHS
    d_k_why = " (perfect squares, so that sqrt(d_k) is an integer)"
    d_k_default = SCALED_WIDTHS

    def check_featured(self, c: Checker, path: tuple[Any, ...], given: Mapping[str, Any], mode: str) -> bool:
        if not super().check_featured(c, path, given, mode):
            return False
        d = len(given["q"])
        why = f"d_k in {list(SCALED_WIDTHS)} (so that sqrt(d_k) is an integer)"
        return expect(c, d in SCALED_WIDTHS, path + ("q",), why, f"d_k={d}")

    def setup(self, fam: Family, rng: random.Random) -> dict[str, Any]:
        return {"d": rng.choice(fam.d_k)}

    def draw(self, fam: Family, setup: Mapping[str, Any], rng: random.Random, crng: random.Random) -> Givens:
        q, k = scaled_pair(rng, fam.grid(), setup["d"])
        return {"q": q, "k": k}

    def capacity(self, fam: Family) -> int:
        return sum(pair_count(fam.grid(), d) for d in set(fam.d_k))

    def build(self, fam: Family, givens: Mapping[str, Any]) -> Parts:
        return _solution(fam, givens)

    def independent(self, p: Problem, f64: Float64) -> Independent:
        q, k = p.givens["q"], p.givens["k"]
        return {"raw": f64.score(q, k), "scaled": f64.scaled(q, k)}, {}


SCALED_SCORE = ScaledScore()


def _solution(fam: Family, g: Mapping[str, Any]) -> Parts:
    q, k = g["q"], g["k"]
    d = len(q)
    root = isqrt(d)
    s = dot(q, k)
    scaled = s / root
    raw = numeric("raw", "q \\cdot k", s, fam.places)
    out = numeric("scaled", "\\frac{q \\cdot k}{\\sqrt{d_k}}", scaled, fam.places)
    if d > 6:
        givens = describe_long("q", q) + text("; ") + describe_long("k", k) + text(".")
        half = d // 2
        work = (
            f"q \\cdot k = {half} \\cdot {paren(q[0])} \\cdot {paren(k[0])} + {half} \\cdot {paren(q[-1])} \\cdot "
            f"{paren(k[-1])} = {num(half * q[0] * k[0])} + {paren(half * q[-1] * k[-1])} = {num(s)}"
        )
    else:
        givens = display(f"q = {vec(q)}, \\qquad k = {vec(k)}")
        work = f"q \\cdot k = {dot_steps(q, k)}"
    return {
        "statement": (
            text("Scaled dot-product attention divides each score by ")
            + math("\\sqrt{d_k}")
            + text(", the square root of the query/key width. Here ")
            + math(f"d_k = {d}")
            + text("."),
            givens,
        ),
        "questions": (
            Question("a", text("Compute the raw score ") + math("q \\cdot k") + text("."), numeric=(raw,)),
            Question(
                "b",
                text("Compute the scaled score ") + math("q \\cdot k / \\sqrt{d_k}") + text("."),
                numeric=(out,),
            ),
        ),
        "solution": (
            text("(a) The raw score is the dot product:"),
            display(work),
            text("(b) ") + math(f"\\sqrt{{d_k}} = \\sqrt{{{d}}} = {root}") + text(", so"),
            display(f"\\frac{{q \\cdot k}}{{\\sqrt{{d_k}}}} = \\frac{{{num(s)}}}{{{root}}} = {approx(out)}"),
            text("Why scale: with random entries the spread of a raw score grows like ")
            + math("\\sqrt{d_k}")
            + text(
                "; dividing by it keeps the scores in a range where softmax is not saturated. "
                "Divide by the square root of "
            )
            + math("d_k")
            + text(", not by ")
            + math("d_k")
            + text(" itself."),
        ),
        "figure": arrows(q, (k,), ("k",)) if d == 2 else (),
    }
