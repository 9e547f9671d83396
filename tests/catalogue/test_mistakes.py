"""The mistake catalogue: named, applicable, and really wrong."""

from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.catalogue.mistakes import MISTAKES, get_mistake, mistakes_for
from attnscore.check.cases import build_cases
from attnscore.check.diagnosis import recompute
from attnscore.check.implementation import run_impl
from attnscore.check.verify import bundled_spec_paths
from attnscore.maths.contracts import CONTRACTS
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec

REQUIRED = {
    "scaled_by_half_dk",
    "scores_used_as_weights",
    "scores_divided_by_their_sum",
    "not_scaled",
    "scaled_by_dk",
    "scaled_by_sqrt_d_model",
    "keys_not_transposed",
    "all_axes_reversed",
    "output_transposed",
    "softmax_applied",
    "softmax_wrong_axis",
    "cosine_similarity",
    "absolute_value",
    "elementwise_not_summed",
    "keys_reversed",
    "mask_ignored",
    "mask_inverted",
    "additive_mask_nan",
    "nan_fully_masked",
    "computed_in_float16",
    "inputs_mutated",
    "all_zeros",
    "uniform_weights",
    "hard_coded_examples",
    "returned_weights",
    "masked_with_large_negative",
    "nan_hidden_after_softmax",
    "mask_applied_after_exp",
    "additive_projection_not_transposed",
    "additive_tanh_after_v",
    "returned_float64",
}


def test_catalogue_has_the_field_mistakes():
    """At least 20 mistakes, including every kind the issue lists, each with a message and contracts."""
    assert len(MISTAKES) >= 20 and REQUIRED <= set(MISTAKES)
    for m in MISTAKES.values():
        assert m.contracts and set(m.contracts) <= set(CONTRACTS), m.id
        assert len(m.message) > 30 and m.message[0].islower(), m.id


def test_unknown_mistake_names_the_known_ones():
    """get_mistake on an unknown id raises KeyError listing the catalogue."""
    with pytest.raises(KeyError, match="unknown mistake 'nope'; known: absolute_value"):
        get_mistake("nope")


@pytest.mark.parametrize("spec_path", [pytest.param(p, id=p.stem) for p in bundled_spec_paths()])
def test_every_applicable_mistake_is_wrong_on_some_worked_example_or_changes_inputs(spec_path):
    """Each mistake differs from the golden value on some worked example, or is a side-effect mistake."""
    spec = load_spec(spec_path)
    for mistake in mistakes_for(spec.contract):
        if mistake.id in (
            "inputs_mutated",
            "hard_coded_examples",
            "scaled_by_sqrt_d_model",
            "all_axes_reversed",
            "softmax_without_max_subtraction",
            "computed_in_float16",
            "elementwise_not_summed",
            "returned_float64",
            "computed_in_float32",
            "online_softmax_not_rescaled",  # only rows longer than a key tile: long_rows_match_reference
        ):
            continue  # side effects, dtype only, or wrong only on generated/batched/large inputs (see verify)
        if spec.id == "causal_attention" and mistake.id == "scaled_by_half_dk":
            continue  # its worked examples have d_k = 1 (scores 0) and d_k = 4 (d_k/2 = √d_k): verify catches it
        differs = False
        for ex in spec.worked_examples:
            if mistake.backward:  # a backward mistake: its O, L and gradients against the example's
                differs |= _backward_differs(mistake, spec, ex)
                continue
            got = recompute(mistake, spec, ex.inputs)
            if got is None or got.shape != ex.expected.shape or not np.allclose(got, ex.expected, equal_nan=True):
                differs = True
        assert differs, f"{mistake.id} matches every worked example of {spec.id}"


def _backward_differs(mistake, spec, ex) -> bool:
    """Whether a backward mistake's output, gradients or L differ from what the worked example states."""
    from types import SimpleNamespace

    from attnscore.check.diagnosis import recompute_backward

    got = recompute_backward(mistake, spec, SimpleNamespace(args=ex.inputs, upstream=ex.upstream))
    if got is None:
        return True
    pairs = [(got.array, ex.expected)] + [(got.gradients.get(n), g) for n, g in ex.expected_gradients.items()]
    if ex.expected_logsumexp is not None:
        pairs.append((got.logsumexp, ex.expected_logsumexp))
    return any(a is None or np.shape(a) != np.shape(b) or not np.allclose(a, b, equal_nan=True) for a, b in pairs)


@pytest.mark.parametrize(
    "mistake_id, contract, args, expected",
    [
        pytest.param(
            "softmax_applied",
            "scores",
            ([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]]),
            [np.e / (np.e + 1), 1 / (np.e + 1)],
            id="softmax applied",
        ),
        pytest.param(
            "keys_not_transposed",
            "score_matrix",
            ([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]),
            [[19.0, 22.0], [43.0, 50.0]],
            id="K not transposed (field notes)",
        ),
        pytest.param(
            "scaled_by_sqrt_d_model",
            "scaled_score_matrix",
            (np.ones((4, 1, 4)), np.ones((4, 1, 4))),
            np.ones((4, 1, 1)),
            id="√d_model with 4 heads",
        ),
        pytest.param("scaled_by_dk", "scaled_score_matrix", ([[1.0] * 4], [[1.0] * 4]), [[1.0]], id="scaled by d_k"),
        pytest.param("not_scaled", "scaled_score_matrix", ([[1.0] * 4], [[1.0] * 4]), [[4.0]], id="not scaled"),
        pytest.param("cosine_similarity", "score", ([2.0, 0.0], [3.0, 0.0]), 1.0, id="cosine"),
        pytest.param(
            "softmax_wrong_axis",
            "attention_weights",
            ([[1.0, 3.0]], [[True, True]]),
            [[1.0, 1.0]],
            id="softmax over queries",
        ),
        pytest.param(
            "mask_ignored",
            "attention_weights",
            ([[2.0, 0.0]], [[True, False]]),
            [[np.e**2 / (np.e**2 + 1), 1 / (np.e**2 + 1)]],
            id="masked_fill result discarded",
        ),
    ],
)
def test_mistake_values_from_field_notes(mistake_id, contract, args, expected):
    """Each mistake reproduces the wrong value the field notes give for its small input."""
    c = CONTRACTS[contract]
    tensors = [
        torch.tensor(np.asarray(a), dtype=torch.bool if np.asarray(a).dtype == bool else torch.float64) for a in args
    ]
    out = MISTAKES[mistake_id].bind(c)(*tensors)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("mistake_id", ["additive_mask_nan", "nan_fully_masked"])
def test_nan_mistakes_give_nan(mistake_id):
    """(1-mask)·(-inf) gives NaN at kept entries; unguarded softmax gives NaN for a fully masked row."""
    S, mask = (
        torch.tensor([[1.0, 1.0]]),
        torch.tensor([[True, False]]) if mistake_id == "additive_mask_nan" else torch.tensor([[False, False]]),
    )
    out = MISTAKES[mistake_id].bind(CONTRACTS["attention_weights"])(S, mask)
    assert torch.isnan(out).any()


def test_inputs_mutated_changes_the_first_argument():
    """The inputs_mutated mistake returns the right value but changes its first argument."""
    Q = torch.tensor([[1.0, 2.0]])
    out = MISTAKES["inputs_mutated"].bind(CONTRACTS["score_matrix"])(Q, torch.tensor([[3.0, 4.0]]))
    assert out.tolist() == [[11.0]] and Q.tolist() == [[2.0, 3.0]]


# ---------------------------------------------------------------------------------------------
# Submissions written as students write them: each is named as its catalogue mistake, and only as
# that; the correct reference is never named.

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def _spec_and_cases(spec_id: str, dtype: str = "float32"):
    spec = load_spec(ROOT / "specs" / f"{spec_id}.yaml")
    return spec, build_cases(spec, dtype)


def _diagnoses(spec_id: str, function, dtype: str = "float32") -> dict[str, str]:
    """``{case id: diagnosis id}`` of the failing cases that name a mistake."""
    spec, cases = _spec_and_cases(spec_id, dtype)
    result = run_impl(spec, function, dtype=dtype, cases=cases, shrink=False)
    return {c.id: c.diagnosis["id"] for c in result.cases if c.diagnosis}


def _scores(Q, K):
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (..., n_q, n_k)


def _neg_inf(S, mask):
    return S.masked_fill(~mask, float("-inf"))


def attention_returning_weights(Q, K, V, mask):  # forgot "@ V"
    weights = torch.softmax(_neg_inf(_scores(Q, K), mask), dim=-1)
    return torch.where(mask, weights, torch.zeros_like(weights))


def masked_scores_minus_1e9(S, mask):
    return S.masked_fill(~mask, -1e9)


def weights_minus_1e9(S, mask):
    return torch.softmax(S.masked_fill(mask == 0, -1e9), dim=-1)


def attention_minus_1e9(Q, K, V, mask):
    return torch.softmax(_scores(Q, K).masked_fill(~mask, -1e9), dim=-1) @ V


def weights_nan_to_num(S, mask):  # "fixes" the fully masked rows, and hides every other NaN too
    return torch.nan_to_num(torch.softmax(_neg_inf(S, mask), dim=-1))


def attention_nan_to_num(Q, K, V, mask):
    return torch.nan_to_num(torch.softmax(_neg_inf(_scores(Q, K), mask), dim=-1)) @ V


def weights_exp_times_mask(S, mask):  # the max runs over the masked keys too
    e = torch.exp(S - S.max(dim=-1, keepdim=True).values)
    e = e * mask
    return e / e.sum(dim=-1, keepdim=True)


def attention_exp_times_mask(Q, K, V, mask):
    return weights_exp_times_mask(_scores(Q, K), mask) @ V


def bilinear_with_dot_T(Q, K, W):
    return Q @ W @ K.T


def additive_without_transpose(Q, K, W_q, W_k, v):
    return torch.tanh((Q @ W_q).unsqueeze(-2) + (K @ W_k).unsqueeze(-3)) @ v


def additive_tanh_outside(Q, K, W_q, W_k, v):
    return torch.tanh(((Q @ W_q.T).unsqueeze(-2) + (K @ W_k.T).unsqueeze(-3)) @ v)


def scaled_scores_via_numpy(Q, K):
    q, k = Q.numpy().astype(float), K.numpy().astype(float)
    return torch.tensor(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))


def masked_scores_double(S, mask):
    return S.double().masked_fill(~mask, float("-inf"))


def weights_double(S, mask):
    w = torch.softmax(_neg_inf(S.double(), mask), dim=-1)
    return torch.where(mask, w, torch.zeros_like(w))


def attention_via_numpy(Q, K, V, mask):
    weights = attention_returning_weights(Q, K, V, mask).numpy()
    return torch.tensor(weights.astype(float) @ V.numpy())


def bilinear_double(Q, K, W):
    return Q.double() @ W.double() @ K.double().transpose(-2, -1)


def additive_double(Q, K, W_q, W_k, v):
    Q, K, W_q, W_k, v = (t.double() for t in (Q, K, W_q, W_k, v))  # "for accuracy"
    return torch.tanh((Q @ W_q.T).unsqueeze(-2) + (K @ W_k.T).unsqueeze(-3)) @ v


STUDENT_MISTAKES = [
    ("returned_weights", "attention", attention_returning_weights, {"example:two_keys", "example:two_heads"}),
    ("masked_with_large_negative", "masked_scores", masked_scores_minus_1e9, {"example:keep_and_drop"}),
    # the fill shows only in fully masked rows: named in the cases dedicated to that corner, and no other
    ("masked_with_large_negative", "attention_weights", weights_minus_1e9, {"example:fully_masked_row"}),
    ("masked_with_large_negative", "attention", attention_minus_1e9, {"example:fully_masked_query"}),
    ("nan_hidden_after_softmax", "attention_weights", weights_nan_to_num, {"example:nan_at_kept_key"}),
    ("nan_hidden_after_softmax", "attention", attention_nan_to_num, {"example:nan_kept_key_propagates"}),
    ("mask_applied_after_exp", "attention_weights", weights_exp_times_mask, {"example:masked_key_with_huge_score"}),
    ("mask_applied_after_exp", "attention", attention_exp_times_mask, {"example:masked_key_with_huge_score"}),
    ("all_axes_reversed", "bilinear_scores", bilinear_with_dot_T, {"example:batched_two_items"}),
    (
        "additive_projection_not_transposed",
        "additive_scores",
        additive_without_transpose,
        {"example:square_projections"},
    ),
    ("additive_tanh_after_v", "additive_scores", additive_tanh_outside, {"example:one_dimension"}),
    ("returned_float64", "scaled_score_matrix", scaled_scores_via_numpy, {"property:dtype_device_follow_inputs"}),
    ("returned_float64", "masked_scores", masked_scores_double, {"property:dtype_device_follow_inputs"}),
    ("returned_float64", "attention_weights", weights_double, {"property:dtype_device_follow_inputs"}),
    ("returned_float64", "attention", attention_via_numpy, {"property:dtype_device_follow_inputs"}),
    ("returned_float64", "bilinear_scores", bilinear_double, {"property:dtype_device_follow_inputs"}),
    ("returned_float64", "additive_scores", additive_double, {"property:dtype_device_follow_inputs"}),
]


@pytest.mark.parametrize(
    "mistake_id, spec_id, student, cases",
    [pytest.param(*row, id=f"{row[0]} in {row[1]}") for row in STUDENT_MISTAKES],
)
def test_student_submission_is_named_as_its_mistake(mistake_id, spec_id, student, cases):
    """The student's code is diagnosed as exactly this mistake (no other name), on the cases listed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # K.T on a 3-d tensor is deprecated
        named = _diagnoses(spec_id, student)
    # A second name is allowed only where it is also true of the code: exp x mask after a max over all
    # keys also leaves NaN (0/0) in a fully masked row, which the fully-masked-row properties name.
    also_true = {"mask_applied_after_exp": {"nan_fully_masked"}}.get(mistake_id, set())
    assert set(named.values()) - also_true == {mistake_id}, named
    assert cases <= {case for case, mid in named.items() if mid == mistake_id}, named


@pytest.mark.parametrize("spec_id", sorted({row[1] for row in STUDENT_MISTAKES}))
def test_the_reference_is_never_named(spec_id):
    """The correct reference passes every case of the specs above and gets no diagnosis."""
    spec, cases = _spec_and_cases(spec_id)
    result = run_impl(spec, spec.contract.reference, dtype="float32", cases=cases, shrink=False)
    assert result.score == result.max_score and all(c.diagnosis is None for c in result.cases)


def test_float64_is_named_only_for_lower_precision_inputs():
    """In a float64 run the float64 result is right (only the dtype property, which also calls with the
    spec's float32 inputs, names it); a float16 result is not called returned_float64."""
    named = _diagnoses("scaled_score_matrix", scaled_scores_via_numpy, dtype="float64")
    assert named == {"property:dtype_device_follow_inputs": "returned_float64"}
    half = _diagnoses("scaled_score_matrix", lambda Q, K: _scores(Q, K).half())
    assert "returned_float64" not in half.values()


@pytest.mark.parametrize(
    "mistake_id, contract, args, expected",
    [
        pytest.param(
            "returned_weights",
            "attention",
            ([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0], [3.0]], [[True, True]]),
            [[1 / (1 + np.exp(-1 / np.sqrt(2))), 1 / (1 + np.exp(1 / np.sqrt(2)))]],
            id="weights without @ V",
        ),
        pytest.param(
            "masked_with_large_negative", "masked_scores", ([[1.0, 2.0]], [[True, False]]), [[1.0, -1e9]], id="-1e9"
        ),
        pytest.param(
            "masked_with_large_negative",
            "attention_weights",
            ([[3.0, 0.0, -3.0]], [[False, False, False]]),
            [[1 / 3, 1 / 3, 1 / 3]],
            id="-1e9 on a fully masked row: uniform",
        ),
        pytest.param(
            "masked_with_large_negative",
            "attention",
            ([[1.0]], [[2.0], [0.0]], [[1.0], [4.0]], [[False, False]]),
            [[2.5]],
            id="-1e9 on a fully masked query: mean of V",
        ),
        pytest.param(
            "nan_hidden_after_softmax",
            "attention_weights",
            ([[2.0, np.nan], [np.nan, 2.0]], [[True, True], [False, True]]),
            [[0.0, 0.0], [0.0, 1.0]],
            id="nan_to_num: a NaN row becomes zeros",
        ),
        pytest.param(
            "mask_applied_after_exp",
            "attention_weights",
            ([[1000.0, 1.0, 2.0], [1.0, 3.0, 5.0]], [[False, True, True], [True, True, False]]),
            [[np.nan, np.nan, np.nan], [1 / (1 + np.e**2), 1 / (1 + np.e**-2), 0.0]],
            id="exp × mask: 0/0 under a huge masked score",
        ),
        pytest.param(
            "all_axes_reversed",
            "bilinear_scores",
            (
                [[[1.0, 0.0]], [[0.0, 1.0]]],
                [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]],
                [[1.0, 0.0], [0.0, 2.0]],
            ),
            [[[1.0, 5.0]], [[8.0, 16.0]]],
            id="Q W K.T on a batch",
        ),
        pytest.param(
            "additive_projection_not_transposed",
            "additive_scores",
            ([[1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]], [[0.0, 0.0], [1.0, 0.0]], [[0.0, 0.0], [1.0, 0.0]], [1.0, 2.0]),
            [[np.tanh(1.0), 0.0]],
            id="Q W_q without .T",
        ),
        pytest.param(
            "additive_tanh_after_v",
            "additive_scores",
            ([[0.0]], [[0.0], [1.0]], [[1.0]], [[1.0]], [2.0]),
            [[0.0, np.tanh(2.0)]],
            id="tanh after v",
        ),
    ],
)
def test_new_mistake_values(mistake_id, contract, args, expected):
    """Each new mistake computes the wrong value a student's code gives on a small input."""
    c = CONTRACTS[contract]
    tensors = [
        torch.tensor(np.asarray(a), dtype=torch.bool if np.asarray(a).dtype == bool else torch.float64) for a in args
    ]
    out = MISTAKES[mistake_id].bind(c)(*tensors)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


def test_returned_float64_keeps_the_values():
    """returned_float64 gives the reference's values in float64 for float32 inputs."""
    Q, K = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 4.0]])
    out = MISTAKES["returned_float64"].bind(CONTRACTS["scaled_score_matrix"])(Q, K)
    # float64 to the last bit or two: 11/√2 and the reference's 11·(1/√2) may round differently
    assert out.dtype == torch.float64 and out.shape == (1, 1)
    assert out.item() == pytest.approx(11 / math.sqrt(2), rel=4e-16)


def test_attention_returning_output_and_weights_is_a_bad_return_type():
    """`return out, weights` from attention fails every case as a bad return type that says what to return."""
    spec, cases = _spec_and_cases("attention")

    def attention_and_weights(Q, K, V, mask):
        weights = attention_returning_weights(Q, K, V, mask)
        return weights @ V, weights

    result = run_impl(spec, attention_and_weights, dtype="float32", cases=cases, shrink=False)
    first = next(c for c in result.cases if c.id == "example:two_keys")
    assert first.verdict is Verdict.BAD_RETURN_TYPE
    assert (
        "returned a tuple of 2 values (shapes (1, 1) and (1, 2)); return only the output, one tensor "
        "(e.g. `return out`, not `return out, weights`)"
    ) in first.message
    assert all(c.verdict is Verdict.BAD_RETURN_TYPE for c in result.cases if c.id.startswith("example:"))


# ---------------------------------------------------------------------------------------------
# Kinds, not single values.


def bert_additive_minus_1e4(S, mask):  # the old BERT idiom: (1 - mask) * -10000 added to the scores
    return S + (1.0 - mask.to(S.dtype)) * -10000.0


def fill_finfo_min(S, mask):
    return S.masked_fill(~mask, torch.finfo(S.dtype).min)


def fill_minus_1e30(S, mask):
    return S.masked_fill(~mask, -1e30)


@pytest.mark.parametrize(
    "student",
    [bert_additive_minus_1e4, fill_finfo_min, fill_minus_1e30, masked_scores_minus_1e9],
    ids=lambda f: f.__name__,
)
def test_any_large_negative_fill_is_named(student):
    """-1e4 added, finfo.min, -1e30 and -1e9 are one kind: masked_with_large_negative, fill read from the output."""
    named = _diagnoses("masked_scores", student)
    assert set(named.values()) == {"masked_with_large_negative"}, named


def test_fill_is_read_from_the_output():
    """The fit reads F from masked entries (filled or added), and refuses a small or uneven fill."""
    m = get_mistake("masked_with_large_negative")
    c = CONTRACTS["masked_scores"]
    S = torch.tensor([[1.0, 2.0, -3.0]], dtype=torch.float64)
    mask = torch.tensor([[True, False, False]])
    assert m.fit(c, (S, mask), np.array([[1.0, -1e4, -1e4]])) == {"fill": -1e4}
    assert m.fit(c, (S, mask), np.array([[1.0, 2.0 - 1e4, -3.0 - 1e4]])) == {"fill": -1e4}
    assert m.fit(c, (S, mask), np.array([[1.0, -5.0, -5.0]])) is None  # not a large negative number
    assert m.fit(c, (S, mask), np.array([[1.0, -1e4, -2e9]])) is None  # not one fill
    assert m.bind(c, None, 1, fill=-1e4)(S, mask).tolist() == [[1.0, 2.0 - 1e4, -3.0 - 1e4]]


def test_parameters_fill_the_message_and_dtypes_limit_a_mistake():
    """describe() fills the fitted ratio; computed_in_float32 applies to float64 inputs only and
    computed_in_float16 never to float16 inputs."""
    m = get_mistake("scaled_by_constant_factor")
    assert "r = 0.707 times the right scale" in m.describe({"r": 0.7071067811865476})
    assert "r = 0.5 times" in m.describe()
    f32, f16 = get_mistake("computed_in_float32"), get_mistake("computed_in_float16")
    assert [f32.applies_in(d) for d in ("float64", "float32", "float16")] == [True, False, False]
    assert [f16.applies_in(d) for d in ("float64", "float32", "float16")] == [True, True, False]


def test_constant_factor_fit_recovers_the_ratio_in_attention():
    """The ratio of a 0.3/√d_k attention is recovered from its output to 1e-6."""
    m, c = get_mistake("scaled_by_constant_factor"), CONTRACTS["attention"]
    g = torch.Generator().manual_seed(0)
    Q, K, V = (torch.randn(2, 3, 5, generator=g, dtype=torch.float64) for _ in range(3))
    mask = torch.rand(2, 3, 3, generator=g) < 0.7
    got = m.bind(c, None, r=0.3)(Q, K, V, mask).numpy()
    assert abs(m.fit(c, (Q, K, V, mask), got)["r"] - 0.3) < 1e-6


def test_softmax_wrong_axis_is_what_real_code_does():
    """Softmax over the queries, as written, leaves masked entries non-zero and a key no query keeps
    NaN (the old zeroed version is one of its forms)."""
    m, c = get_mistake("softmax_wrong_axis"), CONTRACTS["attention_weights"]
    S = torch.tensor([[1.0, 2.0], [3.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[True, False], [True, False]])
    out = m.bind(c)(S, mask)
    assert torch.isnan(out[:, 1]).all() and torch.allclose(out[:, 0], torch.softmax(S[:, 0], 0))
    assert m.bind(c, None, 1)(S, mask)[:, 1].tolist() == [0.0, 0.0]


def test_causal_catalogue_includes_the_attention_mistakes():
    """Raw scores as weights, returned weights, the wrong axis, float16 and the scale mistakes
    apply to causal attention; fully-masked-row conventions only where a query can lack a key."""
    causal = {m.id for m in mistakes_for("causal_attention_top_left")}
    assert {
        "scores_used_as_weights",
        "returned_weights",
        "softmax_wrong_axis",
        "computed_in_float16",
        "not_scaled",
        "scaled_by_dk",
        "scaled_by_half_dk",
        "scaled_by_sqrt_d_model",
        "scaled_by_constant_factor",
    } <= causal
    assert "nan_fully_masked" not in causal  # top-left: every query keeps key 0
    assert "nan_fully_masked" in {m.id for m in mistakes_for("causal_attention_bottom_right")}


def test_no_property_names_a_value_mistake():
    """Property hooks name only what the check observes (a mutation, a float64 result with right
    values): the fully-masked-row properties leave naming to the value diagnosis."""
    from attnscore.catalogue.properties import PROPERTIES

    hooked = {name for name, p in PROPERTIES.items() if p.diagnosis is not None}
    assert hooked == {"inputs_not_mutated", "dtype_device_follow_inputs"}


def test_other_causal_corner_has_the_conventions_real_code_has():
    """For a query with no key at the other corner, the forms give zeros (reference), NaN
    (masked_fill(-inf)) and the mean of V (finfo.min fill)."""
    m, c = get_mistake("causal_wrong_alignment"), CONTRACTS["causal_attention_top_left"]
    Q = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    K = torch.tensor([[1.0], [0.5]], dtype=torch.float64)
    V = torch.tensor([[2.0], [6.0]], dtype=torch.float64)
    rows = [m.bind(c, None, form)(Q, K, V)[0].item() for form in range(m.form_count)]
    assert rows[0] == 0.0 and math.isnan(rows[1]) and rows[2] == pytest.approx(4.0)


def test_fit_refuses_outputs_too_large_to_search():
    """A scale-ratio fit over more score entries than it can afford returns None (no name)."""
    from attnscore.catalogue.mistakes import scaling as mistakes

    m, c = get_mistake("scaled_by_constant_factor"), CONTRACTS["attention"]
    n = int(mistakes._FIT_ENTRIES**0.5) + 1
    Q = torch.ones(n, 1, dtype=torch.float64)
    mask = torch.ones(n, n, dtype=torch.bool)
    assert m.fit(c, (Q, Q, Q, mask), np.ones((n, 1))) is None
