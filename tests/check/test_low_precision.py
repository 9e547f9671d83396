"""Low precision: the default judgment in float16/bfloat16 is that of a float32-accumulating kernel.

The allowed error in float16/bfloat16 charges the tested dtype's ``u`` only for what is rounded in
it and float32's ``u`` for every sum (:class:`attnscore.maths.tolerance.ErrorTerms`), so no sum
over ``n_k`` keys buys a wrong answer a bound of ``n_k·u_low``. Correct code written the usual
ways still passes (``tests/sweeps/test_reformulations.py``); every catalogued mistake fails in every dtype
(:func:`test_every_mistake_fails_in_every_low_precision_dtype`).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from attnscore.boundary.dtypes import UNIT_ROUNDOFF
from attnscore.check.cases import _call, build_cases
from attnscore.check.implementation import run_impl
from attnscore.check.verify import (
    NOT_WRONG_IN,
    MutationResult,
    bundled_spec_paths,
    mutation_test,
    targeted_mistakes,
    verify_dtypes,
)
from attnscore.maths.tolerance import ErrorTerms, Tolerance, allowed_error, entries_close
from attnscore.spec.load import load_spec

N_K = 4096


def _float16_running_sum_softmax(S: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """exp(s - max) summed key by key in a float16 accumulator (the public bug): 2048 + 1 = 2048."""
    e = torch.exp(S - S.amax(-1, keepdim=True)).masked_fill(~mask, 0)
    total = torch.zeros(S.shape[:-1] + (1,), dtype=torch.float16)
    for j in range(S.shape[-1]):
        total = total + e[..., j : j + 1]
    return e / total


@pytest.fixture(scope="module")
def weights_spec():
    return load_spec("specs/attention_weights.yaml")


def _weights_call(spec, S: np.ndarray):
    return _call(spec, {"S": S, "mask": np.ones(S.shape, bool)}, "float16", spec.tolerance)


def test_float16_running_sum_doubles_every_weight_and_fails(weights_spec):
    """4,096 equal float16 scores summed in float16 give every weight 2/4096: outside the bound."""
    call = _weights_call(weights_spec, np.zeros((1, N_K)))
    S = torch.zeros((1, N_K), dtype=torch.float16)
    got = _float16_running_sum_softmax(S, torch.ones((1, N_K), dtype=torch.bool)).double().numpy()
    assert got[0, 0] == 2.0 / N_K  # the accumulator stalls at 2048
    assert call.golden[0, 0] == 1.0 / N_K
    assert float(call.allowed.max()) < 1e-5  # the old floor of (n_k + 1) float16 subnormals was 2.44e-4
    assert not entries_close(got, call.golden, call.allowed).any()


def test_float16_all_zero_weights_fail_for_4096_keys(weights_spec):
    """All-zero weights (each true weight 2.4e-4) are outside the float16 bound."""
    call = _weights_call(weights_spec, np.zeros((1, N_K)))
    assert not entries_close(np.zeros((1, N_K)), call.golden, call.allowed).any()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_correct_softmax_passes_the_4096_key_bound(weights_spec, dtype):
    """torch.softmax and a softmax written out in the low dtype (float32 sums) pass the same calls."""
    rng = np.random.default_rng(0)
    S = rng.uniform(-4, 4, (2, N_K))
    call = _call(weights_spec, {"S": S, "mask": np.ones(S.shape, bool)}, dtype, weights_spec.tolerance)
    t = torch.tensor(call.args["S"]).to(getattr(torch, dtype))
    manual = torch.exp(t - t.amax(-1, keepdim=True))
    for got in (torch.softmax(t, -1), manual / manual.sum(-1, keepdim=True), torch.exp(torch.log_softmax(t, -1))):
        assert entries_close(got.double().numpy(), call.golden, call.allowed).all()


def test_error_terms_of_a_sum_match_the_old_dot_bound():
    """For a dot product the float16 bound is still factor·(u + d_k·u_fp32)·Σ|q_i k_i| + u·|g| + floor."""
    golden, scale = np.array([3.0]), np.array([5.0])
    u, u32 = UNIT_ROUNDOFF["float16"], UNIT_ROUNDOFF["float32"]
    got = allowed_error(Tolerance(factor=2.0), golden, "float16", 4, scale)
    assert got[0] == pytest.approx(2.0 * (u + 4 * u32) * 5.0 + u * 3.0 + 5 * 2.0**-24)
    terms = ErrorTerms(np.array([1.0]), np.array([10.0]), 0.0)
    explicit = allowed_error(Tolerance(factor=2.0), golden, "bfloat16", 4, scale, terms=terms)
    assert explicit[0] == pytest.approx(2.0 * (2.0**-8 + 10 * u32) + 2.0**-8 * 3.0)
    # float32 ignores the low-precision terms
    assert allowed_error(Tolerance(factor=2.0), golden, "float32", 4, scale, terms=terms)[0] == pytest.approx(
        2.0 * 4 * 2.0**-24 * 5.0 + 2.0**-24 * 3.0 + 5 * 2.0**-149
    )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_attention_bound_is_carried_by_the_values_spread(dtype):
    """Equal values: score errors cannot move the output (softmax renormalises), only rounding can."""
    spec = load_spec("specs/attention.yaml")
    Q = np.array([[1.0, 0.5, -0.25, 2.0]])
    K = np.array([[1.0, 0.0, 0.0, 1.0], [0.5, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    same = _call(
        spec, {"Q": Q, "K": K, "V": np.full((3, 1), 2.0), "mask": np.ones((1, 3), bool)}, dtype, spec.tolerance
    )
    spread = _call(
        spec,
        {"Q": Q, "K": K, "V": np.array([[-2.0], [2.0], [6.0]]), "mask": np.ones((1, 3), bool)},
        dtype,
        spec.tolerance,
    )
    u = UNIT_ROUNDOFF[dtype]
    assert same.golden[0, 0] == pytest.approx(2.0)
    assert same.allowed[0, 0] < 4 * 8 * u * 2.0  # a few roundings of the output, nothing from the scores
    assert spread.allowed[0, 0] > same.allowed[0, 0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sdpa_with_scale_one_fails_causal_attention(dtype):
    """is_causal=True with scale=1.0 (no 1/√d_k) loses points in the low dtypes too (16/16 in bfloat16 before)."""
    spec = load_spec("specs/causal_attention.yaml")
    wrong = functools.partial(torch.nn.functional.scaled_dot_product_attention, is_causal=True, scale=1.0)
    right = functools.partial(torch.nn.functional.scaled_dot_product_attention, is_causal=True)
    wrong_result = run_impl(spec, wrong, dtype=dtype, shrink=False)
    right_result = run_impl(spec, right, dtype=dtype, shrink=False)
    assert right_result.score == right_result.max_score
    assert wrong_result.score < wrong_result.max_score


LOW_DTYPE_SPECS = [
    pytest.param(path, dtype, id=f"{path.stem}-{dtype}")
    for path in bundled_spec_paths()
    for dtype in ("float16", "bfloat16")
]


@pytest.mark.slow
@pytest.mark.parametrize("path, dtype", LOW_DTYPE_SPECS)
def test_every_mistake_fails_in_every_low_precision_dtype(path, dtype):
    """Every targeted mistake fails some case of every bundled spec in float16 and bfloat16 (verify's rule)."""
    spec = load_spec(path)
    results = mutation_test(spec, build_cases(spec, dtype), dtype)
    expected = {m.id for m in targeted_mistakes(spec) if m.applies_in(dtype)}
    expected -= {m for m, dts in NOT_WRONG_IN.items() if dtype in dts}
    assert {r.mistake_id for r in results} == expected
    missed = [r.mistake_id for r in results if not r.caught]
    assert missed == [], f"{spec.id} in {dtype}: these mistakes pass every case: {missed}"
    assert all(r.ok for r in results)  # outside the spec's own dtypes being caught is enough


def test_verify_runs_every_dtype_and_skips_only_correct_mistakes():
    """verify's dtypes are the spec's then the rest; a mistake is left out only where it is correct."""
    spec = load_spec("specs/masked_scores.yaml")
    assert verify_dtypes(spec) == ("float32", "float64", "float16", "bfloat16")
    ids64 = {r.mistake_id for r in mutation_test(spec, dtype="float64")}
    assert "returned_float64" not in ids64
    ids32 = {r.mistake_id for r in mutation_test(spec, dtype="float32")}
    assert "returned_float64" in ids32


def test_mutation_result_needs_diagnosis_only_in_graded_dtypes():
    """A caught but unnamed mistake is ok outside the spec's dtypes, not inside them; a miss is never ok."""
    base = dict(spec_id="s", mistake_id="m", failed_cases=("c",), diagnoses=())
    assert not MutationResult(caught=True, diagnosed=False, dtype="float32", needs_diagnosis=True, **base).ok
    assert MutationResult(caught=True, diagnosed=False, dtype="bfloat16", needs_diagnosis=False, **base).ok
    assert not MutationResult(caught=False, diagnosed=False, dtype="bfloat16", needs_diagnosis=False, **base).ok


def test_verify_table_names_the_dtypes_a_mistake_passes_in():
    """The mutation table says in which dtypes a mistake was missed."""
    from attnscore.cli.verify import _mutation_cells

    base = dict(spec_id="s", failed_cases=(), diagnoses=())
    cells = _mutation_cells(
        [
            MutationResult(mistake_id="a", caught=True, diagnosed=True, dtype="float32", **base),
            MutationResult(
                mistake_id="a", caught=False, diagnosed=False, dtype="bfloat16", needs_diagnosis=False, **base
            ),
            MutationResult(mistake_id="b", caught=True, diagnosed=True, dtype="float32", **base),
            MutationResult(
                mistake_id="b", caught=True, diagnosed=False, dtype="float16", needs_diagnosis=False, **base
            ),
        ]
    )
    assert cells == {"a": "[red]MISSED[/] (bfloat16)", "b": "[green]✓[/]"}
