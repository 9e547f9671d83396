"""Integer tensor parameters (cu_seqlens, max_seqlen, key_lengths): drawn with the sizes they fit, kept
int32 (never cast to the tested dtype), validated at spec load with located errors, sent to the
sandboxed worker and to in-process runs (shape () as a Python int), and shown in counterexamples."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.boundary.calls import argument_value, bound_python_ints, to_torch
from attnscore.boundary.worker import python_int_inputs
from attnscore.check.cases import build_cases, cast
from attnscore.check.diagnosis import confirmation_args
from attnscore.check.implementation import run_impl
from attnscore.check.runner import InProcessRunner
from attnscore.grade.grading import grade_submission
from attnscore.maths.contracts import get_contract
from attnscore.maths.strategies import random_args
from attnscore.report.failure import array_of, json_array
from attnscore.report.feedback import failure_text
from attnscore.sandbox.launch import Limits
from attnscore.sandbox.runner import SandboxRunner
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

VARLEN = Path("specs/varlen.yaml")
PADDING = Path("specs/key_padding.yaml")
LIMITS = Limits(call_timeout_s=20.0)

VARLEN_SUBMISSION = """
import torch
import torch.nn.functional as F


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1)):
    # what FlashAttention itself requires of the integer arguments
    assert type(max_seqlen_q) is int and type(max_seqlen_k) is int, (type(max_seqlen_q), type(max_seqlen_k))
    assert cu_seqlens_q.dtype == torch.int32 and cu_seqlens_k.dtype == torch.int32, cu_seqlens_q.dtype
    assert cu_seqlens_q.is_contiguous() and cu_seqlens_k.is_contiguous()
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    assert max_seqlen_q == max(b - a for a, b in zip(cq, cq[1:]))
    out = q.new_zeros(q.shape[0], q.shape[1], v.shape[2])
    for b in range(len(cq) - 1):
        qs, ks, vs = (t.transpose(0, 1) for t in (q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]]))
        n_q, n_k = qs.shape[1], ks.shape[1]
        keep = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        if not causal:
            keep = torch.ones(n_q, n_k, dtype=torch.bool)
        g = q.shape[1] // k.shape[1]
        o = F.scaled_dot_product_attention(qs, ks.repeat_interleave(g, 0), vs.repeat_interleave(g, 0),
                                           attn_mask=keep, scale=softmax_scale)
        out[cq[b]:cq[b + 1]] = o.nan_to_num(0.0).transpose(0, 1)
    return out
"""

PADDING_SUBMISSION = """
import torch
import torch.nn.functional as F


def attention(query, key, value, key_lengths):
    assert key_lengths.dtype == torch.int32, key_lengths.dtype
    keep = torch.arange(key.shape[-2])[None, :] < key_lengths[:, None]
    return F.scaled_dot_product_attention(query, key, value, attn_mask=keep[:, None, None, :],
                                          enable_gqa=True).nan_to_num(0.0)
"""

ECHO = """
import torch


def f(x, lengths, count):
    # what arrived: the float input's dtype code, the lengths' dtype and values, count's type and value
    return torch.tensor([float(x.dtype == torch.float16), float(lengths.dtype == torch.int32),
                         *[float(n) for n in lengths.tolist()], float(type(count) is int), float(count)])
"""


def _spec_text(path: Path, old: str, new: str) -> str:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    return text.replace(old, new, 1)


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return [str(p) for p in info.value.problems]


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_drawn_offsets_fit_the_drawn_inputs(data):
    """cu_seqlens start at 0, rise (a sequence may have no key, never no query) and end at q's and k's
    first dims, some sequence having a key; max_seqlen is the longest; int32."""
    c = get_contract("flash_attn_varlen")
    a = data.draw(random_args(c))
    for side in ("q", "k"):
        cu = a[f"cu_seqlens_{side}"]
        assert cu.dtype == np.int32 and cu.ndim == 1 and cu[0] == 0 and cu[-1] == a[side].shape[0]
        assert np.all(np.diff(cu) >= (1 if side == "q" else 0)) and cu[-1] >= 1
        assert a[f"max_seqlen_{side}"].shape == () and int(a[f"max_seqlen_{side}"]) == int(np.diff(cu).max())
    assert a["cu_seqlens_q"].shape == a["cu_seqlens_k"].shape
    assert c.integer_problems(a) == []


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_drawn_key_lengths_lie_in_range(data):
    """key_lengths has one int32 entry per batch item, each in [0, n_k], not all 0."""
    c = get_contract("key_padding_attention")
    a = data.draw(random_args(c))
    lengths, n_k = a["key_lengths"], a["key"].shape[-2]
    assert lengths.dtype == np.int32 and lengths.shape == (a["query"].shape[0],)
    assert lengths.min() >= 0 and 1 <= lengths.max() <= n_k


def _empty_key_rows(spec_id: str, args: dict) -> np.ndarray:
    """Bool mask over the output's query rows (key_padding: ``(b, n_q)``; varlen: ``(total_q,)``) of
    the queries that keep no key: a batch item of valid length 0, a sequence without keys."""
    if spec_id == "key_padding":
        return np.repeat((args["key_lengths"] == 0)[:, None], args["query"].shape[-2], axis=1)
    cu_q, cu_k = args["cu_seqlens_q"], args["cu_seqlens_k"]
    rows = np.zeros(args["q"].shape[0], dtype=bool)
    for s in range(len(cu_q) - 1):
        rows[cu_q[s] : cu_q[s + 1]] = cu_k[s + 1] == cu_k[s]
    return rows


@pytest.mark.parametrize("spec_path", [PADDING, VARLEN], ids=["key_padding", "varlen"])
def test_drawn_cases_include_queries_with_no_key_and_reference_and_golden_agree_there(spec_path):
    """matches_reference draws calls where a query keeps no key (key length 0, a sequence with no
    key), but never a call without any key; there the golden value is the zero vector, and the
    reference (torch) gives it too (and the golden value elsewhere)."""
    spec = load_spec(spec_path)
    spec = dataclasses.replace(spec, properties=tuple(u for u in spec.properties if u.name == "matches_reference"))
    calls = [call for case in build_cases(spec, "float64") if case.kind == "property" for call in case.calls]
    empty = [(call, _empty_key_rows(spec.id, call.args)) for call in calls]
    empty = [(call, rows) for call, rows in empty if rows.any()]
    assert 1 <= len(empty) < len(calls) / 2
    for call, rows in empty:
        assert not rows.all()
        golden = call.golden if spec.id == "varlen" else call.golden.transpose(0, 2, 1, 3)  # (b, n_q, h, d_v)
        assert np.array_equal(golden[rows], np.zeros_like(golden[rows]))
        names = spec.contract.parameter_names
        got = np.asarray(spec.contract.reference(*(argument_value(torch.as_tensor(call.args[n])) for n in names)))
        got = got if spec.id == "varlen" else got.transpose(0, 2, 1, 3)
        assert np.array_equal(got[rows], golden[rows])
        assert np.allclose(got, golden, rtol=1e-12, atol=1e-12)


def test_confirmation_inputs_follow_the_integer_rules():
    """The diagnosis's own inputs (drawn with a seeded generator) are valid packed batches too."""
    spec = load_spec(VARLEN)
    for args in confirmation_args(spec):
        assert spec.contract.integer_problems(args) == []
        assert args["cu_seqlens_q"].dtype == np.int32


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_cases_never_cast_integer_parameters(dtype):
    """Every case's integer arguments stay int32 (0-d stays 0-d) while the floats take the tested dtype."""
    spec = load_spec(VARLEN)
    for case in build_cases(spec, dtype):
        for call in case.calls:
            assert call.args["cu_seqlens_q"].dtype == np.int32 and call.args["max_seqlen_q"].shape == ()
            tested = call.dtype or dtype  # every_dtype properties also call in the spec's other dtypes
            assert call.args["q"].dtype == {"float16": np.float16, "bfloat16": np.float32, "float32": np.float32}.get(
                tested, np.float64
            )
    assert cast(np.array(7, dtype=np.int32), "float16").shape == ()
    assert cast(np.array([0, 3], dtype=np.int32), "float16").dtype == np.int32


def test_worked_example_integers_are_int32():
    """A YAML integer list becomes an int32 array; a shape () parameter a 0-d one."""
    ex = load_spec(VARLEN).worked_examples[0]
    assert ex.inputs["cu_seqlens_q"].dtype == np.int32 and ex.inputs["cu_seqlens_q"].tolist() == [0, 2, 5]
    assert ex.inputs["max_seqlen_q"].shape == () and int(ex.inputs["max_seqlen_q"]) == 3
    assert load_spec(PADDING).worked_examples[0].inputs["key_lengths"].tolist() == [2, 3]


@pytest.mark.parametrize(
    "path, old, new, expected",
    [
        pytest.param(
            VARLEN,
            "cu_seqlens_q: [0, 2, 5]",
            "cu_seqlens_q: [0, 2.0, 5]",
            "expected integers (an int32 parameter, e.g. [0, 2, 5]), found number 2.0",
            id="float offset",
        ),
        pytest.param(
            VARLEN,
            "cu_seqlens_q: [0, 2, 5]",
            "cu_seqlens_q: [0, true, 5]",
            "expected integers (an int32 parameter, e.g. [0, 2, 5]), found boolean True",
            id="bool offset",
        ),
        pytest.param(
            VARLEN,
            "cu_seqlens_q: [0, 2, 5]",
            "cu_seqlens_q: [0, 2, 4]",
            "expected offsets ending at total_q (q's first dim) 5, found [0, 2, 4] (ending at 4)",
            id="offsets short of total_q",
        ),
        pytest.param(
            VARLEN,
            "cu_seqlens_q: [0, 2, 5]",
            "cu_seqlens_q: [0, 6, 5]",
            "expected non-decreasing offsets, found [0, 6, 5] (6 then 5 at entry 2)",
            id="decreasing offsets",
        ),
        pytest.param(
            VARLEN,
            "cu_seqlens_q: [0, 2, 5]",
            "cu_seqlens_q: [1, 2, 5]",
            "expected offsets starting at 0, found [1, 2, 5]",
            id="offsets not from 0",
        ),
        pytest.param(
            VARLEN,
            "max_seqlen_q: 3",
            "max_seqlen_q: 2",
            "expected the longest sequence of cu_seqlens_q, 3, found 2",
            id="max_seqlen not derived",
        ),
        pytest.param(
            VARLEN,
            "max_seqlen_q: 3",
            "max_seqlen_q: 3.5",
            "expected integers (an int32 parameter, e.g. [0, 2, 5]), found number 3.5",
            id="float max_seqlen",
        ),
        pytest.param(
            PADDING,
            "key_lengths: [2, 3]",
            "key_lengths: [2, 5]",
            "expected valid key counts in [0, n_k=4], found 5 in [2, 5]",
            id="length over n_k",
        ),
        pytest.param(
            PADDING,
            "key_lengths: [2, 3]",
            "key_lengths: [-1, 3]",
            "expected valid key counts in [0, n_k=4], found -1 in [-1, 3]",
            id="negative length",
        ),
        pytest.param(
            PADDING,
            "key_lengths: [2, 3]",
            "key_lengths: [2, 3000000000]",
            "expected integers within int32 range, found 3000000000",
            id="length beyond int32",
        ),
    ],
)
def test_bad_integer_in_a_worked_example_is_located(tmp_path, path, old, new, expected):
    """A float, a bool, an out-of-range value or offsets that do not fit: one located problem, at its line."""
    text = _spec_text(path, old, new)
    found = _problems(tmp_path, text)
    assert len(found) == 1, found
    line = _line_of(text, new)
    assert found[0].startswith(f"{tmp_path / 'spec.yaml'}:{line}:"), found
    assert expected in found[0], found


def test_integer_parameter_refuses_a_float_for_a_float_parameter_too(tmp_path):
    """Floats stay numbers: an integer in q is fine (d_k = 1 values), a bool is not."""
    text = _spec_text(VARLEN, "q: [[[0]], [[0]], [[1]]]", "q: [[[0]], [[0]], [[true]]]")
    found = _problems(tmp_path, text)
    assert any("expected numbers, found true/false" in p for p in found), found


def test_argument_value_turns_only_0d_int32_into_int():
    """A 0-d int32 tensor reaches the function as a Python int; anything else as it is."""
    assert type(argument_value(torch.tensor(3, dtype=torch.int32))) is int
    one_d = torch.tensor([3], dtype=torch.int32)
    assert argument_value(one_d) is one_d
    zero_d_float = torch.tensor(3.0)
    assert argument_value(zero_d_float) is zero_d_float
    assert to_torch(np.array([0, 2], dtype=np.int32), "float16").dtype == torch.int32


def test_worker_wrapper_converts_the_scalar_inputs_by_position_and_name():
    """bound_python_ints: positions and by-name names of 0-d int32 inputs become ints; others stay."""
    items = [
        {"name": "x", "dtype": "float32", "shape": [2]},
        {"name": "n", "dtype": "int32", "shape": []},
        {"name": "cu", "dtype": "int32", "shape": [3]},
        {"name": "m", "dtype": "int32", "shape": []},
    ]
    positions, names = python_int_inputs(items, ["x", "n", "cu", "m"], 3)
    assert positions == frozenset({1}) and names == frozenset({"m"})
    seen = {}

    def f(x, n, cu, m=None):
        seen.update(x=type(x), n=type(n), cu=type(cu), m=type(m))

    wrapped = bound_python_ints()(f, positions, names)
    t = torch.tensor(4, dtype=torch.int32)
    wrapped(torch.zeros(2), t, torch.tensor([0, 1, 2], dtype=torch.int32), m=t)
    assert seen == {"x": torch.Tensor, "n": int, "cu": torch.Tensor, "m": int}


def test_in_process_runner_passes_ints_and_int32_tensors():
    """The in-process runner hands int32 arrays over as int32 tensors and 0-d ones as ints."""
    got = {}

    def f(x, lengths, count):
        got.update(x=x.dtype, lengths=lengths.dtype, count=type(count))
        return x + 1

    runner = InProcessRunner(f)
    runner.call(
        {"x": np.ones(2), "lengths": np.array([1, 2], dtype=np.int32), "count": np.array(5, np.int32)}, "float16"
    )
    assert got == {"x": torch.float16, "lengths": torch.int32, "count": int}
    assert runner.last_inspection == {"mutated": [], "aliased": []}


def test_sandbox_sends_integers_unchanged(tmp_path):
    """Over the wire the worker gets int32 lengths (not float16) and a Python int for the 0-d input."""
    path = tmp_path / "solution.py"
    path.write_text(ECHO, encoding="utf-8")
    args = {"x": np.ones(2), "lengths": np.array([3, 0, 7], dtype=np.int32), "count": np.array(9, dtype=np.int32)}
    with SandboxRunner(path, "f", LIMITS) as runner:
        got = runner.call(args, "float16")
    assert got.array.tolist() == [1.0, 1.0, 3.0, 0.0, 7.0, 1.0, 9.0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec_path, source", [(VARLEN, VARLEN_SUBMISSION), (PADDING, PADDING_SUBMISSION)], ids=["varlen", "key_padding"]
)
def test_integer_specs_give_a_correct_submission_full_marks_in_the_sandbox(tmp_path, spec_path, source):
    """A correct submission, which asserts the integer arguments' types, gets every point in the worker."""
    path = tmp_path / "solution.py"
    path.write_text(source, encoding="utf-8")
    spec = load_spec(spec_path)
    result = grade_submission(path, spec, build_cases(spec, spec.dtypes[0]), limits=LIMITS)
    assert result.all_passed, {c.id: (c.verdict, c.message) for c in result.cases if not c.passed}
    assert result.score == result.max_score > 0


def test_counterexample_shows_integer_parameters_as_integers():
    """A failing call's reproduction writes cu_seqlens as int32 tensors and max_seqlen as plain ints,
    and the JSON record keeps them integers."""

    def across(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, **_):
        n_q, n_k = q.shape[0], k.shape[0]
        keep = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=keep
        )
        return o.nan_to_num(0.0).transpose(0, 1)

    result = run_impl(load_spec(VARLEN), across, dtype="float32", shrink=False)
    case = next(c for c in result.cases if c.id == "example:two_sequences_stay_apart")
    text = failure_text(case.failure)
    assert (
        "torch.tensor([0, 2, 5], dtype=torch.int32), torch.tensor([0, 2, 5], dtype=torch.int32), 3, 3, causal=True)"
        in text
    ), text
    record = json.loads(json.dumps(case.failure.args))
    assert record["cu_seqlens_q"] == [0, 2, 5] and record["max_seqlen_q"] == 3
    assert array_of(record["cu_seqlens_q"]).dtype == np.int32
    assert array_of(record["q"]).dtype == np.float64


def test_json_array_round_trip_keeps_ints_bools_and_floats_apart():
    """Integers come back int32, bools bool, floats float64 (integral floats included)."""
    for value, kind in (
        (np.array([0, 2, 5], dtype=np.int32), np.int32),
        (np.array([True, False]), np.bool_),
        (np.array([1.0, 2.0]), np.float64),
        (np.array(4, dtype=np.int32), np.int32),
    ):
        back = array_of(json.loads(json.dumps(json_array(value))))
        assert back.dtype == kind and back.tolist() == value.tolist()


def test_only_integer_parameters_keep_an_integer_dtype():
    """Integer values written into a float parameter (a property's rng.integers) are cast to the tested
    dtype; the contract's integer parameters stay int32."""
    from attnscore.check.cases import _call

    spec = load_spec(PADDING)
    ex = spec.worked_examples[0]
    args = {**ex.inputs, "value": np.asarray(ex.inputs["value"], dtype=np.int32)}
    call = _call(spec, args, "float32", spec.tolerance)
    assert call.args["value"].dtype == np.float32 and call.args["key_lengths"].dtype == np.int32
    assert call.args["value"].tolist() == np.asarray(ex.inputs["value"], dtype=np.float32).tolist()
