"""A spec configured again with other keyword values (attnscore/spec/reconfigure.py): the reference
and golden values follow them, worked examples that no longer hold are left out."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnscore.check.verify import bundled_spec_path
from attnscore.maths.contracts import get_contract
from attnscore.spec.load import load_spec
from attnscore.spec.reconfigure import example_holds, reconfigured, shown_value

SLIDING = load_spec(bundled_spec_path("sliding_window"))
SOFTCAP = load_spec(bundled_spec_path("softcap"))
SDPA = load_spec(bundled_spec_path("sdpa"))


def test_the_reference_and_golden_follow_the_new_window():
    """A causal (3, 0) window: query i averages keys i-3..i (equal scores), as the configured
    contract's reference and golden twin both say; the spec's own keyword values are gone."""
    done = reconfigured(SLIDING, {"window_size": (3, 0), "causal": True})
    contract = done.spec.contract
    assert dict(contract.options) == {"causal": True, "window_size": (3, 0)}
    q = np.zeros((1, 6, 1, 1))
    v = np.arange(1.0, 7.0).reshape(1, 6, 1, 1)
    want = [1.0, 1.5, 2.0, 2.5, 3.5, 4.5]  # means of 1..i+1 over at most 4 keys
    golden = contract.golden({"q": q, "k": q, "v": v}).reshape(-1)
    assert golden.tolist() == want
    ref = contract.reference(torch.tensor(q), torch.tensor(q), torch.tensor(v)).reshape(-1)
    assert ref.tolist() == want


def test_examples_that_no_longer_hold_are_listed_and_the_rest_kept():
    """With (2, 1) written again nothing changes; a window that widens to the right, (2, 4), keeps
    the examples whose queries have no key more than one ahead (their values still hold)."""
    same = reconfigured(SLIDING, {"window_size": [2, 1]})
    assert same.spec is SLIDING and same.unheld == () and same.chosen == ""
    default = reconfigured(SLIDING, {"softmax_scale": None})  # unset before: now passed, nothing else changes
    assert dict(default.spec.contract.options) == {"softmax_scale": None, "window_size": (2, 1)}
    assert default.spec.worked_examples == SLIDING.worked_examples and default.chosen == ""
    done = reconfigured(SLIDING, {"window_size": (2, 4)})
    assert done.assumed == "window_size=(2, 1)" and done.chosen == "window_size=(2, 4)"
    kept = [ex.id for ex in done.spec.worked_examples]
    assert sorted(kept + list(done.unheld)) == sorted(ex.id for ex in SLIDING.worked_examples)
    for ex in SLIDING.worked_examples:  # kept exactly when the written value equals the new golden one
        golden = done.spec.contract.golden(ex.inputs)
        assert (ex.id in kept) == bool(np.allclose(ex.expected, golden, rtol=1e-9, atol=1e-9, equal_nan=True))
    assert kept == ["window_aligned_bottom_right", "scaled_scores_on_grouped_heads"]
    assert done.unheld == (
        "window_two_back_one_ahead",
        "grouped_kv_heads",
        "far_key_with_huge_score",
        "scores_inside_the_window",
        "window_before_every_key",
    )


def test_an_example_holds_only_with_its_gradients_and_corner():
    """A written gradient that no longer holds, or a convention corner that no longer occurs, leaves
    the example out even when its forward value still holds."""
    contract = SDPA.contract
    ex = SDPA.worked_examples[0]
    assert example_holds(contract, ex)
    wrong_value = dataclasses.replace(ex, expected=ex.expected + 1.0)
    assert not example_holds(contract, wrong_value)
    corner = dataclasses.replace(ex, convention="fully_masked_row")
    assert not example_holds(contract, corner)  # no row of this example is fully masked
    flash2 = load_spec(bundled_spec_path("flash_attention_2"))
    with_grads = next(e for e in flash2.worked_examples if e.expected_gradients)
    assert example_holds(flash2.contract, with_grads)
    name = next(iter(with_grads.expected_gradients))
    bad = {**with_grads.expected_gradients, name: with_grads.expected_gradients[name] + 0.5}
    assert not example_holds(flash2.contract, dataclasses.replace(with_grads, expected_gradients=bad))


def test_a_softcap_merges_over_the_specs_own_keywords():
    """softcap=50 keeps the spec's is_causal=true (merged, not replaced); the capped reference
    equals 50·tanh(s/50) attention computed by hand."""
    done = reconfigured(SOFTCAP, {"softcap": 50})
    assert done.spec.contract.options.stated() == {"is_causal": True, "softcap": 50}
    assert done.assumed == "softcap=2.0" and done.chosen == "softcap=50"
    q = torch.tensor([[[[3.0, 0.0]]]], dtype=torch.float64)  # one query, two keys: causal keeps both
    k = torch.tensor([[[[40.0, 0.0], [0.0, 0.0]]]], dtype=torch.float64)
    v = torch.tensor([[[[1.0], [0.0]]]], dtype=torch.float64)
    s = torch.tensor([3.0 * 40.0 / 2**0.5, 0.0], dtype=torch.float64)
    w = torch.softmax(50 * torch.tanh(s / 50), dim=-1)
    got = done.spec.contract.reference(q, k, v)
    assert torch.allclose(got.reshape(-1), w[:1], rtol=1e-12)


def test_properties_that_no_longer_apply_are_left_out():
    """A causal-only property leaves the softcap spec once is_causal is false; the others stay."""
    done = reconfigured(SOFTCAP, {"is_causal": False})
    left = set(done.unapplied)
    for use in SOFTCAP.properties:
        applies = SOFTCAP.find_property(use.name).applies(done.spec.contract)
        assert (use.name in left) == (not applies)
    assert [u.name for u in done.spec.properties] == [u.name for u in SOFTCAP.properties if u.name not in left]


@pytest.mark.parametrize(
    "values, message",
    [
        pytest.param(
            {"window": (3, 0)},
            "expected a keyword of contract flash_attn (dropout_p, softmax_scale, causal, window_size), found 'window'",
            id="unknown keyword",
        ),
        pytest.param(
            {"window_size": (3,)},
            r"keyword window_size: expected [left, right], two integers each >= 0 or -1 (unbounded), found (3,)",
            id="one-sided window",
        ),
        pytest.param({"causal": "yes"}, "keyword causal: expected true or false, found 'yes'", id="causal as text"),
    ],
)
def test_a_keyword_the_contract_does_not_take_or_a_bad_value_is_refused(values, message):
    """The message names the keyword, what was expected and what was found."""
    with pytest.raises(ValueError) as info:
        reconfigured(SLIDING, values)
    assert str(info.value) == message


def test_the_interface_the_spec_states_is_kept():
    """Ties and the named leading dims the spec states survive the new configuration."""
    tied, _ = SLIDING.tied({"d_v": "d_k"})
    done = reconfigured(tied, {"causal": True})
    assert done.spec.contract.ties == tied.contract.ties
    assert done.spec.contract.parameters == tied.contract.parameters
    assert get_contract("flash_attn").configured({"causal": True}).parameters != done.spec.contract.parameters


@pytest.mark.parametrize(
    "value, text",
    [(True, "true"), (None, "null"), ((3, 0), "(3, 0)"), (0.125, "0.125"), ("valid_length", "valid_length")],
)
def test_values_are_shown_as_the_options_spell_them(value, text):
    """Bools and null as YAML writes them, windows as pairs."""
    assert shown_value(value) == text
