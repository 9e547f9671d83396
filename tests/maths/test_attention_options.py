"""General attention's options as one value (:class:`AttentionOptions`): the engines take it whole
or by name, with the same result, and refuse a mix, an unknown name or another type."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnscore.maths import golden_variants, gradient_formulas, variants
from attnscore.maths.attention_options import AttentionOptions, within_window

_Q = np.array([[[1.0, 0.5], [0.0, 1.0], [2.0, -1.0]]])  # (H=1, n_q=3, d=2)
_K = np.array([[[1.0, 0.0], [0.5, 0.5], [-1.0, 2.0]]])
_V = np.array([[[1.0], [2.0], [4.0]]])
_OPTIONS = {"is_causal": True, "alignment": "bottom_right", "scale": 0.5, "softcap": 3.0, "window": (1, 0)}


def test_of_builds_the_value_from_names_and_keeps_defaults() -> None:
    """Keywords become the value's fields; the rest keep plain attention's defaults."""
    o = AttentionOptions.of(None, {"scale": 0.5, "is_causal": True}, "general_attention")
    assert (o.scale, o.is_causal, o.alignment, o.window, o.attn_mask) == (0.5, True, "top_left", (-1, -1), None)
    assert AttentionOptions.of(o, {}, "general_attention") is o


@pytest.mark.parametrize(
    ("options", "keywords", "message"),
    [
        pytest.param(
            None, {"bogus": 1}, r"general_attention\(\) got an unexpected keyword argument 'bogus'", id="unknown name"
        ),
        pytest.param(AttentionOptions(), {"scale": 1.0}, "found both \\(options and 'scale'\\)", id="both forms"),
        pytest.param({"scale": 1.0}, {}, "expected options to be AttentionOptions, found dict", id="a dict"),
    ],
)
def test_of_refuses(options: object, keywords: dict[str, object], message: str) -> None:
    """An unknown keyword, both forms at once, or options of another type: a TypeError saying which."""
    with pytest.raises(TypeError, match=message):
        AttentionOptions.of(options, keywords, "general_attention")  # type: ignore[arg-type]


def test_engines_give_the_same_result_whole_or_by_name() -> None:
    """The torch reference, its float64 twin and the closed-form gradients agree for either form."""
    whole = AttentionOptions(**_OPTIONS)
    gold = golden_variants.general_attention(_Q, _K, _V, whole)
    assert np.array_equal(gold, golden_variants.general_attention(_Q, _K, _V, **_OPTIONS))
    ref = variants.general_attention(*(torch.tensor(x) for x in (_Q, _K, _V)), whole)
    assert torch.equal(ref, variants.general_attention(*(torch.tensor(x) for x in (_Q, _K, _V)), **_OPTIONS))
    np.testing.assert_allclose(ref.numpy(), gold, rtol=1e-12, atol=1e-12)
    d_out = np.ones_like(gold)
    by_value = gradient_formulas.general_attention(_Q, _K, _V, d_out, None, whole)
    by_name = gradient_formulas.general_attention(_Q, _K, _V, d_out, **_OPTIONS)
    assert all(np.array_equal(a, b) for a, b in zip(by_value, by_name, strict=True))


def test_varlen_refuses_key_lengths_in_either_form() -> None:
    """Packed batches take their lengths from cu_seqlens_k: key_lengths is refused, whole or by name."""
    q = np.ones((2, 1, 1))
    cu = np.array([0, 2])
    with pytest.raises(TypeError, match="key_lengths"):
        variants.varlen_attention(*(torch.tensor(x) for x in (q, q, q, cu, cu)), AttentionOptions(key_lengths=[2]))
    with pytest.raises(ValueError, match="key_lengths"):
        golden_variants.varlen_attention(q, q, q, cu, cu, AttentionOptions(key_lengths=[2]))


@given(
    rel=st.lists(st.integers(-6, 6), min_size=1, max_size=12),
    left=st.integers(-1, 4),
    right=st.integers(-1, 4),
)
def test_within_window_keeps_the_keys_of_the_window_on_numpy_and_torch(rel: list[int], left: int, right: int) -> None:
    """Key ``j`` stays where ``-left <= rel <= right`` (``-1``: that side unbounded), the same on a numpy
    array and a torch tensor, and a key already left out stays out."""
    expected = [(left == -1 or r >= -left) and (right == -1 or r <= right) for r in rel]
    as_numpy = within_window(np.ones(len(rel), dtype=bool), np.array(rel), (left, right))
    as_torch = within_window(torch.ones(len(rel), dtype=torch.bool), torch.tensor(rel), (left, right))
    assert as_numpy.tolist() == expected and as_torch.tolist() == expected
    none_kept = within_window(np.zeros(len(rel), dtype=bool), np.array(rel), (left, right))
    assert not none_kept.any()
