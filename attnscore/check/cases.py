"""Cases: the spec's rubric items turned into concrete calls with golden values.

Worked examples come first, in spec order, then properties. Each case holds the calls to make
(arguments already cast to the tested dtype), and for each call the float64 golden value and the
per-entry allowed error. Generated inputs are derandomised: the seed of a property's examples is
derived from (spec id, spec version, base seed, property name, dtype), so the same spec always
gives the same cases.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from attnscore.boundary import dtypes as dtype_table
from attnscore.boundary.layouts import OMIT, PASS_NONE
from attnscore.boundary.lazy_torch import torch
from attnscore.maths.expectation import expect
from attnscore.maths.lazy_hypothesis import hypothesis_exceptions
from attnscore.maths.strategies import derive_seed, draw_examples
from attnscore.maths.tolerance import Tolerance
from attnscore.report.failure import Failure
from attnscore.report.results import CaseResult, Verdict
from attnscore.spec.located import SpecError, SpecProblem
from attnscore.spec.model import Spec

__all__ = ["Call", "Case", "advice_only", "build_cases", "cast", "integers", "property_calls", "spec_call"]


@dataclass(frozen=True)
class Call:
    """One call of the implementation: arguments, golden value and allowed error.

    A relational property makes several calls per example; the example's last call carries
    ``check`` (see :class:`attnscore.catalogue.properties.CheckContext`), ``group`` (the indices in the
    case's calls of all the example's calls, this one last) and the drawn ``example``.
    ``compare_golden`` False skips the golden comparison of this call. ``layouts`` maps an
    argument's name to the memory layout it is handed over in (:mod:`attnscore.boundary.layouts`);
    arguments not named there are fresh contiguous tensors. ``dtype`` is the dtype this call's
    inputs are cast to when it is not the case's (a property with ``every_dtype`` also calls in the
    spec's other dtypes); None means the case's. ``upstream`` is the upstream gradient ``dO`` (the
    output's shape, cast to the tested dtype) of a call whose backward pass is under test; its
    ``gradient_goldens`` and ``gradient_allowed`` map each differentiable input (the spec's names)
    to its float64 golden gradient (:mod:`attnscore.maths.golden_gradients`) and allowed error.
    """

    args: dict[str, np.ndarray]
    golden: np.ndarray
    allowed: np.ndarray
    check: Callable[..., str | None] | None = None
    group: tuple[int, ...] = ()
    example: Any = None
    compare_golden: bool = True
    layouts: dict[str, str] | None = None
    dtype: str | None = None
    upstream: np.ndarray | None = None
    gradient_goldens: dict[str, np.ndarray] | None = None
    gradient_allowed: dict[str, np.ndarray] | None = None


@dataclass(frozen=True)
class Case:
    """One rubric item made concrete.

    Attributes:
        id: ``example:<id>``, ``property:<name>`` or ``rule:<id>``.
        kind: ``"example"``, ``"property"`` or ``"rule"`` (an assignment rule, :mod:`attnscore.spec.rules`:
            no calls of its own, judged over the whole run by :mod:`attnscore.check.rule_cases`).
        title: one line.
        statement: for properties, the spec's student-facing statement; for examples, "".
        calls: the calls to make; a case passes when every call passes.
        points: exact points.
        visibility: ``"visible"`` or ``"hidden"``.
        location: ``file:line`` in the spec.
        tolerance: the tolerance applied.
        property_name: the registered property's name, or "".
        explanation: for worked examples, the spec's explanation (shown when a visible one fails).
        line: the case's line in the spec file (1-based; 0 when unknown), as in ``location``.
        corner: the convention corner the case is dedicated to (a worked example's
            ``convention:``, a property's ``corner``), or ``""``: a dedicated case judges its
            corner, every other case sets every corner aside
            (:mod:`attnscore.catalogue.conventions`). A dedicated case of a corner the spec does not
            ask about (``not_asked``) or sets aside (``any``) carries no points: it only advises.
    """

    id: str
    kind: str
    title: str
    statement: str
    calls: tuple[Call, ...]
    points: Fraction
    visibility: str
    location: str
    tolerance: Tolerance
    property_name: str = ""
    explanation: str = ""
    line: int = 0
    corner: str = ""

    def failure(self, verdict: Verdict, function: str, dtype: str, **fields: Any) -> Failure:
        """A failure of this case with ``verdict``, the graded ``function``'s name and the tested
        ``dtype``; ``fields`` say what failed (:class:`attnscore.report.failure.Failure`)."""
        return Failure(
            verdict=verdict,
            case_id=self.id,
            kind=self.kind,
            title=self.title,
            location=self.location,
            hidden=self.visibility == "hidden",
            function=function,
            dtype=dtype,
            statement=self.statement,
            **fields,
        )

    def failed(self, failure: Failure, calls: int) -> CaseResult:
        """This case's result when it failed: no points, and what judging found, after ``calls`` calls."""
        return CaseResult(
            self.id, self.kind, self.title, failure.verdict, Fraction(0), self.points, self.visibility, self.location,
            failure, calls,
        )  # fmt: skip

    def passed(self, calls: int) -> CaseResult:
        """This case's result when it passed: every point, no failure, after ``calls`` calls."""
        return CaseResult(
            self.id, self.kind, self.title, Verdict.PASSED, self.points, self.points, self.visibility, self.location,
            None, calls,
        )  # fmt: skip


def advice_only(spec: Spec, corner: str) -> bool:
    """Whether a case dedicated to ``corner`` only advises (no points): the spec does not ask about
    the corner (``not_asked``) or takes any value there (``any``, ``--allow``)."""
    return bool(corner) and (corner in spec.not_asked or corner in spec.set_aside)


def cast(array: np.ndarray, dtype: str) -> np.ndarray:
    """Round ``array`` to ``dtype`` (bfloat16 values come back stored as float32); bool masks stay
    bool and int32 arrays (integer parameters: offsets, lengths) stay int32."""
    if np.asarray(array).dtype in (np.bool_, np.int32):
        return np.array(array, order="C")  # np.ascontiguousarray would make a 0-d array 1-d
    t = torch.as_tensor(np.asarray(array, dtype=np.float64)).to(dtype_table.TORCH_DTYPES[dtype])
    if dtype == "bfloat16":
        t = t.to(torch.float32)
    return np.array(t.numpy(), order="C")


def integers(array: Any) -> np.ndarray:
    """An integer parameter's values as a contiguous int32 array (what the implementation receives)."""
    return np.array(array, dtype=np.int32, order="C")


def _numbers(array: Any) -> np.ndarray:
    """A float (or bool mask) parameter's values: integers a property wrote (``rng.integers``) become
    float64 first, so that only the contract's integer parameters keep an integer dtype."""
    arr = np.asarray(array)
    return arr.astype(np.float64) if arr.dtype.kind in "iu" else arr


def spec_call(
    spec: Spec, args: dict[str, np.ndarray], dtype: str, tolerance: Tolerance, *, upstream: np.ndarray | None = None
) -> Call:
    """One call of ``spec``'s function on ``args`` (by the contract's parameter names, float64 or
    bool/int), cast to ``dtype``, with its golden value and allowed error under ``tolerance``
    (:func:`attnscore.maths.expectation.expect`); with ``upstream`` (``dO``, the output's shape)
    also its backward pass's golden gradients and allowed errors. The call's arguments are keyed
    by the spec's parameter names. Raises ValueError for ``upstream`` on a contract without
    closed-form gradients."""
    return _call(spec, args, dtype, tolerance, upstream=upstream)


def _call(spec: Spec, args: dict[str, np.ndarray], dtype: str, tolerance: Tolerance, **extra: Any) -> Call:
    received_args = {
        name: integers(args[name]) if name in spec.contract.int_parameters else cast(_numbers(args[name]), dtype)
        for name in spec.contract.parameter_names
    }
    pairs = zip(spec.contract.parameter_names, spec.parameter_names, strict=True)
    renamed = dict(pairs)
    received_args = {renamed[old]: value for old, value in received_args.items()}
    if extra.get("layouts"):
        extra["layouts"] = {renamed[old]: layout for old, layout in extra["layouts"].items()}
    contract_args = dict(zip(spec.contract.parameter_names, received_args.values(), strict=True))
    upstream = None if extra.get("upstream") is None else cast(extra["upstream"], dtype)
    expected = expect(spec.contract, contract_args, dtype, tolerance, upstream=upstream)
    if upstream is not None:
        extra["upstream"] = upstream
        extra["gradient_goldens"] = {renamed[name]: g for name, g in expected.gradients.items()}
        extra["gradient_allowed"] = {renamed[name]: a for name, a in expected.gradients_allowed.items()}
    return Call(received_args, expected.golden, expected.allowed, **extra)


def property_calls(
    spec: Spec, use_name: str, examples: list[Any], dtype: str, tolerance: Tolerance
) -> tuple[Call, ...]:
    """Turn a property's drawn examples into calls (several per example for relational properties).

    A property with ``every_dtype`` makes each example's calls again in every other dtype of the
    spec (``spec.dtypes``), after the ones in ``dtype``; those calls carry their own ``dtype``. A
    property with its own ``dtype`` (``gradcheck``: float64) makes every call in it, whatever ``dtype``.
    A property with ``omits`` hands a spec's optional masks over in turn given, left out and as None
    (:data:`HANDOVER_TURNS`, by the example's position; the call's ``layouts`` say which).
    """
    prop = spec.find_property(use_name)
    if prop.dtype is not None and prop.dtype != dtype:
        own = property_calls(spec, use_name, examples, prop.dtype, tolerance)
        return tuple(dataclasses.replace(c, dtype=prop.dtype) for c in own)
    calls: list[Call] = []
    for number, example in enumerate(examples):
        arg_list = _handed_over(spec, prop, number, prop.calls(spec.contract, example))
        start = len(calls)
        for k, (args, handover) in enumerate(arg_list):
            last = k == len(arg_list) - 1
            extra: dict[str, Any] = {"compare_golden": prop.golden, "layouts": handover}
            if last and prop.upstream is not None:
                extra["upstream"] = prop.upstream(spec.contract, example)
            if prop.call_layouts is not None:
                extra["layouts"] = prop.call_layouts(spec.contract, example)[k] or None
            elif prop.layouts is not None and last:
                extra["layouts"] = prop.layouts(spec.contract, example)
            if last and prop.check is not None:
                extra.update(check=prop.check, group=tuple(range(start, start + len(arg_list))), example=example)
            calls.append(_call(spec, args, dtype, tolerance, **extra))
    if prop.every_dtype:
        # The same examples in each of the spec's other dtypes, each its own example: a result that
        # always comes back float32 is wrong for float64 inputs, though grading runs one dtype.
        for other in (d for d in getattr(spec, "dtypes", ()) if d != dtype):
            for number, example in enumerate(examples):
                for args, handover in _handed_over(spec, prop, number, prop.calls(spec.contract, example)):
                    at = len(calls)
                    extra = {"compare_golden": prop.golden, "layouts": handover}
                    if prop.check is not None:
                        extra.update(check=prop.check, group=(at,), example=example)
                    calls.append(dataclasses.replace(_call(spec, args, other, tolerance, **extra), dtype=other))
    return tuple(calls)


HANDOVER_TURNS = (None, OMIT, PASS_NONE)
"""How a property with ``omits`` hands over a spec's optional masks, example after example: given,
left out, passed as None (:data:`attnscore.boundary.layouts.HANDOVERS`)."""


def _handed_over(
    spec: Spec, prop: Any, number: int, arg_list: list[dict[str, np.ndarray]]
) -> list[tuple[dict[str, np.ndarray], dict[str, str] | None]]:
    """The calls of example ``number``, each with how its optional masks are handed over (None:
    as arrays). For a property with ``omits`` and a spec with optional masks, example ``number``
    takes its turn of :data:`HANDOVER_TURNS`: left out or None, its masks hold what that means
    (every key kept, :meth:`attnscore.maths.contract.Contract.absent_value`), so the golden value
    and the check see the call as made."""
    contract = spec.contract
    turn = HANDOVER_TURNS[number % len(HANDOVER_TURNS)] if prop.omits and contract.omittable else None
    if turn is None:
        return [(args, None) for args in arg_list]
    out: list[tuple[dict[str, np.ndarray], dict[str, str] | None]] = []
    for args in arg_list:
        filled = dict(args)
        for name in sorted(contract.omittable):
            filled[name] = contract.absent_value(name, filled)
        out.append((filled, dict.fromkeys(sorted(contract.omittable), turn)))
    return out


def _example_call(spec: Spec, ex: Any, dtype: str, tol: Tolerance) -> Call:
    """A worked example's call; with ``upstream`` also its backward pass, judged by
    :func:`attnscore.catalogue.properties.flash_attention.backward_check` (gradients, and ``L``).
    An optional mask the example leaves out or writes as null is handed over so (``layouts``)."""
    handover = dict(getattr(ex, "handover", None) or {}) or None
    if getattr(ex, "upstream", None) is None:
        return _call(spec, ex.inputs, dtype, tol, layouts=handover)
    from attnscore.catalogue.properties.flash_attention import backward_check

    return _call(
        spec, ex.inputs, dtype, tol, upstream=ex.upstream, check=backward_check, example=ex.inputs, layouts=handover
    )


def build_cases(spec: Spec, dtype: str | None = None, seed: int | None = None) -> list[Case]:
    """Build every case of ``spec`` for ``dtype`` (default: the spec's first) and base ``seed``."""
    dtype = dtype or spec.dtypes[0]
    base_seed = spec.seed if seed is None else seed
    cases = []
    for ex in spec.worked_examples:
        tol = ex.tolerance or spec.tolerance
        corner = ex.convention
        cases.append(
            Case(
                id=f"example:{ex.id}",
                kind="example",
                title=ex.title,
                statement="",
                calls=(_example_call(spec, ex, dtype, tol),),
                points=Fraction(0) if advice_only(spec, corner) else ex.points,
                visibility=ex.visibility,
                location=spec.location(ex.line),
                line=ex.line,
                tolerance=tol,
                explanation=ex.explanation,
                corner=corner,
            )
        )
    for index, use in enumerate(spec.properties):
        prop = spec.find_property(use.name)
        prop_seed = derive_seed(spec.id, spec.version, base_seed, use.name, dtype)
        try:
            examples = draw_examples(prop.examples(spec.contract, use.max_value), use.examples, prop_seed)
        except hypothesis_exceptions() as exc:
            raise SpecError(
                [
                    SpecProblem(
                        spec.path,
                        use.line,
                        1,
                        f"properties[{index}]",
                        f"expected inputs that {use.name} can be tried on, found that none could be generated "
                        f"({type(exc).__name__}; with max_value {use.max_value:g}, a larger max_value may help)",
                    )
                ]
            ) from None
        calls = property_calls(spec, use.name, examples, dtype, spec.tolerance)
        cases.append(
            Case(
                id=f"property:{use.name}",
                kind="property",
                title=use.statement,
                statement=use.statement,
                calls=calls,
                points=Fraction(0) if advice_only(spec, prop.corner) else use.points,
                corner=prop.corner,
                visibility=use.visibility,
                location=spec.location(use.line),
                line=use.line,
                tolerance=spec.tolerance,
                property_name=use.name,
            )
        )
    for rule in spec.rules:  # judged over the whole run (attnscore.check.rule_cases): no calls of their own
        cases.append(
            Case(
                id=f"rule:{rule.id}",
                kind="rule",
                title=rule.statement,
                statement=rule.statement,
                calls=(),
                points=rule.points,
                visibility="visible",
                location=spec.location(rule.line),
                line=rule.line,
                tolerance=spec.tolerance,
            )
        )
    return cases
