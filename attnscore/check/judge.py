"""Running cases against an implementation and judging each one.

This is the middle of the data flow: cases (:mod:`attnscore.check.cases`) go to a runner
(:mod:`attnscore.check.runner` in process, :mod:`attnscore.sandbox.launch` for untrusted code), each outcome is
compared with the golden value (:mod:`attnscore.check.compare`), and the verdicts become frozen
results (:mod:`attnscore.report.results`). A case stops at its first failing call; one failing case
never stops the others.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from attnscore.boundary.gradients import WithGradients
from attnscore.boundary.modules import ModuleConfig
from attnscore.boundary.outputs import CallFailure, Received
from attnscore.catalogue.conventions import applicable_corners, corner_region, found_text, set_aside
from attnscore.catalogue.families import flash_attention_2
from attnscore.catalogue.mistakes import MISTAKES, get_mistake
from attnscore.catalogue.properties import CheckContext
from attnscore.catalogue.properties.gradients import first_gradient_failure
from attnscore.check.cases import Call, Case, advice_only
from attnscore.check.compare import compare
from attnscore.check.diagnosis import diagnose, diagnose_raised, holds
from attnscore.check.row_hints import empty_rows_wrong, nonfinite_hint, unwritten_rows_hint
from attnscore.check.runner import Runner
from attnscore.maths.tolerance import entries_close
from attnscore.report.failure import Failure, Mismatch, json_array
from attnscore.report.feedback import cause_key
from attnscore.report.results import CaseResult, Verdict
from attnscore.spec.model import Spec

__all__ = ["judge_case", "example_position", "for_case", "wrong_corner"]


def example_position(case: Case, number: int) -> tuple[int, int]:
    """``(example, examples)`` of call ``number`` (1-based): a relational example makes several calls."""
    starts = [i for i, call in enumerate(case.calls) if not call.group or call.group[0] == i]
    return sum(1 for i in starts if i < number), len(starts)


def _called_as(spec: Spec, function: str | None = None) -> str:
    """How a call of the graded function is written for the student to paste: ``FlashAttention2.apply``
    for a FlashAttention-2 assignment (an autograd Function is called through ``.apply``),
    ``get_flashattention_autograd_function_pytorch().apply`` when the spec names its factory, else the name."""
    name = function or spec.function
    if not flash_attention_2(spec.contract):
        return name
    return f"{name}().apply" if getattr(spec, "factory", False) else f"{name}.apply"


def _failure(
    spec: Spec, case: Case, number: int, verdict: Verdict, function: str | None, dtype: str, **fields: object
) -> Failure:
    index, total = example_position(case, number)
    return case.failure(
        verdict,
        _called_as(spec, function),
        dtype,
        call=number,
        example=index,
        examples=total,
        explanation=case.explanation,
        **fields,
    )


def _by_name(spec: Spec, case: Case) -> tuple[str, ...]:
    """The case's argument names (the spec's) that the contract passes by name (``attn_mask``)."""
    if not case.calls or not spec.contract.keyword_parameters:
        return ()
    names = zip(case.calls[0].args, spec.contract.parameter_names, strict=False)
    return tuple(name for name, own in names if own in spec.contract.keyword_parameters)


def _keyword_hint(
    outcome: CallFailure, spec: Spec, function: str | None, by_name: tuple[str, ...], keywords: dict[str, Any] | None
) -> str:
    """A failed call's text, with how the spec calls the function added when it raised a
    ``TypeError`` about a keyword argument it does not take (or a positional one it lacks)."""
    if outcome.exception != "TypeError" or not (by_name or keywords) or "argument" not in outcome.message:
        return outcome.message
    positional = len(spec.parameter_names) - len(by_name)
    shown = [*spec.parameter_names[:positional], *(f"{n}=..." for n in by_name)]
    shown += [f"{k}={v!r}" for k, v in (keywords or {}).items()]
    return (
        f"{outcome.message}; every call is {function or spec.function}({', '.join(shown)}): "
        "your function must take these keyword arguments by name"
    )


def _contract_args(spec: Spec, call: Call) -> dict[str, np.ndarray]:
    """The call's arguments keyed by the contract's parameter names (the spec may rename them)."""
    return dict(zip(spec.contract.parameter_names, call.args.values(), strict=True))


def wrong_corner(spec: Spec, call: Call, outcome: Received | CallFailure) -> str:
    """The first convention corner, not set aside, where ``outcome`` is wrong (``""`` if none, and
    for a call that failed)."""
    if isinstance(outcome, CallFailure) or outcome.shape != np.shape(call.golden):
        return ""
    got = outcome.array.astype(np.float64)
    for name in applicable_corners(spec.contract):
        if name in spec.set_aside:
            continue
        region = corner_region(name, spec.contract, _contract_args(spec, call), outcome.shape)
        if region is not None and not entries_close(got[region], call.golden[region], call.allowed[region]).all():
            return name
    return ""


def _found_in_corner(spec: Spec, call: Call, outcome: Received, name: str) -> str:
    """What ``outcome`` holds in corner ``name`` (:func:`attnscore.catalogue.conventions.found_text`)."""
    region = corner_region(name, spec.contract, _contract_args(spec, call), outcome.shape)
    if region is None:
        return ""
    return found_text(outcome.array.astype(np.float64)[region], call.golden[region])


def _empty_rows_hint(spec: Spec, call: Call, outcome: Received, runner: Runner, dtype: str) -> str:
    """The note for an output wrong only in rows of queries that keep no key
    (:func:`attnscore.check.row_hints.empty_rows_wrong`), else ``""``. The implementation is called
    once more on the same inputs: rows that change between the two calls are memory it never writes."""
    wrong = empty_rows_wrong(spec, call, outcome, call.allowed)
    if wrong is None:
        return ""
    changed = False
    if call.upstream is None:
        again = runner.call(call.args, dtype, call.layouts) if call.layouts else runner.call(call.args, dtype)
        if isinstance(again, Received) and again.shape == outcome.shape:
            first, second = outcome.array.astype(np.float64)[wrong], again.array.astype(np.float64)[wrong]
            changed = not np.array_equal(first, second, equal_nan=True)
    return unwritten_rows_hint(spec, call, wrong, changed)


def for_case(spec: Spec, case: Case) -> Spec:
    """``spec`` as ``case`` is judged: every convention corner of the contract set aside, except the
    one the case is dedicated to (:attr:`Case.corner`), unless the spec sets that one aside too
    (``any``, ``--allow``). So a corner costs only its own cases
    (:mod:`attnscore.catalogue.conventions`)."""
    aside = tuple(c for c in applicable_corners(spec.contract) if c != case.corner and c not in spec.set_aside)
    return dataclasses.replace(spec, set_aside=spec.set_aside + aside) if aside else spec


def judge_case(
    spec: Spec,
    case: Case,
    runner: Runner,
    dtype: str,
    function: str | None = None,
    *,
    diagnose_failures: bool = True,
    observe: list[tuple[Call, Received | CallFailure]] | None = None,
    disclosed: CallFailure | None = None,
) -> CaseResult:
    """Make the case's calls in order and return its result (stops at the first failure).

    Convention corners (:mod:`attnscore.catalogue.conventions`): the entries of the corners in
    ``spec.set_aside`` are taken as right, everything else is judged. When the failing output is
    wrong in a corner that is judged (``Failure.corner``, e.g. a fully masked row that is NaN),
    the case is judged again with that corner set aside, and a failure found then is a second
    cause (``Failure.other_causes``, diagnosed on its own), so one convention never hides another
    bug; when it has the first failure's cause (the same diagnosed mistake, or the first mistake
    also gives its output), the bug is not the corner's and neither is reported. The verdict
    and points are the first failure's. Not with ``diagnose_failures`` False
    (shrink steps judge one cause).

    Each call is compared with its golden value; a call that closes a relational example also
    runs the property's check over the example's outputs. A failing output is matched against the
    mistake catalogue (:mod:`attnscore.check.diagnosis`, which may call ``runner`` on its confirmation
    inputs) unless ``diagnose_failures`` is False; so is a call that raised, against the mistakes
    that raise (:func:`attnscore.check.diagnosis.diagnose_raised`). ``function`` is the graded
    function's name as shown in feedback (default: the spec's). ``observe``, when given, receives
    the failing call and its output or failure (for shrinking, :mod:`attnscore.check.shrink`). A call failure that is
    ``disclosed`` (the load failure a session already reported before any hidden input ran) is
    marked so (``Failure.disclosed``: a hidden case may show it in full).

    A failed case carries a :class:`attnscore.report.failure.Failure`: the record of what was
    found, rendered later by :mod:`attnscore.report.feedback`.
    """
    if case.kind == "rule":
        raise ValueError(f"expected a case with calls, found the rule case {case.id} (judged by check.rule_cases)")
    spec = for_case(spec, case)
    result = _judge_once(
        spec, case, runner, dtype, function, diagnose_failures=diagnose_failures, observe=observe, disclosed=disclosed
    )
    failure = result.failure
    if failure is None or not failure.corner or not diagnose_failures:
        return result
    aside = dataclasses.replace(spec, set_aside=(*spec.set_aside, failure.corner))
    raw: list[tuple[Call, Received]] = []
    again = _judge_once(aside, case, runner, dtype, function, diagnose_failures=True, raw=raw, disclosed=disclosed)
    if again.failure is None:
        return result  # the corner explains the whole failure
    second = again.failure
    key = cause_key(failure)
    same = key is not None and cause_key(second) == key
    if not same and failure.diagnosis is not None and raw and failure.diagnosis["id"] in MISTAKES:
        # the first failure's mistake also gives the second one's output as returned (its corner included)
        same = holds(spec.find_mistake(failure.diagnosis["id"]), spec, *raw[-1], dtype)
    if same:
        # the same cause outside the corner too (mask_ignored is wrong everywhere): not a
        # convention, and not a second cause
        return dataclasses.replace(result, failure=dataclasses.replace(failure, corner=""))
    if again.failure.corner:  # a further corner: its own second cause, found the same way
        second = judge_case(aside, case, runner, dtype, function, disclosed=disclosed).failure or second
    causes = tuple(
        dataclasses.replace(c, other_causes=(), beside=c.beside or failure.corner)
        for c in (second, *second.other_causes)
    )
    return dataclasses.replace(result, failure=dataclasses.replace(failure, other_causes=causes))


def _where(
    call: Call, keywords: dict[str, Any] | None, by_name: tuple[str, ...], module: ModuleConfig | None = None
) -> dict[str, object]:
    """How a failing call was made, for its reproduction: the inputs as JSON data, their memory
    layouts, the keywords, the parameters passed by name and a module's config (made only for the
    call that fails)."""
    return {
        "args": {n: json_array(a) for n, a in call.args.items()},
        "layouts": dict(call.layouts) if call.layouts else None,
        "keywords": keywords,
        "by_name": by_name,
        "module": module.to_json() if module is not None else None,
    }


def _compare(spec: Spec, case: Case, call: Call, outcome: Received, dtype: str) -> Mismatch | None:
    """The call's output against its golden value (:func:`attnscore.check.compare.compare`), the
    tolerance in words with wrong values (put in words only then)."""
    mismatch = compare(outcome, call.golden, call.allowed, accept=spec.accept, dtype=dtype)
    if mismatch is None or mismatch.verdict is not Verdict.WRONG_VALUE:
        return mismatch
    return dataclasses.replace(mismatch, tolerance=case.tolerance.describe(dtype, spec.contract.bound_text))


def _gradients_wrong(call: Call, outcome: Received, dtype: str) -> str | None:
    """What is wrong with a backward call's gradients against its golden gradients (each input's
    :func:`attnscore.catalogue.properties.gradients.first_gradient_failure`), or None: a gradient property
    that does not compare them itself (``gradcheck``, ``masked_entries_get_no_gradient``) earns its
    points only when they are right."""
    if call.upstream is None or not call.gradient_goldens:
        return None
    if not isinstance(outcome, WithGradients):
        return "no gradients came back from this call (the runner did not run the backward pass)"
    return first_gradient_failure(outcome, call.gradient_goldens, call.gradient_allowed or {}, dtype)


_WHEN = {
    "forward": "",
    "backward": "during its backward pass",
    "after": "after it had returned",
}


def _inspection_failure(
    inspection: dict[str, list[str]] | None, number: int, calls: int, backward: bool
) -> tuple[str, bool] | None:
    """``(text, mutated)`` when the runner saw call ``number`` (of ``calls``) change an input in
    place or return an output sharing an input's memory, else None: every call is judged for both,
    whatever its case (a mutation or an alias costs the case), named with the inputs and the call."""
    if not inspection:
        return None
    mutated, aliased = inspection.get("mutated") or [], inspection.get("aliased") or []
    if not mutated and not aliased:
        return None
    which = [f"call {number} of {calls}"] if calls > 1 else []
    if mutated:
        stages = inspection.get("mutated_when") or []
        found = {w for w in stages if w} or ({"backward"} if backward and "dO" in mutated else set())
        when = [_WHEN[w] for w in sorted(found) if _WHEN.get(w)]
        where = f" ({', '.join(which + when)})" if which or when else ""
        names = ", ".join(mutated)
        return f"your function changed its input(s) {names} in place{where}; leave inputs as they are", True
    where = f" ({which[0]})" if which else ""
    return (
        f"your output shares memory with the input(s) {', '.join(aliased)}{where}; "
        "return a new tensor, not a view of an input"
    ), False


def _judge_once(
    spec: Spec,
    case: Case,
    runner: Runner,
    dtype: str,
    function: str | None,
    *,
    diagnose_failures: bool,
    observe: list[tuple[Call, Received | CallFailure]] | None = None,
    raw: list[tuple[Call, Received]] | None = None,
    disclosed: CallFailure | None = None,
) -> CaseResult:
    """One pass over the case's calls, with ``spec.set_aside`` applied (see :func:`judge_case`);
    ``raw``, when given, receives the failing call and its output as returned (no corner set aside)."""
    device = runner.device
    # the call as the contract binds it: trailing parameters by name, the spec's keywords fixed
    keywords = {**dict(spec.contract.options), **runner.keywords} or None
    by_name = _by_name(spec, case)
    outputs: dict[int, Received] = {}
    inspections: dict[int, dict[str, list[str]] | None] = {}
    # a call whose property does not compare values itself: its own comparison with the golden value
    # (and golden gradients), held until the property's check has run (points only for computing)
    pending: dict[int, Mismatch | str] = {}
    grouped = {i for c in case.calls if c.check is not None for i in c.group}  # settled by a later check
    deferred: dict[str, Any] | None = None  # the first call whose property held on wrong values
    case_dtype = dtype

    def conclude(
        call: Call,
        number: int,
        outcome: Received,
        returned: Received,
        mismatch: Mismatch | None,
        check_text: str,
        diagnosis: dict[str, str] | None,
        property_held: bool,
        dtype: str,
    ) -> CaseResult:
        """The case failed at call ``number``: its failure, diagnosed."""
        verdict = mismatch.verdict if mismatch is not None else Verdict.WRONG_VALUE
        if observe is not None:
            observe.append((call, outcome))
        if raw is not None:
            raw.append((call, returned))
        output_right = call.upstream is not None and mismatch is None  # only a gradient (or L) is wrong
        if diagnosis is None and diagnose_failures:
            diagnosis = diagnose(spec, call, outcome, dtype, runner, output_right=output_right)
        hint = ""
        if case.property_name and verdict is Verdict.WRONG_VALUE:
            hint = spec.find_property(case.property_name).hint(outcome.array.astype(np.float64), call.golden) or ""
        if verdict is Verdict.NON_FINITE:
            hint = nonfinite_hint(spec, call, outcome) or ""
        if verdict is Verdict.WRONG_VALUE and not hint and diagnosis is None and diagnose_failures:
            hint = _empty_rows_hint(spec, call, outcome, runner, dtype)
        corner = wrong_corner(spec, call, outcome) if diagnose_failures else ""
        failure = _failure(
            spec,
            case,
            number,
            verdict,
            function,
            dtype,
            **_where(call, keywords, by_name, spec.module),
            mismatch=mismatch,
            check=check_text,
            hint=hint,
            diagnosis=diagnosis,
            corner=corner,
            corner_found=_found_in_corner(spec, call, outcome, corner) if corner else "",
            advice=advice_only(spec, case.corner),
            set_aside=tuple(spec.set_aside),
            property_held=property_held,
        )
        return case.failed(failure, number)

    for number, call in enumerate(case.calls, start=1):
        dtype = call.dtype or case_dtype  # a call may be made in another of the spec's dtypes
        if call.upstream is not None:
            outcome = runner.call(call.args, dtype, call.layouts, upstream=call.upstream)
        elif call.layouts:
            outcome = runner.call(call.args, dtype, call.layouts)
        else:
            outcome = runner.call(call.args, dtype)
        if isinstance(outcome, CallFailure):
            verdict = outcome.verdict
            call_fields: dict[str, object] = {
                "detail": _keyword_hint(outcome, spec, function, by_name, keywords),
                "exception": outcome.exception,
                "scope": outcome.scope,
                "disclosed": disclosed is not None and outcome is disclosed,
            }
            if outcome.scope == "submission":  # the same for every case: no inputs, no reproduction
                return case.failed(_failure(spec, case, number, verdict, function, dtype, **call_fields), number)
            if verdict is Verdict.BUDGET_SPENT:  # never called: nothing to reproduce, one call fewer made
                return case.failed(_failure(spec, case, number, verdict, function, dtype, **call_fields), number - 1)
            if observe is not None:
                observe.append((call, outcome))
            if diagnose_failures:  # a catalogue mistake that raises exactly here (a tile-size requirement)
                call_fields["diagnosis"] = diagnose_raised(spec, call, outcome, dtype, runner)
            where = _where(call, keywords, by_name, spec.module)
            return case.failed(_failure(spec, case, number, verdict, function, dtype, **where, **call_fields), number)
        returned = outcome
        if spec.set_aside:  # set-aside corners are taken as right; all else is judged
            outcome = set_aside(outcome, call.golden, spec.set_aside, spec.contract, _contract_args(spec, call))
        outputs[number - 1] = outcome
        inspections[number - 1] = runner.last_inspection
        mismatch: Mismatch | None = None
        check_text = ""
        diagnosis = None
        own = _compare(spec, case, call, outcome, dtype)
        if call.compare_golden:
            mismatch = own
        else:
            late = own if own is not None else _gradients_wrong(call, outcome, dtype)
            if late is not None:
                pending[number - 1] = late
        property_held = False
        if call.check is not None and (mismatch is None or mismatch.verdict is Verdict.WRONG_VALUE):
            group = call.group or (number - 1,)
            ctx = CheckContext(
                outputs=[outputs[i] for i in group],
                args=[case.calls[i].args for i in group],
                goldens=[case.calls[i].golden for i in group],
                allowed=[case.calls[i].allowed for i in group],
                inspections=[inspections.get(i) for i in group],
                dtype=dtype,
                device=device,
                contract=spec.contract,
                example=call.example,
                gradient_goldens=[case.calls[i].gradient_goldens for i in group],
                gradient_allowed=[case.calls[i].gradient_allowed for i in group],
            )
            if mismatch is None:
                check_text = call.check(ctx) or ""
            else:  # wrong values: does the property itself hold on them? (the header says which)
                try:
                    property_held = not call.check(ctx)
                except Exception:  # noqa: BLE001 - a check that cannot read these values does not hold
                    property_held = False
            if check_text:
                prop_diag = spec.find_property(case.property_name).diagnosis_for(ctx) if case.property_name else None
                if prop_diag:
                    diagnosis = {"id": prop_diag, "message": get_mistake(prop_diag).message}
        if mismatch is None and not check_text and (call.check is not None or number - 1 not in grouped):
            # the property held: its points come only with right values in the same calls. The first
            # such call with wrong values is reported only when nothing later fails the property itself
            for i in call.group or (number - 1,):
                late = pending.get(i)
                if late is not None and deferred is None:
                    wrong = case.calls[i]
                    deferred = {
                        "call": wrong,
                        "number": i + 1,
                        "outcome": outputs[i],
                        "returned": outputs[i],
                        "mismatch": None if isinstance(late, str) else late,
                        "check_text": late if isinstance(late, str) else "",
                        "diagnosis": None,
                        "property_held": call.check is not None,
                        "dtype": wrong.dtype or case_dtype,
                    }
        if mismatch is None and not check_text:
            seen = _inspection_failure(runner.last_inspection, number, len(case.calls), call.upstream is not None)
            if seen is None:
                continue
            check_text, mutated = seen
            if mutated:
                diagnosis = {"id": "inputs_mutated", "message": get_mistake("inputs_mutated").message}
        return conclude(call, number, outcome, returned, mismatch, check_text, diagnosis, property_held, dtype)
    if deferred is not None:
        return conclude(**deferred)
    return case.passed(calls=len(case.calls))
