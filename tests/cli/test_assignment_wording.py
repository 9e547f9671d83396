"""An invalid assignment ends with "invalid assignment (N problems)", not "invalid spec"; a YAML 1.1
boolean where a visibility is expected (`visibility: no`) gets the quoting hint, as `id: on` does."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main

HEAD = "format: attnscore-assignment/1\nid: a1\ntitle: A1\nquestions:\n"
HINT = "(YAML 1.1 reads yes/no/on/off as booleans: quote the text)"


def _run(tmp_path: Path, text: str, *args: str) -> tuple[int, list[str]]:
    path = tmp_path / "a1.yaml"
    path.write_text(text, encoding="utf-8")
    student = tmp_path / "alice.py"
    student.write_text("def score_matrix(Q, K):\n    return Q @ K.T\n", encoding="utf-8")
    command = [args[0], str(student), "--spec", str(path)] if args[0] in ("grade", "check") else [*args, str(path)]
    result = CliRunner().invoke(main, command)
    return result.exit_code, result.output.strip().splitlines()


@pytest.mark.parametrize("command", [("grade",), ("check",), ("verify", "--no-mutations", "--jobs", "1")])
def test_an_invalid_assignment_says_invalid_assignment(tmp_path: Path, command: tuple[str, ...]) -> None:
    """Two problems (visibility: no, an unknown spec): both located, then the assignment's count."""
    text = HEAD + "  - {id: q1, spec: score_matrix, visibility: no}\n  - {id: q2, spec: nope.yaml}\n"
    code, lines = _run(tmp_path, text, *command)
    assert code == 2, lines
    assert lines[-1] == "Error: invalid assignment (2 problems)"
    path = tmp_path / "a1.yaml"
    assert lines[-3] == (
        f"{path}:5:46: questions[0].visibility: expected one of visible, hidden, found boolean False {HINT}"
    )
    assert lines[-2].startswith(f"{path}:6:20: questions[1].spec: expected a spec file (relative to {path}) ")


def test_an_invalid_spec_still_says_invalid_spec(tmp_path: Path) -> None:
    """A spec file's count line is unchanged."""
    path = tmp_path / "s.yaml"
    path.write_text("format: attnscore-spec/1\nid: on\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["verify", "--no-mutations", str(path)])
    assert result.exit_code == 2
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: invalid spec (") and last.endswith(" problems)")
    assert f"found boolean True {HINT}" in result.output
