"""Running cases against an implementation and judging each one.

This is the middle of the data flow: cases (:mod:`attnscore.cases`) go to a runner
(:mod:`attnscore.runner` in process, :mod:`graders.sandbox` for untrusted code), each outcome is
compared with the golden value (:mod:`attnscore.compare`), and the verdicts become frozen
results (:mod:`attnscore.results`). A case stops at its first failing call; one failing case
never stops the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from fractions import Fraction

import numpy as np

from attnscore.cases import Case
from attnscore.compare import compare, format_number
from attnscore.outputs import CallFailure
from attnscore.properties import get_property
from attnscore.results import CaseResult, SubmissionResult, Verdict
from attnscore.runner import Runner
from attnscore.spec import Spec

__all__ = ["judge_case", "run_cases", "format_array"]


def format_array(array: np.ndarray, dtype: str | None = None) -> str:
    """Nested-list text of an array with the shortest numbers of its dtype: ``[[1, 0], [0.7, 0.7]]``."""
    arr = np.asarray(array)
    dtype = dtype or arr.dtype.name
    if arr.ndim == 0:
        return format_number(float(arr), dtype)
    return "[" + ", ".join(format_array(a, dtype) for a in arr) + "]"


def _inputs_text(args: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{name}={format_array(a)}" for name, a in args.items())


def judge_case(spec: Spec, case: Case, runner: Runner, dtype: str) -> CaseResult:
    """Make the case's calls in order and return its result (stops at the first failure)."""
    hidden = case.visibility == "hidden"
    output_name = "out"
    for number, call in enumerate(case.calls, start=1):
        outcome = runner.call(call.args, dtype)
        if isinstance(outcome, CallFailure):
            verdict, detail = Verdict(outcome.verdict), outcome.message
        else:
            mismatch = compare(outcome, call.golden, call.allowed, name=output_name, accept=spec.accept,
                               hidden=hidden, tolerance_text=case.tolerance.describe(dtype))
            if mismatch is None:
                continue
            verdict, detail = mismatch.verdict, mismatch.message
            if case.property_name and not hidden:
                hint = get_property(case.property_name).hint(outcome.array.astype(np.float64), call.golden)
                if hint:
                    detail = f"{detail}\nLikely cause: {hint}."
        lines = []
        if case.kind == "property":
            lines.append(f"Property: {case.statement}")
            where = f"generated input {number} of {len(case.calls)}"
            lines.append(f"Failed on a hidden {where}." if hidden else f"Counterexample ({where}): {spec.function}({_inputs_text(call.args)})")
        elif not hidden:
            lines.append(f"Inputs: {spec.function}({_inputs_text(call.args)})")
        lines.append(detail)
        counterexample = None if hidden else {n: np.asarray(a, dtype=np.float64).tolist() for n, a in call.args.items()}
        return CaseResult(case.id, case.kind, case.title, verdict, Fraction(0), case.points, "\n".join(lines),
                          case.visibility, case.location, counterexample, number)
    return CaseResult(case.id, case.kind, case.title, Verdict.PASSED, case.points, case.points, "",
                      case.visibility, case.location, None, len(case.calls))


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
        result = judge_case(spec, case, runner, dtype)
        results.append(result)
        if on_case is not None:
            on_case(result)
    return SubmissionResult(
        submission=submission, spec_id=spec.id, spec_version=spec.version, spec_path=spec.path,
        function=function or spec.function, cases=tuple(results), dtype=dtype, device=device, seed=seed,
        duration_s=time.perf_counter() - start,
    )
