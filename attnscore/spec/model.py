"""The spec model: one function contract with its worked examples and properties.

A :class:`Spec` is what :func:`attnscore.spec.load.load_spec` builds from a YAML file after
validating it; everything downstream (cases, grading, verification) reads only this frozen data.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from attnscore.maths.tolerance import Tolerance
from attnscore.spec.contracts import Contract

__all__ = ["Spec", "StudentCopy", "WorkedExample", "PropertyUse"]


@dataclass(frozen=True)
class WorkedExample:
    """A worked example: fixed inputs, the exact expected value and an explanation.

    Attributes:
        id: snake_case id, unique in the spec.
        title: one line (defaults to the id).
        inputs: parameter name -> float64 array, as written in the spec.
        expected: the mathematically expected value (float64), as written in the spec.
        explanation: why the answer is what it is, for learners.
        points: exact points.
        visibility: ``"visible"`` or ``"hidden"``.
        tolerance: an override of the spec's tolerance, or None.
        line: line of the example in the spec file.
    """

    id: str
    title: str
    inputs: dict[str, np.ndarray]
    expected: np.ndarray
    explanation: str
    points: Fraction
    visibility: str
    tolerance: Tolerance | None
    line: int


@dataclass(frozen=True)
class PropertyUse:
    """A registered property as a spec uses it.

    Attributes:
        name: the registered property's name (see :mod:`attnscore.catalogue.properties`).
        points: exact points for the whole property (all generated examples must pass).
        statement: what the property says, in words a student understands.
        examples: how many generated inputs to try.
        visibility: ``"visible"`` or ``"hidden"``.
        max_value: bound on generated input magnitudes.
        line: line of the property in the spec file.
    """

    name: str
    points: Fraction
    statement: str
    examples: int
    visibility: str
    max_value: float
    line: int


@dataclass(frozen=True)
class StudentCopy:
    """The marker of a student copy of a spec (``attnscore export student-spec``): the full
    spec's hidden cases are left out, and only how many and their points are said.

    Attributes:
        hidden_cases: hidden worked examples and properties of the full spec, not in this copy.
        hidden_points: their points together (exact).
    """

    hidden_cases: int
    hidden_points: Fraction


@dataclass(frozen=True)
class Spec:
    """A validated spec.

    Attributes:
        id, version, title, description: identity and prose.
        function: default name of the graded function.
        contract: the reference contract (parameters, golden path).
        parameter_names: the graded function's parameter names, in order.
        accept: accepted return kinds (``tensor``, ``ndarray``, ``list``, ``number``).
        dtypes: dtypes to test; the first is the default.
        seed: base seed for generated inputs.
        timeout_s: wall-time limit per call, seconds.
        tolerance: default tolerance for every case.
        worked_examples, properties: the rubric items, in file order.
        path: the file it was loaded from.
        nonfinite: the NaN/inf policy; ``"match"``: NaN and ±inf must appear exactly where the
            golden value has them (NaN is never a wildcard), and nowhere else.
        mistakes: ids of the catalogue mistakes this spec must catch and diagnose (``attnscore
            verify`` checks it); None means every mistake that applies to the contract.
        student_copy: set on a student copy (hidden cases left out), else None.
    """

    id: str
    version: int
    title: str
    description: str
    function: str
    contract: Contract
    parameter_names: tuple[str, ...]
    accept: tuple[str, ...]
    dtypes: tuple[str, ...]
    seed: int
    timeout_s: float
    tolerance: Tolerance
    worked_examples: tuple[WorkedExample, ...]
    properties: tuple[PropertyUse, ...]
    path: str
    nonfinite: str = "match"
    mistakes: tuple[str, ...] | None = None
    student_copy: StudentCopy | None = None

    @property
    def shown_path(self) -> str:
        """The spec's path as feedback shows it: relative to the current folder when the spec lies
        under it, else the file name alone (never the grading machine's absolute paths)."""
        path = Path(self.path)
        try:
            return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
        except (ValueError, OSError):
            return path.name

    def location(self, line: int) -> str:
        """``file:line`` for a line of this spec (its :attr:`shown_path`)."""
        return f"{self.shown_path}:{line}"

    @property
    def max_points(self) -> Fraction:
        return sum((e.points for e in self.worked_examples), Fraction(0)) + sum(
            (p.points for p in self.properties), Fraction(0)
        )

    def tied(self, ties: dict[str, str]) -> tuple[Spec, list[str]]:
        """This spec with legend symbols tied (``{"d_v": "d_k"}``), as kernels that need equal
        sizes require, and the ids of the worked examples left out because their shapes break a tie.

        Raises:
            ValueError: a symbol that the contract does not use, a symbol tied to itself, or a
                chain (``a -> b`` while ``b`` is tied too).
        """
        symbols = {sym for _, legend in self.contract.parameters for sym in legend} - {"..."}
        for symbol, same_as in ties.items():
            for name in (symbol, same_as):
                if name not in symbols:
                    known = ", ".join(sorted(symbols))
                    raise ValueError(
                        f"expected a shape symbol of contract {self.contract.name} ({known}), found {name!r}"
                    )
            if symbol == same_as or same_as in ties:
                raise ValueError(f"expected SYMBOL=OTHER with OTHER not tied itself, found {symbol}={same_as}")
        contract = self.contract.tied(ties)
        kept = tuple(ex for ex in self.worked_examples if _fits(contract, ex.inputs))
        dropped = [ex.id for ex in self.worked_examples if not _fits(contract, ex.inputs)]
        return dataclasses.replace(self, contract=contract, worked_examples=kept), dropped


def _fits(contract: Contract, inputs: dict[str, np.ndarray]) -> bool:
    """Whether the inputs give each legend symbol of ``contract`` one size."""
    sizes: dict[str, int] = {}
    for name, legend in contract.parameters:
        shape = np.shape(inputs[name])
        fixed = [sym for sym in legend if sym != "..."]
        for sym, size in zip(fixed, shape[len(shape) - len(fixed) :], strict=True):
            if sizes.setdefault(sym, int(size)) != int(size):
                return False
    return True
