"""Kind ``softmax``: from raw scores to attention weights, in one of two modes.

- mode ``exact``: givens ``base`` and ``multipliers``; the scores are ``base + ln m``, so the
  weights are the plain fractions ``m / sum(m)``;
- mode ``ranking``: givens ``scores``, ``orderings`` and ``concepts`` (the options, placed by the
  ``choices`` stream): the sum of the raw scores, the order of the weights, one true statement.
"""

from __future__ import annotations

import math as _math
import random
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from attnscore.practice.claims import claim_holds
from attnscore.practice.kinds.base import Checker, Float64, Givens, Independent, Kind, Parts, claims_of, holding
from attnscore.practice.kinds.softmax_ranking import CONCEPTS, ranking_independent, ranking_options, ranking_solution
from attnscore.practice.problem import Problem, Question, which_key
from attnscore.practice.richtext import answer_form, display, math, text
from attnscore.practice.seeds import variant_rng
from attnscore.practice.worked import Rejected, approx, argmax_unique, letters, numeric

if TYPE_CHECKING:
    from attnscore.practice.family import Family

__all__ = ["SOFTMAX", "CONCEPTS", "Softmax"]


class Softmax(Kind):
    """Softmax weights (mode exact) or what softmax does to an order (mode ranking)."""

    name = "softmax"
    pl_elements = ("pl-number-input", "pl-multiple-choice")
    zone_title = "Softmax weights"
    modes = ("exact", "ranking")
    featured_fields = ("base", "multipliers", "scores")

    def featured_required(self, mode: str) -> tuple[str, ...]:
        return ("base", "multipliers") if mode == "exact" else ("scores",)

    def missing_field(self, name: str, mode: str) -> str:
        return f"a value for {name!r} ({self.name}, mode {mode})"

    def check_featured(self, c: Checker, path: tuple[Any, ...], given: Mapping[str, Any], mode: str) -> bool:
        if mode == "exact" and "scores" in given:
            c.fail(path + ("scores",), "base and multipliers in mode exact", "scores")
            return False
        if mode == "ranking" and ("base" in given or "multipliers" in given):
            c.fail(path + ("base",), "scores in mode ranking", "base/multipliers")
            return False
        return self.has_required(given, mode)

    def setup(self, fam: Family, rng: random.Random) -> dict[str, Any]:
        return {"n": rng.choice(fam.n_k)}

    def draw(self, fam: Family, setup: Mapping[str, Any], rng: random.Random, crng: random.Random) -> Givens:
        grid = fam.grid()
        n = setup["n"]
        if fam.mode == "exact":
            bases = [int(x) for x in grid if x.denominator == 1 and -2 <= x <= 2] or [0]
            return {
                "base": rng.choice(bases),
                "multipliers": tuple(rng.choice(fam.multipliers) for _ in range(n)),
            }
        scores = tuple(rng.sample(list(grid), n))
        return {"scores": scores, **ranking_options(scores, crng)}

    def capacity(self, fam: Family) -> int:
        grid = fam.grid()
        if fam.mode == "exact":
            bases = len([x for x in grid if x.denominator == 1 and -2 <= x <= 2]) or 1
            return sum(bases * len(fam.multipliers) ** n for n in set(fam.n_k))
        # the scores, and the three wrong orderings and the concept statements in display order
        g, n_concepts = len(grid), len(CONCEPTS)
        return sum(
            _math.perm(g, n) * _math.perm(_math.factorial(n) - 1, min(3, _math.factorial(n) - 1)) * 4
            for n in set(fam.n_k)
        ) * _math.factorial(n_concepts)

    def featured_givens(self, fam: Family, featured: Mapping[str, Any], number: int) -> Givens:
        givens = dict(featured)
        if "scores" in givens:
            crng = variant_rng(fam.id, fam.version, 0, None, number, "featured-choices")
            givens.update(ranking_options(givens["scores"], crng))
        return givens

    def build(self, fam: Family, givens: Mapping[str, Any]) -> Parts:
        return _softmax_exact(fam, givens) if "multipliers" in givens else ranking_solution(fam, givens)

    def independent(self, p: Problem, f64: Float64) -> Independent:
        g, claims = p.givens, claims_of(p)
        if "multipliers" in g:
            w = f64.softmax([g["base"] + _math.log(m) for m in g["multipliers"]])
            numbers = {f"w_{j + 1}": v for j, v in enumerate(w)}
            return numbers, {
                "largest_weight": holding(claims["largest_weight"], lambda c: claim_holds(("highest", c[1]), w))
            }
        return ranking_independent(p, f64)


SOFTMAX = Softmax()


def _ln_score(base: int, m: int) -> str:
    if m == 1:
        return str(base)
    if base == 0:
        return f"\\ln {m}"
    return f"{base} + \\ln {m}"


def _exp_factor(base: int) -> str:
    return "" if base == 0 else "e" if base == 1 else f"e^{{{base}}}"


def _softmax_exact(fam: Family, g: Mapping[str, Any]) -> Parts:
    base, ms = g["base"], g["multipliers"]
    n = len(ms)
    total = sum(ms)
    weights = [Fraction(m, total) for m in ms]
    if len(set(ms)) == 1:
        raise Rejected("all scores equal")
    answers = tuple(numeric(f"w_{j + 1}", f"w_{{{j + 1}}}", w, fam.places) for j, w in enumerate(weights))
    best = argmax_unique(weights)
    f = _exp_factor(base)

    def times_f(m: int) -> str:
        return str(m) if not f else f if m == 1 else f"{m}{f}"

    exps = " \\\\ ".join(f"e^{{s_{{{j + 1}}}}} &= e^{{{_ln_score(base, m)}}} = {times_f(m)}" for j, m in enumerate(ms))
    raw_sum = times_f(total)
    wlines = " \\\\ ".join(
        f"w_{{{j + 1}}} &= \\frac{{{times_f(m)}}}{{{raw_sum}}} = {approx(a)}"
        for j, (m, a) in enumerate(zip(ms, answers, strict=True))
    )
    return {
        "statement": (
            text(f"A query has the raw scores below against {n} keys (ln is the natural logarithm)."),
            display("s = [" + ",\\ ".join(_ln_score(base, m) for m in ms) + "]"),
        ),
        "questions": (
            Question(
                "a",
                text("Compute the attention weights ")
                + math("w = \\operatorname{softmax}(s)")
                + text(", ")
                + answer_form(fam.places)
                + text("."),
                numeric=answers,
            ),
            which_key("b", "Which key gets the largest weight?", "largest_weight", n, best, "largest_weight"),
        ),
        "solution": (
            text("(a) Softmax exponentiates each score and divides by the sum: ")
            + math("w_j = e^{s_j} / \\sum_i e^{s_i}")
            + text(". Since ")
            + math("e^{\\ln m} = m")
            + text(":"),
            display(f"\\begin{{aligned}} {exps} \\end{{aligned}}"),
            text("The sum is ")
            + math(raw_sum)
            + text(" and any common factor cancels, so each weight is a plain fraction:"),
            display(f"\\begin{{aligned}} {wlines} \\end{{aligned}}"),
            text(
                "(b) Softmax keeps the order of the scores, so the largest score wins: key "
                f"{best + 1}. Answer: {letters(n)[best]}."
            ),
            text(
                "Raw scores are not weights: they need not be positive and need not add up to 1. "
                "The weights are positive and add up to exactly 1."
            ),
        ),
        "figure": (),
    }
