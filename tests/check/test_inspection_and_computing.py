"""Judging what a call did and whether it computed: a mutation or an alias costs any case, named with
the input, the call and when; a property that does not compare values scores only beside right ones;
a null implementation scores 0 on every bundled spec (verify's null test)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from attnscore.check.cases import build_cases
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.check.verify import null_test
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec


def _case(spec, case_id, dtype="float32"):
    return next(c for c in build_cases(spec, dtype) if c.id == case_id)


class _ScalesSavedQ(torch.autograd.Function):
    """Right attention with a hand-written backward that scales the saved Q in place at the end."""

    @staticmethod
    def forward(ctx, Q, K, V, is_causal=False):
        S = Q @ K.transpose(-2, -1) * Q.shape[-1] ** -0.5
        L = torch.logsumexp(S, -1)
        out = torch.exp(S - L[..., None]) @ V
        ctx.save_for_backward(Q, K, V, out, L)
        return out

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, out, L = ctx.saved_tensors
        scale = Q.shape[-1] ** -0.5
        P = torch.exp(Q @ K.transpose(-2, -1) * scale - L[..., None])
        dS = P * (dO @ V.transpose(-2, -1) - (dO * out).sum(-1, keepdim=True))
        grads = dS @ K * scale, dS.transpose(-2, -1) @ Q * scale, P.transpose(-2, -1) @ dO, None
        Q.mul_(3.0)
        return grads


def test_a_mutation_in_a_backward_pass_costs_the_case_and_says_when():
    """In process too, a worked example with a backward pass whose backward changes Q fails, named."""
    spec = load_spec("flash_attention_2")
    result = judge_case(spec, _case(spec, "example:one_key"), InProcessRunner(_ScalesSavedQ), "float32")
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check == (
        "your function changed its input(s) Q in place (during its backward pass); leave inputs as they are"
    )
    assert result.failure.diagnosis["id"] == "inputs_mutated"
    forward_only = judge_case(
        spec, _case(spec, "property:matches_reference"), InProcessRunner(_ScalesSavedQ), "float32"
    )
    assert forward_only.passed


def test_a_mutation_in_a_case_without_the_property_costs_that_case():
    """dot_product_scores lists no inputs_not_mutated: a right answer that overwrites q still loses the example."""
    spec = load_spec("dot_product_scores")

    def overwrites(q, keys):
        out = keys @ q
        q.fill_(0.0)
        return out

    result = judge_case(spec, _case(spec, "example:anti_aligned"), InProcessRunner(overwrites), "float32")
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check == "your function changed its input(s) q in place; leave inputs as they are"


def test_an_alias_costs_any_case_where_the_values_are_right():
    """masked_scores handing S back when nothing is masked: the layouts case fails by aliasing where
    its drawn mask keeps every key, naming the call; a wrong-valued alias is reported by its values."""
    spec = load_spec("masked_scores")

    def hands_back(S, mask):
        return S if bool(mask.all()) else S.masked_fill(~mask, float("-inf"))

    result = judge_case(spec, _case(spec, "property:output_not_aliased"), InProcessRunner(hands_back), "float32")
    assert result.failure.check.startswith("your output shares memory with the input(s) S")


@pytest.mark.parametrize(
    ("property_name", "spec_name", "wrong"),
    [
        pytest.param(
            "dtype_device_follow_inputs",
            "masked_scores",
            lambda S, mask: (2 * S).masked_fill(~mask, float("-inf")),
            id="dtype",
        ),
        pytest.param("non_contiguous_inputs", "dot_product_scores", lambda q, keys: 2 * (keys @ q), id="layouts"),
        pytest.param("inputs_not_mutated", "masked_scores", lambda S, mask: S.masked_fill(mask, 0.0), id="mutation"),
    ],
)
def test_a_property_that_holds_on_wrong_values_earns_nothing(property_name, spec_name, wrong):
    """Right dtype, the same values for every layout, inputs untouched: the property holds, but the
    values are wrong, so the case fails with them (the header says the property itself held)."""
    spec = load_spec(spec_name)
    result = judge_case(spec, _case(spec, f"property:{property_name}"), InProcessRunner(wrong), "float32")
    assert result.verdict is Verdict.WRONG_VALUE and result.points == 0
    assert result.failure.property_held and result.failure.mismatch is not None
    assert "(the property itself holds on this output; the values differ from the reference)" in result.message


def test_gradient_properties_compare_the_gradients_with_the_golden_ones(tmp_path):
    """0 · sum(inputs) on the graph: finite differences agree with its zero gradients and no masked key
    gets one, yet gradcheck and masked_entries_get_no_gradient fail on the values."""
    spec = load_spec("tests/hostile/specs/attention_backward.yaml")

    def placeholder(Q, K, V, mask):
        shape = torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2]) + (Q.shape[-2], V.shape[-1])
        return torch.zeros(shape, dtype=Q.dtype) + 0 * (Q.sum() + K.sum() + V.sum())

    for name in ("gradcheck", "masked_entries_get_no_gradient"):
        result = judge_case(spec, _case(spec, f"property:{name}"), InProcessRunner(placeholder), "float32")
        assert not result.passed and result.failure.property_held, name


@pytest.mark.parametrize(
    "spec_name",
    ["dot_product_scores", "masked_scores", pytest.param("flash_attention_2", marks=pytest.mark.slow)],
)
def test_the_null_implementation_scores_zero(spec_name):
    """Every form of null_implementation scores 0 on the bundled spec (verify's null test)."""
    spec = load_spec(spec_name)
    (result,) = null_test(spec)
    assert result.mistake_id == "null_implementation" and result.score == 0 and result.ok, result
    assert result.cell == "scores 0"


def test_a_spec_a_placeholder_passes_fails_the_null_test(tmp_path):
    """A spec whose only worked example expects zeros rewards not computing: SCORES, not ok."""
    text = open("specs/dot_product_scores.yaml", encoding="utf-8").read()
    start = text.index("worked_examples:")
    zeros = (
        "worked_examples:\n  - id: perpendicular\n    inputs:\n      q: [1, 0]\n      keys: [[0, 1]]\n"
        "    expected: [0]\n    explanation: perpendicular\n    points: 1\n"
    )
    path = tmp_path / "weak.yaml"
    path.write_text(text[:start] + zeros, encoding="utf-8")
    spec = load_spec(path)
    (result,) = null_test(spec)
    assert result.score == Fraction(1) and result.max_score == Fraction(1) and not result.ok
    assert result.cell == "scores 1/1"
    assert np.isfinite(float(result.score))
