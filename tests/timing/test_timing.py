"""Tests for kernel timing (attnscore.timing) and the ``attnscore bench`` command."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.maths import reference
from attnscore.maths.contracts import get_contract
from attnscore.timing.benchmark import DEFAULT_SIZES, agrees, bench, bench_inputs, parse_sizes, torch_baseline
from attnscore.timing.kernel_timer import Timing, time_calls

SMALL = ["--size", "batch=2", "--size", "n_q=8", "--size", "n_k=6", "--size", "d_k=4", "--size", "d_v=3"]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_timing_statistics_are_median_iqr_and_min():
    t = Timing((4.0, 1.0, 3.0, 2.0, 100.0), "wall")
    assert t.median_ms == 3.0
    assert t.iqr_ms == pytest.approx(4.0 - 2.0)
    assert t.min_ms == 1.0
    assert Timing((5.0,), "wall").iqr_ms == 0.0


def test_time_calls_counts_warmup_and_repeats():
    calls = []
    timing = time_calls(lambda x: calls.append(x), {"x": torch.ones(2)}, warmup=2, repeats=5, flush_bytes=1024)
    assert len(calls) == 7
    assert len(timing.samples_ms) == 5 and timing.clock == "wall"
    assert all(s >= 0 for s in timing.samples_ms)


@pytest.mark.parametrize(("warmup", "repeats"), [(0, 0), (-1, 3)])
def test_time_calls_refuses_bad_counts(warmup, repeats):
    with pytest.raises(ValueError, match="expected repeats >= 1 and warmup >= 0"):
        time_calls(lambda: None, {}, warmup=warmup, repeats=repeats)


def test_parse_sizes_overrides_defaults_and_locates_errors():
    sizes = parse_sizes({"n_q": "16", "batch": "2,3"})
    assert sizes["n_q"] == (16,) and sizes["batch"] == (2, 3) and sizes["d_k"] == DEFAULT_SIZES["d_k"]
    assert parse_sizes({"batch": ""})["batch"] == ()
    with pytest.raises(ValueError, match=r"--size n_x=3: expected one of batch, n_q"):
        parse_sizes({"n_x": "3"})
    with pytest.raises(ValueError, match="expected one positive integer"):
        parse_sizes({"d_k": "0"})
    with pytest.raises(ValueError, match="expected one positive integer"):
        parse_sizes({"d_k": "4,4"})
    with pytest.raises(ValueError, match="positive integers separated by commas"):
        parse_sizes({"batch": "two"})


def test_bench_inputs_follow_the_legend_and_never_mask_a_whole_row():
    sizes = parse_sizes({"batch": "2,3", "n_q": "5", "n_k": "7", "d_k": "4", "d_v": "6"})
    args = bench_inputs(get_contract("attention"), sizes, "float16", "cpu", seed=1)
    assert args["Q"].shape == (2, 3, 5, 4) and args["K"].shape == (2, 3, 7, 4) and args["V"].shape == (2, 3, 7, 6)
    assert args["Q"].dtype == torch.float16
    assert args["mask"].dtype == torch.bool and args["mask"].shape == (2, 3, 5, 7)
    assert bool(args["mask"].any(-1).all())
    again = bench_inputs(get_contract("attention"), sizes, "float16", "cpu", seed=1)
    assert torch.equal(args["Q"], again["Q"])  # seeded


@pytest.mark.parametrize(
    "name",
    [
        "score_matrix",
        "scaled_score_matrix",
        "bilinear_scores",
        "attention",
        "attention_weights",
        "masked_scores",
        "causal_attention_top_left",
        "causal_attention_bottom_right",
        "scores",
        "score",
    ],
)
def test_torch_baseline_computes_the_contract(name):
    """torch's own op gives the reference's values (so the comparison is like for like)."""
    contract = get_contract(name)
    sizes = parse_sizes({"batch": "2", "n_q": "5", "n_k": "7", "d_k": "4", "d_v": "3", "d_q": "3"})
    args = bench_inputs(contract, sizes, "float64", "cpu")
    label, op = torch_baseline(contract)
    assert label
    torch.testing.assert_close(op(**args), torch.as_tensor(contract.reference(**args)), rtol=1e-12, atol=1e-12)


def test_no_torch_baseline_for_additive_scores():
    assert torch_baseline(get_contract("additive_scores")) is None


def test_agrees_is_a_coarse_guard():
    assert agrees(1e-5, 30.0, "float32") and not agrees(0.5, 30.0, "float32")
    assert agrees(0.01, 0.1, "float16")  # scale floor of 1
    assert not agrees(0.1, 0.1, "float16")


def test_bench_flags_a_different_function_and_a_raising_one():
    contract = get_contract("score_matrix")
    sizes = parse_sizes({"batch": "2", "n_q": "4", "n_k": "3", "d_k": "5"})
    right = bench(contract, reference.score_matrix, "right", sizes=sizes, repeats=2, warmup=0, flush_bytes=0)
    assert right.disagreement == "" and right.max_abs_diff == 0.0
    assert [c.label for c in right.candidates] == ["right", "attnscore reference", "torch torch.matmul"]
    assert all(c.timing is not None and len(c.timing.samples_ms) == 2 for c in right.candidates)
    assert set(right.sizes) == {"batch", "n_q", "n_k", "d_k"}
    wrong = bench(contract, reference.scaled_score_matrix, "wrong", sizes=sizes, repeats=2, warmup=0, flush_bytes=0)
    assert "a different function?" in wrong.disagreement and wrong.max_abs_diff > 0.1
    transposed = bench(contract, lambda Q, K: K @ Q.mT, "t", sizes=sizes, repeats=1, warmup=0, flush_bytes=0)
    assert transposed.disagreement == "result shape (2, 3, 4) differs from the reference's (2, 4, 3)"

    def boom(Q, K):
        raise RuntimeError("kernel launch failed")

    raised = bench(contract, boom, "boom", sizes=sizes, repeats=1, warmup=0, flush_bytes=0)
    assert raised.disagreement == "the implementation raised RuntimeError: kernel launch failed"
    assert raised.candidates[0].timing is None and raised.candidates[0].error == "RuntimeError: kernel launch failed"


def test_cli_bench_json_and_exit_codes():
    ok = run(
        "bench",
        "--impl",
        "examples.impl.my_attention:attention",
        "--spec",
        "specs/attention.yaml",
        *SMALL,
        "--repeats",
        "3",
        "--warmup",
        "1",
        "--no-flush",
        "--format",
        "json",
    )
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.output)
    assert data["contract"] == "attention" and data["device"] == "cpu" and data["flushed"] is False
    assert data["sizes"] == {"batch": [2], "n_q": [8], "n_k": [6], "d_k": [4], "d_v": [3]}
    assert [c["label"] for c in data["candidates"]] == [
        "examples.impl.my_attention:attention",
        "attnscore reference",
        "torch scaled_dot_product_attention",
    ]
    assert all(c["median_ms"] > 0 and c["clock"] == "wall" for c in data["candidates"])
    assert data["candidates"][1]["vs_reference"] == 1.0
    wrong = run(
        "bench",
        "--impl",
        "attnscore.maths.reference:scaled_score_matrix",
        "--spec",
        "specs/score_matrix.yaml",
        *SMALL,
        "--repeats",
        "2",
        "--no-flush",
    )
    assert wrong.exit_code == 1
    assert "Warning: max |result - reference|" in wrong.output and "a different function?" in wrong.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--size", "n_z=3"], "--size n_z=3: expected one of"),
        (["--size", "n_q"], "--size: expected NAME=VALUE"),
        (["--repeats", "0"], "Invalid value for '--repeats'"),
    ],
)
def test_cli_bench_usage_errors(extra, message):
    result = run("bench", "--impl", "examples.impl.my_attention:attention", "--spec", "specs/attention.yaml", *extra)
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cli_bench_cuda_without_gpu_is_a_usage_error():
    result = run(
        "bench", "--impl", "examples.impl.my_attention:attention", "--spec", "specs/attention.yaml", "--device", "cuda"
    )
    assert result.exit_code == 2 and "CUDA is not available" in result.output


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_time_calls_uses_cuda_events_on_a_gpu():
    x = torch.randn(256, 256, device="cuda")
    timing = time_calls(lambda a: a @ a, {"a": x}, device="cuda", warmup=2, repeats=5)
    assert timing.clock == "cuda events" and len(timing.samples_ms) == 5 and timing.min_ms > 0
