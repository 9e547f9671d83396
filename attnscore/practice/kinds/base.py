"""What a problem kind provides: the :class:`Kind` interface, and the small protocols its operations get.

A kind (``one_score``, ``softmax``, ...) is one frozen object with every kind-specific operation:

- **validation** of a family file's kind-dependent fields (allowed ``d_k``, ``mode``, the fields
  and cross-checks of a ``featured`` example), called by :mod:`attnscore.practice.families`;
- **drawing**: the per-variant setup, one attempt at the givens, the capacity bound, the givens
  of a featured example and of a ``--q/--k`` problem (:mod:`attnscore.practice.generators`);
- **solution**: the statement, questions, exact answers and worked solution from the givens
  (:mod:`attnscore.practice.solutions`);
- **independent check**: the float64 answers and true options, re-derived through a
  :class:`Float64` solver (:mod:`attnscore.practice.verify`), and option features;
- **PrairieLearn**: the answer elements its questions use and its assessment zone.

This package needs only the standard library: it is vendored into PrairieLearn questions with the
generators (:mod:`attnscore.practice.vendor`). So the float64 solver (torch and the reference
implementation) and the family-file checker are handed in as protocols, not imported.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypedDict

from attnscore.practice.problem import Arrow, ChoiceAnswer, Problem, Question
from attnscore.practice.richtext import Rich

if TYPE_CHECKING:
    from attnscore.practice.family import Family

__all__ = [
    "Kind",
    "PairKind",
    "Parts",
    "Checker",
    "Float64",
    "Givens",
    "Independent",
    "Vector",
    "claims_of",
    "holding",
    "check_pair_width",
    "expect",
]

#: The exact numbers of one problem, in its kind's layout (see :mod:`attnscore.practice.generators`).
Givens = dict[str, Any]
#: ``(numbers, choices)``: answer name -> float64 value, choice name -> option positions whose claim holds.
Independent = tuple[dict[str, float], dict[str, set[int]]]
#: Exact vector givens (shape ``(d_k,)``).
Vector = Sequence[Fraction]


class Parts(TypedDict):
    """What a kind's solution builds; :func:`~attnscore.practice.solutions.build_problem` adds the rest."""

    statement: tuple[Rich, ...]
    questions: tuple[Question, ...]
    solution: tuple[Rich, ...]
    figure: tuple[Arrow, ...]


class Checker(Protocol):
    """Where a kind reports a family-file problem (``families._Checker``): ``path`` is the field's path."""

    def fail(self, path: tuple[Any, ...], expected: str, found: str, *, key: bool = False) -> None: ...


class Float64(Protocol):
    """The independent float64 solver (:class:`attnscore.practice.float64.TorchFloat64`).

    Every argument is exact givens (Fractions), turned into the nearest float64 values; ``q``, ``k``
    have shape ``(d_k,)``, ``keys`` and ``K`` ``(n_k, d_k)``, ``Q`` ``(n_q, d_k)``.
    """

    def score(self, q: Vector, k: Vector) -> float:
        """``q · k`` by the reference implementation."""
        ...

    def scores(self, q: Vector, keys: Sequence[Vector]) -> list[float]:
        """``K q`` (shape ``(n_k,)``) by the reference implementation."""
        ...

    def score_matrix(self, Q: Sequence[Vector], K: Sequence[Vector]) -> list[list[float]]:
        """``Q Kᵀ`` (shape ``(n_q, n_k)``) by the reference implementation."""
        ...

    def dot(self, q: Vector, k: Vector) -> float:
        """``q · k`` by plain torch."""
        ...

    def scaled(self, q: Vector, k: Vector) -> float:
        """``q · k / sqrt(d_k)`` by plain torch."""
        ...

    def segment_dot(self, q: Vector, k: Vector, indices: Sequence[int]) -> float:
        """``sum(q[j] * k[j] for j in indices)`` (one term or one half of a dot product)."""
        ...

    def softmax(self, values: Sequence[float]) -> list[float]:
        """``softmax(values)`` by plain torch."""
        ...

    def total(self, values: Sequence[float]) -> float:
        """The sum of ``values``."""
        ...

    def descending(self, values: Sequence[float]) -> tuple[int, ...]:
        """The positions of ``values`` from largest to smallest."""
        ...


def claims_of(p: Problem) -> dict[str, tuple[tuple[Any, ...], ...]]:
    """Choice name -> the claims of its options (display order)."""
    return {q.choice.name: q.choice.claims for q in p.questions if q.choice is not None}


def holding(claims: Sequence[tuple[Any, ...]], test: Any) -> set[int]:
    """The positions of the claims for which ``test(claim)`` is true."""
    return {i for i, c in enumerate(claims) if test(c)}


def expect(c: Checker, ok: bool, path: tuple[Any, ...], expected: str, found: str) -> bool:
    """``ok``, a featured given's check; where it fails, reported first (``expected``, ``found`` at ``path``)."""
    if not ok:
        c.fail(path, expected, found)
    return ok


def check_pair_width(c: Checker, path: tuple[Any, ...], given: Mapping[str, Any]) -> bool:
    """A featured ``q``/``k`` pair has one width; False after reporting."""
    q, k = len(given["q"]), len(given["k"])
    return expect(c, q == k, path + ("k",), f"{q} entries (the width of q)", f"{k}")


class Kind(ABC):
    """Everything one problem kind does; each kind module defines one subclass and one instance.

    Class attributes:
        name: the kind's name in family files (``kind: one_score``).
        pl_elements: the PrairieLearn answer elements its questions use.
        zone_title: the PrairieLearn assessment zone its randomised questions go in.
        d_k_widths, d_k_why: the widths ``d_k`` a family may list, and why when it is a restriction.
        d_k_default: ``d_k`` when the family gives none (``None``: the :class:`Family` default).
        modes: the values of the family field ``mode`` (empty: the kind has no mode).
        featured_fields: the fields of a ``featured`` example (empty: no featured examples).
        pair_keys: how many ``--k`` a ``--q/--k`` problem takes (0: any number; ``None``: no ``--q/--k``).
        ignored_givens: givens that do not make a variant different (left out of duplicate checks).
    """

    __slots__ = ()

    name: ClassVar[str]
    pl_elements: ClassVar[tuple[str, ...]]
    zone_title: ClassVar[str] = "Concepts"
    d_k_widths: ClassVar[tuple[int, ...]] = (1, 2, 3, 4)
    d_k_why: ClassVar[str] = ""
    d_k_default: ClassVar[tuple[int, ...] | None] = None
    modes: ClassVar[tuple[str, ...]] = ()
    featured_fields: ClassVar[tuple[str, ...]] = ()
    pair_keys: ClassVar[int | None] = None
    ignored_givens: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"kind {self.name!r} is frozen: cannot set {name!r}")

    def __repr__(self) -> str:
        return f"<kind {self.name}>"

    # ------------------------------------------------------------ validation (families.py)

    def featured_required(self, mode: str) -> tuple[str, ...]:
        """The fields a featured example must give in ``mode``."""
        return self.featured_fields

    def missing_field(self, name: str, mode: str) -> str:
        """What a featured example missing field ``name`` was expected to have."""
        return f"a value for {name!r}"

    def check_featured(self, c: Checker, path: tuple[Any, ...], given: Mapping[str, Any], mode: str) -> bool:
        """Cross-field checks of one featured example whose fields each read well; False after reporting."""
        return self.has_required(given, mode)

    def has_required(self, given: Mapping[str, Any], mode: str) -> bool:
        """Whether every field :meth:`featured_required` names was given."""
        return all(name in given for name in self.featured_required(mode))

    # ------------------------------------------------------------ drawing (generators.py)

    @abstractmethod
    def setup(self, fam: Family, rng: random.Random) -> dict[str, Any]:
        """The variant's fixed choices (width, shape, template...), one draw before the attempts."""

    @abstractmethod
    def draw(self, fam: Family, setup: Mapping[str, Any], rng: random.Random, crng: random.Random) -> Givens:
        """One attempt at the givens (``crng`` places options). Raises Rejected for a degenerate draw."""

    @abstractmethod
    def capacity(self, fam: Family) -> int:
        """An upper bound on the number of distinct variants (see :func:`~attnscore.practice.generators.capacity`)."""

    def featured_givens(self, fam: Family, featured: Mapping[str, Any], number: int) -> Givens:
        """The givens of featured example ``number`` (from 1) of ``fam``."""
        return dict(featured)

    def pair_givens(self, q: Vector, keys: Sequence[Vector]) -> Givens:
        """The givens of a ``--q/--k`` problem (only called when :attr:`pair_keys` is not ``None``)."""
        raise NotImplementedError(f"kind {self.name} takes no --q/--k")

    # ------------------------------------------------------------ solution (solutions.py)

    @abstractmethod
    def build(self, fam: Family, givens: Mapping[str, Any]) -> Parts:
        """Statement, questions with exact answers, worked solution and figure. Raises Rejected."""

    # ------------------------------------------------------------ independent check (verify.py)

    @abstractmethod
    def independent(self, p: Problem, f64: Float64) -> Independent:
        """The problem re-solved from its givens in float64, independently of :meth:`build`."""

    def option_features(self, p: Problem, choice: ChoiceAnswer, f64: Float64) -> dict[str, list[float]]:
        """Features of ``choice``'s options beyond position and text length (one value per option)."""
        return {}


class PairKind(Kind):
    """A kind whose givens are one query ``q`` and one key ``k`` of one width (``one_score``,
    ``scaled_score``): a featured example gives both (:func:`check_pair_width`), and a ``--q/--k``
    problem takes one ``--k``."""

    __slots__ = ()

    featured_fields = ("q", "k")
    pair_keys = 1

    def check_featured(self, c: Checker, path: tuple[Any, ...], given: Mapping[str, Any], mode: str) -> bool:
        return self.has_required(given, mode) and check_pair_width(c, path, given)

    def pair_givens(self, q: Vector, keys: Sequence[Vector]) -> Givens:
        return {"q": tuple(q), "k": tuple(keys[0])}
