"""Tests for submissions as students upload them (attnscore.submission.files): a zip, a zip or folder
with one top folder, macOS junk, a zip left unpacked on PrairieLearn, and the names a student knows."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from fractions import Fraction
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from attnscore.check.cases import build_cases
from attnscore.cli import main
from attnscore.export.prairielearn_grader import grade_job
from attnscore.grade.grading import grade_many, grade_submission
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.submission.files import MAX_SUBMISSION_BYTES, SubmissionError, find_submissions

ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = ROOT / "specs" / "dot_product_scores.yaml"
LIMITS = Limits(call_timeout_s=30.0)  # far from any call here: nothing should time out
CORRECT = "def scores(q, keys):\n    return keys @ q\n"
WITH_HELPER = {
    "solution.py": "from helper import dot\n\ndef scores(q, keys):\n    return dot(keys, q)\n",
    "helper.py": "def dot(keys, q):\n    return keys @ q\n",
}
MAC_JUNK = {"__MACOSX/hw3/._solution.py": "\x00\x05\x16\x07", "hw3/.DS_Store": "junk", "__MACOSX/._hw3": "x"}


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC_PATH)


@pytest.fixture(scope="module")
def cases(spec):
    return build_cases(spec)


def write(folder: Path, files: dict[str, str | bytes]) -> Path:
    for name, text in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode() if isinstance(text, str) else text)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def zipped(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def names(submission) -> list[str]:
    return [rel for rel, _ in submission.files]


def notebook(*cells: str) -> bytes:
    return nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])).encode()


def test_zip_with_one_top_folder_is_graded_by_attnscore_grade(tmp_path):
    """`attnscore grade hw3.zip`: the zip of a folder (hw3/solution.py, hw3/helper.py) gets full marks."""
    archive = tmp_path / "hw3.zip"
    archive.write_bytes(zipped({f"hw3/{n}": t for n, t in WITH_HELPER.items()} | {"hw3/": ""}))
    [submission] = find_submissions([str(archive)])
    assert (submission.path, names(submission), submission.problem) == (archive, ["helper.py", "solution.py"], None)
    result = CliRunner().invoke(main, ["grade", str(archive), "--spec", str(SPEC_PATH), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["score"] == 11


def test_gradescope_grades_an_upload_with_one_top_folder_and_mac_junk(tmp_path):
    """Gradescope unpacks the zip into /autograder/submission: hw3/ plus __MACOSX/ is graded as hw3/."""
    folder = write(tmp_path / "submission", {f"hw3/{n}": t for n, t in WITH_HELPER.items()} | MAC_JUNK)
    [submission] = find_submissions([str(folder)], one=True)
    assert names(submission) == ["helper.py", "solution.py"]
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        main, ["grade", str(folder), "--spec", str(SPEC_PATH), "--format", "gradescope", "--output", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["score"] == 11 and {t["status"] for t in data["tests"]} == {"passed"}


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"hw3/solution.py": CORRECT}, id="one top folder"),
        pytest.param({"hw3.zip": zipped({"hw3/solution.py": CORRECT} | MAC_JUNK)}, id="a zip kept as a file"),
        pytest.param({"solution.zip": zipped({"solution.py": CORRECT})}, id="a zip of the files themselves"),
    ],
)
def test_prairielearn_grades_uploads_as_students_make_them(tmp_path, files):
    """PrairieLearn's /grade/student with a top folder, or a zip it stored as is: full marks."""
    write(tmp_path / "tests", {"spec.yaml": SPEC_PATH.read_bytes()})
    write(tmp_path / "student", files)
    results = grade_job(tmp_path)
    assert results["gradable"] is True and results["score"] == 1.0, results.get("message")


def test_entry_is_found_one_level_down(tmp_path):
    """--entry solution.py: the one top folder that holds it is the submission; other files are left out."""
    folder = write(tmp_path / "s", {"README.md": "hi", "hw3/solution.py": CORRECT, "hw3/helper.py": ""})
    [submission] = find_submissions([str(folder)], entry="solution.py", one=True)
    assert (names(submission), submission.entry) == (["helper.py", "solution.py"], "solution.py")


def test_a_top_level_candidate_is_never_replaced(tmp_path):
    """A .py file at the top stays the submission, whatever folders lie beside it."""
    folder = write(tmp_path / "s", {"solution.py": CORRECT, "old/solution.py": "X = 1\n"})
    [submission] = find_submissions([str(folder)], one=True)
    assert names(submission) == ["solution.py", "old/solution.py"]


@pytest.mark.parametrize(
    "files, message",
    [
        pytest.param(
            {"course/hw3/solution.py": CORRECT},
            "expected a .py or .ipynb file at the top of the upload or in its one folder, found them only "
            "further down (course/hw3/solution.py): upload the files themselves, or a zip of the folder "
            "that holds them",
            id="nested two levels",
        ),
        pytest.param(
            {"hw3/solution.py": CORRECT, "hw3_old/solution.py": CORRECT},
            "expected a .py or .ipynb file at the top of the upload or in one folder, found several folders that "
            "hold one (hw3/, hw3_old/): upload only the folder that is graded",
            id="two folders",
        ),
        pytest.param(
            {"a.zip": zipped({"solution.py": CORRECT}), "b.zip": zipped({"solution.py": CORRECT})},
            "expected one zip file, found 2 (a.zip, b.zip)",
            id="two zips",
        ),
        pytest.param(
            {"notes.txt": "I forgot"},
            "expected a .py or .ipynb file directly in this folder, found none "
            "(nor in one folder or zip file inside it)",
            id="nothing to grade",
        ),
    ],
)
def test_uploads_that_cannot_be_guessed_are_refused_clearly(tmp_path, files, message):
    """Where the graded file cannot be told, one message says what was expected and what was found."""
    folder = write(tmp_path / "student", files)
    with pytest.raises(SubmissionError) as caught:
        find_submissions([str(folder)], one=True)
    assert str(caught.value) == f"{folder}: {message}"
    write(tmp_path / "tests", {"spec.yaml": SPEC_PATH.read_bytes()})
    results = grade_job(tmp_path)  # PrairieLearn: not gradable, never charged to the student
    assert results["gradable"] is False
    assert results["message"] == f"Your submission could not be graded: {message}"


def symlink_member(name: str, target: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def bad_zips() -> list:
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("solution.py", "#" * (MAX_SUBMISSION_BYTES + 10))
    encrypted = bytearray(zipped({"solution.py": CORRECT}))
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # local and central headers
        encrypted[encrypted.index(signature) + flags_at] |= 0x1  # "encrypted", as a password-protected zip says
    return [
        pytest.param(b"PK not really", "expected a zip archive, found a file that is not one", id="not a zip"),
        pytest.param(zipped({"../evil.py": CORRECT}), "expected relative paths inside the zip, found '../evil.py'"),
        pytest.param(zipped({"/etc/evil.py": CORRECT}), "expected relative paths inside the zip, found '/etc/evil.py'"),
        pytest.param(bomb.getvalue(), "solution.py: expected at most 1048576 bytes, found more", id="zip bomb"),
        pytest.param(bytes(encrypted), "solution.py is encrypted: make the zip without a password", id="password"),
    ]


@pytest.mark.parametrize("content, message", bad_zips())
def test_a_zip_that_cannot_be_taken_in_is_a_located_error(tmp_path, content, message):
    """Hostile or broken zips: one error naming the zip and the member; nothing is written to disk."""
    archive = tmp_path / "hw3.zip"
    archive.write_bytes(content)
    with pytest.raises(SubmissionError) as caught:
        find_submissions([str(archive)])
    assert str(caught.value).startswith(f"{archive}: {message}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hw3.zip"]


def test_zip_members_that_are_links_or_junk_are_not_read(tmp_path):
    """A symbolic link inside a zip is skipped like one in a folder; so are hidden files and __MACOSX."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hw3/solution.py", CORRECT)
        archive.writestr(symlink_member("hw3/passwd.py", "/etc/passwd"), "/etc/passwd")
        for name, text in MAC_JUNK.items():
            archive.writestr(name, text)
        archive.writestr("hw3/__pycache__/solution.cpython-311.pyc", b"\x00")
        archive.writestr("hw3\\windows.py", "Y = 2\n")  # a Windows archiver's separator
    (tmp_path / "hw3.zip").write_bytes(buffer.getvalue())
    [submission] = find_submissions([str(tmp_path / "hw3.zip")])
    assert names(submission) == ["solution.py", "windows.py"]


def test_class_with_zips_and_top_folders(tmp_path, spec):
    """A class folder: alice.zip, bob/hw3/ and carol's nested upload; only carol is told what went wrong."""
    write(
        tmp_path / "class",
        {
            "alice.zip": zipped({"hw3/solution.py": CORRECT} | MAC_JUNK),
            "bob/hw3/solution.py": CORRECT,
            "carol/a/b/solution.py": CORRECT,
            "__MACOSX/._alice.zip": "x",
        },
    )
    found = find_submissions([str(tmp_path / "class")])
    assert [(s.path.name, names(s)) for s in found] == [
        ("alice.zip", ["solution.py"]),
        ("bob", ["solution.py"]),
        ("carol", []),
    ]
    assert found[2].problem == (
        "your submission could not be read: expected a .py or .ipynb file at the top of the upload or in its one "
        "folder, found them only further down (a/b/solution.py): upload the files themselves, or a zip of the "
        "folder that holds them"
    )
    results = grade_many(found, spec, limits=LIMITS, shrink_steps=0)
    assert [r.score for r in results] == [Fraction(11), Fraction(11), Fraction(0)]
    assert results[2].error == found[2].problem


def test_notebook_beside_a_py_file_is_named_by_its_own_name(tmp_path, spec, cases):
    """hw3.ipynb and attempt.py both define scores: the message names hw3.ipynb, never "hw3.py"."""
    folder = write(
        tmp_path / "s",
        {"hw3.ipynb": notebook("import torch", "def scores(q, keys):\n    return keys @ q"), "attempt.py": CORRECT},
    )
    [submission] = find_submissions([str(folder)], one=True)
    assert names(submission) == ["attempt.py", "hw3.py"]
    result = grade_submission(submission, spec, cases, limits=LIMITS, shrink_steps=0)
    assert {c.verdict for c in result.cases} == {Verdict.FUNCTION_MISSING}
    assert result.error == (
        "more than one of your files defines 'scores' (attempt.py, hw3.ipynb); keep it in one file, "
        "or ask your instructor which file is graded"
    )


def test_notebook_named_when_no_file_defines_it(tmp_path, spec, cases):
    """A notebook inside one top folder is converted there, and named as the student knows it."""
    folder = write(tmp_path / "s", {"hw3/work.ipynb": notebook("X = 1"), "hw3/notes.py": "Y = 2\n"})
    [submission] = find_submissions([str(folder)], one=True)
    assert names(submission) == ["notes.py", "work.py"]
    result = grade_submission(submission, spec, cases, limits=LIMITS, shrink_steps=0)
    assert result.error == "none of your files defines a function named 'scores' (files: notes.py, work.ipynb)"


def test_the_worker_knows_the_converted_notebooks_first_line():
    """The worker's notebook marker is how every converted notebook begins."""
    from attnscore.boundary.entry_file import NOTEBOOK_HEADER
    from attnscore.submission.notebook import convert_notebook

    assert convert_notebook(notebook("X = 1"), "hw.ipynb").source.encode().startswith(NOTEBOOK_HEADER)
