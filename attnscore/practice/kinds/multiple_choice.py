"""Kind ``multiple_choice``: one multiple-choice question per variant, from one of three templates.

Givens: ``template`` plus

- ``highest_key``: ``q`` and ``keys``, four key options in display order: which scores highest?
- ``true_statement``: ``q``, ``keys`` (three) and ``claims``, four statements in display order
  (:mod:`attnscore.practice.claims`): which one is true?
- ``scaled_value``: ``q``, ``k`` and ``options`` (:mod:`attnscore.practice.kinds.scaled_value`).

``highest_key`` and ``true_statement`` draw the right option's rank by key length and by text
length, and its position, in the setup, so that no such feature gives it away.
"""

from __future__ import annotations

import itertools
import math as _math
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from attnscore.practice.claims import claim_holds, claim_text, claim_text_length, claim_truth
from attnscore.practice.drawing import distinct_keys, pair_count, vector, vector_count
from attnscore.practice.family import MC_TEMPLATES
from attnscore.practice.kinds import scaled_value
from attnscore.practice.kinds.base import Float64, Givens, Independent, Kind, Parts, claims_of, holding
from attnscore.practice.numbers import format_exact
from attnscore.practice.problem import ChoiceAnswer, Problem, Question
from attnscore.practice.richtext import display, math, text
from attnscore.practice.worked import (
    Rejected,
    argmax_unique,
    arrows,
    check_distinct,
    dot,
    letters,
    num,
    vec,
    vector_text,
)

if TYPE_CHECKING:
    from fractions import Fraction

    from attnscore.practice.family import Family

__all__ = ["MULTIPLE_CHOICE", "TEMPLATES", "MultipleChoice"]

#: The question templates a family may list (``templates: [...]``).
TEMPLATES = MC_TEMPLATES


class MultipleChoice(Kind):
    """A single multiple-choice question: the highest key, the true statement or the scaled value."""

    name = "multiple_choice"
    pl_elements = ("pl-multiple-choice",)
    zone_title = "Concepts"
    d_k_widths = (1, 2, 3, 4, 16, 64)

    def setup(self, fam: Family, rng: random.Random) -> dict[str, Any]:
        template = rng.choice(fam.templates)
        d = rng.choice(scaled_value.scaled_widths(fam) if template == "scaled_value" else small_widths(fam))
        # Target ranks of the right option among the four, each uniform: by magnitude (or key length)
        # and by text length, so that neither gives the answer away. All options of "which scaled
        # score" share the right one's sign, so its rank by signed value is uniform too.
        # The right key's position is fixed here too (not per attempt), so that acceptance never
        # depends on it.
        ranks, position = (rng.randrange(4), rng.randrange(4)), rng.randrange(4)
        return {"template": template, "d": d, "ranks": ranks, "position": position}

    def draw(self, fam: Family, setup: Mapping[str, Any], rng: random.Random, crng: random.Random) -> Givens:
        grid = fam.grid()
        template, d = setup["template"], setup["d"]
        q = vector(rng, grid, d)  # drawn for every template (scaled_value draws its own), as variants always were
        if template == "highest_key":
            return {
                "template": template,
                "q": q,
                "keys": _highest_key_options(q, grid, d, setup["ranks"], setup["position"], rng),
            }
        if template == "true_statement":
            return _true_statement(q, grid, d, setup, rng)
        return scaled_value.draw(fam, setup, rng, crng)

    def capacity(self, fam: Family) -> int:
        grid = fam.grid()
        total = 0
        for template in set(fam.templates):
            if template == "highest_key":
                total += sum(
                    vector_count(grid, d) * _math.perm(vector_count(grid, d), 4) for d in set(small_widths(fam))
                )
            elif template == "true_statement":
                # three keys; four of at most 22 distinct statements, in order
                total += sum(
                    vector_count(grid, d) * _math.perm(vector_count(grid, d), 3) for d in set(small_widths(fam))
                ) * _math.perm(22, 4)
            else:
                total += sum(pair_count(grid, d) for d in set(scaled_value.scaled_widths(fam))) * _math.perm(10, 4)
        return total

    def build(self, fam: Family, givens: Mapping[str, Any]) -> Parts:
        template = givens["template"]
        if template == "highest_key":
            return _highest_key_solution(fam, givens)
        if template == "true_statement":
            return _true_statement_solution(fam, givens)
        return scaled_value.solution(fam, givens)

    def independent(self, p: Problem, f64: Float64) -> Independent:
        g, claims = p.givens, claims_of(p)
        template = g["template"]
        if template in ("highest_key", "true_statement"):
            s = f64.scores(g["q"], g["keys"])
            name = "highest" if template == "highest_key" else "true_statement"
            return {}, {name: holding(claims[name], lambda c: claim_holds(c, s))}
        return {}, {"scaled": scaled_value.independent(g, claims["scaled"], f64)}

    def option_features(self, p: Problem, choice: ChoiceAnswer, f64: Float64) -> dict[str, list[float]]:
        """``magnitude`` and ``value`` of "which scaled score" options; ``norm`` (squared length) of key options."""
        g = p.givens
        if choice.name == "scaled":
            values = scaled_value.option_values(choice.claims, g["q"], g["k"], f64)
            return {"magnitude": [abs(v) for v in values], "value": values}
        if choice.name == "highest":
            return {"norm": [float(sum(float(x) ** 2 for x in key)) for key in g["keys"]]}
        return {}


MULTIPLE_CHOICE = MultipleChoice()


def small_widths(fam: Family) -> list[int]:
    """Widths for "highest key" and "true statement": 2 to 4 (default 2)."""
    return [d for d in fam.d_k if 2 <= d <= 4] or [2]


def _true_statement(
    q: tuple[Fraction, ...], grid: Sequence[Fraction], d: int, setup: Mapping[str, Any], rng: random.Random
) -> Givens:
    """Three keys and four statements about their scores, exactly one of them true."""
    keys = distinct_keys(rng, grid, 3, d)
    s = [dot(q, key) for key in keys]
    top = max(s)
    trues: list[tuple[Any, ...]] = [("score_is", j, v) for j, v in enumerate(s)]
    trues += [("negative", j) for j, v in enumerate(s) if v < 0]
    if s.count(top) == 1:
        trues.append(("highest", s.index(top)))
    false_pool: list[tuple[Any, ...]] = [("highest", j) for j, v in enumerate(s) if v != top]
    false_pool += [("score_is", j, -v) for j, v in enumerate(s) if v != 0]
    false_pool += [("score_is", j, s[i]) for j in range(3) for i in range(3) if s[i] != s[j]]
    false_pool += [("negative", j) for j, v in enumerate(s) if v > 0]
    false_pool += [("perpendicular", j) for j, v in enumerate(s) if v != 0]
    if not (all(v >= 0 for v in s) and sum(s) == 1):
        false_pool.append(("are_weights",))
    false_pool = list(dict.fromkeys(false_pool))
    if len(false_pool) < 3:
        raise Rejected("too few false statements")
    # The true statement's rank by text length (ties broken by position) is drawn uniformly.
    chosen = rng.choice(trues)
    length = {c: claim_text_length(c) for c in [chosen, *false_pool]}
    rng.shuffle(false_pool)
    for falses in itertools.islice(itertools.combinations(false_pool, 3), 200):
        if _arrangeable(chosen, falses, length, setup["position"], setup["ranks"][1]):
            claims = _arrange(chosen, falses, length, setup["position"], setup["ranks"][1], rng)
            return {"template": "true_statement", "q": q, "keys": keys, "claims": claims}
    raise Rejected("distractor ranks")


def _highest_key_options(
    q: Sequence[Fraction],
    grid: Sequence[Fraction],
    d: int,
    ranks: Sequence[int],
    position: int,
    rng: random.Random,
) -> tuple[tuple[Fraction, ...], ...]:
    """Four keys in display order: the highest-scoring one and three lower ones, drawn from nine.

    The right key sits at ``position``; its rank by squared length is ``ranks[0]`` (no ties) and
    its rank by text length, ties broken by position as ``--verify`` ranks them, is ``ranks[1]``.
    """
    keys = distinct_keys(rng, grid, 9, d)
    s = [dot(q, key) for key in keys]
    best = s.index(max(s))
    if s.count(s[best]) > 1:
        raise Rejected("tie for highest")
    right = keys[best]
    pool = [key for j, key in enumerate(keys) if j != best and s[j] != 0 and dot(key, key) != dot(right, right)]
    norm = {key: dot(key, key) for key in pool + [right]}
    length = {key: len(vector_text(key)) for key in pool + [right]}
    fits = [
        triple
        for triple in itertools.combinations(pool, 3)
        if sum(1 for key in triple if norm[key] < norm[right]) == ranks[0]
        and _arrangeable(right, triple, length, position, ranks[1])
    ]
    if not fits:
        raise Rejected("distractor ranks")
    return _arrange(right, rng.choice(fits), length, position, ranks[1], rng)


def _before(right: Any, triple: Sequence[Any], length: Any, target: int) -> tuple[int, int]:
    """(equal-length options that must come before ``right``, how many options tie with it)."""
    shorter = sum(1 for o in triple if length[o] < length[right])
    return target - shorter, sum(1 for o in triple if length[o] == length[right])


def _arrangeable(right: Any, triple: Sequence[Any], length: Any, position: int, target: int) -> bool:
    """Whether ``right`` at ``position`` among ``triple`` can get rank ``target`` by (text length, position)."""
    before, equal = _before(right, triple, length, target)
    return max(0, equal - (3 - position)) <= before <= min(equal, position)


def _arrange(
    right: Any, triple: Sequence[Any], length: Any, position: int, target: int, rng: random.Random
) -> tuple[Any, ...]:
    """The four options in display order, ``right`` at ``position`` with rank ``target`` by
    (text length, position), the rank ``--verify`` tests (see :func:`_arrangeable`)."""
    before, _ = _before(right, triple, length, target)
    equal = [o for o in triple if length[o] == length[right]]
    others = [o for o in triple if length[o] != length[right]]
    rng.shuffle(equal)
    rng.shuffle(others)
    first = equal[:before] + others[: position - before]
    rest = equal[before:] + others[position - before :]
    rng.shuffle(first)
    rng.shuffle(rest)
    return (*first, right, *rest)


def _highest_key_solution(fam: Family, g: Mapping[str, Any]) -> Parts:
    q = g["q"]
    keys = g["keys"]
    s = [dot(q, k) for k in keys]
    best = argmax_unique(s)
    if 0 in s:
        raise Rejected("zero answer")
    opts = tuple(math(vector_text(k)) for k in keys)
    check_distinct(opts)
    steps = ",\\quad ".join(f"q \\cdot {vec(k)} = {num(v)}" for k, v in zip(keys, s, strict=True))
    return {
        "statement": (text("The query is ") + math(f"q = {vec(q)}") + text("."),),
        "questions": (
            Question(
                "a",
                text("Which key scores highest against this query?"),
                choice=ChoiceAnswer(
                    "highest",
                    opts,
                    best,
                    tuple(("key_highest", j) for j in range(len(keys))),
                    shuffled=True,
                ),
            ),
        ),
        "solution": (
            text("Score every key:"),
            display(steps),
            text(f"The highest score is {format_exact(s[best])}. Answer: {letters(len(keys))[best]}."),
        ),
        "figure": arrows(q, keys, [f"{c}" for c in letters(len(keys))]),
    }


def _true_statement_solution(fam: Family, g: Mapping[str, Any]) -> Parts:
    q = g["q"]
    keys, claims = g["keys"], g["claims"]
    s = [dot(q, k) for k in keys]
    if 0 in s:
        raise Rejected("zero answer")
    truths = [claim_truth(c, s) for c in claims]
    if truths.count(True) != 1:
        raise Rejected("not exactly one true statement")
    opts = tuple(claim_text(c) for c in claims)
    check_distinct(opts)
    right = truths.index(True)
    key_lines = ",\\qquad ".join(f"k_{{{j + 1}}} = {vec(k)}" for j, k in enumerate(keys))
    steps = ",\\quad ".join(f"s_{{{j + 1}}} = {num(v)}" for j, v in enumerate(s))
    return {
        "statement": (text("A query and three keys:"), display(f"q = {vec(q)}, \\qquad {key_lines}")),
        "questions": (
            Question(
                "a",
                text("Which statement about the scores is true?"),
                choice=ChoiceAnswer("true_statement", opts, right, tuple(claims), shuffled=True),
            ),
        ),
        "solution": (
            text("Score every key: ") + math(steps) + text("."),
            text(
                "Check each statement against these scores: only one holds, option "
                f"{letters(len(claims))[right]}. (Raw scores are not weights: they can be negative and "
                "need not add up to 1.)"
            ),
        ),
        "figure": arrows(q, keys, [f"k{j + 1}" for j in range(len(keys))]),
    }
