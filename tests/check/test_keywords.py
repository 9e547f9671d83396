"""Keyword passing (``function.keywords``, keyword and optional tensor parameters) and the SDPA specs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.catalogue.mistakes import get_mistake, mistakes_for
from attnscore.check.cases import build_cases
from attnscore.check.implementation import run_impl
from attnscore.check.verify import mutation_test, targeted_mistakes
from attnscore.maths.contracts import get_contract
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

SDPA = open("specs/sdpa.yaml", encoding="utf-8").read()
CAUSAL = open("specs/sdpa_causal.yaml", encoding="utf-8").read()


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return [str(p) for p in info.value.problems]


def test_keywords_are_loaded_and_configure_the_contract():
    """The spec's keywords become the contract's options; attn_mask stays a bool keyword parameter."""
    spec = load_spec("specs/sdpa.yaml")
    assert dict(spec.contract.options) == {"scale": 0.5, "enable_gqa": True}
    assert spec.contract.keyword_parameters == frozenset({"attn_mask"})
    assert spec.contract.bool_parameters == frozenset({"attn_mask"})
    assert spec.contract.parameters[1] == ("key", ("...", "h_kv", "n_k", "d_k"))
    causal = load_spec("specs/sdpa_causal.yaml")
    assert causal.parameter_names == ("query", "key", "value")
    assert dict(causal.contract.options) == {"is_causal": True}


def test_binding_passes_keywords_by_name():
    """The runners' positional call reaches the implementation with attn_mask and the keywords by name."""
    spec = load_spec("specs/sdpa.yaml")
    seen = {}

    def impl(query, key, value, **kw):
        seen.update(kw)
        return query

    spec.contract.binding(impl)(1, 2, 3, "mask")
    assert seen == {"attn_mask": "mask", "scale": 0.5, "enable_gqa": True}
    plain = get_contract("attention")
    assert plain.binding(impl) is impl


@pytest.mark.parametrize(
    "old, new, expected",
    [
        pytest.param(
            "keywords: {scale: 0.5, enable_gqa: true}",
            "keywords: {scale: 0.5, enable_gqa: true, softmax_scale: 2}",
            "function.keywords.softmax_scale: contract sdpa takes no keyword 'softmax_scale'; "
            "known: dropout_p, is_causal, scale, enable_gqa",
            id="unknown keyword",
        ),
        pytest.param(
            "keywords: {scale: 0.5, enable_gqa: true}",
            "keywords: {scale: -1, enable_gqa: true}",
            "function.keywords.scale: keyword scale: expected a number > 0, or null for the default, found number -1",
            id="negative scale",
        ),
        pytest.param(
            "keywords: {scale: 0.5, enable_gqa: true}",
            "keywords: {scale: 0.5, enable_gqa: 1}",
            "function.keywords.enable_gqa: keyword enable_gqa: expected true or false, found number 1",
            id="number for a bool keyword",
        ),
        pytest.param(
            "keywords: {scale: 0.5, enable_gqa: true}",
            "keywords: {scale: 0.5, enable_gqa: true, dropout_p: 0.1}",
            "function.keywords.dropout_p: keyword dropout_p: expected 0 (the reference is deterministic), "
            "found number 0.1",
            id="dropout",
        ),
        pytest.param(
            "keywords: {scale: 0.5, enable_gqa: true}",
            "keywords: {scale: [1], enable_gqa: true}",
            "function.keywords.scale:",
            id="list for a number (schema)",
        ),
        pytest.param(
            "keywords: {scale: 0.5, enable_gqa: true}",
            "keywords: {is_causal: true, enable_gqa: true}",
            "function.keywords: keyword is_causal: expected false when attn_mask is a parameter",
            id="is_causal with attn_mask",
        ),
    ],
)
def test_located_keyword_problems(tmp_path, old, new, expected):
    """Each bad keyword is one located problem naming what was expected and found."""
    assert old in SDPA
    found = problems(tmp_path, SDPA.replace(old, new, 1))
    assert any(expected in p for p in found), found
    assert all(p.startswith(str(tmp_path / "spec.yaml") + ":") for p in found)


def test_keywords_on_a_positional_contract(tmp_path):
    """A contract without keywords refuses any, located at the keyword."""
    text = open("specs/attention.yaml", encoding="utf-8").read()
    text = text.replace("  contract: attention\n", "  contract: attention\n  keywords: {scale: 0.5}\n", 1)
    found = problems(tmp_path, text)
    assert any("function.keywords.scale: contract attention takes no keyword 'scale'; known: none" in p for p in found)


def test_required_parameter_left_out(tmp_path):
    """Only optional parameters (attn_mask) may be left out."""
    text = CAUSAL.replace('    - {name: value, shape: ["...", n_k, d_v]}\n', "", 1)
    found = problems(tmp_path, text)
    want = "function.parameters: expected query (..., n_q, d_k), key (..., n_k, d_k), value (..., n_k, d_v)"
    assert any(want in p for p in found), found


def test_configured_refuses_a_required_parameter_left_out():
    """Contract.configured names the one parameter that may be left out."""
    with pytest.raises(ValueError, match="contract sdpa needs parameter value; only attn_mask may be left out"):
        get_contract("sdpa").configured({}, ("query", "key"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("path", ["specs/sdpa.yaml", "specs/sdpa_causal.yaml"])
def test_torch_sdpa_gets_full_marks(path, dtype):
    """PyTorch's own scaled_dot_product_attention gets full marks (--ratio 2 in half precision)."""
    spec = load_spec(path)
    if dtype in ("float16", "bfloat16"):
        import dataclasses

        from attnscore.maths.tolerance import Tolerance

        spec = dataclasses.replace(spec, tolerance=Tolerance(mode="ratio", factor=2.0))
    result = run_impl(spec, torch.nn.functional.scaled_dot_product_attention, dtype=dtype, shrink=False)
    assert result.score == result.max_score, [(c.id, c.verdict) for c in result.cases if not c.passed]


def test_gqa_heads_are_drawn_in_groups():
    """Generated grouped-query inputs have h_q a multiple of h_kv (else SDPA would refuse them)."""
    spec = load_spec("specs/sdpa.yaml")
    case = next(c for c in build_cases(spec, "float64") if c.id == "property:matches_reference")
    ratios = set()
    for call in case.calls:
        h_q, h_kv = call.args["query"].shape[-3], call.args["key"].shape[-3]
        assert h_q % h_kv == 0
        ratios.add(h_q // h_kv)
    assert len(ratios) > 1


@pytest.mark.parametrize(
    "path, mistake",
    [
        ("specs/sdpa.yaml", "sdpa_scale_ignored"),
        ("specs/sdpa.yaml", "sdpa_bool_mask_inverted"),
        ("specs/sdpa.yaml", "kv_heads_tiled"),
        ("specs/sdpa_causal.yaml", "sdpa_causal_bottom_right"),
        ("specs/sdpa_causal.yaml", "sdpa_is_causal_ignored"),
    ],
)
def test_sdpa_mistakes_diagnosed_as_themselves(path, mistake):
    """Each SDPA mistake is targeted by its spec, caught and named by the diagnosis (float32)."""
    spec = load_spec(path)
    assert mistake in [m.id for m in targeted_mistakes(spec)]
    spec_one = spec.__class__(**{**spec.__dict__, "mistakes": (mistake,)})
    (result,) = mutation_test(spec_one, dtype="float32")
    assert result.caught and result.diagnosed, result


def test_mistakes_follow_the_keywords():
    """Which SDPA mistakes apply depends on the spec's keywords, not the contract's name."""
    gqa = {m.id for m in mistakes_for(load_spec("specs/sdpa.yaml").contract)}
    causal = {m.id for m in mistakes_for(load_spec("specs/sdpa_causal.yaml").contract)}
    assert {"sdpa_scale_ignored", "sdpa_bool_mask_inverted", "kv_heads_tiled"} <= gqa
    assert not {"sdpa_causal_bottom_right", "sdpa_is_causal_ignored"} & gqa
    assert {"sdpa_causal_bottom_right", "sdpa_is_causal_ignored"} <= causal
    assert not {"sdpa_scale_ignored", "sdpa_bool_mask_inverted", "kv_heads_tiled"} & causal


def test_kv_heads_tiled_value():
    """The tiled mistake gives h0 h1 h0 h1 where SDPA gives h0 h0 h1 h1."""
    spec = load_spec("specs/sdpa.yaml")
    q = torch.ones(4, 1, 1)
    k = torch.ones(2, 1, 1)
    v = torch.tensor([[[10.0]], [[20.0]]])
    m = torch.ones(4, 1, 1, dtype=torch.bool)
    wrong = get_mistake("kv_heads_tiled").bind(spec.contract, spec)(q, k, v, m)
    right = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.5, enable_gqa=True)
    assert wrong.ravel().tolist() == [10.0, 20.0, 10.0, 20.0]
    assert right.ravel().tolist() == [10.0, 10.0, 20.0, 20.0]
    assert np.allclose(
        spec.contract.golden({"query": q, "key": k, "value": v, "attn_mask": m}).ravel(), [10, 10, 20, 20]
    )
