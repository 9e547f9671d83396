"""Kind ``score_matrix``: many queries, many keys: the score matrix ``Q Kᵀ``.

Givens: ``Q`` ``(n_q, d_k)`` and ``K`` ``(n_k, d_k)``, the shape drawn from the family's ``shapes``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from attnscore.practice.drawing import vector, vector_count
from attnscore.practice.kinds.base import Checker, Float64, Givens, Independent, Kind, Parts, expect
from attnscore.practice.problem import Problem, Question
from attnscore.practice.richtext import display, math, text
from attnscore.practice.worked import RAW_NOT_WEIGHT, dot, dot_steps, mat, numeric

if TYPE_CHECKING:
    from attnscore.practice.family import Family

__all__ = ["SCORE_MATRIX", "ScoreMatrix"]


class ScoreMatrix(Kind):
    """Every entry of ``Q Kᵀ``: row ``i`` of ``Q`` dotted with row ``j`` of ``K``."""

    name = "score_matrix"
    pl_elements = ("pl-number-input",)
    zone_title = "Dot-product scores"
    featured_fields = ("Q", "K")

    def check_featured(self, c: Checker, path: tuple[Any, ...], given: Mapping[str, Any], mode: str) -> bool:
        if not self.has_required(given, mode):
            return False
        q, k = len(given["Q"][0]), len(given["K"][0])
        return expect(c, q == k, path + ("K",), f"rows of width d_k={q} (the width of Q)", f"width {k}")

    def setup(self, fam: Family, rng: random.Random) -> dict[str, Any]:
        return {"shape": rng.choice(fam.shapes)}

    def draw(self, fam: Family, setup: Mapping[str, Any], rng: random.Random, crng: random.Random) -> Givens:
        grid = fam.grid()
        n_q, d, n_k = setup["shape"]
        return {
            "Q": tuple(vector(rng, grid, d) for _ in range(n_q)),
            "K": tuple(vector(rng, grid, d) for _ in range(n_k)),
        }

    def capacity(self, fam: Family) -> int:
        return sum(vector_count(fam.grid(), d) ** (n_q + n_k) for n_q, d, n_k in set(fam.shapes))

    def build(self, fam: Family, givens: Mapping[str, Any]) -> Parts:
        return _solution(fam, givens)

    def independent(self, p: Problem, f64: Float64) -> Independent:
        S = f64.score_matrix(p.givens["Q"], p.givens["K"])
        return {f"S_{i + 1}{j + 1}": v for i, row in enumerate(S) for j, v in enumerate(row)}, {}


SCORE_MATRIX = ScoreMatrix()


def _solution(fam: Family, g: Mapping[str, Any]) -> Parts:
    Q, K = g["Q"], g["K"]
    n_q, n_k, d = len(Q), len(K), len(Q[0])
    S = [[dot(qi, kj) for kj in K] for qi in Q]
    answers = tuple(
        numeric(f"S_{i + 1}{j + 1}", f"(Q K^\\top)_{{{i + 1}{j + 1}}}", S[i][j], fam.places)
        for i in range(n_q)
        for j in range(n_k)
    )
    steps = " \\\\ ".join(
        f"(Q K^\\top)_{{{i + 1}{j + 1}}} &= q_{{{i + 1}}} \\cdot k_{{{j + 1}}} = {dot_steps(Q[i], K[j])}"
        for i in range(n_q)
        for j in range(n_k)
    )
    return {
        "statement": (
            text(f"Each of the {n_q} rows of ")
            + math("Q")
            + text(f" is a query and each of the {n_k} rows of ")
            + math("K")
            + text(" is a key (width ")
            + math(f"d_k = {d}")
            + text(")."),
            display(f"Q = {mat(Q)}, \\qquad K = {mat(K)}"),
        ),
        "questions": (
            Question(
                "a",
                text("Compute the score matrix ")
                + math("Q K^\\top")
                + text(f" (shape {n_q} × {n_k}: one row per query, one column per key)."),
                numeric=answers,
            ),
        ),
        "solution": (
            text("Entry ")
            + math("(i, j)")
            + text(" is the score of query ")
            + math("i")
            + text(" against key ")
            + math("j")
            + text(": row ")
            + math("i")
            + text(" of ")
            + math("Q")
            + text(" dotted with row ")
            + math("j")
            + text(" of ")
            + math("K")
            + text(" (a row of ")
            + math("K")
            + text(", not a column: that is what the transpose does)."),
            display(f"\\begin{{aligned}} {steps} \\end{{aligned}}"),
            display(f"Q K^\\top = {mat(S)}"),
            RAW_NOT_WEIGHT,
        ),
        "figure": (),
    }
