"""Mistakes built once as a change of general attention (:class:`AttentionChange`) apply to every
variant family that can show them, selected by features, and each family maps its own arguments and
layout onto the changed general attention (``attention_changed``): SDPA, the kernel variants,
FlashAttention's ``(b, n, h, d)`` layout, packed sequences and key padding."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.catalogue import families
from attnscore.catalogue.mistakes import get_mistake
from attnscore.catalogue.mistakes.shared import changed_attention
from attnscore.check.verify import mutation_test
from attnscore.maths import golden_variants, variants
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.contracts import get_contract
from attnscore.maths.families.base import not_general_attention
from attnscore.maths.families.registry import FAMILIES
from attnscore.spec.load import load_spec

VARIANT_SPECS = (
    "sdpa",
    "sdpa_causal",
    "sdpa_float_mask",
    "kv_cache",
    "sliding_window",
    "key_padding",
    "varlen",
    "softcap",
    "alibi",
    "gqa",
)


GROUPED = {"sdpa", "kv_cache", "sliding_window", "key_padding", "varlen", "gqa"}
"""The specs whose query heads share fewer key/value heads (``h_kv``; SDPA with ``enable_gqa``)."""


def _applies_to(mistake: str) -> set[str]:
    """The variant specs whose contract ``mistake`` applies to."""
    return {s for s in VARIANT_SPECS if get_mistake(mistake).applies(load_spec(f"specs/{s}.yaml").contract)}


@pytest.mark.parametrize(
    ("mistake", "expected"),
    [
        ("not_scaled", set(VARIANT_SPECS)),
        ("softmax_wrong_axis", set(VARIANT_SPECS)),
        # a query can keep no key: a bool mask, bottom-right causal or a window where n_q > n_k may
        # happen, zero valid keys; not the KV cache (n_q <= n_k), top-left causal, nothing masked, and
        # not SDPA's float mask (there it is sdpa_float_mask_nan_rows, in SDPA's words)
        ("nan_fully_masked", {"sdpa", "sliding_window", "key_padding", "varlen", "softcap"}),
        ("masked_with_large_negative", {"sdpa", "sliding_window", "key_padding", "varlen", "softcap"}),
        ("mask_ignored", {"sdpa"}),  # the float mask's is sdpa_float_mask_ignored
        ("kv_heads_tiled", GROUPED),
        ("kv_head_zero_for_all", GROUPED),
        ("kv_cache_causal_ignored", {"kv_cache"}),
        ("window_off_by_one", {"sliding_window"}),
    ],
)
def test_each_mistake_applies_to_the_specs_whose_family_can_show_it(mistake: str, expected: set[str]) -> None:
    assert _applies_to(mistake) == expected


def test_variants_are_selected_by_what_their_family_maps_not_by_name() -> None:
    """Every family that maps its calls onto general attention is selected; a renamed copy too."""
    mapped = {m.value for m, f in FAMILIES.items() if f.attention_changed is not not_general_attention}
    assert mapped == {"sdpa", "kernel_attention", "flash", "flash_varlen", "key_padding"}
    through = {c for c in ("sdpa", "sdpa_float_mask", "kernel_attention", "flash_attn", "flash_attn_varlen",
                           "key_padding_attention") if families.through_general_attention(get_contract(c))}  # fmt: skip
    assert len(through) == 6
    assert not families.through_general_attention(get_contract("attention"))
    copy = dataclasses.replace(get_contract("key_padding_attention"), name="my_padding")
    assert get_mistake("nan_fully_masked").applies(copy)
    with pytest.raises(ValueError, match="contract 'attention': expected a variant of general attention"):
        changed_attention(get_contract("attention"), (torch.ones(1, 1),) * 4, AttentionChange())


def test_causal_window_is_a_window() -> None:
    """window_off_by_one applies to a causal ``(w, 0)`` window too (Mistral's), not to plain causal."""
    flash = get_contract("flash_attn")
    assert get_mistake("window_off_by_one").applies(flash.configured({"causal": True, "window_size": [3, 0]}))
    assert not get_mistake("window_off_by_one").applies(flash.configured({"causal": True}))


# ---------------------------------------------------------------------------------------------
# the wrong functions, on inputs where they must differ from the reference (and where they must not)


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_not_scaled_in_flash_layout() -> None:
    """FlashAttention's (b, n, h, d) layout: the wrong output is the reference with softmax_scale = 1."""
    c = get_contract("flash_attn").configured({"window_size": [2, 1]})
    q, k, v = _rand(2, 3, 2, 4, seed=1), _rand(2, 5, 2, 4, seed=2), _rand(2, 5, 2, 3, seed=3)
    wrong = get_mistake("not_scaled").bind(c)(q, k, v)
    unscaled = c.configured({"window_size": [2, 1], "softmax_scale": 1.0}).reference(q, k, v)
    assert wrong.shape == (2, 3, 2, 3)
    torch.testing.assert_close(wrong, unscaled)
    assert not torch.allclose(wrong, c.reference(q, k, v))


def test_nan_fully_masked_only_where_no_key_is_valid() -> None:
    """Key padding: the batch item with zero valid keys is NaN, the other one is the reference."""
    c = get_contract("key_padding_attention")
    q, k, v = _rand(2, 2, 3, 4, seed=4), _rand(2, 1, 5, 4, seed=5), _rand(2, 1, 5, 2, seed=6)
    lengths = torch.tensor([0, 3], dtype=torch.int32)
    wrong = get_mistake("nan_fully_masked").bind(c)(q, k, v, lengths)
    right = c.reference(q, k, v, lengths)
    assert torch.isnan(wrong[0]).all() and (right[0] == 0).all()
    torch.testing.assert_close(wrong[1], right[1])


def test_nan_fully_masked_in_packed_sequences() -> None:
    """Packed causal sequences: a sequence with more queries than keys has NaN rows, per sequence."""
    c = get_contract("flash_attn_varlen").configured({"causal": True})
    q, k, v = _rand(5, 2, 3, seed=7), _rand(4, 1, 3, seed=8), _rand(4, 1, 2, seed=9)
    cu_q, cu_k = torch.tensor([0, 3, 5], dtype=torch.int32), torch.tensor([0, 1, 4], dtype=torch.int32)
    wrong = get_mistake("nan_fully_masked").bind(c)(q, k, v, cu_q, cu_k, 3, 3)
    right = c.reference(q, k, v, cu_q, cu_k, 3, 3)
    rows_nan = torch.isnan(wrong).all(dim=(1, 2)).tolist()
    assert rows_nan == [True, True, False, False, False]  # sequence 0: 3 queries, 1 key (bottom-right)
    torch.testing.assert_close(wrong[2:], right[2:])


def test_large_negative_fill_and_add_on_a_causal_kernel() -> None:
    """n_q > n_k, bottom-right causal: a filled row averages the values, an added fill gives the row's
    unmasked attention; rows that keep a key are the reference."""
    c = get_contract("kernel_attention").configured({"is_causal": True, "softcap": 2.0}, ("query", "key", "value"))
    q, k, v = _rand(1, 2, 4, 3, seed=10), _rand(1, 2, 2, 3, seed=11), _rand(1, 2, 2, 5, seed=12)
    mistake = get_mistake("masked_with_large_negative")
    filled, added = (mistake.bind(c, form=f)(q, k, v) for f in (0, 1))
    right = c.reference(q, k, v)
    torch.testing.assert_close(filled[..., :2, :], v.mean(dim=-2, keepdim=True).expand(1, 2, 2, 5))
    unmasked = variants.general_attention(q, k, v, softcap=2.0)
    torch.testing.assert_close(added[..., :2, :], unmasked[..., :2, :])
    torch.testing.assert_close(filled[..., 2:, :], right[..., 2:, :])
    torch.testing.assert_close(added[..., 2:, :], right[..., 2:, :])


def test_softmax_over_queries_sums_to_one_per_key() -> None:
    """SDPA with a bool mask: the zeroed form's weights sum to 1 over the queries for each key a query keeps."""
    c = get_contract("sdpa").configured({"scale": 0.5})
    q, k = _rand(1, 3, 4, seed=13), _rand(1, 5, 4, seed=14)
    mask = torch.ones(3, 5, dtype=torch.bool)
    v = torch.eye(5, dtype=torch.float64).unsqueeze(0)  # the output is the weights themselves
    zeroed = get_mistake("softmax_wrong_axis").bind(c, form=1)(q, k, v, mask)
    torch.testing.assert_close(zeroed.sum(dim=-2), torch.ones(1, 5, dtype=torch.float64))
    mask[:, 4] = False  # a key no query keeps: NaN as written, 0 in the zeroed form
    as_written = get_mistake("softmax_wrong_axis").bind(c)(q, k, v, mask)
    assert torch.isnan(as_written[..., 4]).all()
    assert (get_mistake("softmax_wrong_axis").bind(c, form=1)(q, k, v, mask)[..., 4] == 0).all()


def test_mask_ignored_on_sdpa_is_the_unmasked_call() -> None:
    c = get_contract("sdpa").configured({"scale": 0.5})
    q, k, v = _rand(2, 3, 4, seed=15), _rand(2, 5, 4, seed=16), _rand(2, 5, 2, seed=17)
    mask = torch.rand(2, 3, 5, generator=torch.Generator().manual_seed(1)) > 0.5
    wrong = get_mistake("mask_ignored").bind(c)(q, k, v, mask)
    torch.testing.assert_close(wrong, c.reference(q, k, v, torch.ones_like(mask)))
    assert not torch.allclose(wrong, c.reference(q, k, v, mask))


@pytest.mark.parametrize("contract", ["flash_attn", "key_padding_attention", "flash_attn_varlen"])
def test_kv_heads_tiled_and_head_zero_in_each_layout(contract: str) -> None:
    """Four query heads on two KV heads: tiled heads give value heads 0 1 0 1, head zero 0 0 0 0, where
    the reference gives 0 0 1 1 (one key whose value is its head's number)."""
    c = get_contract(contract)
    ones, heads = torch.ones(1, 4, 1, 1), torch.ones(1, 2, 1, 1)
    values = torch.tensor([0.0, 1.0]).reshape(1, 2, 1, 1)  # (b, h_kv, n_k, d_v)
    if contract == "key_padding_attention":
        args: tuple = (ones, heads, values, torch.tensor([1], dtype=torch.int32))
        read = lambda out: out.flatten().tolist()  # noqa: E731 - (b, h, n, d)
    elif contract == "flash_attn":
        args = (ones.transpose(1, 2), heads.transpose(1, 2), values.transpose(1, 2))
        read = lambda out: out.flatten().tolist()  # noqa: E731 - (b, n, h, d) with n = 1
    else:
        cu = torch.tensor([0, 1], dtype=torch.int32)
        args = (ones[0].transpose(0, 1), heads[0].transpose(0, 1), values[0].transpose(0, 1), cu, cu, 1, 1)
        read = lambda out: out.flatten().tolist()  # noqa: E731 - (total, h, d) with total = 1
    assert read(c.reference(*args)) == [0.0, 0.0, 1.0, 1.0]
    assert read(get_mistake("kv_heads_tiled").bind(c)(*args)) == [0.0, 1.0, 0.0, 1.0]
    assert read(get_mistake("kv_head_zero_for_all").bind(c)(*args)) == [0.0, 0.0, 0.0, 0.0]


def test_causal_dropped_only_with_a_cache() -> None:
    """kv_cache_causal_ignored's second form: the reference without a cache (n_q = n_k), the first
    form (no causal mask) with one (n_k > n_q)."""
    c = get_contract("flash_attn").configured({"causal": True})
    mistake = get_mistake("kv_cache_causal_ignored")
    q, k, v = _rand(1, 3, 1, 2, seed=18), _rand(1, 3, 1, 2, seed=19), _rand(1, 3, 1, 2, seed=20)
    torch.testing.assert_close(mistake.bind(c, form=1)(q, k, v), c.reference(q, k, v))
    k5, v5 = _rand(1, 5, 1, 2, seed=21), _rand(1, 5, 1, 2, seed=22)
    torch.testing.assert_close(mistake.bind(c, form=1)(q, k5, v5), mistake.bind(c, form=0)(q, k5, v5))
    assert not torch.allclose(mistake.bind(c, form=1)(q, k5, v5), c.reference(q, k5, v5))


# ---------------------------------------------------------------------------------------------
# the change itself


@settings(max_examples=25, deadline=None)
@given(
    n_q=st.integers(1, 4),
    n_k=st.integers(1, 4),
    causal=st.booleans(),
    left=st.integers(-1, 2),
    cap=st.sampled_from([None, 1.5]),
    alignment=st.sampled_from(["top_left", "bottom_right"]),
)
def test_no_change_is_the_reference(
    n_q: int, n_k: int, causal: bool, left: int, cap: float | None, alignment: str
) -> None:
    q, k, v = _rand(2, 4, n_q, 3, seed=n_q), _rand(2, 2, n_k, 3, seed=n_k + 10), _rand(2, 2, n_k, 2, seed=n_k + 20)
    options = {"is_causal": causal, "window": (left, -1), "softcap": cap, "alignment": alignment}
    right = variants.general_attention_parts(q, k, v, **options)
    same = variants.general_attention_parts(q, k, v, change=AttentionChange(), **options)
    for field in ("scores", "capped", "biased", "weights", "output", "lse"):
        torch.testing.assert_close(getattr(same, field), getattr(right, field), equal_nan=True)
    twin = golden_variants.general_attention(q.numpy(), k.numpy(), v.numpy(), **options)  # independent float64
    torch.testing.assert_close(same.output, torch.as_tensor(twin))


def test_scale_one_is_the_unscaled_scores() -> None:
    q, k, v = _rand(3, 4, seed=30), _rand(5, 4, seed=31), _rand(5, 2, seed=32)
    parts = variants.general_attention_parts(q, k, v, change=AttentionChange(options=(("scale", 1.0),)))
    torch.testing.assert_close(parts.scores, q @ k.T)
    assert math.isclose(float(parts.weights.sum()), 3.0)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"options": (("temperature", 2.0),)}, "expected fields of AttentionOptions, found 'temperature'"),
        ({"kv_heads": "shuffled"}, "expected one of grouped, tiled, first, found 'shuffled'"),
        ({"softmax_axis": 0}, "expected -1 or -2, found 0"),
    ],
)
def test_a_bad_change_is_refused(given: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AttentionChange(**given)


# ---------------------------------------------------------------------------------------------
# verify: caught and named as itself in every dtype of the spec


@pytest.mark.slow
@pytest.mark.parametrize(
    ("spec_id", "mistake"),
    [
        ("key_padding", "not_scaled"),
        ("key_padding", "nan_fully_masked"),
        ("varlen", "kv_heads_tiled"),
        ("sdpa", "mask_ignored"),
        ("softcap", "masked_with_large_negative"),
        ("sliding_window", "softmax_wrong_axis"),
    ],
)
def test_caught_and_named_in_every_dtype(spec_id: str, mistake: str) -> None:
    spec = load_spec(f"specs/{spec_id}.yaml")
    one = dataclasses.replace(spec, mistakes=(mistake,))
    for dtype in spec.dtypes:
        (result,) = mutation_test(one, dtype=dtype)
        assert result.caught and result.diagnosed, (dtype, result)
