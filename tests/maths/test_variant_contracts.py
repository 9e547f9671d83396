"""The kernel variant specs (gqa, softcap, alibi) on the ``kernel_attention`` contract: keywords,
worked values, relational properties and the catalogued mistakes (attnscore.maths.families.sdpa and kernel_attention,
attnscore.catalogue.mistakes.variants, attnscore.catalogue.properties.variants)."""

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
from attnscore.check.implementation import run_impl
from attnscore.check.verify import mutation_test, targeted_mistakes
from attnscore.cli import main
from attnscore.maths.contracts import get_contract
from attnscore.maths.families.kernel_attention import KernelOptions, kernel_attention_error
from attnscore.spec.load import load_spec
from examples.impl.kernel_attention import kernel_attention

SPECS = ("specs/gqa.yaml", "specs/softcap.yaml", "specs/alibi.yaml")


def test_specs_configure_the_kernel_contract():
    """Each spec fixes its flags as keywords; alibi_slopes is a by-name parameter of the alibi spec only."""
    gqa, softcap, alibi = (load_spec(p) for p in SPECS)
    assert dict(gqa.contract.options) == {} and gqa.parameter_names == ("query", "key", "value")
    assert dict(gqa.contract.parameters)["key"] == ("...", "h_kv", "n_k", "d_k")
    assert dict(softcap.contract.options) == {"softcap": 2.0, "is_causal": True}
    assert dict(softcap.contract.parameters)["key"] == ("...", "h_q", "n_k", "d_k")
    assert alibi.contract.keyword_parameters == frozenset({"alibi_slopes"})
    assert dict(alibi.contract.parameters)["alibi_slopes"] == ("h_q",)


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS)
def test_kernel_with_keyword_flags_gets_full_marks(path):
    """A plain-torch kernel taking the flags by name gets every point of each spec (float32 and float64)."""
    spec = load_spec(path)
    seen: list[dict[str, object]] = []

    def impl(query, key, value, alibi_slopes=None, **flags):
        seen.append({**flags, "alibi": alibi_slopes is not None})
        return kernel_attention(query, key, value, alibi_slopes, **flags)

    for dtype in ("float32", "float64"):
        result = run_impl(spec, impl, dtype=dtype, shrink=False)
        assert result.all_passed, {c.id: c.message for c in result.cases if c.points < c.max_points}
    assert {**seen[0], "alibi": False} == {**dict(spec.contract.options), "alibi": False}
    assert seen[0]["alibi"] is (path == "specs/alibi.yaml")


@pytest.mark.slow
def test_cli_test_passes_the_spec_keywords():
    """`attnscore test --impl ... --spec specs/softcap.yaml` calls the kernel with softcap=2.0, is_causal=True."""
    result = CliRunner().invoke(
        main,
        ["test", "--impl", "examples.impl.kernel_attention:kernel_attention", "--spec", "specs/softcap.yaml"],
    )
    assert result.exit_code == 0, result.output
    assert "Score: 18/18" in result.output and "in float32 on cpu" in result.output


def _args(spec, example_id):
    ex = next(e for e in spec.worked_examples if e.id == example_id)
    dtype = {n: torch.bool if np.asarray(v).dtype == bool else torch.float64 for n, v in ex.inputs.items()}
    return tuple(torch.tensor(np.asarray(v, dtype=float), dtype=dtype[n]) for n, v in ex.inputs.items()), ex


@pytest.mark.parametrize(
    ("path", "example", "mistake", "wrong"),
    [
        pytest.param("specs/gqa.yaml", "grouped_heads", "kv_heads_tiled", [10, 20, 10, 20], id="tiled heads"),
        pytest.param("specs/gqa.yaml", "grouped_heads", "kv_head_zero_for_all", [10, 10, 10, 10], id="head zero"),
        pytest.param(
            "specs/softcap.yaml",
            "masked_key_stays_masked",
            "softcap_after_mask",
            [1 + 2 / (math.e**2 + 1), 2],
            id="softcap after the mask",
        ),
        pytest.param(
            "specs/softcap.yaml",
            "moderate_score_is_capped",
            "softcap_scale_twice",
            [1 / (1 + math.exp(-math.tanh(0.5)))],
            id="scale twice",
        ),
        pytest.param(
            "specs/softcap.yaml",
            "moderate_score_is_capped",
            "softcap_scale_after",
            [1 / (1 + math.exp(-math.tanh(1.0)))],
            id="scale after the cap",
        ),
        pytest.param(
            "specs/softcap.yaml", "large_score_saturates", "softcap_ignored", [1 / (1 + math.exp(-8))], id="no cap"
        ),
        pytest.param(
            "specs/alibi.yaml",
            "distance_is_penalised",
            "alibi_wrong_sign",
            [1 / (1 + math.exp(-1)), 1 / (1 + math.e)],
            id="wrong sign",
        ),
        pytest.param(
            "specs/alibi.yaml",
            "distance_is_penalised",
            "alibi_signed_distance",
            [1 / (1 + math.exp(-1)), 1 / (1 + math.exp(-1))],
            id="signed distance",
        ),
        pytest.param(
            "specs/alibi.yaml",
            "distance_is_penalised",
            "alibi_bias_scaled",
            [1 / (1 + math.exp(0.5)), 1 / (1 + math.exp(-0.5))],
            id="bias scaled",
        ),
        pytest.param(
            "specs/alibi.yaml",
            "bias_added_to_scaled_scores",
            "alibi_top_left",
            [1 / (1 + math.exp(-4))],
            id="top-left distance",
        ),
        pytest.param(
            "specs/softcap.yaml", "causal_is_bottom_right", "kernel_causal_top_left", [1.0], id="causal top-left"
        ),
    ],
)
def test_mistake_values_on_the_worked_examples(path, example, mistake, wrong):
    """Each mistake gives the wrong value its worked example's explanation names; the reference does not."""
    spec = load_spec(path)
    args, ex = _args(spec, example)
    got = get_mistake(mistake).bind(spec.contract, spec)(*args)
    assert np.allclose(got.double().ravel().numpy(), wrong, atol=1e-12)
    assert not np.allclose(np.ravel(ex.expected), wrong, atol=1e-6)
    right = spec.contract.reference(*args[:3], *args[3:])
    assert np.allclose(right.ravel().numpy(), np.ravel(ex.expected), atol=1e-12)


MISTAKES = [
    ("specs/gqa.yaml", "kv_heads_tiled"),
    ("specs/gqa.yaml", "kv_head_zero_for_all"),
    ("specs/softcap.yaml", "softcap_ignored"),
    ("specs/softcap.yaml", "softcap_after_mask"),
    ("specs/softcap.yaml", "softcap_scale_twice"),
    ("specs/softcap.yaml", "softcap_scale_after"),
    ("specs/softcap.yaml", "kernel_causal_top_left"),
    ("specs/alibi.yaml", "alibi_wrong_sign"),
    ("specs/alibi.yaml", "alibi_signed_distance"),
    ("specs/alibi.yaml", "alibi_top_left"),
    ("specs/alibi.yaml", "alibi_bias_scaled"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("path", "mistake"), MISTAKES)
def test_variant_mistakes_diagnosed_as_themselves(path, mistake):
    """Each mistake is targeted by its spec, caught and named by the diagnosis (float32)."""
    spec = load_spec(path)
    assert mistake in [m.id for m in targeted_mistakes(spec)]
    (result,) = mutation_test(dataclasses.replace(spec, mistakes=(mistake,)), dtype="float32")
    assert result.caught and result.diagnosed, result


def test_mistakes_follow_the_spec():
    """Which kernel mistakes apply follows the spec's keywords and parameters."""
    ids = {p: {m.id for m in mistakes_for(load_spec(p).contract)} for p in SPECS}
    assert {"kv_heads_tiled", "kv_head_zero_for_all"} <= ids["specs/gqa.yaml"]
    assert not {"kv_heads_tiled", "softcap_ignored", "alibi_wrong_sign"} & ids["specs/alibi.yaml"] - {
        "alibi_wrong_sign"
    }
    assert {"softcap_after_mask", "softcap_scale_twice"} <= ids["specs/softcap.yaml"]
    assert not {"alibi_wrong_sign", "kv_heads_tiled"} & ids["specs/softcap.yaml"]
    assert {"alibi_wrong_sign", "alibi_top_left", "alibi_signed_distance"} <= ids["specs/alibi.yaml"]


def _check(spec, prop_name, example, fn):
    """The property's own check on the outputs ``fn`` gives for its calls of ``example``."""
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


ONES = np.ones((4, 2, 2))
ROWS = np.arange(16.0).reshape(2, 2, 4) / 8


@pytest.mark.parametrize(
    ("path", "prop", "example", "mistake", "words"),
    [
        pytest.param(
            "specs/gqa.yaml",
            "gqa_equals_repeated_kv",
            {"query": ROWS.repeat(2, axis=0), "key": ROWS, "value": np.arange(8.0).reshape(2, 2, 2)},
            "kv_heads_tiled",
            "query head 1 must use key/value head 0",
            id="gqa property",
        ),
        pytest.param(
            "specs/softcap.yaml",
            "softcap_bounds_scores",
            {"query": ROWS[:1], "key": ROWS[:1] + 1, "value": ROWS[:1, :, :1]},
            "softcap_ignored",
            "not kept within ±2",
            id="softcap property",
        ),
        pytest.param(
            "specs/alibi.yaml",
            "bottom_right_suffix_queries",
            (
                {
                    "query": ROWS[:1],
                    "key": np.zeros((1, 3, 4)),
                    "value": np.arange(3.0).reshape(1, 3, 1),
                    "alibi_slopes": np.ones(1),
                },
                1,
            ),
            "alibi_top_left",
            "aligned bottom-right",
            id="suffix property",
        ),
    ],
)
def test_relational_properties_fail_on_their_mistake(path, prop, example, mistake, words):
    """The relational property's check fails on the mistake it is about, saying why in its own terms,
    and holds on the reference."""
    spec = load_spec(path)
    wrong = get_mistake(mistake).bind(spec.contract, spec)
    message = _check(spec, prop, example, wrong)
    assert message is not None and words in message, message
    assert _check(spec, prop, example, spec.contract.reference) is None


def test_softcap_error_bound_vanishes_when_saturated():
    """The cap's slope carries the product's error: a saturated score adds only the cap's own roundings."""
    q = np.array([[[1000.0, 0, 0, 0]]])
    k = np.array([[[1000.0, 0, 0, 0], [0, 0, 0, 0]]])
    v = np.array([[[1.0], [0.0]]])
    args = {"query": q, "key": k, "value": v}
    _, capped = kernel_attention_error(args, KernelOptions(softcap=2.0))
    _, plain = kernel_attention_error(args, KernelOptions())
    assert capped.shape == (1, 1, 1)
    assert capped[0, 0, 0] < 100 < plain[0, 0, 0]


def test_reference_signature_takes_flags_by_name():
    """The configured reference is called as the spec calls an implementation: flags by name."""
    c = get_contract("kernel_attention").configured({"softcap": 2.0}, ("query", "key", "value"))
    q = torch.tensor([[[1.0, 0, 0, 0]]], dtype=torch.float64)
    k = torch.tensor([[[2.0, 0, 0, 0], [0, 0, 0, 0]]], dtype=torch.float64)
    v = torch.tensor([[[1.0], [0.0]]], dtype=torch.float64)
    out = c.binding(c.reference)(q, k, v)
    assert out.item() == pytest.approx(1 / (1 + math.exp(-2 * math.tanh(0.5))), abs=1e-12)


def test_alibi_slopes_per_batch_item_are_taken():
    """A kernel that only takes slopes of shape (h,) loses the per-batch-and-head property, and only it."""
    spec = load_spec("specs/alibi.yaml")

    def per_head_only(query, key, value, alibi_slopes=None, **flags):
        if alibi_slopes.ndim != 1:
            raise ValueError(f"expected alibi_slopes of shape (h,), found {tuple(alibi_slopes.shape)}")
        return kernel_attention(query, key, value, alibi_slopes, **flags)

    result = run_impl(spec, per_head_only, dtype="float64", shrink=False)
    lost = {c.id: c.verdict.value for c in result.cases if c.points < c.max_points}
    assert lost == {"property:alibi_slopes_per_batch": "exception"}
    batch = np.stack([ROWS, ROWS + 1])  # (2, 2, 2, 4): two batch items, two heads
    example = {"query": batch, "key": batch, "value": batch, "alibi_slopes": np.array([1.0, 0.5])}
    assert _check(spec, "alibi_slopes_per_batch", example, spec.contract.reference) is None

    def read_as_head_by_batch(q, k, v, s):  # (batch, h) slopes read as (h, batch)
        return kernel_attention(q, k, v, s if s.ndim == 1 else s.mT.reshape(s.shape))

    message = _check(spec, "alibi_slopes_per_batch", example, read_as_head_by_batch)
    assert message is not None and "alibi_slopes[b, h]" in message, message


def test_causal_top_left_targets_the_causal_kernel_specs_only():
    """kernel_causal_top_left applies where is_causal is set (softcap.yaml), not to gqa or alibi (no causal flag)."""
    for path in SPECS:
        ids = {m.id for m in mistakes_for(load_spec(path).contract)}
        assert ("kernel_causal_top_left" in ids) is (path == "specs/softcap.yaml"), path
    flags = get_contract("kernel_attention").configured({"is_causal": True}, ("query", "key", "value"))
    assert "kernel_causal_top_left" in {m.id for m in mistakes_for(flags)}
