"""Grading against a spec's own reference function in the sandbox: a class in grader child
processes (fork), a child that loads the spec itself (spawn's path), the flag that trusts a reference
outside the spec's folder carried to it, and the reference never reachable from the worker."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest

from attnscore.check.cases import build_cases
from attnscore.grade import grading
from attnscore.grade.grading import grade_many
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec
from attnscore.submission.files import Submission

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"
LIMITS = Limits(call_timeout_s=3)

GOOD = """
import torch
def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
"""
NO_MAX = """
import torch
def softmax(x, dim):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
"""
PEEK = """
def softmax(x, dim):
    import softmax_reference  # the instructor's file: never on the worker's path
    return softmax_reference.softmax(x, dim)
"""


def submissions(folder: Path) -> list[Path]:
    folder.mkdir()
    paths = []
    for name, text in (("good", GOOD), ("no_max", NO_MAX), ("peek", PEEK)):
        path = folder / f"{name}.py"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        paths.append(path)
    return paths


def test_a_class_in_two_grader_processes(tmp_path: Path) -> None:
    """jobs=2 (forked grader processes): full marks, the instructor's mistake named, and a
    submission that imports the reference file finds no such module."""
    spec = load_spec(EXAMPLES / "softmax_own_reference.yaml")
    good, no_max, peek = grade_many(submissions(tmp_path / "class"), spec, limits=LIMITS, jobs=2)
    assert good.score == good.max_score == 13
    failed = [c for c in no_max.cases if not c.passed]
    assert [c.id for c in failed] == ["example:large_scores"]
    assert failed[0].failure.diagnosis["id"] == "no_max_subtraction"
    assert peek.score == 0
    assert "No module named 'softmax_reference'" in peek.cases[0].message


def test_a_child_that_loads_the_spec_is_told_to_trust_an_outside_reference(tmp_path: Path) -> None:
    """A grader child without the parent's cases (a spawned one) loads the spec itself, with the
    parent's allow_outside_reference."""
    course = tmp_path / "course"
    course.mkdir()
    text = (EXAMPLES / "softmax_own_reference.yaml").read_text(encoding="utf-8")
    text = text.replace("reference: softmax_reference.py", f"reference: {EXAMPLES / 'softmax_reference.py'}")
    text = text.replace("  reference_check: softmax_check.py:softmax_loops\n", "")
    (course / "spec.yaml").write_text(text, encoding="utf-8")
    spec = load_spec(course / "spec.yaml", allow_outside_reference=True)
    assert spec.outside_reference
    good = Submission.from_file(submissions(tmp_path / "class")[0])
    grading._CHILD_CASES.clear()
    options = {"function": None, "dtype": "float32", "seed": None, "limits": LIMITS, "shrink_steps": 0}
    result = grading._grade_in_child(spec.path, good, options={**options, "outside_reference": True})
    assert result.score == result.max_score
    grading._CHILD_CASES.clear()
    with pytest.raises(Exception, match="outside it"):
        grading._grade_in_child(spec.path, good, options={**options, "outside_reference": False})
    grading._CHILD_CASES.clear()


def test_a_text_keyword_reaches_the_sandboxed_function(tmp_path: Path) -> None:
    """function.keywords with text (reduction: "max") travel to the worker and the reference alike."""
    (tmp_path / "pool_reference.py").write_text(
        "def pool(x, reduction):\n    return x.amax(-1) if reduction == 'max' else x.mean(-1)\n", encoding="utf-8"
    )
    (tmp_path / "pool.yaml").write_text(
        textwrap.dedent(
            """
            format: attnscore-spec/1
            id: pool
            version: 1
            title: pooling by a named reduction
            function:
              name: pool
              reference: pool_reference.py
              keywords: {reduction: max}
              parameters:
                - {name: x, shape: ["...", n]}
              returns: {shape: ["..."]}
            worked_examples:
              - {id: one, inputs: {x: [1, 3]}, expected: 3, explanation: the max, points: 1}
            properties:
              - {name: matches_reference, points: 1, examples: 5, statement: matches}
            """
        ),
        encoding="utf-8",
    )
    spec = load_spec(tmp_path / "pool.yaml")
    right = tmp_path / "right.py"
    right.write_text("def pool(x, reduction):\n    return x.amax(-1) if reduction == 'max' else x.sum(-1)\n")
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def pool(x, reduction='mean'):\n    return x.mean(-1)\n")
    got_right, got_wrong = grade_many([right, wrong], spec, limits=LIMITS)
    assert got_right.score == got_right.max_score == 2
    assert got_wrong.score == 0


def test_a_dask_task_gets_the_reference_beside_the_spec(tmp_path: Path) -> None:
    """What a dask worker runs (cluster._grade_chunk): the spec and its reference file(s) are written
    to its private folder and graded against; an edited reference is another spec there."""
    from dataclasses import asdict

    from attnscore.grade import cluster
    from attnscore.report.record import result_from_record

    spec = load_spec(EXAMPLES / "softmax_own_reference.yaml")
    references = cluster._reference_files(spec)
    assert [name for name, _ in references] == ["softmax_reference.py", "softmax_check.py"]
    spec_file = (Path(spec.path).name, Path(spec.path).read_bytes())
    options = {"function": None, "dtype": "float32", "seed": None, "limits": asdict(LIMITS), "shrink_steps": 0}
    no_max = Submission.from_file(submissions(tmp_path / "class")[1])
    cases = pickle.dumps(build_cases(spec, "float32"))  # as the client sends them
    (record,) = cluster._grade_chunk(spec_file, [cluster._submission_data(no_max)], options, references, cases)
    result = result_from_record(record)
    assert result.score == 11
    assert next(c for c in result.cases if not c.passed).failure.diagnosis["id"] == "no_max_subtraction"


def test_a_class_in_spawned_grader_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where fork is missing, grader processes are fresh interpreters that load the spec (and import
    its reference file) themselves: the same results."""
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    spec = load_spec(EXAMPLES / "softmax_own_reference.yaml")
    good, no_max, _ = grade_many(submissions(tmp_path / "class"), spec, limits=LIMITS, jobs=2)
    assert good.score == good.max_score == 13
    assert no_max.score == 11
