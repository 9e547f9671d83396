"""The self-check's time budget: the grader's budget on the visible cases, in wall time in process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from attnscore.check.runner import budget_spent_text
from attnscore.selfcheck import check_function, check_path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "dot_product_scores.yaml"


def _hangs(q, keys):
    time.sleep(3600)


@pytest.mark.slow
def test_a_hanging_function_stops_at_the_budget():
    """Budget = the spec's per-call limit (3 s): the first case times out, the other visible cases are not run."""
    outcome = check_function(_hangs, SPEC, time_budget=3.0)
    verdicts = {c.id: c.verdict.value for c in outcome.result.cases}
    assert verdicts == {
        "example:aligned_perpendicular_partial": "timeout",
        "example:anti_aligned": "budget_spent",
        "property:perpendicular_keys_score_zero": "budget_spent",
        "property:equals_qk_entries": "budget_spent",
        "property:scores_not_normalised": "budget_spent",
        "property:non_contiguous_inputs": "budget_spent",
    }
    unrun = [c for c in outcome.result.cases if c.verdict.value == "budget_spent"]
    assert all(c.message.splitlines()[-1] == budget_spent_text(3.0) for c in unrun)


def test_a_correct_function_passes_under_the_default_budget():
    """The default budget (the grader's) leaves a correct function's visible cases alone."""
    outcome = check_function(lambda q, keys: keys @ q, SPEC)
    assert outcome.passed and outcome.result.score == 9


@pytest.mark.parametrize("call", [check_function, check_path])
def test_a_budget_shorter_than_one_call_is_refused(call):
    """A budget below the spec's per-call limit is one ValueError naming the option."""
    right = ROOT / "examples" / "submissions" / "scores" / "correct_matmul.py"
    target = (lambda q, keys: keys @ q) if call is check_function else right
    with pytest.raises(ValueError) as caught:
        call(target, SPEC, time_budget=1.0)
    assert str(caught.value) == (
        "--time-budget: expected at least the per-call limit of 3 s (the spec's timeout_s), found 1"
    )
