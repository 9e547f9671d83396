"""Bundled specs whose key/value heads are grouped show it in a worked example: tiled KV heads lose it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnscore.check.cases import build_cases
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.grade.grading import grade_submission
from attnscore.report.results import Verdict
from attnscore.spec.bundled import bundled_spec_paths
from attnscore.spec.load import load_spec


def _grouped(spec) -> bool:
    """Whether the spec's legend groups query heads over KV heads (``h_q``, ``h_kv``, not tied)."""
    symbols = {sym for _, legend in spec.contract.parameters for sym in legend}
    tied = {frozenset(pair) for pair in spec.contract.ties}
    return {"h_q", "h_kv"} <= symbols and frozenset({"h_q", "h_kv"}) not in tied


GROUPED = [p for p in bundled_spec_paths() if _grouped(load_spec(p))]


def _examples(spec):
    """The spec's worked-example cases in float64 (no property is drawn)."""
    return build_cases(dataclasses.replace(spec, properties=(), rules=()), "float64")


def _kv_axes(spec) -> dict[str, int]:
    """``{parameter: heads axis from the end}`` for the parameters whose legend holds ``h_kv``."""
    return {name: legend.index("h_kv") - len(legend) for name, legend in spec.contract.parameters if "h_kv" in legend}


def _tiled(spec):
    """The spec's own reference, except that query head ``h`` uses KV head ``h mod h_kv``
    (``h0 h1 h0 h1``, ``torch.Tensor.repeat``) instead of ``h // (h_q / h_kv)``."""
    axes, names = _kv_axes(spec), spec.contract.parameter_names
    q_name = next(n for n, legend in spec.contract.parameters if "h_q" in legend)
    q_axis = next(legend.index("h_q") - len(legend) for n, legend in spec.contract.parameters if n == q_name)

    def fn(*args, **kwargs):
        named = dict(zip(names, args, strict=False))
        h_q = named[q_name].shape[q_axis]
        for name, axis in axes.items():
            x = named[name]
            reps = [1] * x.dim()
            reps[axis] = h_q // x.shape[axis]
            named[name] = x.repeat(*reps)  # h0 h1 h0 h1
        return spec.contract.reference(*(named[n] for n in names[: len(args)]), **kwargs)

    return fn


def test_the_grouped_specs_are_the_ones_the_issue_names():
    """The check below reaches every bundled spec that groups heads (kv_cache, sliding_window,
    key_padding and varlen among them)."""
    ids = {load_spec(p).id for p in GROUPED}
    assert {"kv_cache", "sliding_window", "key_padding", "varlen", "gqa", "sdpa"} <= ids


@pytest.mark.parametrize("path", GROUPED, ids=[p.stem for p in GROUPED])
def test_a_worked_example_tells_grouped_kv_heads_from_tiled(path):
    """Some worked example has h_q > h_kv >= 2; the spec's reference passes it and the same
    reference with KV heads tiled (h0 h1 h0 h1) fails it with a wrong value."""
    spec = load_spec(path)
    examples = _examples(spec)
    failed = []
    for case in examples:
        right = judge_case(spec, case, InProcessRunner(spec.contract.reference), "float64")
        assert right.verdict == Verdict.PASSED, (case.id, right.message)
        wrong = judge_case(spec, case, InProcessRunner(_tiled(spec)), "float64")
        if wrong.verdict != Verdict.PASSED:
            assert wrong.verdict == Verdict.WRONG_VALUE, (case.id, wrong.message)
            failed.append(case.id)
    assert failed, f"{spec.id}: no worked example tells grouped KV heads from tiled ones"


@pytest.mark.parametrize("spec_id", ["kv_cache", "sliding_window", "key_padding", "varlen"])
def test_the_grouped_heads_example_differs_on_heads_1_and_2(spec_id):
    """``grouped_kv_heads``: 4 query heads over 2 KV heads; tiling swaps the outputs of query heads
    1 and 2 and leaves heads 0 and 3 right (as its explanation says)."""
    spec = load_spec(f"specs/{spec_id}.yaml")
    case = next(c for c in _examples(spec) if c.id == "example:grouped_kv_heads")
    args = case.calls[0].args
    got = np.asarray(_tiled(spec)(*(torch.as_tensor(args[n]) for n in spec.contract.parameter_names if n in args)))
    expected = np.asarray(case.calls[0].golden)
    q_name = next(n for n, legend in spec.contract.parameters if "h_q" in legend)
    axis = next(legend.index("h_q") - len(legend) for n, legend in spec.contract.parameters if n == q_name)
    heads = np.moveaxis(got, axis, 0), np.moveaxis(expected, axis, 0)
    kv_name, kv_axis = next(iter(_kv_axes(spec).items()))
    assert heads[0].shape[0] == 4 and np.shape(args[kv_name])[kv_axis] == 2
    assert np.array_equal(heads[0][[0, 3]], heads[1][[0, 3]])
    assert np.array_equal(heads[0][1], heads[1][2]) and np.array_equal(heads[0][2], heads[1][1])
    assert not np.array_equal(heads[0][1], heads[1][1])


_FLASH_TILED = """
import torch


def _one(q, k, v, causal, window, scale):
    # one sequence: q (n_q, h_q, d), k and v (n_k, h_kv, d); KV heads tiled: h0 h1 h0 h1 (the mistake)
    n_q, h_q, d = q.shape
    n_k, h_kv = k.shape[0], k.shape[1]
    k, v = k.float().repeat(1, h_q // h_kv, 1), v.float().repeat(1, h_q // h_kv, 1)
    i = torch.arange(n_q)[:, None] + n_k - n_q
    j = torch.arange(n_k)[None, :]
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        keep &= j <= i
    if window[0] >= 0:
        keep &= j >= i - window[0]
    if window[1] >= 0:
        keep &= j <= i + window[1]
    s = torch.einsum("qhd,khd->hqk", q.float(), k) * (scale if scale is not None else d**-0.5)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)
    return torch.einsum("hqk,khd->qhd", w, v).to(q.dtype)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    return torch.stack([_one(q[b], k[b], v[b], causal, window_size, softmax_scale) for b in range(q.shape[0])])


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1)):
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=q.dtype)
    for s in range(len(cu_seqlens_q) - 1):
        a, b = int(cu_seqlens_q[s]), int(cu_seqlens_q[s + 1])
        c, e = int(cu_seqlens_k[s]), int(cu_seqlens_k[s + 1])
        if b > a and e > c:
            out[a:b] = _one(q[a:b], k[c:e], v[c:e], causal, window_size, softmax_scale)
    return out


def attention(query, key, value, key_lengths):
    # (b, h, n, d); KV heads tiled: h0 h1 h0 h1 (the mistake)
    h_q, n_k, d = query.shape[1], key.shape[2], query.shape[-1]
    key = key.float().repeat(1, h_q // key.shape[1], 1, 1)
    value = value.float().repeat(1, h_q // value.shape[1], 1, 1)
    s = query.float() @ key.transpose(-1, -2) * d**-0.5
    keep = (torch.arange(n_k)[None, :] < key_lengths.long()[:, None])[:, None, None, :]
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)
    return (w @ value).to(query.dtype)
"""


@pytest.mark.slow
@pytest.mark.parametrize("spec_id", ["kv_cache", "sliding_window", "key_padding", "varlen"])
def test_a_student_file_with_tiled_kv_heads_loses_the_grouped_example_in_the_sandbox(spec_id, tmp_path):
    """Graded through the sandbox, a student file whose query head h uses KV head h mod h_kv passes
    every one-head worked example and fails ``grouped_kv_heads`` (and ``scaled_scores_on_grouped_heads``
    where the spec has it: no points), so it is not full marks."""
    spec = load_spec(f"specs/{spec_id}.yaml")
    path = tmp_path / "submission.py"
    path.write_text(_FLASH_TILED)
    result = grade_submission(path, spec, build_cases(spec), shrink_steps=0)
    by_id = {c.id: c for c in result.cases}
    grouped = by_id["example:grouped_kv_heads"]
    assert grouped.verdict == Verdict.WRONG_VALUE and grouped.points == 0
    scaled = by_id.get("example:scaled_scores_on_grouped_heads")  # the scale and the grouping both show there
    if scaled is not None:
        assert scaled.verdict == Verdict.WRONG_VALUE and scaled.points == 0
    others = [c for c in result.cases if c.kind == "example" and c not in (grouped, scaled)]
    assert others and all(c.verdict == Verdict.PASSED for c in others), [(c.id, c.verdict) for c in others]
    assert sum(c.points for c in result.cases) < sum(c.max_points for c in result.cases)
