"""float16 and bfloat16 for the kernel_attention specs (softcap, alibi): the contract's own low-precision
budget (attnscore.maths.families.kernel_attention.kernel_attention_low_terms), correct low-precision kernels
getting full marks, and the catalogued mistakes still caught and named in those dtypes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnscore.check.cases import build_cases
from attnscore.check.implementation import run_impl
from attnscore.check.verify import mutation_test
from attnscore.maths import variants
from attnscore.maths.families.kernel_attention import KernelOptions, kernel_attention_low_terms
from attnscore.spec.load import load_spec
from examples.impl.kernel_attention import kernel_attention

HALF = ("float16", "bfloat16")
SPECS = ("specs/softcap.yaml", "specs/alibi.yaml")


def _reference_in_dtype(query, key, value, alibi_slopes=None, **flags):
    """The reference run in the tested dtype (float32 inside, each stage rounded once)."""
    return variants.general_attention(query, key, value, alignment="bottom_right", alibi_slopes=alibi_slopes, **flags)


def _float32_inside(query, key, value, alibi_slopes=None, **flags):
    """Inputs as rounded to the dtype, every step in float32 (float64 inputs, which properties such as
    dtype_device_follow_inputs also pass, in float64), the output rounded once."""
    inside = torch.promote_types(query.dtype, torch.float32)
    slopes = None if alibi_slopes is None else alibi_slopes.to(inside)
    return kernel_attention(query.to(inside), key.to(inside), value.to(inside), slopes, **flags).to(query.dtype)


STYLES = {
    "plain torch in the dtype": kernel_attention,  # products, scale, tanh, bias and softmax rounded in the dtype
    "reference in the dtype": _reference_in_dtype,
    "float32 inside": _float32_inside,
}


def test_specs_list_the_half_dtypes():
    """softcap and alibi are graded in float16 and bfloat16 as well."""
    for path in SPECS:
        assert load_spec(path).dtypes == ("float32", "float64", "float16", "bfloat16")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("path", SPECS)
def test_correct_low_precision_kernels_get_full_marks(path, style, dtype):
    """A kernel computing in the dtype (or in float32 inside, or the reference itself) gets every point."""
    spec = load_spec(path)
    result = run_impl(spec, STYLES[style], dtype=dtype, shrink=False)
    assert result.all_passed, {c.id: c.message for c in result.cases if c.points < c.max_points}


MISTAKES = [
    ("specs/softcap.yaml", "softcap_ignored"),
    ("specs/softcap.yaml", "softcap_after_mask"),
    ("specs/softcap.yaml", "softcap_scale_twice"),
    ("specs/softcap.yaml", "softcap_scale_after"),
    ("specs/alibi.yaml", "alibi_wrong_sign"),
    ("specs/alibi.yaml", "alibi_signed_distance"),
    ("specs/alibi.yaml", "alibi_top_left"),
    ("specs/alibi.yaml", "alibi_bias_scaled"),
]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(("path", "mistake"), MISTAKES)
def test_mistakes_still_caught_and_named_in_half_precision(path, mistake, dtype):
    """Each softcap and ALiBi mistake fails a case in float16 and bfloat16 and is diagnosed as itself there."""
    spec = load_spec(path)
    (result,) = mutation_test(dataclasses.replace(spec, mistakes=(mistake,)), dtype=dtype)
    assert result.caught and result.diagnosed, result


@pytest.mark.slow
def test_budget_is_the_contracts_own_and_tighter_than_one_sum():
    """kernel_attention's low-precision budget is its own; on the specs' cases its median allowance is well
    under that of the default budget (the whole float32-style error charged the low precision's u)."""
    for path in SPECS:
        spec = load_spec(path)
        assert spec.contract.low_error_fn is not None
        default = dataclasses.replace(spec, contract=dataclasses.replace(spec.contract, low_error_fn=None))
        ratios = []
        for own, one_sum in zip(build_cases(spec, "bfloat16"), build_cases(default, "bfloat16"), strict=True):
            for a, b in zip(own.calls, one_sum.calls, strict=True):
                na, nb = np.asarray(a.allowed, float).ravel(), np.asarray(b.allowed, float).ravel()
                ok = np.isfinite(na) & np.isfinite(nb) & (nb > 0)
                ratios.extend((na[ok] / nb[ok]).tolist())
        assert np.median(ratios) < 0.6, (path, np.median(ratios))


def test_softcap_terms_vanish_when_saturated_and_alibi_terms_grow_with_the_bias():
    """A saturated capped score carries no product error; a steeper ALiBi slope adds its rounding."""
    q = np.array([[[100.0, 0, 0, 0]]])
    k = np.array([[[100.0, 0, 0, 0], [100.0, 0, 0, 0]]])  # two equal scores of 5000: weights 1/2 each
    v = np.array([[[1.0], [0.0]]])
    args = {"query": q, "key": k, "value": v}
    capped = kernel_attention_low_terms(args, KernelOptions(softcap=2.0), "bfloat16", 1.0)
    plain = kernel_attention_low_terms(args, KernelOptions(), "bfloat16", 1.0)
    assert float(capped.rounding.max()) < 100 < 1e4 < float(plain.rounding.max())
    # one query at key 1, keys at distances 1 and 0: a slope of 0.5 keeps both weights sizeable
    ones = {"query": np.ones((1, 1, 4)), "key": np.ones((1, 2, 4)), "value": np.array([[[0.0], [1.0]]])}
    flat = kernel_attention_low_terms({**ones, "alibi_slopes": np.zeros(1)}, KernelOptions(), "float16", 1.0)
    biased = kernel_attention_low_terms({**ones, "alibi_slopes": np.full(1, 0.5)}, KernelOptions(), "float16", 1.0)
    assert flat.rounding.shape == biased.rounding.shape == (1, 1, 1)
    assert float(biased.rounding.max()) > float(flat.rounding.max()) + 0.3
