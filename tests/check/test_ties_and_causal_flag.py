"""Kernels as they are: tied shape symbols (d_v = d_k) and the causal flag."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner

from attnscore.cli import main
from attnscore.maths.reference import ScoreInputError, causal_attention
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError


def _needs_equal_widths(Q, K, V, mask):
    """A FlashAttention-style kernel: d_v must equal d_k."""
    if V.shape[-1] != Q.shape[-1]:
        raise ValueError("this kernel needs d_v == d_k")
    S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    weights = torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.where(mask.any(-1, keepdim=True), weights, 0.0) @ V


def test_tied_spec_draws_one_size_for_both_symbols():
    """--tie d_v=d_k keeps all 8 worked examples (20 points): each is adapted (V padded with zero
    columns or cut), with expected values recomputed from the float64 golden path."""
    original = load_spec("specs/attention.yaml")
    spec, dropped = original.tied({"d_v": "d_k"})
    assert spec.contract.parameters[2] == ("V", ("...", "n_k", "d_k"))
    assert spec.contract.returns == ("...", "n_q", "d_k")
    assert dropped == []
    assert [e.id for e in spec.worked_examples] == [e.id for e in original.worked_examples]
    assert spec.max_points == original.max_points == 20
    assert spec.adapted_examples() == [
        "two_keys",
        "masked_key",
        "nonfinite_masked_key",
        "padding_mask_per_batch",
        "masked_key_with_huge_score",
        "two_heads",
    ]
    by_id = {e.id: e for e in spec.worked_examples}
    before = {e.id: e for e in original.worked_examples}
    # two_heads (the scaling check, d_k = 4, d_v = 2): V gains two zero columns, out keeps its values
    heads = by_id["two_heads"]
    assert heads.inputs["V"].shape == (2, 2, 4)
    assert np.array_equal(heads.inputs["V"][..., :2], before["two_heads"].inputs["V"])
    assert not heads.inputs["V"][..., 2:].any()
    assert np.allclose(heads.expected[..., :2], before["two_heads"].expected) and not heads.expected[..., 2:].any()
    assert heads.title.endswith("(adapted to d_v = d_k)")
    assert heads.explanation.endswith("Adapted to d_v = d_k: d_v padded to 4; the expected value was recomputed.")
    # masked_key_with_huge_score (d_k = 1, d_v = 2): V is cut to its first column
    huge = by_id["masked_key_with_huge_score"]
    assert huge.inputs["V"].shape == (3, 1)
    assert np.allclose(huge.expected, before["masked_key_with_huge_score"].expected[..., :1])
    from attnscore.check.cases import build_cases

    for case in build_cases(spec):
        for call in case.calls:
            assert call.args["V"].shape[-1] == call.args["Q"].shape[-1], case.id


def test_tie_adaptation_keeps_the_scaling_check():
    """A kernel that needs d_v = d_k and forgets the 1/√d_k scale still fails the adapted two_heads."""
    from attnscore.check.cases import build_cases
    from attnscore.check.judge import judge_case
    from attnscore.check.runner import InProcessRunner

    def unscaled(Q, K, V, mask):
        weights = torch.softmax((Q @ K.transpose(-2, -1)).masked_fill(~mask, float("-inf")), dim=-1)
        return torch.where(mask.any(-1, keepdim=True), weights, 0.0) @ V

    spec, _ = load_spec("specs/attention.yaml").tied({"d_v": "d_k"})
    case = next(c for c in build_cases(spec, "float64") if c.id == "example:two_heads")
    assert not judge_case(spec, case, InProcessRunner(unscaled), "float64").passed
    assert judge_case(spec, case, InProcessRunner(_needs_equal_widths), "float64").passed


def test_a_tie_that_no_inert_change_can_meet_still_drops_the_example():
    """n_k = n_q under a causal flag: neither rows nor keys can be added without changing what the
    example checks, so a worked example with n_q != n_k is left out and listed."""
    spec, dropped = load_spec("specs/causal_attention.yaml").tied({"n_k": "n_q"})
    assert dropped == ["more_keys_than_queries", "more_queries_than_keys"]
    assert [e.id for e in spec.worked_examples] == [
        "square_lower_triangle",
        "scores_decide_the_weights",
        "future_key_with_huge_score",
    ]


@pytest.mark.slow
def test_a_kernel_that_needs_equal_widths_passes_with_the_tie(tmp_path, monkeypatch):
    module = tmp_path / "kernel.py"
    module.write_text(
        "import torch\n\n"
        "def attention(Q, K, V, mask):\n"
        "    if V.shape[-1] != Q.shape[-1]:\n"
        "        raise ValueError('this kernel needs d_v == d_k')\n"
        "    S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5\n"
        "    w = torch.softmax(S.masked_fill(~mask, float('-inf')), dim=-1)\n"
        "    return torch.where(mask.any(-1, keepdim=True), w, 0.0) @ V\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    runner = CliRunner()
    plain = runner.invoke(main, ["test", "--spec", "specs/attention.yaml", "--impl", "kernel:attention"])
    assert plain.exit_code == 1 and "this kernel needs d_v == d_k" in plain.output
    tied = runner.invoke(
        main, ["test", "--spec", "specs/attention.yaml", "--impl", "kernel:attention", "--tie", "d_v=d_k"]
    )
    assert tied.exit_code == 0, tied.output
    # 20 cases, the nonfinite_masked_key one advice only (the spec does not ask that convention)
    assert tied.output.count("Score: 19/19") == 2
    assert (
        "attention: adapted 6 worked examples to d_v=d_k (expected values recomputed): two_keys, masked_key, "
        "nonfinite_masked_key, padding_mask_per_batch, masked_key_with_huge_score, two_heads" in tied.output
    )
    assert "left out" not in tied.output


@pytest.mark.parametrize(
    "tie, message",
    [
        ("d_v", "--tie: expected NAME=VALUE, found 'd_v'"),
        ("d_x=d_k", "--tie: expected a shape symbol of contract attention (d_k, d_v, n_k, n_q), found 'd_x'"),
        ("d_k=d_k", "--tie: expected SYMBOL=OTHER with OTHER not tied itself, found d_k=d_k"),
    ],
)
def test_bad_ties_are_usage_errors(tie, message):
    result = CliRunner().invoke(
        main, ["test", "--spec", "specs/attention.yaml", "--impl", "attnscore.maths.reference:attention", "--tie", tie]
    )
    assert result.exit_code == 2 and message in result.output


def test_a_spec_can_tie_symbols_in_its_shapes(tmp_path):
    doc = yaml.safe_load(open("specs/attention.yaml", encoding="utf-8"))
    doc["function"]["parameters"][2]["shape"] = ["...", "n_k", "d_k"]
    doc["function"]["returns"]["shape"] = ["...", "n_q", "d_k"]
    path = tmp_path / "tied.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError) as err:  # the bundled examples have d_v != d_k: each is located
        load_spec(path)
    assert "worked_examples[0].inputs.V: expected d_k=2 as in Q, found d_k=1" in str(err.value)
    doc["worked_examples"] = [e for e in doc["worked_examples"] if e["id"] in ("fully_masked_query",)]
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    spec = load_spec(path)
    assert spec.contract.ties == (("d_v", "d_k"),)
    # shapes that are not a consistent renaming are refused with what was expected
    doc["function"]["returns"]["shape"] = ["...", "n_q", "d_v"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(
        SpecError, match=r"function.returns.shape: expected \(\.\.\., n_q, d_k\) for contract attention"
    ):
        load_spec(path)
    doc["function"]["returns"]["shape"] = ["...", "n_q", "d_k"]
    doc["function"]["parameters"][0]["shape"] = ["...", "d_k", "d_k"]  # n_q -> d_k here but not in the returns
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError, match="or those shapes with one symbol standing for another throughout"):
        load_spec(path)


@pytest.mark.slow
def test_keyword_arguments_reach_the_implementation():
    result = CliRunner().invoke(
        main,
        [
            "test",
            "--spec",
            "specs/causal_attention.yaml",
            "--impl",
            "torch.nn.functional:scaled_dot_product_attention",
            "--keyword",
            "is_causal=true",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("Score: 17/17") == 2
    without = CliRunner().invoke(
        main,
        ["test", "--spec", "specs/causal_attention.yaml", "--impl", "torch.nn.functional:scaled_dot_product_attention"],
    )
    assert without.exit_code == 1 and "Known mistake (causal_flag_ignored)" in without.output
    bad = CliRunner().invoke(
        main,
        [
            "test",
            "--spec",
            "specs/causal_attention.yaml",
            "--impl",
            "attnscore.maths.reference:attention",
            "--keyword",
            "x=[1]",
        ],
    )
    assert bad.exit_code == 2 and "--keyword: expected a scalar value for x, found '[1]'" in bad.output


def test_causal_reference_alignments_agree_with_pytorch_and_the_mask():
    Q = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    K = torch.randn(2, 3, 7, 4, dtype=torch.float64)
    V = torch.randn(2, 3, 7, 2, dtype=torch.float64)
    sdpa = torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)
    assert torch.allclose(causal_attention(Q, K, V, "top_left"), sdpa, atol=1e-12)
    from attnscore.maths.reference import attention, causal_mask

    assert torch.equal(causal_attention(Q, K, V, "bottom_right"), attention(Q, K, V, causal_mask(5, 7)))
    out = causal_attention([[0.0], [0.0], [0.0]], [[0.0], [0.0]], [[2.0], [6.0]], "bottom_right")
    assert out.tolist() == [[0.0], [2.0], [4.0]]  # query 0 keeps no key: the zero vector
    with pytest.raises(ScoreInputError, match="alignment: expected one of top_left, bottom_right, found 'left'"):
        causal_attention(Q, K, V, "left")


def test_causal_property_names_the_query_that_saw_its_future():
    from attnscore.check.implementation import run_impl

    spec = load_spec("specs/causal_attention.yaml")

    def peeks_one_ahead(Q, K, V):
        n_q, n_k = Q.shape[-2], K.shape[-2]
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(1)
        S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
        return torch.softmax(S.masked_fill(~keep, float("-inf")), dim=-1) @ V

    result = run_impl(spec, peeks_one_ahead, dtype="float64", shrink=False)
    case = next(c for c in result.cases if c.id == "property:causal_future_keys_ignored")
    assert not case.passed
    assert "changing keys and values " in case.message
    assert "a query must not see keys after its own position (top-left aligned)" in case.message
    assert result.score < result.max_score


@pytest.mark.slow
def test_the_reproduction_line_carries_the_keyword_and_ratio_must_be_finite():
    result = CliRunner().invoke(
        main,
        [
            "test",
            "--spec",
            "specs/causal_attention.yaml",
            "--impl",
            "torch.nn.functional:scaled_dot_product_attention",
            "--keyword",
            "dropout_p=0.0",
        ],
    )
    assert result.exit_code == 1  # no causal flag: fails, and the reproduction shows the keyword given
    assert "dropout_p=0.0)" in result.output
    bad = CliRunner().invoke(
        main,
        ["test", "--spec", "specs/attention.yaml", "--impl", "attnscore.maths.reference:attention", "--ratio", "nan"],
    )
    assert bad.exit_code == 2 and "--ratio: expected a finite number >= 1, found nan" in bad.output
