"""The order a session judges cases in: cheapest first within the visible and the hidden cases, hidden
cases still last, results in spec order; cases a spent time budget left unrun are not shrunk."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.outputs import Outcome
from attnscore.check.cases import Case, build_cases
from attnscore.check.runner import InProcessRunner, budget_spent_failure
from attnscore.check.session import Session, case_cost
from attnscore.grade.policy import grading_budget
from attnscore.report.results import CaseResult, Verdict
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "specs" / "dot_product_scores.yaml")


@functools.cache
def _cases() -> tuple[Case, ...]:
    """The spec's cases in float32, built at the first test that needs them (not at
    collection, which every xdist worker does) and shared by the module's tests."""
    return tuple(build_cases(SPEC, "float32"))


def _session(**options: object) -> Session:
    return Session(SPEC, _cases(), "float32", "cpu", "mine", SPEC.seed, budget=grading_budget(50), **options)


def _judged_order(session: Session, runner: InProcessRunner | None = None) -> tuple[list[str], list[str]]:
    order: list[CaseResult] = []
    result = session.run(runner or InProcessRunner(lambda q, keys: keys @ q), on_case=order.append)
    return [c.id for c in order], [c.id for c in result.cases]


def test_cheapest_first_judges_examples_then_properties_by_cost_hidden_last():
    """Visible worked examples (spec order), visible properties by cost, then the hidden cases the same way."""
    judged, returned = _judged_order(_session(hidden_last=True, cheapest_first=True))
    assert returned == [c.id for c in _cases()]  # results stay in spec order
    visible = [c for c in _cases() if c.visibility != "hidden"]
    hidden = [c for c in _cases() if c.visibility == "hidden"]
    assert hidden, "the spec should have hidden cases for this test"

    def expected(group):
        examples = [c.id for c in group if c.kind == "example"]
        properties = sorted((c for c in group if c.kind != "example"), key=case_cost)
        return examples + [c.id for c in properties]

    assert judged == expected(visible) + expected(hidden)
    assert expected(visible) != [c.id for c in visible]  # this spec's properties are not in cost order


@pytest.mark.parametrize("hidden_last", [False, True])
def test_without_cheapest_first_the_order_is_as_before(hidden_last):
    """No reordering unless asked: spec order (visible first with hidden_last)."""
    judged, _ = _judged_order(_session(hidden_last=hidden_last))
    ids = [c.id for c in _cases()]
    if hidden_last:
        ids = [c.id for c in _cases() if c.visibility != "hidden"] + [
            c.id for c in _cases() if c.visibility == "hidden"
        ]
    assert judged == ids


class _CountingBudget(InProcessRunner):
    """Right answers for ``calls`` calls, then a spent budget; counts every call asked for."""

    def __init__(self, calls: int) -> None:
        super().__init__(lambda q, keys: keys @ q)
        self.left, self.asked = calls, 0

    def call(
        self,
        args: Mapping[str, np.ndarray],
        dtype: str,
        layouts: Mapping[str, str] | None = None,
        upstream: np.ndarray | None = None,
    ) -> Outcome:
        self.asked += 1
        self.left -= 1
        if self.left < 0:
            return budget_spent_failure(5.0)
        return super().call(args, dtype, layouts, upstream)


def test_cases_left_unrun_are_asked_once_and_never_shrunk():
    """Once the budget is spent each case asks the runner once, is not run, and is not shrunk."""
    runner = _CountingBudget(2)
    result = _session(hidden_last=True, cheapest_first=True).run(runner)
    unrun = [c for c in result.cases if c.verdict is Verdict.BUDGET_SPENT]
    assert len(unrun) == len(_cases()) - 2 and sum(c.passed for c in result.cases) == 2
    assert runner.asked == 2 + len(unrun)
    assert all(c.failure is not None and c.failure.shrunk_from is None for c in unrun)
