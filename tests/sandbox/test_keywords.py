"""The sandboxed worker calls a submission as a spec's contract binds it in process:
``f(*positional, **by_name, **options)`` (attnscore.boundary.worker, wire, sandbox.runner, grade.grading)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attnscore.boundary import wire
from attnscore.check.cases import build_cases
from attnscore.grade.grading import grade_submission
from attnscore.report.feedback import failure_text
from attnscore.report.results import Verdict
from attnscore.sandbox.launch import Limits
from attnscore.sandbox.runner import SandboxRunner
from attnscore.spec.load import load_spec

LIMITS = Limits(call_timeout_s=20.0)

WRAPS_SDPA = """
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
        enable_gqa=enable_gqa)
"""

NO_KEYWORDS = """
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None):
    return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)
"""

SCALE_IGNORED = """
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, scale=None, enable_gqa=False):
    return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                                            enable_gqa=enable_gqa)
"""

ECHO = """
import torch


def f(q, k, mask=None, **options):
    # which arguments came by name, and the fixed options, as numbers: mask given, scale, flag
    return torch.tensor([float(mask is not None), float(options["scale"]), float(options["flag"])])
"""


FLASH_LIKE = """
import torch
import torch.nn.functional as F


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    assert isinstance(window_size, tuple), type(window_size)  # as FlashAttention's own default is
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    i = torch.arange(n_q)[:, None] + (n_k - n_q)
    j = torch.arange(n_k)[None, :]
    left, right = window_size
    right = 0 if causal else right
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    if left >= 0:
        keep &= j >= i - left
    if right >= 0:
        keep &= j <= i + right
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    s = (q @ k.transpose(-1, -2) * scale).masked_fill(~keep, float("-inf"))
    return (torch.softmax(s, dim=-1).nan_to_num(0.0) @ v).transpose(1, 2)
"""


def _grade(tmp_path: Path, source: str, spec_path: str):
    path = tmp_path / "solution.py"
    path.write_text(source, encoding="utf-8")
    spec = load_spec(spec_path)
    return grade_submission(path, spec, build_cases(spec, spec.dtypes[0]), limits=LIMITS)


@pytest.mark.parametrize("spec_path", ["specs/sdpa.yaml", "specs/sdpa_causal.yaml"])
def test_sdpa_wrapper_gets_full_marks_in_the_sandbox(tmp_path, spec_path):
    """A submission wrapping torch's SDPA gets every point when graded in the sandboxed worker."""
    result = _grade(tmp_path, WRAPS_SDPA, spec_path)
    assert result.all_passed, {c.id: (c.verdict, c.message) for c in result.cases}
    assert result.score == result.max_score > 0


@pytest.mark.slow
@pytest.mark.parametrize("spec_path", ["specs/sliding_window.yaml", "specs/kv_cache.yaml"])
def test_flash_attn_kernel_gets_full_marks_in_the_sandbox(tmp_path, spec_path):
    """A list keyword (window_size: [2, 1]) reaches the submission as the tuple FlashAttention takes."""
    result = _grade(tmp_path, FLASH_LIKE, spec_path)
    assert result.all_passed, {c.id: (c.verdict, c.message) for c in result.cases}
    assert result.score == result.max_score > 0


def test_list_option_travels_as_a_tuple():
    """A JSON list option comes back a tuple; the request equals the one sent."""
    request = wire.CallRequest(1, "float32", "cpu", ("q",), (), (), (("window_size", (2, 1)),))
    obj = json.loads(wire.dumps(wire.encode_message(request)))
    assert obj["options"] == {"window_size": [2, 1]}
    assert wire.decode_call(obj) == request


def test_missing_keyword_parameter_is_a_clear_exception(tmp_path):
    """A function without the spec's keywords fails every case with a TypeError that says how it is called."""
    result = _grade(tmp_path, NO_KEYWORDS, "specs/sdpa.yaml")
    assert result.score == 0
    assert {c.verdict for c in result.cases} == {Verdict.EXCEPTION}
    detail = result.cases[0].failure.detail
    assert "unexpected keyword argument" in detail
    assert (
        "every call is scaled_dot_product_attention(query, key, value, attn_mask=..., enable_gqa=True, scale=0.5): "
        "your function must take these keyword arguments by name"
    ) in detail


@pytest.mark.slow
def test_feedback_shows_the_call_with_its_keywords(tmp_path):
    """The reproduction of a failing call passes attn_mask and the spec's keywords by name."""
    result = _grade(tmp_path, SCALE_IGNORED, "specs/sdpa.yaml")
    case = next(c for c in result.cases if c.id == "example:scale_keyword_is_used")
    assert case.verdict is Verdict.WRONG_VALUE
    assert case.failure.keywords == {"enable_gqa": True, "scale": 0.5}
    assert case.failure.by_name == ("attn_mask",)
    text = failure_text(case.failure)
    assert "scaled_dot_product_attention(torch.tensor([[[1, 0]]], dtype=torch.float32), torch.tensor(" in text
    assert "attn_mask=torch.tensor([[[True, True]]], dtype=torch.bool), enable_gqa=True, scale=0.5)" in text


def test_runner_passes_trailing_arguments_and_options_by_name(tmp_path):
    """SandboxRunner(by_name, options): the worker calls f(q, k, mask=..., scale=..., flag=...)."""
    path = tmp_path / "solution.py"
    path.write_text(ECHO, encoding="utf-8")
    args = {"q": np.ones(2), "k": np.ones(2), "mask": np.ones(2)}
    with SandboxRunner(path, "f", LIMITS, by_name=("mask",), options={"scale": 0.25, "flag": True}) as runner:
        got = runner.call(args, "float64")
        assert runner.keywords == {"scale": 0.25, "flag": True}
    assert got.array.tolist() == [1.0, 0.25, 1.0]


def test_call_request_carries_the_call_form():
    """by_name and options travel as plain JSON and come back as they were; absent when empty."""
    request = wire.CallRequest(3, "float32", "cpu", ("q", "k", "m"), ({"name": "q"},), ("m",), (("scale", 0.5),))
    obj = json.loads(wire.dumps(wire.encode_message(request)))
    assert obj["by_name"] == ["m"] and obj["options"] == {"scale": 0.5}
    assert wire.decode_call(obj) == request
    plain = wire.encode_message(wire.CallRequest(1, "float32", "cpu", ("q",), ()))
    assert "by_name" not in plain and "options" not in plain


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"by_name": ["a", "b", "c"]}, id="more names by name than arguments"),
        pytest.param({"by_name": ["not a name"]}, id="by_name not an identifier"),
        pytest.param({"options": {"scale": {"a": 1}}}, id="option value a mapping"),
        pytest.param({"options": {"window_size": [1, [2]]}}, id="option list not of numbers"),
        pytest.param({"options": {"window_size": ["0.5", 1]}}, id="option list of text"),
        pytest.param({"options": {"1x": 1}}, id="option name not an identifier"),
    ],
)
def test_decode_call_refuses_a_bad_call_form(changed):
    """A call form that is not names and scalars is refused, never passed on to the function."""
    obj = {"type": "call", "id": 1, "dtype": "float32", "names": ["q", "k"], "inputs": [], **changed}
    with pytest.raises(ValueError, match="expected"):
        wire.decode_call(obj)


def test_decode_call_takes_a_text_option():
    """An instructor's own keyword may be text (reduction: "max"): it reaches the function as it is."""
    obj = {"type": "call", "id": 1, "dtype": "float32", "names": ["x"], "inputs": [], "options": {"reduction": "max"}}
    assert wire.decode_call(obj).options == (("reduction", "max"),)
