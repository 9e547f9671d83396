"""Exports of an assignment: the Gradescope zip and the PrairieLearn question carry the assignment
file, every question's spec and reference files in their relative layout, and grade the assignment
as those platforms run them; the student copy of an assignment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.export.assignment_files import (
    assignment_environment,
    assignment_layout,
    spec_reference_layout,
)
from attnscore.export.bundle import ExportError
from attnscore.export.gradescope import SPEC_PATH, build_gradescope_bundle
from attnscore.export.prairielearn import export_prairielearn
from attnscore.export.student_assignment import write_student_assignment
from attnscore.report.results import points_out
from attnscore.spec.assignment import load_assignment
from attnscore.spec.environment import Environment
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError
from tests.guards import HANG_GUARD_S
from tests.practice.prairielearn_format import QUESTION

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"

ASSIGNMENT = """\
format: attnscore-assignment/1
id: cs_a1
version: 3
title: Assignment 1, scores
description: Dot products, then a matrix of them.
questions:
  - {id: scores, spec: dot_product_scores.yaml, points: 10}
  - {id: matrix, spec: ../shared/score_matrix.yaml, visibility: hidden}
  - {id: scaled, spec: scaled_score_matrix, weight: 2}
"""


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """course/a1.yaml naming a spec beside it, one in ../shared/ and a bundled one by id; returns a1.yaml."""
    (tmp_path / "course").mkdir()
    (tmp_path / "shared").mkdir()
    shutil.copy(SPECS / "dot_product_scores.yaml", tmp_path / "course" / "dot_product_scores.yaml")
    shutil.copy(SPECS / "score_matrix.yaml", tmp_path / "shared" / "score_matrix.yaml")
    path = tmp_path / "course" / "a1.yaml"
    path.write_text(ASSIGNMENT)
    return path


def test_layout_keeps_relative_paths_and_leaves_bundled_specs_to_the_package(course):
    """assignment/course/a1.yaml, assignment/course/dot_product_scores.yaml, assignment/shared/...;
    the bundled scaled_score_matrix is found by id in the grader's own attnscore."""
    layout = assignment_layout(load_assignment(course))
    assert layout.entry == "assignment/course/a1.yaml"
    assert [name for name, _ in layout.files] == [
        "assignment/course/a1.yaml",
        "assignment/course/dot_product_scores.yaml",
        "assignment/shared/score_matrix.yaml",
    ]
    assert layout.files[2][1] == course.parent / ".." / "shared" / "score_matrix.yaml"


def test_layout_copies_reference_files_beside_their_spec(tmp_path):
    """Every file files() lists travels, reference files too (helper files of a spec), at its place."""
    (tmp_path / "a" / "refs").mkdir(parents=True)
    for name in ("a/a1.yaml", "a/softmax.yaml", "a/refs/softmax_reference.py"):
        (tmp_path / name).write_text("x")
    stub = SimpleNamespace(
        path=str(tmp_path / "a" / "a1.yaml"),
        files=lambda: (
            tmp_path / "a" / "a1.yaml",
            tmp_path / "a" / "softmax.yaml",
            tmp_path / "a/refs/softmax_reference.py",
        ),
    )
    layout = assignment_layout(stub)  # type: ignore[arg-type]
    assert layout.entry == "assignment/a1.yaml"
    assert [n for n, _ in layout.files] == [
        "assignment/a1.yaml",
        "assignment/softmax.yaml",
        "assignment/refs/softmax_reference.py",
    ]


def test_layout_refuses_a_file_that_went_missing(tmp_path):
    """A file the assignment needs but that is gone: one ExportError naming it."""
    (tmp_path / "a1.yaml").write_text("x")
    stub = SimpleNamespace(path=str(tmp_path / "a1.yaml"), files=lambda: (tmp_path / "a1.yaml", tmp_path / "gone.py"))
    with pytest.raises(
        ExportError, match=r"cannot copy .*gone\.py into the bundle: expected a file the assignment needs"
    ):
        assignment_layout(stub)  # type: ignore[arg-type]


def test_a_single_specs_reference_files_go_beside_spec_yaml(tmp_path):
    """A spec's reference file keeps its path relative to the spec (spec.yaml at the bundle's top)."""
    (tmp_path / "refs").mkdir()
    for name in ("softmax.yaml", "softmax_reference.py", "refs/check.py"):
        (tmp_path / name).write_text("x")
    stub = SimpleNamespace(
        path=str(tmp_path / "softmax.yaml"),
        reference_files=(str(tmp_path / "softmax_reference.py"), str(tmp_path / "refs" / "check.py")),
    )
    assert [n for n, _ in spec_reference_layout(stub)] == ["softmax_reference.py", "refs/check.py"]  # type: ignore[arg-type]
    assert [n for n, _ in spec_reference_layout(stub, "question/tests")] == [  # type: ignore[arg-type]
        "question/tests/softmax_reference.py",
        "question/tests/refs/check.py",
    ]
    assert spec_reference_layout(SimpleNamespace(path=str(tmp_path / "softmax.yaml"), reference_files=())) == ()  # type: ignore[arg-type]


def test_a_reference_file_above_the_spec_cannot_travel_with_it(tmp_path):
    """spec.yaml sits at the bundle's top: a reference in ../ is one ExportError saying what to do."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "ref.py").write_text("x")
    stub = SimpleNamespace(path=str(tmp_path / "specs" / "s.yaml"), reference_files=(str(tmp_path / "ref.py"),))
    with pytest.raises(
        ExportError, match=r"a spec's reference file must lie in the spec's folder .* or export an assignment"
    ):
        spec_reference_layout(stub)  # type: ignore[arg-type]


def test_environment_is_every_questions_together():
    """Packages once each in question order; torch_compile when any question allows it."""
    stub = SimpleNamespace(
        questions=[
            SimpleNamespace(spec=SimpleNamespace(environment=Environment(("einops", "jaxtyping")))),
            SimpleNamespace(spec=SimpleNamespace(environment=Environment())),
            SimpleNamespace(spec=SimpleNamespace(environment=Environment(("einops", "rich"), torch_compile=True))),
        ]
    )
    assert assignment_environment(stub) == Environment(("einops", "jaxtyping", "rich"), True)  # type: ignore[arg-type]


def test_gradescope_zip_of_an_assignment(course, tmp_path):
    """spec-path.txt names the assignment in the zip; its files are there byte for byte; no spec.yaml;
    the scripts grade what spec-path.txt names; the same assignment gives the same bytes twice."""
    out = tmp_path / "autograder.zip"
    result = CliRunner().invoke(main, ["export", "gradescope", "--spec", str(course), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "(setup.sh, run_autograder, assignment/ (3 files of the assignment), requirements.txt, python/)" in (
        result.output
    )
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        assert archive.read(SPEC_PATH) == b"assignment/course/a1.yaml\n"
        assert archive.read("assignment/course/a1.yaml") == course.read_bytes()
        assert archive.read("assignment/shared/score_matrix.yaml") == (SPECS / "score_matrix.yaml").read_bytes()
        run = archive.read("run_autograder").decode()
        setup = archive.read("setup.sh").decode()
        options = archive.read("grade-options.txt").decode().splitlines()
    assert names[:3] == ["setup.sh", "run_autograder", SPEC_PATH] and "spec.yaml" not in names
    assert 'spec="$source_dir/$(head -n 1 "$source_dir/spec-path.txt")"' in run and '--spec "$spec"' in run
    assert '--spec "$spec" > /dev/null' in setup
    assert options == ["--hidden-cases", "visible"]
    again = tmp_path / "again.zip"
    build_gradescope_bundle(course, again)
    assert again.read_bytes() == out.read_bytes()


def test_export_refuses_function_with_an_assignment(course, tmp_path):
    """--function is a single spec's: an assignment names each question's function (exit 2, one line)."""
    for argv in (
        ["export", "gradescope", "--spec", str(course), "-o", str(tmp_path / "a.zip"), "--function", "f"],
        ["export", "prairielearn", "--spec", str(course), "-o", str(tmp_path / "pl"), "--function", "f"],
    ):
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 2
        assert "Error: --function f: an assignment names each question's function itself" in result.output
    assert not (tmp_path / "a.zip").exists() and not (tmp_path / "pl" / "question").exists()


def test_export_of_an_invalid_assignment_builds_nothing(course, tmp_path):
    """A question naming a spec that is not there: the located problem, exit 2, no zip."""
    course.write_text(ASSIGNMENT.replace("../shared/score_matrix.yaml", "../shared/nowhere.yaml"))
    result = CliRunner().invoke(main, ["export", "gradescope", "--spec", str(course), "-o", str(tmp_path / "a.zip")])
    assert result.exit_code == 2
    assert "a1.yaml:8:" in result.output and "questions[1].spec: expected a spec file" in result.output
    assert not (tmp_path / "a.zip").exists()
    with pytest.raises(SpecError):
        build_gradescope_bundle(course, tmp_path / "b.zip")


def test_export_refuses_a_question_whose_spec_is_a_student_copy(course, tmp_path):
    """A question graded on a student copy would lose its hidden cases: refused, naming the question."""
    student = course.parent / "student.yaml"
    CliRunner().invoke(main, ["export", "student-spec", "--spec", str(SPECS / "score_matrix.yaml"), "-o", str(student)])
    course.write_text(ASSIGNMENT.replace("../shared/score_matrix.yaml", "student.yaml"))
    with pytest.raises(
        ExportError, match=r"student copy .*a Gradescope autograder \(question matrix\) needs the full spec"
    ):
        build_gradescope_bundle(course, tmp_path / "a.zip")
    with pytest.raises(ExportError, match=r"a PrairieLearn grader \(question matrix\)"):
        export_prairielearn(course, tmp_path / "pl")


def test_prairielearn_question_of_an_assignment(course, tmp_path):
    """One question: the page lists every function with its points; tests/ holds the assignment's
    files in their layout and options.json names the assignment."""
    out = tmp_path / "pl"
    result = CliRunner().invoke(main, ["export", "prairielearn", "--spec", str(course), "-o", str(out)])
    assert result.exit_code == 0, result.output
    info = json.loads((out / "question" / "info.json").read_text())
    jsonschema.validate(info, QUESTION)
    assert info["title"] == "Assignment 1, scores" and info["tags"] == ["attnscore", "cs_a1"]
    page = (out / "question" / "question.html").read_text()
    assert "<li><code>scores(q, keys)</code>: " in page and "(10 points)</li>" in page
    assert "<li><code>score_matrix(Q, K)</code>" in page and "<li><code>scaled_score_matrix(" in page
    assert '<pl-file-upload file-names="solution.py"></pl-file-upload>' in page and "{{" not in page
    tests = out / "question" / "tests"
    assert json.loads((tests / "options.json").read_text()) == {
        "spec": "assignment/course/a1.yaml",
        "entry": "solution.py",
    }
    assert (tests / "assignment" / "course" / "a1.yaml").read_bytes() == course.read_bytes()
    assert (tests / "assignment" / "shared" / "score_matrix.yaml").is_file()
    assert not (tests / "spec.yaml").exists()
    # the same folder exported again for one spec: no file of the assignment lingers
    export_prairielearn(SPECS / "score_matrix.yaml", out)
    assert not (tests / "assignment").exists() and (tests / "spec.yaml").is_file()


def test_student_copy_of_an_assignment(course, tmp_path):
    """Hidden questions left out, each other question's student spec beside the copy, weights kept
    where a number says them exactly, the copy loads and its specs hold only visible cases."""
    handout = tmp_path / "handout"
    handout.mkdir()
    result = CliRunner().invoke(main, ["export", "student-spec", "--spec", str(course), "-o", str(handout / "a1.yaml")])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        f"wrote {handout / 'a1.yaml'} and 2 student specs under {handout / 'a1_specs'}: the visible cases of "
        "scores, scaled; left out: matrix (a hidden question)"
    )
    text = (handout / "a1.yaml").read_text()
    assert "# Left out: matrix (a hidden question)." in text
    assert "# Points here are the specs' own; the grader scales scores by 10/11." in text
    data = yaml.safe_load(text)
    assert data["questions"] == [
        {"id": "scores", "title": load_spec(SPECS / "dot_product_scores.yaml").title,
         "spec": "a1_specs/scores.yaml", "function": "scores"},
        {"id": "scaled", "title": load_spec(SPECS / "scaled_score_matrix.yaml").title,
         "spec": "a1_specs/scaled.yaml", "function": "scaled_score_matrix", "weight": 2},
    ]  # fmt: skip
    copy = load_assignment(handout / "a1.yaml")
    assert [q.id for q in copy.questions] == ["scores", "scaled"] and (copy.id, copy.version) == ("cs_a1", 3)
    scores = copy.questions[0].spec
    assert scores.student_copy is not None and all(e.visibility == "visible" for e in scores.worked_examples)
    assert copy.questions[1].scale == 2


def test_student_copy_never_overwrites_the_full_assignment(course):
    """-o naming the full assignment file itself: refused, nothing written over it."""
    result = CliRunner().invoke(main, ["export", "student-spec", "--spec", str(course), "-o", str(course)])
    assert result.exit_code == 2
    assert f"Error: cannot write the student copy over {course}, a file of the full assignment" in result.output
    assert course.read_text() == ASSIGNMENT


def test_student_copy_of_only_hidden_questions_is_refused(course, tmp_path):
    """Every question hidden: nothing to hand out, one line saying why."""
    course.write_text(ASSIGNMENT.replace("points: 10}", "points: 10, visibility: hidden}").replace(
        "weight: 2}", "weight: 2, visibility: hidden}"))  # fmt: skip
    with pytest.raises(ExportError, match=r"no question of .*a1\.yaml can be handed out \(scores: a hidden question; "):
        write_student_assignment(course, tmp_path / "a1.yaml")


CORRECT = b"""import math


def scores(q, keys):
    return keys @ q


def score_matrix(Q, K):
    return Q @ K.transpose(-2, -1)


def scaled_score_matrix(Q, K):
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
"""
# scores applies softmax (a wrong value in every case), score_matrix is missing (costs only its question)
WRONG = b"""import math

import torch


def scores(q, keys):
    return torch.softmax(keys @ q, dim=-1)


def scaled_score_matrix(Q, K):
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
"""


def pl_grade(tmp_path: Path, exported: Path, files: dict[str, bytes]) -> dict:
    """Lay out /grade (the question's tests/ folder whole, as PrairieLearn copies it), run grade.py."""
    from tests.export.test_prairielearn import RESULTS

    root = tmp_path / "grade"
    (root / "student").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "data.json").write_text(json.dumps({"params": {}, "submitted_answers": {}}))
    shutil.copytree(exported / "question" / "tests", root / "tests")
    for name, content in files.items():
        (root / "student" / name).write_bytes(content)
    done = subprocess.run(
        [sys.executable, str(exported / "image" / "grade.py")],
        env={**os.environ, "ATTNSCORE_GRADE_ROOT": str(root)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(results, RESULTS)
    return results


@pytest.mark.slow
def test_gradescope_bundle_grades_an_assignment_end_to_end(course, tmp_path):
    """The real run_autograder on the unpacked zip: a correct file gets every question's points; a
    wrong one loses scores (softmax applied) and matrix (missing) only, each test named by question."""
    from tests.export.test_gradescope import autograder, check_format

    bundle = tmp_path / "autograder.zip"
    build_gradescope_bundle(course, bundle)
    assignment = load_assignment(course)
    points = {q.id: q.points for q in assignment.questions}
    right = autograder(tmp_path / "right", bundle, {"solution.py": CORRECT})
    check_format(right)
    assert right["score"] == points_out(assignment.max_points)
    assert {t["status"] for t in right["tests"]} == {"passed"}
    prefixes = [t["name"].split(": ")[0] for t in right["tests"]]
    assert prefixes == sorted(prefixes, key=["scores", "matrix", "scaled"].index)  # question order
    assert all(t["name"].startswith("matrix: hidden case ") for t in right["tests"] if t["name"].startswith("matrix"))
    wrong = autograder(tmp_path / "wrong", bundle, {"solution.py": WRONG})
    check_format(wrong)
    assert wrong["score"] == int(points["scaled"])  # scores 0 of 10, matrix 0 (missing), scaled in full
    lines = wrong["output"].splitlines()
    assert lines[1] == "scores: 0/10 points"
    assert lines[2].startswith(f"matrix: 0/{int(points['matrix'])} points (") and "score_matrix" in lines[2]
    assert lines[3] == f"scaled: {int(points['scaled'])}/{int(points['scaled'])} points"


@pytest.mark.slow
def test_prairielearn_grader_grades_an_assignment_end_to_end(course, tmp_path):
    """The image's entry point on /grade laid out as PrairieLearn does: full marks for the correct
    file; for the wrong one a partial score and a message with each question's points."""
    out = tmp_path / "pl"
    export_prairielearn(course, out)
    assignment = load_assignment(course)
    scaled = assignment.questions[2].points
    right = pl_grade(tmp_path / "right", out, {"solution.py": CORRECT})
    assert right["gradable"] is True and right["score"] == 1
    wrong = pl_grade(tmp_path / "wrong", out, {"solution.py": WRONG})
    assert wrong["gradable"] is True and wrong["score"] == pytest.approx(float(scaled / assignment.max_points))
    assert wrong["message"].splitlines()[1:] == [
        "scores: 0/10 points",
        wrong["message"].splitlines()[2],
        f"scaled: {int(scaled)}/{int(scaled)} points",
    ]
    assert wrong["message"].splitlines()[2].startswith("matrix: 0/")
    assert {t["name"].split(": ")[0] for t in wrong["tests"]} == {"scores", "matrix", "scaled"}


@pytest.mark.slow
def test_student_copy_self_checks_a_correct_file(course, tmp_path):
    """attnscore check on the student copy: both handed-out questions' visible cases pass (exit 0);
    the hidden question is not in the copy at all."""
    handout = tmp_path / "handout"
    handout.mkdir()
    write_student_assignment(course, handout / "a1.yaml")
    (tmp_path / "solution.py").write_bytes(CORRECT)
    result = CliRunner().invoke(main, ["check", str(tmp_path / "solution.py"), "--spec", str(handout / "a1.yaml")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "scores  9/9" in lines and "Total on the visible cases: 63/63" in lines
    assert not any(line.startswith("matrix") for line in lines) and "Hidden question" not in result.output


def test_page_shows_a_module_questions_constructor_and_forward():
    """A question grading an nn.Module shows Class(init args).forward(inputs), its weights left out."""
    from attnscore.export.prairielearn import _signature

    contract = SimpleNamespace(parameters=[("x", None), ("W_q", None), ("W_o", None)], options={})
    weights = (("W_q", "q.weight"), ("W_o", "o.weight"))
    module = SimpleNamespace(init=(("d_model", 1), ("num_heads", 2)), weights=weights, forward=())
    spec = SimpleNamespace(contract=contract, module=module)
    assert _signature("MHA", spec) == "MHA(d_model, num_heads).forward(x)"  # type: ignore[arg-type]
    assert _signature("mha", SimpleNamespace(contract=contract, module=None)) == "mha(x, W_q, W_o)"  # type: ignore[arg-type]


def test_page_shows_the_keywords_every_call_passes():
    """A spec's fixed keywords are on the page, by name after the tensors: a student who writes the
    signature shown is called as the grader calls it (CS336's softmax(in_features, dim=-1))."""
    from attnscore.export.prairielearn import _signature

    contract = SimpleNamespace(parameters=[("x", None)], options={"dim": -1, "causal": True})
    assert _signature("softmax", SimpleNamespace(contract=contract, module=None)) == "softmax(x, dim=-1, causal=True)"  # type: ignore[arg-type]
