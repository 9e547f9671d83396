"""Optional masks, as a course's signature makes them (``mask=None``): what leaving one out means
(attnscore.maths.contract), how the calls hand it over (attnscore.check.cases, attnscore.check.runner,
attnscore.boundary.wire) and how feedback shows such a call (attnscore.report.feedback)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.boundary import wire
from attnscore.boundary.calls import OMITTED
from attnscore.boundary.layouts import describe_layout
from attnscore.catalogue.mistakes import get_mistake
from attnscore.check.cases import HANDOVER_TURNS, build_cases
from attnscore.check.implementation import run_impl
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.check.verify import verify_spec
from attnscore.maths.contracts import get_contract
from attnscore.report.feedback import reproduction
from attnscore.spec.load import load_spec
from attnscore.spec.located import SpecError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SPEC = ROOT / "examples" / "specs" / "attention_batched.yaml"


def _attention(Q, K, V, mask=None):
    S = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    if mask is not None:
        S = S.masked_fill(~mask, float("-inf"))
    return torch.softmax(S, dim=-1) @ V


class Recorder:
    """A correct attention that records how it was called: positional count, mask given, by name."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, tuple[str, ...]]] = []

    def __call__(self, *args, **kwargs):
        mask = args[3] if len(args) > 3 else kwargs.get("mask", "absent")
        how = "absent" if isinstance(mask, str) else "None" if mask is None else "tensor"
        self.calls.append((len(args), how, tuple(sorted(kwargs))))
        return _attention(*args[:3], None if isinstance(mask, str) else mask)


# ---------------------------------------------------------------------------------------------
# what leaving a mask out means


def test_absent_bool_mask_keeps_every_key_in_the_scores_full_shape():
    """attention's mask left out: True everywhere, (batch..., n_q, n_k) broadcast from Q and K."""
    c = get_contract("attention")
    args = {"Q": np.zeros((2, 1, 3, 4)), "K": np.zeros((5, 6, 4)), "V": np.zeros((5, 6, 2))}
    keep = c.absent_value("mask", args)
    assert keep.dtype == np.bool_ and keep.shape == (2, 5, 3, 6) and keep.all()


def test_absent_additive_mask_adds_nothing():
    """sdpa_float_mask's attn_mask left out: zeros, (..., h_q, n_q, n_k)."""
    c = get_contract("sdpa_float_mask")
    args = {"query": np.zeros((2, 3, 4, 5)), "key": np.zeros((2, 3, 6, 5)), "value": np.zeros((2, 3, 6, 1))}
    bias = c.absent_value("attn_mask", args)
    assert bias.dtype == np.float64 and bias.shape == (2, 3, 4, 6) and not bias.any()


def test_only_masks_can_be_optional():
    """interfaced refuses an optional or full-shape parameter that is not a mask, naming the masks."""
    with pytest.raises(ValueError, match=r"expected a mask parameter of contract attention \(mask\), found 'Q'"):
        get_contract("attention").interfaced(omittable=frozenset({"Q"}))
    with pytest.raises(ValueError, match="found 'V'"):
        get_contract("attention").interfaced(full_masks=frozenset({"V"}))


def test_binding_leaves_out_an_omitted_argument():
    """The binding drops OMITTED (a trailing positional one, or one passed by name) and passes None on."""
    c = get_contract("attention").interfaced(omittable=frozenset({"mask"}))
    seen = c.binding(lambda *args, **kwargs: (len(args), sorted(kwargs), args[-1] if len(args) == 4 else "-"))
    assert seen(1, 2, 3, OMITTED) == (3, [], "-")
    assert seen(1, 2, 3, None) == (4, [], None)
    sdpa = get_contract("sdpa").interfaced(omittable=frozenset({"attn_mask"}))
    named = sdpa.binding(lambda *args, **kwargs: (len(args), kwargs))
    assert named(1, 2, 3, OMITTED) == (3, {})
    assert named(1, 2, 3, None) == (3, {"attn_mask": None})


def test_a_mistake_sees_what_leaving_the_mask_out_means():
    """A catalogue mistake run on a call without its mask gets the all-keep mask (every form sees tensors)."""
    c = get_contract("attention").interfaced(omittable=frozenset({"mask"}))
    ignored = get_mistake("not_scaled").bind(c)
    Q, K, V = (torch.ones(1, 2, 3, dtype=torch.float64) for _ in range(3))
    assert torch.equal(ignored(Q, K, V, OMITTED), ignored(Q, K, V, torch.ones(1, 2, 2, dtype=torch.bool)))
    assert torch.equal(ignored(Q, K, V, None), ignored(Q, K, V, torch.ones(1, 2, 2, dtype=torch.bool)))


# ---------------------------------------------------------------------------------------------
# how the calls hand it over


def test_worked_examples_leave_the_mask_out_or_pass_none():
    """An example without mask is called without it; mask: null is called with None; both keep every key."""
    spec = load_spec(EXAMPLE_SPEC)
    cases = {c.id: c for c in build_cases(spec, "float64")}
    assert cases["example:no_mask"].calls[0].layouts == {"mask": "omitted"}
    assert cases["example:mask_none"].calls[0].layouts == {"mask": "none"}
    assert cases["example:mask_per_batch_item"].calls[0].layouts is None
    assert cases["example:no_mask"].calls[0].args["mask"].all()


def test_properties_that_omit_take_turns():
    """matches_reference hands the mask over in turn: given, left out, None; their golden keeps every key."""
    spec = load_spec(EXAMPLE_SPEC)
    case = next(c for c in build_cases(spec, "float64") if c.id == "property:matches_reference")
    turns = [(call.layouts or {}).get("mask") for call in case.calls]
    assert turns == [HANDOVER_TURNS[i % 3] for i in range(len(case.calls))]
    assert turns[:3] == [None, "omitted", "none"]
    for call in case.calls:
        if call.layouts:
            assert call.args["mask"].all()
            Q, K, V = (torch.tensor(call.args[n]) for n in ("Q", "K", "V"))
            assert np.allclose(call.golden, _attention(Q, K, V).numpy(), rtol=1e-12, atol=1e-12)
    views = next(c for c in build_cases(spec, "float64") if c.id == "property:non_contiguous_inputs")
    assert all("mask" not in (call.layouts or {}) or call.layouts["mask"] not in HANDOVER_TURNS for call in views.calls)


def test_the_in_process_runner_leaves_out_or_passes_none():
    """attnscore test's runner calls f(Q, K, V), f(Q, K, V, None) and f(Q, K, V, mask) as the cases say."""
    spec = load_spec(EXAMPLE_SPEC)
    recorder = Recorder()
    result = run_impl(spec, recorder, dtype="float32", shrink=False)
    assert result.score == result.max_score, [c.message for c in result.cases if not c.passed]
    kinds = {(n, how) for n, how, _ in recorder.calls}
    assert kinds == {(3, "absent"), (4, "None"), (4, "tensor")}


@pytest.mark.slow
def test_the_reference_and_every_omitted_call_verify():
    """The reference passes every case of the example course spec in float32 and float64."""
    spec = load_spec(EXAMPLE_SPEC)
    assert [r.all_passed for r in verify_spec(spec, ("float32", "float64"))] == [True, True]


def test_a_required_mask_fails_only_where_it_is_left_out():
    """Code that uses its mask unconditionally raises on the calls without one and passes the others."""

    def needs_mask(Q, K, V, mask=None):
        return _attention(Q, K, V, mask.bool())

    spec = load_spec(EXAMPLE_SPEC)
    result = run_impl(spec, needs_mask, dtype="float32", shrink=False)
    failed = {c.id: c for c in result.cases if not c.passed}
    assert set(failed) >= {"example:no_mask", "example:mask_none", "property:matches_reference"}
    assert "example:mask_per_batch_item" not in failed and "example:lower_triangular_mask" not in failed
    assert "'NoneType' object has no attribute 'bool'" in failed["example:mask_none"].message


def test_a_keyword_mask_is_left_out_or_passed_by_name(tmp_path):
    """sdpa's attn_mask marked optional: left out of the keywords, or attn_mask=None."""
    text = (ROOT / "specs" / "sdpa.yaml").read_text()
    text = text.replace("    - {name: attn_mask, shape: [\"...\", h_q, n_q, n_k]}",
                        "    - {name: attn_mask, shape: [\"...\", h_q, n_q, n_k], optional: true}")  # fmt: skip
    path = tmp_path / "sdpa.yaml"
    path.write_text(text)
    spec = load_spec(path)
    assert spec.contract.omittable == frozenset({"attn_mask"})
    case = next(c for c in build_cases(spec, "float64") if c.id == "property:matches_reference")
    seen = []

    def sdpa(query, key, value, **kwargs):
        seen.append("attn_mask" in kwargs and (kwargs["attn_mask"] is None))
        return torch.nn.functional.scaled_dot_product_attention(query, key, value, **kwargs)

    runner = InProcessRunner(sdpa, bind=spec.contract.binding)
    for call in case.calls[:3]:
        runner.call(call.args, "float64", call.layouts)
    assert seen == [False, False, True]  # given (not None), left out, None


def test_null_for_a_required_input_is_located(tmp_path):
    """null is only for an optional mask: for Q it is a located problem naming the optional ones."""
    text = EXAMPLE_SPEC.read_text().replace("      Q: [[[0, 0]]]\n      K: [[[1, 0], [0, 1]]]\n      V: [[[1], [3]]]\n"
                                            "      mask: null", "      Q: null\n      K: [[[1, 0], [0, 1]]]\n"
                                            "      V: [[[1], [3]]]\n      mask: null")  # fmt: skip
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "worked_examples[1].inputs.Q: expected an array for Q, found null (only an optional mask may be null; " \
           "optional here: mask)" in str(info.value)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the wire and feedback


def test_wire_carries_trailing_nones():
    """A call request says how many None arguments follow the positional inputs; a bad count is refused."""
    request = wire.CallRequest(3, "float32", "cpu", ("Q", "K", "V"), (), trailing_nones=1)
    decoded = wire.decode_call(wire.loads(wire.dumps(wire.encode_message(request))))
    assert decoded.trailing_nones == 1
    plain = wire.encode_message(wire.CallRequest(3, "float32", "cpu", ("Q",), ()))
    assert "trailing_nones" not in plain and wire.decode_call(plain).trailing_nones == 0
    for bad in (-1, True, "1", wire.MAX_TRAILING_NONES + 1):
        with pytest.raises(ValueError, match="expected trailing_nones as an integer from 0 to 8"):
            wire.decode_call({**plain, "trailing_nones": bad})


def test_feedback_shows_the_call_as_made():
    """The reproduction leaves an omitted mask out and writes None for one passed as None; the layout says so."""
    spec = load_spec(EXAMPLE_SPEC)

    def wrong(Q, K, V, mask=None):
        return _attention(Q, K, V, mask) + 1.0

    runner = InProcessRunner(wrong, bind=spec.contract.binding)
    cases = {c.id: c for c in build_cases(spec, "float32")}
    omitted, none = (
        judge_case(spec, cases[i], runner, "float32", diagnose_failures=False).failure
        for i in ("example:no_mask", "example:mask_none")
    )
    assert reproduction(omitted).endswith("torch.tensor([[[1], [3]]], dtype=torch.float32))")
    assert "torch.bool" not in reproduction(omitted)
    assert reproduction(none).endswith("torch.tensor([[[1], [3]]], dtype=torch.float32), None)")
    assert omitted.layout_text == "mask was left out of the call (your default for it applies)"
    assert none.layout_text == describe_layout("mask", "none", (1, 1, 2)) == "mask was passed as None"
