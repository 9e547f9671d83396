"""Drawing helpers shared by the problem kinds: grid vectors, perpendicular keys, option placement.

Every helper draws from the ``random.Random`` it is given (never global state) and raises
:class:`~attnscore.practice.worked.Rejected` for a degenerate draw.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from attnscore.practice.worked import Rejected

__all__ = ["vector", "nonzero", "scaled_pair", "perpendicular", "distinct_keys", "place", "vector_count", "pair_count"]


def vector(rng: random.Random, grid: Sequence[Fraction], d: int) -> tuple[Fraction, ...]:
    """A vector of ``d`` grid entries; Rejected for the zero vector."""
    v = tuple(rng.choice(grid) for _ in range(d))
    if not any(v):
        raise Rejected("zero vector")
    return v


def nonzero(grid: Sequence[Fraction]) -> list[Fraction]:
    """The grid without 0."""
    return [x for x in grid if x != 0]


def _halves(rng: random.Random, grid: Sequence[Fraction], d: int) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    """A long query ``[a, ..., a2]`` and key ``[b, ..., c]`` in constant halves (for d_k >= 16)."""
    nz = nonzero(grid)
    a, a2, b, c = (rng.choice(nz) for _ in range(4))
    half = d // 2
    return (a,) * half + (a2,) * half, (b,) * half + (c,) * half


def scaled_pair(rng: random.Random, grid: Sequence[Fraction], d: int) -> tuple[tuple[Fraction, ...], ...]:
    """A query and key of width ``d``: free entries up to d_k = 4, two constant halves above."""
    if d > 4:
        return _halves(rng, grid, d)
    return vector(rng, grid, d), vector(rng, grid, d)


def perpendicular(rng: random.Random, grid: Sequence[Fraction], q: Sequence[Fraction]) -> tuple[Fraction, ...]:
    """A grid key with ``q · k = 0``: ``q`` rotated by 90° (d_k = 2), ``q × r`` (d_k = 3), scaled."""
    d = len(q)
    if d == 1:
        raise Rejected("no perpendicular key in d_k = 1")
    if d == 2:
        base = [-q[1], q[0]]
    elif d == 3:
        r = vector(rng, grid, d)
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


def distinct_keys(rng: random.Random, grid: Sequence[Fraction], n: int, d: int) -> tuple[tuple[Fraction, ...], ...]:
    """``n`` pairwise different keys of width ``d``; Rejected when two coincide."""
    keys = tuple(vector(rng, grid, d) for _ in range(n))
    if len(set(keys)) != n:
        raise Rejected("duplicate keys")
    return keys


def place(correct: Any, others: Sequence[Any], rng: random.Random) -> tuple[list[Any], int]:
    """Put ``correct`` at a uniformly drawn position among ``others`` (kept in their order)."""
    p = rng.randrange(len(others) + 1)
    return list(others[:p]) + [correct] + list(others[p:]), p


def vector_count(grid: Sequence[Fraction], d: int) -> int:
    """How many nonzero vectors of width ``d`` the grid has (what :func:`vector` can draw)."""
    return len(grid) ** d - (1 if len(grid) != len(nonzero(grid)) else 0)


def pair_count(grid: Sequence[Fraction], d: int) -> int:
    """How many ``(q, k)`` pairs of width ``d`` :func:`scaled_pair` can draw."""
    return len(nonzero(grid)) ** 4 if d > 4 else vector_count(grid, d) ** 2
