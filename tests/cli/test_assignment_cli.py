"""Tests for the attnscore command line with an assignment file where a spec goes: grade, check, verify."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.spec.bundled import bundled_spec_ids

ASSIGNMENT = """\
format: attnscore-assignment/1
id: a1
title: Attention basics
questions:
  - {id: scores, spec: score_matrix, points: 10}
  - {id: weights, spec: attention_weights, weight: 2}
  - {id: sdpa, spec: sdpa, visibility: hidden}
"""

CORRECT = """\
import torch


def score_matrix(Q, K):
    return Q @ K.transpose(-2, -1)


def attention_weights(S, mask):
    weights = torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask, weights, torch.zeros((), dtype=S.dtype, device=S.device))


def scaled_dot_product_attention(query, key, value, attn_mask=None, scale=None, enable_gqa=False):
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, scale=scale, enable_gqa=enable_gqa
    )
"""

MISSING = CORRECT.replace("def attention_weights(S, mask):", "def attention_weight(S, mask):")
MISSING_MESSAGE = (
    "your file has no function named 'attention_weights'; it defines: attention_weight, "
    "scaled_dot_product_attention, score_matrix"
)


@pytest.fixture
def course(tmp_path):
    (tmp_path / "a1.yaml").write_text(ASSIGNMENT, encoding="utf-8")
    subs = tmp_path / "class"
    subs.mkdir()
    (subs / "correct.py").write_text(CORRECT, encoding="utf-8")
    (subs / "missing.py").write_text(MISSING, encoding="utf-8")
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.slow
def test_grade_an_assignment_text_and_json(course):
    """grade --spec ASSIGNMENT: a correct file 72/72 and exit 0; one missing a function 26/72 and exit 1,
    in text and in JSON."""
    spec = str(course / "a1.yaml")
    right = run("grade", str(course / "class" / "correct.py"), "--spec", spec)
    assert right.exit_code == 0, right.output
    assert "Score: 72/72" in right.output
    wrong = run("grade", str(course / "class" / "missing.py"), "--spec", spec, "--format", "json")
    assert wrong.exit_code == 1, wrong.output
    data = json.loads(wrong.stdout)
    assert (data["score"], data["max_score"]) == (26, 72)
    weights = [c for c in data["cases"] if c["id"] == "example:equal_scores"]
    assert weights[0]["verdict"] == "function_missing" and weights[0]["message"].startswith(MISSING_MESSAGE)


@pytest.mark.slow
def test_class_run_of_an_assignment(course):
    """grade CLASS --spec ASSIGNMENT --out DIR: a gradebook class run with the exact totals per student."""
    out = course / "out"
    result = run("grade", str(course / "class"), "--spec", str(course / "a1.yaml"), "--out", str(out), "--jobs", "2")
    assert result.exit_code == 1, result.output
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as f:
        rows = {row["student"]: (row["score"], row["max"]) for row in csv.DictReader(f)}
    assert rows == {"correct.py": ("72", "72"), "missing.py": ("26", "72")}
    again = run("grade", str(course / "class"), "--spec", str(course / "a1.yaml"), "--out", str(out))
    assert again.exit_code == 1 and "0 graded, 2 unchanged" in again.output


def test_check_runs_only_the_visible_questions(course):
    """check --spec ASSIGNMENT: each visible question's visible cases, rescaled; the hidden question is
    skipped and said so; a missing function costs only its question (exit 1)."""
    result = run("check", str(course / "class" / "missing.py"), "--spec", str(course / "a1.yaml"))
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert "scores  9.2308/9.2308" in lines
    assert f"weights  0/46  {MISSING_MESSAGE}" in lines
    assert "Total on the visible cases: 9.2308/55.2308" in lines
    assert "Hidden question not run here: sdpa (the grader runs every case of them when you submit)." in lines
    as_json = run("check", str(course / "class" / "correct.py"), "--spec", str(course / "a1.yaml"), "--format", "json")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert data["hidden_questions_not_run"] == ["sdpa"] and data["hidden_cases_not_run"] == 1
    assert data["score"] == data["max_score"] == 55.2308


def test_verify_an_assignment_verifies_each_question_spec(tmp_path):
    """verify ASSIGNMENT: every question's spec, each once (two questions share score_matrix)."""
    (tmp_path / "a2.yaml").write_text(
        "format: attnscore-assignment/1\nid: a2\ntitle: T\nquestions:\n"
        "  - {id: one, spec: dot_product_scores}\n  - {id: two, spec: score_matrix}\n"
        "  - {id: three, spec: score_matrix, function: scores_again}\n",
        encoding="utf-8",
    )
    result = run("verify", str(tmp_path / "a2.yaml"), "--no-mutations", "--jobs", "1")
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith("all specs verified")
    alone = run("verify", "dot_product_scores", "score_matrix", "--no-mutations", "--jobs", "1")
    assert result.output == alone.output  # the same table: score_matrix verified once


BAD = """\
format: attnscore-assignment/1
id: a1
title: Attention basics
questions:
  - {id: scores, spec: score_matrix, points: 10, weight: 2}
  - {id: scores, spec: score_matrx}
"""


@pytest.mark.parametrize("command", ["grade", "check", "verify"])
def test_a_bad_assignment_exits_2_with_located_lines(tmp_path, command):
    """Every command: exit 2, one located line per problem, no traceback."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD, encoding="utf-8")
    sub = tmp_path / "s.py"
    sub.write_text(CORRECT, encoding="utf-8")
    args = [command, str(bad)] if command == "verify" else [command, str(sub), "--spec", str(bad)]
    result = run(*args)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"{bad}:5:50: questions[0].weight: expected points or weight, not both, found points: 10 and weight: 2 "
        "(points sets the question's total, weight multiplies the spec's own points)",
        f"{bad}:6:10: questions[1].id: expected a unique question id, found 'scores' again (first at questions[0])",
        f"{bad}:6:24: questions[1].spec: expected a spec file (relative to {bad}) or a bundled spec id "
        f"({', '.join(bundled_spec_ids())}), found string 'score_matrx', which is neither",
        "Error: invalid assignment (3 problems)",
    ]
    assert "Traceback" not in result.output


def test_function_does_not_apply_to_an_assignment(course):
    """--function with an assignment is a usage error (each question names its function)."""
    for command in ("grade", "check"):
        result = run(
            command, str(course / "class" / "correct.py"), "--spec", str(course / "a1.yaml"), "--function", "x"
        )
        assert result.exit_code == 2, result.output
        assert "--function does not apply to an assignment: each question names its function" in result.output


def test_schema_prints_the_assignment_schema():
    """attnscore schema --assignment prints assignment-v1.schema.json; without it, the spec schema."""
    from attnscore.spec.schema import assignment_schema, spec_schema

    assert json.loads(run("schema", "--assignment").output) == assignment_schema()
    assert json.loads(run("schema").output) == spec_schema()
