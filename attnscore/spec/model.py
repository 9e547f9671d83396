"""The spec model: one function contract with its worked examples and properties.

A :class:`Spec` is what :func:`attnscore.spec.load.load_spec` builds from a YAML file after
validating it; everything downstream (cases, grading, verification) reads only this frozen data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from attnscore.boundary.modules import ModuleConfig
from attnscore.catalogue.families import causal, scaled_dot_product, score_function
from attnscore.catalogue.families import masked as masked_contract
from attnscore.catalogue.mistakes import Mistake, get_mistake, mistakes_for
from attnscore.catalogue.properties import Property, get_property
from attnscore.maths.bounds import Bound, broken_bounds, legend_of
from attnscore.maths.contract import Contract
from attnscore.maths.lazy_hypothesis import hypothesis_exceptions
from attnscore.maths.tolerance import Tolerance
from attnscore.spec.environment import Environment
from attnscore.spec.rules import Rule

__all__ = ["DEFAULT_BUDGET_CALLS", "Spec", "StudentCopy", "WorkedExample", "PropertyUse", "default_time_budget"]

DEFAULT_BUDGET_CALLS = 10
"""A spec without ``time_budget_s`` gives each submission this many per-call limits (``timeout_s``)."""


def default_time_budget(timeout_s: float) -> float:
    """The time budget of a spec that sets none: :data:`DEFAULT_BUDGET_CALLS` times its per-call
    limit, seconds (30 s for ``timeout_s: 3``). Correct code, even pure Python loops over the keys
    on the largest drawn inputs, uses under half a second of it on the bundled specs; a submission
    that hangs on some inputs (``hangs_on_perpendicular.py``: four cases, 12 s) keeps every case it
    earns; one that hangs on every case is stopped after ten.

    >>> default_time_budget(3.0)
    30.0
    """
    return DEFAULT_BUDGET_CALLS * timeout_s


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
        upstream: the upstream gradient ``dO`` (float64, the output's shape): the example also runs
            the backward pass and its gradients (and ``L``, when the spec has ``function.logsumexp``)
            are judged; None: forward only.
        expected_gradients: input name -> the gradient written in the spec (checked against the
            golden gradient on load), for the student's reading; empty when none is written.
        expected_logsumexp: ``L`` as written in the spec (checked on load), or None.
        handover: optional masks the example leaves out (``"omitted"``, the call leaves the argument
            out) or writes as null (``"none"``, the call passes None), by parameter name
            (:data:`attnscore.boundary.layouts.HANDOVERS`); ``inputs`` holds what either means, every
            key kept (:meth:`attnscore.maths.contract.Contract.absent_value`).
        convention: the convention corner this example tests (``convention: fully_masked_row``;
            :mod:`attnscore.catalogue.conventions`), or ``""``: it is judged there, every other case
            sets the corner aside.
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
    upstream: np.ndarray | None = None
    expected_gradients: dict[str, np.ndarray] = field(default_factory=dict)
    expected_logsumexp: np.ndarray | None = None
    handover: dict[str, str] = field(default_factory=dict)
    convention: str = ""


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
        timeout_s: time limit per call, seconds (the worker's own time).
        time_budget_s: the spec's ``time_budget_s``: own time all of one submission's calls may
            take together, seconds, or None when the spec sets none (:attr:`budget_s` is then
            :func:`default_time_budget`); cases not run once it is spent get the verdict
            ``budget_spent`` (:attr:`attnscore.sandbox.limits.Limits.time_budget_s`).
        tolerance: default tolerance for every case.
        worked_examples, properties: the rubric items, in file order.
        path: the file it was loaded from.
        nonfinite: the NaN/inf policy; ``"match"``: NaN and ±inf must appear exactly where the
            golden value has them (NaN is never a wildcard), and nowhere else.
        mistakes: ids of the catalogue mistakes this spec must catch and diagnose (``attnscore
            verify`` checks it); None means every mistake that applies to the contract.
        student_copy: set on a student copy (hidden cases left out), else None.
        set_aside: convention corners whose entries are taken as right in every case
            (``conventions: {fully_masked_row: any}``, ``--allow``;
            :mod:`attnscore.catalogue.conventions`); every other entry of a case is still compared.
        not_asked: convention corners the course does not ask about (``conventions:
            {fully_masked_row: not_asked}``): their dedicated cases advise and carry no points.
        logsumexp: where the submission keeps its logsumexp ``L`` (``function.logsumexp``), as
            ``(place, index)``: ``"saved_tensors"`` (``ctx.save_for_backward``; ``index`` its position,
            or None for the one saved tensor of shape ``(..., n_q)``) or ``"returned"`` (an
            ``(O, L)`` tuple); None when ``L`` is not under test.
        factory: ``function.factory``: the named function returns the ``torch.autograd.Function``
            subclass to grade when called with no arguments.
        environment: the course's environment (``environment``): the packages a submission may
            import and whether it may use ``torch.compile`` (:class:`attnscore.spec.environment.Environment`).
        rules: the assignment's rules (``rules``): calls a submission must not make or must make,
            each a case worth its points (:class:`attnscore.spec.rules.Rule`).
        module: ``function.module``: :attr:`function` names a ``torch.nn.Module`` subclass, built
            per call with these constructor arguments and called with the drawn weights under
            these parameter names (:class:`attnscore.boundary.modules.ModuleConfig`); None: a function.
        own_properties: the properties the spec's own reference file registered
            (``function.reference``, :mod:`attnscore.catalogue.instructor`), listed by name in
            ``properties`` as any registered property (:meth:`find_property` finds both).
        own_mistakes: the known mistakes the spec's own reference file registered: diagnosed and
            verified beside the catalogue's (:meth:`known_mistakes`).
        reference_files: the resolved paths of the spec's own reference file(s) (``function.reference``,
            ``function.reference_check``): part of what the spec is (the case cache keys on their
            content; an export bundle carries them); empty for a bundled contract.
        reference_check: ``function.reference_check``'s function (a second, independent
            implementation, the spec's keywords added), which ``attnscore verify`` compares with the
            reference on drawn inputs; None when the spec names none.
        outside_reference: whether the spec was loaded with ``allow_outside_reference`` (a grader
            process that loads it again must be told so too).
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
    set_aside: tuple[str, ...] = ()
    not_asked: tuple[str, ...] = ()
    logsumexp: tuple[str, int | None] | None = None
    factory: bool = False
    environment: Environment = Environment()
    time_budget_s: float | None = None
    rules: tuple[Rule, ...] = ()
    module: ModuleConfig | None = None
    own_properties: tuple[Property, ...] = ()
    own_mistakes: tuple[Mistake, ...] = ()
    reference_files: tuple[str, ...] = ()
    reference_check: Callable[..., Any] | None = None
    outside_reference: bool = False

    def find_property(self, name: str) -> Property:
        """The property called ``name``: the spec's own (its reference file's), else the registered one.

        Raises:
            KeyError: neither has it (the message names the registered ones).
        """
        for prop in self.own_properties:
            if prop.name == name:
                return prop
        return get_property(name)

    def find_mistake(self, id: str) -> Mistake:
        """The mistake called ``id``: the spec's own (its reference file's), else the catalogue's.

        Raises:
            KeyError: neither has it (the message names the catalogue's).
        """
        for mistake in self.own_mistakes:
            if mistake.id == id:
                return mistake
        return get_mistake(id)

    def known_mistakes(self) -> list[Mistake]:
        """The mistakes a failing output of this spec is diagnosed against and that ``verify``
        runs: the catalogue's that apply to its contract, then its own reference file's."""
        return [*mistakes_for(self.contract), *self.own_mistakes]

    @property
    def budget_s(self) -> float:
        """The time budget grading gives each submission, seconds: :attr:`time_budget_s`, or the
        default for the spec's ``timeout_s`` (:func:`default_time_budget`)."""
        return self.time_budget_s if self.time_budget_s is not None else default_time_budget(self.timeout_s)

    @property
    def ruled_calls(self) -> tuple[str, ...]:
        """Every dotted name a rule forbids or requires, each once (what the worker traps)."""
        return tuple(dict.fromkeys(name for rule in self.rules for name in rule.names))

    def allowing(self, corners: tuple[str, ...]) -> Spec:
        """This spec with the convention corners ``corners`` set aside (``--allow fully_masked_row``).

        Raises:
            ValueError: an unknown corner, or one that does not apply to the spec's contract.
        """
        from attnscore.catalogue.conventions import applicable_corners, get_corner

        for name in corners:
            get_corner(name)
            if name not in applicable_corners(self.contract):
                known = ", ".join(applicable_corners(self.contract)) or "none"
                raise ValueError(
                    f"expected a convention corner of contract {self.contract.name} ({known}), found {name!r}"
                )
        added = tuple(c for c in corners if c not in self.set_aside)
        return dataclasses.replace(self, set_aside=self.set_aside + added) if added else self

    @property
    def shown_path(self) -> str:
        """The spec's name as feedback shows it, the same on every grading machine: ``<id>.yaml``
        (``score_matrix.yaml``) for a full spec, wherever its file lies and whatever it is called
        there (Gradescope's ``source/spec.yaml``, PrairieLearn's ``tests/spec.yaml``, a dask
        worker's temporary copy); a student copy's own file name (``student.yaml``), since its
        lines are the copy's. Never a path of the grading machine.

        Example:
            >>> from attnscore.check.verify import bundled_spec_path
            >>> from attnscore.spec.load import load_spec
            >>> load_spec(bundled_spec_path("score_matrix")).shown_path
            'score_matrix.yaml'
        """
        if self.student_copy is not None:
            return Path(self.path).name
        return f"{self.id}.yaml"

    def location(self, line: int) -> str:
        """``<shown_path>:<line>`` for a line of this spec's file (``score_matrix.yaml:35``; see :attr:`shown_path`)."""
        return f"{self.shown_path}:{line}"

    @property
    def max_points(self) -> Fraction:
        return (
            sum((e.points for e in self.worked_examples), Fraction(0))
            + sum((p.points for p in self.properties), Fraction(0))
            + sum((r.points for r in self.rules), Fraction(0))
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
        kept: list[WorkedExample] = []
        dropped: list[str] = []
        for ex in self.worked_examples:
            adapted = ex if _fits(contract, ex.inputs) else _adapted(self.contract, contract, ex, ties)
            if adapted is None:
                dropped.append(ex.id)
            else:
                kept.append(adapted)
        return dataclasses.replace(self, contract=contract, worked_examples=tuple(kept)), dropped

    def adapted_examples(self) -> list[str]:
        """Ids of the worked examples that :meth:`tied` rebuilt to fit a tie (their title says so)."""
        return [ex.id for ex in self.worked_examples if _ADAPTED in ex.title]

    def bounded(self, bounds: tuple[Bound, ...]) -> tuple[Spec, list[str]]:
        """This spec inside shape bounds (``n_q <= n_k``, :mod:`attnscore.maths.bounds`), and what
        was skipped by constraint, each as ``"example:<id> (n_q = 3, n_k = 2 break n_q <= n_k)"``.

        Generated inputs are drawn inside the bounds; a worked example outside them is skipped (not
        failed), and so is a property that cannot draw any input inside them.

        Raises:
            ValueError: a bound names a symbol the contract's legend does not use.
        """
        from attnscore.maths.strategies import derive_seed, draw_examples

        contract = self.contract.bounded(bounds)
        skipped: list[str] = []
        kept_examples = []
        for ex in self.worked_examples:
            broken = broken_bounds(contract, ex.inputs)
            if broken:
                skipped.append(f"example:{ex.id} ({'; '.join(broken)})")
            else:
                kept_examples.append(ex)
        kept_properties = []
        for use in self.properties:
            seed = derive_seed(self.id, self.version, self.seed, use.name, "bounds")
            try:
                drawn = draw_examples(self.find_property(use.name).examples(contract, use.max_value), 1, seed)
            except hypothesis_exceptions():
                drawn = []
            if drawn:
                kept_properties.append(use)
            else:
                skipped.append(f"property:{use.name} (no input it draws lies inside {', '.join(map(str, bounds))})")
        spec = dataclasses.replace(
            self, contract=contract, worked_examples=tuple(kept_examples), properties=tuple(kept_properties)
        )
        return spec, skipped


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


_ADAPTED = "(adapted to "


def _inert_resizes(contract: Contract) -> dict[str, tuple[bool, bool]]:
    """Legend symbols whose size a worked example can change without changing what it checks:
    symbol -> (may grow, may shrink). Growing pads with inert entries (zeros; True in a mask);
    shrinking drops trailing entries whose outputs nothing else depends on.

    - ``d_v``: each output column is weights @ one column of V: zero columns of V give zero output
      columns, and dropping a column drops only its output column.
    - ``n_q``: query rows are independent, except under a causal flag (the rows' alignment).
    - ``d_k``: zero coordinates leave every dot product alone, but a scale by √d_k would change:
      raw scores only.
    - ``n_k``: an extra key changes every softmax, unless it is masked out (a mask parameter);
      raw scores get an extra column only.
    """
    raw = score_function(contract) and not scaled_dot_product(contract)
    masked = bool(contract.bool_parameters)
    resizes = {"d_v": (True, True)}
    if not causal(contract):
        resizes["n_q"] = (True, True)
    if raw:
        resizes["d_k"] = (True, False)
    if raw or (masked and masked_contract(contract)):
        resizes["n_k"] = (True, False)
    return resizes


def _resize(contract: Contract, inputs: dict[str, np.ndarray], symbol: str, size: int) -> dict[str, np.ndarray]:
    """``inputs`` with every axis of ``symbol`` padded (zeros, or True in a mask) or cut to ``size``."""
    out = {}
    for name, legend in contract.parameters:
        arr = np.asarray(inputs[name])
        fixed = [sym for sym in legend if sym != "..."]
        for position, sym in enumerate(fixed):
            if sym != symbol:
                continue
            axis = arr.ndim - len(fixed) + position
            have = arr.shape[axis]
            if have == 1 and name in contract.bool_parameters and size > 1:
                continue  # a broadcast mask axis stays broadcast
            if size < have:
                arr = np.take(arr, range(size), axis=axis)
            elif size > have:
                pad = [(0, 0)] * arr.ndim
                pad[axis] = (0, size - have)
                fill = name in contract.bool_parameters
                if fill and symbol == "n_k":
                    fill = False  # an added key is masked out: no row's weights change
                arr = np.pad(arr, pad, constant_values=fill)
        out[name] = arr
    return out


def _adapted(original: Contract, tied: Contract, ex: WorkedExample, ties: dict[str, str]) -> WorkedExample | None:
    """``ex`` rebuilt so that its inputs fit ``ties`` (``d_v = d_k``: V padded with zero columns or
    cut), with its expected value recomputed from the float64 golden path; None when a tied symbol
    cannot be resized without changing what the example checks."""
    inputs = {k: np.asarray(v) for k, v in ex.inputs.items()}
    resizes = _inert_resizes(original)
    notes = []
    for symbol, same_as in ties.items():
        sizes = legend_of(original, inputs)
        if symbol not in sizes or same_as not in sizes or sizes[symbol] == sizes[same_as]:
            continue
        for change, target in ((symbol, sizes[same_as]), (same_as, sizes[symbol])):
            grow, shrink = resizes.get(change, (False, False))
            if (target > sizes[change] and grow) or (target < sizes[change] and shrink):
                inputs = _resize(original, inputs, change, target)
                notes.append(f"{change} {'padded' if target > sizes[change] else 'cut'} to {target}")
                break
        else:
            return None
    if not _fits(tied, inputs):
        return None
    with np.errstate(all="ignore"):
        expected = original.golden(inputs)
    tie_text = ", ".join(f"{a} = {b}" for a, b in ties.items())
    note = f"Adapted to {tie_text}: {', '.join(notes)}; the expected value was recomputed."
    return dataclasses.replace(
        ex,
        inputs=inputs,
        expected=expected,
        title=f"{ex.title} {_ADAPTED}{tie_text})",
        explanation=f"{ex.explanation.rstrip()} {note}".strip(),
    )
