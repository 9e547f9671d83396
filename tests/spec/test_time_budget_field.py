"""The spec's ``time_budget_s``: validated and located like every field, its documented default."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError
from attnscore.spec.model import DEFAULT_BUDGET_CALLS, default_time_budget

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "specs" / "dot_product_scores.yaml").read_text(encoding="utf-8")
LINE = BASE.splitlines().index("timeout_s: 3") + 2  # the line after timeout_s, 1-based


def _spec(tmp_path: Path, budget: str | None, timeout: str = "3") -> Path:
    text = BASE.replace("timeout_s: 3\n", f"timeout_s: {timeout}\n" + (f"time_budget_s: {budget}\n" if budget else ""))
    path = tmp_path / "dps.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_default_is_ten_per_call_limits(tmp_path):
    """Without the field: no budget recorded, and the default (10 x timeout_s) used."""
    spec = load_spec(_spec(tmp_path, None))
    assert spec.time_budget_s is None and spec.budget_s == 30.0 == default_time_budget(3.0)
    assert DEFAULT_BUDGET_CALLS == 10
    assert load_spec(_spec(tmp_path, None, timeout="5")).budget_s == 50.0


@pytest.mark.parametrize(("value", "expected"), [("3", 3.0), ("7.5", 7.5), ("86400", 86400.0), ("1e3", 1000.0)])
def test_a_budget_of_at_least_one_call_is_read(tmp_path, value, expected):
    """A number from timeout_s up to a day is the budget, in seconds."""
    spec = load_spec(_spec(tmp_path, value))
    assert spec.time_budget_s == expected == spec.budget_s


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(
            "2", "expected a time budget of at least timeout_s (3 s), the limit of one call, found 2", id="short"
        ),
        pytest.param("0", "expected a number >= 0.1, found 0", id="zero"),
        pytest.param("-5", "expected a number >= 0.1, found -5", id="negative"),
        pytest.param("100000", "expected a number <= 86400, found 100000", id="over a day"),
        pytest.param("'30'", "expected number, found string '30'", id="quoted"),
        pytest.param("yes", "expected number, found boolean", id="YAML 1.1 boolean"),
        pytest.param(".nan", "expected a finite number, found nan", id="NaN"),
        pytest.param("[30]", "expected number, found list [30]", id="list"),
    ],
)
def test_a_bad_budget_is_one_located_problem(tmp_path, value, message):
    """Each bad value is one problem, located at the field, naming what was expected and found."""
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(tmp_path, value))
    [problem] = caught.value.problems
    assert (problem.line, problem.field) == (LINE, "time_budget_s")
    assert message in problem.message, problem.message
