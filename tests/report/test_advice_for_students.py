"""What a student sees of a convention corner: an advice-only case never fails a submission (not in
its exit code, not as a failed Gradescope test), and the feedback a student reads never tells them
to change the spec or the command line, which only an instructor or engineer can do."""

from __future__ import annotations

import io
from pathlib import Path

import torch
from rich.console import Console

from attnscore.check.cases import build_cases
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import judge_cases
from attnscore.report import gradescope_results, submission_text
from attnscore.report.feedback import failure_text
from attnscore.report.redact import for_students
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
INSTRUCTOR_HINT = "attnscore test --allow fully_masked_row"


def nan_rows_attention(Q, K, V, mask=None):
    """Right everywhere but a fully masked row, which comes out NaN (masked_fill(-inf), then softmax)."""
    S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    if mask is not None:
        S = S.masked_fill(~mask, float("-inf"))
    return torch.softmax(S, dim=-1) @ V


def _rendered(renderable) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def _graded(spec_path: Path):
    spec = load_spec(spec_path)
    return judge_cases(
        spec,
        build_cases(spec, "float64"),
        InProcessRunner(nan_rows_attention, bind=spec.contract.binding),
        dtype="float64",
        device="cpu",
        submission="nan_rows.py",
        seed=0,
    )


def test_an_advice_only_case_never_fails_the_submission():
    """Under conventions: {fully_masked_row: not_asked} (the CS336 example) the NaN-row file has full marks, all_passed
    (so `grade` and `check` exit 0) and every Gradescope test passed, the advice still in the output."""
    result = _graded(ROOT / "examples/courses/cs336/scaled_dot_product_attention.yaml")
    advising = [c for c in result.cases if c.advises]
    assert advising and all(c.max_points == 0 and not c.passed for c in advising)
    assert result.score == result.max_score and result.all_passed
    tests = gradescope_results(result)["tests"]
    assert {t["status"] for t in tests} == {"passed"}
    advice = [t for t in tests if "Advice only (no points)" in t["output"]]
    assert len(advice) == len(advising) and all(t["max_score"] == 0 for t in advice)


def test_a_stated_corner_still_fails_the_submission_and_its_test():
    """Under the bundled attention spec (the corner stated) the same file fails the dedicated cases."""
    result = _graded(ROOT / "specs/attention.yaml")
    failed = {c.id for c in result.cases if not c.passed}
    assert failed == {"example:fully_masked_query", "property:attention_fully_masked_row_zero"}
    assert not result.all_passed and not any(c.advises for c in result.cases)
    tests = gradescope_results(result)["tests"]
    [test] = [t for t in tests if t["name"].startswith("example:fully_masked_query:")]
    assert test["status"] == "failed" and test["score"] == 0 and test["max_score"] > 0


def test_students_never_read_the_instructors_way_out():
    """The instructor's text names the spec's conventions field and --allow; what a student reads
    (Gradescope, for_students) says the same about their output without them."""
    result = _graded(ROOT / "specs/attention.yaml")
    [case] = [c for c in result.cases if c.id == "example:fully_masked_query"]
    instructor = failure_text(case.failure)
    assert INSTRUCTOR_HINT in instructor and "conventions: {fully_masked_row: not_asked}" in instructor
    assert INSTRUCTOR_HINT in _rendered(submission_text(result))
    [shown] = [c for c in for_students(result).cases if c.id == "example:fully_masked_query"]
    student = failure_text(shown.failure)
    assert "Convention (fully_masked_row): your rows with every key masked come out NaN" in student
    assert "this spec states weights 0, so the output row is 0. Only the cases that test it count it." in student
    assert INSTRUCTOR_HINT not in student and "conventions:" not in student and "xfail" not in student
    outputs = " ".join(t["output"] for t in gradescope_results(result)["tests"])
    assert "Convention (fully_masked_row)" in outputs and INSTRUCTOR_HINT not in outputs
    assert for_students(for_students(result)) == for_students(result)  # applying it twice changes nothing
