"""The integer-parameter contracts and their specs: flash_attn_varlen (packed batches, specs/varlen.yaml)
and key_padding_attention (valid key lengths, specs/key_padding.yaml)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.catalogue.mistakes import mistakes_for
from attnscore.check.implementation import run_impl
from attnscore.check.verify import mutation_test, targeted_mistakes
from attnscore.maths.contracts import get_contract
from attnscore.maths.families.flash import flash_keep
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.strategies import random_args
from attnscore.maths.tolerance import Tolerance
from attnscore.spec.load import load_spec

VARLEN = "specs/varlen.yaml"
PADDING = "specs/key_padding.yaml"
SDPA = torch.nn.functional.scaled_dot_product_attention


def varlen_like(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
):
    """An engineer's flash_attn_varlen_func: SDPA per sequence with a bottom-right mask (an independent path)."""
    assert isinstance(max_seqlen_q, int) and isinstance(max_seqlen_k, int), (type(max_seqlen_q), type(max_seqlen_k))
    assert cu_seqlens_q.dtype == torch.int32 and cu_seqlens_k.dtype == torch.int32
    left, right = window_size
    right = 0 if causal else right
    out = q.new_zeros(q.shape[0], q.shape[1], v.shape[2])
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for b in range(len(cq) - 1):
        qs, ks, vs = q[cq[b] : cq[b + 1]], k[ck[b] : ck[b + 1]], v[ck[b] : ck[b + 1]]
        keep = torch.as_tensor(flash_keep((left, right), qs.shape[0], ks.shape[0]))
        group = q.shape[1] // k.shape[1]
        kt = ks.transpose(0, 1).repeat_interleave(group, dim=0)
        vt = vs.transpose(0, 1).repeat_interleave(group, dim=0)
        o = SDPA(qs.transpose(0, 1), kt, vt, attn_mask=keep, scale=softmax_scale).nan_to_num(0.0)
        out[cq[b] : cq[b + 1]] = o.transpose(0, 1)
    return out


def one_sequence(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, **_):
    """A packed kernel that attends across the sequences' boundary (one causal sequence, bottom-right);
    its heads are grouped right (the diagnosis confirms a name on grouped-head inputs too)."""
    keep = torch.as_tensor(flash_keep((-1, 0) if causal else (-1, -1), q.shape[0], k.shape[0]))
    out = SDPA(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=keep, enable_gqa=True)
    out = out.nan_to_num(0.0)
    return out.transpose(0, 1)


def padded_like(query, key, value, key_lengths):
    """An engineer's key-padding attention on SDPA (a bool mask from the lengths); zeros for no valid key."""
    keep = torch.arange(key.shape[-2])[None, :] < key_lengths[:, None].long()  # (b, n_k)
    out = SDPA(query, key, value, attn_mask=keep[:, None, None, :], enable_gqa=True)
    return out.nan_to_num(0.0)


def padding_on_queries(query, key, value, key_lengths):
    """Masks the queries past the length (zero rows) instead of the keys."""
    out = SDPA(query, key, value, enable_gqa=True)
    rows = torch.arange(query.shape[-2])[None, :] < key_lengths[:, None].long()  # (b, n_q)
    return out * rows[:, None, :, None]


def test_varlen_reference_by_hand():
    """Two packed causal sequences of 2 and 3 tokens stay apart: 1, 1.5 | 4, 6, 28/3."""
    c = get_contract("flash_attn_varlen").configured({"causal": True})
    z = torch.zeros(5, 1, 1)
    v = torch.tensor([1.0, 2.0, 4.0, 8.0, 16.0]).reshape(5, 1, 1)
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    got = c.reference(z, z, v, cu, cu, 3, 3).flatten().tolist()
    assert got == pytest.approx([1.0, 1.5, 4.0, 6.0, 28 / 3])


def test_varlen_reference_refuses_a_short_max_seqlen():
    """max_seqlen_q below the longest sequence is a ScoreInputError naming it, as FlashAttention needs it."""
    c = get_contract("flash_attn_varlen")
    z = torch.zeros(5, 1, 1)
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    with pytest.raises(ScoreInputError, match="max_seqlen_q: expected at least the longest sequence, 3, found 2"):
        c.reference(z, z, z, cu, cu, 2, 3)
    with pytest.raises(ScoreInputError, match="max_seqlen_k: expected an int"):
        c.reference(z, z, z, cu, cu, 3, 3.0)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), causal=st.booleans(), left=st.sampled_from([-1, 0, 2]))
def test_varlen_reference_and_golden_agree_with_sdpa_per_sequence(data, causal, left):
    """Reference, golden twin and an SDPA loop over the sequences agree on drawn packed batches."""
    c = get_contract("flash_attn_varlen").configured({"causal": causal, "window_size": [left, -1]})
    a = data.draw(random_args(c))
    tensors = [torch.tensor(x) for x in a.values()]
    ints = [int(t) if t.ndim == 0 else t for t in tensors]
    want = varlen_like(*ints, causal=causal, window_size=(left, -1)).numpy()
    np.testing.assert_allclose(c.golden(a), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(c.reference(*ints).numpy(), want, rtol=1e-10, atol=1e-10)


def test_key_padding_reference_by_hand():
    """Items with 2 and 3 valid keys of 4 average values 1, 2 | 1, 2, 4; length 0 gives zeros."""
    c = get_contract("key_padding_attention")
    q, k = torch.zeros(3, 1, 1, 1), torch.zeros(3, 1, 4, 1)
    v = torch.tensor([1.0, 2.0, 4.0, 8.0]).reshape(1, 1, 4, 1).expand(3, 1, 4, 1)
    got = c.reference(q, k, v, torch.tensor([2, 3, 0], dtype=torch.int32)).flatten().tolist()
    assert got == pytest.approx([1.5, 7 / 3, 0.0])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("path, kernel", [(VARLEN, varlen_like), (PADDING, padded_like)])
def test_correct_kernel_gets_full_marks(path, kernel, dtype):
    """A correct kernel (SDPA per sequence, or SDPA with a key mask) gets full marks in every dtype."""
    spec = load_spec(path)
    if dtype in ("float16", "bfloat16"):
        spec = dataclasses.replace(spec, tolerance=Tolerance(mode="ratio", factor=2.0))
    result = run_impl(spec, kernel, dtype=dtype, shrink=False)
    assert result.score == result.max_score, [(c.id, c.verdict, c.message) for c in result.cases if not c.passed]


MISTAKES = [
    (VARLEN, "varlen_across_boundary"),
    (VARLEN, "varlen_causal_top_left"),
    (VARLEN, "varlen_key_offsets_from_queries"),
    (VARLEN, "varlen_cu_seqlens_as_lengths"),
    (PADDING, "padding_on_queries"),
    (PADDING, "key_length_off_by_one"),
    (PADDING, "key_padding_ignored"),
]


@pytest.mark.slow
@pytest.mark.parametrize("path, mistake", MISTAKES)
def test_mistakes_diagnosed_as_themselves(path, mistake):
    """Each packed or padding mistake is targeted by its spec, caught and named by the diagnosis (float32)."""
    spec = load_spec(path)
    assert mistake in [m.id for m in targeted_mistakes(spec)]
    one = dataclasses.replace(spec, mistakes=(mistake,))
    (result,) = mutation_test(one, dtype="float32")
    assert result.caught and result.diagnosed, result


def test_mistakes_follow_the_contracts():
    """Varlen mistakes apply to flash_attn_varlen only, padding mistakes to key_padding_attention only;
    the top-left one needs a causal mask or a window."""
    varlen = {m.id for m in mistakes_for(get_contract("flash_attn_varlen").configured({"causal": True}))}
    full = {m.id for m in mistakes_for(get_contract("flash_attn_varlen"))}
    padding = {m.id for m in mistakes_for(get_contract("key_padding_attention"))}
    varlen_ids = {m for p, m in MISTAKES if p == VARLEN}
    padding_ids = {m for p, m in MISTAKES if p == PADDING}
    assert varlen_ids <= varlen and not padding_ids & varlen
    assert full & varlen_ids == varlen_ids - {"varlen_causal_top_left"}
    assert padding_ids <= padding and not varlen_ids & padding
    assert not (varlen_ids | padding_ids) & {m.id for m in mistakes_for(get_contract("flash_attn"))}


def _failed(result):
    return {c.id for c in result.cases if not c.passed}


@pytest.mark.slow
def test_packed_properties_catch_attending_across_the_boundary():
    """A kernel that attends across the boundary fails both packed relations, and the diagnosis names it."""
    result = run_impl(load_spec(VARLEN), one_sequence, dtype="float64", shrink=False)
    failed = _failed(result)
    assert {"property:packed_equals_sequences_one_by_one", "property:keys_of_other_sequences_ignored"} <= failed
    case = next(c for c in result.cases if c.id == "example:two_sequences_stay_apart")
    assert case.diagnosis and case.diagnosis["id"] == "varlen_across_boundary"


@pytest.mark.slow
def test_padding_property_catches_padding_on_queries():
    """Masking queries instead of keys fails keys_past_length_ignored; the diagnosis names the mistake."""
    result = run_impl(load_spec(PADDING), padding_on_queries, dtype="float64", shrink=False)
    assert "property:keys_past_length_ignored" in _failed(result)
    case = next(c for c in result.cases if c.id == "example:padding_keys_get_no_weight")
    assert case.diagnosis and case.diagnosis["id"] == "padding_on_queries"


@pytest.mark.slow
def test_relations_pass_for_the_reference_on_their_own():
    """The relational properties hold for the correct kernel in float32 (no false alarm)."""
    for path, kernel in ((VARLEN, varlen_like), (PADDING, padded_like)):
        result = run_impl(load_spec(path), kernel, dtype="float32", shrink=False)
        assert not {c for c in _failed(result) if c.startswith("property:")}


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec, impl",
    [("varlen", "flash_attn_varlen_func"), ("key_padding", "attention")],
)
def test_cli_test_gives_the_example_kernels_full_marks(spec, impl):
    """attnscore test --impl examples.impl.varlen_attention:... --spec <id> passes in process (integers by kind)."""
    from click.testing import CliRunner

    from attnscore.cli import main

    result = CliRunner().invoke(
        main, ["test", "--impl", f"examples.impl.varlen_attention:{impl}", "--spec", spec, "--dtype", "float32"]
    )
    assert result.exit_code == 0, result.output
    assert "Score: " in result.output and "passed" in result.output
