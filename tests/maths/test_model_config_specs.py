"""The bundled specs of the configurations real models run: a causal sliding window as Mistral and Hugging
Face run it (``sliding_window_causal``: ``causal=True, window_size=(w - 1, 0)``), causal ALiBi as BLOOM and
MPT run it (``alibi_causal``), softcapped causal grouped-query attention as Gemma 2 runs it (``softcap_gqa``).
Their keywords, the wrong values their worked examples name, the catalogue's mistakes they target, and an
engineer's kernel, right and with a typical bug, graded by ``attnscore test`` and ``run_impl``."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnscore.catalogue.mistakes import get_mistake, mistakes_for
from attnscore.check.implementation import run_impl
from attnscore.check.verify import mutation_test, targeted_mistakes
from attnscore.cli import main
from attnscore.maths.contracts import get_contract
from attnscore.spec.load import load_spec
from examples.impl.flash_attn_func import flash_attn_func
from examples.impl.kernel_attention import kernel_attention

WINDOW = "specs/sliding_window_causal.yaml"
ALIBI = "specs/alibi_causal.yaml"
GEMMA = "specs/softcap_gqa.yaml"


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


E = math.e
KEY_ZERO_WINS = (5 * E**9 + E**2) / (E**9 + E**2 + 2)  # query 3 of softmax_inside_the_window without the window
FAR_KEYS_WIN = (1 * E**2 + 2 * E + 4) / (E**2 + E + 1)  # ALiBi's +distance on values 1, 2, 4
TOP_LEFT_DISTANCE = (1 + 2 / E + 4 / E**2) / (1 + 1 / E + 1 / E**2)  # distances [0, 1, 2] on values 1, 2, 4


def test_specs_configure_their_contracts():
    """HF's sliding_window = 3 is causal=True, window_size=(2, 0); BLOOM's ALiBi is causal with slopes by
    name; Gemma 2's attention is softcap 50, causal, with its own KV head count."""
    window, alibi, gemma = (load_spec(p) for p in (WINDOW, ALIBI, GEMMA))
    assert dict(window.contract.options) == {"causal": True, "window_size": (2, 0)}
    assert dict(alibi.contract.options) == {"is_causal": True}
    assert alibi.contract.keyword_parameters == frozenset({"alibi_slopes"})
    assert dict(gemma.contract.options) == {"softcap": 50.0, "is_causal": True}
    assert dict(gemma.contract.parameters)["key"] == ("...", "h_kv", "n_k", "d_k")
    assert all(s.dtypes == ("float32", "float64", "float16", "bfloat16") for s in (window, alibi, gemma))


def _args(spec, example_id):
    ex = next(e for e in spec.worked_examples if e.id == example_id)
    return tuple(torch.tensor(np.asarray(v, dtype=float), dtype=torch.float64) for v in ex.inputs.values()), ex


WRONG_VALUES = [
    # (spec, worked example, mistake, form, the wrong output the explanation names)
    (WINDOW, "window_of_three_keys", "window_off_by_one", 2, [1, 1.5, 3, 6, 12]),  # w - 1 keys
    (WINDOW, "window_of_three_keys", "window_off_by_one", 3, [1, 1.5, 7 / 3, 3.75, 7.5]),  # w + 1 keys (HF's w as is)
    (WINDOW, "window_of_three_keys", "window_ignored", 0, [1, 1.5, 7 / 3, 3.75, 6.2]),  # causal alone
    (WINDOW, "decode_step_keeps_the_last_three", "kv_cache_top_left", 0, [1]),
    (WINDOW, "decode_step_keeps_the_last_three", "window_ignored", 0, [6.2]),
    (WINDOW, "decode_step_keeps_the_last_three", "window_off_by_one", 3, [7.5]),
    (WINDOW, "prefill_chunk_after_a_cache", "kv_cache_top_left", 0, [1, 1.5]),
    (WINDOW, "prefill_chunk_after_a_cache", "kv_cache_offset_off_by_one", 0, [14 / 3, 6]),
    (WINDOW, "prefill_chunk_after_a_cache", "kv_cache_ignored", 0, [4, 6]),
    (WINDOW, "far_key_with_huge_score", "window_ignored", 0, [1, 1.5, 7 / 3, 1]),
    (WINDOW, "softmax_inside_the_window", "window_ignored", 0, [5, 3, 2, KEY_ZERO_WINS]),
    (ALIBI, "causal_distance_penalty", "alibi_wrong_sign", 0, [1, 1 + sigmoid(-1), FAR_KEYS_WIN]),
    (ALIBI, "decode_step_bottom_right", "kernel_causal_top_left", 0, [1]),
    (ALIBI, "decode_step_bottom_right", "alibi_top_left", 0, [TOP_LEFT_DISTANCE]),
    (ALIBI, "bloom_slopes_four_heads", "alibi_wrong_sign", 0, [sigmoid(-(2.0 ** (-2 * h))) for h in range(1, 5)]),
    (ALIBI, "bias_added_to_scaled_scores", "alibi_bias_scaled", 0, [sigmoid(1)]),
    (ALIBI, "bias_added_to_scaled_scores", "alibi_top_left", 0, [sigmoid(4)]),
    (GEMMA, "scores_of_150_and_100_capped", "softcap_ignored", 0, [100 + sigmoid(50), 100 + sigmoid(-50)]),
    (GEMMA, "scores_of_150_and_100_capped", "softcap_scale_twice", 0,
     [100 + sigmoid(25 * (math.tanh(3) - math.tanh(2))), 100 + sigmoid(-25 * (math.tanh(3) - math.tanh(2)))]),
    (GEMMA, "scores_of_150_and_100_capped", "softcap_scale_after", 0,
     [100 + sigmoid(25 * (math.tanh(6) - math.tanh(4))), 100 + sigmoid(-25 * (math.tanh(6) - math.tanh(4)))]),
    (GEMMA, "grouped_heads_causal", "kv_heads_tiled", 0, [2, 3, 10, 15, 2, 3, 10, 15]),
    (GEMMA, "grouped_heads_causal", "kv_head_zero_for_all", 0, [2, 3] * 4),
    (GEMMA, "masked_key_stays_masked", "softcap_after_mask", 0,
     [1 + 2 * sigmoid(-50 - 50 * math.tanh(-4)), 2, 1 + 2 * sigmoid(-50), 2]),
    (GEMMA, "causal_is_bottom_right", "kernel_causal_top_left", 0, [1, 1]),
]  # fmt: skip


@pytest.mark.parametrize(("path", "example", "mistake", "form", "wrong"), WRONG_VALUES)
def test_mistake_values_on_the_worked_examples(path, example, mistake, form, wrong):
    """Each catalogued mistake gives the wrong value its worked example's explanation names; the reference gives
    the expected value, which differs."""
    spec = load_spec(path)
    args, ex = _args(spec, example)
    got = get_mistake(mistake).bind(spec.contract, spec, form=form)(*args)
    assert np.allclose(got.double().ravel().numpy(), wrong, atol=1e-12, rtol=0)
    assert not np.allclose(np.ravel(ex.expected), wrong, atol=1e-6)
    right = spec.contract.reference(*args)
    assert np.allclose(right.ravel().numpy(), np.ravel(ex.expected), atol=1e-12, rtol=0)


def test_values_named_without_a_catalogued_mistake():
    """The explanations' other wrong forms: the window two-sided without causal, ALiBi without the causal mask."""
    window = load_spec(WINDOW)
    args, _ = _args(window, "window_of_three_keys")
    two_sided = get_contract("flash_attn").configured({"window_size": [2, 2]}).reference(*args)
    assert np.allclose(two_sided.ravel().numpy(), [7 / 3, 3.75, 6.2, 7.5, 28 / 3], atol=1e-12)
    alibi = load_spec(ALIBI)
    args, _ = _args(alibi, "causal_distance_penalty")
    unmasked = get_contract("kernel_attention").reference(*args[:3], args[3])
    assert np.allclose(unmasked.ravel().numpy(), [1.5148201905659389, 2.2119415576170853, 3.240451338379263])


def test_mistakes_follow_the_configuration():
    """A causal window targets the window mistakes (not window_top_left: there it is kv_cache_top_left, nor
    window_one_sided: nothing lies ahead); causal ALiBi leaves out the signed distance, which equals the absolute
    one on every key the causal mask keeps; Gemma's spec targets the grouped-head and softcap mistakes."""
    ids = {p: {m.id for m in mistakes_for(load_spec(p).contract)} for p in (WINDOW, ALIBI, GEMMA)}
    assert {"window_off_by_one", "window_ignored", "kv_cache_top_left", "kv_cache_ignored"} <= ids[WINDOW]
    assert not {"window_top_left", "window_one_sided"} & ids[WINDOW]
    assert {"alibi_wrong_sign", "alibi_top_left", "alibi_bias_scaled", "kernel_causal_top_left"} <= ids[ALIBI]
    assert "alibi_signed_distance" not in ids[ALIBI]
    assert "alibi_signed_distance" in {m.id for m in mistakes_for(load_spec("specs/alibi.yaml").contract)}
    assert {"kv_heads_tiled", "softcap_after_mask", "softcap_ignored", "kernel_causal_top_left"} <= ids[GEMMA]
    # plain causal (the KV-cache spec) has no sliding window to get wrong
    assert not {"window_off_by_one", "window_ignored"} & {
        m.id for m in mistakes_for(load_spec("specs/kv_cache.yaml").contract)
    }


def test_signed_distance_is_no_mistake_under_causal():
    """Under is_causal the signed ALiBi distance j - i - (n_k - n_q) is -|i + n_k - n_q - j| on every kept key."""
    c = get_contract("kernel_attention").configured({"is_causal": True})
    g = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(2, 5, 3, generator=g), torch.randn(2, 7, 3, generator=g), torch.randn(2, 7, 2, generator=g)
    slopes = torch.tensor([0.5, 0.25])
    signed = get_mistake("alibi_signed_distance").bind(c)(q, k, v, slopes)
    assert torch.allclose(signed.float(), c.reference(q, k, v, slopes), atol=1e-6)


# ---------------------------------------------------------------------------------------------
# an engineer's kernels: right, and with the typical bug of each configuration


def hf_window_unchanged(q, k, v, causal=False, window_size=(-1, -1), **kw):
    """Hugging Face's sliding_window = w passed to FlashAttention as window_size=(w, 0): one key too many."""
    return flash_attn_func(q, k, v, causal=causal, window_size=(window_size[0] + 1, window_size[1]), **kw)


def alibi_plus_sign(query, key, value, alibi_slopes=None, **flags):
    """ALiBi's bias added with the wrong sign: far keys win."""
    return kernel_attention(query, key, value, -alibi_slopes, **flags)


def cap_after_mask(query, key, value, *, scale=None, is_causal=False, softcap=None):
    """Gemma's cap applied after the causal mask: a masked -inf becomes -cap, and the key gets weight."""
    n_q, n_k, d_k = query.shape[-2], key.shape[-2], query.shape[-1]
    group = query.shape[-3] // key.shape[-3]
    key, value = key.repeat_interleave(group, dim=-3), value.repeat_interleave(group, dim=-3)
    s = (query @ key.transpose(-2, -1)) / math.sqrt(d_k)
    rows = torch.arange(n_q).unsqueeze(-1) + (n_k - n_q)
    s = s.masked_fill(torch.arange(n_k).unsqueeze(0) > rows, float("-inf"))
    s = softcap * torch.tanh(s / softcap)
    return torch.softmax(s, dim=-1) @ value


@pytest.mark.slow
@pytest.mark.parametrize(
    ("spec_id", "impl", "total"),
    [
        ("sliding_window_causal", "examples.impl.flash_attn_func:flash_attn_func", 26),
        ("alibi_causal", "examples.impl.kernel_attention:kernel_attention", 20),
        ("softcap_gqa", "examples.impl.kernel_attention:kernel_attention", 19),
    ],
)
def test_cli_gives_a_correct_kernel_full_marks(spec_id, impl, total):
    """`attnscore test --spec <id>` on a plain-torch kernel written the way an engineer would: every point."""
    result = CliRunner().invoke(main, ["test", "--impl", impl, "--spec", spec_id])
    assert result.exit_code == 0, result.output
    assert f"Score: {total}/{total}" in result.output and "in float32 on cpu" in result.output


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "impl", "mistake"),
    [
        pytest.param(WINDOW, hf_window_unchanged, "window_off_by_one", id="HF window passed unchanged"),
        pytest.param(ALIBI, alibi_plus_sign, "alibi_wrong_sign", id="ALiBi sign"),
        pytest.param(GEMMA, cap_after_mask, "softcap_after_mask", id="softcap after the mask"),
    ],
)
def test_kernel_with_the_typical_bug_loses_points_and_is_named(path, impl, mistake):
    """The typical bug of each configuration costs points, and the failing cases name it."""
    spec = load_spec(path)
    result = run_impl(spec, impl, dtype="float32", shrink=False)
    assert result.score < result.max_score
    named = {c.diagnosis["id"] for c in result.cases if c.diagnosis}
    assert named == {mistake}, [(c.id, c.diagnosis) for c in result.cases if not c.passed]


MISTAKES = [
    (WINDOW, "window_off_by_one"),
    (WINDOW, "window_ignored"),
    (ALIBI, "alibi_wrong_sign"),
    (ALIBI, "alibi_top_left"),
    (GEMMA, "softcap_after_mask"),
    (GEMMA, "kv_heads_tiled"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("path", "mistake"), MISTAKES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_mistakes_diagnosed_as_themselves(path, mistake, dtype):
    """Each mistake is targeted by its spec, caught and named by the diagnosis, in float32 and bfloat16."""
    spec = load_spec(path)
    assert mistake in [m.id for m in targeted_mistakes(spec)]
    (result,) = mutation_test(dataclasses.replace(spec, mistakes=(mistake,)), dtype=dtype)
    assert result.caught and result.diagnosed, result
