"""Which keys a family's keywords leave out of every query: the ``Family`` protocol's
``unused_keys`` (asked by the gradient property masked_entries_get_no_gradient)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.contracts import get_contract
from attnscore.maths.families.registry import family_of
from attnscore.maths.keyword_gradients import keyword_unused_keys


@pytest.mark.parametrize(
    ("name", "options", "kept", "expected"),
    [
        pytest.param("sdpa", {}, None, True, id="sdpa with a bool attn_mask"),
        pytest.param("sdpa", {}, ("query", "key", "value"), False, id="sdpa without a mask"),
        pytest.param("sdpa", {"is_causal": True}, ("query", "key", "value"), True, id="sdpa causal"),
        pytest.param("sdpa_float_mask", {}, None, False, id="sdpa float mask"),
        pytest.param("kernel_attention", {"softcap": 2.0}, None, False, id="kernel softcap only"),
        pytest.param("kernel_attention", {"is_causal": True}, None, True, id="kernel causal"),
        pytest.param("flash_attn", {}, None, False, id="flash full attention"),
        pytest.param("flash_attn", {"window_size": [2, -1]}, None, True, id="flash window"),
        pytest.param("flash_attn", {"causal": True}, None, True, id="flash causal"),
        pytest.param("flash_attn_varlen", {"causal": True}, None, False, id="packed batches not checked"),
        pytest.param("key_padding_attention", {}, None, False, id="key padding"),
        pytest.param("attention", {}, None, False, id="attention with a mask argument"),
        pytest.param("score_matrix", {}, None, False, id="score matrix"),
    ],
)
def test_unused_keys_rule_by_family(
    name: str, options: dict[str, Any], kept: tuple[str, ...] | None, expected: bool
) -> None:
    """A family says whether its keywords (SDPA: its bool attn_mask too) can leave a key out of every
    query: a rule for a call's arguments, or None."""
    c = get_contract(name).configured(options, kept)
    assert (family_of(c).unused_keys(c) is not None) is expected


def test_flash_window_leaves_early_keys_unused_in_its_own_layout() -> None:
    """FlashAttention's window (0, 0), one query over three keys (bottom-right): keys 0 and 1 unused,
    as (b, n_k, h_kv)."""
    c = get_contract("flash_attn").configured({"window_size": [0, 0]})
    q, k, v = np.ones((1, 1, 1, 2)), np.ones((1, 3, 1, 2)), np.ones((1, 3, 1, 2))
    rule = family_of(c).unused_keys(c)
    assert rule is not None
    unused = rule({"q": q, "k": k, "v": v})
    assert sorted(unused) == ["k", "v"]
    assert unused["k"].tolist() == [[[True], [True], [False]]]


def test_sdpa_grouped_heads_keep_a_key_any_query_head_keeps() -> None:
    """With GQA, a key/value head's key is used when any query head of its group keeps it."""
    c = get_contract("sdpa").configured({"enable_gqa": True})
    q, kv = np.ones((2, 1, 2)), np.ones((1, 2, 2))
    mask = np.array([[[True, False]], [[False, False]]])  # head 0 keeps key 0 only; head 1 none
    rule = family_of(c).unused_keys(c)
    assert rule is not None
    unused = rule({"query": q, "key": kv, "value": kv, "attn_mask": mask})
    assert unused["key"].tolist() == [[False, True]]


def test_full_attention_has_no_rule() -> None:
    """SDPA without a mask or is_causal, and FlashAttention without causal or a window, answer None."""
    for name, kept in (("sdpa", ("query", "key", "value")), ("flash_attn", None)):
        c = get_contract(name).configured({"scale": 0.5} if name == "sdpa" else {"softmax_scale": 0.5}, kept)
        assert family_of(c).unused_keys(c) is None


def test_two_d_inputs_give_one_row_of_keys() -> None:
    """2-D query, key and value (no head axis): the unused keys are (n_k,)."""
    one = np.ones((2, 1))
    got = keyword_unused_keys(("q", "k", "v"), {"q": one[:1], "k": one, "v": one}, AttentionOptions(window=(0, 0)))
    assert got["k"].tolist() == [False, True]
