"""An export whose spec names a reference file outside the spec's folder says what to do (move the
file into the spec's folder), never a flag export does not take."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.export.assignment_files import EXPORT_OUTSIDE_HINT, load_graded
from attnscore.spec.located import SpecError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"


def _outside(tmp_path: Path) -> Path:
    """The example spec in course/specs/ with its reference in course/refs/ (named ../refs/...)."""
    specs, refs = tmp_path / "course" / "specs", tmp_path / "course" / "refs"
    specs.mkdir(parents=True)
    refs.mkdir()
    shutil.copy(EXAMPLES / "softmax_check.py", specs / "softmax_check.py")
    shutil.copy(EXAMPLES / "softmax_reference.py", refs / "softmax_reference.py")
    text = (EXAMPLES / "softmax_own_reference.yaml").read_text(encoding="utf-8")
    assert "  reference: softmax_reference.py\n" in text
    spec = specs / "softmax_own_reference.yaml"
    spec.write_text(text.replace("  reference: softmax_reference.py\n", "  reference: ../refs/softmax_reference.py\n"))
    return spec


@pytest.mark.parametrize(
    "args",
    [["gradescope", "-o", "bundle.zip"], ["prairielearn", "-o", "pl"]],
    ids=["gradescope", "prairielearn"],
)
def test_export_says_to_move_the_reference(tmp_path: Path, args: list[str]) -> None:
    """Exit 2, the located problem ends with the export's hint; nothing is written."""
    spec = _outside(tmp_path)
    out = tmp_path / args[-1]
    result = CliRunner().invoke(main, ["export", args[0], "--spec", str(spec), "-o", str(out)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"outside it ({EXPORT_OUTSIDE_HINT})" in text, text
    assert "trust it with --allow-outside-reference" not in text
    assert not out.exists()


def test_load_graded_rewrites_only_the_hint(tmp_path: Path) -> None:
    """The problem keeps its location and its expected/found; only the hint is the export's."""
    spec = _outside(tmp_path)
    with pytest.raises(SpecError) as info:
        load_graded(spec)
    (problem,) = info.value.problems
    assert problem.field == "function.reference"
    assert problem.message.startswith("expected a reference file inside the spec's folder ")
    assert problem.message.endswith(
        "outside it (an exported grader loads only the files the bundle carries, under the spec's folder: move the "
        "reference into the spec's folder (or below it); export takes no --allow-outside-reference)"
    )
