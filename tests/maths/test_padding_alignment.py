"""Key padding with causal and window aligned at each item's valid key length (FlashAttention's), at
the padded length or top-left (attnscore/maths/families/key_padding.py), and ALiBi slopes per batch
item and head (attnscore/maths/families/kernel_attention.py): hand-computed values, gradients,
error bounds and whole specs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.catalogue.properties import get_property
from attnscore.check.implementation import run_impl
from attnscore.maths import golden_gradients as gg
from attnscore.maths.contracts import get_contract
from attnscore.maths.families import key_padding as kp
from attnscore.spec.load import load_spec
from tests.maths.test_golden_gradients import autograd, contract_case

PADDING = get_contract("key_padding_attention")
KERNEL = get_contract("kernel_attention")

# two batch items of 4 keys (3 and 1 valid), two queries, every score 0, values 1, 2, 4, 8
ARGS = {
    "query": np.zeros((2, 1, 2, 1)),
    "key": np.zeros((2, 1, 4, 1)),
    "value": np.array([1.0, 2.0, 4.0, 8.0]).reshape(1, 1, 4, 1).repeat(2, axis=0),
    "key_lengths": np.array([3, 1], dtype=np.int32),
}


def both(contract, args) -> tuple[np.ndarray, np.ndarray]:
    """The golden value and the torch reference's on ``args`` (float64)."""
    tensors = [torch.tensor(args[n]) for n in contract.parameter_names]
    return contract.golden(args), contract.reference(*tensors).numpy()


@pytest.mark.parametrize(
    "keywords, want",
    [
        # offsets [3 - 2, 1 - 2] = [1, -1]: item 0's queries sit at keys 1 and 2, item 1's at -1 and 0
        pytest.param({"is_causal": True}, [[1.5, 7 / 3], [0.0, 1.0]], id="causal at the valid length"),
        # offsets [4 - 2, 4 - 2]: item 0's queries both see its 3 valid keys, item 1's its one
        pytest.param(
            {"is_causal": True, "alignment": "bottom_right"}, [[7 / 3, 7 / 3], [1.0, 1.0]], id="causal at n_k"
        ),
        pytest.param({"is_causal": True, "alignment": "top_left"}, [[1.0, 1.5], [1.0, 1.0]], id="causal top-left"),
        # window (1, 0) at the valid length: item 0 query 0 keys 0..1, query 1 keys 1..2; item 1: none, key 0
        pytest.param({"window_size": [1, 0]}, [[1.5, 3.0], [0.0, 1.0]], id="window (1, 0)"),
        # window (0, 1), not causal: item 0 query 0 keys 1..2 (key 3 is padding), query 1 key 2 only
        pytest.param({"window_size": [0, 1]}, [[3.0, 4.0], [1.0, 1.0]], id="window (0, 1)"),
        pytest.param({}, [[7 / 3, 7 / 3], [1.0, 1.0]], id="no causal, no window"),
    ],
)
def test_hand_computed_values(keywords, want):
    """Every score is 0, so each output is the mean of the kept values; golden and reference agree."""
    contract = PADDING.configured(keywords)
    golden, reference = both(contract, ARGS)
    np.testing.assert_allclose(golden.reshape(2, 2), want, rtol=1e-15)
    np.testing.assert_allclose(reference.reshape(2, 2), want, rtol=1e-15)


def _flash_attention_ref_mask(lengths, n_q, n_k, causal, window):
    """FlashAttention's ``construct_local_mask`` as its tests document it, written out: with a key
    padding mask, ``sk`` is each item's valid key count and query ``i`` keeps key ``j`` when
    ``j < sk`` and ``i + sk - n_q - left <= j <= i + sk - n_q + right`` (causal: right = 0)."""
    left, right = (window[0], 0) if causal else window
    keep = np.zeros((len(lengths), n_q, n_k), dtype=bool)
    for b, sk in enumerate(lengths):
        for i in range(n_q):
            for j in range(n_k):
                inside = j < sk
                if left >= 0:
                    inside &= j >= i + sk - n_q - left
                if right >= 0:
                    inside &= j <= i + sk - n_q + right
                keep[b, i, j] = inside
    return keep


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [(-1, -1), (2, 0), (1, 1), (0, -1)])
@pytest.mark.parametrize("n_q", [1, 3, 5])
def test_valid_length_alignment_is_flash_attentions(causal, window, n_q):
    """On random scores the golden value equals softmax over FlashAttention's own mask (rows without
    a key give zeros), for item lengths 0 to n_k; the padded-length alignment differs on most points."""
    rng = np.random.default_rng(n_q * 31 + causal)
    n_k, lengths = 5, np.array([5, 3, 1, 0], dtype=np.int32)
    args = {
        "query": rng.normal(size=(4, 2, n_q, 3)),
        "key": rng.normal(size=(4, 1, n_k, 3)),
        "value": rng.normal(size=(4, 1, n_k, 2)),
        "key_lengths": lengths,
    }
    keep = _flash_attention_ref_mask(lengths, n_q, n_k, causal, window)[:, None]  # (b, 1, n_q, n_k)
    s = args["query"] @ args["key"].transpose(0, 1, 3, 2) / np.sqrt(3)  # (b, 2, n_q, n_k), K shared by both heads
    s = np.where(keep, s, -np.inf)
    w = np.exp(s - np.where(keep.any(-1, keepdims=True), s.max(-1, keepdims=True), 0.0))
    w = np.where(keep, w, 0.0)
    w = w / np.where(w.sum(-1, keepdims=True) > 0, w.sum(-1, keepdims=True), 1.0)
    want = w @ args["value"]
    contract = PADDING.configured({"is_causal": causal, "window_size": list(window)})
    golden, reference = both(contract, args)
    np.testing.assert_allclose(golden, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(reference, want, rtol=1e-12, atol=1e-12)


def test_offsets_per_alignment():
    """valid_length: key_lengths - n_q; bottom_right: n_k - n_q; top_left: 0."""
    lengths = np.array([0, 2, 5])
    for alignment, want in [("valid_length", [-3, -1, 2]), ("bottom_right", [2, 2, 2]), ("top_left", [0, 0, 0])]:
        assert kp.offsets(kp.KeyPaddingOptions(alignment=alignment), lengths, 3, 5).tolist() == want


def test_an_unknown_alignment_is_refused_with_the_choices():
    """The message names the keyword, the choices and what was found."""
    with pytest.raises(ValueError) as info:
        PADDING.configured({"alignment": "left"})
    assert (
        str(info.value) == "keyword alignment: expected one of 'valid_length', 'bottom_right', 'top_left', found 'left'"
    )


def test_the_alignment_is_a_convention_never_passed():
    """is_causal and window_size reach the implementation by name; the alignment does not."""
    contract = PADDING.configured({"is_causal": True, "window_size": [2, 0], "alignment": "bottom_right"})
    assert dict(contract.options) == {"is_causal": True, "window_size": (2, 0)}
    assert contract.options.stated()["alignment"] == "bottom_right"


CONFIGURED = [
    pytest.param(PADDING.configured(kw), id="-".join(f"{k}={v}" for k, v in kw.items()))
    for kw in (
        {"is_causal": True},
        {"window_size": [1, 1], "alignment": "bottom_right"},
        {"is_causal": True, "window_size": [2, 0], "alignment": "top_left", "scale": 0.5},
    )
]


@pytest.mark.parametrize("contract", CONFIGURED)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_gradients_equal_autograd(contract, data) -> None:
    """The closed-form float64 gradients equal torch autograd's of the reference."""
    args, d_out = data.draw(contract_case(contract))
    want = autograd(contract, args, d_out)
    got = gg.contract_gradients(contract, args, d_out)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=1e-9, err_msg=name)


def test_unused_keys_follow_the_alignment():
    """Causal at the valid length: item 0 (3 valid keys, queries at keys 1 and 2) uses keys 0..2,
    item 1 (one valid key) key 0; padding keys are unused too. Without causal or window: no rule."""
    rule = kp.unused_keys(PADDING.configured({"is_causal": True}))
    assert rule is not None
    assert rule(ARGS)["key"].tolist() == [[[False, False, False, True]], [[False, True, True, True]]]
    assert kp.unused_keys(PADDING) is None


SPEC = {
    "format": "attnscore-spec/1",
    "id": "padded_causal",
    "version": 1,
    "title": "Causal attention over padded keys, aligned at each item's valid length",
    "description": "FlashAttention's key padding with causal=True.",
    "function": {
        "name": "attention",
        "contract": "key_padding_attention",
        "keywords": {"is_causal": True, "alignment": "valid_length"},
        "parameters": [
            {"name": "query", "shape": ["b", "h_q", "n_q", "d_k"]},
            {"name": "key", "shape": ["b", "h_kv", "n_k", "d_k"]},
            {"name": "value", "shape": ["b", "h_kv", "n_k", "d_v"]},
            {"name": "key_lengths", "shape": ["b"]},
        ],
        "returns": {"shape": ["b", "h_q", "n_q", "d_v"]},
    },
    "dtypes": ["float32"],
    "seed": 7,
    "tolerance": {"mode": "dot_bound", "factor": 4},
    "worked_examples": [
        {
            "id": "queries_end_at_the_valid_length",
            "inputs": {k: v.tolist() for k, v in ARGS.items()},
            "expected": [[[[1.5], [2.3333333333333335]]], [[[0.0], [1.0]]]],
            "explanation": "Item 0's queries sit at keys 1 and 2, item 1's at -1 (no key) and 0.",
            "points": 1,
        }
    ],
    "properties": [
        {"name": "matches_reference", "points": 2, "examples": 15, "statement": "Matches the reference."},
        {"name": "keys_past_length_ignored", "points": 1, "examples": 10, "statement": "Padding is ignored."},
    ],
}


def test_a_spec_fixing_the_alignment_loads_and_the_reference_passes_it(tmp_path):
    """The hand-computed worked example holds on load (the loader checks it against the golden
    value); the reference itself, in float32, passes every case under the error bound; the
    padded-length alignment's kernel fails."""
    path = tmp_path / "padded_causal.yaml"
    path.write_text(yaml.safe_dump(SPEC, sort_keys=False), encoding="utf-8")
    spec = load_spec(path)
    assert spec.contract.options.stated() == {"alignment": "valid_length", "is_causal": True}
    ref = spec.contract.reference
    result = run_impl(spec, lambda q, k, v, lengths, **kw: ref(q, k, v, lengths), dtype="float32", shrink=False)
    assert result.all_passed, [c.message for c in result.cases if not c.passed]
    padded = PADDING.configured({"is_causal": True, "alignment": "bottom_right"}).reference
    wrong = run_impl(spec, lambda q, k, v, lengths, **kw: padded(q, k, v, lengths), dtype="float32", shrink=False)
    failed = [c.id for c in wrong.cases if not c.passed]
    assert {"example:queries_end_at_the_valid_length", "property:matches_reference"} <= set(failed), failed


# ALiBi slopes of shape (batch, h): item 0 slope ln 2, item 1 slope 0; one head, two queries and keys
SLOPES = {
    "query": np.zeros((2, 1, 2, 1)),
    "key": np.zeros((2, 1, 2, 1)),
    "value": np.array([1.0, 3.0]).reshape(1, 1, 2, 1).repeat(2, axis=0),
    "alibi_slopes": np.array([[np.log(2.0)], [0.0]]),
}


def test_batch_heads_slopes_by_hand():
    """With alibi_layout batch_heads the slopes parameter is (..., h_q); item 0's second query weighs
    key 0 (distance 1) by e^-ln2 = 1/2: (1·1/2 + 3·1)/(3/2) = 7/3; item 1 (slope 0) averages: 2."""
    contract = KERNEL.configured({"alibi_layout": "batch_heads", "is_causal": True})
    assert dict(contract.parameters)["alibi_slopes"] == ("...", "h_q")
    assert dict(KERNEL.parameters)["alibi_slopes"] == ("h_q",)
    assert dict(contract.options) == {"is_causal": True}  # the layout is a convention, never passed
    tensors = [torch.tensor(SLOPES[n]) for n in ("query", "key", "value")]
    got = contract.reference(*tensors, alibi_slopes=torch.tensor(SLOPES["alibi_slopes"])).reshape(2, 2)
    np.testing.assert_allclose(got.numpy(), [[1.0, 7 / 3], [1.0, 2.0]], rtol=1e-15)
    np.testing.assert_allclose(contract.golden(SLOPES).reshape(2, 2), [[1.0, 7 / 3], [1.0, 2.0]], rtol=1e-15)


BATCH_HEADS = KERNEL.configured({"alibi_layout": "batch_heads"})


@settings(max_examples=10, deadline=None)
@given(case=contract_case(BATCH_HEADS))
def test_batch_heads_slopes_gradients_error_bounds_and_properties(case):
    """Drawn slopes have the batch dims; gradients equal autograd's; the error bounds have the
    output's shape; the (h,)-versus-(batch, h) property does not apply (the slopes are already per item)."""
    contract = BATCH_HEADS
    args, d_out = case
    assert np.shape(args["alibi_slopes"]) == (*np.shape(args["query"])[:-3], np.shape(args["query"])[-3])
    want = autograd(contract, args, d_out)
    got = gg.contract_gradients(contract, args, d_out)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=1e-9, err_msg=name)
    out = contract.golden(args).shape
    assert contract.error_scale(args)[1].shape == out
    assert contract.low_precision_terms(args, "bfloat16", 2.0).rounding.shape == out
    per_batch = get_property("alibi_slopes_per_batch")
    assert per_batch.applies(KERNEL) and not per_batch.applies(contract)
