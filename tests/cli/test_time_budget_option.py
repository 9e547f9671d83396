"""``--time-budget SECONDS`` on ``attnscore grade`` and ``attnscore check``: bad values are one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from attnscore.cli import main

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "dot_product_scores.yaml")
SUB = str(ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py")


def _spec_with_budget(tmp_path: Path, budget: str) -> str:
    text = Path(SPEC).read_text(encoding="utf-8").replace("timeout_s: 3\n", f"timeout_s: 3\ntime_budget_s: {budget}\n")
    path = tmp_path / "budgeted.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("command", ["grade", "check"])
@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(
            ["--time-budget", "0"],
            "Error: Invalid value for '--time-budget': 0.0 is not in the range 0.1<=x<=86400.",
            id="zero",
        ),
        pytest.param(
            ["--time-budget", "100000"],
            "Error: Invalid value for '--time-budget': 100000.0 is not in the range 0.1<=x<=86400.",
            id="over a day",
        ),
        pytest.param(
            ["--time-budget", "nan"],
            "Error: Invalid value for '--time-budget': expected a finite number of seconds, found nan",
            id="NaN",
        ),
        pytest.param(
            ["--time-budget", "soon"],
            "Error: Invalid value for '--time-budget': 'soon' is not a valid float range.",
            id="not a number",
        ),
        pytest.param(
            ["--time-budget", "2.5"],
            "Error: --time-budget: expected at least the per-call limit of 3 s (the spec's timeout_s), found 2.5",
            id="shorter than one call",
        ),
    ],
)
def test_a_bad_budget_is_a_usage_error(command, args, line):
    """Out of range, not finite, not a number, or shorter than the spec's per-call limit: exit 2, one line."""
    result = CliRunner().invoke(main, [command, SUB, "--spec", SPEC, *args])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == line
    assert "Traceback" not in result.output


def test_grade_budget_shorter_than_the_timeout_given_names_it():
    """With --timeout, the budget is checked against that limit, and the line says where it came from."""
    result = CliRunner().invoke(main, ["grade", SUB, "--spec", SPEC, "--timeout", "5", "--time-budget", "4"])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "Error: --time-budget: expected at least the per-call limit of 5 s (--timeout), found 4"
    )


def test_a_spec_budget_below_a_longer_timeout_names_the_spec_field(tmp_path):
    """The spec's own budget against a longer --timeout: the line names the spec's field."""
    spec = _spec_with_budget(tmp_path, "10")
    result = CliRunner().invoke(main, ["grade", SUB, "--spec", spec, "--timeout", "20"])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        f"Error: {spec}: time_budget_s: expected at least the per-call limit of 20 s (--timeout), found 10"
    )


@pytest.mark.parametrize("command", ["grade", "check"])
def test_a_spec_with_a_bad_budget_is_an_invalid_spec(tmp_path, command):
    """A spec whose time_budget_s is below its timeout_s: the located line, then the count (exit 2)."""
    spec = _spec_with_budget(tmp_path, "1")
    result = CliRunner().invoke(main, [command, SUB, "--spec", spec])
    assert result.exit_code == 2
    assert result.output.splitlines()[-2:] == [
        f"{spec}:26:16: time_budget_s: expected a time budget of at least timeout_s (3 s), the limit of one call, "
        "found 1",
        "Error: invalid spec (1 problem)",
    ]


def test_check_with_a_budget_runs_and_passes():
    """A budget the visible cases fit in: the self-check passes as without one (exit 0)."""
    result = CliRunner().invoke(main, ["check", SUB, "--spec", SPEC, "--time-budget", "3"])
    assert result.exit_code == 0, result.output
    assert "Score: 9/9" in result.output
