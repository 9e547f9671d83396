"""Mode ``ranking`` of kind ``softmax``: raw scores are not weights, and softmax keeps their order.

Givens: ``scores`` (pairwise different), ``orderings`` (the right order of the weights among
wrong ones) and ``concepts`` (one true statement about scores and weights among three false
ones, ids of :data:`CONCEPTS`), both in display order.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from attnscore.practice.claims import EPS
from attnscore.practice.drawing import place
from attnscore.practice.kinds.base import Float64, Independent, Parts, claims_of, holding
from attnscore.practice.problem import ChoiceAnswer, Problem, Question
from attnscore.practice.richtext import Rich, display, math, text
from attnscore.practice.worked import Rejected, check_distinct, letters, num, numeric, paren, vec

if TYPE_CHECKING:
    from attnscore.practice.family import Family

__all__ = ["CONCEPTS", "ranking_options", "ranking_solution", "ranking_independent"]


def ranking_options(scores: Sequence[Fraction], crng: random.Random) -> dict[str, Any]:
    """Orderings (the right one + mistakes) and concept statements, placed by ``crng``."""
    n = len(scores)
    right = tuple(sorted(range(n), key=lambda j: -scores[j]))
    mistakes = [
        tuple(reversed(right)),
        tuple(sorted(range(n), key=lambda j: -abs(scores[j]))),
        tuple(range(n)),
    ]
    rest = [p for p in itertools.permutations(range(n)) if p != right and p not in mistakes]
    crng.shuffle(rest)
    distractors: list[tuple[int, ...]] = []
    for p in mistakes + rest:
        if p != right and p not in distractors:
            distractors.append(p)
    orderings, _ = place(right, distractors[: min(3, len(distractors))], crng)
    # One true statement among three false ones; the true one's rank by length is drawn uniformly
    # (the statements differ in length), so "pick the longest" gives nothing away.
    length = {c[0]: len(c[1]) for c in CONCEPTS}
    target = crng.randrange(4)
    fits = [
        (t[0], fs)
        for t in CONCEPTS
        if t[2]
        for fs in itertools.combinations([c[0] for c in CONCEPTS if not c[2]], 3)
        if sum(1 for f in fs if length[f] < length[t[0]]) == target
    ]
    true_id, chosen = crng.choice(fits)
    falses = list(chosen)
    crng.shuffle(falses)
    concepts, _ = place(true_id, falses, crng)
    return {"orderings": tuple(orderings), "concepts": tuple(concepts)}


def ranking_independent(p: Problem, f64: Float64) -> Independent:
    """The sum, the order of the weights and the true concept, re-derived in float64."""
    g, claims = p.givens, claims_of(p)
    s = [float(x) for x in g["scores"]]
    w = f64.softmax(s)
    order = f64.descending(w)
    concept = _concept_truths(s, w, order)
    if set(concept) != {c[0] for c in CONCEPTS}:
        raise ValueError("the independent check knows a different set of concept statements than CONCEPTS")
    return {"sum": f64.total(s)}, {
        "ordering": holding(claims["ordering"], lambda c: tuple(c[1]) == order),
        "concept": holding(claims["concept"], lambda c: concept[c[1]]),
    }


def _concept_truths(s: list[float], w: list[float], order: tuple[int, ...]) -> dict[str, bool]:
    """Each concept statement judged on float64 scores ``s`` and weights ``w`` (shape ``(n_k,)``)."""
    total = sum(s)
    return {
        "keeps_order": all(v > 0 for v in w)
        and abs(sum(w) - 1) <= EPS
        and order == tuple(sorted(range(len(s)), key=lambda j: -s[j])),
        "scores_are_weights": all(v >= 0 for v in s) and abs(total - 1) <= EPS,
        "divide_by_sum": total != 0 and all(abs(v / total - x) <= 1e-6 for v, x in zip(s, w, strict=True)),
        "negative_weight": any(x < 0 for x in w),
        "positive_sum_one": all(v > 0 for v in w) and abs(sum(w) - 1) <= EPS,
        "larger_wins": all(
            (w[i] > w[j]) == (s[i] > s[j]) for i in range(len(s)) for j in range(len(s)) if s[i] != s[j]
        ),
        "largest_takes_all": abs(max(w) - 1) <= EPS,
        "zero_score_zero_weight": any(x == 0 and abs(v) <= EPS for x, v in zip(s, w, strict=True)),
    }


#: Statements about raw scores and softmax weights: (id, text, is it true for every score vector?).
CONCEPTS = (
    (
        "keeps_order",
        "Softmax keeps the order of the scores, makes every weight positive and makes the weights add up to 1.",
        True,
    ),
    (
        "scores_are_weights",
        "The raw scores can be used as weights directly: a larger score already means more attention.",
        False,
    ),
    ("divide_by_sum", "The weights are the scores divided by their sum.", False),
    ("negative_weight", "A key with a negative score gets a negative weight.", False),
    ("positive_sum_one", "Every weight is positive and the weights add up to 1.", True),
    ("larger_wins", "A larger score always gets a larger weight.", True),
    (
        "largest_takes_all",
        "The key with the largest score gets all of the attention (weight 1) and every other key gets weight 0.",
        False,
    ),
    ("zero_score_zero_weight", "A key whose score is 0 gets weight 0.", False),
)


def _ordering_text(perm: Sequence[int]) -> Rich:
    return math(" > ".join(f"w_{{{j + 1}}}" for j in perm))


def ranking_solution(fam: Family, g: Mapping[str, Any]) -> Parts:
    s = g["scores"]
    n = len(s)
    if len(set(s)) != n:
        raise Rejected("tie for highest")
    total = sum(s, Fraction(0))
    if total == 1:
        raise Rejected("scores add up to 1")
    sum_answer = numeric("sum", "s_1 + \\cdots + s_n", total, fam.places)
    right = tuple(sorted(range(n), key=lambda j: -s[j]))
    orderings = g.get("orderings") or (right, tuple(reversed(right)), tuple(range(n)))
    opts = tuple(_ordering_text(p) for p in orderings)
    check_distinct(opts)
    concept_ids = g.get("concepts") or tuple(c[0] for c in CONCEPTS[:4])
    concepts = {c[0]: c for c in CONCEPTS}
    c_opts = tuple(text(concepts[c][1]) for c in concept_ids)
    order_txt = " > ".join(f"w_{{{j + 1}}}" for j in right)
    return {
        "statement": (
            text(f"A query has these raw scores against {n} keys:"),
            display(f"s = {vec(s)}"),
        ),
        "questions": (
            Question("a", text("What do the raw scores add up to?"), numeric=(sum_answer,)),
            Question(
                "b",
                text("Without computing any exponential, order the attention weights ")
                + math("w = \\operatorname{softmax}(s)")
                + text(" from largest to smallest."),
                choice=ChoiceAnswer(
                    "ordering",
                    opts,
                    orderings.index(right),
                    tuple(("ordering", tuple(p)) for p in orderings),
                    shuffled=True,
                ),
            ),
            Question(
                "c",
                text("Which statement about scores and weights is true?"),
                choice=ChoiceAnswer(
                    "concept",
                    c_opts,
                    next(i for i, c in enumerate(concept_ids) if concepts[c][2]),
                    tuple(("concept", c) for c in concept_ids),
                    shuffled=True,
                ),
            ),
        ),
        "solution": (
            text("(a) ")
            + math(" + ".join(paren(x) for x in s) + f" = {num(total)}")
            + text(". The raw scores do not add up to 1 (and can be negative), so they are not weights."),
            text("(b) Softmax ")
            + math("w_j = e^{s_j} / \\sum_i e^{s_i}")
            + text(
                " is increasing in each score: a larger score always gets a larger weight. Sorting the scores gives "
            )
            + math(order_txt)
            + text(f". Answer: {letters(len(orderings))[orderings.index(right)]}."),
            text("(c) Every weight ")
            + math("e^{s_j} / \\sum_i e^{s_i}")
            + text(
                " is positive, the weights add up to 1 and their order is the order of the scores. "
                "Dividing by the sum of the raw scores fails as soon as a score is negative "
                "or the sum is zero. "
                f"Answer: {letters(len(concept_ids))[next(i for i, c in enumerate(concept_ids) if concepts[c][2])]}."
            ),
        ),
        "figure": (),
    }
