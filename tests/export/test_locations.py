"""Tests for the locations a student reads: one submission graded on every platform (a Gradescope-
shaped root, a PrairieLearn-shaped root, a class run here and on a dask cluster, the local command
line) names the spec as ``<id>.yaml:<line>`` and the submission by its own name, the same strings
everywhere, and never a path of the grading machine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.export.grader_paths import without_grader_path
from attnscore.export.gradescope import failure_results
from attnscore.grade.class_run import grade_class
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.submission.files import Submission, find_submissions
from tests.guards import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "score_matrix.yaml"
# K not transposed: wrong values on square inputs, an exception on the others; the hidden case fails too
WRONG = b"import torch\n\ndef score_matrix(Q, K):\n    return torch.matmul(Q, K)\n"
# any "something.yaml:LINE" as it appears in text, with whatever folder is written before it
LOCATION = re.compile(r"[^\s()'\",]*\.yaml:\d+")


HIDDEN = {"score_matrix.yaml:80"}  # the line of the spec's one hidden case, broadcast_one_key_set


def locations(text: str) -> set[str]:
    return set(LOCATION.findall(text))


def no_grader_paths(text: str, *folders: Path) -> None:
    """No folder of the grading machine (the test's temporary folders, the checkout, /autograder, /grade)."""
    for folder in (*folders, ROOT):
        assert str(folder) not in text
    assert "/autograder" not in text and "/grade/" not in text and "source/spec.yaml" not in text


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    """Each failing case's location, from the spec's own lines (case id -> ``score_matrix.yaml:N``)."""
    spec = load_spec(SPEC)
    lines = {f"example:{e.id}": e.line for e in spec.worked_examples}
    lines |= {f"property:{p.name}": p.line for p in spec.properties}
    return {case: f"score_matrix.yaml:{line}" for case, line in lines.items()}


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> dict:
    """``attnscore grade solution.py --format json``, run from another folder than the spec's."""
    folder = tmp_path_factory.mktemp("local")
    (folder / "solution.py").write_bytes(WRONG)
    result = CliRunner().invoke(
        main, ["grade", str(folder / "solution.py"), "--spec", str(SPEC), "--format", "json", "--shrink-steps", "0"]
    )
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_local_grade_names_the_spec_by_id_and_the_file_by_its_name(local, expected, tmp_path):
    """The JSON report: every case located as score_matrix.yaml:N, the submission as solution.py."""
    assert local["submission"] == "solution.py" and local["spec"]["path"] == "score_matrix.yaml"
    assert {c["id"]: c["location"] for c in local["cases"]} == expected
    failing = {c["location"] for c in local["cases"] if c["verdict"] != "passed"}
    assert len(failing) >= 5
    assert locations(json.dumps(local)) == set(expected.values())


@pytest.mark.slow
def test_gradescope_root_shows_the_same_locations(local, expected, tmp_path):
    """run_autograder in an /autograder-shaped root (spec: source/spec.yaml): feedback says score_matrix.yaml:N."""
    bundle = tmp_path / "autograder.zip"
    assert CliRunner().invoke(main, ["export", "gradescope", "--spec", str(SPEC), "-o", str(bundle)]).exit_code == 0
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    (root / "submission" / "solution.py").write_bytes(WRONG)
    env = {**os.environ, "ATTNSCORE_AUTOGRADER_ROOT": str(root), "ATTNSCORE_PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    text = (root / "results" / "results.json").read_text(encoding="utf-8")
    results = json.loads(text)
    failing = {c["location"] for c in local["cases"] if c["verdict"] != "passed" and c["visibility"] == "visible"}
    assert failing <= locations(text) <= set(expected.values()) - HIDDEN  # a hidden case's line is not shown
    for number, case in enumerate(local["cases"], start=1):
        test = results["tests"][number - 1]
        assert test["name"].startswith(case["id"] + ":" if case["visibility"] == "visible" else "hidden case ")
        if case["verdict"] != "passed" and case["visibility"] == "visible":
            assert f"({case['location']})" in test["output"]
    no_grader_paths(text, tmp_path)


@pytest.mark.slow
def test_prairielearn_root_shows_the_same_locations(local, expected, tmp_path):
    """The PrairieLearn grader in a /grade-shaped root (spec: tests/spec.yaml): messages say score_matrix.yaml:N."""
    from attnscore.export.prairielearn_grader import ROOT_VARIABLE

    out = tmp_path / "export"
    assert CliRunner().invoke(main, ["export", "prairielearn", "--spec", str(SPEC), "-o", str(out)]).exit_code == 0
    root = tmp_path / "grade"
    for folder in ("student", "data", "serverFilesCourse", "tests"):
        (root / folder).mkdir(parents=True)
    for path in (out / "question" / "tests").iterdir():
        (root / "tests" / path.name).write_bytes(path.read_bytes())
    (root / "student" / "solution.py").write_bytes(WRONG)
    done = subprocess.run(
        [sys.executable, str(out / "image" / "grade.py")],
        env={**os.environ, ROOT_VARIABLE: str(root)},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    text = (root / "results" / "results.json").read_text(encoding="utf-8")
    results = json.loads(text)
    assert results["gradable"] is True
    messages = {t["name"]: t["message"] for t in results["tests"]}
    for case in local["cases"]:
        if case["verdict"] != "passed" and case["visibility"] == "visible":
            name = f"{case['kind']} {case['id'].split(':', 1)[1]}"
            assert messages[name] == f"{case['message']}" or case["message"] in messages[name]
    failing = {c["location"] for c in local["cases"] if c["verdict"] != "passed" and c["visibility"] == "visible"}
    assert failing <= locations(text) <= set(expected.values()) - HIDDEN  # a hidden case's line is not shown
    no_grader_paths(text, tmp_path)


def _class(tmp_path: Path) -> Path:
    klass = tmp_path / "class"
    (klass / "bob").mkdir(parents=True)
    (klass / "ada.py").write_bytes(WRONG)
    (klass / "bob" / "solution.py").write_bytes(WRONG)
    return klass


@pytest.fixture(scope="module")
def local_text(tmp_path_factory) -> str:
    """``attnscore grade solution.py`` (text for people) for the same submission."""
    folder = tmp_path_factory.mktemp("text")
    (folder / "solution.py").write_bytes(WRONG)
    result = CliRunner().invoke(
        main, ["grade", str(folder / "solution.py"), "--spec", str(SPEC), "--shrink-steps", "0"]
    )
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[0].startswith("solution.py  score_matrix v1")
    no_grader_paths(result.stdout, folder)
    return result.stdout


def _check_feedback(out: Path, local_text: str, expected: dict[str, str], tmp_path: Path) -> None:
    assert len(locations(local_text)) >= 5 and locations(local_text) <= set(expected.values())
    for student in ("ada.py", "bob"):
        text = (out / "feedback" / f"{student}.txt").read_text(encoding="utf-8")
        assert text.splitlines()[0].startswith(f"{student}  score_matrix v1")
        assert locations(text) == locations(local_text) - HIDDEN  # students' feedback: no hidden case's line
        no_grader_paths(text, tmp_path)
    no_grader_paths((out / "report.html").read_text(encoding="utf-8"), tmp_path)
    no_grader_paths((out / "grades.csv").read_text(encoding="utf-8"), tmp_path)


def test_class_run_feedback_names_the_student_by_their_path_in_the_class(local_text, expected, tmp_path):
    """Class run: feedback files start with ada.py or bob (no absolute path) and say score_matrix.yaml:N."""
    klass = _class(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["grade", str(klass), "--spec", str(SPEC), "--out", str(out), "--shrink-steps", "0"]
    )
    assert result.exit_code == 1, result.output
    _check_feedback(out, local_text, expected, tmp_path)


@pytest.mark.slow
def test_class_run_on_a_dask_cluster_reads_the_same(local_text, expected, tmp_path):
    """On a dask worker (the spec a temporary copy): feedback names score_matrix.yaml:N and the class path."""
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (attnscore[dask])")
    klass = _class(tmp_path)
    out = tmp_path / "out"
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", dashboard_address=None, scheduler_port=0
    ) as cluster:
        run = grade_class(
            find_submissions([str(klass)]),
            load_spec(SPEC),
            out,
            scheduler=cluster.scheduler_address,
            shrink_steps=0,
            limits=Limits(call_timeout_s=30),
        )
    assert [name for name, _ in run.rows] == ["ada.py", "bob"]
    assert [r.submission for _, r in run.rows] == ["ada.py", "bob"]
    assert {r.spec_path for _, r in run.rows} == {"score_matrix.yaml"}
    _check_feedback(out, local_text, expected, tmp_path)


@pytest.mark.parametrize(
    "path, name",
    [
        pytest.param("/autograder/submission", "submission", id="gradescope folder"),
        pytest.param("/grade/student/", "student", id="prairielearn folder"),
        pytest.param("/srv/class/ada.py", "ada.py", id="class member file"),
        pytest.param("hw3.zip", "hw3.zip", id="relative zip"),
    ],
)
def test_a_submission_is_named_by_its_own_name(path, name):
    """Submission.name is the file or folder's own name, never the folder it lies in."""
    assert Submission(Path(path), (), None).name == name


def test_a_student_copy_keeps_its_own_file_name(tmp_path):
    """A student copy's lines are its own: its locations name its file (student.yaml), a full spec's its id."""
    copy = tmp_path / "student.yaml"
    assert CliRunner().invoke(main, ["export", "student-spec", "--spec", str(SPEC), "-o", str(copy)]).exit_code == 0
    assert load_spec(copy).location(12) == "student.yaml:12"
    renamed = tmp_path / "spec.yaml"
    renamed.write_bytes(SPEC.read_bytes())
    assert load_spec(renamed).location(35) == "score_matrix.yaml:35"


@pytest.mark.parametrize(
    "text, shown",
    [
        pytest.param("/a/submission: expected a .py file", "expected a .py file", id="prefix"),
        pytest.param("/a/submission/hw3/x.py: too large", "hw3/x.py: too large", id="inside"),
        pytest.param("cannot read /a/submission", "cannot read your submission", id="mention"),
    ],
)
def test_without_grader_path(text, shown):
    """The submission folder is taken out of a message, whatever its position."""
    assert without_grader_path(text, "/a/submission") == shown


def test_gradescope_failure_results_drop_the_submission_folder(tmp_path):
    """Nothing gradable: the message says why without the grader's folder."""
    stderr = f"Error: {tmp_path}/submission: expected a .py or .ipynb file directly in this folder, found none\n"
    data = failure_results(2, stderr, tmp_path / "submission")
    assert data["output"] == (
        "Your submission could not be graded: expected a .py or .ipynb file directly in this folder, found none"
    )


def test_a_result_stored_with_a_grader_path_is_shown_by_the_students_name(tmp_path):
    """A gradebook row written by an older attnscore (the submission's absolute path): the rerun grades
    nothing and its feedback file, CSV and report name the student as in the class folder."""
    import sqlite3

    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "ada.py").write_bytes(WRONG)
    out = tmp_path / "out"
    args = ["grade", str(klass), "--spec", str(SPEC), "--out", str(out), "--shrink-steps", "0"]
    assert CliRunner().invoke(main, args).exit_code == 1
    db = sqlite3.connect(out / "gradebook.sqlite")
    (stored,) = db.execute("SELECT result FROM grades WHERE student = 'ada.py'").fetchone()
    record = json.loads(stored)
    record["submission"] = str(klass / "ada.py")
    db.execute("UPDATE grades SET result = ? WHERE student = 'ada.py'", (json.dumps(record),))
    db.commit()
    db.close()
    (out / "feedback" / "ada.py.txt").unlink()
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 1 and "class run: 0 graded, 1 unchanged" in again.output
    text = (out / "feedback" / "ada.py.txt").read_text(encoding="utf-8")
    assert text.startswith("ada.py  score_matrix v1")
    no_grader_paths(text, tmp_path)
