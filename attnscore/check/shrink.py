"""Shrinking: the smallest failing input of a property, among the drawn ones or found by hypothesis.

Grading draws a fixed set of examples and stops at the first failure; that counterexample can be
large. In grading, :func:`add_shrunk` first tries the property's other drawn examples and its small
inputs (:mod:`attnscore.check.small_inputs`), smallest first (:func:`smallest_drawn_failure`: each
costs one call); otherwise,
or when none smaller fails the same way, :func:`shrink_case` re-runs hypothesis on the failing
property with shrinking on, starting from the same seed, and returns the minimal failing call.
Each step calls the implementation, so the work is bounded (``max_examples`` generated inputs,
``max_shrinks`` shrink steps and an optional wall-time budget); grading shrinks sandboxed
submissions too, with a small budget per case.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from attnscore.check.cases import Case, property_calls
from attnscore.check.diagnosis import holds
from attnscore.check.judge import example_position, judge_case, wrong_corner
from attnscore.check.runner import Runner
from attnscore.check.small_inputs import small_case
from attnscore.maths.lazy_hypothesis import hypothesis, hypothesis_exceptions
from attnscore.maths.strategies import _without_local_constants, derive_seed
from attnscore.report.failure import ShrunkFrom, size_of
from attnscore.report.results import CaseResult, Verdict
from attnscore.spec.model import Spec

__all__ = ["shrink_case", "add_shrunk", "build_small"]


def _property_diagnosis(spec: Spec, case: Case) -> str | None:
    """The mistake a property names itself (a fixed id), which needs no value evidence."""
    named = spec.find_property(case.property_name).diagnosis if case.property_name else None
    return named if isinstance(named, str) else None


class _Failed(AssertionError):
    pass


class _OutOfBudget(BaseException):
    """Raised inside the hypothesis run to stop it at once (hypothesis lets BaseException through)."""


def shrink_case(
    spec: Spec,
    case: Case,
    make_runner: Callable[[], Runner],
    dtype: str,
    *,
    max_examples: int = 50,
    max_shrinks: int = 200,
    max_steps: int | None = None,
    budget_s: float | None = None,
    verdict: Any = None,
    function: str | None = None,
    mistake: str | None = None,
    corner: str = "",
    clock: Callable[[], float] = time.monotonic,
    small_enough: int = 0,
) -> CaseResult | None:
    """The failing result of ``case``'s property on its shrunk minimal example, or None.

    With ``mistake`` (a catalogue id), a smaller input counts as failing only when the output
    there is still what that mistake gives (:func:`attnscore.check.diagnosis.holds`), so that the name
    shown next to the shrunk counterexample is true of it. Likewise a smaller input counts only
    when the convention corners (:mod:`attnscore.catalogue.conventions`) where its output is wrong are
    the original's: ``corner`` (``"fully_masked_row"``) or none, so that a value bug never shrinks
    into a fully masked row; the corners in ``spec.set_aside`` are taken as right throughout.

    ``make_runner()`` gives the runner to call (a fresh in-process one, or the submission's
    sandbox). With ``verdict``, only failures with that verdict count (a shrink step that times
    out is not a smaller example of a wrong value). After ``max_steps`` examples tried (a count,
    so the result is the same on every run) or, as a safety net for slow code, ``budget_s``
    seconds of ``clock`` (default wall time; the grader passes
    :func:`attnscore.check.session.work_clock`, which a busy machine does not run down), no more
    calls are made and the best example so far is kept. None when the property passes on every
    input hypothesis tries, or hypothesis itself gives up. A failing input of at most
    ``small_enough`` entries (the smallest the property draws) ends the search at once: no
    smaller one is to be had.
    """
    if case.kind != "property" or not case.property_name:
        return None

    use = next(u for u in spec.properties if u.name == case.property_name)
    named = spec.find_mistake(mistake) if mistake is not None else None
    deadline = None if budget_s is None else clock() + budget_s
    prop = spec.find_property(use.name)
    last: list[CaseResult] = []
    steps = [0]

    @hypothesis.settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        print_blob=False,
        phases=[hypothesis.Phase.generate, hypothesis.Phase.shrink],
        suppress_health_check=list(hypothesis.HealthCheck),
        report_multiple_bugs=False,
    )
    @hypothesis.seed(derive_seed(spec.id, spec.version, spec.seed, use.name, dtype))
    @hypothesis.given(prop.examples(spec.contract, use.max_value))
    def run_one(example: Any) -> None:
        steps[0] += 1
        out_of_steps = max_steps is not None and steps[0] > max_steps
        if len(last) > max_shrinks or out_of_steps or (deadline is not None and clock() > deadline):
            raise _OutOfBudget  # bound the work: keep the best so far
        calls = property_calls(spec, use.name, [example], dtype, case.tolerance)
        one = dataclasses.replace(case, calls=calls)
        observed: list[tuple[Any, Any]] = []
        result = judge_case(spec, one, make_runner(), dtype, function, diagnose_failures=False, observe=observed)
        if not result.passed and (verdict is None or result.verdict is verdict):
            if named is not None and not (observed and holds(named, spec, *observed[-1], dtype)):
                return  # smaller, but no longer the diagnosed mistake: not a counterexample of it
            if observed and wrong_corner(spec, *observed[-1]) != corner:
                return  # smaller, but wrong in another convention corner (or no longer in its own)
            last.append(result)
            if result.failure is not None and result.failure.size <= small_enough:
                raise _OutOfBudget  # as small as the property's inputs get: no step can make it smaller
            raise _Failed(result.verdict.label)

    try:
        with _without_local_constants():
            run_one()
    except (_Failed, _OutOfBudget):
        return last[-1] if last else None
    except hypothesis_exceptions():  # pragma: no cover - flaky or unsatisfiable: keep the original
        return None
    return None


def example_calls(case: Case) -> list[tuple[int, ...]]:
    """The indices of ``case``'s calls, one tuple per drawn example (a relational property's
    example makes several calls, the last of which holds the ``group``), in drawing order."""
    grouped = {i for call in case.calls for i in call.group}
    examples: list[tuple[int, ...]] = []
    for i, call in enumerate(case.calls):
        if call.group:
            examples.append(call.group)
        elif i not in grouped:
            examples.append((i,))
    return examples


def smallest_drawn_failure(
    spec: Spec,
    case: Case,
    make_runner: Callable[[], Runner],
    dtype: str,
    original: Any,
    *,
    mistake: str | None = None,
    function: str | None = None,
    max_steps: int | None = None,
    small: Case | None = None,
) -> tuple[CaseResult, int | None] | None:
    """The failing result of ``case`` on its smallest drawn example that fails as ``original``
    does (same verdict; ``mistake``'s output, when named; the same convention corner), with that
    example's position among the drawn ones (1-based; None for one of ``small``'s), or None when
    no drawn example smaller than the original's fails so.

    The case's examples are already drawn and their golden values built (grading stopped at its
    first failure), so trying them costs one call each and no drawing: smallest first, and the
    first one that fails is the counterexample, as small as the property's own draws allow.
    ``small`` (:func:`attnscore.check.small_inputs.small_case`) adds the property's small inputs
    to the candidates (at equal size a graded input comes first). Only when none is smaller does
    hypothesis shrink (:func:`shrink_case`). At most ``max_steps`` examples are tried (None: all
    smaller than the original's).
    """
    named = spec.find_mistake(mistake) if mistake is not None else None
    sources = [case] if small is None else [case, small]
    sized = sorted(
        (size_of(source.calls[group[-1]].args), s, n, group)
        for s, source in enumerate(sources)
        for n, group in enumerate(example_calls(source))
    )
    for tried, (size, s, _, group) in enumerate(sized):
        if size >= original.size or (max_steps is not None and tried >= max_steps):
            return None
        source = sources[s]
        calls = tuple(source.calls[i] for i in group)
        offset = group[0]
        calls = tuple(dataclasses.replace(c, group=tuple(i - offset for i in c.group)) if c.group else c for c in calls)
        one = dataclasses.replace(case, calls=calls)
        observed: list[tuple[Any, Any]] = []
        result = judge_case(spec, one, make_runner(), dtype, function, diagnose_failures=False, observe=observed)
        if result.passed or result.verdict is not original.verdict or result.failure is None:
            continue
        if named is not None and not (observed and holds(named, spec, *observed[-1], dtype)):
            continue  # fails, but not as the diagnosed mistake: not a counterexample of it
        if observed and wrong_corner(spec, *observed[-1]) != original.corner:
            continue  # fails in another convention corner (or not in the original's)
        if s:
            return result, None  # a small input: not one of the graded ones
        return result, example_position(case, group[-1] + 1)[0]  # numbered as the judge numbers inputs
    return None


_SHRINKABLE = (
    Verdict.WRONG_VALUE,
    Verdict.WRONG_SHAPE,
    Verdict.WRONG_DTYPE,
    Verdict.NON_FINITE,
    Verdict.BAD_RETURN_TYPE,
    Verdict.EXCEPTION,
)


def build_small(spec: Spec, case: Case, result: Any, dtype: str, seed: int | None = None) -> None:
    """Build ``case``'s small inputs now (:func:`attnscore.check.small_inputs.small_case`, kept per
    process) when grading is about to shrink ``result`` with them, so that the session can keep
    their drawing out of the shrinking clock: only the first failing submission of a process pays
    for it, and a safety net of work must not depend on which one that was."""
    failure = getattr(result, "failure", None)
    if result.passed or case.kind != "property" or case.visibility == "hidden" or failure is None:
        return
    if any(f.verdict in _SHRINKABLE for f in (failure, *failure.other_causes)):
        small_case(spec, case, dtype, seed)


def add_shrunk(
    spec: Spec,
    case: Case,
    result: Any,
    make_runner: Callable[[], Runner],
    dtype: str,
    *,
    max_steps: int | None = None,
    budget_s: float | None = None,
    function: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    drawn_first: bool = False,
    seed: int | None = None,
) -> Any:
    """``result`` with its counterexample replaced by a smaller failing input: with
    ``drawn_first`` (grading) the smallest failing one among the property's drawn inputs and its
    small inputs (drawn with base ``seed``, :mod:`attnscore.check.small_inputs`;
    :func:`smallest_drawn_failure`) when there is one, else hypothesis's minimal failing input.

    Only failing, visible property cases whose failure is about the returned values (or an
    exception) are shrunk; ``make_runner()`` gives the runner each shrink step calls. A second
    cause (``Failure.other_causes``) is shrunk too, with the corner it was found beside set aside.
    ``budget_s`` is measured on ``clock`` (see :func:`shrink_case`).
    """
    if result.passed or case.kind != "property" or case.visibility == "hidden" or result.failure is None:
        return result
    original = result.failure
    kwargs: dict[str, Any] = {"max_steps": max_steps, "budget_s": budget_s, "function": function, "clock": clock}
    kwargs["small"] = small_case(spec, case, dtype, seed) if drawn_first else None
    first = _shrunk(spec, case, original, make_runner, dtype, drawn_first, **kwargs)
    others = tuple(
        _shrunk(dataclasses.replace(spec, set_aside=o.set_aside), case, o, make_runner, dtype, drawn_first, **kwargs)
        for o in original.other_causes
    )
    if first is original and all(a is b for a, b in zip(others, original.other_causes, strict=True)):
        return result
    return dataclasses.replace(result, failure=dataclasses.replace(first, other_causes=others))


def _shrunk(
    spec: Spec,
    case: Case,
    original: Any,
    make_runner: Callable[[], Runner],
    dtype: str,
    drawn_first: bool,
    small: Case | None = None,
    **kwargs: Any,
) -> Any:
    """``original`` (one cause of a failing property) on its minimal failing input, or itself;
    ``small``: the property's small inputs, tried with the drawn ones (``drawn_first``)."""
    if original.verdict not in _SHRINKABLE:
        return original
    floor = min((size_of(call.args) for call in (*case.calls, *(small.calls if small else ()))), default=0)
    if original.size <= floor:
        return original  # already as small as any input the property draws (its simplest among them)
    mistake = None
    if original.diagnosis and original.diagnosis["id"] != _property_diagnosis(spec, case):
        mistake = original.diagnosis["id"]  # named from the values: shrink within that mistake only
    drawn = None
    if drawn_first:
        drawn = smallest_drawn_failure(
            spec,
            case,
            make_runner,
            dtype,
            original,
            mistake=mistake,
            function=kwargs.get("function"),
            max_steps=kwargs.get("max_steps"),
            small=small,
        )
    how, position = "hypothesis", original.example
    shrunk: CaseResult | None
    if drawn is not None:
        shrunk, found = drawn
        how, position = ("drawn", found) if found is not None else ("small", original.example)
    else:
        shrunk = shrink_case(
            spec,
            case,
            make_runner,
            dtype,
            verdict=original.verdict,
            mistake=mistake,
            corner=original.corner,
            small_enough=floor,
            **kwargs,
        )
    if shrunk is None or shrunk.failure is None:
        return original
    if shrunk.failure.size > original.size or shrunk.failure.args == original.args:
        return original  # a "minimal" counterexample is never larger than the one it replaces
    # The shrunk run is not diagnosed (small inputs make mistakes look alike); the original's name
    # (and corner) holds on the shrunk input too, since shrinking kept only inputs where it does.
    # A drawn one keeps its own position among the generated inputs; a small one and hypothesis's have none.
    return dataclasses.replace(
        shrunk.failure,
        example=position,
        examples=original.examples,
        diagnosis=original.diagnosis,
        shrunk_from=ShrunkFrom(original.example, original.examples, original.size, how),
        corner=original.corner,
        beside=original.beside,
        other_causes=original.other_causes,
    )
