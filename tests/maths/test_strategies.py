"""Drawn values read plainly: no magnitude below TINY (the smallest normal float32 and its friends)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.check.cases import build_cases
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.maths.contracts import get_contract
from attnscore.maths.display import format_array
from attnscore.maths.strategies import TINY, random_args, random_qk, readable_values
from attnscore.spec.load import load_spec


def _tiny(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (np.abs(a) < TINY) & (a != 0)


@pytest.mark.parametrize(
    ("values", "max_value", "expected"),
    [
        pytest.param([-1.1754944e-38, 1e-5, 2.0**-11], 10.0, [0.0, 0.0, 0.0], id="below 2^-10: zero"),
        pytest.param([2.0**-10, -0.5, 7.25], 10.0, [2.0**-10, -0.5, 7.25], id="from 2^-10 on: kept"),
        pytest.param([1e-5, 1e-7], 0.01, [1e-5, 0.0], id="a small max_value keeps its own scale"),
        pytest.param([-np.inf, np.inf, 3.0], 10.0, [-np.inf, np.inf, 3.0], id="a mask's -inf kept"),
    ],
)
def test_readable_values_zero_only_what_is_tiny(values, max_value, expected):
    """Magnitudes below min(TINY, TINY * max_value) become 0; every other value, inf included, stays."""
    assert readable_values(values, max_value).tolist() == expected


def test_readable_values_keep_the_sign_of_a_zero():
    """-0 stays -0 (only non-zero tiny values are changed)."""
    assert np.signbit(readable_values([-0.0], 10.0)).tolist() == [True]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), name=st.sampled_from(["sdpa", "kernel_attention", "key_padding_attention", "flash_attn"]))
def test_drawn_arguments_hold_no_tiny_value(data, name):
    """Every float argument drawn for a contract is 0 or at least TINY in magnitude."""
    args = data.draw(random_args(get_contract(name)))
    for key, value in args.items():
        if np.asarray(value).dtype.kind == "f":
            assert not _tiny(value).any(), (key, value)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_drawn_queries_and_keys_hold_no_tiny_value(data):
    """The canonical (Q, K) pairs are 0 or at least TINY in magnitude too."""
    Q, K = data.draw(random_qk(get_contract("score_matrix")))
    assert not _tiny(Q).any() and not _tiny(K).any()


@pytest.mark.parametrize("spec_id", ["gqa", "sdpa_float_mask"])
def test_a_counterexample_prints_no_subnormal_looking_value(spec_id):
    """Those specs' graded inputs once drew -1.1754944e-38; now no float argument of any case holds a
    tiny value, and a wrong implementation's counterexample writes no number with a negative exponent."""
    spec = load_spec(f"specs/{spec_id}.yaml")
    cases = build_cases(spec, "float32")
    for case in cases:
        for call in case.calls:
            for key, value in call.args.items():
                if np.asarray(value).dtype.kind == "f":
                    assert not _tiny(value).any(), (case.id, key)
                    assert "e-" not in format_array(value, "float32"), (case.id, key)
    case = next(c for c in cases if c.id == "property:matches_reference")
    doubled = InProcessRunner(lambda *a, **k: 2 * spec.contract.reference(*a, **k))
    result = judge_case(spec, case, doubled, "float32")
    assert result.failure is not None and "Reproduce: " in result.message
    assert "e-" not in result.message.split("Reproduce: ", 1)[1]
