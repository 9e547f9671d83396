"""Class runs against hostile student names and failing outputs, graded in process.

Grading itself is replaced by synthetic results (tests/classdata.py): what is tested here is what a
class run writes: file names, the CSV, the text table and the HTML report.
"""

from __future__ import annotations

import csv
import io
import os
import sqlite3
import unicodedata
from dataclasses import replace
from pathlib import Path

import matplotlib
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

import attnscore.grade.class_run as class_run
import attnscore.grade.grading as grading
from attnscore.grade.class_run import feedback_name, grade_class
from attnscore.grade.gradebook import Gradebook, student_name
from attnscore.report.class_html import class_report_html
from attnscore.report.spreadsheet import CSV_ENCODING
from attnscore.report.text import batch_table
from attnscore.spec.load import load_spec
from attnscore.submission.files import find_submissions, printable_name
from tests.classdata import class_rows, result

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
CORRECT = b"def scores(q, keys):\n    return keys @ q\n"


@pytest.fixture
def fake_grading(monkeypatch):
    """grade_class grades with synthetic results: a name holding "bad" fails the first example."""
    graded: list[str] = []

    def fake_grade_many(batch, spec, *, on_result, **_):
        out = []
        for submission in batch:
            failing = {"example:aligned": None} if "bad" in submission.name else {}
            r = replace(result(submission.path.name, failing), submission=submission.name)
            graded.append(submission.name)
            on_result(r)
            out.append(r)
        return out

    monkeypatch.setattr(grading, "grade_many", fake_grade_many)  # class_run imports it when it grades
    return graded


def _class(folder: Path, names: list[str | bytes]) -> Path:
    folder.mkdir()
    for name in names:
        path = os.path.join(os.fsencode(folder), name if isinstance(name, bytes) else os.fsencode(name))
        with open(path, "wb") as fh:
            fh.write(CORRECT)
    return folder


def _csv(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((out / "grades.csv").read_text(CSV_ENCODING))))


def _run(klass: Path, out: Path):
    return grade_class(find_submissions([str(klass)], exclude=[out]), SPEC, out)


def test_a_255_byte_file_name_is_graded_written_and_reruns(tmp_path, fake_grading):
    """A student whose file name is as long as the file system allows gets a CSV row, a report
    line and a bounded feedback file, and the rerun reuses the result (it used to fail for good)."""
    long = "a" * 252 + ".py"
    wide = "é" * 125 + ".py"  # 253 bytes in UTF-8
    klass = _class(tmp_path / "class", [long, wide, "bob.py"])
    out = tmp_path / "out"
    first = _run(klass, out)
    assert sorted(first.graded) == sorted([long, wide, "bob.py"]) and first.problems == ()
    again = _run(klass, out)
    assert again.graded == () and sorted(again.reused) == sorted([long, wide, "bob.py"])
    assert sorted(row["student"] for row in _csv(out)) == sorted([long, wide, "bob.py"])
    feedback = sorted(p.name for p in (out / "feedback").iterdir())
    assert len(feedback) == 3 and "bob.py.txt" in feedback
    assert all(len(name.encode("utf-8")) <= 141 for name in feedback)
    assert long in (out / "report.html").read_text("utf-8")


def test_an_unchanged_rerun_rewrites_neither_the_csv_nor_the_report(tmp_path, fake_grading, monkeypatch):
    """A rerun that reuses every result leaves grades.csv and report.html as they are (no plots
    drawn); a changed submission, a student more, or a missing report rewrites both."""
    klass = _class(tmp_path / "class", ["ann.py", "bob_bad.py"])
    out = tmp_path / "out"
    _run(klass, out)
    stamps = {name: (out / name).stat().st_mtime_ns for name in ("grades.csv", "report.html")}
    drawn: list[int] = []
    import attnscore.report.class_html as class_html

    real = class_html.class_report_html
    monkeypatch.setattr(class_html, "class_report_html", lambda *a: drawn.append(1) or real(*a))
    again = _run(klass, out)
    assert again.graded == () and drawn == []
    assert {name: (out / name).stat().st_mtime_ns for name in stamps} == stamps
    (klass / "ann.py").write_bytes(CORRECT + b"# changed\n")
    _run(klass, out)
    assert drawn == [1] and (out / "report.html").stat().st_mtime_ns != stamps["report.html"]
    (klass / "cy.py").write_bytes(CORRECT)
    _run(klass, out)
    assert drawn == [1, 1] and "cy.py" in {row["student"] for row in _csv(out)}
    (out / "report.html").unlink()
    _run(klass, out)
    assert drawn == [1, 1, 1] and (out / "report.html").is_file()
    _run(klass, out)
    assert drawn == [1, 1, 1]


def test_a_student_named_as_mathtext_does_not_kill_the_report(tmp_path, fake_grading, monkeypatch):
    """`$\\undefinedcmd$.py` (and a user's matplotlibrc asking for TeX) still gives every plot."""
    monkeypatch.setitem(matplotlib.rcParams, "text.usetex", True)  # no TeX needed: labels are plain text
    names = ["$\\undefinedcmd$.py", "$x^{$.py", "$\\frac{1}{0}$.py", "bad$$.py"]
    klass = _class(tmp_path / "class", names)
    out = tmp_path / "out"
    for _ in range(2):
        run = _run(klass, out)
        page = (out / "report.html").read_text("utf-8")
        assert run.problems == ()
        assert page.count("<img") == 3 and "could not be drawn" not in page
        assert "$\\\\undefinedcmd$.py" in page  # the name, its backslash escaped (printable_name)


def test_a_plot_that_cannot_be_drawn_leaves_a_note_and_the_rest_of_the_page(monkeypatch):
    """Any plotting failure costs only that plot: the tables are still written."""
    import attnscore.report.class_html as class_html

    def broken(*_):
        raise RuntimeError("no fonts")

    monkeypatch.setattr(class_html, "_heatmap", broken)
    page = class_report_html(class_rows(), "spec v1")
    assert page.count("<img") == 2
    assert 'id="heatmap-missing"' in page and "RuntimeError: no fonts" in page
    assert 'id="student-table"' in page


def test_one_student_cannot_overwrite_anothers_feedback(tmp_path, fake_grading):
    """Safe names, their unsafe look-alikes and a name forged to look like a hashed one all get
    their own feedback file, each with its own student's text."""
    forged = feedback_name("a b.py")[: -len(".txt")]  # "a_b.py~<hash>": the image of "a b.py"
    names = ["a b.py", "a_b.py", "a?b.py", "a_b_.py", "bad b.py", "a\\b.py"]
    klass = _class(tmp_path / "class", names)
    (klass / forged).mkdir()  # a folder submission may have any name
    (klass / forged / "solution.py").write_bytes(CORRECT)
    names.append(forged)
    out = tmp_path / "out"
    run = _run(klass, out)
    files = {feedback_name(n) for n in run.graded}
    assert len(files) == len(names) == len(list((out / "feedback").iterdir()))
    for student in run.graded:
        assert (out / "feedback" / feedback_name(student)).read_text("utf-8").startswith(f"{student}  ")


@pytest.mark.slow
@given(st.lists(st.text(min_size=1, max_size=300), min_size=2, max_size=6, unique=True))
def test_feedback_names_are_bounded_safe_and_injective(students):
    """Any set of distinct names maps to distinct, short, plain file names."""
    files = [feedback_name(s) for s in students]
    assert len(set(files)) == len(files)
    for name in files:
        assert len(name.encode("utf-8")) <= 141
        assert not name.startswith(".") and "/" not in name and "\0" not in name
        assert name.endswith(".txt") and name.isascii()


@given(st.lists(st.text(max_size=40), min_size=2, max_size=6, unique=True))
def test_printable_names_are_one_line_and_injective(names):
    """Escaped names keep distinct names distinct and hold no control character."""
    shown = [printable_name(n) for n in names]
    assert len(set(shown)) == len(shown)
    for text in shown:
        assert not [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


def test_a_newline_in_a_name_cannot_forge_a_row(tmp_path, fake_grading):
    """`x\\n  bad.py  11/11` is one student on one line of the table and one CSV row."""
    forged = "x.py\nforged.py    11 of 11   0.0s   ok   ok   ok\r\t"
    klass = _class(tmp_path / "class", [forged + ".py", "bad.py"])
    out = tmp_path / "out"
    run = _run(klass, out)
    assert [s for s, _ in run.rows] == ["bad.py", "x.py\\x0aforged.py    11 of 11   0.0s   ok   ok   ok\\x0d\\x09.py"]
    console = Console(file=io.StringIO(), record=True, width=300, color_system=None)
    console.print(batch_table([r for _, r in run.rows]))
    lines = console.export_text().splitlines()
    assert sum("forged" in line for line in lines) == 1
    assert not any(line.lstrip().startswith("forged.py") for line in lines)
    assert len(_csv(out)) == 2


def test_a_name_that_is_not_utf8_is_graded_and_stored(tmp_path, fake_grading):
    """A file name with bytes that are not UTF-8 gets an escaped name, a gradebook row and feedback."""
    klass = _class(tmp_path / "class", [b"caf\xe9.py", b"ok.py"])
    out = tmp_path / "out"
    run = _run(klass, out)
    assert sorted(run.graded) == ["caf\\xe9.py", "ok.py"] and run.problems == ()
    assert _run(klass, out).graded == ()  # stored, so reused
    with Gradebook(out / "gradebook.sqlite") as book:
        assert book.events("caf\\xe9.py") == 1


def test_an_out_folder_inside_the_class_is_not_a_student(tmp_path, fake_grading):
    """`--out CLASS/results`: the next run grades the same students, not the results folder; any
    folder holding a gradebook is never a student, and the --output file is not one either."""
    klass = _class(tmp_path / "class", ["ada.py", "bob.py"])
    out = klass / "results"
    for _ in range(2):
        run = _run(klass, out)
        assert sorted(s for s, _ in run.rows) == ["ada.py", "bob.py"]
    other = klass / "older-run"
    grade_class(find_submissions([str(klass)]), SPEC, other)
    names = [student_name(s) for s in find_submissions([str(klass)])]
    assert names == ["ada.py", "bob.py"]  # neither results/ nor older-run/ (both hold a gradebook)
    report = klass / "report.py"
    report.write_text("not a student")
    assert [student_name(s) for s in find_submissions([str(klass)], exclude=[report])] == ["ada.py", "bob.py"]


def test_a_folder_submission_does_not_take_in_its_out_folder(tmp_path):
    """`attnscore grade alice/ --out alice/out`: the gradebook is not part of alice's files."""
    alice = tmp_path / "alice"
    alice.mkdir()
    (alice / "solution.py").write_bytes(CORRECT)
    (alice / "out").mkdir()
    (alice / "out" / "gradebook.sqlite").write_bytes(b"")
    (alice / "out" / "notes.py").write_bytes(b"")
    (submission,) = find_submissions([str(alice)], one=True)
    assert [rel for rel, _ in submission.files] == ["solution.py"]


def test_a_student_whose_outputs_fail_is_recorded_and_the_class_goes_on(tmp_path, fake_grading, monkeypatch):
    """A feedback file that cannot be written and a result that cannot be stored are that
    student's problems: every other student is written, and the CSV says what went wrong."""
    real_write = class_run.write_atomic
    real_record = Gradebook.record

    def write(path, data):
        if "bad" in Path(path).name:
            raise OSError(28, "No space left on device")
        real_write(path, data)

    def record(self, run_id, student, *args):
        if student == "cy.py":
            raise sqlite3.OperationalError("database or disk is full")
        real_record(self, run_id, student, *args)

    monkeypatch.setattr(class_run, "write_atomic", write)
    monkeypatch.setattr(Gradebook, "record", record)
    klass = _class(tmp_path / "class", ["ada.py", "bad.py", "cy.py", "dee.py"])
    out = tmp_path / "out"
    run = _run(klass, out)
    assert dict(run.problems) == {
        "bad.py": "feedback file not written: No space left on device",
        "cy.py": "result not stored in the gradebook (graded again next run): database or disk is full",
    }
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["ada.py.txt", "cy.py.txt", "dee.py.txt"]
    errors = {row["student"]: row["error"] for row in _csv(out)}
    assert errors["ada.py"] == "" and "No space left" in errors["bad.py"] and "disk is full" in errors["cy.py"]
    monkeypatch.setattr(class_run, "write_atomic", real_write)
    monkeypatch.setattr(Gradebook, "record", real_record)
    again = _run(klass, out)
    assert again.graded == ("cy.py",) and again.problems == ()
    assert (out / "feedback" / "bad.py.txt").exists()  # written by the rerun from the stored result


def test_an_unchanged_rerun_starts_no_worker_template(tmp_path, fake_grading, monkeypatch):
    """`attnscore grade CLASS --out DIR`: the first run starts the worker template before it loads
    the spec; a rerun with nothing to grade starts none (no torch loaded, no core taken); a rerun
    with one changed submission starts it once it knows, and grades only that one."""
    from click.testing import CliRunner

    import attnscore.sandbox.processes as processes
    from attnscore.cli import main

    warmed: list[int] = []
    monkeypatch.setattr(processes, "warm_template", lambda *a, **k: warmed.append(1))
    klass = _class(tmp_path / "class", ["ann.py", "bob.py"])
    out = tmp_path / "out"
    args = ["grade", str(klass), "--spec", str(ROOT / "specs" / "dot_product_scores.yaml"), "--out", str(out)]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0 and fake_grading == ["ann.py", "bob.py"] and len(warmed) >= 1
    warmed.clear()
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and warmed == [] and fake_grading == ["ann.py", "bob.py"]
    assert "0 graded, 2 unchanged" in again.output
    (klass / "bob.py").write_bytes(CORRECT + b"# changed\n")
    changed = CliRunner().invoke(main, args)
    assert changed.exit_code == 0 and warmed == [1] and fake_grading == ["ann.py", "bob.py", "bob.py"]
