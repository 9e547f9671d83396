"""A file's `format:` decides what it is: an unknown version, the other kind, or an assignment named
as a question's spec (itself included) is said as exactly that, alone, never as a spec missing
`function` and `worked_examples`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.spec.assignment import load_assignment, load_spec_or_assignment
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

KNOWN = "(known: attnscore-spec/1 (a spec), attnscore-assignment/1 (an assignment))"
QUESTIONS = "id: a1\ntitle: A1\nquestions:\n  - {id: scores, spec: score_matrix, points: 10}\n"


def _problems(load, path: Path) -> list[str]:
    with pytest.raises(SpecError) as info:
        load(path)
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize(
    ("marker", "unknown"),
    [
        pytest.param("attnscore-assignment/2", "an unknown format version", id="assignment version 2"),
        pytest.param("attnscore-spec/2", "an unknown format version", id="spec version 2"),
        pytest.param("attnscore-asignment/1", "not an attnscore format", id="misspelt kind"),
    ],
)
def test_an_unknown_format_is_the_one_problem(tmp_path: Path, marker: str, unknown: str) -> None:
    """Loaded as a spec, as an assignment, or by what --spec takes: one problem on format, naming the known ones."""
    path = tmp_path / "a1.yaml"
    path.write_text(f"format: {marker}\n{QUESTIONS}", encoding="utf-8")
    line = f"{path}:1:9: format: expected a known format, found {marker!r}, {unknown} {KNOWN}"
    assert _problems(load_spec, path) == [line]
    assert _problems(load_assignment, path) == [line]
    assert _problems(load_spec_or_assignment, path) == [line]


def test_an_assignment_loaded_as_a_spec_says_so(tmp_path: Path) -> None:
    """load_spec on an assignment: the kind, not the spec fields it lacks."""
    path = tmp_path / "a1.yaml"
    path.write_text(f"format: attnscore-assignment/1\n{QUESTIONS}", encoding="utf-8")
    assert _problems(load_spec, path) == [
        f"{path}:1:9: format: expected 'attnscore-spec/1', found 'attnscore-assignment/1' "
        "(an assignment file, where a spec is expected)"
    ]


@pytest.mark.parametrize("target", ["a1.yaml", "other.yaml"], ids=["itself", "another assignment"])
def test_assignments_do_not_nest(tmp_path: Path, target: str) -> None:
    """A question's spec that is an assignment file: located at the question, the rest still read."""
    (tmp_path / "other.yaml").write_text(f"format: attnscore-assignment/1\n{QUESTIONS}", encoding="utf-8")
    path = tmp_path / "a1.yaml"
    path.write_text(
        f"format: attnscore-assignment/1\nid: a1\ntitle: A1\nquestions:\n  - {{id: nested, spec: {target}}}\n",
        encoding="utf-8",
    )
    itself = " (this assignment itself)" if target == "a1.yaml" else ""
    assert _problems(load_assignment, path) == [
        f"{path}:5:24: questions[0].spec: expected a spec file or a bundled spec id, found {tmp_path / target}, "
        f"an assignment file{itself}: assignments do not nest; name each question's spec here"
    ]


def test_grade_says_the_unknown_version_and_exits_2(tmp_path: Path) -> None:
    """`attnscore grade --spec` with a mistyped version: the format line, not missing spec fields."""
    path = tmp_path / "a1.yaml"
    path.write_text(f"format: attnscore-assignment/2\n{QUESTIONS}", encoding="utf-8")
    student = tmp_path / "alice.py"
    student.write_text("def score_matrix(Q, K):\n    return Q @ K.T\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["grade", str(student), "--spec", str(path)])
    assert result.exit_code == 2, result.output
    assert "an unknown format version" in result.output
    assert "function" not in result.output and "worked_examples" not in result.output
