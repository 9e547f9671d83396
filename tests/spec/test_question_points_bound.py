"""A question's points, its weight and its total are at most 10^6: `points: 1e308` (a 309-digit
total) is a located error, as is a weight that takes the question's total past the bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.spec.assignment import MAX_QUESTION_POINTS, graded_points, load_assignment
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

HEAD = "format: attnscore-assignment/1\nid: a1\ntitle: A1\nquestions:\n"


def _problems(tmp_path: Path, question: str) -> list[str]:
    path = tmp_path / "a1.yaml"
    path.write_text(HEAD + question, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_assignment(path)
    return [str(p).removeprefix(f"{path}:") for p in info.value.problems]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        pytest.param(
            "  - {id: q, spec: score_matrix, points: 1e308}\n",
            "5:41: questions[0].points: expected a number <= 1000000, found 1e+308",
            id="points 1e308",
        ),
        pytest.param(
            "  - {id: q, spec: score_matrix, points: 1000001}\n",
            "5:41: questions[0].points: expected a number <= 1000000, found 1000001",
            id="points one over",
        ),
        pytest.param(
            "  - {id: q, spec: score_matrix, weight: 2000000}\n",
            "5:41: questions[0].weight: expected a number <= 1000000, found 2000000",
            id="weight over",
        ),
    ],
)
def test_points_and_weight_over_the_bound_are_located(tmp_path: Path, question: str, expected: str) -> None:
    """The schema's bound, at the field."""
    assert _problems(tmp_path, question) == [expected]


def test_a_weight_that_takes_the_total_past_the_bound(tmp_path: Path) -> None:
    """weight 1e6 on a spec of more than one point: the total is over, said with the numbers."""
    own = graded_points(load_spec("score_matrix"))
    assert own > 1
    assert _problems(tmp_path, "  - {id: q, spec: score_matrix, weight: 1000000}\n") == [
        "5:41: questions[0].weight: expected a question total of at most 1000000 points, found weight 1000000 "
        f"times the {own} points of score_matrix: {float(own * 1000000):.6g} points (give points: instead)"
    ]


def test_the_bound_itself_loads(tmp_path: Path) -> None:
    """points: 1000000 is allowed, exactly."""
    path = tmp_path / "a1.yaml"
    path.write_text(HEAD + "  - {id: q, spec: score_matrix, points: 1000000}\n", encoding="utf-8")
    assert load_assignment(path).questions[0].points == MAX_QUESTION_POINTS
