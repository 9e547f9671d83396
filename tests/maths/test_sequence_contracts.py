"""The flash_attn contract (flash_attn_func's layout and keywords) and its specs: sliding window, KV cache."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.catalogue.mistakes import get_mistake, mistakes_for
from attnscore.check.implementation import run_impl
from attnscore.check.verify import mutation_test, targeted_mistakes
from attnscore.maths.contracts import get_contract
from attnscore.maths.families.flash import flash_keep
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.tolerance import Tolerance
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

WINDOW = "specs/sliding_window.yaml"
CACHE = "specs/kv_cache.yaml"
SDPA = torch.nn.functional.scaled_dot_product_attention


def masked_sdpa(q, k, v, keep):
    """SDPA (an independent path) on (b, n, h, d) inputs with an explicit (n_q, n_k) keep mask."""
    heads = q.shape[2] // k.shape[2]
    kt = k.transpose(1, 2).repeat_interleave(heads, dim=1)
    vt = v.transpose(1, 2).repeat_interleave(heads, dim=1)
    out = SDPA(q.transpose(1, 2), kt, vt, attn_mask=torch.as_tensor(keep))
    return out.nan_to_num(0.0).transpose(1, 2)


def flash_like(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    """An engineer's kernel with flash_attn_func's signature, built on SDPA with a bottom-right mask."""
    left, right = window_size
    if causal:
        right = 0
    keep = flash_keep((left, right), q.shape[1], k.shape[1])
    out = masked_sdpa(q, k, v, torch.as_tensor(keep, device=q.device))
    return out.to(q.dtype)


def top_left_cache(q, k, v, causal=False, **_):
    """A KV-cache kernel that uses SDPA's is_causal (top-left)."""
    out = SDPA(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
    return out.transpose(1, 2)


def windowless(q, k, v, window_size=(-1, -1), **_):
    """A sliding-window kernel that forgets the window."""
    return SDPA(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return [str(p) for p in info.value.problems]


def test_keywords_configure_the_flash_contract():
    """window_size becomes a (left, right) tuple option; causal is passed by name too."""
    window = load_spec(WINDOW)
    assert dict(window.contract.options) == {"window_size": (2, 1)}
    assert window.contract.parameters[0] == ("q", ("b", "n_q", "h_q", "d_k"))
    seen = {}

    def impl(q, k, v, **kw):
        seen.update(kw)
        return q

    window.contract.binding(impl)(1, 2, 3)
    assert seen == {"window_size": (2, 1)}
    cache = load_spec(CACHE)
    assert dict(cache.contract.options) == {"causal": True}
    assert [str(b) for b in cache.contract.bounds] == ["n_q <= n_k"]


@pytest.mark.parametrize(
    "value, expected",
    [
        pytest.param(
            "[-2, 1]",
            "keyword window_size: expected [left, right], two integers each >= 0 or -1 (unbounded), found",
            id="below -1",
        ),
        pytest.param("[2]", "keyword window_size: expected [left, right]", id="one entry"),
        pytest.param("true", "function.keywords.window_size:", id="bool"),
        pytest.param("[1.5, 0]", "function.keywords.window_size:", id="fraction (schema)"),
        pytest.param("[1, 2, 3]", "function.keywords.window_size:", id="three entries (schema)"),
    ],
)
def test_bad_window_size_is_located(tmp_path, value, expected):
    """A window_size that is not two integers >= -1 is one located problem."""
    text = open(WINDOW, encoding="utf-8").read()
    found = problems(tmp_path, text.replace("keywords: {window_size: [2, 1]}", f"keywords: {{window_size: {value}}}"))
    assert any(expected in p and ":" in p.split("function.keywords")[0] for p in found), found


def test_reference_examples_by_hand():
    """Window (1, 0) averages a key and the one before; a cache of 2 sees every key on decode."""
    window = get_contract("flash_attn").configured({"window_size": [1, 0]})
    q = torch.zeros(1, 3, 1, 1)
    v = torch.tensor([1.0, 2.0, 4.0]).reshape(1, 3, 1, 1)
    assert window.reference(q, q, v).flatten().tolist() == [1.0, 1.5, 3.0]
    cache = get_contract("flash_attn").configured({"causal": True})
    assert cache.reference(q[:, :1], q, v).flatten().tolist() == pytest.approx([7 / 3])
    assert cache.reference(q[:, :2], q, v).flatten().tolist() == pytest.approx([1.5, 7 / 3])  # bottom-right


@settings(max_examples=30, deadline=None)
@given(
    b=st.integers(1, 2),
    n_q=st.integers(1, 5),
    n_k=st.integers(1, 6),
    h_kv=st.integers(1, 2),
    group=st.integers(1, 2),
    left=st.integers(-1, 3),
    right=st.integers(-1, 3),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_reference_and_golden_agree_with_masked_sdpa(b, n_q, n_k, h_kv, group, left, right, causal, seed):
    """Reference, golden twin and SDPA with an explicit bottom-right mask agree (GQA, any window)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, n_q, h_kv * group, 3))
    k = rng.standard_normal((b, n_k, h_kv, 3))
    v = rng.standard_normal((b, n_k, h_kv, 2))
    c = get_contract("flash_attn").configured({"window_size": [left, right], "causal": causal})
    keep = flash_keep((left, 0 if causal else right), n_q, n_k)
    want = masked_sdpa(*(torch.tensor(x) for x in (q, k, v)), keep).numpy()
    got = c.reference(torch.tensor(q), torch.tensor(k), torch.tensor(v)).numpy()
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(c.golden({"q": q, "k": k, "v": v}), want, atol=1e-12)
    assert c.error_scale({"q": q, "k": k, "v": v})[1].shape == want.shape


@pytest.mark.parametrize("shape, argument", [((3, 1, 2), "q"), ((1, 1, 3, 1, 2), "q")], ids=["3-D query", "5-D query"])
def test_reference_refuses_another_layout(shape, argument):
    """A query that is not (batch, seqlen, nheads, headdim) gets one ScoreInputError naming it."""
    c = get_contract("flash_attn")
    k = torch.zeros(1, 2, 1, 2)
    with pytest.raises(ScoreInputError, match=r"q: expected FlashAttention's layout .* found shape"):
        c.reference(torch.zeros(shape), k, k)


def test_reference_refuses_heads_that_do_not_divide():
    """3 query heads over 2 KV heads: ScoreInputError from the variant reference."""
    c = get_contract("flash_attn").configured({"causal": True})
    with pytest.raises(ScoreInputError):
        c.reference(torch.zeros(1, 2, 3, 2), torch.zeros(1, 2, 2, 2), torch.zeros(1, 2, 2, 2))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("path", [WINDOW, CACHE])
def test_flash_like_kernel_gets_full_marks(path, dtype):
    """A correct kernel with flash_attn_func's signature (SDPA plus a bottom-right mask) gets full marks."""
    spec = load_spec(path)
    if dtype in ("float16", "bfloat16"):
        spec = dataclasses.replace(spec, tolerance=Tolerance(mode="ratio", factor=2.0))
    result = run_impl(spec, flash_like, dtype=dtype, shrink=False)
    assert result.score == result.max_score, [(c.id, c.verdict) for c in result.cases if not c.passed]


MISTAKES = [
    (WINDOW, "window_off_by_one"),
    (WINDOW, "window_ignored"),
    (WINDOW, "window_one_sided"),
    (WINDOW, "window_top_left"),
    (CACHE, "kv_cache_top_left"),
    (CACHE, "kv_cache_offset_off_by_one"),
    (CACHE, "kv_cache_causal_ignored"),
    (CACHE, "kv_cache_ignored"),
]


@pytest.mark.slow
@pytest.mark.parametrize("path, mistake", MISTAKES)
def test_mistakes_diagnosed_as_themselves(path, mistake):
    """Each sequence mistake is targeted by its spec, caught and named by the diagnosis (float32)."""
    spec = load_spec(path)
    assert mistake in [m.id for m in targeted_mistakes(spec)]
    one = dataclasses.replace(spec, mistakes=(mistake,))
    (result,) = mutation_test(one, dtype="float32")
    assert result.caught and result.diagnosed, result


def test_mistakes_follow_the_keywords():
    """Window mistakes apply to the window spec only, cache mistakes to the causal one only."""
    window = {m.id for m in mistakes_for(load_spec(WINDOW).contract)}
    cache = {m.id for m in mistakes_for(load_spec(CACHE).contract)}
    window_ids = {m for p, m in MISTAKES if p == WINDOW}
    cache_ids = {m for p, m in MISTAKES if p == CACHE}
    assert window_ids <= window and not cache_ids & window
    assert cache_ids <= cache and not window_ids & cache
    assert not (window_ids | cache_ids) & {m.id for m in mistakes_for(get_contract("flash_attn"))}


def test_mistake_values_by_hand():
    """The worked example's numbers: off by one (narrower) and top-left against the cache."""
    q = torch.zeros(1, 5, 1, 1)
    v = torch.tensor([1.0, 2.0, 4.0, 8.0, 16.0]).reshape(1, 5, 1, 1)
    window = load_spec(WINDOW)
    narrow = get_mistake("window_off_by_one").bind(window.contract, window)(q, q, v)
    assert narrow.flatten().tolist() == [1.0, 1.5, 3.0, 6.0, 12.0]
    cache = load_spec(CACHE)
    top_left = get_mistake("kv_cache_top_left").bind(cache.contract, cache)(q[:, :2], q[:, :4], v[:, :4])
    assert top_left.flatten().tolist() == [1.0, 1.5]


def _case(result, name):
    return next(c for c in result.cases if c.id == f"property:{name}")


@pytest.mark.slow
def test_cache_property_catches_top_left_alignment():
    """A top-left KV-cache kernel fails cache_decoding_matches_full_causal, naming the decode or prefill."""
    result = run_impl(load_spec(CACHE), top_left_cache, dtype="float64", shrink=False)
    case = _case(result, "cache_decoding_matches_full_causal")
    assert not case.passed
    text = case.message
    assert "the full causal pass gave" in text and "bottom-right" in text, text
    assert _case(
        run_impl(load_spec(CACHE), flash_like, dtype="float64", shrink=False), "cache_decoding_matches_full_causal"
    ).passed


@pytest.mark.slow
def test_window_property_catches_a_missing_window():
    """A kernel without the window fails keys_outside_window_ignored; the reference passes it."""
    result = run_impl(load_spec(WINDOW), windowless, dtype="float64", shrink=False)
    case = _case(result, "keys_outside_window_ignored")
    assert not case.passed
    assert "outside the window of query" in case.message, case.message
    assert _case(
        run_impl(load_spec(WINDOW), flash_like, dtype="float64", shrink=False), "keys_outside_window_ignored"
    ).passed


@settings(max_examples=20, deadline=None)
@given(data=st.data(), window=st.sampled_from([(2, 1), (-1, 1), (3, -1), (0, 0), (-1, 0), (1, -1)]))
def test_window_property_always_has_keys_to_change(data, window):
    """For any bounded window (one side unbounded too) the drawn query has keys outside its window."""
    from attnscore.catalogue.properties import get_property

    c = get_contract("flash_attn").configured({"window_size": list(window)})
    prop = get_property("keys_outside_window_ignored")
    assert prop.applies(c)
    args, r, _ = data.draw(prop.examples(c, 10.0))
    keep = flash_keep(window, args["q"].shape[1], args["k"].shape[1])
    assert not keep[r].all()
    before, after = prop.calls(c, (args, r, 0))
    changed = ~np.all(before["k"] == after["k"], axis=(0, 2, 3)) | ~np.all(before["v"] == after["v"], axis=(0, 2, 3))
    assert not (changed & keep[r]).any()  # only keys outside query r's window were changed


def test_no_property_for_full_attention():
    """Without causal or a window nothing is hidden: neither sequence property applies."""
    from attnscore.catalogue.properties import applicable_properties

    names = applicable_properties(get_contract("flash_attn"))
    assert "keys_outside_window_ignored" not in names and "cache_decoding_matches_full_causal" not in names
