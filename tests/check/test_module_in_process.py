"""A module handed in, run in process (``attnscore test``'s run_impl and the in-process runner): the same
module config as in the worker, its failures as verdicts, its weights' gradients judged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from attnscore.boundary.gradients import WithGradients
from attnscore.boundary.outputs import CallFailure
from attnscore.check.implementation import run_impl
from attnscore.check.runner import InProcessRunner
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "examples" / "specs" / "bilinear_scores_module.yaml")
ARGS = {
    "Q": np.array([[1.0, 0.0, 2.0]]),
    "K": np.array([[1.0, 2.0], [-1.0, 0.0]]),
    "W": np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
}


class BilinearScore(nn.Module):
    def __init__(self, d_q, d_k, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_q, d_k))

    def forward(self, Q, K):
        return Q @ self.weight @ K.transpose(-2, -1)


class ReadsWeightData(BilinearScore):
    def forward(self, Q, K):
        return Q @ self.weight.data @ K.transpose(-2, -1)


def test_run_impl_grades_a_module_class_in_every_dtype():
    """attnscore test's path: the class itself, every case passed in float32 and float64."""
    for dtype in ("float32", "float64"):
        result = run_impl(SPEC, BilinearScore, dtype=dtype, shrink=False)
        assert result.all_passed, [(c.id, c.message) for c in result.cases if not c.passed]
        assert result.score == 14


def test_gradient_of_the_weight_judged_wrong_when_it_never_arrives():
    """A forward on self.weight.data: right values, but the gradient cases fail naming W."""
    result = run_impl(SPEC, ReadsWeightData, dtype="float64", shrink=False)
    failed = {c.id: c for c in result.cases if not c.passed}
    assert set(failed) == {"example:gradient_reaches_the_weight", "property:gradients_match_golden"}
    assert "no gradient reached W" in failed["example:gradient_reaches_the_weight"].message
    assert result.score == 10


def test_in_process_runner_sends_back_the_weights_gradient_and_the_verdicts():
    """The runner's outcomes: W's gradient in a backward call; wrong parameters and function missing as failures."""
    got = InProcessRunner(BilinearScore, module=SPEC.module).call(ARGS, "float64", upstream=np.ones((1, 2)))
    assert isinstance(got, WithGradients)
    assert got.gradients["W"].tolist() == [[0.0, 2.0], [0.0, 0.0], [0.0, 4.0]]

    class Transposed(BilinearScore):
        def __init__(self, d_q, d_k, bias=False):
            nn.Module.__init__(self)
            self.weight = nn.Parameter(torch.empty(d_k, d_q))

    wrong = InProcessRunner(Transposed, module=SPEC.module).call(ARGS, "float64")
    assert isinstance(wrong, CallFailure) and wrong.verdict is Verdict.WRONG_PARAMETERS
    assert wrong.message.endswith("found weight (2, 3): weight has shape (2, 3), not (3, 2)")
    missing = InProcessRunner(lambda Q, K, W: Q, module=SPEC.module).call(ARGS, "float64")
    assert isinstance(missing, CallFailure) and missing.verdict is Verdict.FUNCTION_MISSING
