"""SDPA with a float attn_mask (the ``sdpa_float_mask`` contract and specs/sdpa_float_mask.yaml): the
mask added after the scale, -inf entries and rows, generated masks, the error bounds with the bias,
the properties and the catalogued mistakes; PyTorch's own SDPA gets full marks in four dtypes."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnscore.boundary.outputs import to_received
from attnscore.catalogue.mistakes import get_mistake, mistakes_for
from attnscore.catalogue.properties import CheckContext, get_property
from attnscore.check.cases import build_cases
from attnscore.check.diagnosis import confirmation_args
from attnscore.check.implementation import run_impl
from attnscore.check.verify import mutation_test, targeted_mistakes
from attnscore.cli import main
from attnscore.maths.contracts import get_contract
from attnscore.maths.family import ContractFamily
from attnscore.maths.strategies import draw_examples, random_args
from attnscore.maths.tolerance import Tolerance
from attnscore.spec.load import load_spec

SPEC = "specs/sdpa_float_mask.yaml"
FLOAT_MISTAKES = (
    "sdpa_float_mask_before_scale",
    "sdpa_float_mask_as_bool",
    "sdpa_float_mask_subtracted",
    "sdpa_float_mask_ignored",
    "sdpa_float_mask_nan_rows",
)
INF = math.inf


def _sdpa(query, key, value, **kw):
    return torch.nn.functional.scaled_dot_product_attention(query, key, value, **kw)


@pytest.mark.slow
def test_contract_takes_a_float_mask_by_name():
    """attn_mask is an additive float parameter (cast like Q, K, V), passed by name; the bool contract is unchanged."""
    c = get_contract("sdpa_float_mask")
    assert c.family is ContractFamily.SDPA and c.additive_parameters == frozenset({"attn_mask"})
    assert c.bool_parameters == frozenset() and c.keyword_parameters == frozenset({"attn_mask"})
    assert get_contract("sdpa").bool_parameters == frozenset({"attn_mask"})
    assert get_contract("sdpa").additive_parameters == frozenset()
    spec = load_spec(SPEC)
    assert spec.contract.name == "sdpa_float_mask" and dict(spec.contract.options) == {}
    cases = build_cases(spec, "bfloat16")
    first = next(case for case in cases if case.id == "example:bias_changes_weights")
    mask = first.calls[0].args["attn_mask"]
    assert mask.dtype == np.float32  # bfloat16 values, stored as float32, like the query's
    assert mask[0, 1] == pytest.approx(1.0986, abs=2**-7)  # ln 3 rounded to bfloat16
    seen = []

    def spy(query, key, value, attn_mask=None):
        seen.append((attn_mask.dtype, query.dtype))
        return _sdpa(query, key, value, attn_mask=attn_mask)

    run_impl(spec, spy, dtype="float16", shrink=False)
    assert (torch.float16, torch.float16) in seen and all(mask == query for mask, query in seen)


def test_reference_adds_the_mask_after_the_scale():
    """softmax(Q Kᵀ/√d_k + m) V by hand: scores [1, 0] plus [0, 1] are equal, output 1 (not 0.7551)."""
    q = torch.tensor([[2.0, 0, 0, 0]], dtype=torch.float64)
    k = torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.float64)
    v = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    c = get_contract("sdpa_float_mask")
    out = c.binding(c.reference)(q, k, v, torch.tensor([[0.0, 1.0]], dtype=torch.float64))
    assert out.item() == pytest.approx(1.0, abs=1e-15)
    blank = c.binding(c.reference)(q, k, v, torch.tensor([[-INF, -INF]], dtype=torch.float64))
    assert blank.tolist() == [[0.0]]


def test_generated_masks_hold_biases_minus_inf_and_blank_rows():
    """matches_reference's inputs hold negative and positive biases, -inf entries and whole rows of -inf."""
    c = load_spec(SPEC).contract
    masks = [np.asarray(a["attn_mask"]) for a in draw_examples(random_args(c, 10.0), 60, seed=7)]
    entries = np.concatenate([m.ravel() for m in masks])
    assert (entries < 0).any() and (entries > 0).any() and np.isfinite(entries).any()
    assert np.isneginf(entries).mean() > 0.1
    assert not np.isnan(entries).any() and not np.isposinf(entries).any()
    blank_rows = sum(int(np.isneginf(m).all(axis=-1).sum()) for m in masks if m.size)
    partial_rows = sum(int((np.isneginf(m).any(axis=-1) & ~np.isneginf(m).all(axis=-1)).sum()) for m in masks)
    assert blank_rows >= 5 and partial_rows >= 5


def test_confirmation_masks_part_every_float_mask_mistake():
    """The diagnosis's confirmation masks: every row has a finite entry; the even rows a -inf one and
    the odd rows none (a subtracted mask stays finite there); zeros and non-zeros occur."""
    for args in confirmation_args(load_spec(SPEC)):
        mask = args["attn_mask"]
        assert mask.dtype == np.float64
        rows = mask.reshape(-1, mask.shape[-1])
        assert np.isfinite(rows).any(axis=-1).all()
        assert np.isneginf(rows[0::2]).any(axis=-1).all() and not np.isneginf(rows[1::2]).any()
        assert (mask == 0).any() and ((mask != 0) & np.isfinite(mask)).any()


def test_error_bound_counts_the_bias():
    """The bound grows with the bias's magnitude; a -inf key adds nothing, whatever its key and value hold."""
    c = load_spec(SPEC).contract
    q = np.array([[1.0, 2.0]])
    k = np.array([[1.0, 1.0], [2.0, -1.0]])
    v = np.array([[1.0], [3.0]])

    def bound(mask, key=k, value=v):
        return float(c.error_scale({"query": q, "key": key, "value": value, "attn_mask": np.array([mask])})[1].max())

    assert bound([0.0, 0.0]) < bound([40.0, 40.0]) < bound([400.0, 400.0])
    huge_k, huge_v = np.array([[1.0, 1.0], [1e6, 1e6]]), np.array([[1.0], [1e6]])
    assert bound([0.0, -INF], huge_k, huge_v) == bound([0.0, -INF])
    low = c.low_precision_terms({"query": q, "key": k, "value": v, "attn_mask": np.array([[40.0, 40.0]])}, "bfloat16")
    low0 = c.low_precision_terms({"query": q, "key": k, "value": v, "attn_mask": np.array([[0.0, 0.0]])}, "bfloat16")
    assert float(np.max(low.rounding)) > float(np.max(low0.rounding))


@pytest.mark.parametrize(
    ("example", "mistake", "wrong"),
    [
        pytest.param("bias_changes_weights", "sdpa_float_mask_as_bool", [4.0], id="as bool drops the 0 entry"),
        pytest.param("bias_changes_weights", "sdpa_float_mask_subtracted", [1.0], id="subtracted"),
        pytest.param("bias_changes_weights", "sdpa_float_mask_ignored", [2.0], id="ignored"),
        pytest.param(
            "bias_changes_weights", "sdpa_float_mask_before_scale", [4 * 3**0.5 / (1 + 3**0.5)], id="before scale"
        ),
        pytest.param("mask_added_after_scale", "sdpa_float_mask_before_scale", [2 / (1 + math.exp(0.5))], id="0.7551"),
        pytest.param("minus_inf_masks_a_huge_score", "sdpa_float_mask_as_bool", [2.0], id="-inf kept as bool"),
        pytest.param("minus_inf_masks_a_huge_score", "sdpa_float_mask_ignored", [2.0], id="huge score wins"),
        pytest.param("minus_inf_masks_a_huge_score", "sdpa_float_mask_subtracted", [math.nan], id="+inf gives NaN"),
        pytest.param("fully_masked_query_is_zero", "sdpa_float_mask_nan_rows", [1.0, math.nan], id="NaN row"),
    ],
)
def test_mistake_values_on_the_worked_examples(example, mistake, wrong):
    """Each mistake gives the value its worked example's explanation names; the reference gives the expected one."""
    spec = load_spec(SPEC)
    ex = next(e for e in spec.worked_examples if e.id == example)
    args = tuple(torch.tensor(np.asarray(ex.inputs[n], dtype=float)) for n in spec.parameter_names)
    got = get_mistake(mistake).bind(spec.contract, spec)(*args).double().ravel().numpy()
    np.testing.assert_allclose(got, wrong, atol=1e-12)
    right = spec.contract.binding(spec.contract.reference)(*args)
    np.testing.assert_allclose(right.ravel().numpy(), np.ravel(ex.expected), atol=1e-12)


def test_float_mask_mistakes_target_only_the_float_spec():
    """The float-mask mistakes apply to sdpa_float_mask, the bool-mask one to sdpa only."""
    float_ids = {m.id for m in mistakes_for(load_spec(SPEC).contract)}
    bool_ids = {m.id for m in mistakes_for(load_spec("specs/sdpa.yaml").contract)}
    assert set(FLOAT_MISTAKES) <= float_ids and "sdpa_bool_mask_inverted" not in float_ids
    assert not set(FLOAT_MISTAKES) & bool_ids and "sdpa_bool_mask_inverted" in bool_ids
    assert set(FLOAT_MISTAKES) <= {m.id for m in targeted_mistakes(load_spec(SPEC))}


@pytest.mark.slow
@pytest.mark.parametrize("mistake", FLOAT_MISTAKES)
def test_float_mask_mistakes_diagnosed_as_themselves(mistake):
    """Each float-mask mistake is caught by the spec and named by the diagnosis (float32)."""
    spec = load_spec(SPEC)
    (result,) = mutation_test(dataclasses.replace(spec, mistakes=(mistake,)), dtype="float32")
    assert result.caught and result.diagnosed, result


def _check(spec, prop_name, example, fn):
    """The property's own check on the outputs ``fn`` gives for its calls of ``example`` (float64)."""
    prop = get_property(prop_name)
    calls = prop.calls(spec.contract, example)
    tensors = [tuple(torch.tensor(np.asarray(a[n], dtype=float)) for n in spec.parameter_names) for a in calls]
    goldens = [spec.contract.golden(a) for a in calls]
    ctx = CheckContext(
        outputs=[to_received(fn(*t)) for t in tensors],
        args=calls,
        goldens=goldens,
        allowed=[np.full(np.shape(g), 1e-9) for g in goldens],
        inspections=[None] * len(calls),
        dtype="float64",
        device="cpu",
        contract=spec.contract,
        example=example,
    )
    return prop.check(ctx)


ARGS = {
    "query": np.array([[1.0, 2.0], [0.5, -1.0]]),
    "key": np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
    "value": np.array([[1.0], [2.0], [4.0]]),
    "attn_mask": np.array([[0.0, -1.0, 2.0], [-INF, 0.5, 0.0]]),
}


@pytest.mark.parametrize(
    ("prop", "example", "mistake", "words"),
    [
        pytest.param("float_mask_row_shift", (ARGS, [3, -2]), "sdpa_float_mask_as_bool", "constant", id="shift"),
        pytest.param("float_mask_row_shift", (ARGS, [1, 1]), "sdpa_float_mask_as_bool", "constant", id="shift by 1"),
        pytest.param(
            "float_mask_neg_inf_keys_unused", (ARGS, 1), "sdpa_float_mask_as_bool", "takes no part", id="-inf as bool"
        ),
        pytest.param(
            "float_mask_neg_inf_keys_unused", (ARGS, 2), "sdpa_float_mask_ignored", "takes no part", id="-inf ignored"
        ),
    ],
)
def test_relational_properties_fail_on_their_mistake(prop, example, mistake, words):
    """Each float-mask property fails on a mistake it is about, saying why, and holds on the reference and on SDPA."""
    spec = load_spec(SPEC)
    message = _check(spec, prop, example, get_mistake(mistake).bind(spec.contract, spec))
    assert message is not None and words in message, message
    assert _check(spec, prop, example, spec.contract.binding(spec.contract.reference)) is None
    assert _check(spec, prop, example, lambda q, k, v, m: _sdpa(q, k, v, attn_mask=m)) is None


@pytest.mark.slow
@pytest.mark.parametrize("path", [SPEC, "specs/sdpa.yaml", "specs/sdpa_causal.yaml"])
def test_pytorch_sdpa_gets_full_marks_in_four_dtypes(path):
    """`attnscore test --impl torch.nn.functional:scaled_dot_product_attention`: full marks in float32 and
    float64, and in float16 and bfloat16 with --ratio 2."""
    impl = ["test", "--impl", "torch.nn.functional:scaled_dot_product_attention", "--spec", path]
    runner = CliRunner()
    full = runner.invoke(main, [*impl, "--dtype", "float32", "--dtype", "float64"])
    half = runner.invoke(main, [*impl, "--dtype", "float16", "--dtype", "bfloat16", "--ratio", "2"])
    for result, dtypes in ((full, ("float32", "float64")), (half, ("float16", "bfloat16"))):
        assert result.exit_code == 0, result.output
        scores = [line.split()[1] for line in result.output.splitlines() if line.startswith("Score: ")]
        assert len(scores) == 2, result.output
        for score in scores:
            got, total = score.split("/")
            assert got == total and int(total) > 10, score
        for dtype in dtypes:
            assert f"in {dtype} on cpu" in result.output


GQA_EXAMPLE = """worked_examples:
  - id: two_heads_one_kv_head
    title: two query heads over one KV head, each with its own mask row
    inputs:
      query: [[[2, 0, 0, 0]], [[2, 0, 0, 0]]]
      key: [[[1, 0, 0, 0], [1, 0, 0, 0]]]
      value: [[[0], [4]]]
      attn_mask: [[[0, 1.0986122886681098]], [[0, 0]]]
    expected: [[[3]], [[2]]]
    explanation: Equal scores 0.6; head 0 lowers key 0 by ln 3 relative to key 1 (weights 1/4, 3/4), head 1 does not.
    points: 1
"""


def _keyword_spec(tmp_path):
    """specs/sdpa_float_mask.yaml with scale 0.3 and enable_gqa (heads axes explicit), one GQA worked example."""
    text = open(SPEC, encoding="utf-8").read().replace("id: sdpa_float_mask", "id: sdpa_float_mask_gqa")
    text = text.replace(
        "  contract: sdpa_float_mask\n", "  contract: sdpa_float_mask\n  keywords: {scale: 0.3, enable_gqa: true}\n"
    )
    for old, new in (("n_q, d_k", "h_q, n_q, d_k"), ("n_k, d_k", "h_kv, n_k, d_k"), ("n_k, d_v", "h_kv, n_k, d_v")):
        text = text.replace(f'["...", {old}]', f'["...", {new}]')
    text = text.replace('["...", n_q, n_k]', '["...", h_q, n_q, n_k]').replace(
        '["...", n_q, d_v]', '["...", h_q, n_q, d_v]'
    )
    head, rest = text.split("worked_examples:\n", 1)
    path = tmp_path / "sdpa_float_mask_gqa.yaml"
    path.write_text(head + GQA_EXAMPLE + rest[rest.index("properties:") :], encoding="utf-8")
    return load_spec(path)


@pytest.mark.slow
def test_float_mask_with_scale_and_grouped_heads(tmp_path):
    """The float-mask contract with keywords (scale 0.3, enable_gqa): SDPA gets full marks, and the scale and
    KV-head mistakes apply, are caught and named beside the float-mask ones."""
    spec = _keyword_spec(tmp_path)
    assert dict(spec.contract.options) == {"enable_gqa": True, "scale": 0.3}
    assert dict(spec.contract.parameters)["attn_mask"] == ("...", "h_q", "n_q", "n_k")
    ids = {m.id for m in targeted_mistakes(spec)}
    assert {"sdpa_scale_ignored", "kv_heads_tiled", "kv_head_zero_for_all", *FLOAT_MISTAKES} <= ids
    for dtype in ("float32", "bfloat16"):
        used = spec if dtype == "float32" else dataclasses.replace(spec, tolerance=Tolerance("ratio", factor=2.0))
        result = run_impl(used, _sdpa, dtype=dtype, shrink=False)
        assert result.all_passed, {c.id: c.message for c in result.cases if c.points < c.max_points}
    for mistake in ("kv_heads_tiled", "sdpa_scale_ignored", "sdpa_float_mask_before_scale"):
        (result,) = mutation_test(dataclasses.replace(spec, mistakes=(mistake,)), dtype="float32")
        assert result.caught and result.diagnosed, result
