"""The sandbox runner's time budget (``Limits.time_budget_s``): what a hanging submission costs, and
what the calls after the budget get. The slow tests start sandboxed workers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.outputs import CallFailure
from attnscore.check.runner import budget_cut_text, budget_spent_text
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits, SandboxRunner

ARGS = {"q": np.array([1.0, 0.0]), "keys": np.array([[1.0, 0.0], [0.0, 1.0]])}
HANGS = "def scores(q, keys):\n    while True:\n        pass\n"
SLACK_S = 0.25  # how far past a deadline the grader may notice it (it polls the worker's clock)


def _file(tmp_path: Path, source: str, name: str = "sub.py") -> Path:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_hanging_submission_costs_its_budget_and_no_more(tmp_path):
    """Calls of a submission that hangs take the whole per-call limit, then what is left of the budget
    (a timeout that says so), then nothing: every later call is not run."""
    limits = Limits(call_timeout_s=1.0, time_budget_s=1.5)
    with SandboxRunner(_file(tmp_path, HANGS), "scores", limits) as runner:
        outcomes = [runner.call(ARGS, "float32") for _ in range(6)]
        calls_spent, starts = runner.calls_spent, runner.starts
    assert all(isinstance(o, CallFailure) for o in outcomes)
    verdicts = [o.verdict for o in outcomes]
    assert verdicts == [Verdict.TIMEOUT, Verdict.TIMEOUT] + [Verdict.BUDGET_SPENT] * 4
    assert outcomes[0].message == "the call took longer than 1 s (an infinite loop, or far too slow)"
    assert outcomes[1].message == budget_cut_text(1.5, 1.0)
    assert all(o.message == budget_spent_text(1.5) for o in outcomes[2:])
    assert 1.5 <= calls_spent <= 1.5 + SLACK_S, calls_spent
    assert starts == 2  # restarted once after the first timeout, never for the calls not run


@pytest.mark.slow
def test_the_import_is_not_taken_from_the_budget(tmp_path):
    """A slow import (its own limit, load_timeout_s) leaves the budget whole: fast calls all run."""
    source = "import time\ntime.sleep(1.2)\n\n\ndef scores(q, keys):\n    return keys @ q\n"
    limits = Limits(call_timeout_s=1.0, time_budget_s=1.0)
    with SandboxRunner(_file(tmp_path, source), "scores", limits) as runner:
        outcomes = [runner.call(ARGS, "float32") for _ in range(5)]
        setup, calls_spent = runner.setup_spent, runner.calls_spent
    assert not any(isinstance(o, CallFailure) for o in outcomes), outcomes
    assert setup >= 1.2 and calls_spent < 0.5


@pytest.mark.slow
def test_without_a_budget_every_call_gets_its_whole_limit(tmp_path):
    """``time_budget_s=None`` (a library caller's Limits): each hanging call times out on its own, as before."""
    limits = Limits(call_timeout_s=0.5)
    with SandboxRunner(_file(tmp_path, HANGS), "scores", limits) as runner:
        outcomes = [runner.call(ARGS, "float32") for _ in range(3)]
        calls_spent = runner.calls_spent
    assert [o.verdict for o in outcomes if isinstance(o, CallFailure)] == [Verdict.TIMEOUT] * 3
    assert calls_spent >= 1.5


@pytest.mark.parametrize("budget", [0.0, -1.0, float("nan"), float("inf"), True, "3"])
def test_limits_refuse_a_budget_that_is_not_a_positive_number(budget):
    """A budget that is not a positive finite number of seconds is one ValueError naming it."""
    with pytest.raises(ValueError, match=r"^Limits.time_budget_s must be a positive number of seconds or None, found "):
        Limits(time_budget_s=budget)
