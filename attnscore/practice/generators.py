"""Generate variants: draw hand-friendly numbers, reject degenerate ones, count acceptance.

Each variant ``index`` of a family draws from two private streams (see :mod:`attnscore.practice.seeds`):
``givens`` (the numbers, the shape, the template) and ``choices`` (where the correct option goes).
A variant first fixes its *setup* (width, shape, template, target sign) with one draw, then
repeats *attempts* until the constraints accept the numbers. Nothing reads global random state.

Givens layout per kind (all numbers exact Fractions):

- ``one_score``: ``q``, ``k`` (``(d_k,)`` each) and ``order``, the signs (1, 0, -1) of the
  "what does the sign mean" options in display order; the sign of the score is drawn uniformly
  from positive / zero / negative so that no option text is right more often than another;
- ``score_vector``: ``q`` ``(d_k,)``, ``keys`` ``(n_k, d_k)``;
- ``score_matrix``: ``Q`` ``(n_q, d_k)``, ``K`` ``(n_k, d_k)``;
- ``scaled_score``: ``q``, ``k`` with ``d_k`` in {1, 4, 16, 64} (long vectors are two constant halves);
- ``softmax``: ``base`` and ``multipliers`` (mode exact: scores ``base + ln m``), or ``scores``,
  ``orderings``, ``concepts`` (mode ranking);
- ``multiple_choice``: ``template`` plus ``q`` and ``keys`` / ``claims`` / ``k`` and ``options``
  (``scaled_value``: the right scaling ``("sqrt",)`` among three mistakes, each ``("d",)``,
  ``("half_d",)``, ``("none",)``, ``("times_sqrt",)`` or ``("slip", i)``, a sign slip in term ``i``
  of the dot product; the right option's rank by magnitude is drawn uniformly; ``highest_key``
  and ``true_statement`` draw the right option's rank by key length and by text length, and its
  position, in the setup, so no such feature gives it away).

Capacity: :func:`capacity` bounds the number of distinct variants (distinct :func:`givens_key`)
from the family's parameter space; :func:`generate_family` refuses a ``count`` above it
(:class:`CapacityError`) instead of repeating variants.

Example:
    >>> from attnscore.practice.families import parse_family_text
    >>> fam = parse_family_text("id: demo\\nversion: 1\\nkind: one_score\\ntitle: Demo\\n", "demo.yaml")[0]
    >>> generate_variant(fam, base_seed=42, student=None, index=0).uid
    'demo-v1-s42-0000'
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from attnscore.practice.family import Family
from attnscore.practice.problem import Problem
from attnscore.practice.seeds import variant_rng, variant_seed
from attnscore.practice.solutions import CONCEPTS, Rejected, build_problem, dot

__all__ = [
    "CapacityError",
    "GenerationError",
    "capacity",
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


class CapacityError(ValueError):
    """More variants were asked for than the family has distinct variants.

    Attributes:
        family_id, count, capacity: the family, the count asked for and its capacity.
    """

    def __init__(self, family_id: str, count: int, capacity: int) -> None:
        super().__init__(
            f"{family_id}: --count {count} asks for more variants than the family's capacity of {capacity} "
            "distinct variants, so some would repeat; lower --count or widen the family's 'values', 'd_k', "
            "'n_k', 'shapes' or 'multipliers'"
        )
        self.family_id, self.count, self.capacity = family_id, count, capacity


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
    m = rng.choice((-3, -2, -1, 1, 2, 3))  # one multiplier for the whole vector, so k stays perpendicular
    k = tuple(x * m for x in unit)
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
    concepts, _ = _place(true_id, falses, crng)
    return {"orderings": tuple(orderings), "concepts": tuple(concepts)}


# ---------------------------------------------------------------- per-kind setup and draw


def _setup(fam: Family, rng: random.Random) -> dict[str, Any]:
    if fam.kind == "one_score":
        # The sign is drawn uniformly (zero is rare by chance, so those keys are built perpendicular).
        # Perpendicular pairs in 2-D are few (about 500 on a [-5, 5] grid), so half of those
        # variants move to a wider width, keeping duplicates under 1% at a class of 1,000.
        d, sign = rng.choice(fam.d_k), rng.choice((1, 0, -1))
        wider = [w for w in fam.d_k if w >= 3]
        if sign == 0 and d == 2 and wider and rng.random() < 0.5:
            d = rng.choice(wider)
        return {"d": d, "sign": sign}
    if fam.kind in ("score_vector",):
        return {"d": rng.choice(fam.d_k), "n": rng.choice(fam.n_k)}
    if fam.kind == "score_matrix":
        return {"shape": rng.choice(fam.shapes)}
    if fam.kind == "scaled_score":
        return {"d": rng.choice(fam.d_k)}
    if fam.kind == "softmax":
        return {"n": rng.choice(fam.n_k)}
    template = rng.choice(fam.templates)
    d = rng.choice(_scaled_widths(fam) if template == "scaled_value" else _small_widths(fam))
    # Target ranks of the right option among the four, each uniform: by magnitude (or key length)
    # and by text length, so that neither gives the answer away. All options of "which scaled
    # score" share the right one's sign, so its rank by signed value is uniform too.
    # The right key's position is fixed here too (not per attempt), so that acceptance never
    # depends on it.
    ranks, position = (rng.randrange(4), rng.randrange(4)), rng.randrange(4)
    return {"template": template, "d": d, "ranks": ranks, "position": position}


def _small_widths(fam: Family) -> list[int]:
    return [d for d in fam.d_k if 2 <= d <= 4] or [2]


def _scaled_widths(fam: Family) -> list[int]:
    """Widths for "which scaled score": d_k = 1 is left out (dividing by sqrt(1) changes nothing)."""
    return [d for d in fam.d_k if d in (4, 16, 64)] or [4, 16, 64]


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
    from attnscore.practice.solutions import scaled_option_values

    claims = [("sqrt",), *_scaled_mistakes(q, k)]
    value = dict(zip(claims, scaled_option_values(claims, q, k), strict=True))
    right = value[("sqrt",)]

    def digits(v: Fraction) -> int:
        return len(str(int(abs(v))))

    pool = [c for c, v in value.items() if c != ("sqrt",) and v * right > 0 and digits(v) == digits(right)]
    chosen = _pick_distractors(("sqrt",), pool, lambda c: (abs(value[c]),), ranks[:1], rng)
    crng.shuffle(chosen)
    options, _ = _place(("sqrt",), chosen, crng)
    return tuple(options)


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
    from attnscore.practice.solutions import vector_text

    keys = _distinct_keys(rng, grid, 9, d)
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


def _draw(fam: Family, setup: dict[str, Any], rng: random.Random, crng: random.Random) -> dict[str, Any]:
    grid = fam.grid()
    kind = fam.kind
    if kind == "one_score":
        q = _vector(rng, grid, setup["d"])
        sign = setup["sign"]
        k = _perpendicular(rng, grid, q) if sign == 0 else _vector(rng, grid, setup["d"])
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
        return {
            "template": template,
            "q": q,
            "keys": _highest_key_options(q, grid, d, setup["ranks"], setup["position"], rng),
        }
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
        from attnscore.practice.solutions import claim_text_length

        # The true statement's rank by text length (ties broken by position) is drawn uniformly.
        chosen = rng.choice(trues)
        length = {c: claim_text_length(c) for c in [chosen, *false_pool]}
        rng.shuffle(false_pool)
        for falses in itertools.islice(itertools.combinations(false_pool, 3), 200):
            if _arrangeable(chosen, falses, length, setup["position"], setup["ranks"][1]):
                claims = _arrange(chosen, falses, length, setup["position"], setup["ranks"][1], rng)
                return {"template": template, "q": q, "keys": keys, "claims": claims}
        raise Rejected("distractor ranks")
    d = rng.choice(_scaled_widths(fam))  # per attempt: some target ranks are rare at one width
    q, k = _scaled_pair(rng, grid, d)
    if (q[0] * k[0] + q[-1] * k[-1] if d > 4 else dot(q, k)) == 0:  # long vectors come in two halves
        raise Rejected("zero answer")
    return {"template": template, "q": q, "k": k, "options": _scaled_options(q, k, setup["ranks"], rng, crng)}


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
        CapacityError: ``start + count`` is above :func:`capacity` (variants would repeat).
        GenerationError: a variant could not be generated.
    """
    if start + count > capacity(family):
        raise CapacityError(family.id, start + count, capacity(family))
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
    """A canonical text of a problem's givens, for duplicate detection.

    The ``one_score`` option ``order`` is left out: the same numbers with the options in another
    order are the same problem.
    """
    return repr(sorted((k, v) for k, v in problem.givens.items() if not k.startswith("_") and k != "order"))


def capacity(family: Family) -> int:
    """An upper bound on the number of distinct variants (distinct :func:`givens_key`) of ``family``.

    Counted from the generator's parameter space: the grid, the widths and shapes, the key
    counts and multipliers, the option arrangements; rejected draws are not subtracted, so the
    true number is somewhat lower. ``max_duplicate_rate`` at a class of 1,000 needs a capacity far
    above 1,000 (under the birthday law, about ``n / (2 * capacity)`` of ``n`` uniform draws repeat).

    Example:
        >>> from attnscore.practice.families import parse_family_text
        >>> capacity(parse_family_text("id: d\\nversion: 1\\nkind: one_score\\ntitle: D\\n", "d.yaml")[0])
        6400
    """
    grid = family.grid()
    g = len(grid)
    nonzero = len(_nonzero(grid))
    zero = 1 if g != nonzero else 0

    def vectors(d: int) -> int:  # nonzero vectors of width d on the grid
        return g**d - zero

    def pairs(d: int) -> int:  # (q, k) as drawn by _scaled_pair
        return nonzero**4 if d > 4 else vectors(d) ** 2

    kind = family.kind
    if kind == "one_score":
        return sum(vectors(d) ** 2 for d in set(family.d_k))
    if kind == "score_vector":
        return sum(vectors(d) * math.perm(vectors(d), n) for d in set(family.d_k) for n in set(family.n_k))
    if kind == "score_matrix":
        return sum(vectors(d) ** (n_q + n_k) for n_q, d, n_k in set(family.shapes))
    if kind == "scaled_score":
        return sum(pairs(d) for d in set(family.d_k))
    if kind == "softmax":
        if family.mode == "exact":
            bases = len([x for x in grid if x.denominator == 1 and -2 <= x <= 2]) or 1
            return sum(bases * len(family.multipliers) ** n for n in set(family.n_k))
        # the scores, and the three wrong orderings and the concept statements in display order
        n_concepts = len(CONCEPTS)
        return sum(
            math.perm(g, n) * math.perm(math.factorial(n) - 1, min(3, math.factorial(n) - 1)) * 4
            for n in set(family.n_k)
        ) * math.factorial(n_concepts)
    total = 0
    for template in set(family.templates):
        if template == "highest_key":
            total += sum(vectors(d) * math.perm(vectors(d), 4) for d in set(_small_widths(family)))
        elif template == "true_statement":
            # three keys; four of at most 22 distinct statements, in order
            total += sum(vectors(d) * math.perm(vectors(d), 3) for d in set(_small_widths(family))) * math.perm(22, 4)
        else:
            total += sum(pairs(d) for d in set(_scaled_widths(family))) * math.perm(10, 4)
    return total
