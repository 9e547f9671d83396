"""Held-out style check: eleven correct implementations, each written another way, get full marks backward.

The spec, its cases and the property cases are plain data, built once for every style (module
fixtures and :func:`_property_case`), as ``attnscore test`` builds them once for a run.
"""

from __future__ import annotations

import functools

import pytest

from attnscore.check.cases import build_cases
from attnscore.check.implementation import run_impl
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.report.results import Verdict
from examples.impl.attention_gradients import STYLES
from tests.catalogue.test_gradient_properties import _case, backward_spec

pytestmark = pytest.mark.slow

PROPERTIES = ("matches_reference", "gradients_match_golden", "masked_entries_get_no_gradient")


@functools.cache
def _property_case(name: str, dtype: str):
    """``(spec, case)`` of the attention spec's property ``name`` on 8 drawn examples in ``dtype``."""
    return _case("specs/attention.yaml", name, dtype, count=8)


@pytest.fixture(scope="module")
def spec_and_cases(tmp_path_factory):
    """The attention spec with the gradient properties, and its float32 cases."""
    spec = backward_spec(tmp_path_factory.mktemp("gradient_styles"))
    return spec, build_cases(spec, "float32")


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_style_gets_full_marks(style, spec_and_cases):
    """Each correct style gets full marks on the attention spec with the gradient properties (float32)."""
    spec, cases = spec_and_cases
    result = run_impl(spec, STYLES[style], dtype="float32", shrink=False, cases=cases)
    assert result.score == result.max_score, [c.message for c in result.cases if c.verdict is not Verdict.PASSED]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_style_passes_backward_in_float64(style):
    """Each correct style passes the forward and both gradient properties in float64."""
    dtype = "float64"
    for name in PROPERTIES:
        spec, case = _property_case(name, dtype)
        result = judge_case(spec, case, InProcessRunner(STYLES[style]), dtype)
        assert result.verdict is Verdict.PASSED, f"{style} {name}: {result.message}"


@pytest.mark.parametrize("style", ["naive", "float32_accumulation", "float32_backward_function", "manual_softmax"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_styles_pass_the_ratio_rule(style, dtype):
    """Styles that accumulate in float32 (or as the reference does) pass backward in float16/bfloat16."""
    spec, case = _property_case("gradients_match_golden", dtype)
    result = judge_case(spec, case, InProcessRunner(STYLES[style]), dtype)
    assert result.verdict is Verdict.PASSED, f"{style}: {result.message}"
