"""Tests for comparison, tolerances and plain-data conversion (compare, tolerance, outputs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.boundary.outputs import BadReturn, Received, to_received
from attnscore.check.compare import compare
from attnscore.maths.tolerance import Tolerance, allowed_error
from attnscore.report.feedback import mismatch_text
from attnscore.report.results import Verdict


def received(values, dtype="float32", kind="tensor") -> Received:
    return Received(kind, dtype, "cpu", np.asarray(values, dtype=np.float32 if dtype == "float32" else dtype))


GOLDEN = np.array([1.0, 0.0, 0.7], dtype=np.float64)
ALLOWED = np.full(3, 1e-6)


@pytest.mark.parametrize(
    ("got", "verdict", "text"),
    [
        pytest.param(received([1.0, 0.0, 0.7]), None, "", id="right values"),
        pytest.param(
            received([[1.0, 0.0, 0.7]]),
            Verdict.WRONG_SHAPE,
            "out has shape (1, 3), expected shape (3,)",
            id="extra dim is not broadcast",
        ),
        pytest.param(
            received(np.zeros((0,))),
            Verdict.WRONG_SHAPE,
            "out has shape (0,), expected shape (3,)",
            id="empty array never matches",
        ),
        pytest.param(received(1.0), Verdict.WRONG_SHAPE, "out has shape (), expected shape (3,)", id="scalar"),
        pytest.param(
            received([1.0, 0.0, 0.8]),
            Verdict.WRONG_VALUE,
            "out is wrong:\n" if False else "1 of 3 entries of out are wrong",
            id="one wrong entry",
        ),
        pytest.param(
            received([1.0, np.nan, 0.7]), Verdict.NON_FINITE, "out[1] is nan, expected 0", id="NaN is no wildcard"
        ),
        pytest.param(received([1.0, np.inf, 0.7]), Verdict.NON_FINITE, "out[1] is inf, expected 0", id="inf"),
        pytest.param(
            Received("tensor", "bool", "cpu", np.array([True, False, True])),
            Verdict.WRONG_DTYPE,
            "out has dtype bool",
            id="bool result",
        ),
    ],
)
def test_compare_order_and_messages(got, verdict, text):
    """Shape, dtype, non-finite placement and values are checked in that order, with clear messages."""
    result = compare(got, GOLDEN, ALLOWED)
    if verdict is None:
        assert result is None
    else:
        assert result is not None and result.verdict is verdict
        assert text in mismatch_text(result)


def test_wrong_value_message_shows_worst_entries():
    """A value mismatch lists the worst entries with expected, got and the allowed error."""
    got = received([1.5, 0.0, -0.7])
    result = compare(got, GOLDEN, ALLOWED, name="scores", tolerance_text="close")
    assert result is not None
    lines = mismatch_text(result).splitlines()
    assert lines[0] == "2 of 3 entries of scores are wrong (close):"
    assert lines[1].startswith("  scores[2] = -0.7, expected 0.7 (|error| 1.4 > allowed 1e-06)")
    assert lines[2].startswith("  scores[0] = 1.5, expected 1 (|error| 0.5 > allowed 1e-06)")


def test_hidden_case_never_shows_expected_values():
    """For a hidden case the message gives no expected value."""
    result = compare(received([1.5, 0.0, -0.7]), GOLDEN, ALLOWED)
    assert result is not None
    text = mismatch_text(result, hidden=True)
    assert "0.7" not in text and "3" not in text
    assert text == "out has wrong values (hidden case: its inputs and expected values, shape and dtype are not shown)"


def test_expected_infinity_needs_the_same_infinity():
    """-inf where -inf is expected passes; +inf or a finite number fails."""
    golden = np.array([-np.inf, 1.0])
    allowed = np.array([0.0, 1e-6])
    assert compare(received([-np.inf, 1.0]), golden, allowed) is None
    assert compare(received([np.inf, 1.0]), golden, allowed).verdict is Verdict.NON_FINITE
    assert compare(received([-1e30, 1.0]), golden, allowed).verdict is Verdict.WRONG_VALUE


def test_return_kind_must_be_accepted():
    """A list is refused when the spec demands a tensor."""
    result = compare(received([1.0, 0.0, 0.7], kind="list"), GOLDEN, ALLOWED, accept=("tensor",))
    assert result is not None and result.verdict is Verdict.BAD_RETURN_TYPE
    assert mismatch_text(result) == "returned a list; this function must return a tensor"


@pytest.mark.parametrize(
    ("tol", "dtype", "golden", "scale", "d_k", "expected"),
    [
        pytest.param(Tolerance("exact"), "float32", [3.0], [3.0], 2, [0.0], id="exact"),
        pytest.param(Tolerance("close"), "float32", [2.0], [2.0], 2, [1e-5 + 1.3e-6 * 2], id="close float32 defaults"),
        pytest.param(Tolerance("close", rtol=0.0, atol=0.5), "float64", [2.0], [2.0], 2, [0.5], id="close overridden"),
        pytest.param(
            Tolerance("dot_bound", factor=2), "float32", [0.0], [10.0], 4, [2 * 4 * 2.0**-24 * 10], id="bound at zero"
        ),
        pytest.param(Tolerance("dot_bound", factor=1), "float64", [1.0], [1.0], 1, [2.0**-53 * 2], id="bound float64"),
    ],
)
def test_allowed_error(tol, dtype, golden, scale, d_k, expected):
    """allowed_error follows each mode's formula."""
    out = allowed_error(tol, np.array(golden), dtype, d_k, np.array(scale))
    assert out.tolist() == pytest.approx(expected, rel=1e-12, abs=0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 64), st.integers(0, 2**31 - 1))
def test_float32_dot_products_stay_within_the_bound(d_k, seed):
    """A float32 dot product in any summation order stays within the dot-product bound."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(d_k).astype(np.float32)
    k = rng.standard_normal(d_k).astype(np.float32)
    golden = np.array(q.astype(np.float64) @ k.astype(np.float64))
    scale = np.array(np.abs(q.astype(np.float64)) @ np.abs(k.astype(np.float64)))
    allowed = allowed_error(Tolerance("dot_bound"), golden, "float32", d_k, scale)
    for value in (
        np.float32(0) + (q * k).sum(dtype=np.float32),
        np.float32((q[::-1] * k[::-1]).sum(dtype=np.float32)),
        torch.dot(torch.from_numpy(q), torch.from_numpy(k)).item(),
    ):
        assert abs(float(value) - float(golden)) <= float(allowed)


class LyingArray(np.ndarray):
    """An ndarray subclass whose comparisons and subtraction lie."""

    def __eq__(self, other):  # noqa: D105
        return np.ones(self.shape, dtype=bool)

    def __sub__(self, other):  # noqa: D105
        return np.zeros(self.shape)


@pytest.mark.parametrize(
    ("value", "kind", "dtype", "values"),
    [
        pytest.param(torch.tensor([1.0, 2.0]), "tensor", "float32", [1.0, 2.0], id="tensor"),
        pytest.param(torch.tensor([1.0, 2.0], dtype=torch.bfloat16), "tensor", "bfloat16", [1.0, 2.0], id="bfloat16"),
        pytest.param(np.array([1.0, 2.0]), "ndarray", "float64", [1.0, 2.0], id="ndarray"),
        pytest.param([1, 2.5], "list", "float64", [1.0, 2.5], id="list"),
        pytest.param(3.0, "number", "float64", 3.0, id="float"),
        pytest.param(np.float32(3.0), "number", "float32", 3.0, id="numpy scalar"),
        pytest.param(np.array([9.0, 9.0]).view(LyingArray), "ndarray", "float64", [9.0, 9.0], id="lying subclass"),
    ],
)
def test_to_received_copies_plain_values(value, kind, dtype, values):
    """Returned objects become plain numpy arrays with their kind and dtype recorded."""
    got = to_received(value)
    assert isinstance(got, Received)
    assert (got.kind, got.dtype) == (kind, dtype)
    assert type(got.array) is np.ndarray and got.array.tolist() == values


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(None, "returned NoneType; expected a tensor, array, list or number", id="None"),
        pytest.param("1, 0", "returned str", id="string"),
        pytest.param((x for x in [1.0]), "returned generator", id="generator"),
        pytest.param([[1.0], [1.0, 2.0]], "not a rectangular array of numbers", id="ragged list"),
        pytest.param(True, "returned a boolean", id="bool"),
        pytest.param(torch.tensor([1 + 1j]), "dtype complex64", id="complex tensor"),
    ],
)
def test_to_received_rejects_non_numbers(value, text):
    """Values that are not numbers become a BadReturn that says what was found."""
    got = to_received(value)
    assert isinstance(got, BadReturn) and text in got.message


def test_integer_tensor_is_a_wrong_dtype():
    """An integer tensor is refused as a wrong dtype, naming the inputs' dtype."""
    got = Received("tensor", "int64", "cpu", np.array([1, 0, 1]))
    result = compare(got, GOLDEN, ALLOWED, dtype="float32")
    assert result is not None and result.verdict is Verdict.WRONG_DTYPE
    assert (
        mismatch_text(result)
        == "out has dtype int64; scores are real numbers, so return a floating tensor (the inputs were float32)"
    )


def test_lower_precision_result_is_pointed_out():
    """A float16 result for float32 inputs shows expected values in float32 and says why it fails."""
    got = Received("tensor", "float16", "cpu", np.array([1.0, 0.0, 0.7], dtype=np.float16))
    golden = np.array([1.0, 0.0, float(np.float32(0.7))])
    result = compare(got, golden, np.full(3, 1e-7), dtype="float32")
    assert result is not None and result.verdict is Verdict.WRONG_VALUE
    assert "  out[2] = 0.7, expected 0.7 (|error|" in mismatch_text(result)
    assert mismatch_text(result).endswith(
        "Note: out has dtype float16, less precise than the inputs' float32; compute and return in float32"
    )


def test_low_precision_bound_is_float32_accumulation():
    """bfloat16, q = [256, 1, 1, 1, 1], k = ones: 260 (rounded) passes; a bfloat16 running sum gives 256: fails."""
    from attnscore.maths.tolerance import Tolerance, allowed_error

    golden = np.array([260.0])
    allowed = allowed_error(Tolerance("dot_bound", factor=2.0), golden, "bfloat16", 5, np.array([260.0]))[0]
    assert abs(256.0 - 260.0) > allowed
    assert abs(float(torch.tensor(260.0, dtype=torch.bfloat16)) - 260.0) <= allowed
    # each product rounded once in bfloat16, then summed in float32: torch.sum(q * k) on CPU
    q = torch.randn(64, dtype=torch.float64)
    k = torch.randn(64, dtype=torch.float64)
    low = torch.sum(q.bfloat16() * k.bfloat16(), -1).double()
    exact = float((q.bfloat16().double() * k.bfloat16().double()).sum())
    scale = float((q.bfloat16().double() * k.bfloat16().double()).abs().sum())
    limit = allowed_error(Tolerance("dot_bound", factor=2.0), np.array([exact]), "bfloat16", 64, np.array([scale]))
    assert abs(float(low) - exact) <= limit[0]


def test_ratio_floor_is_one_ulp_of_each_entry():
    """--ratio: float16 19.16 against 19.14 (one ulp at that magnitude) passes even when the reference is exact."""
    from attnscore.maths.tolerance import Tolerance

    golden = np.array([19.140625, 0.5])
    allowed = Tolerance("ratio", factor=2.0).ratio_allowed(golden, golden, "float16")
    assert allowed[0] == pytest.approx(2 * 2.0**-11 * 19.140625)
    assert abs(19.15625 - 19.140625) <= allowed[0]
    assert allowed[1] == pytest.approx(2.0**-10)


@pytest.mark.parametrize("variant", ["query_scaled", "key_scaled", "both_scaled"])
def test_queries_scaled_into_the_subnormal_range_pass_in_float16(variant):
    """(Q·d_k^-½) Kᵀ with Q near 1e-7 rounds Q to subnormals; the floor scales with |k|."""
    from attnscore.check.cases import _call
    from attnscore.spec.load import load_spec

    spec = load_spec("specs/scaled_score_matrix.yaml")
    rng = np.random.default_rng(7)
    for _ in range(60):
        d = int(rng.integers(1, 17))
        Q = rng.uniform(-1, 1, (3, d)) * 10.0 ** rng.uniform(-8, -4)
        K = rng.uniform(-10, 10, (4, d))
        call = _call(spec, {"Q": Q, "K": K}, "float16", spec.tolerance)
        q, k = (torch.tensor(call.args[n], dtype=torch.float16) for n in ("Q", "K"))
        if variant == "query_scaled":
            out = (q * d**-0.5) @ k.T
        elif variant == "key_scaled":
            out = q @ (k * d**-0.5).T
        else:
            out = (q * d**-0.25) @ (k * d**-0.25).T
        assert (np.abs(out.double().numpy() - call.golden) <= call.allowed).all()


def test_subnormal_floor_counts_operand_magnitudes():
    from attnscore.maths.tolerance import SUBNORMAL_MIN, Tolerance, allowed_error

    golden = np.zeros(1)
    plain = allowed_error(Tolerance("dot_bound"), golden, "float16", 4, np.zeros(1))[0]
    with_k = allowed_error(Tolerance("dot_bound"), golden, "float16", 4, np.zeros(1), np.array([40.0]))[0]
    assert plain == 5 * SUBNORMAL_MIN["float16"]
    assert with_k == 45 * SUBNORMAL_MIN["float16"]


def test_worst_first_is_by_error_size_and_a_subnormal_floor_reads_as_exact():
    """An expected 0 with a subnormal allowed error no longer leads the list with '4.2e-45'."""
    got = Received("tensor", "float32", "cpu", np.array([0.174, 15.0], dtype=np.float32))
    result = compare(got, np.array([0.0, 10.0]), np.array([4.2e-45, 1e-5]), dtype="float32")
    assert result is not None
    lines = mismatch_text(result).splitlines()
    assert lines[1] == "  out[1] = 15, expected 10 (|error| 5 > allowed 1e-05)"
    assert lines[2] == "  out[0] = 0.174, expected 0 (|error| 0.174 > allowed 0 (exact here))"


def _entries_close_walk(got, want, allowed):
    """The "close enough" rule entry by entry, walked in full (what the vectorised shortcut must equal)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        both_nan = np.isnan(got) & np.isnan(want)
        same_inf = np.isinf(got) & (got == want)
        finite = np.isfinite(got) & np.isfinite(want)
        return both_nan | same_inf | (finite & (np.abs(np.where(finite, got - want, 0.0)) <= allowed))


_ENTRY = st.one_of(
    st.floats(-2.0, 2.0),
    st.sampled_from([np.nan, np.inf, -np.inf, 1e308, -1e308, 0.0]),
)
_ALLOWED = st.one_of(st.floats(0.0, 0.5), st.sampled_from([np.inf, np.nan, 0.0, 1e-300]))


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(st.tuples(_ENTRY, _ENTRY, _ALLOWED), min_size=0, max_size=6),
    scalar_allowed=st.one_of(st.none(), _ALLOWED),
)
def test_entries_close_and_compare_agree_with_the_walk_over_every_entry(entries, scalar_allowed):
    """With NaN, infinities, differences that overflow and allowed errors of 0, inf or NaN: the
    rule's shortcut for all-finite, all-close outputs changes no answer, and compare passes
    exactly the outputs whose every entry is close."""
    from attnscore.maths.tolerance import entries_close

    got = np.array([e[0] for e in entries], dtype=np.float64)
    golden = np.array([e[1] for e in entries], dtype=np.float64)
    allowed = np.array([e[2] for e in entries], dtype=np.float64) if scalar_allowed is None else scalar_allowed
    want = _entries_close_walk(got, golden, allowed)
    assert entries_close(got, golden, allowed).tolist() == want.tolist()
    full = np.broadcast_to(allowed, golden.shape)
    outcome = compare(Received("tensor", "float64", "cpu", got), golden, full, dtype="float64")
    assert (outcome is None) == bool(want.all())


@settings(max_examples=150, deadline=None)
@given(
    entries=st.lists(st.tuples(_ENTRY, _ENTRY, _ALLOWED), min_size=1, max_size=6), copies=st.sampled_from([1, 6, 40])
)
def test_the_entry_by_entry_and_the_vectorised_shortcut_agree_with_the_walk(entries, copies):
    """Outputs of up to 32 entries take the shortcut on Python floats, larger ones numpy's: each
    passes exactly when every entry is finite and within its allowed error, in 1 and 2 dims; and
    close_enough, which takes it first, agrees with the walk over every entry."""
    from attnscore.maths.tolerance import _ENTRY_BY_ENTRY, all_finite_and_close, close_enough

    got = np.array([e[0] for e in entries] * copies, dtype=np.float64)
    golden = np.array([e[1] for e in entries] * copies, dtype=np.float64)
    allowed = np.array([e[2] for e in entries] * copies, dtype=np.float64)
    with np.errstate(all="ignore"):
        want = bool(np.all((np.abs(got - golden) <= allowed) & np.isfinite(got - golden)))
    assert bool(all_finite_and_close(got, golden, allowed)) is want
    two_dims = [a.reshape(copies, -1) for a in (got, golden, allowed)]
    assert bool(all_finite_and_close(*two_dims)) is want
    # close_enough takes the shortcut, else walks: NaN against NaN and the same infinity are close too
    assert close_enough(got, golden, allowed) is bool(_entries_close_walk(got, golden, allowed).all())
    if copies == 40:
        assert got.size > _ENTRY_BY_ENTRY  # the vectorised steps ran
