"""FlashAttention-2 backward mistakes written as submissions: each is caught, naming the wrong gradient."""

from __future__ import annotations

# ruff: noqa: E741  (O: the output, as in the paper)
import pytest
import torch

from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.report.results import Verdict
from examples.impl.attention_gradients import _online, _sum_to
from tests.catalogue.test_gradient_properties import _case


def flash_attention_2(*, rescale=True, l_is_max=False, use_d=True, scale_dq=True, scale_dk=True, dv_normalised=True):
    """A FlashAttention-2 autograd Function (key tiles of 2) with the named mistakes switched on."""

    class FA2(torch.autograd.Function):
        @staticmethod
        def forward(ctx, Q, K, V, mask):
            if rescale:
                O, L = _online(Q, K, V, mask, 2)
            else:  # the online softmax without rescaling the running sum or output
                O, L = _no_rescale(Q, K, V, mask)
            if l_is_max:  # L saved as the running max only
                S = (Q @ K.transpose(-2, -1) * Q.shape[-1] ** -0.5).masked_fill(~mask, float("-inf"))
                L = S.amax(-1)
            ctx.save_for_backward(Q, K, V, mask, O, L)
            return O

        @staticmethod
        def backward(ctx, dO):
            Q, K, V, mask, O, L = ctx.saved_tensors
            scale = Q.shape[-1] ** -0.5
            S = (Q @ K.transpose(-2, -1) * scale).masked_fill(~mask, float("-inf"))
            Lf = torch.where(torch.isfinite(L), L, torch.zeros_like(L))[..., None]
            P = torch.where(torch.isfinite(S), torch.exp(S - Lf), torch.zeros_like(S))
            E = (
                P
                if dv_normalised
                else torch.where(
                    torch.isfinite(S), torch.exp(S - S.amax(-1, keepdim=True).nan_to_num(0)), torch.zeros_like(S)
                )
            )
            dV = E.transpose(-2, -1) @ dO
            dP = dO @ V.transpose(-2, -1)
            D = (dO * O).sum(-1, keepdim=True) if use_d else 0.0
            dS = P * (dP - D)
            dQ = dS @ K * (scale if scale_dq else 1.0)
            dK = dS.transpose(-2, -1) @ Q * (scale if scale_dk else 1.0)
            return _sum_to(dQ, Q.shape), _sum_to(dK, K.shape), _sum_to(dV, V.shape), None

    return FA2


def _no_rescale(Q, K, V, mask):
    scale = Q.shape[-1] ** -0.5
    shape = Q.shape[:-1]
    m = torch.full(shape, float("-inf"), dtype=Q.dtype)
    l_sum = torch.zeros(shape, dtype=Q.dtype)
    acc = torch.zeros((*shape, V.shape[-1]), dtype=Q.dtype)
    for j0 in range(0, K.shape[-2], 2):
        S = (Q @ K[..., j0 : j0 + 2, :].transpose(-2, -1) * scale).masked_fill(~mask[..., j0 : j0 + 2], float("-inf"))
        m = torch.maximum(m, S.amax(-1))
        p = torch.exp(S - torch.where(torch.isfinite(m), m, torch.zeros_like(m))[..., None])
        l_sum = l_sum + p.sum(-1)  # no alpha: the earlier tiles are not rescaled
        acc = acc + p @ V[..., j0 : j0 + 2, :]
    O = torch.where(l_sum[..., None] > 0, acc / l_sum.clamp_min(1e-30)[..., None], torch.zeros_like(acc))
    return O, torch.where(l_sum > 0, m + torch.log(l_sum.clamp_min(1e-30)), torch.full_like(m, float("-inf")))


MISTAKES = [
    pytest.param({"l_is_max": True}, "gradient with respect to", id="L saved as the running max"),
    pytest.param({"use_d": False}, "gradient with respect to", id="D = rowsum(dO * O) omitted"),
    pytest.param({"scale_dq": False}, "gradient with respect to Q", id="scale missing from dQ"),
    pytest.param({"scale_dk": False}, "gradient with respect to K", id="scale missing from dK"),
    pytest.param({"dv_normalised": False}, "gradient with respect to V", id="dV from unnormalised weights"),
]


def test_the_bug_free_function_gets_full_marks():
    """With no mistake switched on, the Function passes forward and backward."""
    for name in ("matches_reference", "gradients_match_golden"):
        spec, case = _case("specs/attention.yaml", name, count=8)
        assert judge_case(spec, case, InProcessRunner(flash_attention_2()), "float32").verdict is Verdict.PASSED


@pytest.mark.parametrize("bugs, text", MISTAKES)
def test_backward_mistake_is_caught(bugs, text):
    """Each backward mistake fails gradients_match_golden, and the failure names the wrong gradient."""
    spec, case = _case("specs/attention.yaml", "gradients_match_golden", count=8)
    result = judge_case(spec, case, InProcessRunner(flash_attention_2(**bugs)), "float32")
    assert result.verdict is Verdict.WRONG_VALUE, result.message
    assert text in result.failure.check


def test_missing_rescale_is_caught_forward():
    """The online softmax without rescaling is wrong forward as soon as a row spans two key tiles."""
    spec, case = _case("specs/attention.yaml", "matches_reference", count=8)
    result = judge_case(spec, case, InProcessRunner(flash_attention_2(rescale=False)), "float32")
    assert result.verdict is Verdict.WRONG_VALUE
