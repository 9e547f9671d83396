"""A float16 spec with a long-row worked example: the loader's tolerance rule and grading ask the
same question (:func:`attnscore.maths.expectation.expect`), so a valid long-row spec loads and grades."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.check.cases import build_cases
from attnscore.check.implementation import run_impl
from attnscore.maths.expectation import expect
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

N_K = 4096


def _long_row_spec(tmp_path, tolerance: str, dtypes: str = "[float16]"):
    """An attention_weights spec whose one worked example is a row of 4,096 equal scores."""
    zeros = "[" + ", ".join(["0"] * N_K) + "]"
    trues = "[" + ", ".join(["true"] * N_K) + "]"
    weights = "[" + ", ".join([repr(1.0 / N_K)] * N_K) + "]"
    text = f"""format: attnscore-spec/1
id: long_row_weights
version: 1
title: Softmax over one long row
function:
  name: attention_weights
  contract: attention_weights
  parameters:
    - {{name: S, shape: ["...", n_q, n_k]}}
    - {{name: mask, shape: ["...", n_q, n_k]}}
  returns:
    shape: ["...", n_q, n_k]
dtypes: {dtypes}
tolerance: {tolerance}
worked_examples:
  - id: long_row
    title: 4,096 equal scores share the weight
    inputs:
      S: [{zeros}]
      mask: [{trues}]
    expected: [{weights}]
    explanation: every key gets 1/4096.
    points: 1
"""
    path = tmp_path / "long_row_weights.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("factor", [1, 2, 4, 16])
def test_a_float16_long_row_spec_loads_for_every_sensible_factor(tmp_path, factor):
    """The loader used to refuse it ("allowed error up to 0.000244": (n_k + 1) float16 subnormals)."""
    spec = load_spec(_long_row_spec(tmp_path, f"{{mode: dot_bound, factor: {factor}}}"))
    assert spec.dtypes == ("float16",) or list(spec.dtypes) == ["float16"]
    (case,) = build_cases(spec, "float16")
    (call,) = case.calls
    assert call.golden[0, 0] == 1.0 / N_K
    assert float(call.allowed.max()) < 1.0 / N_K  # all zeros fail the graded call, as the loader said
    ex = spec.worked_examples[0]
    loader = expect(spec.contract, ex.inputs, "float16", spec.tolerance, reference="a_priori")
    np.testing.assert_array_equal(loader.allowed, call.allowed)  # one question, one answer


def test_a_float16_long_row_spec_grades_right_and_wrong_answers(tmp_path):
    """torch.softmax scores full marks in float16; all-zero weights and a float16 running sum score 0."""
    spec = load_spec(_long_row_spec(tmp_path, "{mode: dot_bound, factor: 2}"))

    def right(S, mask):
        return torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1)

    def zeros(S, mask):
        return torch.zeros_like(S)

    def doubled(S, mask):  # what a float16 accumulator stalled at 2048 gives: 2/4096 each
        return 2 * torch.softmax(S, dim=-1)

    assert run_impl(spec, right, dtype="float16", shrink=False).score == 1
    assert run_impl(spec, zeros, dtype="float16", shrink=False).score == 0
    assert run_impl(spec, doubled, dtype="float16", shrink=False).score == 0


def test_a_tolerance_that_accepts_zeros_on_the_long_row_is_still_refused(tmp_path):
    """atol 1e-3 lets all-zero weights (each true weight 2.4e-4) pass: a located problem."""
    with pytest.raises(SpecError) as info:
        load_spec(_long_row_spec(tmp_path, "{mode: close, atol: 1.0e-3}"))
    assert "tolerance.atol: expected a tolerance under which an all-zero output fails worked example 'long_row'" in (
        str(info.value)
    )
