"""The secret sweep: no hidden case says anything of its inputs, expected values, shape or dtype;
and the hidden-names sweep: none is named by more than "hidden case N".

For every bundled spec, every case is made hidden and judged against wrong implementations of
each verdict kind (wrong value, wrong shape, wrong dtype, non-finite, exception, bad return
type); every student-facing rendering (text report, JSON, Gradescope, PrairieLearn, pytest text,
the case messages) must hold none of the hidden inputs, expected or returned values, the
expected shape, the tested dtype, nor the text the submission wrote. Every case made hidden and
failed with wrong values is named only "hidden case N" (with its points) in every student-facing
result (attnscore.report.redact.for_students).

Both sweeps grade the same wrong values on the same all-hidden cases, so that judging (the
diagnosis of every failing case is most of a sweep's time) is done once per spec
(:func:`_wrong_values_judged`) and each sweep reads it with the titles and submission name it
judges under: a case's title and the submission's name are only copied into the result
(:func:`_as_judged`), never read by judging.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console

from attnscore.check.cases import build_cases
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import NO_SHRINK, judge_cases
from attnscore.report.feedback import format_array, format_number, pytest_text, shape_text
from attnscore.report.gradescope import gradescope_results
from attnscore.report.json_report import submission_to_json
from attnscore.report.prairielearn import prairielearn_results
from attnscore.report.redact import hidden_case_label
from attnscore.report.results import SubmissionResult, Verdict, points_out
from attnscore.report.text import batch_table, submission_text
from attnscore.spec.load import load_spec
from tests.report.test_hidden_names import hidden_names, student_outputs

pytestmark = pytest.mark.slow

SPECS = sorted((Path(__file__).parents[2] / "attnscore" / "bundled_specs").glob("*.yaml"))
LEAK = "SecretLeak"  # the submission's own words: its exception class and message


class SecretLeak(Exception):  # noqa: N818 - a submission's own class, named to be found
    pass


def _leaky_message(args: tuple[torch.Tensor | int, ...]) -> str:
    # every argument's values, an int (varlen's max_seqlen_q) as itself
    return f"{LEAK}: " + " ".join(str(a.tolist() if isinstance(a, torch.Tensor) else a) for a in args)


def _wrong_value(reference: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """Wrong values: the reference's, times 1.5, plus 0.25."""

    def value(*a):
        return reference(*a) * 1.5 + 0.25

    return value


def _wrong(reference: Callable[..., torch.Tensor]) -> dict[str, tuple[Callable[..., object], set[Verdict]]]:
    """Wrong implementations by verdict kind, each built on the reference."""
    value = _wrong_value(reference)

    def shape(*a):
        return reference(*a).unsqueeze(0)

    def dtype(*a):
        return (reference(*a) * 100).to(torch.int64)

    def non_finite(*a):
        out = reference(*a)
        return torch.full_like(out, float("nan"))

    def raises(*a):
        raise SecretLeak(_leaky_message(a))

    def raises_builtin(*a):
        raise ValueError(_leaky_message(a))

    def bad_return(*a):
        return _leaky_message(a)

    return {
        "wrong value": (value, {Verdict.WRONG_VALUE}),
        "wrong shape": (shape, {Verdict.WRONG_SHAPE}),
        "wrong dtype": (dtype, {Verdict.WRONG_DTYPE}),
        "non-finite": (non_finite, {Verdict.NON_FINITE, Verdict.WRONG_VALUE}),
        "own exception": (raises, {Verdict.EXCEPTION}),
        "builtin exception": (raises_builtin, {Verdict.EXCEPTION}),
        "bad return type": (bad_return, {Verdict.BAD_RETURN_TYPE}),
    }


def _numbers(array: np.ndarray, dtype: str) -> set[str]:
    """Texts of ``array``: the whole array, and each entry distinctive enough to find (``0.7071``)."""
    arr = np.asarray(array)
    texts = {format_array(arr, dtype), json.dumps(arr.tolist())} if arr.size > 1 else set()
    if arr.dtype != np.bool_:
        for x in arr.astype(np.float64).flat:
            text = format_number(float(x), dtype)
            if len(text) >= 4 and any(c.isdigit() for c in text):  # "1.25", "-0.75", "0.7071"
                texts.add(text)
    return texts


def _secrets(case, dtype: str) -> set[str]:
    texts = {dtype, LEAK}
    for call in case.calls:
        golden = np.asarray(call.golden)
        texts |= _numbers(golden, dtype) | _numbers(golden * 1.5 + 0.25, dtype)
        if golden.ndim:
            texts |= {shape_text(golden.shape), shape_text((1, *golden.shape)), str(list(golden.shape))}
        for arg in call.args.values():
            texts |= _numbers(np.asarray(arg), dtype)
    return texts


_SCORE_KEYS = frozenset({"score", "max_score", "points", "max_points", "execution_time", "duration_s", "time_s"})


def _dumps(data: object) -> str:
    """JSON text of a report without its score and timing numbers (the grader's, not a case's)."""

    def scrub(x: object) -> object:
        if isinstance(x, dict):
            return {k: scrub(v) for k, v in x.items() if k not in _SCORE_KEYS}
        if isinstance(x, list):
            return [scrub(v) for v in x]
        return x

    return json.dumps(scrub(data), allow_nan=False, ensure_ascii=False)


def _renderings(result: SubmissionResult) -> dict[str, str]:
    def console_text(renderable) -> str:
        with open(os.devnull, "w") as sink:
            console = Console(record=True, width=200, file=sink)
            console.print(renderable)
            return console.export_text()

    return {
        "text": console_text(submission_text(result)),
        "batch text": console_text(batch_table([result])),
        "json": _dumps(submission_to_json(result)),
        "gradescope": _dumps(gradescope_results(result)),
        "gradescope summary": _dumps(gradescope_results(result, "summary")),
        "gradescope after_due_date": _dumps(gradescope_results(result, "after_due_date")),
        "prairielearn": _dumps(prairielearn_results(result)),
        "pytest": "\n".join(pytest_text(c.failure) for c in result.cases if c.failure is not None),
    }


def _run_header(result: SubmissionResult) -> set[str]:
    """Texts the run itself shows once for all cases (its dtype in the header), not a case's."""
    return {result.dtype}


@functools.cache
def _wrong_values_judged(path: Path) -> tuple[object, tuple, SubmissionResult]:
    """``(spec, cases, result)``: the bundled spec at ``path``, its cases (first dtype) as built,
    and their judging, every case made hidden with its title kept, in process against
    :func:`_wrong_value` as ``ada.py`` (no shrinking). Plain data, judged once per spec for both
    sweeps of this file."""
    spec = load_spec(str(path))
    dtype = spec.dtypes[0]
    built = tuple(build_cases(spec, dtype))
    hidden = [dataclasses.replace(c, visibility="hidden") for c in built]
    runner = InProcessRunner(_wrong_value(spec.contract.reference))
    result = judge_cases(spec, hidden, runner, dtype=dtype, device="cpu", submission="ada.py", seed=0, budget=NO_SHRINK)
    return spec, built, result


def _as_judged(result: SubmissionResult, cases, submission: str) -> SubmissionResult:
    """``result`` as judging ``cases`` (the same cases under other titles) as ``submission`` gives it:
    judging only copies a case's title into its result and its failures (the second causes found
    beside a corner too), and the submission's name into the result."""
    titles = {c.id: c.title for c in cases}

    def failure(found, title: str):
        causes = tuple(failure(f, title) for f in found.other_causes)
        return dataclasses.replace(found, title=title, other_causes=causes)

    def retitled(case):
        title = titles[case.id]
        found = None if case.failure is None else failure(case.failure, title)
        return dataclasses.replace(case, title=title, failure=found)

    return dataclasses.replace(result, submission=submission, cases=tuple(retitled(c) for c in result.cases))


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_no_hidden_case_leaks_in_any_output(path):
    """Every case of every bundled spec, hidden, failing with every verdict kind: no output holds
    its inputs, expected or returned values, expected shape, tested dtype or the submission's words."""
    spec, built, judged = _wrong_values_judged(path)
    dtype = spec.dtypes[0]
    # A spec's own hidden cases as they are; its visible ones made hidden, with a neutral title (a
    # visible case's title may quote its inputs; a hidden case's title is the author's public label).
    cases = [
        c if c.visibility == "hidden" else dataclasses.replace(c, visibility="hidden", title=f"case {i}")
        for i, c in enumerate(built)
    ]
    # what the spec's author wrote for students (statements, hidden titles) is public by design
    public = " ".join(f"{c.statement} {c.title} {c.location}" for c in cases)
    secrets = {s for s in set().union(*(_secrets(c, dtype) for c in cases)) if s not in public}
    verdicts_seen: set[Verdict] = set()
    for kind, (wrong, verdicts) in _wrong(spec.contract.reference).items():
        if kind == "wrong value":  # judged once for both sweeps, with the spec's titles
            result = _as_judged(judged, cases, f"{kind}.py")
        else:
            result = judge_cases(
                spec,
                cases,
                InProcessRunner(wrong),
                dtype=dtype,
                device="cpu",
                submission=f"{kind}.py",
                seed=0,
                budget=NO_SHRINK,
            )
        failed = [c for c in result.cases if not c.passed]
        assert failed, (path.name, kind)
        if any(ex.upstream is not None for ex in spec.worked_examples):
            # the examples run the backward pass too: a wrapper whose output autograd cannot
            # differentiate (NaNs made with full_like, detached) is refused as such
            verdicts = verdicts | {Verdict.BAD_RETURN_TYPE}
        assert {c.verdict for c in failed if c.kind == "example"} <= verdicts, (path.name, kind)
        verdicts_seen |= {c.verdict for c in failed}
        outputs = _renderings(result)
        outputs["messages"] = "\n".join(c.message for c in result.cases)
        for fmt, text in outputs.items():
            allowed_once = (
                _run_header(result)
                if fmt in ("text", "json", "prairielearn") or fmt.startswith("gradescope")
                else set()
            )
            for secret in secrets - allowed_once:
                assert secret not in text, (path.name, kind, fmt, secret)
        # the tested dtype may appear in the run's header only, never in a case's message
        for case in failed:
            assert dtype not in case.message and LEAK not in case.message, (path.name, kind, case.id)
    assert {Verdict.WRONG_VALUE, Verdict.WRONG_SHAPE, Verdict.WRONG_DTYPE, Verdict.EXCEPTION} <= verdicts_seen


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_hidden_case_of_every_bundled_spec_stays_unnamed(path):
    """Every case of every bundled spec made hidden and failed (wrong values): no student-facing
    result holds any case's id, title, statement or spec line; the hidden cases are numbered 1..N
    in spec order with their points."""
    spec, _, result = _wrong_values_judged(path)
    names = hidden_names(result, spec)
    for fmt, text in student_outputs(result).items():
        for name in names:
            assert name not in text, (path.stem, fmt, name)
    tests = gradescope_results(result)["tests"]
    assert [t["name"] for t in tests] == [hidden_case_label(n) for n in range(1, len(result.cases) + 1)]
    assert [t["max_score"] for t in tests] == [points_out(c.max_points) for c in result.cases]
