"""RoPE's properties (attnscore/catalogue/properties/rotary.py): norms kept, scores by offset, and
the generic ones that apply to the rope contract; each catches what it is meant to, and no more."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.catalogue.families import leading_symbol, rotary
from attnscore.catalogue.properties import applicable_properties, get_property
from attnscore.catalogue.properties.rotary import norm_failure, offset_failure
from attnscore.check.cases import build_cases
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.maths.contracts import CONTRACTS, get_contract
from attnscore.maths.rotary import rotate
from attnscore.spec.load import load_spec

CONTRACT = get_contract("rope")


def test_rotary_selects_only_the_rope_contract() -> None:
    """The feature predicate: rope, in either pairing, and no other bundled contract."""
    assert [name for name, c in CONTRACTS.items() if rotary(c)] == ["rope"]
    assert rotary(CONTRACT.configured({"pairing": "rotate_half"}))
    assert leading_symbol(CONTRACT) == "..."
    assert leading_symbol(CONTRACT.interfaced(("batch",))) == "..."
    assert leading_symbol(CONTRACT.interfaced(())) is None  # a stated rank without batch dims: nothing to split


def test_the_properties_that_apply_to_rope() -> None:
    """RoPE's own two, and the generic ones (leading dims included); none of attention's."""
    assert applicable_properties(CONTRACT) == [
        "matches_reference",
        "inputs_not_mutated",
        "output_not_aliased",
        "dtype_device_follow_inputs",
        "deterministic",
        "non_contiguous_inputs",
        "leading_dims_independent",
        "rope_preserves_norm",
        "rope_scores_depend_on_offsets",
        "gradients_match_golden",
        "gradcheck",
    ]
    assert not get_property("rope_preserves_norm").applies(get_contract("attention"))


def test_norm_failure_names_the_vector_and_both_norms() -> None:
    """A kept norm passes (within the allowed error); a halved vector is named with its norms."""
    x = np.array([[[3.0, 4.0], [1.0, 0.0]]])
    assert norm_failure(x, np.array([[[5.0, 0.0], [0.0, 1.0]]]), np.zeros(x.shape)) is None
    assert norm_failure(x, np.array([[[5.0, 0.001], [0.0, 1.0]]]), np.full(x.shape, 0.001)) is None
    text = norm_failure(x, np.array([[[5.0, 0.0], [0.0, 0.5]]]), np.zeros(x.shape))
    assert text is not None and text.startswith("the rotated vector x[0, 1] has norm 0.5, but x[0, 1] has norm 1:")
    assert norm_failure(x, np.zeros((1, 2)), np.zeros((1, 2))) is None  # a wrong shape: the value verdict's


def test_offset_failure_on_real_rotations() -> None:
    """Rotations at p and p + c keep the scores; rotating by m² (not linear in m) does not."""
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    p = torch.tensor([1, 4, 9])

    def rot(x: np.ndarray, positions: torch.Tensor) -> np.ndarray:
        return rotate(torch.tensor(x), positions, 100, "interleaved").numpy()

    zero = (np.zeros(q.shape),) * 4
    assert offset_failure((rot(q, p), rot(k, p), rot(q, p + 5), rot(k, p + 5)), zero, 5) is None
    squared = (rot(q, p**2), rot(k, p**2), rot(q, (p + 5) ** 2), rot(k, (p + 5) ** 2))
    text = offset_failure(squared, zero, 5)
    assert text is not None and "of batch item 0" in text and "shifted by 5" in text and "offset m − n" in text


def _spec():
    return load_spec("specs/rope.yaml")


def _judged(property_name: str, function, dtype: str = "float32"):
    spec = _spec()
    case = next(c for c in build_cases(spec, dtype) if c.id == f"property:{property_name}")
    return judge_case(spec, case, InProcessRunner(spec.contract.binding(function)), dtype)


def _squared_positions(x, token_positions, theta):
    """Not RoPE: each token turned by its position squared (scores then depend on more than offsets)."""
    return rotate(x, token_positions.to(torch.int64) ** 2, theta, "interleaved")


def _scaled(x, token_positions, theta):
    """Right angles, but every vector stretched by 1.5."""
    return 1.5 * rotate(x, token_positions, theta, "interleaved")


@pytest.mark.parametrize(
    ("property_name", "function", "check_text"),
    [
        pytest.param(
            "rope_scores_depend_on_offsets", _squared_positions, "with every position shifted by", id="offsets"
        ),
        pytest.param("rope_preserves_norm", _scaled, "a rotation keeps every vector's length", id="norm"),
    ],
)
def test_each_property_fails_what_breaks_it(property_name: str, function, check_text: str) -> None:
    """The property's own check fails (not only the values) and says why."""
    result = _judged(property_name, function)
    assert not result.passed
    assert check_text in (result.message or "")


@pytest.mark.parametrize(
    "property_name", ["rope_scores_depend_on_offsets", "rope_preserves_norm", "leading_dims_independent"]
)
def test_the_reference_passes_each_property(property_name: str) -> None:
    """The reference passes RoPE's properties and leading_dims_independent (theta kept 0-d) in float32."""
    result = _judged(property_name, lambda x, p, t: rotate(x, p, t, "interleaved"))
    assert result.passed, result.message
