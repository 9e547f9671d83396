"""`attnscore test`: an importable implementation against specs, in process."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from attnscore.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.slow
def test_correct_implementation_passes_in_both_dtypes():
    """The example implementation gets full marks in float32 and float64; exit 0."""
    result = run(
        "test", "--impl", "examples.impl.my_attention:scaled_score_matrix", "--spec", "specs/scaled_score_matrix.yaml"
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("Score: 28/28") == 2
    assert "in float32 on cpu" in result.output and "in float64 on cpu" in result.output


@pytest.mark.slow
def test_buggy_implementation_fails_with_diagnosis():
    """A mask-ignoring implementation exits 1 and names the mistake with a reproduction line."""
    result = run(
        "test",
        "--impl",
        "examples.impl.my_attention:buggy_attention_weights",
        "--spec",
        "specs/attention_weights.yaml",
        "--dtype",
        "float32",
    )
    assert result.exit_code == 1
    # one cause, explained once: in full for the smallest counterexample, one line for the others
    assert result.output.count("Known mistake (mask_ignored): masked keys still count") == 1
    assert result.output.count("Reproduce: ") == 1
    assert (
        "Reproduce: attention_weights(torch.tensor([[0]], dtype=torch.float32), "
        "torch.tensor([[False]], dtype=torch.bool))" in result.output
    )
    assert "Same cause (known mistake mask_ignored) in 15 more cases:" in result.output
    assert (
        "  example:masked_key_gets_zero (wrong value, attention_weights.yaml:45): "
        "2 of 2 entries of out are wrong" in result.output
    )


def test_json_format_records_environment():
    """--format json prints one object with the precision settings in environment."""
    result = run(
        "test",
        "--impl",
        "examples.impl.my_attention:attention",
        "--spec",
        "specs/attention.yaml",
        "--dtype",
        "float64",
        "--format",
        "json",
    )
    data = json.loads(result.output)
    assert result.exit_code == 0 and data["all_passed"] is True
    assert data["environment"]["tf32"] == "off (pinned)" and data["environment"]["device"] == "cpu"
    assert data["dtype"] == "float64"


@pytest.mark.parametrize(
    "impl, message",
    [
        pytest.param("examples.impl.my_attention", "expected package.module:function", id="no function part"),
        pytest.param("examples.impl.nope:f", "cannot import 'examples.impl.nope'", id="module missing"),
        pytest.param("examples.impl.my_attention:nope", "has no attribute 'nope'", id="function missing"),
        pytest.param("examples.impl.my_attention:math", "is a module, not a function", id="not callable"),
    ],
)
def test_bad_impl_is_a_usage_error(impl, message):
    """A bad --impl exits 2 with one error line naming the problem."""
    result = run("test", "--impl", impl, "--spec", "specs/attention.yaml")
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_gpu_is_a_usage_error():
    """--device cuda on a machine without CUDA exits 2 with a hint."""
    result = run(
        "test", "--impl", "examples.impl.my_attention:attention", "--spec", "specs/attention.yaml", "--device", "cuda"
    )
    assert result.exit_code == 2 and "CUDA is not available on this machine; use --device cpu" in result.output


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_run_records_the_device():
    """On a GPU the run happens on cuda, with TF32 pinned off and the device name recorded."""
    result = run(
        "test",
        "--impl",
        "examples.impl.my_attention:scaled_score_matrix",
        "--spec",
        "specs/scaled_score_matrix.yaml",
        "--device",
        "cuda",
        "--dtype",
        "float32",
        "--format",
        "json",
    )
    data = json.loads(result.output)
    assert result.exit_code == 0, result.output
    assert data["device"] == "cuda" and data["environment"]["device_name"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_low_precision(dtype):
    """The example implementation passes in half precision on a GPU."""
    result = run(
        "test",
        "--impl",
        "examples.impl.my_attention:scaled_score_matrix",
        "--spec",
        "specs/scaled_score_matrix.yaml",
        "--device",
        "cuda",
        "--dtype",
        dtype,
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cpu_low_precision_on_request(dtype):
    """float16/bfloat16 run on request on the CPU too, and the reference-style implementation passes."""
    result = run(
        "test",
        "--impl",
        "examples.impl.my_attention:score_matrix",
        "--spec",
        "specs/score_matrix.yaml",
        "--dtype",
        dtype,
    )
    assert result.exit_code == 0, result.output


@pytest.fixture
def bf16_module(tmp_path, monkeypatch):
    """An importable module whose attention computes in bfloat16 whatever it is given."""
    (tmp_path / "bf16_attention.py").write_text(
        "from examples.impl.my_attention import attention as good\n"
        "def attention(Q, K, V, mask):\n"
        "    return good(Q.bfloat16(), K.bfloat16(), V.bfloat16(), mask).to(Q.dtype)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "bf16_attention:attention"


@pytest.mark.slow
@pytest.mark.parametrize(
    "impl, exit_code",
    [
        pytest.param("examples.impl.my_attention:attention", 0, id="float16 implementation passes"),
        pytest.param("bf16", 1, id="bfloat16 inside fails"),
    ],
)
def test_ratio_rule_for_low_precision(bf16_module, impl, exit_code):
    """--ratio K: the error may be K x the reference's own float16 error, no more."""
    result = run(
        "test",
        "--impl",
        bf16_module if impl == "bf16" else impl,
        "--spec",
        "specs/attention.yaml",
        "--dtype",
        "float16",
        "--ratio",
        "2",
    )
    assert result.exit_code == exit_code, result.output
    if exit_code:
        assert "error ratio: at most 2× the reference's own float16 error" in result.output


def test_failing_property_is_shrunk():
    """A failing property also gets hypothesis's minimal failing input, never larger than the
    original, and the JSON report carries where it came from."""
    result = run(
        "test",
        "--impl",
        "examples.impl.my_attention:buggy_attention_weights",
        "--spec",
        "specs/attention_weights.yaml",
        "--dtype",
        "float32",
        "--format",
        "json",
    )
    assert result.exit_code == 1
    data = json.loads(result.output)
    report = data["submissions"][0] if "submissions" in data else data
    case = next(c for c in report["cases"] if c["id"] == "property:weights_sum_to_one")
    failure = case["failure"]
    assert failure["args"] == {"S": [[0, 0]], "mask": [[True, False]]}
    assert failure["size"] == 4 and failure["shrunk_from"]["size"] >= 4
    assert failure["reproduce"] == (
        "attention_weights(torch.tensor([[0, 0]], dtype=torch.float32), "
        "torch.tensor([[True, False]], dtype=torch.bool))"
    )
    assert failure["diagnosis"]["id"] == "mask_ignored"
