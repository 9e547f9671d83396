"""Shape bounds: kernels that refuse shapes are tried inside their domain."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from attnscore.check.cases import build_cases
from attnscore.cli import main
from attnscore.maths.bounds import Bound, legend_of, parse_bound
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

GPT2 = '''import torch


def causal_attention(Q, K, V):
    """GPT-2's eager causal slice (bias[n_k - n_q : n_k, :n_k], bottom-right); refuses n_q > n_k."""
    n_q, n_k = Q.shape[-2], K.shape[-2]
    if n_q > n_k:
        raise ValueError(f"this kernel needs n_q <= n_k, found n_q={n_q}, n_k={n_k}")
    bias = torch.tril(torch.ones(n_k, n_k, dtype=torch.bool, device=Q.device))[n_k - n_q : n_k, :n_k]
    S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    S = S.masked_fill(~bias, torch.finfo(S.dtype).min)
    return torch.softmax(S, dim=-1) @ V
'''


@pytest.fixture
def gpt2(tmp_path, monkeypatch):
    (tmp_path / "gpt2_kernel.py").write_text(GPT2, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "gpt2_kernel:causal_attention"


@pytest.mark.parametrize(
    "text, bound",
    [
        pytest.param("n_q<=n_k", Bound("n_q", "<=", "n_k"), id="symbols"),
        pytest.param(" d_k <= 128 ", Bound("d_k", "<=", 128), id="integer, spaces"),
        pytest.param("n_k>1", Bound("n_k", ">", 1), id="strict"),
        pytest.param("d_v==d_k", Bound("d_v", "==", "d_k"), id="equal"),
    ],
)
def test_parse_bound(text, bound):
    """A bound is SYMBOL OP SYMBOL or SYMBOL OP INTEGER."""
    assert parse_bound(text) == bound


@pytest.mark.parametrize(
    "text", [pytest.param("n_q", id="no operator"), pytest.param("n_q =< n_k", id="=<"), pytest.param("3<n_q", id="")]
)
def test_bad_bound_names_the_form(text):
    """A malformed bound says the form it expected and quotes what it found."""
    with pytest.raises(ValueError, match=rf"expected SYMBOL OP SYMBOL or SYMBOL OP INTEGER .* found {text!r}"):
        parse_bound(text)


def test_bounded_spec_draws_inside_and_skips_examples_outside():
    """With n_q <= n_k every generated call has n_q <= n_k (and some n_q < n_k, where the two causal
    alignments differ); the worked example with more queries than keys is skipped by constraint."""
    spec, skipped = load_spec("specs/causal_attention.yaml").bounded((parse_bound("n_q<=n_k"),))
    assert skipped == ["example:more_queries_than_keys (n_q = 3, n_k = 2 break n_q <= n_k)"]
    assert [e.id for e in spec.worked_examples] == [
        "square_lower_triangle",
        "more_keys_than_queries",
        "scores_decide_the_weights",
        "future_key_with_huge_score",
    ]
    sizes = [
        legend_of(spec.contract, dict(zip(spec.contract.parameter_names, call.args.values(), strict=True)))
        for case in build_cases(spec, "float64")
        if case.kind == "property"
        for call in case.calls
    ]
    assert sizes and all(s["n_q"] <= s["n_k"] for s in sizes)
    assert sum(s["n_q"] < s["n_k"] for s in sizes) >= 10
    # without the bound the same properties draw n_q > n_k too
    free = load_spec("specs/causal_attention.yaml")
    assert any(
        np.shape(call.args["Q"])[-2] > np.shape(call.args["K"])[-2]
        for case in build_cases(free, "float64")
        for call in case.calls
    )


@pytest.mark.slow
def test_where_tries_a_kernel_inside_its_domain_and_names_its_alignment(gpt2):
    """GPT-2's causal slice fails every generated case by exception without --where; with
    --where n_q<=n_k its bottom-right alignment is named, and on a bottom-right spec it passes."""
    runner = CliRunner()
    args = ["test", "--spec", "specs/causal_attention.yaml", "--impl", gpt2, "--dtype", "float64"]
    plain = runner.invoke(main, args)
    assert plain.exit_code == 1 and "this kernel needs n_q <= n_k" in plain.output
    bounded = runner.invoke(main, [*args, "--where", "n_q<=n_k"])
    assert bounded.exit_code == 1
    assert (
        "causal_attention: skipped by constraint n_q <= n_k: example:more_queries_than_keys "
        "(n_q = 3, n_k = 2 break n_q <= n_k)" in bounded.output
    )
    assert "Known mistake (causal_wrong_alignment)" in bounded.output
    assert "raised ValueError" not in bounded.output


def test_where_on_a_bottom_right_spec_passes(gpt2, tmp_path):
    """The same kernel, on the alignment it implements and inside its domain, gets full marks."""
    doc = yaml.safe_load(open("specs/causal_attention.yaml", encoding="utf-8"))
    doc["function"]["contract"] = "causal_attention_bottom_right"
    doc["worked_examples"] = [e for e in doc["worked_examples"] if e["id"] in ("square_lower_triangle",)]
    doc["mistakes"] = [m for m in doc.get("mistakes", []) if m != "causal_wrong_alignment"] or None
    if doc["mistakes"] is None:
        del doc["mistakes"]
    doc["function"]["where"] = ["n_q <= n_k"]
    path = tmp_path / "bottom_right.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    result = CliRunner().invoke(main, ["test", "--spec", str(path), "--impl", gpt2, "--dtype", "float64"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "where, message",
    [
        pytest.param(
            "n_q<n", "--where: n_q < n: expected a shape symbol of contract causal_attention_top_left", id="s"
        ),
        pytest.param("n_q=n_k", "--where: expected SYMBOL OP SYMBOL or SYMBOL OP INTEGER", id="="),
    ],
)
def test_bad_where_is_a_usage_error(where, message):
    """A bad --where is one usage line, exit 2."""
    result = CliRunner().invoke(
        main,
        [
            "test",
            "--spec",
            "specs/causal_attention.yaml",
            "--impl",
            "attnscore.maths.reference:attention",
            "--where",
            where,
        ],
    )
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_spec_where_refuses_examples_outside_and_bad_bounds(tmp_path):
    """function.where in a spec: a worked example outside it and a bound naming an unknown symbol
    are located spec problems."""
    doc = yaml.safe_load(open("specs/causal_attention.yaml", encoding="utf-8"))
    doc["function"]["where"] = ["n_q <= n_k", "n_x < 3"]
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    text = str(err.value)
    assert "function.where[1]: n_x < 3: expected a shape symbol of contract causal_attention_top_left" in text
    assert (
        "worked_examples[2].inputs: expected shapes inside function.where, found n_q = 3, n_k = 2 break n_q <= n_k"
        in text
    )
    doc["function"]["where"] = ["n_q <= n_k", "d_k ~ 2"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError, match=r"function\.where\[1\]: expected text matching"):
        load_spec(path)
    doc["function"]["where"] = ["n_q <= n_k"]
    doc["worked_examples"] = [e for e in doc["worked_examples"] if e["id"] != "more_queries_than_keys"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    spec = load_spec(path)
    assert spec.contract.bounds == (Bound("n_q", "<=", "n_k"),)
    assert all(np.shape(c.args["Q"])[-2] <= np.shape(c.args["K"])[-2] for case in build_cases(spec) for c in case.calls)
