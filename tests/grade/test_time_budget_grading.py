"""Grading under a time budget: a hanging file stops at its budget and grading goes on, the default
budget keeps every case a partly hanging file earns, the verdicts are the same on a loaded machine,
and every grading path (here, a class run, a dask worker's task) gets the budget. Each test grades
through the sandbox."""

from __future__ import annotations

import pickle
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from attnscore.check.cases import build_cases
from attnscore.check.runner import budget_spent_text
from attnscore.grade.class_run import grade_class
from attnscore.grade.grading import grade_many
from attnscore.grade.time_budget import grading_limits
from attnscore.report.results import SubmissionResult
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
SCORES = ROOT / "examples" / "submissions" / "scores"
HANGS = "def scores(q, keys):\n    while True:\n        pass\n"
IDS = [
    "example:aligned_perpendicular_partial",
    "example:anti_aligned",
    "example:three_dims_mixed_signs",
    "property:perpendicular_keys_score_zero",
    "property:equals_qk_entries",
    "property:scores_not_normalised",
    "property:non_contiguous_inputs",
]


def _verdicts(result: SubmissionResult) -> list[str]:
    assert [c.id for c in result.cases] == IDS
    return [c.verdict.value for c in result.cases]


def _hanging(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "hangs.py"
    path.write_text(HANGS, encoding="utf-8")
    return path


def _graded_under_one_call(tmp_path: Path) -> list[SubmissionResult]:
    """The hanging file and a correct one with a budget of one per-call limit (1 s)."""
    limits = grading_limits(SPEC, timeout=1.0, time_budget=1.0)
    return grade_many([_hanging(tmp_path), SCORES / "correct_loops.py"], SPEC, limits=limits, jobs=2)


def test_a_hanging_file_stops_at_its_budget_and_the_next_is_graded(tmp_path):
    """Budget = one call's limit: the first case times out, every later case is not run (0 points,
    the budget's sentence), and the next submission gets full marks."""
    hangs, right = _graded_under_one_call(tmp_path)
    assert _verdicts(hangs) == ["timeout"] + ["budget_spent"] * 6
    assert hangs.score == 0 and right.score == right.max_score == 11
    assert hangs.cases[0].message.splitlines()[1] == "the call took longer than 1 s (an infinite loop, or far too slow)"
    for case in hangs.cases[1:]:
        assert case.message.splitlines()[-1] == budget_spent_text(1.0)


def test_verdicts_are_the_same_on_a_loaded_machine(tmp_path):
    """Graded again while two busy processes keep both cores loaded: the same verdicts and messages."""
    quiet = _graded_under_one_call(tmp_path / "quiet")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = _graded_under_one_call(tmp_path / "loaded")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    for a, b in zip(quiet, loaded, strict=True):
        assert [(c.verdict, c.points, c.message) for c in a.cases] == [
            (c.verdict, c.points, c.message) for c in b.cases
        ]


def test_the_default_budget_keeps_every_case_a_partly_hanging_file_earns():
    """hangs_on_perpendicular.py hangs on four cases (12 s of the default 30 s): it keeps the 5
    points of the cases it passes, and no case goes unrun."""
    limits = grading_limits(SPEC)
    assert (limits.call_timeout_s, limits.time_budget_s) == (3.0, 30.0)
    (result,) = grade_many([SCORES / "hangs_on_perpendicular.py"], SPEC, limits=limits)
    assert _verdicts(result) == ["timeout", "passed", "passed", "timeout", "timeout", "passed", "timeout"]
    assert result.score == 5


def test_a_dask_workers_task_gets_the_budget(tmp_path):
    """The task a dask worker runs (the client's Limits as plain data) grades under the same budget."""
    from attnscore.grade.cluster import _grade_chunk, _submission_data

    (submission,) = find_submissions([str(_hanging(tmp_path))], one=True)
    options = {
        "function": None,
        "dtype": "float32",
        "seed": None,
        "limits": asdict(grading_limits(SPEC, timeout=1.0, time_budget=1.0)),
        "shrink_steps": 50,
    }
    spec_file = (Path(SPEC.path).name, Path(SPEC.path).read_bytes())
    cases = pickle.dumps(build_cases(SPEC, "float32"))  # as the client sends them
    (record,) = _grade_chunk(spec_file, [_submission_data(submission)], options, (), cases)
    verdicts = [case["verdict"] for case in record["cases"]]
    assert verdicts == ["timeout"] + ["budget_spent"] * 6


def test_a_class_run_grades_again_when_the_budget_changes(tmp_path):
    """The budget changes results, so it is part of a class run's spec key: another budget regrades."""
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "right.py").write_text((SCORES / "correct_matmul.py").read_text(encoding="utf-8"), encoding="utf-8")
    submissions = find_submissions([str(klass)])
    first = grade_class(submissions, SPEC, tmp_path / "out", limits=grading_limits(SPEC, time_budget=30.0))
    same = grade_class(submissions, SPEC, tmp_path / "out", limits=grading_limits(SPEC, time_budget=30.0))
    other = grade_class(submissions, SPEC, tmp_path / "out", limits=grading_limits(SPEC, time_budget=40.0))
    assert (first.graded, same.graded, other.graded) == (("right.py",), (), ("right.py",))
