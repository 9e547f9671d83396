"""Hidden cases as students see them (attnscore.report.redact.for_students): "hidden case N" with
verdict and points, never their id, title, statement or spec line, in every student-facing result
(Gradescope in every --hidden-cases mode, PrairieLearn, a class run's feedback files); the
instructor's own reports (text, JSON, class page) keep the names.
"""

from __future__ import annotations

import dataclasses
import json
import os
from fractions import Fraction
from pathlib import Path

import pytest
import torch
from rich.console import Console

from attnscore.check.cases import build_cases
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import NO_SHRINK, judge_cases
from attnscore.grade.class_run import feedback_text
from attnscore.report.class_html import class_report_html
from attnscore.report.gradescope import HIDDEN_CASES, gradescope_results
from attnscore.report.json_report import submission_to_json
from attnscore.report.prairielearn import prairielearn_json, prairielearn_results
from attnscore.report.redact import anonymise, for_students
from attnscore.report.results import SubmissionResult, Verdict
from attnscore.report.text import submission_text
from attnscore.spec.load import load_spec

SPECS = Path(__file__).resolve().parents[2] / "attnscore" / "bundled_specs"


def _text(renderable) -> str:
    with open(os.devnull, "w") as sink:
        console = Console(record=True, width=200, file=sink)
        console.print(renderable)
        return console.export_text()


def student_outputs(result: SubmissionResult) -> dict[str, str]:
    """Every student-facing rendering of ``result``, as text."""
    outputs = {f"gradescope {mode}": json.dumps(gradescope_results(result, mode)) for mode in HIDDEN_CASES}
    outputs["prairielearn"] = prairielearn_json(prairielearn_results(result))
    outputs["feedback file"] = feedback_text(result)
    return outputs


def hidden_names(result: SubmissionResult, spec) -> set[str]:
    """What names a hidden case: its id, title, statement and spec line."""
    statements = {f"property:{p.name}": p.statement for p in spec.properties}
    names = set()
    for case in result.cases:
        if case.visibility == "hidden":
            names |= {case.id, case.title, case.location, statements.get(case.id, "")}
    return {n for n in names if n}


def judged(spec_name: str, wrong, all_hidden: bool) -> tuple[SubmissionResult, object]:
    spec = load_spec(SPECS / f"{spec_name}.yaml")
    dtype = spec.dtypes[0]
    cases = build_cases(spec, dtype)
    if all_hidden:
        cases = [dataclasses.replace(c, visibility="hidden") for c in cases]
    result = judge_cases(
        spec, cases, InProcessRunner(wrong), dtype=dtype, device="cpu", submission="ada.py", seed=0, budget=NO_SHRINK
    )
    return result, spec


def _matmul_without_transpose(Q, K):
    return torch.matmul(Q, K)  # the field's K-not-transposed mistake: wrong values, some shapes refused


@pytest.fixture(scope="module")
def score_matrix() -> tuple[SubmissionResult, object]:
    """score_matrix graded for Q K (not Q Kᵀ): its one hidden case, example:broadcast_one_key_set
    ("two heads of queries against one shared set of keys"), fails with the rest."""
    result, spec = judged("score_matrix", _matmul_without_transpose, all_hidden=False)
    [hidden] = [c for c in result.cases if c.visibility == "hidden"]
    assert (hidden.id, hidden.title, hidden.passed) == (
        "example:broadcast_one_key_set",
        "two heads of queries against one shared set of keys",
        False,
    )
    return result, spec


@pytest.mark.parametrize("fmt", [*(f"gradescope {m}" for m in HIDDEN_CASES), "prairielearn", "feedback file"])
def test_no_student_facing_result_names_the_hidden_case(score_matrix, fmt):
    """The hidden case's id, title and spec line appear in no student-facing result."""
    result, spec = score_matrix
    text = student_outputs(result)[fmt]
    for name in hidden_names(result, spec) | {"broadcast_one_key_set", "score_matrix.yaml:80"}:
        assert name not in text, (fmt, name)


def test_gradescope_shows_the_hidden_case_as_hidden_case_1_with_its_points(score_matrix):
    """Gradescope, every mode but summary: a test "hidden case 1", failed, 0 of its 1 point, visibility as chosen."""
    result, _ = score_matrix
    for mode in ("visible", "after_due_date", "after_published", "hidden"):
        tests = gradescope_results(result, mode)["tests"]
        [test] = [t for t in tests if t["name"] == "hidden case 1"]
        assert (test["score"], test["max_score"], test["status"]) == (0, 1, "failed"), mode
        assert test["visibility"] == mode, mode
        assert test["output"] == (  # one cause with a visible case: a pointer to it, no line of its own
            "wrong value: out has wrong values\n"
            "Same cause as example:two_by_two (known mistake keys_not_transposed): see that test."
        )
    summary = gradescope_results(result, "summary")["tests"][-1]
    assert (summary["name"], summary["score"], summary["max_score"]) == ("hidden cases", 0, 1)


def test_prairielearn_lists_the_hidden_case_by_number_with_its_points(score_matrix):
    """PrairieLearn: "hidden case 1" with an empty description and its points; visible cases keep their names."""
    result, _ = score_matrix
    tests = prairielearn_results(result)["tests"]
    by_name = {t["name"]: t for t in tests}
    hidden = by_name["hidden case 1"]
    assert (hidden["description"], hidden["points"], hidden["max_points"]) == ("", 0, 1)
    assert "inputs and expected values, shape and dtype are not shown" in hidden["message"]
    assert by_name["example two_by_two"]["description"] == "2 queries, 2 keys (K must be transposed)"


def test_the_instructors_reports_keep_the_names(score_matrix):
    """The instructor's text report, JSON and class page name the hidden case as the spec does."""
    result, _ = score_matrix
    text = _text(submission_text(result))
    report = json.dumps(submission_to_json(result))
    page = class_report_html([("ada.py", result)], "score_matrix")
    for out in (text, report, page):
        assert "example:broadcast_one_key_set" in out
    assert "two heads of queries against one shared set of keys" in report


def test_for_students_is_idempotent_and_leaves_visible_cases_alone(score_matrix):
    """Applying for_students twice changes nothing; a visible case is untouched but for the mark on its
    failure (shown to a student); totals are unchanged."""
    result, _ = score_matrix
    once = for_students(result)
    assert for_students(once) == once
    assert all(c.failure.for_students for c in once.cases if c.failure is not None)
    assert [_unmarked(c) for c in once.cases if c.visibility == "visible"] == [
        c for c in result.cases if c.visibility == "visible"
    ]
    assert (once.score, once.max_score) == (result.score, result.max_score) == (Fraction(0), Fraction(13))


def _unmarked(case):
    """``case`` with its failure's for_students mark taken off again (its second causes' too)."""

    def unmark(failure):
        causes = tuple(unmark(o) for o in failure.other_causes)
        return dataclasses.replace(failure, for_students=False, other_causes=causes)

    return case if case.failure is None else dataclasses.replace(case, failure=unmark(case.failure))


def test_a_hidden_failure_loses_its_names_and_second_causes_too(score_matrix):
    """anonymise: the id, title, statement and location of the failure and of its second causes go."""
    result, _ = score_matrix
    [hidden] = [c for c in result.cases if c.visibility == "hidden"]
    second = dataclasses.replace(hidden.failure, beside="fully_masked_row")
    failure = dataclasses.replace(hidden.failure, other_causes=(second,), statement="a statement")
    shown = anonymise(failure, "hidden case 1")
    for f in (shown, *shown.other_causes):
        assert (f.case_id, f.title, f.statement, f.location) == ("hidden case 1",) * 3 + ("",)
    assert shown.verdict is Verdict.WRONG_VALUE and shown.args is None
    assert anonymise(shown, "hidden case 1") == shown


def test_a_pointer_to_a_hidden_lead_names_it_by_number():
    """Gradescope's "Same cause as ..." pointer to a hidden case says its number, never its id."""
    result, spec = judged("score_matrix", _matmul_without_transpose, all_hidden=True)
    outputs = " ".join(t["output"] for t in gradescope_results(result)["tests"])
    assert "Same cause as hidden case " in outputs
    assert "Same cause as example:" not in outputs and "Same cause as property:" not in outputs
