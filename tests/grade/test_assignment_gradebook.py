"""An assignment's results in the class-run gradebook: stored and read back exactly with their
questions (rows written before questions existed too), and written to the CSV with a column per question."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
from fractions import Fraction

import pytest

from attnscore.grade.gradebook import Gradebook, spec_key
from attnscore.report.record import result_to_record
from attnscore.report.spreadsheet import CSV_ENCODING, grades_csv
from tests.assignmentdata import assignment_result


def test_gradebook_keeps_an_assignments_result_exactly(tmp_path):
    """Stored and read back: the questions, each case's question, 10/3 points and 41/3 in all."""
    graded = assignment_result("bob.py", {("softmax", "example:b"): "softmax_wrong_dim"}, missing=("rope",))
    key = spec_key(b"a1.yaml and every spec", 2, "1.0", {"seed": 11})
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        run = book.start_run("cs_a1", key, 1, 1)
        book.record(run, "bob.py", "sub", key, graded)
        back = book.current("bob.py", "sub", key)
        assert back == graded
        assert back is not None and back.question_score("softmax") == (Fraction(20, 3), 10)
        assert back.score == Fraction(32, 3)  # 20/3 + 4 + 0 (rope missing) + 0, exactly
        row = book._db.execute("SELECT score, max_score FROM grades WHERE student = 'bob.py'").fetchone()
    assert row == ("32/3", "17")


def test_gradebook_reads_a_row_written_before_questions_existed(tmp_path):
    """A stored record without the questions and question keys reads as a result of one spec."""
    graded = assignment_result("old.py")
    record = result_to_record(graded)
    del record["questions"]
    for case in record["cases"]:
        del case["question"]
    path = tmp_path / "gradebook.sqlite"
    with Gradebook(path) as book:
        run = book.start_run("cs_a1", "k", 1, 1)
        book.record(run, "old.py", "sub", "k", graded)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE grades SET result = ? WHERE student = 'old.py'", (json.dumps(record),))
    with Gradebook(path) as book:
        back = book.current("old.py", "sub", "k")
    assert back is not None and back.questions == () and {c.question for c in back.cases} == {""}
    assert back.score == graded.score


def test_class_csv_from_the_gradebook_has_a_column_per_question(tmp_path):
    """The CSV written from stored results: one column per question, 0 for a 0-point question and a
    missing function's question, the exact total rounded once."""
    rows = [
        ("ada.py", assignment_result("ada.py")),
        ("bob.py", assignment_result("bob.py", {("softmax", "example:b"): None})),
        ("cy.py", assignment_result("cy.py", missing=("softmax",))),
    ]
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        run = book.start_run("cs_a1", "k", 3, 3)
        for student, res in rows:
            book.record(run, student, "sub", "k", res)
        stored = book.results([s for s, _ in rows])
    text = grades_csv([(s, stored[s]) for s, _ in rows])
    table = list(csv.reader(io.StringIO(text.encode(CSV_ENCODING).decode(CSV_ENCODING))))
    assert [line[:8] for line in table] == [
        ["student", "score", "max", "error", "softmax", "sdpa", "rope", "warmup"],
        ["ada.py", "17", "17", "", "10", "4", "3", "0"],
        ["bob.py", "13.6667", "17", "", "6.6667", "4", "3", "0"],
        [
            "cy.py",
            "7",
            "17",
            "softmax: the submission defines no function softmax (it defines: helper, softmax)",
            "0",
            "4",
            "3",
            "0",
        ],
    ]


@pytest.mark.slow
def test_class_run_of_an_assignment_writes_question_columns_and_page(tmp_path):
    """grade_class on an assignment: grades.csv has each question's exact points, 0 for a missing
    function's question, and report.html the question table; a rerun reuses both results."""
    from attnscore.grade.class_run import grade_class
    from attnscore.spec.assignment import load_assignment
    from attnscore.submission.files import find_submissions
    from tests.export.test_assignment_export import ASSIGNMENT, CORRECT, SPECS, WRONG

    (tmp_path / "course").mkdir()
    (tmp_path / "shared").mkdir()
    shutil.copy(SPECS / "dot_product_scores.yaml", tmp_path / "course" / "dot_product_scores.yaml")
    shutil.copy(SPECS / "score_matrix.yaml", tmp_path / "shared" / "score_matrix.yaml")
    (tmp_path / "course" / "a1.yaml").write_text(ASSIGNMENT)
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "right.py").write_bytes(CORRECT)
    (tmp_path / "class" / "wrong.py").write_bytes(WRONG)
    assignment = load_assignment(tmp_path / "course" / "a1.yaml")
    points = {q.id: q.points for q in assignment.questions}
    submissions = find_submissions([str(tmp_path / "class")])
    run = grade_class(submissions, assignment, tmp_path / "out")
    assert sorted(run.graded) == ["right.py", "wrong.py"]
    with open(tmp_path / "out" / "grades.csv", encoding=CSV_ENCODING, newline="") as f:
        table = list(csv.reader(f))
    assert table[0][:7] == ["student", "score", "max", "error", "scores", "matrix", "scaled"]
    total, scaled = str(int(assignment.max_points)), str(int(points["scaled"]))
    rows = {row[0]: row[1:7] for row in table[1:]}
    assert rows["right.py"] == [total, total, "", "10", str(int(points["matrix"])), scaled]
    assert rows["wrong.py"][0:2] == [scaled, total] and rows["wrong.py"][3:] == ["0", "0", scaled]
    assert rows["wrong.py"][2].startswith("matrix: ") and "score_matrix" in rows["wrong.py"][2]
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert '<table id="question-table">' in page and '<td class="id">scaled</td>' in page
    again = grade_class(submissions, assignment, tmp_path / "out")
    assert again.graded == () and sorted(again.reused) == ["right.py", "wrong.py"]
