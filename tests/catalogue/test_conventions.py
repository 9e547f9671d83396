"""Convention corners: a corner costs only the cases dedicated to it, never hides a second cause, and a
spec can say it is not asked (advice only) or set it aside."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner

from attnscore.boundary.outputs import Received
from attnscore.catalogue.conventions import applicable_corners, corner_region, set_aside
from attnscore.check.cases import build_cases
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.check.session import judge_cases
from attnscore.cli import main
from attnscore.report.feedback import cause_groups, failure_data, failure_text
from attnscore.report.record import result_from_record, result_to_record
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError


def fairseq_attention(Q, K, V, mask):
    """fairseq's idiom: finfo.min masking (a fully masked row gets the mean of V) and a float32 softmax."""
    S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    S = S.masked_fill(~mask, torch.finfo(S.dtype).min)
    return torch.softmax(S.float(), dim=-1).to(S.dtype) @ V


def t5_attention(Q, K, V, mask):
    """T5's idiom: no 1/√d_k scale, finfo.min masking."""
    S = (Q @ K.transpose(-2, -1)).masked_fill(~mask, torch.finfo(Q.dtype).min)
    return torch.softmax(S, dim=-1) @ V


def bert_attention(Q, K, V, mask):
    """Right but for the convention: finfo.min masking gives a fully masked row the mean of V."""
    S = (Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5).masked_fill(~mask, torch.finfo(Q.dtype).min)
    return torch.softmax(S, dim=-1) @ V


@pytest.fixture(scope="module")
def spec():
    return load_spec("specs/attention.yaml")


MIXED_EXAMPLE = {
    "id": "fully_masked_beside_a_scaled_row",
    "title": "a fully masked query beside one whose scores the scale changes",
    "convention": "fully_masked_row",
    "inputs": {
        "Q": [[1, 0], [2, 0]],
        "K": [[1, 0], [0, 1]],
        "V": [[1, 0], [0, 1]],
        "mask": [[False, False], [True, True]],
    },
    "expected": [[0, 0], [0.8044296825069569, 0.19557031749304313]],
    "explanation": "Query 0 keeps no key (the zero vector); query 1 scores [2, 0] / √2, weights [0.8044, 0.1956].",
    "points": 1,
}


def _spec_with(tmp_path, **changes):
    """The bundled attention spec with top-level fields changed and ``examples`` appended."""
    doc = yaml.safe_load(open("specs/attention.yaml", encoding="utf-8"))
    doc["worked_examples"] += changes.pop("examples", [])
    doc.update(changes)
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return load_spec(path)


def nan_rows_attention(Q, K, V, mask):
    """The commonest student code: masked_fill(-inf) then softmax; a fully masked row comes out NaN."""
    S = (Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5).masked_fill(~mask, float("-inf"))
    return torch.softmax(S, dim=-1) @ V


def sdpa_attention(Q, K, V, mask):
    """PyTorch's own SDPA: 0 for a fully masked row (torch >= 2.5), NaN where a masked key holds NaN."""
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


def _judged(spec, function, dtype):
    result = judge_cases(
        spec, build_cases(spec, dtype), InProcessRunner(function), dtype=dtype, device="cpu", submission="x", seed=0
    )
    return {c.id: c for c in result.cases}, result


def _has_fully_masked_row(args) -> bool:
    mask = np.asarray(args["mask"], dtype=bool)
    return bool((~mask.any(axis=-1)).any())


def test_fully_masked_row_region():
    """The corner is the output rows whose every key is masked, broadcast over the value width."""
    spec = load_spec("specs/attention.yaml")
    args = {
        "Q": np.zeros((2, 1)),
        "K": np.zeros((3, 1)),
        "V": np.zeros((3, 2)),
        "mask": np.array([[1, 1, 0], [0, 0, 0]], bool),
    }
    region = corner_region("fully_masked_row", spec.contract, args, (2, 2))
    assert region.tolist() == [[False, False], [True, True]]
    got = Received("tensor", "float64", "cpu", np.array([[1.0, 2.0], [np.nan, np.nan]]))
    fixed = set_aside(got, np.array([[1.5, 2.5], [0.0, 0.0]]), ["fully_masked_row"], spec.contract, args)
    assert fixed.array.tolist() == [[1.0, 2.0], [0.0, 0.0]]  # only the corner is taken as right
    causal = load_spec("specs/causal_attention.yaml")
    no_key = {"Q": np.zeros((3, 1)), "K": np.zeros((2, 1)), "V": np.zeros((2, 1))}
    assert corner_region("fully_masked_row", causal.contract, no_key, (3, 1)) is None  # top-left: every row has key 0


@pytest.mark.slow
def test_fairseq_float32_softmax_is_reported_without_the_fully_masked_row(spec):
    """fairseq in float64: matches_reference sets the fully masked rows aside (their mean of V is the
    corner's own cases' business) and reports the float32 softmax (error about 1e-8, far above
    float64's bound) alone, shrunk outside the corner; the corner costs its dedicated cases."""
    cases, _ = _judged(spec, fairseq_attention, "float64")
    failure = cases["property:matches_reference"].failure
    assert failure.corner == "" and failure.other_causes == () and "fully_masked_row" in failure.set_aside
    worst = failure.mismatch.entries[0]
    relative = worst.error / abs(worst.expected)
    assert 1e-9 < relative < 1e-6 and worst.allowed < 1e-12 * abs(worst.expected)  # float32 rounding in float64
    dedicated = cases["example:fully_masked_query"].failure
    # finfo(float64).min is -inf once the softmax runs in float32: the row comes out NaN
    assert dedicated.corner == "fully_masked_row" and dedicated.corner_found == "NaN"
    assert not cases["property:attention_fully_masked_row_zero"].passed


def test_a_dedicated_case_reports_a_second_cause_beside_its_corner(tmp_path):
    """T5 (no scale, finfo.min) on a dedicated example holding a fully masked row and a scaled one:
    the corner is the first cause, the missing scale a second one found with the corner set aside."""
    spec = _spec_with(tmp_path, examples=[MIXED_EXAMPLE])
    case = next(c for c in build_cases(spec, "float64") if c.id == "example:fully_masked_beside_a_scaled_row")
    assert case.corner == "fully_masked_row" and case.points == 1
    failure = judge_case(spec, case, InProcessRunner(t5_attention), "float64").failure
    assert failure.corner == "fully_masked_row"
    (second,) = failure.other_causes
    assert second.beside == "fully_masked_row" and "fully_masked_row" in second.set_aside and second.corner == ""
    assert sorted(e.index for e in second.mismatch.entries) == [(1, 0), (1, 1)]  # only the scaled row
    text = failure_text(failure)
    assert "Convention (fully_masked_row): out is wrong in rows whose every key is masked" in text
    assert "Second cause, outside fully_masked_row (set aside to find it):" in text
    data = failure_data(failure)
    assert data["corner"] == "fully_masked_row" and data["other_causes"][0]["beside"] == "fully_masked_row"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_rows_cost_only_the_cases_dedicated_to_them(spec, dtype):
    """masked_fill(-inf) code loses exactly the fully-masked-row example and property, once each, with
    the corner's own sentence; every other case (whose drawn masks hold such rows too) passes."""
    cases, result = _judged(spec, nan_rows_attention, dtype)
    failed = {i for i, c in cases.items() if not c.passed}
    assert failed == {"example:fully_masked_query", "property:attention_fully_masked_row_zero"}
    assert result.max_score - result.score == 3  # their 2 + 1 points, of 19
    text = failure_text(cases["example:fully_masked_query"].failure)
    assert (
        "Convention (fully_masked_row): your rows with every key masked come out NaN; this spec states weights 0"
        in (text)
    )
    drawn = next(c for c in build_cases(spec, dtype) if c.id == "property:matches_reference")
    assert any((~np.asarray(call.args["mask"], bool).any(axis=-1)).any() for call in drawn.calls)


def test_not_asked_makes_the_dedicated_cases_advice(tmp_path):
    """conventions: {fully_masked_row: not_asked}: NaN rows get full marks; the corner's cases carry no
    points and still say what the code does there."""
    spec = _spec_with(tmp_path, conventions={"fully_masked_row": "not_asked", "nonfinite_masked_key": "not_asked"})
    assert spec.not_asked == ("fully_masked_row", "nonfinite_masked_key") and spec.set_aside == ()
    cases, result = _judged(spec, nan_rows_attention, "float32")
    assert result.score == result.max_score == 16  # 20 less the corner's 3 and the advice-only NaN-key example
    advice = cases["example:fully_masked_query"]
    assert not advice.passed and advice.max_points == 0 and advice.failure.advice
    text = failure_text(advice.failure)
    assert text.splitlines()[1].startswith("Advice only (no points)")
    assert "your rows with every key masked come out NaN; the spec's own convention is: weights 0" in text
    assert "say so (spec" not in text  # the spec already says so


def test_pytorch_sdpa_gets_full_marks_on_the_bundled_attention_spec(spec):
    """SDPA lets a NaN held at a masked key through, which the bundled spec does not ask about: full marks,
    with the NaN-key example as advice."""
    for dtype in ("float32", "float64"):
        cases, result = _judged(spec, sdpa_attention, dtype)
        assert result.score == result.max_score == 19, [(c.id, c.message) for c in result.cases if not c.passed]
        advice = cases["example:nonfinite_masked_key"]
        assert not advice.passed and advice.failure.advice and advice.failure.corner == "nonfinite_masked_key"
        assert advice.failure.corner_found == "NaN"


@pytest.mark.slow
def test_t5_missing_scale_never_shrinks_into_the_corner(spec):
    """T5's missing scale in float32: matches_reference's counterexample (shrunk) keeps a key in every
    row, so the value bug is shown, not the fully masked row."""
    cases, result = _judged(spec, t5_attention, "float32")
    failure = cases["property:matches_reference"].failure
    if failure.corner:  # wrong in the corner too: the value bug is then its own cause beside it
        (failure,) = failure.other_causes
    assert failure.corner == "" and failure.shrunk_from is not None
    assert not _has_fully_masked_row(failure.args)
    # the fully masked rows are one cause of their own in the collapsed feedback
    causes = [g.cause for g in cause_groups([c.failure for c in result.cases if c.failure is not None])]
    assert "convention corner fully_masked_row" in causes


def test_the_same_bug_everywhere_is_not_a_convention():
    """An ignored mask is wrong in fully masked rows too, but it is one mistake: no corner, no second cause."""
    weights = load_spec("specs/attention_weights.yaml")
    cases, _ = _judged(weights, lambda S, mask: torch.softmax(S, dim=-1), "float32")
    failed = [c.failure for c in cases.values() if c.failure is not None]
    assert failed and all(f.other_causes == () for f in failed)
    # the corner is named only where it is the whole failure: the worked example about a fully masked
    # row (its other row keeps every key); the property's drawn inputs also mask keys in other rows,
    # where its values are wrong too, and a property's points come only with right values
    assert {f.case_id for f in failed if f.corner} == {"example:fully_masked_row"}
    assert {f.diagnosis["id"] for f in failed if f.diagnosis} == {"mask_ignored"}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_spec_option_sets_the_corner_aside_and_keeps_the_rest(tmp_path, dtype):
    """conventions: {fully_masked_row: any}: the finfo.min convention gets full marks; a missing
    scale under the same convention still fails every value case (the rest of each case is compared),
    the corner's own property included (its points come only with right values)."""
    doc = yaml.safe_load(open("specs/attention.yaml", encoding="utf-8"))
    doc["conventions"] = {"fully_masked_row": "any"}
    path = tmp_path / "any.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    spec = load_spec(path)
    assert spec.set_aside == ("fully_masked_row",)
    _, plain = _judged(load_spec("specs/attention.yaml"), bert_attention, dtype)
    assert not plain.all_passed
    _, allowed = _judged(spec, bert_attention, dtype)
    assert allowed.all_passed, [(c.id, c.message) for c in allowed.cases if not c.passed]
    cases, _ = _judged(spec, t5_attention, dtype)
    assert not cases["property:matches_reference"].passed and not cases["example:two_heads"].passed
    # the corner itself holds, but the same calls' other rows miss the scale: no point without right values
    corner = cases["property:attention_fully_masked_row_zero"]
    assert not corner.passed and corner.verdict.value == "wrong_value" and corner.failure.property_held
    assert "the property itself holds on this output; the values differ from the reference" in corner.message
    failure = cases["property:matches_reference"].failure
    assert set(failure.set_aside) == {"fully_masked_row", "nonfinite_masked_key"}
    assert failure.corner == "" and failure.other_causes == ()
    if dtype == "float64":
        # masked_key_with_huge_score: row 1 (fully masked, NaN from the float32 softmax) is set
        # aside; rows 0 and 2 are compared and carry the float32 rounding
        failure = _judged(spec, fairseq_attention, dtype)[0]["example:masked_key_with_huge_score"].failure
        assert failure is not None and {e.index[0] for e in failure.mismatch.entries} <= {0, 2}


def test_judged_corner_still_costs_points(spec):
    """Without the option the stated convention is judged: the fully masked row case fails."""
    case = next(c for c in build_cases(spec, "float64") if c.id == "example:fully_masked_query")
    result = judge_case(spec, case, InProcessRunner(bert_attention), "float64")
    assert not result.passed and result.failure.corner == "fully_masked_row" and result.failure.other_causes == ()


@pytest.mark.slow
def test_allow_on_the_command_line(tmp_path, monkeypatch):
    """attnscore test --allow fully_masked_row: full marks for the finfo.min convention; bad corners
    are one usage line."""
    (tmp_path / "bert_kernel.py").write_text(
        textwrap.dedent(
            """
            import torch

            def attention(Q, K, V, mask):
                S = (Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5).masked_fill(~mask, torch.finfo(Q.dtype).min)
                return torch.softmax(S, dim=-1) @ V
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["test", "--spec", "specs/attention.yaml", "--impl", "bert_kernel:attention", "--dtype", "float64"]
    runner = CliRunner()
    plain = runner.invoke(main, args)
    assert plain.exit_code == 1 and "Convention (fully_masked_row)" in plain.output
    allowed = runner.invoke(main, [*args, "--allow", "fully_masked_row", "--format", "json"])
    assert allowed.exit_code == 0, allowed.output
    # the fully masked row's own cases (2 + 1 points) carry none once it is allowed; the NaN-key example is advice
    assert json.loads(allowed.output)["score"] == 16
    bad = runner.invoke(main, [*args, "--allow", "fully_masked_col"])
    assert bad.exit_code == 2
    assert (
        "--allow: expected a convention corner (fully_masked_row, nonfinite_masked_key), found 'fully_masked_col'"
        in bad.output
    )
    other = runner.invoke(
        main,
        ["test", "--spec", "specs/score_matrix.yaml", "--impl", "torch:matmul", "--allow", "fully_masked_row"],
    )
    assert other.exit_code == 2
    assert "--allow: expected a convention corner of contract score_matrix (none), found 'fully_masked_row'" in (
        other.output
    )


def test_spec_conventions_are_validated(tmp_path):
    """A corner the contract does not have, or a value other than stated/any, is a located spec problem."""
    doc = yaml.safe_load(open("specs/score_matrix.yaml", encoding="utf-8"))
    doc["conventions"] = {"fully_masked_row": "any"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError, match=r"conventions\.fully_masked_row: expected a convention corner of contract"):
        load_spec(path)
    doc = yaml.safe_load(open("specs/attention.yaml", encoding="utf-8"))
    doc["conventions"] = {"fully_masked_row": "nan"}
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError, match=r"conventions\.fully_masked_row: expected one of"):
        load_spec(path)


@pytest.mark.slow
def test_record_keeps_corners_and_second_causes(tmp_path):
    """A stored result comes back with its corners and second causes."""
    spec = _spec_with(tmp_path, examples=[MIXED_EXAMPLE])
    _, result = _judged(spec, t5_attention, "float32")  # no NaN in it (NaN != NaN)
    back = result_from_record(json.loads(json.dumps(result_to_record(result))))
    assert back == result
    assert any(c.failure is not None and c.failure.other_causes for c in back.cases)


def _rows_with_no_key(contract, args, value):
    """The oracle: with Q = K = 0 and V = 1 the golden output is 1 on a row with a key, 0 on one without."""
    probe = dict(args)
    for name in contract.parameter_names[:2]:
        probe[name] = np.zeros_like(args[name])
    probe[value] = np.ones_like(args[value])
    return contract.golden(probe) == 0


def _family_calls():
    """One call per contract family with a corner, each holding rows that keep no key."""
    from attnscore.maths.contracts import get_contract

    r = np.random.default_rng(0)
    sdpa = get_contract("sdpa")
    float_mask = np.zeros((3, 2))
    float_mask[1] = -np.inf
    return [
        pytest.param(
            sdpa,
            {"query": r.normal(size=(2, 3, 2)), "key": r.normal(size=(2, 2, 2)), "value": r.normal(size=(2, 2, 1)),
             "attn_mask": np.array([[True, False], [False, False], [True, True]])},
            "value",
            id="sdpa bool mask",
        ),
        pytest.param(
            get_contract("sdpa_float_mask"),
            {"query": r.normal(size=(3, 2)), "key": r.normal(size=(2, 2)), "value": r.normal(size=(2, 1)),
             "attn_mask": float_mask},
            "value",
            id="sdpa float mask",
        ),
        pytest.param(
            get_contract("kernel_attention").configured({"is_causal": True}, ("query", "key", "value")),
            {"query": r.normal(size=(2, 3, 2)), "key": r.normal(size=(1, 1, 2)), "value": r.normal(size=(1, 1, 2))},
            "value",
            id="kernel causal bottom-right, grouped heads",
        ),
        pytest.param(
            get_contract("flash_attn").configured({"causal": True}),
            {"q": r.normal(size=(1, 3, 2, 2)), "k": r.normal(size=(1, 1, 2, 2)), "v": r.normal(size=(1, 1, 2, 2))},
            "v",
            id="flash_attn layout, causal",
        ),
        pytest.param(
            get_contract("flash_attn_varlen"),
            {"q": r.normal(size=(3, 2, 2)), "k": r.normal(size=(2, 2, 2)), "v": r.normal(size=(2, 2, 2)),
             "cu_seqlens_q": np.array([0, 2, 3], np.int32), "cu_seqlens_k": np.array([0, 0, 2], np.int32),
             "max_seqlen_q": np.array(2, np.int32), "max_seqlen_k": np.array(2, np.int32)},
            "v",
            id="varlen, a sequence with no key",
        ),
        pytest.param(
            get_contract("key_padding_attention"),
            {"query": r.normal(size=(2, 1, 2, 2)), "key": r.normal(size=(2, 1, 3, 2)),
             "value": r.normal(size=(2, 1, 3, 2)), "key_lengths": np.array([0, 2], np.int32)},
            "value",
            id="key padding, a batch item with no valid key",
        ),
    ]  # fmt: skip


@pytest.mark.parametrize("contract, args, value", _family_calls())
def test_fully_masked_rows_in_every_family_layout(contract, args, value):
    """The corner is found in each family's own output layout (heads first, FlashAttention's
    (b, n, h, d), packed rows), exactly the rows the golden output gives no key."""
    golden = contract.golden(args)
    expected = _rows_with_no_key(contract, args, value)
    assert expected.any() and not expected.all()
    region = corner_region("fully_masked_row", contract, args, golden.shape)
    assert region is not None and region.tolist() == expected.tolist()
    assert "fully_masked_row" in applicable_corners(contract) and "nonfinite_masked_key" in applicable_corners(contract)


def test_nonfinite_masked_key_rows_in_the_flash_layout():
    """A NaN in the key (or value) vector of a key the causal rule masks for some queries: exactly those
    queries' rows, in (b, n_q, h, d) layout, for the head that reads it."""
    from attnscore.maths.contracts import get_contract

    c = get_contract("flash_attn").configured({"causal": True})
    q, k, v = np.ones((1, 3, 2, 1)), np.ones((1, 3, 2, 1)), np.ones((1, 3, 2, 1))
    k[0, 2, 1, 0] = np.nan  # key 2 of head 1: masked for queries 0 and 1 (causal, n_q = n_k)
    v[0, 1, 0, 0] = np.inf  # value 1 of head 0: masked for query 0 only
    region = corner_region("nonfinite_masked_key", c, {"q": q, "k": k, "v": v}, (1, 3, 2, 1))
    assert region[0, :, :, 0].tolist() == [[True, True], [False, True], [False, False]]


def test_weights_have_no_nonfinite_key_corner():
    """For the weights themselves a masked logit's NaN is the contract (masked keys get weight 0 whatever
    they hold), not a convention: only the fully masked row is a corner there."""
    weights = load_spec("specs/attention_weights.yaml")
    assert applicable_corners(weights.contract) == ["fully_masked_row"]
    assert applicable_corners(load_spec("specs/score_matrix.yaml").contract) == []


@pytest.mark.parametrize(
    "convention, inputs, problem",
    [
        pytest.param(
            "fully_masked_row",
            {"Q": [[1, 0]], "K": [[1, 0]], "V": [[1]], "mask": [[True]]},
            "expected inputs where corner fully_masked_row occurs (the example tests it), found none of its rows",
            id="no fully masked row",
        ),
        pytest.param(
            "fully_masked_col",
            {"Q": [[1, 0]], "K": [[1, 0]], "V": [[1]], "mask": [[False]]},
            "expected one of",
            id="unknown corner",
        ),
    ],
)
def test_a_worked_examples_convention_is_validated(tmp_path, convention, inputs, problem):
    """convention: names a corner of the contract and the example's inputs hold it; else a located problem."""
    example = {"id": "marked", "convention": convention, "inputs": inputs, "expected": [[0]], "explanation": "x",
               "points": 1}  # fmt: skip
    if convention == "fully_masked_row":
        example["expected"] = [[1]]
    with pytest.raises(
        SpecError, match=r"worked_examples\[8\]\.convention: " + problem.replace("(", r"\(").replace(")", r"\)")
    ):
        _spec_with(tmp_path, examples=[example])


def test_the_nonfinite_corner_cannot_be_claimed_by_a_weights_example(tmp_path):
    doc = yaml.safe_load(open("specs/attention_weights.yaml", encoding="utf-8"))
    doc["worked_examples"][0]["convention"] = "nonfinite_masked_key"
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(
        SpecError, match=r"expected a convention corner of contract attention_weights \(fully_masked_row\)"
    ):
        load_spec(path)
