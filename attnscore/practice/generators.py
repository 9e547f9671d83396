"""Generate variants: draw hand-friendly numbers, reject degenerate ones, count acceptance.

Each variant ``index`` of a family draws from two private streams (see :mod:`attnscore.practice.seeds`):
``givens`` (the numbers, the shape, the template) and ``choices`` (where the correct option goes).
A variant first fixes its *setup* (width, shape, template, target sign) with one draw, then
repeats *attempts* until the constraints accept the numbers. Nothing reads global random state.

The kind-specific parts (the setup, one attempt, the capacity bound, the givens layout) are each
kind's own, in :mod:`attnscore.practice.kinds`; this module runs them.

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

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from attnscore.practice import kinds
from attnscore.practice.drawing import perpendicular
from attnscore.practice.family import Family
from attnscore.practice.problem import Problem
from attnscore.practice.seeds import variant_rng, variant_seed
from attnscore.practice.solutions import Rejected, build_problem

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

_perpendicular = perpendicular  # benchmarks/bench_practice.py times the perpendicular-key draw by this name


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
    kind = kinds.get(family.kind)
    setup = kind.setup(family, rng)
    rejections: Counter[str] = Counter()
    for attempt in range(1, family.max_attempts + 1):
        try:
            givens = kind.draw(family, setup, rng, crng)
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
    kind = kinds.get(family.kind)
    out = []
    for i, featured in enumerate(family.featured, start=1):
        givens = kind.featured_givens(family, featured, i)
        givens["_fixed"] = i
        out.append(build_problem(family, givens))
    return out


def fixed_problem(family: Family, q: Sequence[Fraction], keys: Sequence[Sequence[Fraction]]) -> Problem:
    """A problem with numbers given by hand (``--q 0,1 --k 0,-1``).

    One key for ``one_score`` and ``scaled_score`` families, several for ``score_vector``
    (``Kind.pair_keys``).

    Raises:
        Rejected: the numbers make a degenerate problem for the family's kind.
        ValueError: widths differ or the family's kind takes no query/key pair.
    """
    widths = {len(q)} | {len(k) for k in keys}
    if len(widths) != 1:
        raise ValueError(f"q and every k must have the same width d_k, found widths {sorted(widths)}")
    kind = kinds.get(family.kind)
    if kind.pair_keys is None:
        takers = [k.name for k in kinds.REGISTRY.values() if k.pair_keys is not None]
        raise ValueError(
            f"family {family.id} has kind {family.kind}; --q/--k work with {', '.join(takers[:-1])} "
            f"and {takers[-1]} families"
        )
    if kind.pair_keys and len(keys) != kind.pair_keys:
        exactly = "exactly one --k" if kind.pair_keys == 1 else f"exactly {kind.pair_keys} --k"
        raise ValueError(f"family {family.id} ({family.kind}) takes {exactly}, found {len(keys)}")
    return build_problem(family, {**kind.pair_givens(q, keys), "_fixed": 1})


def givens_key(problem: Problem) -> str:
    """A canonical text of a problem's givens, for duplicate detection.

    Givens that do not make a variant different (``Kind.ignored_givens``: the ``one_score`` option
    ``order``) are left out: the same numbers with the options in another order are the same problem.
    """
    ignored = kinds.get(problem.kind).ignored_givens
    return repr(sorted((k, v) for k, v in problem.givens.items() if not k.startswith("_") and k not in ignored))


def capacity(family: Family) -> int:
    """An upper bound on the number of distinct variants (distinct :func:`givens_key`) of ``family``.

    Counted from the generator's parameter space: the grid, the widths and shapes, the key
    counts and multipliers, the option arrangements; rejected draws are not subtracted, so the
    true number is somewhat lower. ``max_duplicate_rate`` at a class of 1,000 needs a capacity far
    above 1,000 (under the birthday law, about ``n / (2 * capacity)`` of ``n`` uniform draws repeat).
    Each kind counts its own (``Kind.capacity``).

    Example:
        >>> from attnscore.practice.families import parse_family_text
        >>> capacity(parse_family_text("id: d\\nversion: 1\\nkind: one_score\\ntitle: D\\n", "d.yaml")[0])
        6400
    """
    return kinds.get(family.kind).capacity(family)
