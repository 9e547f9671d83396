"""torch.compile under a time budget: compilations come out of their own allowance (``compile_s``),
never out of the budget, so compiled correct code keeps full marks under a budget of one call."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnscore.check.cases import build_cases
from attnscore.grade.grading import grade_submission
from attnscore.sandbox import checks
from attnscore.sandbox.launch import Limits
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = checks.compile_problem(Limits())
pytestmark = [pytest.mark.slow, pytest.mark.skipif(PROBLEM is not None, reason=f"cannot compile here: {PROBLEM}")]

COMPILED = """\
import torch


@torch.compile
def _scores(q, keys):
    return keys @ q


def scores(q, keys):
    return _scores(q, keys)
"""


def test_compiling_does_not_spend_the_budget(tmp_path):
    """A cold compile takes seconds of the worker's time; a 2 s budget (one call's limit) still leaves
    every case to run: the compilations are the compile allowance's, not the budget's."""
    spec = load_spec(ROOT / "specs" / "dot_product_scores.yaml")
    path = tmp_path / "solution.py"
    path.write_text(COMPILED)
    limits = Limits(call_timeout_s=2.0, time_budget_s=2.0)
    result = grade_submission(path, spec, build_cases(spec), limits=limits, shrink_steps=0)
    assert (result.score, result.max_score) == (11, 11), [(c.id, c.message) for c in result.cases if c.message]
