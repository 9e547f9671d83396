"""Modules handed in, graded in the sandbox: the worker builds the class per call with the spec's init,
loads the drawn weights by name and calls forward; each way a module can be wrong is its own verdict.

The example spec is examples/specs/bilinear_scores_module.yaml (BilinearScore(d_q, d_k, bias=False)
with one parameter, weight (d_q, d_k)); its submissions are examples/submissions/bilinear_scores_module/.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.gradients import WithGradients
from attnscore.boundary.outputs import CallFailure, Received
from attnscore.grade.grading import grade_many
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits, SandboxRunner
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "examples" / "specs" / "bilinear_scores_module.yaml")
SUBMISSIONS = ROOT / "examples" / "submissions" / "bilinear_scores_module"
LIMITS = Limits(call_timeout_s=30.0)
ARGS = {
    "Q": np.array([[1.0, 0.0, 2.0]]),
    "K": np.array([[1.0, 2.0], [-1.0, 0.0]]),
    "W": np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
}

MODULE_HEAD = "import torch\nfrom torch import nn\n\n\n"


def _runner(path: Path) -> SandboxRunner:
    return SandboxRunner(path, SPEC.function, LIMITS, module=SPEC.module)


def test_worker_builds_the_module_with_the_drawn_weight_and_its_gradient():
    """One worker: the forward value Q W Kᵀ with the grader's W, then a backward call whose gradients
    reach W (dW = Qᵀ dO K) as they reach Q and K; the module's own weight is never read."""
    with _runner(SUBMISSIONS / "correct.py") as runner:
        value = runner.call(ARGS, "float64")
        assert isinstance(value, Received) and value.array.tolist() == [[7.0, -3.0]]
        assert runner.last_inspection is not None and runner.last_inspection["mutated"] == []
        backward = runner.call(ARGS, "float64", upstream=np.ones((1, 2)))
    assert isinstance(backward, WithGradients) and backward.missing == ()
    assert backward.gradients["W"].tolist() == [[0.0, 2.0], [0.0, 0.0], [0.0, 4.0]]
    assert backward.gradients["Q"].tolist() == [[0.0, 2.0, 2.0]]
    assert backward.gradients["K"].tolist() == [[3.0, 2.0], [3.0, 2.0]]


@pytest.mark.slow
def test_example_submissions_graded_end_to_end():
    """The examples' scores: right (plain and lazy) 14/14; every parameter mistake loses every case to one
    verdict; .data loses only the gradient cases; the transposed weight is diagnosed where d_q = d_k."""
    paths = sorted(SUBMISSIONS.glob("*.py"))
    results = {Path(r.submission).name: r for r in grade_many(paths, SPEC, limits=LIMITS, shrink_steps=0)}
    scores = {name: (int(r.score), int(r.max_score)) for name, r in results.items()}
    assert scores == {
        "correct.py": (14, 14),
        "extra_bias.py": (0, 14),
        "lazy_weight.py": (14, 14),
        "misnamed_parameter.py": (0, 14),
        "weight_data_no_gradient.py": (10, 14),
        "weight_transposed.py": (0, 14),
    }, scores
    for name in ("extra_bias.py", "misnamed_parameter.py"):
        assert {c.verdict for c in results[name].cases} == {Verdict.WRONG_PARAMETERS}, name
    bias = results["extra_bias.py"].cases[0].failure
    assert bias is not None and bias.detail == (
        "BilinearScore(d_q=2, d_k=2, bias=False): expected the parameters weight (2, 2) (the spec's W), found "
        "weight (2, 2), bias (1,): bias is not one of the spec's (remove it, or make it a buffer)"
    )
    misnamed = results["misnamed_parameter.py"].cases[0].failure
    assert misnamed is not None and misnamed.detail == (
        "BilinearScore(d_q=2, d_k=2, bias=False): expected the parameters weight (2, 2) (the spec's W), found "
        "W (2, 2): weight is missing; W is not one of the spec's: name it weight (the name the spec states)"
    )
    no_gradient = results["weight_data_no_gradient.py"]
    assert {c.id for c in no_gradient.cases if not c.passed} == {
        "example:gradient_reaches_the_weight",
        "property:gradients_match_golden",
    }
    transposed = {c.id: c for c in results["weight_transposed.py"].cases}
    assert transposed["example:w_picks_a_pair"].diagnosis["id"] == "bilinear_w_transposed"
    assert transposed["example:different_widths"].verdict is Verdict.WRONG_PARAMETERS


UNHAPPY = {
    "not_a_module.py": (
        "def BilinearScore(Q, K, W):\n    return Q @ W @ K.transpose(-2, -1)\n",
        Verdict.FUNCTION_MISSING,
        "the spec grades a torch.nn.Module subclass named 'BilinearScore', found a function; define class "
        "BilinearScore(nn.Module) with __init__ and forward",
    ),
    "constructor_raises.py": (
        "class BilinearScore(nn.Module):\n"
        "    def __init__(self, d_q, d_k, bias=False):\n"
        "        super().__init__()\n"
        "        raise ValueError('square weights only')\n",
        Verdict.EXCEPTION,
        "the constructor BilinearScore(d_q=2, d_k=2, bias=False) raised ValueError: square weights only",
    ),
    "forward_raises.py": (
        "class BilinearScore(nn.Module):\n"
        "    def __init__(self, d_q, d_k, bias=False):\n"
        "        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.empty(d_q, d_k))\n"
        "    def forward(self, Q, K):\n"
        "        raise RuntimeError('not written yet')\n",
        Verdict.EXCEPTION,
        "raised RuntimeError: not written yet",
    ),
    "with_buffer.py": (
        "class BilinearScore(nn.Module):\n"
        "    def __init__(self, d_q, d_k, bias=False):\n"
        "        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.empty(d_q, d_k))\n"
        "        self.register_buffer('sign', torch.ones(1))\n"
        "    def forward(self, Q, K):\n"
        "        return self.sign * (Q @ self.weight @ K.transpose(-2, -1))\n",
        Verdict.PASSED,
        "",
    ),
    "lazy_linear_inside.py": (  # a lazy submodule: its weight's name is proj.weight, not weight
        "class BilinearScore(nn.Module):\n"
        "    def __init__(self, d_q, d_k, bias=False):\n"
        "        super().__init__()\n"
        "        self.proj = nn.LazyLinear(d_q, bias=False)\n"
        "    def forward(self, Q, K):\n"
        "        return Q @ self.proj(K).transpose(-2, -1)\n",
        Verdict.WRONG_PARAMETERS,
        "BilinearScore(d_q=2, d_k=2, bias=False): expected the parameters weight (2, 2) (the spec's W), found "
        "proj.weight (2, 2): weight is missing; proj.weight is not one of the spec's: name it weight (the name the "
        "spec states)",
    ),
}


@pytest.mark.slow
def test_unhappy_modules_each_get_their_verdict(tmp_path):
    """Not a module, a raising constructor or forward, a buffer beside the weight, a lazy submodule under
    another name: the first worked example's verdict and message, for every case alike."""
    paths = []
    for name, (body, _, _) in UNHAPPY.items():
        paths.append(tmp_path / name)
        paths[-1].write_text(MODULE_HEAD + body, encoding="utf-8")
    results = {Path(r.submission).name: r for r in grade_many(paths, SPEC, limits=LIMITS, shrink_steps=0)}
    for name, (_, verdict, message) in UNHAPPY.items():
        result = results[name]
        assert {c.verdict for c in result.cases} == {verdict}, (name, [c.message for c in result.cases])
        if verdict is not Verdict.PASSED:
            failure = result.cases[0].failure
            assert failure is not None and failure.detail == message, name
            assert "Traceback" not in failure.detail
    constructor = results["constructor_raises.py"].cases[0].failure
    assert constructor is not None and constructor.exception == "ValueError"


@pytest.mark.slow
def test_module_changing_the_weight_in_place_is_caught():
    """A forward that scales self.weight in place changes the grader's W: inputs_not_mutated fails on W."""
    source = (
        MODULE_HEAD + "class BilinearScore(nn.Module):\n"
        "    def __init__(self, d_q, d_k, bias=False):\n"
        "        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.empty(d_q, d_k))\n"
        "    def forward(self, Q, K):\n"
        "        with torch.no_grad():\n"
        "            self.weight.mul_(2.0)\n"
        "        return Q @ self.weight @ K.transpose(-2, -1) / 2\n"
    )
    with SandboxRunner("inplace.py", SPEC.function, LIMITS, source=source.encode(), module=SPEC.module) as runner:
        outcome = runner.call(ARGS, "float64")
        inspection = runner.last_inspection
    assert not isinstance(outcome, CallFailure)
    assert inspection is not None and inspection["mutated"] == ["W"]
