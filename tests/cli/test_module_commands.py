"""``attnscore verify``, ``check`` and ``grade`` on a spec whose submission is an nn.Module
(examples/specs/bilinear_scores_module.yaml): exit codes and the lines that say what went wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "examples" / "specs" / "bilinear_scores_module.yaml")
SUBMISSIONS = ROOT / "examples" / "submissions" / "bilinear_scores_module"


def _run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_verify_proves_the_module_spec():
    """The reference passes every case in every dtype and each applicable catalogue mistake is caught."""
    result = _run("verify", SPEC, "--jobs", "1")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "bilinear_w_transposed │ ✓" in text and "caught │ 12/12" in text
    assert text.endswith("all specs verified")


def test_check_passes_a_correct_module_and_names_a_misnamed_parameter():
    """The self-check: correct.py exits 0; misnamed_parameter.py exits 1 with the verdict and its message."""
    good = _run("check", str(SUBMISSIONS / "correct.py"), "--spec", SPEC)
    assert good.exit_code == 0, good.output
    assert "Score: 14/14" in good.output
    bad = _run("check", str(SUBMISSIONS / "misnamed_parameter.py"), "--spec", SPEC)
    assert bad.exit_code == 1
    text = " ".join(bad.output.split())
    assert "example:w_picks_a_pair wrong parameters 0/2" in text
    assert "found W (2, 2): weight is missing; W is not one of the spec's" in text


@pytest.mark.slow
def test_grade_in_the_sandbox_as_json():
    """attnscore grade (sandboxed) on the lazy and the bias submissions: 14/14 and 0 with wrong_parameters."""
    result = _run(
        "grade",
        str(SUBMISSIONS / "lazy_weight.py"),
        str(SUBMISSIONS / "extra_bias.py"),
        "--spec",
        SPEC,
        "--format",
        "json",
        "--shrink-steps",
        "0",
    )
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    by_name = {Path(s["submission"]).name: s for s in data["submissions"]}
    assert by_name["lazy_weight.py"]["score"] == 14
    assert by_name["extra_bias.py"]["score"] == 0
    assert {c["verdict"] for c in by_name["extra_bias.py"]["cases"]} == {"wrong_parameters"}
