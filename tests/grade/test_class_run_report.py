"""The class report of a class run (attnscore.grade.class_run): drawn only once every result is
committed, and its drawing library loaded while grading elsewhere is still going."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from attnscore.grade.class_run import grade_class
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SCORES = ROOT / "examples" / "submissions" / "scores"
SPEC = ROOT / "specs" / "dot_product_scores.yaml"
CLASS = {"ada.py": "correct_matmul.py", "cy.py": "cosine_similarity.py", "eve.py": "syntax_error.py"}


def _make_class(folder: Path) -> Path:
    folder.mkdir()
    for name, example in CLASS.items():
        shutil.copy(SCORES / example, folder / name)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_the_report_is_drawn_after_every_result_is_committed(tmp_path, monkeypatch, jobs):
    """When the figures are drawn, the gradebook holds every student's result, each feedback file
    and the CSV are written: a report that fails or is slow never holds back a grade."""
    import attnscore.report.class_html as class_html

    out = tmp_path / "out"
    seen = []
    draw = class_html.class_report_html

    def watched(rows, title):
        db = sqlite3.connect(f"file:{out / 'gradebook.sqlite'}?mode=ro", uri=True)
        stored = dict(db.execute("SELECT student, score FROM grades").fetchall())
        db.close()
        feedback = sorted(p.name for p in (out / "feedback").iterdir())
        seen.append((stored, feedback, (out / "grades.csv").is_file(), len(rows)))
        return draw(rows, title)

    monkeypatch.setattr(class_html, "class_report_html", watched)
    submissions = find_submissions([str(_make_class(tmp_path / "class"))])
    run = grade_class(submissions, load_spec(SPEC), out, limits=Limits(call_timeout_s=30), shrink_steps=0, jobs=jobs)
    assert sorted(run.graded) == sorted(CLASS)
    assert seen == [({"ada.py": "11", "cy.py": "2", "eve.py": "0"}, [f"{n}.txt" for n in sorted(CLASS)], True, 3)]
    assert "<img" in (out / "report.html").read_text(encoding="utf-8")


LOADED_WHEN = """
import json, sys
from attnscore.grade.class_run import grade_class
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions

seen = []
grade_class(
    find_submissions([sys.argv[1]]), load_spec(sys.argv[2]), sys.argv[3], jobs=int(sys.argv[4]),
    limits=Limits(call_timeout_s=30), shrink_steps=0,
    on_result=lambda *_: seen.append("attnscore.report.class_html" in sys.modules),
)
print(json.dumps([seen, "matplotlib" in sys.modules]))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("jobs", "loaded"), [(2, [False, True, True]), (1, [False, False, False])])
def test_grading_in_grader_processes_loads_the_report_drawing_after_the_first_result(tmp_path, jobs, loaded):
    """With grader processes (--jobs 2), the class process loads matplotlib once the first result
    is committed, while the others are graded; grading in the class process itself (--jobs 1)
    loads it only for the report. Either way the report is drawn (matplotlib loaded at the end)."""
    klass = _make_class(tmp_path / "class")
    proc = subprocess.run(
        [sys.executable, "-c", LOADED_WHEN, str(klass), str(SPEC), str(tmp_path / "out"), str(jobs)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [loaded, True]
