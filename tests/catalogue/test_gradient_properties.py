"""Gradient properties and backward calls: in process, on the wire and in the sandbox."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscore.boundary import wire
from attnscore.boundary.gradients import NoBackward, WithGradients, backward_call
from attnscore.boundary.outputs import CallFailure, Received
from attnscore.catalogue.properties import get_property
from attnscore.check.cases import Case, property_calls
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.maths.contracts import get_contract
from attnscore.maths.strategies import draw_examples
from attnscore.maths.tolerance import Tolerance, gradient_allowed
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec


def _case(spec_path: str, name: str, dtype: str = "float32", count: int = 6) -> tuple[object, Case]:
    spec = load_spec(spec_path)
    prop = get_property(name)
    examples = draw_examples(prop.strategy(spec.contract, prop.default_max_value), count, seed=5)
    calls = property_calls(spec, name, examples, dtype, spec.tolerance)
    case = Case(f"property:{name}", "property", name, prop.summary, calls, 1, "visible", f"{spec_path}:1",
                spec.tolerance, property_name=name)  # fmt: skip
    return spec, case


def _judge(spec_path: str, name: str, function, dtype: str = "float32"):
    spec, case = _case(spec_path, name, dtype)
    return judge_case(spec, case, InProcessRunner(function), dtype)


class _Scaled(torch.autograd.Function):
    """Attention with a hand-written backward; ``k_scale`` multiplies dK (1 is right)."""

    k_scale = 1.0
    q_factor: float | None = 1.0  # None: dQ without the scale

    @staticmethod
    def forward(ctx, Q, K, V, mask):
        scale = Q.shape[-1] ** -0.5
        S = (Q @ K.transpose(-2, -1) * scale).masked_fill(~mask, float("-inf"))
        P = torch.softmax(S, -1).nan_to_num(0.0)
        ctx.save_for_backward(Q, K, V, P)
        ctx.scale = scale
        return P @ V

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, P = ctx.saved_tensors
        dV = P.transpose(-2, -1) @ dO
        dP = dO @ V.transpose(-2, -1)
        dS = P * (dP - (dP * P).sum(-1, keepdim=True))
        dQ = dS @ K * (ctx.scale if _Scaled.q_factor is not None else 1.0)
        dK = dS.transpose(-2, -1) @ Q * ctx.scale * _Scaled.k_scale
        return dQ, dK, dV, None


def _hand_written(Q, K, V, mask):
    return _Scaled.apply(Q, K, V, mask)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_hand_written_backward_passes(dtype):
    """A correct hand-written backward (an autograd Function) passes gradients_match_golden in every dtype."""
    _Scaled.k_scale = 1.0
    result = _judge("specs/attention.yaml", "gradients_match_golden", _hand_written, dtype)
    assert result.verdict is Verdict.PASSED, result.message


def test_wrong_dk_is_named_with_its_entry():
    """dK off by 1%: the failure names K and one wrong entry with both values."""
    _Scaled.k_scale = 1.01
    try:
        result = _judge("specs/attention.yaml", "gradients_match_golden", _hand_written)
    finally:
        _Scaled.k_scale = 1.0
    assert result.verdict is Verdict.WRONG_VALUE
    check = result.failure.check
    assert check.startswith("the gradient with respect to K is wrong: dK[")
    assert "but should be" in check and "entries wrong" in check


def test_missing_scale_in_dq_is_caught():
    """The scale missing from dQ (a FlashAttention backward mistake) fails and names Q."""
    _Scaled.q_factor = None
    try:
        result = _judge("specs/attention.yaml", "gradients_match_golden", _hand_written)
    finally:
        _Scaled.q_factor = 1.0
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check.startswith("the gradient with respect to Q is wrong: dQ[")


def test_detached_output_gets_a_clear_verdict():
    """An output detached from the inputs cannot be differentiated: bad return type, saying why."""
    result = _judge(
        "specs/score_matrix.yaml", "gradients_match_golden", lambda Q, K: (Q @ K.transpose(-2, -1)).detach()
    )
    assert result.verdict is Verdict.BAD_RETURN_TYPE
    assert "does not require grad" in result.failure.detail


def test_fresh_leaf_output_never_populates_grad():
    """A result rebuilt as a new leaf (torch.tensor(..., requires_grad=True)) leaves .grad None: named."""

    def rebuilt(Q, K):
        return torch.tensor((Q @ K.transpose(-2, -1)).tolist(), dtype=Q.dtype, requires_grad=True)

    result = _judge("specs/score_matrix.yaml", "gradients_match_golden", rebuilt)
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check.startswith("no gradient reached Q: its .grad stayed None")


def test_mask_applied_in_forward_only_is_caught():
    """A backward that lets gradient reach masked keys (mask only in the value) fails masked_entries_get_no_gradient."""

    def leaky(Q, K, V, mask):
        right = _hand_written(Q, K, V, mask)
        unmasked = _hand_written(Q, K, V, torch.ones_like(mask))
        return right + (unmasked - unmasked.detach())

    result = _judge("specs/attention.yaml", "masked_entries_get_no_gradient", leaky)
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check.startswith("a key that every query masks still gets a gradient: dV[")
    assert _judge("specs/attention.yaml", "masked_entries_get_no_gradient", _hand_written).verdict is Verdict.PASSED


def test_masked_score_gradient_is_caught():
    """attention_weights whose backward reaches masked scores fails, naming the masked entry."""

    def leaky(S, mask):
        right = torch.softmax(S.masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0)
        plain = torch.softmax(S, -1)
        return right + (plain - plain.detach())

    result = _judge("specs/attention_weights.yaml", "masked_entries_get_no_gradient", leaky)
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check.startswith("a masked score still gets a gradient: dS[")


def test_mask_gradient_is_never_asked_for():
    """Backward calls leave the bool mask alone: no gradient is computed or compared for it."""
    spec, case = _case("specs/attention.yaml", "gradients_match_golden")
    assert all(set(c.gradient_goldens) == {"Q", "K", "V"} for c in case.calls)
    got = InProcessRunner(_hand_written).call(case.calls[0].args, "float32", upstream=case.calls[0].upstream)
    assert isinstance(got, WithGradients) and set(got.gradients) == {"Q", "K", "V"} and got.missing == ()


def _qk(Q, K):
    return Q @ K.transpose(-2, -1)


@pytest.mark.parametrize(
    "function, expected",
    [
        pytest.param(lambda q, k: 3.0, "returned a number, not a tensor", id="number"),
        pytest.param(lambda q, k: (q @ k).detach(), "does not require grad", id="detached"),
    ],
)
def test_backward_call_refusals(function, expected):
    """backward_call says why a call cannot be differentiated."""
    q, k = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    _, got = backward_call(function, ["q", "k"], [q, k], torch.tensor(1.0))
    assert isinstance(got, NoBackward) and expected in got.message


def test_backward_call_with_a_wrong_shaped_output_hands_the_output_on():
    """An output of another shape than dO cannot be differentiated: it comes back as the value, with
    every gradient missing, so the judge gives it the wrong-shape verdict with both shapes."""
    q, k = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    _, got = backward_call(lambda q, k: q.sum() * k.sum() + torch.zeros(3), ["q", "k"], [q, k], torch.tensor(1.0))
    assert isinstance(got, WithGradients) and not isinstance(got, NoBackward)
    assert got.array.tolist() == [21.0, 21.0, 21.0] and got.gradients == {} and got.missing == ("q", "k")


def test_backward_call_grad_set_by_the_call():
    """A call that writes .grad itself is refused (gradients are autograd's)."""

    def cheat(q, k):
        q.grad = torch.ones_like(q)
        return q @ k

    _, got = backward_call(cheat, ["q", "k"], [torch.tensor([1.0]), torch.tensor([2.0])], torch.tensor(1.0))
    assert isinstance(got, NoBackward) and "set .grad of q" in got.message


def test_backward_call_backward_raising():
    """A hand-written backward that raises is an exception, with its type."""

    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k):
            return q @ k

        @staticmethod
        def backward(ctx, d):
            raise ValueError("not written yet")

    _, got = backward_call(Bad.apply, ["q", "k"], [torch.tensor([1.0]), torch.tensor([2.0])], torch.tensor(1.0))
    assert isinstance(got, NoBackward) and got.exception == "ValueError" and "not written yet" in got.message
    runner = InProcessRunner(Bad.apply)
    out = runner.call({"q": np.array([1.0]), "k": np.array([2.0])}, "float32", upstream=np.array(1.0))
    assert isinstance(out, CallFailure) and out.verdict is Verdict.EXCEPTION


def test_gradients_travel_the_wire():
    """A WithGradients value survives encode/decode; bad gradient fields are WireErrors."""
    value = WithGradients("tensor", "float32", "cpu", np.array([1.0], np.float32),
                          {"Q": np.array([[0.5]], np.float32)}, {"Q": "float32"}, ("K",))  # fmt: skip
    back = wire.decode_received(wire.encode_received(value))
    assert isinstance(back, WithGradients) and back.missing == ("K",) and back.gradients["Q"].tolist() == [[0.5]]
    plain = wire.decode_received(wire.encode_received(Received("tensor", "float32", "cpu", np.zeros(1, np.float32))))
    assert not isinstance(plain, WithGradients)
    bad = wire.encode_received(value)
    bad["gradients"] = [bad["gradients"][0], bad["gradients"][0]]
    with pytest.raises(wire.WireError, match="name its input once"):
        wire.decode_received(bad)
    request = wire.CallRequest(1, "float32", "cpu", ("q",), (), upstream=wire.encode_array(np.ones(2)))
    assert wire.decode_call(wire.encode_message(request)).upstream == request.upstream
    assert "upstream" not in wire.encode_message(wire.CallRequest(1, "float32", "cpu", ("q",), ()))


def test_low_precision_allowed_needs_the_reference():
    """The ratio rule in float16 needs the reference's own gradient; float32 is the a-priori bound."""
    g = np.array([1.0, 2.0])
    with pytest.raises(ValueError, match="ratio rule"):
        gradient_allowed(Tolerance(), g, g, 2, "float16")
    ratio = gradient_allowed(Tolerance(), g, g, 2, "float16", reference_grad=g + 0.01)
    assert np.all(ratio >= 0.02)  # at least twice the reference's own error


def test_every_bundled_differentiable_spec_accepts_the_gradient_property():
    """gradients_match_golden applies to every bundled spec whose contract is differentiable: all of
    them, the kernel variants' keyword contracts (sdpa, kernel_attention, flash_attn) included."""
    from pathlib import Path

    from attnscore.catalogue.families import differentiable

    left_out = []
    for path in sorted(Path("attnscore/bundled_specs").glob("*.yaml")):
        contract = load_spec(path).contract
        assert get_property("gradients_match_golden").applies(contract) == differentiable(contract), path
        if differentiable(contract):
            assert contract.differentiable_parameters
        else:
            left_out.append(path.stem)
    assert left_out == []
    assert get_contract("score").name == "score"


SANDBOXED_RIGHT = """import torch

def attention(Q, K, V, mask):
    S = (Q @ K.transpose(-2, -1)) * Q.shape[-1] ** -0.5
    P = torch.softmax(S.masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0)
    return P @ V
"""

SANDBOXED_DETACHED = SANDBOXED_RIGHT.replace("return P @ V", "return (P @ V).detach()")

SANDBOXED_NO_SCALE_IN_DK = """import torch

class Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, mask):
        s = Q.shape[-1] ** -0.5
        P = torch.softmax((Q @ K.transpose(-2, -1) * s).masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0)
        ctx.save_for_backward(Q, K, V, P)
        ctx.s = s
        return P @ V

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, P = ctx.saved_tensors
        dP = dO @ V.transpose(-2, -1)
        dS = P * (dP - (dP * P).sum(-1, keepdim=True))
        return dS @ K * ctx.s, dS.transpose(-2, -1) @ Q, P.transpose(-2, -1) @ dO, None

def attention(Q, K, V, mask):
    return Attention.apply(Q, K, V, mask)
"""


@pytest.mark.parametrize(
    "source, verdict, text",
    [
        pytest.param(SANDBOXED_RIGHT, Verdict.PASSED, "", id="right"),
        pytest.param(SANDBOXED_DETACHED, Verdict.BAD_RETURN_TYPE, "does not require grad", id="detached"),
        pytest.param(SANDBOXED_NO_SCALE_IN_DK, Verdict.WRONG_VALUE, "gradient with respect to K", id="dK unscaled"),
    ],
)
def test_backward_in_the_sandbox(tmp_path, source, verdict, text):
    """The sandboxed worker runs the backward pass: gradients come back as plain arrays and are judged."""
    from attnscore.sandbox.launch import Limits, SandboxRunner

    path = tmp_path / "solution.py"
    path.write_text(source)
    spec, case = _case("specs/attention.yaml", "gradients_match_golden", count=4)
    with SandboxRunner(path, "attention", Limits(call_timeout_s=30.0)) as runner:
        result = judge_case(spec, case, runner, "float32")
    assert result.verdict is verdict, result.message
    if text:
        assert text in (result.failure.check or result.failure.detail)


def backward_spec(tmp_path):
    """The bundled attention spec with both gradient properties listed (a spec opts in by name)."""
    text = open("specs/attention.yaml", encoding="utf-8").read()
    at = text.index("\nproperties:\n") + len("\nproperties:\n")
    extra = (
        '  - {name: gradients_match_golden, points: 4, examples: 6, statement: "backward(dO) is right"}\n'
        '  - {name: masked_entries_get_no_gradient, points: 1, examples: 4, statement: "masked keys get none"}\n'
    )
    path = tmp_path / "attention_backward.yaml"
    path.write_text(text[:at] + extra + text[at:], encoding="utf-8")
    return load_spec(path)


def test_attnscore_test_grades_an_autograd_function_class(tmp_path):
    """run_impl (``attnscore test``) takes a torch.autograd.Function class and gives it full marks."""
    from attnscore.check.implementation import load_impl, run_impl

    spec = backward_spec(tmp_path)
    function = load_impl("examples.impl.attention_gradients:FlashAttention2")
    result = run_impl(spec, function, dtype="float32")
    assert result.score == result.max_score, [c.message for c in result.cases if c.verdict is not Verdict.PASSED]
    assert {"property:gradients_match_golden", "property:masked_entries_get_no_gradient"} <= {
        c.id for c in result.cases
    }


def test_grader_keeps_only_asked_gradients():
    """The sandbox runner believes gradients only for the call's float inputs, and none for a forward call."""
    from attnscore.sandbox.runner import _asked_gradients

    grads = {"Q": np.ones(1, np.float32), "secret": np.ones(1, np.float32)}
    forged = WithGradients("tensor", "float32", "cpu", np.zeros(1, np.float32), grads, {"Q": "float32"})
    kept = _asked_gradients(forged, ["Q", "K"], backward=True)
    assert isinstance(kept, WithGradients) and set(kept.gradients) == {"Q"} and kept.missing == ("K",)
    forward = _asked_gradients(forged, ["Q", "K"], backward=False)
    assert type(forward) is Received
    plain = _asked_gradients(Received("tensor", "float32", "cpu", np.zeros(1, np.float32)), ["Q"], backward=True)
    assert isinstance(plain, WithGradients) and plain.missing == ("Q",)
