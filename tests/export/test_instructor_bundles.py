"""Export bundles of a spec with its own reference function carry the reference file beside the spec,
so that the grader on the platform finds it; one outside the spec's folder cannot be bundled."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.export.assignment_files import spec_reference_layout
from attnscore.export.bundle import ExportError
from attnscore.spec.load import load_spec
from tests.export.test_gradescope import autograder, check_format

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"
SPEC = EXAMPLES / "softmax_own_reference.yaml"
NO_MAX = b"import torch\ndef softmax(x, dim):\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)\n"


def test_the_reference_files_go_beside_the_spec(tmp_path: Path) -> None:
    """The reference and the second implementation, by their paths relative to the spec."""
    spec = load_spec(SPEC)
    names = [name for name, _ in spec_reference_layout(spec)]
    assert names == ["softmax_reference.py", "softmax_check.py"]
    elsewhere = dataclasses.replace(spec, path=str(tmp_path / "spec.yaml"))
    with pytest.raises(ExportError, match="must lie in the spec's folder"):
        spec_reference_layout(elsewhere)


@pytest.mark.slow
def test_a_gradescope_bundle_grades_against_the_reference(tmp_path: Path) -> None:
    """The bundle holds both files, and run_autograder grades a wrong softmax with the instructor's
    mistake named."""
    bundle = tmp_path / "autograder.zip"
    result = CliRunner().invoke(main, ["export", "gradescope", "--spec", str(SPEC), "-o", str(bundle)])
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(bundle) as archive:
        assert {"spec.yaml", "softmax_reference.py", "softmax_check.py"} <= set(archive.namelist())
    results = autograder(tmp_path, bundle, {"softmax.py": NO_MAX})
    check_format(results)
    assert 0 < results["score"] < 13
    assert "no_max_subtraction" in json.dumps(results)


def test_a_prairielearn_question_holds_the_reference_beside_its_spec(tmp_path: Path) -> None:
    """question/tests/ holds spec.yaml and the reference files, where the grader loads the spec."""
    out = tmp_path / "pl"
    result = CliRunner().invoke(main, ["export", "prairielearn", "--spec", str(SPEC), "-o", str(out)])
    assert result.exit_code == 0, result.output
    tests = out / "question" / "tests"
    assert (tests / "softmax_reference.py").read_bytes() == (EXAMPLES / "softmax_reference.py").read_bytes()
    assert (tests / "softmax_check.py").is_file() and (tests / "spec.yaml").is_file()


def test_no_student_copy_of_a_spec_with_its_own_reference() -> None:
    """A student copy would carry the reference, the solution: refused with one line."""
    from attnscore.export.student_spec import student_spec_text

    with pytest.raises(ExportError, match=r"has its own reference function \(function.reference\)"):
        student_spec_text(SPEC)
