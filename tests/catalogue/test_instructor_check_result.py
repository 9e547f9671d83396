"""An instructor's property check returns a failure message (str) or None: anything else (42, True)
is a clear error naming the property and what it returned, never a tolerance hint."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from attnscore.catalogue.instructor import OwnProperty, as_property
from attnscore.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"


@pytest.mark.parametrize(("returned", "shown"), [("42", "42 (int)"), ("True", "True (bool)")])
def test_verify_names_the_property_and_what_its_check_returned(tmp_path: Path, returned: str, shown: str) -> None:
    """shift_invariant's check ends `return 42`: one located line, exit 2."""
    for name in ("softmax_own_reference.yaml", "softmax_reference.py", "softmax_check.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    reference = tmp_path / "softmax_reference.py"
    text = reference.read_text(encoding="utf-8")
    last = 'only differences of scores matter"\n    return None\n'
    assert last in text
    reference.write_text(text.replace(last, f'only differences of scores matter"\n    return {returned}\n'))
    result = CliRunner().invoke(
        main, ["verify", "--no-mutations", "--jobs", "1", str(tmp_path / "softmax_own_reference.yaml")]
    )
    assert result.exit_code == 2, result.output
    assert (
        f"property shift_invariant: the check returned {shown} on the reference's own outputs; a check returns a "
        "failure message (str), or None when the output passes"
    ) in result.output
    assert "tolerance" not in result.output


def test_a_check_returning_a_number_on_a_graded_output_cannot_judge_it() -> None:
    """Replayed on a graded output, a non-message result is the property's, said as such."""
    own = OwnProperty(
        "rows_sum_to_one", "Each row sums to 1.", lambda inputs, call: 42 if call(inputs["x"]) is not None else None
    )
    ctx = SimpleNamespace(
        outputs=[SimpleNamespace(array=np.ones(2))],
        contract=SimpleNamespace(parameter_names=("x",)),
        example={"x": np.ones(2)},
    )
    assert as_property(own).check(ctx) == (
        "property rows_sum_to_one could not be judged: the check returned 42 (int); a check returns a failure "
        "message (str), or None when the output passes"
    )
    passing = OwnProperty("rows_sum_to_one", "Each row sums to 1.", lambda inputs, call: "")
    assert as_property(passing).check(ctx) is None
