"""Running cases against an implementation and judging each one.

This is the middle of the data flow: cases (:mod:`attnscore.check.cases`) go to a runner
(:mod:`attnscore.check.runner` in process, :mod:`attnscore.sandbox.launch` for untrusted code), each outcome is
compared with the golden value (:mod:`attnscore.check.compare`), and the verdicts become frozen
results (:mod:`attnscore.report.results`). A case stops at its first failing call; one failing case
never stops the others.
"""

from __future__ import annotations

import builtins
import functools
import time
from collections.abc import Callable, Iterable
from fractions import Fraction

import numpy as np

from attnscore.catalogue.properties import CheckContext, get_property
from attnscore.check.cases import Call, Case
from attnscore.check.compare import Mismatch, compare, format_number
from attnscore.check.diagnosis import diagnose
from attnscore.check.layouts import describe_layout, effective_layout, expand_axis
from attnscore.check.outputs import CallFailure, Received
from attnscore.check.runner import Runner
from attnscore.report.results import CaseResult, SubmissionResult, Verdict
from attnscore.spec.model import Spec

__all__ = ["judge_case", "run_cases", "format_array", "example_position"]


def format_array(array: np.ndarray, dtype: str | None = None) -> str:
    """Nested-list text of an array with the shortest numbers of its dtype: ``[[1, 0], [0.7, 0.7]]``."""
    arr = np.asarray(array)
    dtype = dtype or arr.dtype.name
    if arr.ndim == 0:
        return format_number(float(arr), dtype)
    return "[" + ", ".join(format_array(a, dtype) for a in arr) + "]"


def _inputs_text(args: dict[str, np.ndarray]) -> str:
    return ", ".join(
        f"{name}={np.asarray(a).tolist() if np.asarray(a).dtype == np.bool_ else format_array(a)}"
        for name, a in args.items()
    )


def _bound_keywords(runner: object) -> dict[str, object]:
    """Keyword arguments fixed on the runner's function (``attnscore test --keyword is_causal=true``)."""
    fn = getattr(runner, "function", None)
    return dict(fn.keywords) if isinstance(fn, functools.partial) else {}


def _reproduction(
    function: str,
    args: dict[str, np.ndarray],
    dtype: str,
    layouts: dict[str, str] | None = None,
    keywords: dict[str, object] | None = None,
) -> str:
    """A one-line call the student can paste (after importing torch and their function); an
    argument handed over as a view (``layouts``) is built as such a view."""
    parts = []
    for name, a in args.items():
        arr = np.asarray(a)
        layout = effective_layout(layouts[name], arr.shape) if layouts and name in layouts else None
        if layout == "transposed":
            arr = np.swapaxes(arr, -1, -2)
        elif layout == "expanded":
            axis = expand_axis(arr.shape)
            arr = np.take(arr, [0], axis=axis)
        torch_dtype = "torch.bool" if arr.dtype == np.bool_ else f"torch.{dtype}"
        values = arr.tolist() if arr.dtype == np.bool_ else _py_values(arr, dtype)
        text = f"torch.tensor({values}, dtype={torch_dtype})"
        if layout == "transposed":
            text += ".mT"
        elif layout == "expanded":
            text += f".expand{tuple(int(n) for n in np.shape(a))}"
        elif layout == "sliced":
            text += ".repeat_interleave(2, dim=-1)[..., ::2]" if arr.ndim else ""
        parts.append(text)
    parts.extend(f"{key}={value!r}" for key, value in (keywords or {}).items())
    return f"{function}({', '.join(parts)})"


def _py_values(a: np.ndarray, dtype: str) -> str:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 0:
        x = float(arr)
        if np.isnan(x):
            return "float('nan')"
        if np.isinf(x):
            return "float('inf')" if x > 0 else "-float('inf')"
        return format_number(x, dtype)
    return "[" + ", ".join(_py_values(v, dtype) for v in arr) + "]"


def _json_safe(a: np.ndarray) -> object:
    """Nested lists for JSON: bools stay bools, non-finite floats become "nan", "inf", "-inf"."""
    arr = np.asarray(a)
    if arr.dtype == np.bool_:
        return arr.tolist()
    arr = arr.astype(np.float64)
    if np.isfinite(arr).all():
        return arr.tolist()
    obj = arr.astype(object)
    obj[np.isnan(arr)] = "nan"
    obj[np.isposinf(arr)] = "inf"
    obj[np.isneginf(arr)] = "-inf"
    return obj.tolist()


def _failed(
    case: Case,
    verdict: Verdict,
    message: str,
    counterexample: dict[str, object] | None,
    calls: int,
    diagnosis: dict[str, str] | None = None,
) -> CaseResult:
    """A failed case: no points, the message, and the call it failed on."""
    return CaseResult(
        case.id,
        case.kind,
        case.title,
        verdict,
        Fraction(0),
        case.points,
        message,
        case.visibility,
        case.location,
        counterexample,
        calls,
        diagnosis,
    )


def example_position(case: Case, number: int) -> tuple[int, int]:
    """``(example, examples)`` of call ``number`` (1-based): a relational example makes several calls."""
    starts = [i for i, call in enumerate(case.calls) if not call.group or call.group[0] == i]
    return sum(1 for i in starts if i < number), len(starts)


_BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)
_HIDDEN_TEXT = {
    Verdict.BAD_RETURN_TYPE: "returned something that is not one numeric result",
    Verdict.MEMORY_LIMIT: "ran out of memory",
    Verdict.FUNCTION_MISSING: "the graded function was not found",
    Verdict.GRADER_ERROR: "the grading machine failed on this case (not your code)",
}


def _hidden_detail(verdict: Verdict, detail: str) -> str:
    """What a hidden case may say: nothing the submission wrote (messages, its own class names,
    text it returned), since it could carry the hidden inputs; a builtin exception's type only."""
    if verdict is Verdict.EXCEPTION:
        if not detail.startswith("raised "):
            return "your code raised an exception (details are not shown for a hidden case)"
        name = detail.removeprefix("raised ").split(":", 1)[0].split(" ", 1)[0]
        if name in _BUILTIN_EXCEPTIONS:
            return f"raised {name} (its message is not shown for a hidden case)"
        return "raised an exception of its own class (its type and message are not shown for a hidden case)"
    if verdict in _HIDDEN_TEXT:
        return f"{_HIDDEN_TEXT[verdict]} (details are not shown for a hidden case)"
    return detail  # timeouts and crashes: the grader's own words


def judge_case(
    spec: Spec,
    case: Case,
    runner: Runner,
    dtype: str,
    function: str | None = None,
    *,
    diagnose_failures: bool = True,
    observe: list[tuple[Call, Received]] | None = None,
) -> CaseResult:
    """Make the case's calls in order and return its result (stops at the first failure).

    Each call is compared with its golden value; a call that closes a relational example also
    runs the property's check over the example's outputs. A failing output is matched against the
    mistake catalogue (:mod:`attnscore.check.diagnosis`, which may call ``runner`` on its confirmation
    inputs) unless ``diagnose_failures`` is False. ``function`` is the graded function's name as
    shown in feedback (default: the spec's). ``observe``, when given, receives the failing call and
    its output (for shrinking, :mod:`attnscore.check.shrink`).
    """

    hidden = case.visibility == "hidden"
    output_name = "out"
    device = str(getattr(runner, "device", "cpu"))
    outputs: dict[int, Received] = {}
    inspections: dict[int, dict[str, list[str]] | None] = {}
    for number, call in enumerate(case.calls, start=1):
        outcome = runner.call(call.args, dtype, call.layouts) if call.layouts else runner.call(call.args, dtype)
        diagnosis = None
        if isinstance(outcome, CallFailure):
            verdict, detail = Verdict(outcome.verdict), outcome.message
            if hidden and outcome is not getattr(runner, "disclosed_failure", None):
                detail = _hidden_detail(verdict, detail)
            if outcome.scope == "submission":  # the same for every case: no inputs, no reproduction
                return _failed(case, verdict, detail, None, number)
        else:
            outputs[number - 1] = outcome
            inspections[number - 1] = getattr(runner, "last_inspection", None)
            mismatch = None
            if call.compare_golden:
                mismatch = compare(
                    outcome,
                    call.golden,
                    call.allowed,
                    name=output_name,
                    accept=spec.accept,
                    hidden=hidden,
                    tolerance_text=case.tolerance.describe(dtype, spec.contract.bound_text),
                    dtype=dtype,
                )
            if mismatch is None and call.check is not None:
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
                )
                failure = call.check(ctx)
                if failure is not None:
                    mismatch = Mismatch(Verdict.WRONG_VALUE, failure)
                    prop_diag = get_property(case.property_name).diagnosis_for(ctx) if case.property_name else None
                    if prop_diag:
                        from attnscore.catalogue.mistakes import get_mistake

                        diagnosis = {"id": prop_diag, "message": get_mistake(prop_diag).message}
            if mismatch is None:
                continue
            verdict, detail = mismatch.verdict, mismatch.message
            if observe is not None:
                observe.append((call, outcome))
            if diagnosis is None and diagnose_failures:
                diagnosis = diagnose(spec, call, outcome, dtype, runner)
            if case.property_name and not hidden and verdict is Verdict.WRONG_VALUE:
                hint = get_property(case.property_name).hint(outcome.array.astype(np.float64), call.golden)
                if hint:
                    detail = f"{detail}\nLikely cause: {hint}."
            if diagnosis is not None:
                detail = f"{detail}\nKnown mistake ({diagnosis['id']}): {diagnosis['message']}"
        name = function or spec.function
        lines = []
        if case.kind == "property":
            lines.append(f"Property: {case.statement} ({case.location})")
            index, total = example_position(case, number)
            where = f"generated input {index} of {total}"
            lines.append(
                f"Failed on a hidden {where}."
                if hidden
                else f"Counterexample ({where}): {name}({_inputs_text(call.args)})"
            )
        elif not hidden:
            lines.append(f"Worked example: {case.title} ({case.location})")
            lines.append(f"Inputs: {name}({_inputs_text(call.args)})")
        if call.layouts and not hidden:
            views = [describe_layout(n, lay, np.shape(call.args[n])) for n, lay in call.layouts.items()]
            lines.append(f"Layout: {'; '.join(views)}.")
        lines.append(detail)
        if not hidden:
            if case.explanation:
                lines.append(f"Why: {' '.join(case.explanation.split())}")
            lines.append(f"Reproduce: {_reproduction(name, call.args, dtype, call.layouts, _bound_keywords(runner))}")
        counterexample = None if hidden else {n: _json_safe(a) for n, a in call.args.items()}
        return _failed(case, verdict, "\n".join(lines), counterexample, number, diagnosis)
    return CaseResult(
        case.id,
        case.kind,
        case.title,
        Verdict.PASSED,
        case.points,
        case.points,
        "",
        case.visibility,
        case.location,
        None,
        len(case.calls),
    )


def run_cases(
    spec: Spec,
    cases: Iterable[Case],
    runner: Runner,
    *,
    dtype: str,
    device: str,
    submission: str,
    seed: int,
    function: str | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
) -> SubmissionResult:
    """Judge every case with ``runner`` and collect a :class:`SubmissionResult`."""
    start = time.perf_counter()
    results = []
    for case in cases:
        result = judge_case(spec, case, runner, dtype, function)
        results.append(result)
        if on_case is not None:
            on_case(result)
    return SubmissionResult(
        submission=submission,
        spec_id=spec.id,
        spec_version=spec.version,
        spec_path=spec.shown_path,
        function=function or spec.function,
        cases=tuple(results),
        dtype=dtype,
        device=device,
        seed=seed,
        duration_s=time.perf_counter() - start,
    )
