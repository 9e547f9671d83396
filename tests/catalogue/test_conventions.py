"""Convention corners: a convention never hides a second cause, and can be set aside."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner

from attnscore.boundary.outputs import Received
from attnscore.catalogue.conventions import corner_region, set_aside
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
def test_fairseq_float32_softmax_is_reported_beside_the_fully_masked_row(spec):
    """fairseq in float64: the fully masked row (NaN) is one cause; its float32 softmax (error about
    1e-8, far above float64's bound) is a second cause, found and shrunk outside the corner."""
    cases, _ = _judged(spec, fairseq_attention, "float64")
    failure = cases["property:matches_reference"].failure
    assert failure.corner == "fully_masked_row" and _has_fully_masked_row(failure.args)
    (second,) = failure.other_causes
    assert second.beside == "fully_masked_row" and second.set_aside == ("fully_masked_row",)
    assert second.corner == "" and not _has_fully_masked_row(second.args)
    worst = second.mismatch.entries[0]
    relative = worst.error / abs(worst.expected)
    assert 1e-9 < relative < 1e-6 and worst.allowed < 1e-12 * abs(worst.expected)  # float32 rounding in float64
    text = failure_text(failure)
    assert "Convention (fully_masked_row): out is wrong in rows whose every key is masked" in text
    assert "Second cause, outside fully_masked_row (set aside to find it):" in text
    data = failure_data(failure)
    assert data["corner"] == "fully_masked_row" and data["other_causes"][0]["beside"] == "fully_masked_row"


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
    # the corner is named only where it is the whole failure: the cases about fully masked rows
    assert {f.case_id for f in failed if f.corner} == {"example:fully_masked_row", "property:fully_masked_row_zero"}
    assert {f.diagnosis["id"] for f in failed if f.diagnosis} == {"mask_ignored"}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_spec_option_sets_the_corner_aside_and_keeps_the_rest(tmp_path, dtype):
    """conventions: {fully_masked_row: any}: the finfo.min convention gets full marks; a missing
    scale under the same convention still fails every value case (the rest of each case is compared)."""
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
    assert cases["property:attention_fully_masked_row_zero"].passed  # the corner itself
    failure = cases["property:matches_reference"].failure
    assert failure.set_aside == ("fully_masked_row",) and failure.corner == "" and failure.other_causes == ()
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
    assert json.loads(allowed.output)["score"] == 20
    bad = runner.invoke(main, [*args, "--allow", "fully_masked_col"])
    assert bad.exit_code == 2
    assert "--allow: expected a convention corner (fully_masked_row), found 'fully_masked_col'" in bad.output
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
def test_record_keeps_corners_and_second_causes(spec):
    """A stored result comes back with its corners and second causes."""
    _, result = _judged(spec, t5_attention, "float32")  # no NaN in it (NaN != NaN)
    back = result_from_record(json.loads(json.dumps(result_to_record(result))))
    assert back == result
    assert any(c.failure is not None and c.failure.other_causes for c in back.cases)
