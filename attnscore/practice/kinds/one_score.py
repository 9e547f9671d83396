"""Kind ``one_score``: one query, one key: compute ``q · k`` and say what its sign means.

Givens: ``q``, ``k`` (``(d_k,)`` each) and ``order``, the signs (1, 0, -1) of the "what does the
sign mean" options in display order. The sign of the score is drawn uniformly from positive /
zero / negative, so that no option text is right more often than another.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from attnscore.practice.claims import EPS
from attnscore.practice.drawing import perpendicular, vector, vector_count
from attnscore.practice.kinds.base import Float64, Givens, Independent, PairKind, Parts, claims_of, holding
from attnscore.practice.problem import ChoiceAnswer, Problem, Question
from attnscore.practice.richtext import display, math, text
from attnscore.practice.worked import (
    RAW_NOT_WEIGHT,
    Rejected,
    arrows,
    dot,
    dot_steps,
    letters,
    norm2,
    numeric,
    sign_word,
    vec,
)

if TYPE_CHECKING:
    from attnscore.practice.family import Family

__all__ = ["ONE_SCORE", "OneScore"]


class OneScore(PairKind):
    """One score and the meaning of its sign."""

    name = "one_score"
    pl_elements = ("pl-number-input", "pl-multiple-choice")
    zone_title = "Dot-product scores"
    ignored_givens = ("order",)  # the same numbers with the options in another order are the same problem

    def setup(self, fam: Family, rng: random.Random) -> dict[str, Any]:
        # The sign is drawn uniformly (zero is rare by chance, so those keys are built perpendicular).
        # Perpendicular pairs in 2-D are few (about 500 on a [-5, 5] grid), so half of those
        # variants move to a wider width, keeping duplicates under 1% at a class of 1,000.
        d, sign = rng.choice(fam.d_k), rng.choice((1, 0, -1))
        wider = [w for w in fam.d_k if w >= 3]
        if sign == 0 and d == 2 and wider and rng.random() < 0.5:
            d = rng.choice(wider)
        return {"d": d, "sign": sign}

    def draw(self, fam: Family, setup: Mapping[str, Any], rng: random.Random, crng: random.Random) -> Givens:
        grid = fam.grid()
        q = vector(rng, grid, setup["d"])
        sign = setup["sign"]
        k = perpendicular(rng, grid, q) if sign == 0 else vector(rng, grid, setup["d"])
        if sign != 0:
            score = dot(q, k)
            if score == 0:
                raise Rejected("zero answer")
            if (score > 0) != (sign > 0):
                k = tuple(-x for x in k)
                if any(x not in grid for x in k):
                    raise Rejected("negated key off the grid")
        order = [1, 0, -1]
        crng.shuffle(order)
        return {"q": q, "k": k, "order": tuple(order)}

    def capacity(self, fam: Family) -> int:
        return sum(vector_count(fam.grid(), d) ** 2 for d in set(fam.d_k))

    def build(self, fam: Family, givens: Mapping[str, Any]) -> Parts:
        return _solution(fam, givens)

    def independent(self, p: Problem, f64: Float64) -> Independent:
        score = f64.score(p.givens["q"], p.givens["k"])
        sign = 0 if abs(score) <= EPS else (1 if score > 0 else -1)
        return {"score": score}, {"meaning": holding(claims_of(p)["meaning"], lambda c: c[1] == sign)}


ONE_SCORE = OneScore()


def _solution(fam: Family, g: Mapping[str, Any]) -> Parts:
    q, k = g["q"], g["k"]
    s = dot(q, k)
    angle = ""
    if s != 0 and s * s == norm2(q) * norm2(k):
        angle = (
            "in exactly the same direction as the query (0°)"
            if s > 0
            else "in exactly the opposite direction to the query (180°)"
        )
    order = tuple(g.get("order", (1, 0, -1)))
    if sorted(order) != [-1, 0, 1]:
        raise ValueError(f"one_score 'order' must be a permutation of (1, 0, -1), found {order!r}")
    sign = order.index((s > 0) - (s < 0))
    by_sign = {
        1: text("Positive: the key is aligned with the query (the angle between them is less than 90°)."),
        0: text("Zero: the key is perpendicular to the query (90°); it offers nothing the query looks for."),
        -1: text("Negative: the key is anti-aligned (more than 90°); it points away from what the query looks for."),
    }
    options = tuple(by_sign[x] for x in order)
    meaning = {
        "aligned": "The score is positive, so the key is aligned with the query: it points roughly where "
        "the query looks.",
        "perpendicular": "The score is zero, so the key is perpendicular to the query: it offers nothing "
        "the query looks for.",
        "anti-aligned": "The score is negative, so the key is anti-aligned: it points away from what the "
        "query looks for.",
    }[sign_word(s)]
    if angle:
        meaning += f" Here the key points {angle}."
    return {
        "statement": (
            text("A query ")
            + math("q")
            + text(" describes what a token is looking for; a key ")
            + math("k")
            + text(" describes what another token offers. Their attention score is the dot product ")
            + math("q \\cdot k")
            + text("."),
            display(f"q = {vec(q)}, \\qquad k = {vec(k)}"),
        ),
        "questions": (
            Question(
                "a",
                text("Compute the score ") + math("q \\cdot k") + text("."),
                numeric=(numeric("score", "q \\cdot k", s, fam.places, allow_zero=True),),
            ),
            Question(
                "b",
                text("What does the sign of the score tell you about the key?"),
                choice=ChoiceAnswer("meaning", options, sign, tuple(("sign", x) for x in order), shuffled="order" in g),
            ),
        ),
        "solution": (
            text("(a) Multiply matching entries of ")
            + math("q")
            + text(" and ")
            + math("k")
            + text(" and add the products:"),
            display(f"q \\cdot k = {dot_steps(q, k)}"),
            text(f"(b) {meaning} Answer: {letters(3)[sign]}."),
            RAW_NOT_WEIGHT,
        ),
        "figure": arrows(q, (k,), ("k",)),
    }
