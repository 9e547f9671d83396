"""Diagnosis: failing outputs that match a known mistake name it; others get nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.boundary.outputs import to_received
from attnscore.check.cases import build_cases
from attnscore.check.diagnosis import diagnose, matches
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import NO_SHRINK, judge_cases
from attnscore.check.verify import mutation_test
from attnscore.report import submission_to_json
from attnscore.spec.load import load_spec


@pytest.fixture(scope="module")
def scores_spec():
    return load_spec("specs/dot_product_scores.yaml")


@pytest.fixture(scope="module")
def scores_cases(scores_spec):
    return build_cases(scores_spec, "float32")


@pytest.mark.parametrize(
    "wrong, expected_id",
    [
        pytest.param(lambda q, k: torch.softmax(k @ q, dim=-1), "softmax_applied", id="softmax"),
        pytest.param(lambda q, k: (k @ q).abs(), "absolute_value", id="absolute value"),
        pytest.param(
            lambda q, k: torch.nn.functional.normalize(k, dim=-1) @ torch.nn.functional.normalize(q, dim=0),
            "cosine_similarity",
            id="cosine",
        ),
        pytest.param(lambda q, k: torch.flip(k @ q, dims=[0]), "keys_reversed", id="keys reversed"),
        pytest.param(lambda q, k: k * q, "elementwise_not_summed", id="not summed"),
        pytest.param(lambda q, k: torch.zeros(k.shape[0]), "all_zeros", id="zeros"),
    ],
)
def test_known_mistake_is_named(scores_spec, scores_cases, wrong, expected_id):
    """A submission written with a known mistake is diagnosed as that mistake on some failing case."""
    result = judge_cases(
        scores_spec,
        scores_cases,
        InProcessRunner(wrong),
        dtype="float32",
        device="cpu",
        submission="t",
        seed=0,
        budget=NO_SHRINK,
    )
    ids = {c.diagnosis["id"] for c in result.cases if c.diagnosis}
    assert expected_id in ids
    failing = next(c for c in result.cases if c.diagnosis and c.diagnosis["id"] == expected_id)
    assert f"Known mistake ({expected_id}): " in failing.message


def test_unknown_wrong_output_gets_no_diagnosis(scores_spec, scores_cases):
    """An output that matches no catalogue mistake fails with diagnosis None."""
    result = judge_cases(
        scores_spec,
        scores_cases,
        InProcessRunner(lambda q, k: k @ q + 0.25),
        dtype="float32",
        device="cpu",
        submission="t",
        seed=0,
        budget=NO_SHRINK,
    )
    assert not result.all_passed
    assert all(c.diagnosis is None for c in result.cases)
    assert all("Known mistake" not in c.message for c in result.cases)


def test_diagnose_direct_call(scores_spec, scores_cases):
    """diagnose() on the worked example returns {id, message} for softmax output."""
    call = scores_cases[0].calls[0]
    q, keys = (torch.tensor(a) for a in call.args.values())
    received = to_received(torch.softmax(keys @ q, dim=-1))
    diag = diagnose(scores_spec, call, received, "float32")
    assert diag == {
        "id": "softmax_applied",
        "message": "your scores equal softmax of the scores (each row sums to 1): raw scores must not be normalised",
    }


@pytest.mark.parametrize(
    "got, want, ok",
    [
        pytest.param([1.0, np.nan], [1.0, np.nan], True, id="NaN in the same place"),
        pytest.param([1.0, 2.0], [1.0, np.nan], False, id="NaN missing"),
        pytest.param([-np.inf, 2.0], [np.inf, 2.0], False, id="infinity of the other sign"),
        pytest.param([1.0, 2.0], [1.0, 2.0, 3.0], False, id="shapes differ"),
        pytest.param([1.0, 2.00001], [1.0, 2.0], True, id="within close(float32)"),
    ],
)
def test_matches(got, want, ok):
    """matches() compares shape, non-finite placement, then values."""
    assert matches(np.array(got), np.array(want), 0.0, "float32") is ok


def test_json_report_carries_the_diagnosis(scores_spec, scores_cases):
    """The JSON report's case diagnosis is {id, message} when matched, else null; strict JSON."""
    result = judge_cases(
        scores_spec,
        scores_cases,
        InProcessRunner(lambda q, k: torch.softmax(k @ q, dim=-1)),
        dtype="float32",
        device="cpu",
        submission="t",
        seed=0,
        budget=NO_SHRINK,
    )
    data = json.loads(json.dumps(submission_to_json(result), allow_nan=False))
    diags = [c["diagnosis"] for c in data["cases"]]
    assert {"id": "softmax_applied", "message": diags[0]["message"]} == diags[0]
    assert diags[0]["message"].startswith("your scores equal softmax")


def test_counterexample_with_nan_is_strict_json():
    """A failing case whose inputs hold NaN/inf reports them as strings, so JSON stays valid."""
    spec = load_spec("specs/masked_scores.yaml")
    result = judge_cases(
        spec,
        build_cases(spec, "float32"),
        InProcessRunner(lambda S, m: S.clone()),
        dtype="float32",
        device="cpu",
        submission="t",
        seed=0,
        budget=NO_SHRINK,
    )
    text = json.dumps(submission_to_json(result), allow_nan=False)
    assert '"nan"' in text and "Reproduce: masked_scores(torch.tensor([[float('nan')" in text


def test_mutation_test_reports_missed_mistakes(tmp_path):
    """With one single-key example, keys_reversed is MISSED; softmax_applied is still named.

    softmax([-1]) = [1] = |-1|: on that output alone softmax_applied and absolute_value match, and
    only the confirmation inputs (several keys, other signs) tell them apart, so each is named as
    itself and nothing is guessed.
    """
    text = open("specs/dot_product_scores.yaml", encoding="utf-8").read()
    head = text[: text.index("  - id: aligned_perpendicular_partial")]
    anti = text[text.index("  - id: anti_aligned") : text.index("  - id: three_dims_mixed_signs")]
    text = head + anti
    path = tmp_path / "weak.yaml"
    path.write_text(text, encoding="utf-8")
    results = {r.mistake_id: r for r in mutation_test(load_spec(path))}
    assert results["keys_reversed"].cell == "MISSED"
    assert results["softmax_applied"].cell == "diagnosed"
    assert results["absolute_value"].cell == "diagnosed"


def test_raw_scores_used_as_weights_have_their_own_name():
    """Attention without softmax, and weights as scores over their sum, are named as themselves."""
    from pathlib import Path

    import torch

    from attnscore.catalogue.mistakes import MISTAKES
    from attnscore.spec.load import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "specs" / "attention_weights.yaml")
    S = torch.tensor([[2.0, -1.0, 0.5]])
    mask = torch.tensor([[True, True, True]])
    for mid in ("scores_used_as_weights", "scores_divided_by_their_sum"):
        wrong = MISTAKES[mid].bind(spec.contract, spec)(S, mask)
        assert not torch.allclose(wrong, torch.softmax(S, -1))
        assert "raw scores are not weights: they can be negative and need not sum to one" in MISTAKES[mid].message


# A name needs evidence beyond a coincidence on one small output.
def _half_power_inline(Q, K):
    return Q @ K.transpose(-2, -1) / Q.shape[-1] ** 1 / 2  # divides by 2·d_k


def _half_power_variable(Q, K):
    scale = Q.shape[-1] ** 1 / 2  # d_k / 2
    return Q @ K.transpose(-2, -1) / scale


def _own_causal_mask(diagonal):
    def attention(Q, K, V, mask):
        keep = torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool).tril(diagonal)  # ignores `mask`
        S = (Q @ K.transpose(-2, -1)) / Q.shape[-1] ** 0.5
        return torch.nan_to_num(torch.softmax(S.masked_fill(~keep, float("-inf")), -1)) @ V

    return attention


def _where_minus_inf(S, mask):
    return torch.where(mask, S, S - float("inf"))  # NaN where a masked entry held +inf


def _minus_1e9(Q, K, V, mask):
    S = (Q @ K.transpose(-2, -1)) / Q.shape[-1] ** 0.5
    return torch.softmax(S.masked_fill(~mask, -1e9), -1) @ V


def _scaled_by_dk(Q, K):
    return (Q @ K.transpose(-2, -1)) / Q.shape[-1]


@pytest.mark.parametrize(
    "spec_file, function, dtype, names",
    [
        pytest.param(
            "scaled_score_matrix.yaml", _half_power_inline, "float32", {"scaled_by_two_dk"}, id="S / d_k ** 1/2"
        ),
        pytest.param(
            "scaled_score_matrix.yaml", _half_power_variable, "float32", {"scaled_by_half_dk"}, id="scale = d_k ** 1/2"
        ),
        pytest.param("attention.yaml", _own_causal_mask(0), "float32", set(), id="own causal mask, top-left"),
        pytest.param("attention.yaml", _own_causal_mask(-1), "float32", set(), id="own causal mask, no diagonal"),
        pytest.param(
            "masked_scores.yaml",
            _where_minus_inf,
            "float32",
            {"mask_added_as_neg_inf_bias"},  # S - inf at masked entries is adding a -inf bias: NaN for +inf
            id="where(mask, S, S - inf)",
        ),
        pytest.param("attention.yaml", _minus_1e9, "float32", {"masked_with_large_negative"}, id="-1e9"),
        pytest.param("scaled_score_matrix.yaml", _scaled_by_dk, "float16", {"scaled_by_dk"}, id="float16 inputs"),
    ],
)
@pytest.mark.slow
def test_a_name_is_shown_only_with_evidence(spec_file, function, dtype, names):
    """Each case's diagnosis is the true mistake or nothing: never hard_coded_examples for a 1×1
    coincidence, mask_inverted for a causal mask, mask_ignored for S - inf, uniform_weights for
    -1e9, or computed_in_float16 ("do not cast to half") for inputs that are already float16."""
    spec = load_spec(f"specs/{spec_file}")
    result = judge_cases(
        spec,
        build_cases(spec, dtype),
        InProcessRunner(function),
        dtype=dtype,
        device="cpu",
        submission="t",
        seed=spec.seed,
        budget=NO_SHRINK,
    )
    assert not result.all_passed
    assert {c.diagnosis["id"] for c in result.cases if c.diagnosis} == names


def test_a_one_entry_coincidence_is_not_a_diagnosis():
    """A 1×1 output of 0 where 1 is right matches all_zeros, but one entry is not evidence: the
    name needs the implementation to give zeros on the confirmation inputs too."""
    from attnscore.check.cases import _call
    from attnscore.check.diagnosis import MIN_EVIDENCE

    spec = load_spec("specs/scaled_score_matrix.yaml")
    args = {"Q": np.array([[2.0, 0.0, 0.0, 0.0]]), "K": np.array([[1.0, 0.0, 0.0, 0.0]])}
    call = _call(spec, args, "float32", spec.tolerance)
    received = to_received(torch.zeros(1, 1))
    assert MIN_EVIDENCE == 2
    assert diagnose(spec, call, received, "float32") is None  # no runner: only this one entry
    zeros = InProcessRunner(lambda Q, K: (Q @ K.transpose(-2, -1)) * 0)
    assert diagnose(spec, call, received, "float32", zeros) == {
        "id": "all_zeros",
        "message": "your result is all zeros: compute the values instead of returning a placeholder",
    }
    # an implementation that is zero here by accident (it drops the first coordinate) is not all_zeros
    drops_first = InProcessRunner(lambda Q, K: Q[..., 1:] @ K[..., 1:].transpose(-2, -1) / 2.0)
    assert diagnose(spec, call, received, "float32", drops_first) is None


@pytest.mark.slow
def test_the_name_next_to_a_shrunk_counterexample_holds_on_it():
    """Shrinking keeps only inputs where the diagnosed mistake still explains the output, and the
    shrunk counterexample is never larger than the original."""
    from attnscore.boundary.outputs import to_received as received_of
    from attnscore.catalogue.mistakes import get_mistake
    from attnscore.check.diagnosis import holds
    from attnscore.check.implementation import run_impl

    spec = load_spec("specs/attention.yaml")
    result = run_impl(spec, _minus_1e9, dtype="float32")
    case = next(c for c in result.cases if c.id == "property:attention_fully_masked_row_zero")
    assert case.diagnosis and case.diagnosis["id"] == "masked_with_large_negative"
    assert "shrunk by hypothesis" in case.message and "Known mistake (masked_with_large_negative)" in case.message
    args = {k: np.asarray(v, dtype=bool if k == "mask" else np.float32) for k, v in case.counterexample.items()}
    from attnscore.check.cases import _call

    call = _call(spec, args, "float32", spec.tolerance)
    out = received_of(_minus_1e9(*[torch.tensor(a) for a in call.args.values()]))
    assert holds(get_mistake("masked_with_large_negative"), spec, call, out, "float32")
    original = next(c for c in run_impl(spec, _minus_1e9, dtype="float32", shrink=False).cases if c.id == case.id)
    size = lambda ce: sum(np.asarray(v, dtype=object).size for v in ce.values())  # noqa: E731
    assert size(case.counterexample) <= size(original.counterexample)


def _truncated_sqrt(Q, K):
    return Q @ K.transpose(-2, -1) / int(Q.shape[-1] ** 0.5)  # int(√d_k): 1 for d_k < 4


def test_truncated_scaling_is_not_called_unscaled():
    """int(√d_k) equals 1 for small d_k, where it looks unscaled; the confirmation inputs (d_k up to
    6) show it divides, so not_scaled is not shown."""
    spec = load_spec("specs/scaled_score_matrix.yaml")
    result = judge_cases(
        spec,
        build_cases(spec),
        InProcessRunner(_truncated_sqrt),
        dtype="float32",
        device="cpu",
        submission="t",
        seed=0,
        budget=NO_SHRINK,
    )
    assert not result.all_passed
    assert "not_scaled" not in {c.diagnosis["id"] for c in result.cases if c.diagnosis}


# ---------------------------------------------------------------------------------------------
# Names from evidence only, for code written the ways public implementations and
# students write it.


def _named(spec_file, function, dtype="float32"):
    """``{case id: diagnosis id}`` of the failing cases that name a mistake, and the result."""
    from attnscore.check.implementation import run_impl

    spec = load_spec(f"specs/{spec_file}")
    result = run_impl(spec, function, dtype=dtype, shrink=False)
    return {c.id: c.diagnosis["id"] for c in result.cases if c.diagnosis}, result


def xformers_style(Q, K, V, mask):
    """xformers' ref_attention / flash-attn's reference: the mask as an additive float bias."""
    q = Q * Q.shape[-1] ** -0.5
    attn = q @ K.transpose(-2, -1)
    attn_bias = torch.zeros_like(attn).masked_fill(~mask, float("-inf"))
    attn = (attn + attn_bias).softmax(-1)
    return attn @ V


def fairseq_style(Q, K, V, mask):
    """fairseq's MultiheadAttention: -inf fill, softmax in float32 (utils.softmax), type_as back."""
    attn_weights = torch.matmul(Q * Q.shape[-1] ** -0.5, K.transpose(-2, -1))
    attn_weights = attn_weights.masked_fill(~mask, float("-inf"))
    attn_probs = torch.softmax(attn_weights.float(), dim=-1).type_as(attn_weights)
    attn_probs = torch.where(mask, attn_probs, torch.zeros_like(attn_probs))
    return attn_probs @ V


def hf_eager_style(Q, K, V, mask):
    """Hugging Face eager attention: an additive finfo.min mask, softmax in float32."""
    attn_weights = torch.matmul(Q, K.transpose(-1, -2)) / math.sqrt(Q.shape[-1])
    causal_mask = torch.where(mask, 0.0, torch.finfo(Q.dtype).min).to(Q.dtype)
    attn_weights = torch.nn.functional.softmax(attn_weights + causal_mask, dim=-1, dtype=torch.float32).to(Q.dtype)
    return torch.matmul(attn_weights, V)


def wrong_axis_student(Q, K, V, mask):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    weights = torch.softmax(scores.masked_fill(mask == 0, float("-inf")), dim=-2)  # over the queries
    return weights @ V


def masked_fill_student(Q, K, V, mask):  # the Annotated Transformer, with -inf
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores.masked_fill(mask == 0, float("-inf")), dim=-1) @ V


def sqrt_dv_student(Q, K, V, mask):  # scales by the value width
    scores = Q @ K.transpose(-2, -1) / math.sqrt(V.shape[-1])
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask, weights, torch.zeros_like(weights)) @ V


def temperature_student(Q, K, V, mask):  # 1/√(2·d_k): a constant factor 1/√2 off
    scores = Q @ K.transpose(-2, -1) / math.sqrt(2 * Q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask, weights, torch.zeros_like(weights)) @ V


def test_additive_neg_inf_bias_is_named_for_what_it_does():
    """The -inf bias idiom (xformers/flash-attn references) is right on rows with a kept key and
    finite scores, so those cases pass and get no name; the NaN rows (every key masked, a masked
    +inf) are named mask_added_as_neg_inf_bias, never mask_applied_after_exp or nan_fully_masked."""
    named, result = _named("attention.yaml", xformers_style)
    passed = {c.id for c in result.cases if c.passed}
    assert {"example:two_keys", "example:masked_key", "example:two_heads", "example:padding_mask_per_batch"} <= passed
    assert set(named.values()) == {"mask_added_as_neg_inf_bias"}, named
    assert {"example:fully_masked_query", "example:nonfinite_masked_key"} <= set(named)
    assert "property:attention_fully_masked_row_zero" in named


def test_nan_in_a_fully_masked_row_is_named_by_evidence_not_by_the_property():
    """masked_fill(-inf) + softmax leaves NaN only where every key is masked: nan_fully_masked.
    Softmax over the queries also puts NaN in that row, but it is named softmax_wrong_axis."""
    named, _ = _named("attention.yaml", masked_fill_student)
    assert set(named.values()) == {"nan_fully_masked"} and "property:attention_fully_masked_row_zero" in named
    named, _ = _named("attention.yaml", wrong_axis_student)
    assert set(named.values()) == {"softmax_wrong_axis"}, named
    assert named["property:attention_fully_masked_row_zero"] == "softmax_wrong_axis"


def test_finfo_min_masking_is_a_large_negative_fill():
    """Hugging Face's finfo.min bias gives a fully masked row the mean of V: masked_with_large_negative."""
    named, _ = _named("attention.yaml", hf_eager_style)
    assert set(named.values()) == {"masked_with_large_negative"}, named
    assert "example:fully_masked_query" in named


def test_float32_softmax_in_a_float64_run_is_computed_in_float32():
    """fairseq's float32 softmax in a float64 run is named computed_in_float32, and the layouts
    property does not blame contiguity for float32 rounding: it holds, and the case is lost only
    for the values themselves (a property's points come with right values)."""
    named, result = _named("attention.yaml", fairseq_style, dtype="float64")
    assert set(named.values()) == {"computed_in_float32"}, named
    assert "example:two_keys" in named
    layouts = next(c for c in result.cases if c.id == "property:non_contiguous_inputs")
    assert layouts.failure is not None and layouts.failure.property_held, layouts.message
    assert "contiguous" not in (layouts.failure.check or "")
    # in a float32 run the same code is right and nothing is named
    named32, result32 = _named("attention.yaml", fairseq_style, dtype="float32")
    assert "computed_in_float32" not in named32.values()
    assert next(c for c in result32.cases if c.id == "example:two_keys").passed


def test_constant_scale_ratio_is_fitted_and_confirmed():
    """1/√(2·d_k) is named scaled_by_constant_factor with its ratio r = 1/√2 in the message."""
    named, result = _named("attention.yaml", temperature_student)
    assert set(named.values()) == {"scaled_by_constant_factor"}, named
    message = next(c.diagnosis["message"] for c in result.cases if c.diagnosis)
    assert "r = 0.707 times the right scale" in message
    named, result = _named("scaled_score_matrix.yaml", lambda Q, K: Q @ K.transpose(-2, -1) * 0.5 / Q.shape[-1] ** 0.5)
    assert set(named.values()) == {"scaled_by_constant_factor"}
    assert "r = 0.5 times" in next(c.diagnosis["message"] for c in result.cases if c.diagnosis)


def test_sqrt_dv_scale_is_not_called_half_dk():
    """A √d_v scale matches d_k/2 on a worked example where d_v = 2 = d_k/2, but the confirmation
    inputs (d_v != d_k, √d_k != d_k/2) refute every scale rule: no name, never scaled_by_half_dk."""
    named, result = _named("attention.yaml", sqrt_dv_student)
    assert not result.all_passed
    assert not {"scaled_by_half_dk", "scaled_by_constant_factor", "not_scaled"} & set(named.values()), named


def test_an_unexplained_second_fault_gets_no_name():
    """NaN in fully masked rows plus a small shift everywhere matches no mistake: nothing is named."""
    named, result = _named("attention.yaml", lambda Q, K, V, m: masked_fill_student(Q, K, V, m) + 0.01)
    assert not result.all_passed and named == {}


def test_confirmation_inputs_are_not_degenerate():
    """Random non-zero values; d_k differs between inputs and √d_k, d_k/2, 2·d_k, √d_v and
    √(heads·d_k) differ on each; d_v != d_k; every query keeps a key and masks one."""
    from attnscore.check.diagnosis import CONFIRMATIONS, confirmation_args

    spec = load_spec("specs/attention.yaml")
    inputs = confirmation_args(spec)
    assert len(inputs) == CONFIRMATIONS == 3
    widths = [a["Q"].shape[-1] for a in inputs]
    assert len(set(widths)) == 3
    for a in inputs:
        Q, V, mask = a["Q"], a["V"], a["mask"]
        d_k, d_v, heads = Q.shape[-1], V.shape[-1], Q.shape[-3]
        assert heads >= 2 and d_v != d_k and np.all(np.abs(Q) >= 0.25)
        scales = [math.sqrt(d_k), d_k / 2, 2 * d_k, d_k, math.sqrt(d_v), math.sqrt(heads * d_k)]
        assert len({round(s, 9) for s in scales}) == len(scales)
        assert mask.any(axis=-1).all() and (~mask).any(axis=-1).all()


@pytest.mark.slow
def test_causal_catalogue_has_the_attention_mistakes():
    """SDPA with scale=1.0, the weights returned, softmax over the queries and the bottom-right
    corner written with masked_fill(-inf) (NaN for a query with no key) are each named on the
    causal spec."""

    def returns_weights(Q, K, V):
        S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        keep = torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool).tril()
        return torch.softmax(S.masked_fill(~keep, float("-inf")), dim=-1)

    def causal_wrong_axis(Q, K, V):
        S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        keep = torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool).tril()
        return torch.softmax(S.masked_fill(~keep, float("-inf")), dim=-2) @ V

    def bottom_right_nan(Q, K, V):
        n_q, n_k = Q.shape[-2], K.shape[-2]
        S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        return torch.softmax(S.masked_fill(~keep, float("-inf")), dim=-1) @ V

    def sdpa_unscaled(Q, K, V):
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True, scale=1.0)

    for function, mistake in [
        (returns_weights, "returned_weights"),
        (causal_wrong_axis, "softmax_wrong_axis"),
        (bottom_right_nan, "causal_wrong_alignment"),
        (sdpa_unscaled, "not_scaled"),
    ]:
        named, _ = _named("causal_attention.yaml", function)
        assert set(named.values()) == {mistake}, (function.__name__, named)
    named, _ = _named("causal_attention.yaml", bottom_right_nan)
    assert named["example:more_queries_than_keys"] == "causal_wrong_alignment"  # query 0 has no key: NaN


def _row_major(shape):
    return torch.empty(shape).stride()


def reads_k_storage_as_row_major(Q, K):
    """Reads K's storage with row-major strides (a stand-in for raw storage indexing)."""
    if not K.is_contiguous() and K.untyped_storage().nbytes() >= K.numel() * K.element_size() + K.storage_offset():
        K = torch.as_strided(K, K.shape, _row_major(K.shape), K.storage_offset())
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])


def test_non_contiguous_inputs_names_the_argument():
    """Each argument is handed over as a view alone: the failure names K, not every input."""
    _, result = _named("scaled_score_matrix.yaml", reads_k_storage_as_row_major)
    case = next(c for c in result.cases if c.id == "property:non_contiguous_inputs")
    assert not case.passed
    assert "when K was a" in case.message and "when Q was" not in case.message
    assert "every input a view at once" not in case.message


# Feedback leads with the most specific cause.


def _half_temperature_weights(S, mask):
    weights = torch.softmax((S / 2).masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask, weights, torch.zeros_like(weights))


def _bias_weights(S, mask):
    return torch.softmax(S + torch.zeros_like(S).masked_fill(~mask, float("-inf")), dim=-1)


def test_a_plain_value_bug_is_not_presented_as_the_property():
    """Weights that are all >= 0 but wrong fail weights_non_negative on values: the header says the
    values differ and the property holds, not "Property: Every weight is >= 0" above them."""
    _, result = _named("attention_weights.yaml", _half_temperature_weights)
    case = next(c for c in result.cases if c.id == "property:weights_non_negative")
    assert not case.passed and case.failure.property_held
    first = case.message.splitlines()[0]
    assert first.startswith("Wrong values on an input drawn for the property: Every weight is >= 0.")
    assert "the property itself holds on this output" in first
    assert case.message.splitlines()[1].startswith("Counterexample: ")
    # an output that breaks the property itself keeps the property header
    _, result = _named("attention_weights.yaml", lambda S, m: _half_temperature_weights(S, m) - 0.5)
    case = next(c for c in result.cases if c.id == "property:weights_non_negative")
    assert case.message.startswith("Property: Every weight is >= 0.") and not case.failure.property_held


@pytest.mark.slow
def test_nonfinite_values_in_a_masked_row_get_a_masking_hint():
    """NaN in a row with no kept key says so (0/0 of all -inf), not "look for a division by zero";
    NaN in a row with a masked +inf says to replace masked scores; other NaN keep the generic hint."""
    _, result = _named("attention_weights.yaml", _bias_weights)
    case = next(c for c in result.cases if c.id == "example:fully_masked_row")
    assert "this query keeps no key (the mask masks every key): softmax over scores that are all -inf is 0/0" in (
        case.message
    )
    assert "look for a division by zero" not in case.message
    _, result = _named("attention.yaml", xformers_style)
    case = next(c for c in result.cases if c.id == "example:nonfinite_masked_key")
    assert "this query has masked keys: a masked score that is +inf or NaN" in case.message
    _, result = _named("scaled_score_matrix.yaml", lambda Q, K: torch.log(-(Q @ K.transpose(-2, -1)).abs() - 1))
    case = next(c for c in result.cases if not c.passed and c.failure.mismatch is not None)
    assert "look for a division by zero, an overflow or a log/sqrt of a bad value" in case.message


def test_property_held_survives_the_record():
    """The record keeps property_held, and old records without it read as False."""
    from attnscore.boundary.verdict import Verdict
    from attnscore.report.codec import decode, encode
    from attnscore.report.failure import Failure

    failure = Failure(
        verdict=Verdict.WRONG_VALUE,
        case_id="property:p",
        kind="property",
        title="t",
        location="s.yaml:1",
        hidden=False,
        function="f",
        dtype="float32",
        statement="s",
        property_held=True,
    )
    data = encode(failure)
    assert decode(Failure, data, "f").property_held is True
    data.pop("property_held")
    assert decode(Failure, data, "f").property_held is False


# The inputs that confirm a name vary what the name depends on.


def _submission(name, function="scaled_dot_product_attention"):
    """The function of the example submission ``examples/submissions/<name>``, imported in process."""
    import importlib.util

    module_spec = importlib.util.spec_from_file_location(f"example_{Path(name).stem}", f"examples/submissions/{name}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, function)


def test_confirmation_float_masks_have_rows_with_and_without_neg_inf():
    """Every confirmation input of a float attn_mask has rows with a -inf entry and rows without
    one, each with a finite non-zero entry: a name that depends on the -inf entries is confirmed
    on both."""
    from attnscore.check.diagnosis import confirmation_args

    for args in confirmation_args(load_spec("specs/sdpa_float_mask.yaml")):
        rows = args["attn_mask"].reshape(-1, args["attn_mask"].shape[-1])
        with_inf = np.isneginf(rows).any(axis=-1)
        assert with_inf.any() and (~with_inf).any()
        assert ((rows != 0) & np.isfinite(rows)).any(axis=-1).all()


@pytest.mark.parametrize("spec_file", ["gqa.yaml", "sdpa.yaml", "kv_cache.yaml", "key_padding.yaml", "varlen.yaml"])
def test_confirmation_heads_are_grouped(spec_file):
    """Where a contract has query and key/value heads, every confirmation input has more query heads
    than KV heads (a group shares a KV head: tiled and grouped heads differ)."""
    from attnscore.check.diagnosis import confirmation_args

    spec = load_spec(f"specs/{spec_file}")
    names = dict(spec.contract.parameters)
    q_name, k_name = spec.contract.parameter_names[:2]
    h_q = names[q_name].index("h_q") - len(names[q_name])  # from the end: "..." may stand for several dims
    h_kv = names[k_name].index("h_kv") - len(names[k_name])
    for args in confirmation_args(spec):
        q, k = args[q_name], args[k_name]
        assert q.shape[h_q] > k.shape[h_kv] >= 1 and q.shape[h_q] % k.shape[h_kv] == 0


def test_probes_include_more_queries_than_keys():
    """The probe inputs of a contract with n_q and n_k include one with n_q = n_k + 2."""
    from attnscore.check.diagnosis_inputs import diagnosis_calls

    spec = load_spec("specs/sdpa_float_mask.yaml")
    shapes = [(c.args["query"].shape[-2], c.args["key"].shape[-2]) for c in diagnosis_calls(spec, "float32", "probe")]
    assert (5, 3) in shapes


@pytest.mark.slow
def test_a_subtracted_float_mask_is_named_not_all_zeros():
    """scores - attn_mask with NaN rows zeroed (nan_to_num) gives zeros on every row with a -inf
    entry; the confirmation inputs' rows without one show the subtraction: it is named
    sdpa_float_mask_subtracted, never all_zeros."""
    named, result = _named("sdpa_float_mask.yaml", _submission("sdpa_float_mask/mask_subtracted.py"))
    assert not result.all_passed
    assert set(named.values()) == {"sdpa_float_mask_subtracted"}, named
    assert {"example:minus_inf_masks_a_huge_score", "property:matches_reference"} <= set(named)


@pytest.mark.slow
def test_bottom_right_causal_is_named_on_the_property_as_on_the_example():
    """SDPA's is_causal aligned bottom-right with masked_fill(-inf): NaN for queries with no key when
    n_q > n_k. The property's draws with more queries than keys are named as the worked example is."""
    named, _ = _named("sdpa_causal.yaml", _submission("sdpa_causal/bottom_right_masked_fill.py"))
    assert set(named.values()) == {"sdpa_causal_bottom_right"}, named
    assert {"example:more_keys_than_queries", "property:matches_reference"} <= set(named)
