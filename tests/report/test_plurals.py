"""Counts printed with the noun in the number it takes: "1 point", never "1 points"."""

from __future__ import annotations

import io
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from attnscore.export.student_spec import write_student_spec
from attnscore.maths.display import counted
from attnscore.report.failure import Failure, ShrunkFrom
from attnscore.report.feedback import failure_text
from attnscore.report.results import CaseResult, SubmissionResult, Verdict
from attnscore.report.text import batch_table
from attnscore.selfcheck import SelfCheck


@given(st.integers(min_value=0, max_value=10**6))
def test_counted_takes_the_singular_for_exactly_one(n):
    """One takes the singular; every other count, 0 included, the plural."""
    assert counted(n, "point") == (f"{n} point" if n == 1 else f"{n} points")
    assert counted(n, "entry", "entries").endswith("entry" if n == 1 else "entries")


def test_exact_points_of_one_are_singular():
    """A Fraction equal to 1 is one point; 3/2 are points."""
    assert counted(Fraction(1), "point") == "1 point" and counted(Fraction(3, 2), "point") == "3/2 points"


def _failure(size_from: int) -> Failure:
    return Failure(
        verdict=Verdict.WRONG_VALUE,
        case_id="property:p",
        kind="property",
        title="p",
        location="specs/s.yaml:3",
        hidden=False,
        function="scores",
        dtype="float32",
        args={"q": [0.0], "keys": [[1.0]]},
        statement="scores are raw",
        example=1,
        examples=5,
        shrunk_from=ShrunkFrom(1, 5, size_from),
    )


def test_a_shrunk_input_of_one_entry_is_one_entry():
    """A counterexample shrunk to one entry says "1 entry"."""
    failure = Failure(**{**_failure(1).__dict__, "args": {"x": [2.0]}})
    assert "(1 entry) to 1 entry." in failure_text(failure)


def test_a_batch_of_one_submission_and_a_student_copy_with_one_hidden_point(tmp_path):
    """The class table of one submission says "1 submission"; the student copy of a spec whose one
    hidden case is worth 1 point says "1 hidden case (1 point)"."""
    case = CaseResult("example:a", "example", "a", Verdict.PASSED, Fraction(1), Fraction(1), "visible", "s.yaml:1")
    result = SubmissionResult("sub.py", "s", 1, "specs/s.yaml", "scores", (case,), "float32", "cpu", 1, 0.5)
    console = Console(file=io.StringIO(), record=True, width=140, color_system=None)
    console.print(batch_table([result]))
    assert console.export_text().splitlines()[0].rstrip() == "s: 1 submission"
    text = write_student_spec("specs/score_matrix.yaml", tmp_path / "student.yaml")
    header = (tmp_path / "student.yaml").read_text(encoding="utf-8").splitlines()[2:4]
    assert text.hidden_cases == 1
    assert header[0].endswith("The grader also runs 1 hidden") and header[1].startswith("# case (1 point), which")


@pytest.mark.parametrize("hidden, them", [(1, "runs it when"), (2, "runs them when")])
def test_self_check_footer_agrees_with_the_number_of_hidden_cases(hidden, them):
    """One hidden case "runs it", two "run them"."""
    case = CaseResult("example:a", "example", "a", Verdict.PASSED, Fraction(1), Fraction(1), "visible", "s.yaml:1")
    result = SubmissionResult("sub.py", "s", 1, "specs/s.yaml", "scores", (case,), "float32", "cpu", 1, 0.5)
    footer = SelfCheck(result, hidden).footer()
    assert f"{counted(hidden, 'hidden case')} not run here" in footer and them in footer
