"""``attnscore test --keyword`` with a contract's keywords and ``--sweep``: exact lines and exit codes."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
from click.testing import CliRunner

from attnscore.cli import main

KERNELS = "tests.cli.window_kernels"
MISTRAL = ["--keyword", "causal=true", "--keyword", "window_size=3,0"]  # HF sliding_window = 4
LEFT_OUT = (
    "window_two_back_one_ahead, window_aligned_bottom_right, grouped_kv_heads, far_key_with_huge_score, "
    "scores_inside_the_window"
)


def run(*args: str):
    return CliRunner().invoke(main, ["test", "--spec", "sliding_window", "--dtype", "float64", *args])


@pytest.mark.slow
def test_a_mistral_window_runs_without_a_spec_of_its_own():
    """A right causal (3, 0) kernel passes every property; the worked examples written for (2, 1)
    are left out, each line saying which and why."""
    result = run("--impl", f"{KERNELS}:flash_attn_func", *MISTRAL)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "sliding_window: the reference follows causal=true, window_size=(3, 0) (the spec fixes causal=false, "
        "window_size=(2, 1))",
        "sliding_window: left out 5 worked examples whose expected values assume causal=false, window_size=(2, 1), "
        f"not causal=true, window_size=(3, 0): {LEFT_OUT}",
        "sliding_window: recomputed 1 worked example testing a convention corner under causal=true, "
        "window_size=(3, 0) (expected values from the float64 reference): window_before_every_key",
    ]
    assert "Score: 11/11" in result.stdout
    examples = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("example:")]
    # its one query keeps both keys either way; the other tests the fully masked row, recomputed
    assert examples == ["example:window_before_every_key", "example:scaled_scores_on_grouped_heads"]


@pytest.mark.slow
def test_a_kernel_wrong_only_in_the_fully_masked_rows_fails_under_the_new_options():
    """NaN where a query's window holds no key: every property sets that corner aside, so only the
    worked example that tests it can fail the kernel; under the new options it is recomputed, not
    left out, and the kernel loses its point."""
    result = run("--impl", f"{KERNELS}:nan_rows", *MISTRAL)
    assert result.exit_code == 1, result.output
    failed = [line.split()[:2] for line in result.stdout.splitlines() if line.startswith(("example:", "property:"))]
    assert {case for case, verdict in failed if verdict != "passed"} == {"example:window_before_every_key"}
    assert "Score: 10/11" in result.stdout


@pytest.mark.slow
def test_the_sweep_names_exactly_the_failing_point_and_a_small_counterexample():
    """A kernel that drops the window only when causal is set fails at causal=true alone; the
    summary names that point, its failed cases and a small counterexample (a few queries, five keys
    or a few more: the fewest a (3, 0) window leaves one out of), and the exit code is 1."""
    result = run(
        "--impl",
        f"{KERNELS}:window_dropped_when_causal",
        "--keyword",
        "window_size=3,0",
        "--sweep",
        "causal=false;true",
    )
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    start = lines.index("sweep: 1 of 2 grid points failed")
    summary = lines[start:]
    assert len(summary) == 3, summary
    assert re.fullmatch(
        r"  FAILED sliding_window at causal=true in float64: property:matches_reference(, [a-z:_]+)*", summary[1]
    )
    small = re.fullmatch(r"    smallest counterexample \((property:[a-z_]+)\): flash_attn_func\((.*)\)", summary[2])
    assert small is not None, summary[2]
    call = small.group(2)
    assert call.startswith("torch.tensor([[[[") and call.endswith("causal=True, window_size=(3, 0)")
    q, k = (np.shape(ast.literal_eval(t.split(", dtype")[0])) for t in call.split("torch.tensor(")[1:3])
    # (b, n, h, d): (1, 1, 1, 1) and (1, 5, 1, 1) today; a (3, 0) window leaves a key out only from 5 keys on
    assert k[1] >= 5 and int(np.prod(q)) <= 4 and int(np.prod(k)) <= 16, (q, k)
    assert "sliding_window (sliding_window.yaml) in float64 on cpu at causal=false" in result.stdout
    assert "sliding_window (sliding_window.yaml) in float64 on cpu at causal=true" in result.stdout
    assert [line.rsplit(" [at ", 1)[1] for line in result.stderr.splitlines()] == ["causal=false]"] * 3 + [
        "causal=true]"
    ] * 3


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(
            ["--sweep", "window=3,0;2,1"],
            "Error: --sweep window: expected a keyword of contract flash_attn (dropout_p, softmax_scale, causal, "
            "window_size) or where, found 'window'",
            id="sweep of a name the contract does not take",
        ),
        pytest.param(
            ["--keyword", "causal=maybe"],
            "Error: --keyword causal: expected true or false, found 'maybe'",
            id="bad keyword value",
        ),
        pytest.param(
            ["--keyword", "window_size=3"],
            "Error: --keyword window_size: expected [left, right], two integers each >= 0 or -1 (unbounded), "
            "e.g. window_size=3,0, found '3'",
            id="one number for a window",
        ),
        pytest.param(
            ["--sweep", "where=n_q<=n_z"],
            "Error: --sweep where: n_q <= n_z: expected a shape symbol of contract flash_attn "
            "(b, d_k, d_v, h_kv, h_q, n_k, n_q), found 'n_z'",
            id="sweep bound on a symbol the contract lacks",
        ),
        pytest.param(
            ["--keyword", "causal=true", "--keyword", "causal=false"],
            "Error: --keyword causal: expected each name once, found causal=true and causal=false",
            id="one keyword given twice",
        ),
        pytest.param(
            ["--sweep", "causal=true;;false"],
            "Error: --sweep: expected NAME=VALUE;VALUE;..., found 'causal=true;;false'",
            id="empty sweep value",
        ),
    ],
)
def test_an_option_that_cannot_be_used_is_a_usage_error(args, message):
    """Exit code 2 and one line saying what was expected and found; nothing runs."""
    result = run("--impl", f"{KERNELS}:flash_attn_func", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr.splitlines(), result.stderr
    assert result.stdout == ""
