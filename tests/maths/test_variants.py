"""Tests for the attention-variant reference (attnscore.maths.variants)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnscore.maths import reference
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.variants import AttentionParts, general_attention, general_attention_parts, varlen_attention

F64 = torch.float64
LN3 = math.log(3.0)
LN2 = math.log(2.0)


def t(x, dtype=F64):
    """A float64 tensor from a nested list (the exact examples are written in float64)."""
    return torch.tensor(x, dtype=dtype)


def close(x, expected, atol=1e-14):
    """x equals the nested list expected within atol (inf entries must match exactly)."""
    torch.testing.assert_close(x, torch.tensor(expected, dtype=x.dtype), rtol=0, atol=atol)


def column(*values):
    """Keys or values of width 1: (n, 1)."""
    return t([[v] for v in values])


# ---------------------------------------------------------------- exact, hand-checked examples


def test_default_scale_and_every_stage():
    """Scores [0, ln 3] give weights [1/4, 3/4], output 1/4·4 + 3/4·8 = 7 and lse ln 4."""
    p = general_attention_parts(t([[1.0]]), column(0.0, LN3), column(4.0, 8.0))  # d_k = 1: scale 1
    assert isinstance(p, AttentionParts)
    assert p.scores.tolist() == [[0.0, LN3]]
    assert torch.equal(p.capped, p.scores) and torch.equal(p.biased, p.scores)
    close(p.weights, [[0.25, 0.75]], 1e-15)
    close(p.output, [[7.0]], 1e-14)
    close(p.lse, [math.log(4.0)], 1e-15)


def test_large_logits_do_not_overflow():
    """Scores 1000 and 1001: weights [1, e]/(1 + e) and lse 1001 + ln(1 + 1/e), no inf or NaN."""
    p = general_attention_parts(t([[1.0]]), column(1000.0, 1001.0), column(0.0, 1.0))
    e = math.e
    close(p.weights, [[1 / (1 + e), e / (1 + e)]], 1e-15)
    close(p.lse, [1001.0 + math.log1p(1 / e)], 1e-12)


def test_default_scale_is_one_over_sqrt_d_k():
    """q = k = ones(4): the scaled score is 4/√4 = 2 (not 4/4 nor 4)."""
    p = general_attention_parts(t([[1.0] * 4]), t([[1.0] * 4]), column(1.0))
    assert p.scores.tolist() == [[2.0]]
    assert general_attention_parts(t([[1.0] * 4]), t([[1.0] * 4]), column(1.0), scale=0.25).scores.tolist() == [[1.0]]


def test_float_mask_is_added_and_minus_inf_masks():
    """A float mask [0, ln 3] on equal scores gives weights [1/4, 3/4]; a -inf entry takes no part."""
    q, k, v = t([[1.0], [1.0]]), column(0.0, 0.0), column(4.0, 8.0)
    mask = t([[0.0, LN3], [float("-inf"), 0.0]])
    p = general_attention_parts(q, k, v, attn_mask=mask)
    close(p.weights, [[0.25, 0.75], [0.0, 1.0]], 1e-15)
    close(p.output, [[7.0], [8.0]], 1e-14)
    assert p.biased[1, 0].item() == float("-inf") and p.weights[1, 0].item() == 0.0


def test_minus_inf_float_entry_masks_whatever_the_score_is():
    """A +inf or NaN score under a -inf float mask entry takes no part (no inf - inf = NaN row), as ONNX decides."""
    q, v = t([[1.0]]), column(4.0, 8.0)
    for bad in (float("inf"), float("nan")):
        p = general_attention_parts(q, column(0.0, bad), v, attn_mask=t([0.0, float("-inf")]))
        assert p.weights.tolist() == [[1.0, 0.0]] and p.output.tolist() == [[4.0]]
        assert p.biased.tolist() == [[0.0, float("-inf")]]


def test_bool_mask_true_takes_part():
    """A bool mask [True, False] keeps the first key only (True = takes part, as SDPA)."""
    p = general_attention_parts(t([[1.0]]), column(0.0, 5.0), column(4.0, 8.0), attn_mask=torch.tensor([True, False]))
    assert p.weights.tolist() == [[1.0, 0.0]]
    assert p.output.tolist() == [[4.0]]
    assert p.scores.tolist() == [[0.0, 5.0]] and p.biased.tolist() == [[0.0, float("-inf")]]


def test_grouped_query_heads_are_grouped_not_tiled():
    """4 query heads over 2 KV heads: heads 0, 1 read KV head 0 and heads 2, 3 KV head 1 (h0 h0 h1 h1)."""
    q = torch.ones(1, 4, 1, 1, dtype=F64)  # (B, H_q, n_q, d_k)
    k = torch.zeros(1, 2, 1, 1, dtype=F64)  # (B, H_kv, n_k, d_k)
    v = t([[[[10.0]], [[20.0]]]])  # (B, H_kv, n_k, d_v)
    out = general_attention(q, k, v)
    assert out.flatten().tolist() == [10.0, 10.0, 20.0, 20.0]  # tiled would be [10, 20, 10, 20]


def test_multi_query_one_kv_head():
    """Multi-query attention: every query head reads the single KV head."""
    q = t([[[[0.0]], [[1.0]], [[2.0]]]])  # (1, 3, 1, 1)
    k = t([[[[0.0], [LN3]]]])  # (1, 1, 2, 1)
    v = t([[[[4.0], [8.0]]]])  # (1, 1, 2, 1)
    out = general_attention(q, k, v, scale=1.0).flatten()
    # head h: scores [0, h·ln 3] -> weights [1, 3^h] / (1 + 3^h)
    expected = [(4.0 + 8.0 * 3.0**h) / (1.0 + 3.0**h) for h in range(3)]
    close(out, expected, 1e-13)


def test_softcap_before_bias_and_mask():
    """capped = cap·tanh(s/cap) on the scaled scores, then the float mask is added and the bool-masked key is -inf."""
    q, k, v = t([[1.0]]), column(0.0, 2.0, 3.0), column(1.0, 2.0, 3.0)
    mask = t([[0.0, -1.0, float("-inf")]])
    p = general_attention_parts(q, k, v, softcap=1.0, attn_mask=mask)
    assert p.scores.tolist() == [[0.0, 2.0, 3.0]]
    assert p.capped.tolist() == [[0.0, math.tanh(2.0), math.tanh(3.0)]]
    assert p.biased.tolist() == [[0.0, math.tanh(2.0) - 1.0, float("-inf")]]  # not tanh(2 - 1)
    w1 = math.exp(math.tanh(2.0) - 1.0)
    close(p.weights, [[1 / (1 + w1), w1 / (1 + w1), 0.0]], 1e-15)


def test_softcap_scale_applied_once_before_the_cap():
    """scale 0.5 and cap 2: capped = 2·tanh((0.5·q·k)/2), the scale never applied again after the cap."""
    p = general_attention_parts(t([[2.0]]), column(3.0), column(1.0), scale=0.5, softcap=2.0)
    assert p.scores.item() == 3.0
    assert p.capped.item() == pytest.approx(2.0 * math.tanh(1.5), abs=1e-15)


@pytest.mark.parametrize(
    ("alignment", "expected"),
    [
        pytest.param("top_left", [3.0, 4.0], id="top_left: query i sees keys j <= i"),
        pytest.param("bottom_right", [4.0, 5.0], id="bottom_right: j <= i + n_k - n_q"),
        pytest.param(0, [3.0, 4.0], id="offset 0 = top_left"),
        pytest.param(1, [4.0, 5.0], id="offset 1 = bottom_right here"),
        pytest.param(2, [5.0, 5.0], id="offset 2: both see all keys"),
        pytest.param(-1, [0.0, 3.0], id="offset -1: query 0 sees no key"),
    ],
)
def test_causal_alignment(alignment, expected):
    """Two queries over three equal keys with values 3, 5, 7: the mean of the keys each one sees."""
    q, k, v = t([[1.0], [1.0]]), column(0.0, 0.0, 0.0), column(3.0, 5.0, 7.0)
    out = general_attention(q, k, v, is_causal=True, alignment=alignment)
    assert out.flatten().tolist() == expected


@pytest.mark.parametrize(
    ("window", "is_causal", "expected"),
    [
        pytest.param((1, 0), False, [0.0, 0.5, 1.5, 2.5], id="(1, 0): keys i-1 and i"),
        pytest.param((0, 1), False, [0.5, 1.5, 2.5, 3.0], id="(0, 1): keys i and i+1"),
        pytest.param((1, 1), True, [0.0, 0.5, 1.5, 2.5], id="causal makes right 0"),
        pytest.param((-1, 0), False, [0.0, 0.5, 1.0, 1.5], id="(-1, 0) = causal"),
        pytest.param((0, 0), False, [0.0, 1.0, 2.0, 3.0], id="(0, 0): own key only"),
        pytest.param((-1, -1), True, [0.0, 0.5, 1.0, 1.5], id="unbounded window, causal"),
    ],
)
def test_sliding_window(window, is_causal, expected):
    """Four queries over four equal keys with values 0..3: the mean of the keys inside the window."""
    q, k, v = torch.ones(4, 1, dtype=F64), column(0.0, 0.0, 0.0, 0.0), column(0.0, 1.0, 2.0, 3.0)
    out = general_attention(q, k, v, window=window, is_causal=is_causal)
    assert out.flatten().tolist() == expected


def test_per_batch_alignment_offsets():
    """Offsets [0, 2] per batch item: item 0 is top-left causal, item 1 sees two more keys (ONNX's external cache)."""
    q, k = torch.ones(2, 1, 2, 1, dtype=F64), torch.zeros(2, 1, 3, 1, dtype=F64)
    v = t([[3.0, 5.0, 7.0]] * 2).reshape(2, 1, 3, 1)
    out = general_attention(q, k, v, is_causal=True, alignment=torch.tensor([0, 2]))
    assert out.flatten().tolist() == [3.0, 4.0, 5.0, 5.0]
    for b, offset in enumerate((0, 2)):
        assert torch.equal(out[b], general_attention(q[b], k[b], v[b], is_causal=True, alignment=offset))


def test_onnx_external_cache_offset_is_valid_length_minus_n_q():
    """ONNX nonpad_kv_seqlen: offset[b] = key_lengths[b] - n_q aligns the last query with the last valid key."""
    q, k = torch.ones(2, 1, 1, 1, dtype=F64), torch.zeros(2, 1, 4, 1, dtype=F64)
    v = t([[1.0, 2.0, 3.0, 4.0]] * 2).reshape(2, 1, 4, 1)
    lengths = torch.tensor([2, 4])
    out = general_attention(q, k, v, is_causal=True, window=(0, -1), key_lengths=lengths, alignment=lengths - 1)
    assert out.flatten().tolist() == [2.0, 4.0]  # each query sees exactly its last valid key


def test_window_follows_the_alignment():
    """One query, bottom-right, window (1, 0): it sees the last two of four keys (values 2, 3)."""
    q, k, v = t([[1.0]]), column(0.0, 0.0, 0.0, 0.0), column(0.0, 1.0, 2.0, 3.0)
    assert general_attention(q, k, v, window=(1, 0), alignment="bottom_right").item() == 2.5
    assert general_attention(q, k, v, window=(1, 0)).item() == 0.0  # top_left: keys -1 and 0


def test_alibi_per_head():
    """Slope ln 2, one query aligned bottom-right with key 2: bias [-2 ln 2, -ln 2, 0] -> weights [1, 2, 4]/7."""
    q = torch.zeros(1, 1, 1, dtype=F64)  # (H_q, n_q, d_k)
    k = torch.zeros(1, 3, 1, dtype=F64)
    v = t([[[7.0], [14.0], [0.0]]])
    p = general_attention_parts(q, k, v, alibi_slopes=t([LN2]), alignment="bottom_right")
    close(p.biased.flatten(), [-2 * LN2, -LN2, 0.0], 1e-15)
    close(p.weights.flatten(), [1 / 7, 2 / 7, 4 / 7], 1e-15)
    assert p.output.item() == pytest.approx(5.0, abs=1e-14)  # the wrong sign would give 4 + 4 = 8
    assert torch.equal(p.capped, p.scores) and p.scores.abs().max().item() == 0.0


def test_alibi_distance_is_symmetric():
    """Top-left, one query at position 0 over keys 0..2, no causal mask: bias -slope·|0 - j| = [0, -1, -2]."""
    q, k, v = torch.zeros(1, 1, 1, dtype=F64), torch.zeros(1, 3, 1, dtype=F64), torch.zeros(1, 3, 1, dtype=F64)
    p = general_attention_parts(q, k, v, alibi_slopes=t([1.0]))
    assert p.biased.flatten().tolist() == [0.0, -1.0, -2.0]
    p2 = general_attention_parts(torch.zeros(1, 3, 1, dtype=F64), k, v, alibi_slopes=t([1.0]))
    assert p2.biased[0].tolist() == [[0.0, -1.0, -2.0], [-1.0, 0.0, -1.0], [-2.0, -1.0, 0.0]]


def test_alibi_per_batch_and_head():
    """(B, H_q) slopes: batch 0 head 1 gets slope 2, batch 1 head 0 slope 3."""
    q, k = torch.zeros(2, 2, 1, 1, dtype=F64), torch.zeros(2, 2, 2, 1, dtype=F64)
    v = torch.zeros(2, 2, 2, 1, dtype=F64)
    p = general_attention_parts(q, k, v, alibi_slopes=t([[1.0, 2.0], [3.0, 4.0]]))
    assert p.biased[:, :, 0, 1].tolist() == [[-1.0, -2.0], [-3.0, -4.0]]


def test_key_lengths_mask_keys_per_batch_item():
    """key_lengths [1, 2, 0]: batch 0 sees key 0 (2), batch 1 both (3), batch 2 none (0, lse -inf)."""
    q = torch.ones(3, 1, 1, 1, dtype=F64)
    k = torch.zeros(3, 1, 2, 1, dtype=F64)
    v = t([[2.0, 4.0]] * 3).reshape(3, 1, 2, 1)
    p = general_attention_parts(q, k, v, key_lengths=torch.tensor([1, 2, 0]))
    assert p.output.flatten().tolist() == [2.0, 3.0, 0.0]
    close(p.lse.flatten(), [0.0, LN2, float("-inf")])
    assert p.weights[2].abs().sum().item() == 0.0


def test_fully_masked_row_gives_zeros_and_minus_inf_lse():
    """A row masked by a bool mask, and one masked by -inf float entries, both give zero weights and output."""
    q, k, v = torch.ones(2, 1, dtype=F64), column(0.0, 1.0), column(5.0, 6.0)
    for mask in (torch.tensor([[True, True], [False, False]]), t([[0.0, 0.0], [float("-inf")] * 2])):
        p = general_attention_parts(q, k, v, attn_mask=mask)
        assert p.output[1].tolist() == [0.0] and p.weights[1].tolist() == [0.0, 0.0]
        assert p.lse[1].item() == float("-inf")
        assert not torch.isnan(p.output).any()


def test_two_d_inputs_have_no_head_axis():
    """2-D query, key and value give 2-D stages and a 1-D lse."""
    p = general_attention_parts(torch.ones(3, 2), torch.ones(4, 2), torch.ones(4, 5))
    assert p.scores.shape == (3, 4) and p.output.shape == (3, 5) and p.lse.shape == (3,)


def test_batch_dims_broadcast():
    """Key and value with batch 1 broadcast against a query with batch 2."""
    q = torch.randn(2, 2, 3, 4, dtype=F64)
    k, v = torch.randn(1, 1, 5, 4, dtype=F64), torch.randn(1, 1, 5, 2, dtype=F64)
    out = general_attention(q, k, v)
    assert out.shape == (2, 2, 3, 2)
    assert torch.allclose(out[1], general_attention(q[1], k[0], v[0]), atol=1e-14, rtol=0)


def test_inputs_are_not_modified():
    """No input, mask or option tensor is written to."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 3, 2, generator=g) for _ in range(3))
    mask = torch.randn(3, 3)
    slopes, lengths = torch.rand(2, 4), torch.tensor([2, 3])
    before = [x.clone() for x in (q, k, v, mask, slopes, lengths)]
    general_attention_parts(q, k, v, attn_mask=mask, alibi_slopes=slopes, key_lengths=lengths, softcap=2.0)
    assert all(torch.equal(a, b) for a, b in zip(before, (q, k, v, mask, slopes, lengths), strict=True))


def test_numpy_and_list_inputs():
    """numpy arrays keep their dtype; lists take the default float dtype, a float list mask the query's."""
    out = general_attention(np.ones((1, 2)), np.ones((2, 2)), np.array([[1.0], [3.0]]))
    assert out.dtype == torch.float64 and out.tolist() == [[2.0]]
    out32 = general_attention([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0], [3.0]], attn_mask=[[0.0, float("-inf")]])
    assert out32.dtype == torch.float32 and out32.tolist() == [[1.0]]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_computed_in_float32_rounded_once(dtype):
    """Half inputs: every stage is the float32 computation rounded once; lse stays float32."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 5, 8, generator=g).to(dtype) for _ in range(3))
    kw = {"is_causal": True, "softcap": 3.0, "alibi_slopes": torch.rand(4, generator=g), "alignment": "bottom_right"}
    p = general_attention_parts(q, k, v, **kw)
    p32 = general_attention_parts(q.float(), k.float(), v.float(), **kw)
    for name in ("scores", "capped", "biased", "weights", "output"):
        got, want = getattr(p, name), getattr(p32, name)
        assert got.dtype == dtype
        assert torch.equal(got, want.to(dtype)), name
    assert p.lse.dtype == torch.float32 and torch.equal(p.lse, p32.lse)


def test_half_scores_do_not_overflow_before_scaling():
    """float16, d_k = 16, q = k = 70·ones: q·k = 78400 overflows float16, the scaled score 19600 does not."""
    q = torch.full((1, 16), 70.0, dtype=torch.float16)
    p = general_attention_parts(q, q, torch.ones(1, 1, dtype=torch.float16))
    assert p.scores.item() == 19600.0 and p.output.item() == 1.0


def test_varlen_docstring_example_and_boundaries():
    """Two sequences of lengths 2 and 1: the first averages its own two values, the second sees only its own."""
    q, k = torch.ones(3, 1, 1), torch.zeros(3, 1, 1)
    v = t([[[2.0]], [[4.0]], [[6.0]]], torch.float32)
    cu = torch.tensor([0, 2, 3], dtype=torch.int32)
    assert varlen_attention(q, k, v, cu, cu).flatten().tolist() == [3.0, 3.0, 6.0]  # across the boundary: 4, 4, 4
    assert varlen_attention(q, k, v, cu, cu, is_causal=True).flatten().tolist() == [2.0, 3.0, 6.0]


def test_varlen_empty_sequence_and_bottom_right():
    """An empty key sequence gives zero rows; bottom-right alignment uses each sequence's own lengths."""
    q, k = torch.ones(3, 1, 1, dtype=F64), torch.zeros(4, 1, 1, dtype=F64)
    v = t([[[1.0]], [[2.0]], [[3.0]], [[4.0]]])
    cu_q, cu_k = torch.tensor([0, 1, 3]), torch.tensor([0, 0, 4])
    out = varlen_attention(q, k, v, cu_q, cu_k, is_causal=True, alignment="bottom_right")
    # sequence 0 has no keys; sequence 1: two queries over four keys, offset 2: keys {0,1,2}, {0..3}
    assert out.flatten().tolist() == [0.0, 2.0, 2.5]


def test_varlen_mask_blocks_and_alibi_per_sequence():
    """A packed float mask's diagonal blocks apply; (B, H_q) slopes apply per sequence."""
    q, k, v = torch.zeros(2, 1, 1, dtype=F64), torch.zeros(4, 1, 1, dtype=F64), t([[[0.0]], [[3.0]], [[0.0]], [[3.0]]])
    cu_q, cu_k = torch.tensor([0, 1, 2]), torch.tensor([0, 2, 4])
    mask = torch.zeros(2, 4, dtype=F64)
    mask[0, 1] = LN2  # sequence 0: weights [1, 2]/3 -> 2
    out = varlen_attention(q, k, v, cu_q, cu_k, attn_mask=mask)
    close(out.flatten(), [2.0, 1.5], 1e-15)
    slopes = t([[0.0], [LN2]])  # sequence 1: top-left query 0, key distances [0, 1] -> weights [2, 1]/3 -> 1
    out2 = varlen_attention(q, k, v, cu_q, cu_k, alibi_slopes=slopes)
    close(out2.flatten(), [1.5, 1.0], 1e-15)


# ---------------------------------------------------------------- relational properties


def _tensors(seed, *shapes, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=torch.float64).to(dtype) for s in shapes]


dims = st.fixed_dictionaries(
    {
        "b": st.integers(1, 2),
        "h_kv": st.integers(1, 3),
        "group": st.integers(1, 3),
        "n_q": st.integers(1, 6),
        "n_k": st.integers(1, 7),
        "d_k": st.integers(1, 5),
        "d_v": st.integers(1, 4),
        "seed": st.integers(0, 2**31 - 1),
    }
)


def _qkv(d, dtype=F64):
    h_q = d["h_kv"] * d["group"]
    return _tensors(
        d["seed"],
        (d["b"], h_q, d["n_q"], d["d_k"]),
        (d["b"], d["h_kv"], d["n_k"], d["d_k"]),
        (d["b"], d["h_kv"], d["n_k"], d["d_v"]),
        dtype=dtype,
    )


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(dims, st.sampled_from([False, True]), st.sampled_from([None, 2.0]))
def test_gqa_equals_repeated_kv_heads(d, is_causal, softcap):
    """GQA equals attention with each KV head repeated H_q / H_kv times in place (repeat_interleave)."""
    q, k, v = _qkv(d)
    kw = {"is_causal": is_causal, "softcap": softcap, "alignment": "bottom_right"}
    grouped = general_attention(q, k, v, **kw)
    repeated = general_attention(
        q, k.repeat_interleave(d["group"], dim=1), v.repeat_interleave(d["group"], dim=1), **kw
    )
    torch.testing.assert_close(grouped, repeated, rtol=0, atol=1e-14)


@settings(max_examples=60, deadline=None)
@given(dims, st.sampled_from([F64, torch.float32]), st.booleans(), st.sampled_from([None, 0.3]))
def test_default_options_equal_reference_attention(d, dtype, with_mask, scale):
    """Without variant options (one KV head per query head) the result is reference.attention's."""
    d = {**d, "group": 1}
    q, k, v = _qkv(d, dtype)
    mask = None
    if with_mask:
        mask = torch.rand(d["b"], 1, d["n_q"], d["n_k"], generator=torch.Generator().manual_seed(d["seed"])) > 0.4
    got = general_attention(q, k, v, attn_mask=mask, scale=scale)
    want = reference.attention(q, k, v, mask, scale)
    tol = 1e-14 if dtype == F64 else 1e-6
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@settings(max_examples=60, deadline=None)
@given(dims, st.sampled_from(["top_left", "bottom_right"]))
def test_causal_equals_reference_causal_attention(d, alignment):
    """is_causal with top_left / bottom_right alignment equals reference.causal_attention."""
    d = {**d, "group": 1}
    q, k, v = _qkv(d)
    got = general_attention(q, k, v, is_causal=True, alignment=alignment)
    torch.testing.assert_close(got, reference.causal_attention(q, k, v, alignment), rtol=1e-14, atol=1e-14)


windows = st.tuples(st.sampled_from([-1, 0, 1, 2, 4]), st.sampled_from([-1, 0, 1, 3]))
alignments = st.sampled_from(["top_left", "bottom_right", 0, 1, 3, -1])


@settings(max_examples=80, deadline=None)
@given(dims, windows, alignments, st.booleans(), st.data())
def test_keys_outside_the_window_or_padding_never_matter(d, window, alignment, is_causal, data):
    """Changing the keys and values that the window, causal mask or key padding exclude leaves the output unchanged."""
    q, k, v = _qkv(d)
    lengths = torch.tensor(data.draw(st.lists(st.integers(0, d["n_k"]), min_size=d["b"], max_size=d["b"])))
    kw = {"window": window, "alignment": alignment, "is_causal": is_causal, "key_lengths": lengths}
    p = general_attention_parts(q, k, v, **kw)
    excluded = torch.isneginf(p.biased).all(dim=(1, 2))  # (B, n_k): no query of any head uses the key
    k2, v2 = _tensors(d["seed"] + 1, k.shape, v.shape)
    k_mix = torch.where(excluded[:, None, :, None], 100 * k2, k)
    v_mix = torch.where(excluded[:, None, :, None], 100 * v2, v)
    p2 = general_attention_parts(q, k_mix, v_mix, **kw)
    assert torch.equal(p2.output, p.output)
    # per query: a key masked for that query only may change its score, never its output
    n_q, n_k = d["n_q"], d["n_k"]
    i = torch.arange(n_q)[:, None]
    j = torch.arange(n_k)[None, :]
    offset = {"top_left": 0, "bottom_right": n_k - n_q}.get(alignment, alignment)
    rel = j - i - offset
    left, right = window
    right = 0 if is_causal else right
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    if left != -1:
        keep &= rel >= -left
    if right != -1:
        keep &= rel <= right
    keep = keep & (j < lengths[:, None, None, None])  # (B, 1, n_q, n_k)
    assert torch.equal(~torch.isneginf(p.biased), keep.expand_as(p.biased))


@settings(max_examples=60, deadline=None)
@given(dims, st.floats(0.05, 30.0), st.floats(0.1, 50.0))
def test_softcapped_scores_stay_within_the_cap(d, cap, magnitude):
    """|capped| <= cap for every entry however large the scores, and capped keeps the sign of the scores."""
    q, k, v = _qkv(d)
    p = general_attention_parts(q * magnitude, k * magnitude, v, softcap=cap)
    assert (p.capped.abs() <= cap).all()
    assert torch.equal(torch.sign(p.capped), torch.sign(p.scores)) or (p.scores.abs() < 1e-300).any()


@settings(max_examples=60, deadline=None)
@given(dims, st.data(), st.sampled_from([(-1, -1), (2, 0), (0, 0)]), st.sampled_from([None, 1.5]))
def test_decode_with_a_cache_equals_rows_of_full_causal_attention(d, data, window, slope):
    """Queries past..n-1 with alignment=past (the cache length) equal the matching rows of full causal attention."""
    n = d["n_k"]
    past = data.draw(st.integers(0, n - 1))
    d = {**d, "n_q": n}
    q, k, v = _qkv(d)
    slopes = None if slope is None else torch.full((q.shape[1],), slope, dtype=F64)
    full = general_attention(q, k, v, is_causal=True, window=window, alibi_slopes=slopes)
    step = general_attention(q[:, :, past:], k, v, is_causal=True, alignment=past, window=window, alibi_slopes=slopes)
    torch.testing.assert_close(step, full[:, :, past:], rtol=0, atol=1e-14)
    br = general_attention(q[:, :, past:], k, v, is_causal=True, alignment="bottom_right", window=window)
    torch.testing.assert_close(br, general_attention(q, k, v, is_causal=True, window=window)[:, :, past:])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5)), min_size=1, max_size=4),
    st.integers(1, 2),
    st.integers(1, 2),
    st.sampled_from(["top_left", "bottom_right", 2, "per sequence"]),
    st.booleans(),
    windows,
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_varlen_equals_sequences_one_by_one(lens, h_kv, group, alignment, is_causal, window, alibi, seed):
    """A packed batch gives, per sequence, what general_attention gives on that sequence alone."""
    h_q, d_k, d_v = h_kv * group, 3, 2
    total_q, total_k = sum(a for a, _ in lens), sum(b for _, b in lens)
    q, k, v = _tensors(seed, (total_q, h_q, d_k), (total_k, h_kv, d_k), (total_k, h_kv, d_v))
    cu_q = torch.tensor([0] + np.cumsum([a for a, _ in lens]).tolist(), dtype=torch.int32)
    cu_k = torch.tensor([0] + np.cumsum([b for _, b in lens]).tolist(), dtype=torch.int32)
    slopes = _tensors(seed + 1, (len(lens), h_q))[0].abs() if alibi else None
    offsets = torch.tensor([b - a for a, b in lens])  # per sequence: n_k_b - n_q_b, written out
    kw = {"is_causal": is_causal, "window": window, "softcap": 4.0}
    aligned = offsets if alignment == "per sequence" else alignment
    packed = varlen_attention(q, k, v, cu_q, cu_k, alibi_slopes=slopes, alignment=aligned, **kw)
    assert packed.shape == (total_q, h_q, d_v)
    for b in range(len(lens)):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        alone = general_attention(
            q[q0:q1].transpose(0, 1),
            k[k0:k1].transpose(0, 1),
            v[k0:k1].transpose(0, 1),
            alibi_slopes=None if slopes is None else slopes[b],
            alignment=int(offsets[b]) if alignment == "per sequence" else alignment,
            **kw,
        ).transpose(0, 1)
        torch.testing.assert_close(packed[q0:q1], alone, rtol=0, atol=0)


@settings(max_examples=60, deadline=None)
@given(
    dims,
    st.sampled_from(["none", "bool", "float"]),
    st.booleans(),
    st.sampled_from([None, 0.25, 1.7]),
    st.sampled_from([F64, torch.float32, torch.float16, torch.bfloat16]),
)
def test_agrees_with_sdpa_math_backend(d, mask_kind, is_causal, scale, dtype):
    """Output equals torch's scaled_dot_product_attention (math backend) for masks, is_causal, scale and enable_gqa."""
    q, k, v = _qkv(d, dtype)
    g = torch.Generator().manual_seed(d["seed"])
    mask = None
    if mask_kind != "none" and not is_causal:  # SDPA refuses a mask together with is_causal
        keep = torch.rand(d["b"], 1, d["n_q"], d["n_k"], generator=g) > 0.3
        if mask_kind == "bool":
            mask = keep
        else:
            mask = torch.randn(keep.shape, generator=g, dtype=F64).masked_fill(~keep, float("-inf")).to(dtype)
    with sdpa_kernel(SDPBackend.MATH):
        want = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=d["group"] > 1
        )
    got = general_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)
    assert got.dtype == dtype
    tol = {F64: 1e-13, torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


# ---------------------------------------------------------------- every bad argument: one ScoreInputError


def _q(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


Q4, K4, V4 = _q(2, 4, 3, 5), _q(2, 2, 6, 5), _q(2, 2, 6, 7)

BAD_CALLS = [
    pytest.param((_q(5), _q(6, 5), _q(6, 7)), {}, "query", "at least 2-D", id="query 1-D"),
    pytest.param((_q(3, 5), _q(1, 6, 5), _q(6, 7)), {}, "key", "2-D, like the 2-D query", id="key 3-D for 2-D query"),
    pytest.param((Q4, _q(2, 6, 5), V4), {}, "key", "query's rank 4", id="key rank differs"),
    pytest.param((Q4, K4, _q(2, 2, 7)), {}, "value", "query's rank 4", id="value rank differs"),
    pytest.param((Q4, _q(2, 2, 6, 4), V4), {}, "key", "d_k=5", id="mismatched d_k"),
    pytest.param((Q4, K4, _q(2, 2, 5, 7)), {}, "value", "n_k=6", id="value n_k differs"),
    pytest.param((Q4, K4, _q(2, 1, 6, 7)), {}, "value", "H_kv=2", id="value heads differ"),
    pytest.param(
        (Q4, _q(2, 3, 6, 5), _q(2, 3, 6, 7)), {}, "key", "divides the query's H_q=4", id="heads do not divide"
    ),
    pytest.param(
        (Q4, _q(3, 2, 6, 5), _q(3, 2, 6, 7)), {}, "key", "broadcast with the query", id="batch does not broadcast"
    ),
    pytest.param((Q4, K4.double(), V4), {}, "key", "dtype", id="key dtype differs"),
    pytest.param(
        (Q4, K4, V4), {"attn_mask": torch.zeros(3, 5)}, "attn_mask", "broadcasts from the right", id="mask wrong n_k"
    ),
    pytest.param(
        (Q4, K4, V4), {"attn_mask": torch.zeros(3, 2, 4, 3, 6)}, "attn_mask", "(2, 4, 3, 6)", id="mask enlarges"
    ),
    pytest.param(
        (Q4, K4, V4),
        {"attn_mask": torch.zeros(3, 6, dtype=F64)},
        "attn_mask",
        "query's dtype torch.float32",
        id="float mask dtype",
    ),
    pytest.param(
        (Q4, K4, V4), {"attn_mask": torch.zeros(3, 6, dtype=torch.int64)}, "attn_mask", "bool mask", id="int mask"
    ),
    pytest.param((Q4, K4, V4), {"attn_mask": "causal"}, "attn_mask", "found str", id="string mask"),
    pytest.param((Q4, K4, V4), {"attn_mask": [[1, 0]]}, "attn_mask", "int64 values", id="int list mask"),
    pytest.param((Q4, K4, V4), {"is_causal": 1}, "is_causal", "True or False", id="is_causal not bool"),
    pytest.param((Q4, K4, V4), {"alignment": "bottom-right"}, "alignment", "'bottom-right'", id="unknown alignment"),
    pytest.param((Q4, K4, V4), {"alignment": 1.5}, "alignment", "int offset", id="float alignment"),
    pytest.param((Q4, K4, V4), {"alignment": True}, "alignment", "True", id="bool alignment"),
    pytest.param(
        (Q4, K4, V4), {"alignment": torch.tensor([1, 2, 3])}, "alignment", "shape (2,)", id="offsets per batch wrong"
    ),
    pytest.param((Q4, K4, V4), {"alignment": torch.tensor([1.0, 2.0])}, "alignment", "integers", id="float offsets"),
    pytest.param(
        (_q(4, 3, 5), _q(2, 6, 5), _q(2, 6, 7)),
        {"alignment": [1, 2]},
        "alignment",
        "found shape (2,)",
        id="offsets without batch",
    ),
    pytest.param((Q4, K4, V4), {"window": (-2, 0)}, "window", "(-2, 0)", id="window -2"),
    pytest.param((Q4, K4, V4), {"window": (1,)}, "window", "(left, right)", id="window one entry"),
    pytest.param((Q4, K4, V4), {"window": (1.0, 0)}, "window", "an int", id="window float"),
    pytest.param((Q4, K4, V4), {"scale": float("nan")}, "scale", "finite", id="scale nan"),
    pytest.param((Q4, K4, V4), {"scale": "0.5"}, "scale", "'0.5'", id="scale string"),
    pytest.param((_q(1, 0), _q(1, 0), _q(1, 1)), {}, "scale", "d_k=0", id="default scale with d_k 0"),
    pytest.param((Q4, K4, V4), {"softcap": 0.0}, "softcap", "> 0", id="softcap 0"),
    pytest.param((Q4, K4, V4), {"softcap": -1.0}, "softcap", "-1.0", id="softcap negative"),
    pytest.param((Q4, K4, V4), {"softcap": float("inf")}, "softcap", "finite", id="softcap inf"),
    pytest.param(
        (Q4, K4, V4), {"alibi_slopes": torch.ones(2)}, "alibi_slopes", "(4,) or (2, 4)", id="alibi per KV head"
    ),
    pytest.param(
        (Q4, K4, V4), {"alibi_slopes": torch.ones(3, 4)}, "alibi_slopes", "found shape (3, 4)", id="alibi wrong batch"
    ),
    pytest.param(
        (Q4, K4, V4), {"alibi_slopes": torch.ones(4, dtype=torch.bool)}, "alibi_slopes", "bool", id="alibi bool"
    ),
    pytest.param(
        (_q(3, 5), _q(6, 5), _q(6, 7)),
        {"alibi_slopes": torch.ones(2)},
        "alibi_slopes",
        "single head",
        id="alibi 2-D wrong",
    ),
    pytest.param(
        (Q4, K4, V4), {"key_lengths": torch.tensor([3, 7])}, "key_lengths", "[0, n_k=6]", id="lengths over n_k"
    ),
    pytest.param((Q4, K4, V4), {"key_lengths": torch.tensor([-1, 2])}, "key_lengths", "from -1", id="lengths negative"),
    pytest.param(
        (Q4, K4, V4), {"key_lengths": torch.tensor([3])}, "key_lengths", "batch shape (2,)", id="lengths wrong shape"
    ),
    pytest.param(
        (Q4, K4, V4), {"key_lengths": torch.tensor([3.0, 2.0])}, "key_lengths", "integers", id="lengths float"
    ),
    pytest.param((Q4, K4, V4), {"key_lengths": [True, False]}, "key_lengths", "integers", id="lengths bool list"),
    pytest.param(
        (_q(4, 3, 5), _q(2, 6, 5), _q(2, 6, 7)),
        {"key_lengths": [2]},
        "key_lengths",
        "batch axis",
        id="lengths without batch",
    ),
]


@pytest.mark.parametrize(("args", "kwargs", "argument", "fragment"), BAD_CALLS)
def test_bad_arguments_raise_one_score_input_error(args, kwargs, argument, fragment):
    """Each bad argument raises ScoreInputError naming it and saying what was expected and found."""
    with pytest.raises(ScoreInputError) as info:
        general_attention_parts(*args, **kwargs)
    assert info.value.argument == argument
    assert fragment in str(info.value)
    assert "expected" in str(info.value)


P_Q, P_K, P_V = _q(5, 4, 3), _q(7, 2, 3), _q(7, 2, 2)
CU_Q, CU_K = torch.tensor([0, 2, 5]), torch.tensor([0, 3, 7])

BAD_VARLEN = [
    pytest.param((_q(5, 12), P_K, P_V, CU_Q, CU_K), {}, "query", "(total_q, H_q, d_k)", id="query 2-D"),
    pytest.param((P_Q, _q(1, 7, 2, 3), P_V, CU_Q, CU_K), {}, "key", "(total_k, H_kv, d_k)", id="key 4-D"),
    pytest.param((P_Q, _q(7, 3, 3), _q(7, 3, 2), CU_Q, CU_K), {}, "key", "H_q=4", id="heads do not divide"),
    pytest.param((P_Q, P_K, P_V, torch.tensor([0, 2, 4]), CU_K), {}, "cu_seqlens_q", "total_q", id="last != total_q"),
    pytest.param((P_Q, P_K, P_V, CU_Q, torch.tensor([1, 3, 7])), {}, "cu_seqlens_k", "first entry 0", id="first != 0"),
    pytest.param(
        (P_Q, P_K, P_V, CU_Q, torch.tensor([0, 4, 3, 7])), {}, "cu_seqlens_k", "3 entries", id="lengths differ"
    ),
    pytest.param(
        (P_Q, P_K, P_V, torch.tensor([0, 3, 2, 5]), torch.tensor([0, 3, 4, 7])),
        {},
        "cu_seqlens_q",
        "non-decreasing",
        id="decreasing",
    ),
    pytest.param((P_Q, P_K, P_V, CU_Q.float(), CU_K), {}, "cu_seqlens_q", "integers", id="float offsets"),
    pytest.param((P_Q, P_K, P_V, CU_Q[None], CU_K), {}, "cu_seqlens_q", "(B + 1,)", id="2-D offsets"),
    pytest.param((P_Q, P_K, P_V, None, CU_K), {}, "cu_seqlens_q", "found None", id="offsets None"),
    pytest.param(
        (P_Q, P_K, P_V, CU_Q, CU_K), {"alibi_slopes": torch.ones(3, 4)}, "alibi_slopes", "(2, 4)", id="alibi (3, H)"
    ),
    pytest.param(
        (P_Q, P_K, P_V, CU_Q, CU_K), {"attn_mask": torch.zeros(5, 6)}, "attn_mask", "(4, 5, 7)", id="mask shape"
    ),
    pytest.param((P_Q, P_K, P_V, CU_Q, CU_K), {"window": (0, -3)}, "window", "(0, -3)", id="window"),
    pytest.param((P_Q, P_K, P_V, CU_Q, CU_K), {"softcap": 0}, "softcap", "> 0", id="softcap"),
    pytest.param((P_Q, P_K, P_V, CU_Q, CU_K), {"alignment": [1, 2, 3]}, "alignment", "shape (2,)", id="offsets"),
]


@pytest.mark.parametrize(("args", "kwargs", "argument", "fragment"), BAD_VARLEN)
def test_bad_varlen_arguments_raise_one_score_input_error(args, kwargs, argument, fragment):
    """Each bad packed-batch argument raises ScoreInputError naming it."""
    with pytest.raises(ScoreInputError) as info:
        varlen_attention(*args, **kwargs)
    assert info.value.argument == argument
    assert fragment in str(info.value)


def test_unknown_keyword_is_a_type_error():
    """general_attention forwards keywords: key_length (a typo) is refused, not ignored."""
    with pytest.raises(TypeError):
        general_attention(_q(2, 2), _q(2, 2), _q(2, 2), key_length=[1])


def test_option_tensor_on_another_device_is_refused():
    """A mask or slopes on another device than the query raise ScoreInputError (the meta device stands in for a GPU)."""
    q = torch.zeros(1, 2, 3, 4)
    for kwargs, argument in (
        ({"attn_mask": torch.zeros(3, 3, device="meta")}, "attn_mask"),
        ({"alibi_slopes": torch.zeros(2, device="meta")}, "alibi_slopes"),
    ):
        with pytest.raises(ScoreInputError, match="device") as info:
            general_attention(q, q, q, **kwargs)
        assert info.value.argument == argument
    with pytest.raises(ScoreInputError, match="device") as info:
        general_attention(q, q.to("meta"), q)
    assert info.value.argument == "key"


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_matches_cpu_and_sdpa():
    """On the GPU every option runs on the device and agrees with the CPU run and with SDPA's math backend."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, s, 6, 8, generator=g) for s in (8, 2, 2))
    kw = {"is_causal": True, "alignment": torch.tensor([1, 3]), "window": (3, 0), "softcap": 5.0}
    kw_cpu = {**kw, "alibi_slopes": torch.rand(8, generator=g), "key_lengths": torch.tensor([4, 6])}
    kw_gpu = {**kw_cpu, "alignment": kw["alignment"].cuda(), "alibi_slopes": kw_cpu["alibi_slopes"].cuda()}
    cpu = general_attention_parts(q, k, v, **kw_cpu)
    gpu = general_attention_parts(q.cuda(), k.cuda(), v.cuda(), **kw_gpu)
    assert gpu.output.device.type == "cuda"
    torch.testing.assert_close(gpu.output.cpu(), cpu.output, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gpu.lse.cpu(), cpu.lse, rtol=1e-5, atol=1e-5)
    mask = torch.rand(2, 1, 6, 6, generator=g).cuda() > 0.3
    with sdpa_kernel(SDPBackend.MATH):
        want = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(general_attention(q.cuda(), k.cuda(), v.cuda(), attn_mask=mask), want)
