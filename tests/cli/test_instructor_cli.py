"""The command line with a spec's own reference function: verify proves the example, refuses a
reference outside the spec's folder unless told --allow-outside-reference, and fails with one clear
line for an instructor mistake no case catches."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from attnscore.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"


def test_verify_proves_the_example_spec() -> None:
    """The bundled example: the reference passes in every dtype, both mistakes caught and named,
    the second implementation agrees."""
    result = CliRunner().invoke(main, ["verify", str(EXAMPLES / "softmax_own_reference.yaml")])
    assert result.exit_code == 0, result.output
    assert "no_max_subtraction" in result.output and "softmax_over_first_dim" in result.output
    assert "all specs verified" in result.output


def test_an_outside_reference_needs_the_flag(tmp_path: Path) -> None:
    """Exit 2 with the located line without the flag; verified with it."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(EXAMPLES / "softmax_check.py", course / "softmax_check.py")
    text = (EXAMPLES / "softmax_own_reference.yaml").read_text(encoding="utf-8")
    text = text.replace("reference: softmax_reference.py", f"reference: {EXAMPLES / 'softmax_reference.py'}")
    spec = course / "softmax.yaml"
    spec.write_text(text, encoding="utf-8")
    refused = CliRunner().invoke(main, ["verify", "--no-mutations", str(spec)])
    assert refused.exit_code == 2
    assert "function.reference: expected a reference file inside the spec's folder" in refused.output
    allowed = CliRunner().invoke(main, ["verify", "--no-mutations", "--allow-outside-reference", str(spec)])
    assert allowed.exit_code == 0, allowed.output


def test_a_mistake_never_caught_is_one_line(tmp_path: Path) -> None:
    """An instructor mistake that equals the reference on every case: verify exits 1 and says so."""
    for name in ("softmax_own_reference.yaml", "softmax_check.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    reference = (EXAMPLES / "softmax_reference.py").read_text(encoding="utf-8")
    reference += (
        '\n\n@instructor.mistake("same_as_reference", feedback="nothing wrong")\n'
        "def same(x, dim):\n    return softmax(x, dim) * 1.0\n"
    )
    (tmp_path / "softmax_reference.py").write_text(reference, encoding="utf-8")
    result = CliRunner().invoke(main, ["verify", "--jobs", "1", str(tmp_path / "softmax_own_reference.yaml")])
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert (
        "softmax_own_reference: mistake same_as_reference (registered by the spec's reference file) is MISSED "
        "(float32, float64, float16, bfloat16): no case loses points for it" in text
    )
