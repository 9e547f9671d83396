"""Small inputs for shrinking reach the shapes bugs hide in: n_q = n_k + 2 and grouped heads."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.check.cases import build_cases
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.check.shrink import add_shrunk, example_calls
from attnscore.check.small_inputs import SMALL_COUNT, WIDE_COUNT, small_case
from attnscore.maths.bounds import legend_of
from attnscore.maths.strategies import small_sizes, wide_shapes
from attnscore.spec.load import load_spec


def _sizes(spec, case) -> list[dict[str, int]]:
    """The legend sizes of each of ``case``'s examples (its last call's arguments)."""
    return [legend_of(spec.contract, case.calls[group[-1]].args) for group in example_calls(case)]


@pytest.mark.parametrize(
    ("spec_id", "shapes"),
    [
        pytest.param("sliding_window", ("queries", "heads"), id="flash window: both"),
        pytest.param("kv_cache", ("heads",), id="n_q <= n_k bound: heads only"),
        pytest.param("causal_attention", ("queries",), id="no heads: queries only"),
        pytest.param("varlen", ("heads",), id="packed rows: heads only"),
        pytest.param("dot_product_scores", (), id="one query: none"),
    ],
)
def test_wide_shapes_are_those_the_contract_can_draw(spec_id, shapes):
    """``wide_shapes`` lists n_q = n_k + 2 only where n_q and n_k are drawn apart and no bound
    forbids n_q > n_k, and grouped heads only where h_q and h_kv are the legend's."""
    assert wide_shapes(load_spec(f"specs/{spec_id}.yaml").contract) == shapes


def test_small_inputs_reach_two_more_queries_than_keys_and_grouped_heads():
    """Beside the capped ones (every size at most 2, h_q at most 2 per KV head), the small inputs of a
    sliding-window property hold WIDE_COUNT examples with n_q = n_k + 2 and WIDE_COUNT with 4 query
    heads over 2 KV heads."""
    spec = load_spec("specs/sliding_window.yaml")
    case = next(c for c in build_cases(spec, "float32") if c.id == "property:matches_reference")
    small = small_case(spec, case, "float32", seed=spec.seed + 7)
    sizes = _sizes(spec, small)
    assert len(sizes) == SMALL_COUNT + 2 * WIDE_COUNT
    capped, queries, heads = sizes[:SMALL_COUNT], sizes[SMALL_COUNT:-WIDE_COUNT], sizes[-WIDE_COUNT:]
    assert all(max(v for k, v in s.items() if k != "h_q") <= 2 and s["h_q"] <= 2 * s["h_kv"] for s in capped)
    assert all(s["n_q"] == s["n_k"] + 2 and s["n_k"] <= 2 for s in queries)
    assert all((s["h_q"], s["h_kv"]) == (4, 2) and s["n_q"] <= 2 for s in heads)


def test_a_bound_keeps_the_wide_inputs_inside_it():
    """kv_cache states n_q <= n_k: its small inputs never break it, and still reach grouped heads."""
    spec = load_spec("specs/kv_cache.yaml")
    case = next(c for c in build_cases(spec, "float32") if c.id == "property:matches_reference")
    sizes = _sizes(spec, small_case(spec, case, "float32"))
    assert len(sizes) == SMALL_COUNT + WIDE_COUNT
    assert all(s["n_q"] <= s["n_k"] for s in sizes)
    assert sum((s["h_q"], s["h_kv"]) == (4, 2) for s in sizes) >= WIDE_COUNT


def test_small_sizes_rejects_an_unknown_wide_shape():
    """A wide shape that does not exist is refused with the ones that do."""
    with pytest.raises(ValueError, match="wide: expected one of queries, heads .or empty., found 'rows'"):
        with small_sizes("rows"):
            pass


def _clamped_offset(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    """flash_attn_func with causal=True whose bottom-right offset n_k - n_q is clamped at -1: right
    while n_q <= n_k + 1, wrong from n_q = n_k + 2 on (query n_q - n_k then sees one key too many,
    once there are 2 keys or more)."""
    n_q, n_k, h_q, h_kv = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(h_q // h_kv, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(h_q // h_kv, dim=1)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(q.shape[-1])
    keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(max(n_k - n_q, -1))
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)
    return (weights @ vh).transpose(1, 2)


@pytest.fixture(scope="module")
def unbounded_kv_cache(tmp_path_factory) -> Path:
    """kv_cache without its n_q <= n_k bound: bottom-right causal where the first queries may see no key."""
    text = Path("specs/kv_cache.yaml").read_text()
    assert '  where: ["n_q <= n_k"]\n' in text
    path = tmp_path_factory.mktemp("spec") / "kv_cache.yaml"
    path.write_text(text.replace('  where: ["n_q <= n_k"]\n', ""))
    return path


def test_a_bug_that_needs_two_more_queries_than_keys_shrinks_to_a_small_counterexample(unbounded_kv_cache, monkeypatch):
    """An offset clamped at -1 is wrong only from n_q = n_k + 2 (the first two queries fully masked)
    with 2 keys: the small inputs hold such an input, so the counterexample is (1, 4, h, d) queries
    against 2 keys, 20 entries; without the wide small inputs it stays a generated one of 414."""
    spec = load_spec(unbounded_kv_cache)
    case = next(c for c in build_cases(spec, "float32") if c.id == "property:matches_reference")
    original = judge_case(spec, case, InProcessRunner(_clamped_offset), "float32")
    assert original.failure is not None and original.failure.size > 400

    def shrunk():
        return add_shrunk(
            spec, case, original, lambda: InProcessRunner(_clamped_offset), "float32", max_steps=50, drawn_first=True
        ).failure

    small = shrunk()
    q, k = np.shape(small.args["q"]), np.shape(small.args["k"])
    assert small.shrunk_from.how == "small" and small.size == 20
    assert (q[0], q[1], k[1]) == (1, 4, 2)  # n_q = n_k + 2
    monkeypatch.setattr("attnscore.check.small_inputs.wide_shapes", lambda contract: ())
    monkeypatch.setattr("attnscore.check.small_inputs._BUILT", {})
    capped = shrunk()
    assert capped.shrunk_from.how == "drawn" and capped.size > 20 * 10
