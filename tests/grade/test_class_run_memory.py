"""A class run holds little per student: the grading loop keeps no result once ``on_result`` has it
(``keep=False``), and the run keeps each result's summary (scores, verdicts, diagnoses), while the
gradebook and the feedback files hold every result whole. Grades through the sandbox."""

from __future__ import annotations

import gc
import shutil
import weakref
from fractions import Fraction
from pathlib import Path

import pytest

from attnscore.grade.class_run import FEEDBACK, grade_class
from attnscore.grade.gradebook import Gradebook
from attnscore.grade.grading import grade_many
from attnscore.report.results import SubmissionResult
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions

ROOT = Path(__file__).resolve().parents[2]
SCORES = ROOT / "examples" / "submissions" / "scores"
SPEC = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
CLASS = {"ada.py": "correct_matmul.py", "cy.py": "cosine_similarity.py", "eve.py": "syntax_error.py"}


def _class(folder: Path) -> list:
    folder.mkdir()
    for name, example in CLASS.items():
        shutil.copy(SCORES / example, folder / name)
    return find_submissions([str(folder)])


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_without_keep_the_grading_loop_holds_no_result(tmp_path, jobs):
    seen: list[weakref.ref[SubmissionResult]] = []
    scores: list[Fraction] = []

    def on_result(result: SubmissionResult) -> None:
        seen.append(weakref.ref(result))
        scores.append(result.score)

    returned = grade_many(_class(tmp_path / "class"), SPEC, jobs=jobs, on_result=on_result, keep=False)
    gc.collect()
    assert returned == []
    assert len(seen) == 3 and sorted(scores) == [0, 2, 11]  # syntax error, cosine, correct
    assert [ref() for ref in seen] == [None, None, None]  # nothing of them is held any more


def test_a_summary_keeps_what_a_class_shows_and_drops_the_counterexample():
    from attnscore.boundary.verdict import Verdict
    from attnscore.report.failure import Failure
    from attnscore.report.results import CaseResult

    failure = Failure(
        Verdict.WRONG_VALUE,
        "property:p",
        "property",
        "t",
        "spec.yaml:3",
        False,
        "scores",
        "float32",
        args={"q": [1.0, 2.0]},
        check="the check quoted 1.0",
        hint="a hint",
        detail="a detail",
        diagnosis={"id": "softmax_applied", "message": "m"},
    )
    case = CaseResult(
        "property:p", "property", "t", Verdict.WRONG_VALUE, Fraction(0), Fraction(1), "visible", "x", failure
    )
    result = SubmissionResult("s.py", "x", 1, "x.yaml", "scores", (case,), "float32", "cpu", 0, 0.5, output="printed")
    summary = result.summary()
    kept = summary.cases[0]
    assert (summary.score, summary.max_score, summary.output, summary.duration_s) == (0, 1, "", 0.5)
    assert (kept.verdict, kept.diagnosis, kept.failure.detail) == (Verdict.WRONG_VALUE, failure.diagnosis, "a detail")
    assert (kept.failure.args, kept.failure.check, kept.failure.hint, kept.counterexample) == (None, "", "", None)
    assert result.cases[0].failure.args == {"q": [1.0, 2.0]}  # the result itself is unchanged


@pytest.mark.slow
def test_a_class_run_keeps_summaries_and_stores_every_result_whole(tmp_path):
    submissions = _class(tmp_path / "class")
    run = grade_class(submissions, SPEC, tmp_path / "out", jobs=2)
    by_name = dict(run.rows)
    cosine = by_name["cy.py"]
    failed = [c for c in cosine.cases if c.failure is not None and not c.passed]
    assert failed and all(c.failure.args is None for c in failed)  # the summary: no counterexample
    assert any(c.diagnosis and c.diagnosis["id"] == "cosine_similarity" for c in failed)
    with Gradebook(tmp_path / "out" / "gradebook.sqlite") as book:
        whole = book.results(["cy.py"])["cy.py"]
    assert whole.score == cosine.score and any(c.failure.args for c in whole.cases if c.failure is not None)
    feedback = (tmp_path / "out" / FEEDBACK / "cy.py.txt").read_text()
    assert "Reproduce: scores(" in feedback, feedback[:2000]  # the student's feedback: the whole result
    again = grade_class(submissions, SPEC, tmp_path / "out2", whole_results=True)
    assert any(c.failure.args for c in dict(again.rows)["cy.py"].cases if c.failure is not None)


@pytest.mark.slow
def test_the_cli_reports_a_class_in_json_whole_and_in_text_from_summaries(tmp_path):
    """``--format json`` of a class run shows every counterexample (whole results); the text table
    shows the same scores from the summaries."""
    import json

    from click.testing import CliRunner

    from attnscore.cli import main

    _class(tmp_path / "class")
    base = ["grade", str(tmp_path / "class"), "--spec", str(SPEC.path), "--shrink-steps", "0"]
    shown = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "a"), "--format", "json"])
    assert shown.exit_code == 1, shown.output
    data = json.loads(shown.stdout)
    rows = {Path(r["submission"]).name: r for r in data["submissions"]}
    assert any(c.get("counterexample") for c in rows["cy.py"]["cases"]), rows["cy.py"]["cases"][0]
    table = CliRunner().invoke(main, [*base, "--out", str(tmp_path / "b")])
    assert table.exit_code == 1, table.output
    assert "cy.py" in table.stdout and "2/11" in table.stdout and "11/11" in table.stdout, table.stdout
