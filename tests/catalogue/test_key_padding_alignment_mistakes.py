"""Key padding configured causal or windowed (``--keyword is_causal=true``, FlashAttention's
alignment at each item's valid key length): the catalogue's changes of general attention keep the
configured mask, and the alignment mistakes real kernels make are named."""

from __future__ import annotations

import math

import pytest
import torch

from attnscore.catalogue.mistakes import mistakes_for
from attnscore.catalogue.mistakes.shared import changed_attention
from attnscore.check.engineer_options import EngineerOptions
from attnscore.check.implementation import run_impl
from attnscore.check.verify import bundled_spec_path
from attnscore.maths.attention_changes import AttentionChange
from attnscore.spec.load import load_spec

SPEC = load_spec(bundled_spec_path("key_padding"))


def configured(*keywords: str):
    spec, _ = EngineerOptions.parse(keywords=keywords).reshape(SPEC)
    return spec


def kernel(offset: str, causal_read: bool = True):
    """A student's key-padding attention with ``is_causal``: query i sits at key i + offset, where
    offset is the item's valid length minus n_q (right), the padded n_k minus n_q, or 0; without
    ``causal_read`` the flag is taken and ignored."""

    def attention(query, key, value, key_lengths, is_causal=False, window_size=(-1, -1)):
        b, h_q, n_q, d = query.shape
        n_k = key.shape[-2]
        group = h_q // key.shape[1]
        key, value = key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)
        s = query @ key.transpose(-2, -1) / math.sqrt(d)
        j = torch.arange(n_k)
        outs = []
        for item in range(b):
            length = int(key_lengths[item])
            keep = (j < length)[None, :].expand(n_q, n_k)
            if is_causal and causal_read:
                shift = {"valid": length - n_q, "padded": n_k - n_q, "top_left": 0}[offset]
                keep = keep & (j[None, :] <= torch.arange(n_q)[:, None] + shift)
            w = torch.softmax(s[item].masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)
            outs.append(w @ value[item])
        return torch.stack(outs)

    return attention


def test_an_unchanged_call_is_the_configured_reference():
    """The family's mapping onto general attention keeps is_causal, the window and the per-item
    alignment: no change gives the reference itself (it gave non-causal attention before)."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 2, 3, 4, generator=g, dtype=torch.float64)
    k = torch.randn(2, 1, 5, 4, generator=g, dtype=torch.float64)
    v = torch.randn(2, 1, 5, 2, generator=g, dtype=torch.float64)
    lengths = torch.tensor([2, 5], dtype=torch.int32)
    for keywords in (("is_causal=true",), ("window_size=2,0",), ("is_causal=true", "window_size=1,0")):
        contract = configured(*keywords).contract
        got = changed_attention(contract, (q, k, v, lengths), AttentionChange())
        assert torch.equal(got, contract.reference(q, k, v, lengths)), keywords
    plain = changed_attention(SPEC.contract, (q, k, v, lengths), AttentionChange())
    assert not torch.allclose(plain, configured("is_causal=true").contract.reference(q, k, v, lengths))


def test_the_alignment_mistakes_apply_only_where_an_alignment_shows():
    ids = {m.id for m in mistakes_for(configured("is_causal=true").contract)}
    assert {"key_padding_aligned_at_padded_end", "key_padding_aligned_top_left", "causal_flag_ignored"} <= ids
    plain = {m.id for m in mistakes_for(SPEC.contract)}
    assert not {"key_padding_aligned_at_padded_end", "key_padding_aligned_top_left", "causal_flag_ignored"} & plain
    windowed = {m.id for m in mistakes_for(configured("window_size=2,0").contract)}
    assert "key_padding_aligned_at_padded_end" in windowed and "causal_flag_ignored" not in windowed


@pytest.mark.parametrize(
    "student, name",
    [
        (kernel("padded"), "key_padding_aligned_at_padded_end"),
        (kernel("top_left"), "key_padding_aligned_top_left"),
        (kernel("valid", causal_read=False), "causal_flag_ignored"),
    ],
    ids=["aligned at the padded length", "aligned top-left", "causal ignored"],
)
def test_a_kernel_aligned_elsewhere_loses_points_and_is_named(student, name):
    result = run_impl(configured("is_causal=true"), student, dtype="float32", shrink=False)
    names = {(c.diagnosis or {}).get("id") for c in result.cases if not c.passed} - {None}
    assert result.score < result.max_score
    assert names == {name}, names


def test_the_right_kernel_gets_full_marks_under_the_configured_options():
    result = run_impl(configured("is_causal=true"), kernel("valid"), dtype="float32", shrink=False)
    assert result.score == result.max_score, [c.id for c in result.cases if not c.passed]
