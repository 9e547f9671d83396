"""Held-out style check: eleven correct implementations, each written another way, get full marks backward."""

from __future__ import annotations

import pytest

from attnscore.check.implementation import run_impl
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.report.results import Verdict
from examples.impl.attention_gradients import STYLES
from tests.catalogue.test_gradient_properties import _case, backward_spec

pytestmark = pytest.mark.slow

PROPERTIES = ("matches_reference", "gradients_match_golden", "masked_entries_get_no_gradient")


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_style_gets_full_marks(style, tmp_path):
    """Each correct style gets full marks on the attention spec with the gradient properties (float32)."""
    result = run_impl(backward_spec(tmp_path), STYLES[style], dtype="float32", shrink=False)
    assert result.score == result.max_score, [c.message for c in result.cases if c.verdict is not Verdict.PASSED]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_style_passes_backward_in_float64(style):
    """Each correct style passes the forward and both gradient properties in float64."""
    dtype = "float64"
    for name in PROPERTIES:
        spec, case = _case("specs/attention.yaml", name, dtype, count=8)
        result = judge_case(spec, case, InProcessRunner(STYLES[style]), dtype)
        assert result.verdict is Verdict.PASSED, f"{style} {name}: {result.message}"


@pytest.mark.parametrize("style", ["naive", "float32_accumulation", "float32_backward_function", "manual_softmax"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_styles_pass_the_ratio_rule(style, dtype):
    """Styles that accumulate in float32 (or as the reference does) pass backward in float16/bfloat16."""
    spec, case = _case("specs/attention.yaml", "gradients_match_golden", dtype, count=8)
    result = judge_case(spec, case, InProcessRunner(STYLES[style]), dtype)
    assert result.verdict is Verdict.PASSED, f"{style}: {result.message}"
