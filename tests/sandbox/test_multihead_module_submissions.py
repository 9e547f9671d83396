"""Causal multi-head self-attention handed in as an nn.Module (specs/multihead_self_attention_module.yaml):
the worker builds MultiHeadSelfAttention(d_model, num_heads) per call, the head count from the case's own
num_heads ({value: num_heads}), loads the drawn weights under the course's names and calls forward(x)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary.outputs import Received
from attnscore.grade.grading import grade_many
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits, SandboxRunner
from attnscore.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "specs" / "multihead_self_attention_module.yaml")
SUBMISSIONS = ROOT / "examples" / "submissions" / "multihead_self_attention_module"
LIMITS = Limits(call_timeout_s=30.0)
EYE = np.eye(4)


def test_the_head_count_goes_to_the_constructor_and_x_alone_to_forward() -> None:
    """Two calls in one worker with 2 and then 4 heads: each built with its own num_heads (the values of
    the spec's worked examples: 0.6698 with two heads of width 2, 0.7311 with four of width 1)."""
    x = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    args = {"x": x, "W_q": EYE, "W_k": EYE, "W_v": EYE, "W_o": EYE}
    with SandboxRunner(SUBMISSIONS / "correct.py", SPEC.function, LIMITS, module=SPEC.module) as runner:
        two = runner.call({**args, "num_heads": np.array(2, dtype=np.int32)}, "float64")
        four = runner.call({**args, "num_heads": np.array(4, dtype=np.int32)}, "float64")
    assert isinstance(two, Received) and isinstance(four, Received)
    np.testing.assert_allclose(two.array, [[1, 0, 0, 0], [0.5, 0, 0.6697615493266569, 0]], rtol=1e-12)
    np.testing.assert_allclose(four.array, [[1, 0, 0, 0], [0.5, 0, 0.7310585786300049, 0]], rtol=1e-12)


@pytest.mark.slow
def test_example_module_submissions_graded_end_to_end() -> None:
    """The correct module (a causal mask kept as a buffer) gets full marks in float32 and float64; a fused
    qkv_proj is one wrong_parameters verdict naming the spec's names; heads cut without a transpose are
    named; a head count kept from the first instance loses cases."""
    paths = sorted(SUBMISSIONS.glob("*.py"))
    for dtype in ("float32", "float64"):
        results = {
            Path(r.submission).name: r for r in grade_many(paths, SPEC, limits=LIMITS, shrink_steps=0, dtype=dtype)
        }
        correct = results["correct.py"]
        assert (correct.score, correct.max_score) == (18, 18), (dtype, correct.cases)
    fused = results["fused_qkv.py"]
    assert fused.score == 0 and {c.verdict for c in fused.cases} == {Verdict.WRONG_PARAMETERS}
    detail = fused.cases[0].failure.detail if fused.cases[0].failure is not None else ""
    assert "q_proj.weight" in detail and "qkv_proj.weight" in detail, detail
    no_transpose = results["heads_not_transposed.py"]
    assert no_transpose.score < 18
    assert "heads_reshaped_without_transpose" in {c.diagnosis["id"] for c in no_transpose.cases if c.diagnosis}
    assert results["global_head_count.py"].score < 18
