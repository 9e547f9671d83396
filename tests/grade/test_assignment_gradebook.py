"""An assignment's results in the class-run gradebook: stored and read back exactly with their
questions, keyed by every file the assignment needs, and written to the CSV with a column per question."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from fractions import Fraction

import pytest

from attnscore.grade.gradebook import Gradebook, assignment_key, spec_key
from attnscore.report.record import result_to_record
from attnscore.report.spreadsheet import CSV_ENCODING, grades_csv
from tests.assignmentdata import assignment_result

FILES = [("a1.yaml", b"questions: ..."), ("softmax.yaml", b"spec"), ("softmax_reference.py", b"def softmax(x): ...")]


def test_gradebook_keeps_an_assignments_result_exactly(tmp_path):
    """Stored and read back: the questions, each case's question, 10/3 points and 41/3 in all."""
    graded = assignment_result("bob.py", {("softmax", "example:b"): "softmax_wrong_dim"}, missing=("rope",))
    key = assignment_key(FILES, 2, "1.0", {"seed": 11})
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


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param([FILES[0], ("softmax.yaml", b"spec2"), FILES[2]], id="a question's spec"),
        pytest.param([*FILES[:2], ("softmax_reference.py", b"def softmax(x): return x")], id="a reference file"),
        pytest.param([FILES[0], ("other.yaml", b"spec"), FILES[2]], id="a file renamed"),
        pytest.param(FILES[:2], id="a file gone"),
    ],
)
def test_assignment_key_changes_with_any_file(changed):
    """Editing, renaming or dropping any file the assignment needs grades the class again."""
    assert assignment_key(changed, 2, "1.0", {}) != assignment_key(FILES, 2, "1.0", {})


def test_assignment_key_is_stable_and_covers_version_and_options():
    """The same files, version, attnscore and options give the same key; each of those changes it;
    it is never a single spec's key of the same bytes."""
    key = assignment_key(FILES, 2, "1.0", {"seed": 1})
    assert key == assignment_key(list(FILES), 2, "1.0", {"seed": 1})
    assert len({key, assignment_key(FILES, 3, "1.0", {"seed": 1}), assignment_key(FILES, 2, "1.1", {"seed": 1}),
                assignment_key(FILES, 2, "1.0", {"seed": 2})}) == 4  # fmt: skip
    assert assignment_key([("a1.yaml", b"x")], 1, "1.0", {}) != spec_key(b"x", 1, "1.0", {})


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
