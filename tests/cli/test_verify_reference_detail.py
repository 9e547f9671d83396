"""`attnscore verify` says, for each case the reference fails, which entry, what value and what was
allowed (the failure's own text), after the line naming the cases."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from attnscore.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"


def test_a_tolerance_too_tight_for_the_reference_is_shown_entry_by_entry(tmp_path: Path) -> None:
    """rtol=1e-9 in float16: the line for property:matches_reference names the entry, values and allowance."""
    for name in ("softmax_own_reference.yaml", "softmax_reference.py", "softmax_check.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    spec = tmp_path / "softmax_own_reference.yaml"
    text = spec.read_text(encoding="utf-8")
    assert "tolerance: {mode: close}\n" in text
    spec.write_text(
        text.replace("tolerance: {mode: close}\n", "tolerance: {mode: close, rtol: 1.0e-9, atol: 1.0e-12}\n")
    )
    result = CliRunner().invoke(main, ["verify", "--no-mutations", "--jobs", "1", str(spec)])
    assert result.exit_code == 1, result.output
    unwrapped = re.sub(r"\n(?! )", "", result.output)  # the console wraps a problem's line; each starts indented
    lines = [line.strip() for line in unwrapped.splitlines()]
    head = [line for line in lines if line.startswith("softmax_own_reference (float16): the reference fails ")]
    assert len(head) == 1 and head[0].endswith("check the expected values and the tolerance of those cases")
    (detail,) = [
        line for line in lines if line.startswith("softmax_own_reference (float16) property:matches_reference: ")
    ]
    assert " entries of out are wrong (close: rtol=1e-09, atol=1e-12 (float16)): out[" in detail, detail
    assert ", expected " in detail and " > allowed " in detail, detail
    assert detail.endswith(" of 15)") and "(example " in detail, detail
