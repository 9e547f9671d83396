"""A spec states the interface a course states: named leading dims (an exact rank), masks in full
shape, optional masks (attnscore.spec.interface, attnscore.spec.examples, attnscore.maths.strategies)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnscore.check.cases import build_cases
from attnscore.check.diagnosis import confirmation_args
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SPEC = ROOT / "examples" / "specs" / "attention_batched.yaml"

ATTENTION = """\
format: attnscore-spec/1
id: batched
version: 1
title: batched attention
function:
  name: attention
  contract: attention
  parameters:
    - {name: Q, shape: [batch, n_q, d_k]}
    - {name: K, shape: [batch, n_k, d_k]}
    - {name: V, shape: [batch, n_k, d_v]}
    - {name: mask, shape: [batch, n_q, n_k]}
  returns:
    shape: [batch, n_q, d_v]
worked_examples:
  - id: two_keys
    inputs:
      Q: [[[1, 0]]]
      K: [[[1, 0], [0, 1]]]
      V: [[[1], [3]]]
      mask: [[[true, true]]]
    expected: [[[1.6604769013466862]]]
    explanation: scores [1, 0] / √2, weights [0.6698, 0.3302]
    points: 1
properties:
  - {name: matches_reference, points: 1, examples: 12, statement: matches}
  - {name: non_contiguous_inputs, points: 1, examples: 6, statement: views}
"""

SCORES = """\
format: attnscore-spec/1
id: batched_scores
version: 1
title: batched score matrix
function:
  name: score_matrix
  contract: score_matrix
  parameters:
    - {name: Q, shape: [batch, heads, n_q, d_k]}
    - {name: K, shape: [batch, heads, n_k, d_k]}
  returns:
    shape: [batch, heads, n_q, n_k]
worked_examples:
  - id: one
    inputs:
      Q: [[[[1, 0]]]]
      K: [[[[1, 0], [0, 1]]]]
    expected: [[[[1, 0]]]]
    explanation: aligned, then perpendicular
    points: 1
properties:
  - {name: equals_qk_entries, points: 1, examples: 10, statement: entries}
  - {name: batch_items_independent, points: 1, examples: 10, statement: items}
"""


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text))
    return str(info.value)


def test_named_leading_dims_fix_the_rank(tmp_path):
    """[batch, n_q, d_k] names one leading dim: the contract keeps its legend and records the names."""
    spec = load_spec(write(tmp_path, ATTENTION))
    assert spec.contract.leading == ("batch",)
    assert spec.contract.declared_shape("Q") == ("batch", "n_q", "d_k")
    assert spec.contract.declared_shape("returns") == ("batch", "n_q", "d_v")
    assert spec.contract.full_masks == frozenset({"mask"})  # a mask naming the dims comes in full shape
    assert spec.contract.omittable == frozenset()
    assert dict(spec.contract.parameters)["Q"] == ("...", "n_q", "d_k")


def test_open_leading_dims_are_unchanged():
    """The bundled attention spec keeps "...": no named dims, no full-shape or optional mask."""
    contract = load_spec(ROOT / "specs" / "attention.yaml").contract
    assert (contract.leading, contract.full_masks, contract.omittable) == (None, frozenset(), frozenset())


def test_an_exact_rank_without_leading_dims(tmp_path):
    """[n_q, d_k] in place of ["...", n_q, d_k] states inputs without any leading dim."""
    text = SCORES.replace("[batch, heads, n_q, d_k]", "[n_q, d_k]").replace("[batch, heads, n_k, d_k]", "[n_k, d_k]")
    text = text.replace("[batch, heads, n_q, n_k]", "[n_q, n_k]").replace("[[[[1, 0]]]]", "[[1, 0]]")
    text = text.replace("[[[[1, 0], [0, 1]]]]", "[[1, 0], [0, 1]]")
    text = text.replace("  - {name: batch_items_independent, points: 1, examples: 10, statement: items}\n", "")
    spec = load_spec(write(tmp_path, text))
    assert spec.contract.leading == ()
    for case in build_cases(spec, "float64"):
        assert {call.args["Q"].ndim for call in case.calls} == {2}, case.id


@pytest.mark.parametrize(
    "old, new, message",
    [
        pytest.param("{name: K, shape: [batch, n_k, d_k]}", "{name: K, shape: [heads, n_k, d_k]}",
                     "expected the leading dims [batch] as Q names them, found [heads]", id="another name"),
        pytest.param("{name: K, shape: [batch, n_k, d_k]}", '{name: K, shape: ["...", n_k, d_k]}',
                     "expected the leading dims [batch] as Q names them, found ...", id="K keeps the open dims"),
        pytest.param("    shape: [batch, n_q, d_v]", "    shape: [batch, heads, n_q, d_v]",
                     "function.returns.shape: expected the leading dims [batch] as Q names them, found [batch, heads]",
                     id="the result names more dims"),
        pytest.param("{name: Q, shape: [batch, n_q, d_k]}", "{name: Q, shape: [n_k, n_q, d_k]}",
                     "function.parameters[0].shape[0]: expected a name for a leading dim (e.g. batch, heads), "
                     "not a legend symbol, before (n_q, d_k), found string 'n_k'",
                     id="a legend symbol as a leading dim"),
        pytest.param("{name: Q, shape: [batch, n_q, d_k]}", "{name: Q, shape: [batch, batch, n_q, d_k]}",
                     "expected each leading dim named once, found (batch, batch)", id="a name twice"),
        pytest.param("{name: Q, shape: [batch, n_q, d_k]}", "{name: Q, shape: [batch, n_q, d_k], optional: true}",
                     "function.parameters[0].optional: expected optional only on a mask parameter of contract "
                     "attention (mask), found it on Q", id="optional on a non-mask"),
        pytest.param("{name: V, shape: [batch, n_k, d_v]}", "{name: V, shape: [batch, n_k, d_v], full_shape: true}",
                     "function.parameters[2].full_shape: expected full_shape only on a mask parameter",
                     id="full_shape on a non-mask"),
    ],
)  # fmt: skip
def test_interface_problems_are_located(tmp_path, old, new, message):
    """Each interface problem is one located line saying what was expected and what was found."""
    assert old in ATTENTION
    text = problems_of(tmp_path, ATTENTION.replace(old, new))
    assert message in text, text
    assert len(text.splitlines()) == 1, text  # no second problem follows from the first
    assert text.startswith(f"{tmp_path / 'spec.yaml'}:")


def test_an_optional_mask_must_be_trailing():
    """A required positional parameter after an optional one is refused: a call can leave out only
    trailing arguments (every bundled contract has its mask last, so the rule is tried directly)."""
    from attnscore.maths.contracts import get_contract
    from attnscore.spec.interface import _check_optional_order
    from attnscore.spec.located import Positioned

    doc = Positioned("x.yaml", {}, {(("function", "parameters", 1, "name")): (9, 7)}, {})
    found: list = []
    fn = {"parameters": [{"name": "mask"}, {"name": "S"}]}
    _check_optional_order(doc, get_contract("masked_scores"), fn, {"mask"}, found)
    assert [str(p) for p in found] == [
        "x.yaml:9:7: function.parameters[1].name: expected every required positional parameter before the "
        "optional mask (a call can leave out only trailing arguments), found S after it"
    ]
    fine: list = []
    _check_optional_order(doc, get_contract("masked_scores"), {"parameters": [{"name": "S"}, {"name": "mask"}]},
                          {"mask"}, fine)  # fmt: skip
    assert fine == []


@pytest.mark.parametrize(
    "old, new, message",
    [
        pytest.param("      Q: [[[1, 0]]]", "      Q: [[1, 0]]",
                     "worked_examples[0].inputs.Q: expected shape (batch, n_q, d_k) (3-D, as function.parameters "
                     "states), found shape (1, 2)", id="a rank-2 worked example"),
        pytest.param("      K: [[[1, 0], [0, 1]]]", "      K: [[[1, 0], [0, 1]], [[1, 0], [0, 1]]]",
                     "worked_examples[0].inputs.K: expected batch=1 as in Q, found batch=2", id="batch sizes differ"),
        pytest.param("      mask: [[[true, true]]]", "      mask: [[true, true]]",
                     "worked_examples[0].inputs.mask: expected shape (batch, n_q, n_k) (3-D", id="a shared mask"),
    ],
)  # fmt: skip
def test_worked_examples_of_the_wrong_rank_are_located(tmp_path, old, new, message):
    """A worked example that breaks the stated rank or the named dims' sizes is a located spec error."""
    assert old in ATTENTION
    text = problems_of(tmp_path, ATTENTION.replace(old, new))
    assert message in text, text


def test_a_broadcast_mask_in_a_full_shape_example_is_located(tmp_path):
    """With full_shape and open dims, a mask with a size-1 batch dim is refused in a worked example."""
    edits = [
        ("[batch, n_q, d_k]", '["...", n_q, d_k]'),
        ("[batch, n_k, d_k]", '["...", n_k, d_k]'),
        ("[batch, n_k, d_v]", '["...", n_k, d_v]'),
        ("    shape: [batch, n_q, d_v]", '    shape: ["...", n_q, d_v]'),
        ("{name: mask, shape: [batch, n_q, n_k]}", '{name: mask, shape: ["...", n_q, n_k], full_shape: true}'),
        ("      Q: [[[1, 0]]]", "      Q: [[[1, 0]], [[1, 0]]]"),
        ("    expected: [[[1.6604769013466862]]]", "    expected: [[[1.6604769013466862]], [[1.6604769013466862]]]"),
    ]
    text = ATTENTION
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    full = text.replace("      mask: [[[true, true]]]", "      mask: [[[true, true]], [[true, true]]]")
    assert load_spec(write(tmp_path, full)).contract.full_masks == frozenset({"mask"})
    message = problems_of(tmp_path, text)
    assert "expected the mask in the scores' full shape (2, n_q, n_k)" in message, message
    assert "found shape (1, 1, 2)" in message


def test_drawn_inputs_have_the_stated_rank_and_full_masks(tmp_path):
    """Every drawn Q, K, V and mask is 3-D with one batch size, masks never broadcast or shared."""
    spec = load_spec(write(tmp_path, ATTENTION))
    for dtype in ("float32", "float64"):
        for case in build_cases(spec, dtype):
            for call in case.calls:
                shapes = {name: np.shape(a) for name, a in call.args.items()}
                assert {len(s) for s in shapes.values()} == {3}, (case.id, shapes)
                assert len({s[0] for s in shapes.values()}) == 1, (case.id, shapes)
                assert shapes["mask"] == shapes["Q"][:2] + shapes["K"][1:2], (case.id, shapes)


def test_open_attention_still_draws_every_mask_form():
    """Without a stated interface, attention masks still come full, shared (n_q, n_k) and with size-1 dims."""
    spec = load_spec(ROOT / "specs" / "attention.yaml")
    case = next(c for c in build_cases(spec, "float32") if c.id == "property:matches_reference")
    forms = set()
    for call in case.calls:
        q, m = np.shape(call.args["Q"]), np.shape(call.args["mask"])
        if len(q) > 2:
            forms.add("shared" if len(m) == 2 else "full" if m[:-2] == q[:-2] else "broadcast")
    assert forms == {"shared", "full", "broadcast"}


def test_batch_items_independent_keeps_the_rank(tmp_path):
    """batch_items_independent calls item b alone as a batch of one, Q[b:b+1], when the rank is stated."""
    spec = load_spec(write(tmp_path, SCORES))
    assert spec.contract.leading == ("batch", "heads")
    case = next(c for c in build_cases(spec, "float32") if c.id == "property:batch_items_independent")
    for whole, alone in zip(case.calls[::2], case.calls[1::2], strict=True):
        assert whole.args["Q"].ndim == alone.args["Q"].ndim == 4
        assert alone.args["Q"].shape[0] == 1 and whole.args["Q"].shape[0] >= 2


def test_batch_items_independent_judges_the_batch_of_one(tmp_path):
    """The reference passes; code that mixes batch items (Q Kᵀ over the wrong axes) fails the property."""
    import torch

    from attnscore.check.implementation import run_impl

    spec = load_spec(write(tmp_path, SCORES))
    right = run_impl(spec, lambda Q, K: Q @ K.transpose(-2, -1), dtype="float64", shrink=False)
    assert right.score == right.max_score, [c.message for c in right.cases if not c.passed]
    mixed = run_impl(spec, lambda Q, K: torch.einsum("bhqd,chkd->bhqk", Q, K), dtype="float64", shrink=False)
    failed = {c.id for c in mixed.cases if not c.passed}
    assert "property:batch_items_independent" in failed


def test_broadcasting_properties_do_not_apply_to_named_dims(tmp_path):
    """batch_dims_broadcast needs dims that broadcast: with named dims it is refused, saying why."""
    text = SCORES.replace(
        "  - {name: batch_items_independent, points: 1, examples: 10, statement: items}",
        "  - {name: batch_dims_broadcast, points: 1, examples: 10, statement: broadcast}",
    )
    message = problems_of(tmp_path, text)
    assert "properties[1].name: expected a property that applies to contract score_matrix, found " in message
    assert "'batch_dims_broadcast' (its inputs need what function.parameters rules out: leading dims named " in message
    assert "[batch, heads], one size each, so none broadcast)" in message


def test_diagnosis_confirmation_inputs_have_the_stated_rank(tmp_path):
    """The diagnosis's confirmation inputs (batch (2,), (3,), (2, 4) when open) keep a stated rank."""
    spec = load_spec(write(tmp_path, ATTENTION))
    assert [a["Q"].shape[:-2] for a in confirmation_args(spec)] == [(2,), (3,), (2,)]
    scores = load_spec(write(tmp_path, SCORES, "scores.yaml"))
    assert [a["Q"].shape[:-2] for a in confirmation_args(scores)] == [(2, 2), (3, 2), (2, 4)]


def test_the_example_course_spec_loads_with_its_interface():
    """examples/specs/attention_batched.yaml: 3-D inputs, a full-shape optional mask, its examples batched."""
    spec = load_spec(EXAMPLE_SPEC)
    contract = spec.contract
    assert (contract.leading, contract.full_masks, contract.omittable) == (
        ("batch",),
        frozenset({"mask"}),
        frozenset({"mask"}),
    )
    assert {e.id: e.handover for e in spec.worked_examples} == {
        "no_mask": {"mask": "omitted"},
        "mask_none": {"mask": "none"},
        "mask_per_batch_item": {},
        "lower_triangular_mask": {},
        "scale_by_sqrt_d_k": {},
    }


def test_a_mask_may_keep_open_dims_beside_named_ones(tmp_path):
    """Q [batch, heads, ...] with mask ["...", n_q, n_k]: the mask comes full, broadcast or shared, at that rank."""
    text = ATTENTION.replace("[batch, n_q, d_k]", "[batch, heads, n_q, d_k]")
    text = text.replace("[batch, n_k, d_k]", "[batch, heads, n_k, d_k]").replace(
        "[batch, n_k, d_v]", "[batch, heads, n_k, d_v]"
    )
    text = text.replace("    shape: [batch, n_q, d_v]", "    shape: [batch, heads, n_q, d_v]")
    text = text.replace("{name: mask, shape: [batch, n_q, n_k]}", '{name: mask, shape: ["...", n_q, n_k]}')
    text = text.replace("      Q: [[[1, 0]]]", "      Q: [[[[1, 0]]]]").replace(
        "      V: [[[1], [3]]]", "      V: [[[[1], [3]]]]"
    )
    text = text.replace("      K: [[[1, 0], [0, 1]]]", "      K: [[[[1, 0], [0, 1]]]]")
    text = text.replace("      mask: [[[true, true]]]", "      mask: [[true, true]]")
    text = text.replace("    expected: [[[1.6604769013466862]]]", "    expected: [[[[1.6604769013466862]]]]")
    spec = load_spec(write(tmp_path, text))
    assert spec.contract.leading == ("batch", "heads") and spec.contract.full_masks == frozenset()
    forms = set()
    for case in build_cases(spec, "float64"):
        for call in case.calls:
            q, m = np.shape(call.args["Q"]), np.shape(call.args["mask"])
            assert len(q) == 4 and len(m) in (2, 4), (case.id, q, m)
            forms.add("shared" if len(m) == 2 else "full" if m[:-2] == q[:-2] else "broadcast")
    assert forms == {"shared", "full", "broadcast"}


def test_a_shape_too_short_for_its_legend_is_one_shape_problem(tmp_path):
    """Q [n_q] beside K [batch, n_k, d_k] is the contract's shape problem, not a leading-dims one."""
    text = problems_of(tmp_path, ATTENTION.replace("{name: Q, shape: [batch, n_q, d_k]}", "{name: Q, shape: [n_q]}"))
    assert "expected the leading dims" not in text, text
    assert "function.parameters: expected Q (..., n_q, d_k)" in text and "found Q (n_q,)" in text, text
