"""The time budget's verdict (budget spent) in every reporter: its code, its sentence, no counterexample.

The results are judged for real, in process: a runner that answers as a sandboxed runner does once
its submission's time budget is spent (:func:`attnscore.check.runner.budget_spent_failure`) after a
given number of calls, over the bundled ``dot_product_scores`` spec (one hidden worked example).
"""

from __future__ import annotations

import csv
import functools
import io
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.outputs import Outcome
from attnscore.check.cases import Case, build_cases
from attnscore.check.runner import InProcessRunner, budget_spent_failure, budget_spent_text
from attnscore.check.session import Session
from attnscore.grade.class_run import feedback_text
from attnscore.grade.policy import grading_budget
from attnscore.report.class_html import class_report_html
from attnscore.report.feedback import pytest_text
from attnscore.report.gradescope import gradescope_results
from attnscore.report.json_report import batch_to_json, submission_to_json
from attnscore.report.prairielearn import prairielearn_results
from attnscore.report.record import result_from_record, result_to_record
from attnscore.report.results import SubmissionResult, Verdict
from attnscore.report.spreadsheet import CSV_ENCODING, grades_csv
from attnscore.report.text import batch_table, submission_text
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "specs" / "dot_product_scores.yaml")


@functools.cache
def _cases() -> tuple[Case, ...]:
    """The spec's cases in float32, built at the first test that needs them (not at
    collection, which every xdist worker does) and shared by the module's tests."""
    return tuple(build_cases(SPEC, "float32"))


SENTENCE = "not run: this submission used its whole time budget of 3 s on earlier cases"


class _BudgetAfter(InProcessRunner):
    """Calls ``keys @ q`` for the first ``calls`` calls, then answers as a spent time budget of 3 s."""

    def __init__(self, calls: int) -> None:
        super().__init__(lambda q, keys: keys @ q)
        self.left = calls

    def call(
        self,
        args: Mapping[str, np.ndarray],
        dtype: str,
        layouts: Mapping[str, str] | None = None,
        upstream: np.ndarray | None = None,
    ) -> Outcome:
        self.left -= 1
        if self.left < 0:
            self.last_inspection = None
            return budget_spent_failure(3.0)
        return super().call(args, dtype, layouts, upstream)


def _graded(calls: int, name: str = "slow.py") -> SubmissionResult:
    session = Session(
        SPEC,
        _cases(),
        "float32",
        "cpu",
        name,
        SPEC.seed,
        budget=grading_budget(50),
        hidden_last=True,
        cheapest_first=True,
    )
    return session.run(_BudgetAfter(calls))


@pytest.fixture(scope="module")
def result() -> SubmissionResult:
    """Two visible worked examples pass (one call each); the cheapest property
    (perpendicular_keys_score_zero, 20 small examples) makes 3 calls and stops before its 4th;
    everything after it is not run."""
    return _graded(5)


def _by_id(result: SubmissionResult) -> dict[str, object]:
    return {c.id: c for c in result.cases}


def test_the_sentence_is_the_issues():
    """The verdict's word, label and sentence."""
    assert Verdict.BUDGET_SPENT.value == "budget_spent" and Verdict.BUDGET_SPENT.label == "budget spent"
    assert budget_spent_text(3.0) == SENTENCE
    assert budget_spent_text(2.5).endswith("budget of 2.5 s on earlier cases")


def test_judged_cases_get_the_verdict_no_points_and_no_reproduction(result):
    """Cases the budget left unrun: budget spent, 0 points, no counterexample, the calls made counted."""
    verdicts = {c.id: (c.verdict.value, c.points, c.calls) for c in result.cases}
    assert verdicts == {
        "example:aligned_perpendicular_partial": ("passed", 3, 1),
        "example:anti_aligned": ("passed", 2, 1),
        "example:three_dims_mixed_signs": ("budget_spent", 0, 0),  # hidden: after every visible case
        "property:perpendicular_keys_score_zero": ("budget_spent", 0, 3),  # the cheapest property: begun
        "property:equals_qk_entries": ("budget_spent", 0, 0),
        "property:scores_not_normalised": ("budget_spent", 0, 0),
        "property:non_contiguous_inputs": ("budget_spent", 0, 0),  # 40 calls: the costliest, last
    }
    for case in result.cases:
        if not case.passed:
            assert case.failure is not None and case.failure.args is None and case.counterexample is None
    assert result.error == ""  # a spent budget is no load failure


def test_text_report_says_the_sentence_once_per_cause(result):
    """The detailed text: the verdict per case, the sentence under its lead case and as the others' line."""
    text = _plain(submission_text(result))
    assert "property:non_contiguous_inputs          budget spent     0/1" in text
    lead = (
        "property:perpendicular_keys_score_zero (budget spent)\n"
        "Property: Keys perpendicular to the query score exactly zero. (dot_product_scores.yaml:68)\n"
        "Stopped before generated input 4 of 20 (the earlier ones ran).\n"
        f"{SENTENCE}\n"
        "Same cause (budget spent) in 4 more cases:\n"
    )
    assert lead in text
    assert f"  property:equals_qk_entries (budget spent, dot_product_scores.yaml:72): {SENTENCE}" in text
    assert "Reproduce:" not in text and "Counterexample:" not in text


def test_score_matrix_has_its_own_code_and_legend(result):
    """The class table's code ``spent`` and the legend's ``spent = budget spent``."""
    text = _plain(batch_table([result, _graded(200, "right.py")]))
    row = next(line for line in text.splitlines() if "slow.py" in line).split()
    assert row[3:] == ["ok", "ok", "spent", "spent", "spent", "spent", "spent"]
    right = next(line for line in text.splitlines() if "right.py" in line).split()
    assert right[3:] == ["ok"] * 7
    assert "ERR = grader error, spent = budget spent" in " ".join(text.split())


def test_json_report_gives_the_word_and_the_message(result):
    """JSON: verdict ``budget_spent``, the message, no counterexample, points 0; a batch too."""
    data = json.loads(json.dumps(submission_to_json(result), allow_nan=False))
    case = next(c for c in data["cases"] if c["id"] == "property:equals_qk_entries")
    assert case["verdict"] == "budget_spent" and case["points"] == 0 and case["counterexample"] is None
    assert case["message"].splitlines()[-1] == SENTENCE
    assert batch_to_json([result])["submissions"][0]["cases"][2]["verdict"] == "budget_spent"


def test_gradescope_shows_the_sentence_for_visible_and_hidden_cases(result):
    """Gradescope: failed tests with the verdict tag and the sentence; the hidden case as hidden case 1."""
    tests = gradescope_results(result)["tests"]
    spent = [t for t in tests if "budget_spent" in t["tags"]]
    assert len(spent) == 5 and all(t["status"] == "failed" and t["score"] == 0 for t in spent)
    hidden = next(t for t in spent if t["name"] == "hidden case 1")
    assert hidden["output"].splitlines()[0] == f"budget spent: {SENTENCE}"
    lead = next(t for t in spent if t["name"].startswith("property:perpendicular_keys_score_zero"))
    assert all(t["output"].startswith(f"budget spent: {SENTENCE}") for t in spent if t is not lead)
    assert lead["output"].splitlines()[-1] == SENTENCE and "Stopped before generated input 4 of 20" in lead["output"]


def test_prairielearn_message_starts_with_the_label(result):
    """PrairieLearn: ``budget spent: ...`` with the sentence."""
    tests = prairielearn_results(result)["tests"]
    spent = [t for t in tests if t["message"].startswith("budget spent: ")]
    assert len(spent) == 5 and all(t["points"] == 0 for t in spent)
    assert all(SENTENCE in t["message"] for t in spent)


def test_junit_message_of_a_pytest_item(result):
    """The pytest plugin's (and so JUnit's) failure text: label, then the case's feedback."""
    case = _by_id(result)["property:scores_not_normalised"]
    assert pytest_text(case.failure) == (
        "budget spent: Property: Raw scores are not normalised; they can be negative and need not sum to one. "
        f"(dot_product_scores.yaml:76)\n{SENTENCE}"
    )


def test_student_feedback_file_names_the_hidden_case_and_keeps_the_sentence(result):
    """A class run's feedback file (what students see): the hidden case anonymised, the sentence kept."""
    text = feedback_text(result)
    assert "hidden case 1 (budget spent" in text and "three_dims_mixed_signs" not in text
    assert SENTENCE in text


def test_class_page_lists_who_spent_the_budget(result):
    """The class page: a table of submissions that spent their budget, and unrun cases marked."""
    page = class_report_html([("slow.py", result), ("right.py", _graded(200, "right.py"))], "dot_product_scores v1")
    table = page.split('<table id="budget-table">', 1)[1].split("</table>", 1)[0]
    assert "slow.py" in table and "right.py" not in table
    assert SENTENCE in table and "property:perpendicular_keys_score_zero" in table
    students = page.split('<table id="student-table">', 1)[1]
    assert "property:equals_qk_entries (not run)" in students


def test_class_page_without_a_spent_budget_has_no_budget_table():
    """No submission spent its budget: no budget section."""
    page = class_report_html([("right.py", _graded(200, "right.py"))], "dot_product_scores v1")
    assert "budget-table" not in page and "Time budget" not in page


def test_spreadsheet_error_cell_says_how_many_cases_were_not_run(result):
    """The CSV: zeros in the unrun cases' columns, and the count and the sentence in the error cell."""
    data = grades_csv([("slow.py", result)]).encode(CSV_ENCODING).decode(CSV_ENCODING)
    header, row = list(csv.reader(io.StringIO(data, newline="")))
    cells = dict(zip(header, row, strict=True))
    assert cells["error"] == f"5 cases {SENTENCE}"
    assert cells["property:equals_qk_entries"] == "0" and cells["score"] == "5"


def test_gradebook_record_keeps_the_verdict(result):
    """The gradebook's record of the result reads back with the same verdicts and messages."""
    back = result_from_record(json.loads(json.dumps(result_to_record(result))))
    assert [c.verdict for c in back.cases] == [c.verdict for c in result.cases]
    assert [c.message for c in back.cases] == [c.message for c in result.cases]


def _plain(renderable: object) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), record=True, width=200, color_system=None, force_jupyter=False)
    console.print(renderable)
    return console.export_text()
