"""An instructor's reference that passes every worked example but fails on a drawn input (raises,
or returns a shape the spec's `returns` does not give) is the instructor's mistake: every command
says so in one line and exits 2, never an internal error, and a correct submission never pays for it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.maths.families.instructor import ReferenceFailed, instructor_contract, returns_shape

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"

# Every worked example of softmax_own_reference.yaml has at most 3 entries in its last dim.
FAILURES = {
    "raises": (
        "    if x.shape[-1] > 3:\n        raise ValueError('only n <= 3')\n",
        "raised ValueError: only n <= 3 (on inputs x (",
    ),
    "wrong_shape": (
        "    if x.shape[-1] > 3:\n        return (x - x.amax(dim=dim, keepdim=True))[..., :1]\n",
        "returned shape (",
    ),
}


def _course(tmp_path: Path, body: str) -> Path:
    """The example spec with a reference that fails where ``body`` says, before its own lines."""
    for name in ("softmax_own_reference.yaml", "softmax_check.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    text = (EXAMPLES / "softmax_reference.py").read_text(encoding="utf-8")
    head = '    """Softmax of x over dim, stable for large logits: exp(x - max) / sum(exp(x - max))."""\n'
    assert head in text
    (tmp_path / "softmax_reference.py").write_text(text.replace(head, head + body), encoding="utf-8")
    return tmp_path / "softmax_own_reference.yaml"


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("command", ["verify", "grade"])
def test_a_reference_failing_on_a_drawn_input_is_one_line_exit_2(tmp_path: Path, failure: str, command: str) -> None:
    body, said = FAILURES[failure]
    spec = _course(tmp_path, body)
    student = tmp_path / "student.py"
    student.write_text("import torch\n\ndef softmax(x, dim):\n    return torch.softmax(x, dim=dim)\n")
    args = ["verify", "--no-mutations", "--jobs", "1", str(spec)] if command == "verify" else ["grade", str(student)]
    result = CliRunner().invoke(main, [*args, "--spec", str(spec)] if command == "grade" else args)
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: the spec's reference failed on a drawn input"), last
    assert "the reference softmax (softmax_reference.py) " + said in last
    assert "internal error" not in result.output and "Traceback" not in result.output


def test_returns_shape_reads_the_symbols_and_broadcasts_leading_dims() -> None:
    c = instructor_contract("f", lambda x, y: x, (("x", ("...", "n")), ("y", ("...", "m", "n"))), ("...", "m", "n"))
    assert returns_shape(c, {"x": np.zeros((5, 2, 3)), "y": np.zeros((2, 4, 3))}) == (5, 2, 4, 3)
    assert returns_shape(c, {"x": np.zeros((3,)), "y": np.zeros((4, 3))}) == (4, 3)
    assert returns_shape(c, {"x": np.zeros((2, 3)), "y": np.zeros((3,))}) is None  # y below its rank
    assert returns_shape(c, {"x": np.zeros((2, 3)), "y": np.zeros((5, 4, 3))}) is None  # 2 and 5 do not broadcast


def test_a_wrong_shape_from_the_reference_is_reference_failed() -> None:
    c = instructor_contract("f", lambda x: x.sum(-1), (("x", ("...", "n")),), ("...", "n"))
    with pytest.raises(
        ReferenceFailed, match=r"returned shape \(2,\), where the spec's returns \[\.\.\., n\] gives \(2, 3\)"
    ):
        c.golden({"x": np.ones((2, 3))})
