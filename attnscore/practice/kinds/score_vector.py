"""Kind ``score_vector``: one query against several keys: the score vector ``s = K q`` and the best key.

Givens: ``q`` ``(d_k,)`` and ``keys`` ``(n_k, d_k)``, pairwise different.
"""

from __future__ import annotations

import math as _math
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from attnscore.practice.claims import claim_holds
from attnscore.practice.drawing import distinct_keys, vector, vector_count
from attnscore.practice.kinds.base import (
    Checker,
    Float64,
    Givens,
    Independent,
    Kind,
    Parts,
    Vector,
    claims_of,
    expect,
    holding,
)
from attnscore.practice.problem import Problem, Question, which_key
from attnscore.practice.richtext import display, math, text
from attnscore.practice.worked import (
    RAW_NOT_WEIGHT,
    argmax_unique,
    arrows,
    dot,
    dot_steps,
    letters,
    num,
    numeric,
    vec,
)

if TYPE_CHECKING:
    from attnscore.practice.family import Family

__all__ = ["SCORE_VECTOR", "ScoreVector"]


class ScoreVector(Kind):
    """The scores of one query against ``n_k`` keys, and the most relevant key."""

    name = "score_vector"
    pl_elements = ("pl-number-input", "pl-multiple-choice")
    zone_title = "Dot-product scores"
    featured_fields = ("q", "keys")
    pair_keys = 0

    def check_featured(self, c: Checker, path: tuple[Any, ...], given: Mapping[str, Any], mode: str) -> bool:
        if not self.has_required(given, mode):
            return False
        q, k = len(given["q"]), len(given["keys"][0])
        return expect(c, k == q, path + ("keys",), f"keys of width {q} (the width of q)", f"width {k}")

    def setup(self, fam: Family, rng: random.Random) -> dict[str, Any]:
        return {"d": rng.choice(fam.d_k), "n": rng.choice(fam.n_k)}

    def draw(self, fam: Family, setup: Mapping[str, Any], rng: random.Random, crng: random.Random) -> Givens:
        grid = fam.grid()
        return {
            "q": vector(rng, grid, setup["d"]),
            "keys": distinct_keys(rng, grid, setup["n"], setup["d"]),
        }

    def capacity(self, fam: Family) -> int:
        grid = fam.grid()
        return sum(
            vector_count(grid, d) * _math.perm(vector_count(grid, d), n) for d in set(fam.d_k) for n in set(fam.n_k)
        )

    def pair_givens(self, q: Vector, keys: Sequence[Vector]) -> Givens:
        return {"q": tuple(q), "keys": tuple(tuple(k) for k in keys)}

    def build(self, fam: Family, givens: Mapping[str, Any]) -> Parts:
        return _solution(fam, givens)

    def independent(self, p: Problem, f64: Float64) -> Independent:
        s = f64.scores(p.givens["q"], p.givens["keys"])
        numbers = {f"s_{j + 1}": v for j, v in enumerate(s)}
        return numbers, {"most_relevant": holding(claims_of(p)["most_relevant"], lambda c: claim_holds(c, s))}


SCORE_VECTOR = ScoreVector()


def _solution(fam: Family, g: Mapping[str, Any]) -> Parts:
    q, keys = g["q"], g["keys"]
    n = len(keys)
    s = [dot(q, k) for k in keys]
    answers = tuple(numeric(f"s_{j + 1}", f"s_{{{j + 1}}}", v, fam.places) for j, v in enumerate(s))
    best = argmax_unique(s)
    key_lines = ",\\qquad ".join(f"k_{{{j + 1}}} = {vec(k)}" for j, k in enumerate(keys))
    steps = " \\\\ ".join(f"s_{{{j + 1}}} &= q \\cdot k_{{{j + 1}}} = {dot_steps(q, k)}" for j, k in enumerate(keys))
    total = sum(s, Fraction(0))
    return {
        "statement": (
            text(f"One query is compared with {n} keys. Each key gets the score ")
            + math("s_j = q \\cdot k_j")
            + text("."),
            display(f"q = {vec(q)}, \\qquad {key_lines}"),
        ),
        "questions": (
            Question(
                "a",
                text("Compute the score vector ") + math(f"s = (s_1, \\ldots, s_{{{n}}})") + text("."),
                numeric=answers,
            ),
            which_key("b", "Which key is most relevant to the query?", "most_relevant", n, best, "key_highest"),
        ),
        "solution": (
            text("(a) Score the query against each key in turn:"),
            display(f"\\begin{{aligned}} {steps} \\end{{aligned}}"),
            text("Stacked as rows of the key matrix ")
            + math("K")
            + text(", this is ")
            + math(f"s = K q = {vec(s)}")
            + text("."),
            text("(b) The largest score is ")
            + math(f"s_{{{best + 1}}} = {num(s[best])}")
            + text(f", so key {best + 1} matches the query best. Answer: {letters(n)[best]}."),
            RAW_NOT_WEIGHT + text(" Here they add up to ") + math(num(total)) + text("."),
        ),
        "figure": arrows(q, keys, [f"k{j + 1}" for j in range(n)]),
    }
