"""Tests for assignment files (attnscore.spec.assignment): loading, rescaled points, located errors, the schema."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import jsonschema
import pytest

from attnscore.spec.assignment import (
    ASSIGNMENT_FORMAT,
    assignment_schema,
    graded_points,
    is_assignment_file,
    load_assignment,
)
from attnscore.spec.bundled import bundled_spec_ids
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

ROOT = Path(__file__).resolve().parents[2]

# three cases of one point each: two worked examples and a property
THREE_POINTS = """\
format: attnscore-spec/1
id: three_points
version: 1
title: scores of one query
function:
  name: scores
  contract: scores
  parameters:
    - {name: q, shape: [d_k]}
    - {name: keys, shape: [n_k, d_k]}
  returns: {shape: [n_k]}
worked_examples:
  - id: aligned
    inputs: {q: [1, 0], keys: [[1, 0], [0, 1]]}
    expected: [1, 0]
    explanation: aligned then perpendicular
    points: 1
  - id: opposed
    inputs: {q: [0, 1], keys: [[0, -1]]}
    expected: [-1]
    explanation: anti-aligned
    points: 1
properties:
  - name: equals_qk_entries
    points: 1
    statement: scores equal Q Kᵀ
"""

HEAD = "format: attnscore-assignment/1\nid: a1\ntitle: Attention basics\n"


def write(folder: Path, text: str, name: str = "a1.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(folder: Path, text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_assignment(write(folder, text))
    return [str(p) for p in info.value.problems]


def test_three_bundled_questions_load_with_their_points(tmp_path):
    """Points rescale the spec's points to the question's total, weight multiplies them, neither keeps them."""
    text = HEAD + (
        "version: 3\ndescription: |\n  three questions\nquestions:\n"
        "  - {id: scores, spec: score_matrix, points: 10}\n"
        "  - {id: weights, spec: attention_weights.yaml, weight: 2, function: softmax_weights, title: Softmax}\n"
        "  - {id: sdpa, spec: sdpa, visibility: hidden}\n"
    )
    a1 = load_assignment(write(tmp_path, text))
    assert (a1.id, a1.version, a1.title, a1.description) == ("a1", 3, "Attention basics", "three questions")
    scores, weights, sdpa = a1.questions
    assert [q.id for q in a1.questions] == ["scores", "weights", "sdpa"]
    assert (scores.function, scores.points, scores.scale, scores.visibility, scores.line) == (
        "score_matrix",
        Fraction(10),
        Fraction(10, 13),
        "visible",
        8,
    )
    assert scores.title == load_spec("score_matrix").title
    assert (weights.function, weights.title, weights.points, weights.scale) == (
        "softmax_weights",
        "Softmax",
        Fraction(46),
        Fraction(2),
    )
    assert (sdpa.function, sdpa.points, sdpa.scale, sdpa.visibility) == (
        "scaled_dot_product_attention",
        Fraction(16),
        Fraction(1),
        "hidden",
    )
    assert a1.max_points == Fraction(72)
    assert a1.question("sdpa") is sdpa
    with pytest.raises(KeyError, match="expected a question of a1 \\(scores, weights, sdpa\\), found 'nope'"):
        a1.question("nope")


def test_points_rescale_three_cases_to_exactly_ten(tmp_path):
    """Three one-point cases rescaled to 10 points: 10/3 each, a total of exactly 10."""
    write(tmp_path, THREE_POINTS, "three.yaml")
    a1 = load_assignment(write(tmp_path, HEAD + "questions:\n  - {id: q1, spec: three.yaml, points: 10}\n"))
    (q1,) = a1.questions
    assert q1.scale == Fraction(10, 3) and q1.points == Fraction(10)
    assert [e.points * q1.scale for e in q1.spec.worked_examples] == [Fraction(10, 3)] * 2
    assert sum([Fraction(10, 3)] * 3) == q1.points
    assert q1.spec.path == str(tmp_path / "three.yaml")


def test_a_decimal_points_value_is_exact(tmp_path):
    """points: 0.7 is 7/10 exactly (as the spec loader reads decimals), not the nearest float."""
    write(tmp_path, THREE_POINTS, "three.yaml")
    (q1,) = load_assignment(
        write(tmp_path, HEAD + "questions:\n  - {id: q1, spec: three.yaml, points: 0.7}\n")
    ).questions
    assert q1.points == Fraction(7, 10) and q1.scale == Fraction(7, 30)


def test_files_lists_the_assignment_and_each_spec_once(tmp_path):
    """files(): the assignment file first, then each spec file once (a spec used twice is listed once)."""
    write(tmp_path, THREE_POINTS, "three.yaml")
    text = HEAD + (
        "questions:\n  - {id: q1, spec: three.yaml}\n  - {id: q2, spec: three.yaml, function: other}\n"
        "  - {id: q3, spec: score_matrix}\n"
    )
    a1 = load_assignment(write(tmp_path, text))
    files = a1.files()
    assert files[:2] == (tmp_path / "a1.yaml", tmp_path / "three.yaml")
    assert len(files) == 3 and files[2].name == "score_matrix.yaml" and files[2].is_file()


def test_a_file_beside_the_assignment_wins_over_a_bundled_id(tmp_path):
    """spec: score_matrix.yaml names the file beside the assignment when there is one."""
    write(tmp_path, THREE_POINTS.replace("id: three_points", "id: mine"), "score_matrix.yaml")
    (q1,) = load_assignment(write(tmp_path, HEAD + "questions:\n  - {id: q1, spec: score_matrix.yaml}\n")).questions
    assert q1.spec.id == "mine"


def test_is_assignment_file(tmp_path):
    """Told apart by format: an assignment yes; a spec, a bundled id, a missing file, a folder, bad YAML no."""
    assignment = write(tmp_path, HEAD + "questions: []\n")
    spec = write(tmp_path, THREE_POINTS, "three.yaml")
    bad = write(tmp_path, "format: [\n", "bad.yaml")
    assert is_assignment_file(assignment) and is_assignment_file(str(assignment))
    assert not is_assignment_file(spec)
    assert not is_assignment_file("score_matrix")
    assert not is_assignment_file(tmp_path / "missing.yaml")
    assert not is_assignment_file(tmp_path)
    assert not is_assignment_file(bad)


@pytest.mark.parametrize(
    "body, expected",
    [
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix, points: 10, weight: 2}\n",
            [
                "a1.yaml:5:46: questions[0].weight: expected points or weight, not both, found points: 10 and "
                "weight: 2 (points sets the question's total, weight multiplies the spec's own points)"
            ],
            id="points and weight",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix}\n  - {id: q1, spec: sdpa}\n",
            ["a1.yaml:6:10: questions[1].id: expected a unique question id, found 'q1' again (first at questions[0])"],
            id="duplicate question id",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix, visibility: secret}\n",
            ["a1.yaml:5:46: questions[0].visibility: expected one of visible, hidden, found string 'secret'"],
            id="unknown visibility",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrx}\n",
            [
                f"a1.yaml:5:20: questions[0].spec: expected a spec file (relative to a1.yaml) or a bundled spec id "
                f"({', '.join(bundled_spec_ids())}), found string 'score_matrx', which is neither"
            ],
            id="unknown bundled id",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix, points: 010}\n",
            [
                "a1.yaml:5:42: questions[0].points: expected a decimal number, found '010', which YAML 1.1 reads as "
                "octal 8; drop the leading zero"
            ],
            id="octal points",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix, points: '10'}\n",
            ["a1.yaml:5:42: questions[0].points: expected number, found string '10'"],
            id="quoted points",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix, points: 0}\n",
            ["a1.yaml:5:42: questions[0].points: expected a number > 0, found 0"],
            id="zero points",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix, weight: .inf}\n",
            ["a1.yaml:5:42: questions[0].weight: expected a finite number, found inf"],
            id="infinite weight",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix, function: class}\n",
            [
                "a1.yaml:5:44: questions[0].function: expected a name a submission can define with def or class, "
                "found 'class' (a Python keyword or a special __name__)"
            ],
            id="keyword function",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix, function: 2fast}\n",
            [
                "a1.yaml:5:44: questions[0].function: expected text matching ^[A-Za-z_][A-Za-z0-9_]*$, "
                "found string '2fast'"
            ],
            id="function not an identifier",
        ),
        pytest.param(
            "questions:\n  - {id: Q1, spec: score_matrix, pts: 3}\n",
            [
                "a1.yaml:5:10: questions[0].id: expected text matching ^[a-z][a-z0-9_]*$, found string 'Q1'",
                "a1.yaml:5:34: questions[0].pts: expected only known fields, found unknown field 'pts'; allowed: "
                "function, id, points, spec, title, visibility, weight",
            ],
            id="bad id and unknown field",
        ),
        pytest.param(
            "questions: []\n",
            ["a1.yaml:4:12: questions: expected at least 1 item(s), found 0"],
            id="no questions",
        ),
        pytest.param(
            "questions:\n  - {id: q1, spec: score_matrix, visibility: no}\n",
            [
                "a1.yaml:5:46: questions[0].visibility: expected one of visible, hidden, found boolean False "
                "(YAML 1.1 reads yes/no/on/off as booleans: quote the text)"
            ],
            id="yaml 1.1 boolean",
        ),
    ],
)
def test_located_problems(tmp_path, body, expected):
    """Every problem is one located line: file:line:col: field: expected ..., found ...."""
    found = problems(tmp_path, HEAD + body)
    assert [p.replace(str(tmp_path) + "/", "") for p in found] == expected


def test_every_problem_is_reported_at_once(tmp_path):
    """Problems of several questions come together; a broken question does not hide the others'."""
    text = HEAD + (
        "questions:\n"
        "  - {id: q1, spec: score_matrix, points: 10, weight: 2}\n"
        "  - {id: q1, spec: nope}\n"
        "  - {id: q3, spec: sdpa, visibility: secret}\n"
    )
    found = problems(tmp_path, text)
    assert [p.split(": ")[1] for p in found] == [
        "questions[0].weight",
        "questions[1].id",
        "questions[1].spec",
        "questions[2].visibility",
    ]


def test_a_spec_that_fails_to_load_reports_its_own_located_problems(tmp_path):
    """The question's line says its spec does not load; the spec's own problems follow, located in the spec."""
    write(tmp_path, THREE_POINTS.replace("contract: scores", "contract: scorez"), "three.yaml")
    found = problems(tmp_path, HEAD + "questions:\n  - {id: q1, spec: three.yaml}\n")
    spec_file = str(tmp_path / "three.yaml")
    assert found[0] == (
        f"{tmp_path / 'a1.yaml'}:5:20: questions[0].spec: expected a spec that loads, found {spec_file} with 1 "
        "problem(s) (listed with its own lines)"
    )
    assert len(found) == 2 and found[1].startswith(f"{spec_file}:7:13: function.contract: expected one of ")
    assert found[1].endswith("found string 'scorez'")


def test_top_level_problems(tmp_path):
    """A spec given as an assignment, a missing title, a list for the whole file: located, and nothing else read."""
    spec = problems(tmp_path, THREE_POINTS)
    assert spec == [
        f"{tmp_path / 'a1.yaml'}:1:9: format: expected 'attnscore-assignment/1', found 'attnscore-spec/1' "
        "(a spec file: grade it with --spec directly)"
    ]
    untitled = problems(tmp_path, "format: attnscore-assignment/1\nid: a1\nquestions:\n  - {id: q1, spec: nope}\n")
    assert untitled == [f"{tmp_path / 'a1.yaml'}:1:1: (top level): expected field 'title', found it missing"]
    listed = problems(tmp_path, "- 1\n")
    assert listed == [
        f"{tmp_path / 'a1.yaml'}:1:1: (top level): expected a mapping of assignment fields, found list [1]"
    ]
    yaml_error = problems(tmp_path, HEAD + "questions: [\n")
    assert len(yaml_error) == 1 and ": (yaml): expected valid YAML, found a syntax error" in yaml_error[0]


def test_missing_file_is_located(tmp_path):
    """A missing assignment file: one located line."""
    with pytest.raises(SpecError) as info:
        load_assignment(tmp_path / "none.yaml")
    assert [str(p) for p in info.value.problems] == [
        f"{tmp_path / 'none.yaml'}:1:1: (file): expected a spec file, found no such file"
    ]


def test_graded_points_leave_out_cases_that_only_advise():
    """graded_points: the spec's points less advice-only corner cases; every bundled spec totals as built."""
    from attnscore.check.cases import build_cases

    for spec_id in ("score_matrix", "attention_weights", "sdpa", "sdpa_causal", "key_padding"):
        spec = load_spec(spec_id)
        built = sum((c.points for c in build_cases(spec, spec.dtypes[0])), Fraction(0))
        assert graded_points(spec) == built, spec_id


def test_published_schema_is_valid_and_on_disk_twice():
    """assignment-v1.schema.json is a valid 2020-12 schema, the same in specs/ and the package, and
    accepts a well-formed assignment."""
    schema = assignment_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for place in (ROOT / "specs", ROOT / "attnscore" / "bundled_specs"):
        assert json.loads((place / "assignment-v1.schema.json").read_text(encoding="utf-8")) == schema
    good = {"format": ASSIGNMENT_FORMAT, "id": "a1", "title": "A1", "questions": [{"id": "q", "spec": "sdpa"}]}
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(good)) == []
    assert schema["$defs"]["question"]["properties"]["visibility"]["enum"] == ["visible", "hidden"]
