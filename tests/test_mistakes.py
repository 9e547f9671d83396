"""The mistake catalogue: named, applicable, and really wrong."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.contracts import CONTRACTS
from attnscore.diagnosis import recompute
from attnscore.loader import load_spec
from attnscore.mistakes import MISTAKES, get_mistake, mistakes_for
from attnscore.verify import bundled_spec_paths

REQUIRED = {
    "scaled_by_half_dk",
    "scores_used_as_weights",
    "scores_divided_by_their_sum",
    "not_scaled",
    "scaled_by_dk",
    "scaled_by_sqrt_d_model",
    "keys_not_transposed",
    "all_axes_reversed",
    "output_transposed",
    "softmax_applied",
    "softmax_wrong_axis",
    "cosine_similarity",
    "absolute_value",
    "elementwise_not_summed",
    "keys_reversed",
    "mask_ignored",
    "mask_inverted",
    "additive_mask_nan",
    "nan_fully_masked",
    "computed_in_float16",
    "inputs_mutated",
    "all_zeros",
    "uniform_weights",
    "hard_coded_examples",
}


def test_catalogue_has_the_field_mistakes():
    """At least 20 mistakes, including every kind the issue lists, each with a message and contracts."""
    assert len(MISTAKES) >= 20 and REQUIRED <= set(MISTAKES)
    for m in MISTAKES.values():
        assert m.contracts and set(m.contracts) <= set(CONTRACTS), m.id
        assert len(m.message) > 30 and m.message[0].islower(), m.id


def test_unknown_mistake_names_the_known_ones():
    """get_mistake on an unknown id raises KeyError listing the catalogue."""
    with pytest.raises(KeyError, match="unknown mistake 'nope'; known: absolute_value"):
        get_mistake("nope")


@pytest.mark.parametrize("spec_path", [pytest.param(p, id=p.stem) for p in bundled_spec_paths()])
def test_every_applicable_mistake_is_wrong_on_some_worked_example_or_changes_inputs(spec_path):
    """Each mistake differs from the golden value on some worked example, or is a side-effect mistake."""
    spec = load_spec(spec_path)
    for mistake in mistakes_for(spec.contract.name):
        if mistake.id in (
            "inputs_mutated",
            "hard_coded_examples",
            "scaled_by_sqrt_d_model",
            "all_axes_reversed",
            "softmax_without_max_subtraction",
            "computed_in_float16",
            "elementwise_not_summed",
        ):
            continue  # side effects, or wrong only on generated/batched/large inputs (see verify)
        differs = False
        for ex in spec.worked_examples:
            got = recompute(mistake, spec, ex.inputs)
            if got is None or got.shape != ex.expected.shape or not np.allclose(got, ex.expected, equal_nan=True):
                differs = True
        assert differs, f"{mistake.id} matches every worked example of {spec.id}"


@pytest.mark.parametrize(
    "mistake_id, contract, args, expected",
    [
        pytest.param(
            "softmax_applied",
            "scores",
            ([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]]),
            [np.e / (np.e + 1), 1 / (np.e + 1)],
            id="softmax applied",
        ),
        pytest.param(
            "keys_not_transposed",
            "score_matrix",
            ([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]),
            [[19.0, 22.0], [43.0, 50.0]],
            id="K not transposed (field notes)",
        ),
        pytest.param(
            "scaled_by_sqrt_d_model",
            "scaled_score_matrix",
            (np.ones((4, 1, 4)), np.ones((4, 1, 4))),
            np.ones((4, 1, 1)),
            id="√d_model with 4 heads",
        ),
        pytest.param("scaled_by_dk", "scaled_score_matrix", ([[1.0] * 4], [[1.0] * 4]), [[1.0]], id="scaled by d_k"),
        pytest.param("not_scaled", "scaled_score_matrix", ([[1.0] * 4], [[1.0] * 4]), [[4.0]], id="not scaled"),
        pytest.param("cosine_similarity", "score", ([2.0, 0.0], [3.0, 0.0]), 1.0, id="cosine"),
        pytest.param(
            "softmax_wrong_axis",
            "attention_weights",
            ([[1.0, 3.0]], [[True, True]]),
            [[1.0, 1.0]],
            id="softmax over queries",
        ),
        pytest.param(
            "mask_ignored",
            "attention_weights",
            ([[2.0, 0.0]], [[True, False]]),
            [[np.e**2 / (np.e**2 + 1), 1 / (np.e**2 + 1)]],
            id="masked_fill result discarded",
        ),
    ],
)
def test_mistake_values_from_field_notes(mistake_id, contract, args, expected):
    """Each mistake reproduces the wrong value the field notes give for its small input."""
    c = CONTRACTS[contract]
    tensors = [
        torch.tensor(np.asarray(a), dtype=torch.bool if np.asarray(a).dtype == bool else torch.float64) for a in args
    ]
    out = MISTAKES[mistake_id].bind(c)(*tensors)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("mistake_id", ["additive_mask_nan", "nan_fully_masked"])
def test_nan_mistakes_give_nan(mistake_id):
    """(1-mask)·(-inf) gives NaN at kept entries; unguarded softmax gives NaN for a fully masked row."""
    S, mask = (
        torch.tensor([[1.0, 1.0]]),
        torch.tensor([[True, False]]) if mistake_id == "additive_mask_nan" else torch.tensor([[False, False]]),
    )
    out = MISTAKES[mistake_id].bind(CONTRACTS["attention_weights"])(S, mask)
    assert torch.isnan(out).any()


def test_inputs_mutated_changes_the_first_argument():
    """The inputs_mutated mistake returns the right value but changes its first argument."""
    Q = torch.tensor([[1.0, 2.0]])
    out = MISTAKES["inputs_mutated"].bind(CONTRACTS["score_matrix"])(Q, torch.tensor([[3.0, 4.0]]))
    assert out.tolist() == [[11.0]] and Q.tolist() == [[2.0, 3.0]]
