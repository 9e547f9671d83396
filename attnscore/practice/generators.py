"""Generate variants: draw hand-friendly numbers, reject degenerate ones, count acceptance.

Each variant ``index`` of a family draws from two private streams (see :mod:`attnscore.practice.seeds`):
``givens`` (the numbers, the shape, the template) and ``choices`` (where the correct option goes).
A variant first fixes its *setup* (width, shape, template, target sign) with one draw, then
repeats *attempts* until the constraints accept the numbers. Nothing reads global random state.

Givens layout per kind (all numbers exact Fractions):

- ``one_score``: ``q``, ``k`` (``(d_k,)`` each);
- ``score_vector``: ``q`` ``(d_k,)``, ``keys`` ``(n_k, d_k)``;
- ``score_matrix``: ``Q`` ``(n_q, d_k)``, ``K`` ``(n_k, d_k)``;
- ``scaled_score``: ``q``, ``k`` with ``d_k`` in {1, 4, 16, 64} (long vectors are two constant halves);
- ``softmax``: ``base`` and ``multipliers`` (mode exact: scores ``base + ln m``), or ``scores``,
  ``orderings``, ``concepts`` (mode ranking);
- ``multiple_choice``: ``template`` plus ``q`` and ``keys`` / ``claims`` / ``k`` and ``options``.

Example:
    >>> from attnscore.practice.families import parse_family_text
    >>> fam = parse_family_text("id: demo\\nversion: 1\\nkind: one_score\\ntitle: Demo\\n", "demo.yaml")[0]
    >>> generate_variant(fam, base_seed=42, student=None, index=0).uid
    'demo-v1-s42-0000'
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from attnscore.practice.families import Family
from attnscore.practice.problem import Problem
from attnscore.practice.seeds import variant_rng, variant_seed
from attnscore.practice.solutions import CONCEPTS, Rejected, build_problem, dot

__all__ = [
    "GenerationError",
    "GenerationStats",
    "generate_variant",
    "generate_family",
    "featured_problems",
    "fixed_problem",
    "givens_key",
]


class GenerationError(RuntimeError):
    """No acceptable variant within ``max_attempts`` draws.

    Attributes:
        family_id, index: the variant that failed; rejections: reason -> count.
    """

    def __init__(self, family_id: str, index: int, attempts: int, rejections: Counter[str]) -> None:
        reasons = ", ".join(f"{r} x{n}" for r, n in rejections.most_common())
        super().__init__(
            f"{family_id}: variant {index}: no acceptable numbers in {attempts} attempts ({reasons}); "
            "widen 'values' or raise 'max_attempts'"
        )
        self.family_id, self.index, self.rejections = family_id, index, rejections


@dataclass
class GenerationStats:
    """Acceptance figures for one family: variants made, draws tried, rejection reasons."""

    family_id: str
    variants: int = 0
    attempts: int = 0
    rejections: Counter[str] = field(default_factory=Counter)

    @property
    def acceptance_rate(self) -> float:
        """Accepted draws / all draws (1.0 when nothing was drawn)."""
        return self.variants / self.attempts if self.attempts else 1.0


# ---------------------------------------------------------------- drawing helpers


def _vector(rng: random.Random, grid: Sequence[Fraction], d: int) -> tuple[Fraction, ...]:
    v = tuple(rng.choice(grid) for _ in range(d))
    if not any(v):
        raise Rejected("zero vector")
    return v


def _nonzero(grid: Sequence[Fraction]) -> list[Fraction]:
    return [x for x in grid if x != 0]


def _halves(rng: random.Random, grid: Sequence[Fraction], d: int) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    """A long query ``[a, ..., a2]`` and key ``[b, ..., c]`` in constant halves (for d_k >= 16)."""
    nz = _nonzero(grid)
    a, a2, b, c = (rng.choice(nz) for _ in range(4))
    half = d // 2
    return (a,) * half + (a2,) * half, (b,) * half + (c,) * half


def _scaled_pair(rng: random.Random, grid: Sequence[Fraction], d: int) -> tuple[tuple[Fraction, ...], ...]:
    if d > 4:
        return _halves(rng, grid, d)
    return _vector(rng, grid, d), _vector(rng, grid, d)


def _perpendicular(rng: random.Random, grid: Sequence[Fraction], q: Sequence[Fraction]) -> tuple[Fraction, ...]:
    """A grid key with ``q · k = 0``: ``q`` rotated by 90° (d_k = 2), ``q × r`` (d_k = 3), scaled."""
    d = len(q)
    if d == 1:
        raise Rejected("no perpendicular key in d_k = 1")
    if d == 2:
        base = [-q[1], q[0]]
    elif d == 3:
        r = _vector(rng, grid, d)
        base = [q[1] * r[2] - q[2] * r[1], q[2] * r[0] - q[0] * r[2], q[0] * r[1] - q[1] * r[0]]
    else:  # rotate one pair of coordinates by 90°, zero elsewhere
        base = [Fraction(0)] * d
        i, j = rng.sample(range(d), 2)
        base[i], base[j] = -q[j], q[i]
    if not any(base):
        raise Rejected("zero vector")
    denominators = 1
    for x in base:
        denominators = denominators * x.denominator // _gcd(denominators, x.denominator)
    ints = [int(x * denominators) for x in base]
    common = 0
    for n in ints:
        common = _gcd(common, abs(n))
    step = grid[1] - grid[0]
    unit = [Fraction(n, common) * step for n in ints]  # smallest grid-friendly multiple
    k = tuple(x * rng.choice((-3, -2, -1, 1, 2, 3)) for x in unit)
    lo, hi = grid[0], grid[-1]
    if any(not lo <= x <= hi for x in k) or any(((x - lo) / step).denominator != 1 for x in k):
        raise Rejected("perpendicular key off the grid")
    return k


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _distinct_keys(rng: random.Random, grid: Sequence[Fraction], n: int, d: int) -> tuple[tuple[Fraction, ...], ...]:
    keys = tuple(_vector(rng, grid, d) for _ in range(n))
    if len(set(keys)) != n:
        raise Rejected("duplicate keys")
    return keys


def _place(correct: Any, others: Sequence[Any], rng: random.Random) -> tuple[list[Any], int]:
    """Put ``correct`` at a uniformly drawn position among ``others`` (kept in their order)."""
    p = rng.randrange(len(others) + 1)
    return list(others[:p]) + [correct] + list(others[p:]), p


def _ranking_options(scores: Sequence[Fraction], crng: random.Random) -> dict[str, Any]:
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
    orderings, _ = _place(right, distractors[: min(3, len(distractors))], crng)
    falses = [c[0] for c in CONCEPTS if not c[2]]
    crng.shuffle(falses)
    concepts, _ = _place("keeps_order", falses, crng)
    return {"orderings": tuple(orderings), "concepts": tuple(concepts)}


# ---------------------------------------------------------------- per-kind setup and draw


def _setup(fam: Family, rng: random.Random) -> dict[str, Any]:
    if fam.kind == "one_score":
        # A quarter of the variants are built perpendicular (rare by chance); the rest are drawn freely.
        return {"d": rng.choice(fam.d_k), "perpendicular": rng.random() < 0.25}
    if fam.kind in ("score_vector",):
        return {"d": rng.choice(fam.d_k), "n": rng.choice(fam.n_k)}
    if fam.kind == "score_matrix":
        return {"shape": rng.choice(fam.shapes)}
    if fam.kind == "scaled_score":
        return {"d": rng.choice(fam.d_k)}
    if fam.kind == "softmax":
        return {"n": rng.choice(fam.n_k)}
    template = rng.choice(fam.templates)
    small = [d for d in fam.d_k if d <= 4 and d >= 2] or [2]
    scaled = [d for d in fam.d_k if d in (1, 4, 16, 64)] or [4, 16, 64]
    return {"template": template, "d": rng.choice(scaled if template == "scaled_value" else small)}


def _draw(fam: Family, setup: dict[str, Any], rng: random.Random, crng: random.Random) -> dict[str, Any]:
    grid = fam.grid()
    kind = fam.kind
    if kind == "one_score":
        q = _vector(rng, grid, setup["d"])
        k = _perpendicular(rng, grid, q) if setup["perpendicular"] else _vector(rng, grid, setup["d"])
        if not setup["perpendicular"] and dot(q, k) == 0:
            raise Rejected("zero answer")
        return {"q": q, "k": k}
    if kind == "score_vector":
        return {
            "q": _vector(rng, grid, setup["d"]),
            "keys": _distinct_keys(rng, grid, setup["n"], setup["d"]),
        }
    if kind == "score_matrix":
        n_q, d, n_k = setup["shape"]
        return {
            "Q": tuple(_vector(rng, grid, d) for _ in range(n_q)),
            "K": tuple(_vector(rng, grid, d) for _ in range(n_k)),
        }
    if kind == "scaled_score":
        q, k = _scaled_pair(rng, grid, setup["d"])
        return {"q": q, "k": k}
    if kind == "softmax":
        n = setup["n"]
        if fam.mode == "exact":
            bases = [int(x) for x in grid if x.denominator == 1 and -2 <= x <= 2] or [0]
            return {
                "base": rng.choice(bases),
                "multipliers": tuple(rng.choice(fam.multipliers) for _ in range(n)),
            }
        scores = tuple(rng.sample(list(grid), n))
        return {"scores": scores, **_ranking_options(scores, crng)}
    # multiple_choice
    template, d = setup["template"], setup["d"]
    q = _vector(rng, grid, d)
    if template == "highest_key":
        keys = _distinct_keys(rng, grid, 4, d)
        s = [dot(q, key) for key in keys]
        best = s.index(max(s))
        ordered, _ = _place(keys[best], [key for j, key in enumerate(keys) if j != best], crng)
        return {"template": template, "q": q, "keys": tuple(ordered)}
    if template == "true_statement":
        keys = _distinct_keys(rng, grid, 3, d)
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
        chosen = rng.choice(trues)
        falses = rng.sample(false_pool, 3)
        claims, _ = _place(chosen, falses, crng)
        return {"template": template, "q": q, "keys": keys, "claims": tuple(claims)}
    q, k = _scaled_pair(rng, grid, d)
    others = ["d", "none", "times_sqrt"]
    crng.shuffle(others)
    options, _ = _place("sqrt", others, crng)
    return {"template": template, "q": q, "k": k, "options": tuple(options)}


# ---------------------------------------------------------------- public API


def generate_variant(
    family: Family, base_seed: int, student: str | None, index: int, stats: GenerationStats | None = None
) -> Problem:
    """Generate variant ``index`` of ``family`` for ``(base_seed, student)``.

    Raises:
        GenerationError: no draw was accepted within ``family.max_attempts``.
    """
    args = (family.id, family.version, base_seed, student, index)
    rng = variant_rng(*args, "givens")
    crng = variant_rng(*args, "choices")
    setup = _setup(family, rng)
    rejections: Counter[str] = Counter()
    for attempt in range(1, family.max_attempts + 1):
        try:
            givens = _draw(family, setup, rng, crng)
            problem = build_problem(
                family,
                givens,
                index=index,
                seed=variant_seed(*args, "givens"),
                base_seed=base_seed,
                student=student,
                attempts=attempt,
            )
        except Rejected as exc:
            rejections[exc.reason] += 1
            continue
        if stats is not None:
            stats.variants += 1
            stats.attempts += attempt
            stats.rejections.update(rejections)
        return problem
    raise GenerationError(family.id, index, family.max_attempts, rejections)


def generate_family(
    family: Family, count: int, base_seed: int, student: str | None = None, start: int = 0
) -> tuple[list[Problem], GenerationStats]:
    """Generate variants ``start .. start + count - 1`` and the acceptance figures.

    Raises:
        GenerationError: a variant could not be generated.
    """
    stats = GenerationStats(family.id)
    problems = [generate_variant(family, base_seed, student, i, stats) for i in range(start, start + count)]
    return problems, stats


def featured_problems(family: Family) -> list[Problem]:
    """The family's fixed worked examples (its ``featured`` list), numbered from 1.

    Raises:
        Rejected: a featured example is degenerate (e.g. a tie for highest).
    """
    out = []
    for i, featured in enumerate(family.featured, start=1):
        givens = dict(featured)
        if family.kind == "softmax" and "scores" in givens:
            crng = variant_rng(family.id, family.version, 0, None, i, "featured-choices")
            givens.update(_ranking_options(givens["scores"], crng))
        givens["_fixed"] = i
        out.append(build_problem(family, givens))
    return out


def fixed_problem(family: Family, q: Sequence[Fraction], keys: Sequence[Sequence[Fraction]]) -> Problem:
    """A problem with numbers given by hand (``--q 0,1 --k 0,-1``).

    One key for ``one_score`` and ``scaled_score`` families, several for ``score_vector``.

    Raises:
        Rejected: the numbers make a degenerate problem for the family's kind.
        ValueError: widths differ or the family's kind takes no query/key pair.
    """
    widths = {len(q)} | {len(k) for k in keys}
    if len(widths) != 1:
        raise ValueError(f"q and every k must have the same width d_k, found widths {sorted(widths)}")
    if family.kind == "one_score":
        if len(keys) != 1:
            raise ValueError(f"family {family.id} (one_score) takes exactly one --k, found {len(keys)}")
        return build_problem(family, {"q": tuple(q), "k": tuple(keys[0]), "_fixed": 1})
    if family.kind == "score_vector":
        return build_problem(family, {"q": tuple(q), "keys": tuple(tuple(k) for k in keys), "_fixed": 1})
    if family.kind == "scaled_score":
        if len(keys) != 1:
            raise ValueError(f"family {family.id} (scaled_score) takes exactly one --k, found {len(keys)}")
        return build_problem(family, {"q": tuple(q), "k": tuple(keys[0]), "_fixed": 1})
    raise ValueError(
        f"family {family.id} has kind {family.kind}; --q/--k work with one_score, score_vector "
        "and scaled_score families"
    )


def givens_key(problem: Problem) -> str:
    """A canonical text of a problem's givens, for duplicate detection."""
    return repr(sorted((k, v) for k, v in problem.givens.items() if not k.startswith("_")))
