"""Diagnosis: failing outputs that match a known mistake name it; others get nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnscore.check.cases import build_cases
from attnscore.check.diagnosis import diagnose, matches
from attnscore.check.outputs import to_received
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

    spec = load_spec(Path(__file__).resolve().parent.parent / "specs" / "attention_weights.yaml")
    S = torch.tensor([[2.0, -1.0, 0.5]])
    mask = torch.tensor([[True, True, True]])
    for mid in ("scores_used_as_weights", "scores_divided_by_their_sum"):
        wrong = MISTAKES[mid].bind(spec.contract, spec)(S, mask)
        assert not torch.allclose(wrong, torch.softmax(S, -1))
        assert "raw scores are not weights: they can be negative and need not sum to one" in MISTAKES[mid].message


# Issue 9 item 9: a name needs evidence beyond a coincidence on one small output.
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


def test_the_name_next_to_a_shrunk_counterexample_holds_on_it():
    """Shrinking keeps only inputs where the diagnosed mistake still explains the output, and the
    shrunk counterexample is never larger than the original."""
    from attnscore.catalogue.mistakes import get_mistake
    from attnscore.check.diagnosis import holds
    from attnscore.check.implementation import run_impl
    from attnscore.check.outputs import to_received as received_of

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
