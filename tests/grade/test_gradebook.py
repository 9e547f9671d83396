"""Tests for the class-run gradebook (attnscore.grade.gradebook), records and the CSV export."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import subprocess
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

from attnscore.grade.class_run import feedback_name
from attnscore.grade.gradebook import Gradebook, GradebookError, spec_key, student_name, submission_key
from attnscore.report.record import RecordError, result_from_record, result_to_record
from attnscore.report.results import Verdict
from attnscore.report.spreadsheet import CSV_ENCODING, grades_csv
from attnscore.submission.files import Submission
from tests.classdata import class_rows, result


def test_record_round_trips_exact_points_and_every_field():
    """A result turned into a record and back is equal, with exact points (1/3 stays 1/3)."""
    original = replace(result("bob.py", {"example:aligned": "softmax_applied"}), error="import failed")
    data = json.loads(json.dumps(result_to_record(original)))
    back = result_from_record(data)
    assert back == original
    assert back.cases[2].max_points == Fraction(1, 3)
    assert back.score == Fraction(2) + Fraction(1, 3)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(lambda d: d.update(format="other/1"), "record.format: expected 'attnscore-record/2'", id="format"),
        pytest.param(
            lambda d: d["cases"][2]["failure"].update(hidden="no"),
            "record.cases[2].failure.hidden: expected bool, found str",
            id="failure field",
        ),
        pytest.param(
            lambda d: d["cases"][2]["failure"].update(mismatch={"verdict": "wrong_value"}),
            "record.cases[2].failure.mismatch.entries: expected a value, found none",
            id="mismatch field",
        ),
        pytest.param(lambda d: d.pop("cases"), "record.cases: expected a value, found none", id="no cases"),
        pytest.param(lambda d: d["cases"][0].update(verdict="great"), "record.cases[0].verdict", id="bad verdict"),
        pytest.param(lambda d: d["cases"][1].update(points="1/0"), "record.cases[1].points", id="zero denominator"),
        pytest.param(lambda d: d.update(seed="7"), "record.seed: expected int, found str", id="seed as text"),
        pytest.param(lambda d: d.update(seed=True), "record.seed: expected int, found bool", id="seed as bool"),
    ],
)
def test_malformed_record_is_a_located_error(mutate, message):
    """A damaged record names the field that is wrong."""
    data = result_to_record(result("a.py", {"property:equals_qk_entries": None}))
    mutate(data)
    with pytest.raises(RecordError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        result_from_record(data)


def _submission(name: str, content: bytes = b"def scores(q, k): ...\n") -> Submission:
    return Submission(Path("class") / name, ((name, content),), name)


def test_submission_key_changes_with_content_and_names_not_with_location():
    """The submission key follows the files' bytes and names, not where the class folder lies."""
    a = _submission("alice.py")
    moved = Submission(Path("/elsewhere/alice.py"), a.files, a.entry)
    assert submission_key(a) == submission_key(moved)
    assert submission_key(a) != submission_key(_submission("alice.py", b"def scores(q, k): return 1\n"))
    assert submission_key(a) != submission_key(Submission(a.path, (("other.py", a.files[0][1]),), a.entry))
    unreadable = Submission(a.path, (), a.entry, problem="too many files")
    assert submission_key(unreadable) != submission_key(Submission(a.path, (), a.entry))
    assert student_name(moved) == "alice.py"


def test_spec_key_changes_with_spec_version_attnscore_version_and_options():
    """Each ingredient of the spec key changes it."""
    base = spec_key(b"spec", 1, "0.1.0", {"seed": 1})
    assert base == spec_key(b"spec", 1, "0.1.0", {"seed": 1})
    assert len({base, spec_key(b"spec!", 1, "0.1.0", {"seed": 1}), spec_key(b"spec", 2, "0.1.0", {"seed": 1})}) == 3
    assert base != spec_key(b"spec", 1, "0.2.0", {"seed": 1})
    assert base != spec_key(b"spec", 1, "0.1.0", {"seed": 2})


def test_gradebook_reuses_only_a_current_result(tmp_path):
    """A stored result is current for the same submission and spec keys; a grader error never is."""
    with Gradebook(tmp_path / "gb.sqlite") as book:
        run = book.start_run("dot_product_scores", "S", 2, 2)
        graded = result("alice.py", {})
        book.record(run, "alice.py", "A", "S", graded)
        assert book.current("alice.py", "A", "S") == graded
        assert book.current("alice.py", "A2", "S") is None  # changed submission
        assert book.current("alice.py", "A", "S2") is None  # changed spec
        assert book.current("bob.py", "A", "S") is None
        broken = replace(graded, cases=(replace(graded.cases[0], verdict=Verdict.GRADER_ERROR), *graded.cases[1:]))
        book.record(run, "bob.py", "B", "S", broken)
        assert book.current("bob.py", "B", "S") is None
        book.record(run, "alice.py", "A2", "S", graded)  # regraded: one grade row, two events
        book.finish_run(run)
        assert book.events() == 3 and book.events("alice.py") == 2
        assert set(book.results(["alice.py", "bob.py", "nobody"])) == {"alice.py", "bob.py"}
    db = sqlite3.connect(tmp_path / "gb.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT COUNT(*) FROM grades").fetchone()[0] == 2
    assert db.execute("SELECT finished_at IS NOT NULL FROM runs").fetchone()[0] == 1


def test_second_run_on_the_same_gradebook_is_refused(tmp_path):
    """Two runs cannot share a gradebook at once; the lock goes with the first."""
    first = Gradebook(tmp_path / "gb.sqlite")
    with pytest.raises(GradebookError, match="another attnscore grade run is using this gradebook"):
        Gradebook(tmp_path / "gb.sqlite")
    first.close()
    Gradebook(tmp_path / "gb.sqlite").close()


def test_a_file_that_is_not_a_gradebook_is_a_clear_error(tmp_path):
    """Pointing --out at a folder whose gradebook.sqlite is something else fails with one line."""
    path = tmp_path / "gb.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(GradebookError, match="expected an attnscore gradebook"):
        Gradebook(path)
    db = sqlite3.connect(path.with_name("newer.sqlite"))
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('schema', '9');"
    )
    db.commit()
    db.close()
    with pytest.raises(GradebookError, match="expected gradebook schema 1, found 9"):
        Gradebook(path.with_name("newer.sqlite"))


def test_grades_csv_opens_as_a_spreadsheet_table():
    """The CSV has one row per student, the exact-then-rounded points, a BOM when encoded, CRLF lines."""
    rows = class_rows()
    text = grades_csv(rows)
    data = text.encode(CSV_ENCODING)
    assert data.startswith(b"\xef\xbb\xbf") and b"\r\n" in data
    table = list(csv.reader(io.StringIO(data.decode(CSV_ENCODING))))
    assert table[0] == [
        "student", "score", "max", "error", "example:aligned", "example:anti_aligned", "property:equals_qk_entries"
    ]  # fmt: skip
    by_student = {row[0]: row for row in table[1:]}
    assert len(by_student) == 6
    assert by_student["alice.py"][1:] == ["5.3333", "5.3333", "", "3", "2", "0.3333"]
    assert by_student["bob.py"][1:] == ["0.3333", "5.3333", "", "0", "0", "0.3333"]
    assert "'=evil<script>.py" in by_student  # a formula-like name is defused


def test_feedback_names_are_safe_and_distinct():
    """Feedback file names keep plain names and make odd ones safe and distinct."""
    assert feedback_name("alice.py") == "alice.py.txt"
    odd = feedback_name("../ev il")
    assert "/" not in odd and not odd.startswith(".") and odd.endswith(".txt")
    assert feedback_name("a b") != feedback_name("a_b")


def test_record_keeps_the_whole_failure_and_is_strict_json():
    """A failure with non-finite entries, a mismatch and a shrunk counterexample survives the round trip."""
    import json
    import math

    from attnscore.report.failure import EntryMismatch, Mismatch, ShrunkFrom

    base = result("nan.py", {"property:equals_qk_entries": "softmax_applied"})
    failing = base.cases[2]
    mismatch = Mismatch(
        verdict=Verdict.NON_FINITE,
        wrong=2,
        total=3,
        entries=(
            EntryMismatch(index=(0, 1), got=math.nan, expected=1.5),
            EntryMismatch(index=(2,), got=-math.inf, expected=0.0, error=math.inf, allowed=1e-7, exact=False),
        ),
        tolerance="close",
        got_dtype="float32",
        dtype="float32",
    )
    failure = replace(failing.failure, mismatch=mismatch, shrunk_from=ShrunkFrom(4, 25, 36))
    original = replace(base, cases=(*base.cases[:2], replace(failing, failure=failure)))
    text = json.dumps(result_to_record(original), allow_nan=False)  # strict JSON: no NaN tokens
    back = result_from_record(json.loads(text))
    got = back.cases[2].failure
    assert got.shrunk_from == ShrunkFrom(4, 25, 36) and got.diagnosis == failure.diagnosis
    assert math.isnan(got.mismatch.entries[0].got) and got.mismatch.entries[1].got == -math.inf
    assert got.mismatch.entries[1].error == math.inf and got.mismatch.entries[1].allowed == 1e-7
    assert replace(got, mismatch=None) == replace(failure, mismatch=None)
    assert back.cases[2].message == original.cases[2].message


def _mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_gradebook_and_its_journal_are_private_whatever_the_umask(tmp_path, umask):
    """The gradebook (hidden inputs and expected values), its WAL, shared-memory and lock files are
    0600 and the folders it makes 0700, from creation on; a folder that existed keeps its mode."""
    os.chmod(tmp_path, 0o755)
    folder = tmp_path / "class" / "out"
    saved = os.umask(umask)
    try:
        with Gradebook(folder / "gb.sqlite") as book:
            run = book.start_run("dot_product_scores", "S", 1, 1)
            book.record(run, "alice.py", "A", "S", result("alice.py", {}))
            made = sorted(p.name for p in folder.iterdir())
            modes = {name: _mode(folder / name) for name in made}
    finally:
        os.umask(saved)
    assert made == ["gb.sqlite", "gb.sqlite-shm", "gb.sqlite-wal", "gb.sqlite.lock"]
    assert modes == dict.fromkeys(made, 0o600)
    assert _mode(folder) == _mode(tmp_path / "class") == 0o700
    assert _mode(tmp_path) == 0o755


def test_a_gradebook_left_readable_by_an_older_version_is_made_private(tmp_path):
    """A 0644 gradebook and journal from before are 0600 once opened, and keep their rows."""
    path = tmp_path / "gb.sqlite"
    with Gradebook(path) as book:
        book.record(book.start_run("s", "S", 1, 1), "alice.py", "A", "S", result("alice.py", {}))
    for name in ("gb.sqlite", "gb.sqlite-wal"):
        if (tmp_path / name).exists():
            os.chmod(tmp_path / name, 0o644)
    (tmp_path / "gb.sqlite-journal").write_bytes(b"")
    os.chmod(tmp_path / "gb.sqlite-journal", 0o644)
    with Gradebook(path) as book:
        assert book.current("alice.py", "A", "S") is not None
        assert {p.name: _mode(p) for p in tmp_path.iterdir() if p.name.startswith("gb")} == {
            p.name: 0o600 for p in tmp_path.iterdir() if p.name.startswith("gb")
        }


@pytest.mark.skipif(os.geteuid() != 0, reason="reading as a worker's uid needs root")
def test_a_worker_uid_cannot_read_the_gradebook_or_the_folder_it_made(tmp_path):
    """As a worker uid: EACCES on the gradebook in a world-readable folder, and on any file (even
    0644) in the folder the gradebook made."""
    os.chmod(tmp_path, 0o755)
    with Gradebook(tmp_path / "gb.sqlite"), Gradebook(tmp_path / "out" / "gb.sqlite"):
        (tmp_path / "out" / "feedback.txt").write_text("x")
        os.chmod(tmp_path / "out" / "feedback.txt", 0o644)
    reader = (
        "import sys\ntry:\n    open(sys.argv[1], 'rb').read()\n    print('read')\n"
        "except OSError as e:\n    print(type(e).__name__)\n"
    )
    for target in (tmp_path / "gb.sqlite", tmp_path / "out" / "feedback.txt"):
        done = subprocess.run(
            ["/usr/bin/python3", "-c", reader, str(target)],
            user=64450,
            group=64450,
            extra_groups=[],
            capture_output=True,
            text=True,
            check=False,
            cwd="/",
        )
        assert done.stdout.strip() == "PermissionError", done


def test_a_gradebook_path_that_is_a_folder_or_a_link_is_a_clear_error(tmp_path):
    """A folder or symbolic link where the gradebook should be: one line saying what was found."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "gb.sqlite").mkdir()
    with pytest.raises(GradebookError, match=r"gb.sqlite: expected a gradebook file, found: Is a directory"):
        Gradebook(tmp_path / "a" / "gb.sqlite")
    (tmp_path / "b").mkdir()
    (tmp_path / "elsewhere").write_bytes(b"")
    (tmp_path / "b" / "gb.sqlite").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(GradebookError, match="found: a symbolic link"):
        Gradebook(tmp_path / "b" / "gb.sqlite")
