"""The backward pass of the keyword contracts (sdpa, kernel_attention, flash_attn) graded through the
gradient properties and gradcheck: the bundled keyword specs' references and PyTorch's own SDPA get
full marks, and realistic hand-written backward mistakes of the variants are caught and named
(attnscore.maths.golden_gradients, attnscore.catalogue.properties.gradients / gradcheck)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnscore.catalogue.properties import get_property
from attnscore.check.engineer_options import EngineerOptions
from attnscore.check.implementation import run_impl
from attnscore.check.judge import judge_case
from attnscore.check.runner import InProcessRunner
from attnscore.report.results import Verdict
from attnscore.spec.load import load_spec
from tests.catalogue.test_gradient_properties import _case, _Scaled

KEYWORD_SPECS = ("sdpa", "sdpa_causal", "gqa", "softcap", "alibi", "sliding_window", "kv_cache")
GRADIENT_PROPERTIES = ("gradients_match_golden", "gradcheck")


def opted_in(stem: str, folder: Path, properties: tuple[str, ...] = GRADIENT_PROPERTIES) -> object:
    """The bundled spec ``stem`` with the gradient properties listed (a spec opts in by name)."""
    text = Path(f"specs/{stem}.yaml").read_text(encoding="utf-8")
    at = text.index("\nproperties:\n") + len("\nproperties:\n")
    extra = "".join(
        f'  - {{name: {name}, points: 2, examples: {4 if name == "gradcheck" else 8}, statement: "{name}"}}\n'
        for name in properties
    )
    path = folder / f"{stem}.yaml"
    path.write_text(text[:at] + extra + text[at:], encoding="utf-8")
    return load_spec(path)


def _judge(spec_path: str, name: str, function, dtype: str = "float32", count: int = 6):
    """``name``'s case of the spec judged in process, ``function`` called as the contract binds it (its keywords)."""
    spec, case = _case(spec_path, name, dtype, count=count)
    return judge_case(spec, case, InProcessRunner(spec.contract.binding(function)), dtype)


@pytest.mark.parametrize("stem", KEYWORD_SPECS)
def test_reference_backward_passes_in_every_dtype_of_the_spec(stem):
    """Each bundled keyword spec's reference passes gradients_match_golden in every dtype it lists
    (float16/bfloat16 by the ratio rule against its own gradients) and gradcheck."""
    spec = load_spec(f"specs/{stem}.yaml")
    for dtype in spec.dtypes:
        result = _judge(f"specs/{stem}.yaml", "gradients_match_golden", spec.contract.reference, dtype, count=4)
        assert result.verdict is Verdict.PASSED, (dtype, result.message)
    result = _judge(f"specs/{stem}.yaml", "gradcheck", spec.contract.reference, spec.dtypes[0], count=3)
    assert result.verdict is Verdict.PASSED, result.message


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["sdpa", "sdpa_causal"])
def test_torch_sdpa_gets_full_marks_with_gradients(stem, tmp_path):
    """torch.nn.functional.scaled_dot_product_attention gets every point of the SDPA specs with both gradient
    properties listed: float32 and float64 as they stand, float16/bfloat16 with --ratio 2."""
    spec = opted_in(stem, tmp_path)
    assert {"property:gradients_match_golden", "property:gradcheck"} <= {f"property:{u.name}" for u in spec.properties}
    for dtype in spec.dtypes:
        graded = EngineerOptions.parse(ratio=2).reshape(spec)[0] if dtype in ("float16", "bfloat16") else spec
        result = run_impl(graded, torch.nn.functional.scaled_dot_product_attention, dtype=dtype, shrink=False)
        lost = {c.id: c.message for c in result.cases if c.points < c.max_points}
        assert result.score == result.max_score, (dtype, lost)


def test_cli_grades_torch_sdpa_backward(tmp_path):
    """`attnscore test --impl torch.nn.functional:scaled_dot_product_attention` on an opted-in sdpa spec: exit 0."""
    from click.testing import CliRunner

    from attnscore.cli import main

    opted_in("sdpa", tmp_path)
    args = ["test", "--impl", "torch.nn.functional:scaled_dot_product_attention", "--spec", str(tmp_path / "sdpa.yaml")]
    result = CliRunner().invoke(main, [*args, "--dtype", "float32"])
    assert result.exit_code == 0, result.output


class _KernelAttention(torch.autograd.Function):
    """kernel_attention with a hand-written backward (GQA, softcap, ALiBi, causal bottom-right); the
    class attributes switch on realistic mistakes."""

    tanh_derivative = True  # False: softcap's backward forgets d(cap·tanh(s/cap))/ds = 1 − tanh²
    group_reduce = "sum"  # "mean": the K/V gradient of a shared head averaged, not summed, over its group

    @staticmethod
    def forward(ctx, query, key, value, alibi_slopes, scale, is_causal, softcap):
        ctx.save_for_backward(query, key, value)
        ctx.options = (alibi_slopes.detach() if alibi_slopes is not None else None, scale, is_causal, softcap)
        P, V_h, _ = _KernelAttention.weights(query, key, value, *ctx.options)
        return P @ V_h

    @staticmethod
    def weights(query, key, value, alibi_slopes, scale, is_causal, softcap):
        n_q, n_k, d_k = query.shape[-2], key.shape[-2], query.shape[-1]
        group = query.shape[-3] // key.shape[-3]
        K_h, V_h = key.repeat_interleave(group, -3), value.repeat_interleave(group, -3)
        s = (query @ K_h.transpose(-2, -1)) * (1.0 / math.sqrt(d_k) if scale is None else scale)
        raw = s
        if softcap is not None:
            s = softcap * torch.tanh(s / softcap)
        rows = torch.arange(n_q).unsqueeze(-1) + (n_k - n_q)
        cols = torch.arange(n_k).unsqueeze(0)
        if alibi_slopes is not None:
            s = s - alibi_slopes.to(s.dtype)[..., None, None] * (rows - cols).abs().to(s.dtype)
        if is_causal:
            s = s.masked_fill(cols > rows, float("-inf"))
        return torch.softmax(s, -1).nan_to_num(0.0), V_h, raw

    @staticmethod
    def backward(ctx, dO):
        query, key, value = ctx.saved_tensors
        alibi_slopes, scale, is_causal, softcap = ctx.options
        P, V_h, raw = _KernelAttention.weights(query, key, value, *ctx.options)
        s = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
        group = query.shape[-3] // key.shape[-3]
        dV_h = P.transpose(-2, -1) @ dO
        dP = dO @ V_h.transpose(-2, -1)
        dS = P * (dP - (dP * P).sum(-1, keepdim=True))
        if softcap is not None and _KernelAttention.tanh_derivative:
            dS = dS * (1 - torch.tanh(raw / softcap) ** 2)
        K_h = key.repeat_interleave(group, -3)
        dQ = dS @ K_h * s
        dK_h = dS.transpose(-2, -1) @ query * s

        def per_kv_head(g):
            grouped = g.reshape(*g.shape[:-3], key.shape[-3], group, *g.shape[-2:])
            return grouped.sum(-3) if _KernelAttention.group_reduce == "sum" else grouped.mean(-3)

        return dQ, per_kv_head(dK_h), per_kv_head(dV_h), None, None, None, None


def kernel_attention(query, key, value, alibi_slopes=None, *, scale=None, is_causal=False, softcap=None):
    return _KernelAttention.apply(query, key, value, alibi_slopes, scale, is_causal, softcap)


def gqa_attention(query, key, value, **flags):
    return kernel_attention(query, key, value, **flags)


@pytest.fixture
def kernel_mistake():
    """Set a mistake on _KernelAttention for one test, then put it right."""
    yield _KernelAttention
    _KernelAttention.tanh_derivative, _KernelAttention.group_reduce = True, "sum"


@pytest.mark.parametrize("stem", ["gqa", "softcap", "alibi"])
def test_hand_written_kernel_backward_passes(stem, kernel_mistake):
    """The right hand-written backward passes gradients_match_golden and gradcheck on each kernel spec."""
    for name in GRADIENT_PROPERTIES:
        result = _judge(f"specs/{stem}.yaml", name, kernel_attention)
        assert result.verdict is Verdict.PASSED, (name, result.message)


def test_softcap_backward_without_the_tanh_derivative_is_caught(kernel_mistake):
    """Softcap's backward missing 1 − tanh²(s/cap): the gradient of query or key is wrong, and named."""
    kernel_mistake.tanh_derivative = False
    golden = _judge("specs/softcap.yaml", "gradients_match_golden", kernel_attention)
    assert golden.verdict is Verdict.WRONG_VALUE
    assert golden.failure.check.startswith(("the gradient with respect to query is wrong: dquery[",
                                            "the gradient with respect to key is wrong: dkey["))  # fmt: skip
    checked = _judge("specs/softcap.yaml", "gradcheck", kernel_attention)
    assert checked.verdict is Verdict.WRONG_VALUE
    assert checked.failure.check.startswith(("gradcheck: the gradient with respect to query disagrees",
                                             "gradcheck: the gradient with respect to key disagrees"))  # fmt: skip


def test_gqa_kv_gradient_averaged_over_the_group_is_caught(kernel_mistake):
    """The K/V gradient of a shared head averaged over its query heads instead of summed: key named."""
    kernel_mistake.group_reduce = "mean"
    golden = _judge("specs/gqa.yaml", "gradients_match_golden", gqa_attention, count=10)
    assert golden.verdict is Verdict.WRONG_VALUE
    assert golden.failure.check.startswith("the gradient with respect to key is wrong: dkey[")
    checked = _judge("specs/gqa.yaml", "gradcheck", gqa_attention, count=10)
    assert checked.verdict is Verdict.WRONG_VALUE
    assert checked.failure.check.startswith("gradcheck: the gradient with respect to key disagrees")


def test_alibi_slopes_gradient_is_never_asked_for(kernel_mistake):
    """The ALiBi slopes get no golden gradient, so a backward returning None for them (as the hand-written one
    does) passes; the calls compare query, key and value only."""
    spec, case = _case("specs/alibi.yaml", "gradients_match_golden")
    assert "alibi_slopes" in spec.parameter_names
    assert all(set(c.gradient_goldens) == {"query", "key", "value"} for c in case.calls)
    assert spec.contract.differentiable_parameters == ("query", "key", "value")
    runner = InProcessRunner(spec.contract.binding(kernel_attention))
    assert judge_case(spec, case, runner, "float32").verdict is Verdict.PASSED


def test_sdpa_mask_gradient_is_never_asked_for():
    """SDPA's bool attn_mask gets no gradient asked for, in the golden gradients or the backward call."""
    from attnscore.boundary.gradients import WithGradients

    spec, case = _case("specs/sdpa.yaml", "gradients_match_golden")
    assert all(set(c.gradient_goldens) == {"query", "key", "value"} for c in case.calls)
    call = case.calls[0]
    got = InProcessRunner(spec.contract.binding(torch.nn.functional.scaled_dot_product_attention)).call(
        call.args, "float32", upstream=call.upstream
    )
    assert isinstance(got, WithGradients) and set(got.gradients) == {"query", "key", "value"}


def _windowed(q, k, v, *, leak: bool, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    """flash_attn_func in its (b, n, h, d) layout; ``leak``: the backward recomputes P without the window."""

    class Windowed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            ctx.save_for_backward(q, k, v)
            return Windowed.run(q, k, v, window=True)[0]

        @staticmethod
        def run(q, k, v, window):
            Q, K, V = (x.transpose(1, 2) for x in (q, k, v))  # (b, h, n, d)
            group = Q.shape[1] // K.shape[1]
            K, V = K.repeat_interleave(group, 1), V.repeat_interleave(group, 1)
            n_q, n_k = Q.shape[-2], K.shape[-2]
            S = Q @ K.transpose(-2, -1) * Q.shape[-1] ** -0.5
            rel = torch.arange(n_k)[None, :] - (torch.arange(n_q)[:, None] + n_k - n_q)
            left, right = window_size
            right = 0 if causal else right
            keep = torch.ones(n_q, n_k, dtype=torch.bool)
            if window:
                if left >= 0:
                    keep &= rel >= -left
                if right >= 0:
                    keep &= rel <= right
            P = torch.softmax(S.masked_fill(~keep, float("-inf")), -1).nan_to_num(0.0)
            return (P @ V).transpose(1, 2), Q, K, V, P, group

        @staticmethod
        def backward(ctx, dO):
            q, k, v = ctx.saved_tensors
            _, Q, K, V, P, group = Windowed.run(q, k, v, window=not leak)
            dO = dO.transpose(1, 2)
            dV = P.transpose(-2, -1) @ dO
            dP = dO @ V.transpose(-2, -1)
            dS = P * (dP - (dP * P).sum(-1, keepdim=True))
            s = Q.shape[-1] ** -0.5
            dQ, dK = dS @ K * s, dS.transpose(-2, -1) @ Q * s

            def kv(g):
                return g.reshape(g.shape[0], -1, group, *g.shape[-2:]).sum(2).transpose(1, 2)

            return dQ.transpose(1, 2), kv(dK), kv(dV)

    return Windowed.apply(q, k, v)


@pytest.mark.parametrize("stem", ["sliding_window", "kv_cache"])
def test_flash_layout_backward_passes_and_a_window_left_out_of_backward_is_caught(stem):
    """flash_attn's (b, n, h, d) layout: the right hand-written backward passes; one that recomputes P
    without the window (or the causal mask) in backward is caught, naming its gradient."""
    spec = load_spec(f"specs/{stem}.yaml")

    def right(q, k, v, **kw):
        return _windowed(q, k, v, leak=False, **kw)

    def leaky(q, k, v, **kw):
        return _windowed(q, k, v, leak=True, **kw)

    for name in GRADIENT_PROPERTIES:
        assert _judge(f"specs/{stem}.yaml", name, right).verdict is Verdict.PASSED, name
    result = _judge(f"specs/{stem}.yaml", "gradients_match_golden", leaky, count=10)
    assert result.verdict is Verdict.WRONG_VALUE
    named = tuple(f"the gradient with respect to {n} is wrong" for n in spec.parameter_names)
    assert result.failure.check.startswith(named)
    assert _judge(f"specs/{stem}.yaml", "gradcheck", leaky, count=10).verdict is Verdict.WRONG_VALUE


def test_gradcheck_names_the_wrong_input_and_runs_in_float64():
    """gradcheck (float64 calls whatever the tested dtype) catches dK off by 1% and names K; the right one passes."""
    from tests.catalogue.test_gradient_properties import _hand_written

    spec, case = _case("specs/attention.yaml", "gradcheck", "float32")
    assert all(c.dtype == "float64" for c in case.calls)
    # per example: K + h·u, K - h·u for each of Q, K, V (six forward calls), then the backward call
    assert [c.upstream is not None for c in case.calls] == ([False] * 6 + [True]) * (len(case.calls) // 7)
    assert judge_case(spec, case, InProcessRunner(_hand_written), "float32").verdict is Verdict.PASSED
    _Scaled.k_scale = 1.01
    try:
        result = judge_case(spec, case, InProcessRunner(_hand_written), "float32")
    finally:
        _Scaled.k_scale = 1.0
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check.startswith("gradcheck: the gradient with respect to K disagrees with finite")
    assert "(h = 1e-06, float64;" in result.failure.check


def test_gradcheck_agrees_with_torch_gradcheck():
    """On the same submissions torch.autograd.gradcheck and the gradcheck property agree: right passes, wrong fails."""
    from tests.catalogue.test_gradient_properties import _hand_written

    g = torch.Generator().manual_seed(0)
    shapes = ((2, 3), (4, 3), (4, 2))
    Q, K, V = (torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True) for shape in shapes)
    mask = torch.ones(2, 4, dtype=torch.bool)
    assert torch.autograd.gradcheck(lambda q, k, v: _hand_written(q, k, v, mask), (Q, K, V))
    _Scaled.k_scale = 1.01
    try:
        torch_says = torch.autograd.gradcheck(
            lambda q, k, v: _hand_written(q, k, v, mask), (Q, K, V), raise_exception=False
        )
        ours = _judge("specs/attention.yaml", "gradcheck", _hand_written).verdict
    finally:
        _Scaled.k_scale = 1.0
    assert torch_says is False and ours is Verdict.WRONG_VALUE


def test_gradcheck_missing_gradient_is_named():
    """A result rebuilt as a fresh leaf leaves .grad None: gradcheck names the input."""

    def rebuilt(Q, K):
        return torch.tensor((Q @ K.transpose(-2, -1)).tolist(), dtype=Q.dtype, requires_grad=True)

    result = _judge("specs/score_matrix.yaml", "gradcheck", rebuilt)
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check.startswith("gradcheck: no gradient reached Q")


def test_gradcheck_applies_to_every_differentiable_spec():
    """gradcheck is catalogued and applies to every bundled spec (all are differentiable)."""
    prop = get_property("gradcheck")
    assert prop.dtype == "float64" and "gradients" in prop.tags
    for path in sorted(Path("specs").glob("*.yaml")):
        assert prop.applies(load_spec(path).contract), path


def test_gradcheck_in_the_sandbox(tmp_path):
    """The sandboxed worker answers gradcheck's float64 forward and backward calls: right passes, dK unscaled fails."""
    from attnscore.sandbox.launch import Limits, SandboxRunner
    from tests.catalogue.test_gradient_properties import SANDBOXED_NO_SCALE_IN_DK, SANDBOXED_RIGHT

    spec, case = _case("specs/attention.yaml", "gradcheck", count=3)
    for source, verdict in ((SANDBOXED_RIGHT, Verdict.PASSED), (SANDBOXED_NO_SCALE_IN_DK, Verdict.WRONG_VALUE)):
        path = tmp_path / "solution.py"
        path.write_text(source)
        with SandboxRunner(path, "attention", Limits(call_timeout_s=30.0)) as runner:
            result = judge_case(spec, case, runner, "float32")
        assert result.verdict is verdict, result.message
    assert result.failure.check.startswith("gradcheck: the gradient with respect to K disagrees")


@pytest.mark.slow
def test_verify_covers_the_gradient_properties(tmp_path):
    """`attnscore verify` on a keyword spec that opts in: the reference passes both gradient properties."""
    from attnscore.check.verify import verify_spec

    spec = opted_in("softcap", tmp_path)
    results = verify_spec(spec)
    cases = {c.id: c for r in results for c in r.cases}
    assert {"property:gradients_match_golden", "property:gradcheck"} <= set(cases)
    assert all(r.score == r.max_score for r in results)


def test_gradcheck_example_shapes_stay_small():
    """gradcheck draws small inputs: every size at most 3, one direction per differentiable input."""
    from attnscore.maths.contracts import get_contract
    from attnscore.maths.strategies import draw_examples

    c = get_contract("kernel_attention")
    prop = get_property("gradcheck")
    for ex in draw_examples(prop.strategy(c, 2.0), 5, seed=1):
        assert set(ex.directions) == {"query", "key", "value"}
        assert max(max(np.shape(a)[-2:]) for a in ex.args.values() if np.ndim(a) >= 2) <= 3
        assert len(prop.calls(c, ex)) == 7


def test_masked_keys_get_no_gradient_in_the_keyword_specs():
    """masked_entries_get_no_gradient covers SDPA's bool attn_mask, causal and windows: the reference passes,
    a backward that recomputes P without the window leaks gradient to a key no query keeps, and is named."""
    prop = get_property("masked_entries_get_no_gradient")
    applies = {stem: prop.applies(load_spec(f"specs/{stem}.yaml").contract) for stem in KEYWORD_SPECS}
    assert applies == {"sdpa": True, "sdpa_causal": True, "gqa": False, "softcap": True, "alibi": False,
                       "sliding_window": True, "kv_cache": True}  # fmt: skip
    for stem in (s for s, yes in applies.items() if yes):
        spec = load_spec(f"specs/{stem}.yaml")
        result = _judge(f"specs/{stem}.yaml", "masked_entries_get_no_gradient", spec.contract.reference)
        assert result.verdict is Verdict.PASSED, (stem, result.message)

    def leaky(q, k, v, **kw):
        return _windowed(q, k, v, leak=True, **kw)

    result = _judge("specs/sliding_window.yaml", "masked_entries_get_no_gradient", leaky, count=10)
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check.startswith(("a key that no query keeps still gets a gradient: dk[",
                                            "a key that no query keeps still gets a gradient: dv["))  # fmt: skip


def test_sdpa_examples_leave_a_key_out_and_a_forward_only_mask_is_caught():
    """Each drawn SDPA example has a key no query keeps; a mask applied to the value only (not the backward) fails."""
    from attnscore.catalogue.properties.gradients import _unused_keys
    from attnscore.catalogue.properties.registry import CheckContext

    spec, case = _case("specs/sdpa.yaml", "masked_entries_get_no_gradient")
    for call in case.calls:
        ctx = CheckContext([], [call.args], [], [], [], "float32", "cpu", spec.contract)
        assert all(u.any() for u in _unused_keys(ctx).values())

    def forward_only_mask(query, key, value, attn_mask=None, **kw):
        sdpa = torch.nn.functional.scaled_dot_product_attention
        right = sdpa(query, key, value, attn_mask=attn_mask, **kw)
        plain = sdpa(query, key, value, **kw)
        return right + (plain - plain.detach())

    result = _judge("specs/sdpa.yaml", "masked_entries_get_no_gradient", forward_only_mask)
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check.startswith("a key that no query keeps still gets a gradient: d")
    assert (
        _judge(
            "specs/sdpa.yaml", "masked_entries_get_no_gradient", torch.nn.functional.scaled_dot_product_attention
        ).verdict
        is Verdict.PASSED
    )  # noqa: E501


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_variant_backward_by_the_ratio_rule(dtype, kernel_mistake):
    """In float16/bfloat16 a hand-written softcap/GQA/ALiBi backward run in that dtype passes by the ratio
    rule against the reference's own gradients in that dtype, and the missing tanh derivative is still caught."""
    for stem in ("gqa", "softcap", "alibi"):
        result = _judge(f"specs/{stem}.yaml", "gradients_match_golden", kernel_attention, dtype, count=4)
        assert result.verdict is Verdict.PASSED, (stem, result.message)
    kernel_mistake.tanh_derivative = False
    result = _judge("specs/softcap.yaml", "gradients_match_golden", kernel_attention, dtype)
    assert result.verdict is Verdict.WRONG_VALUE
    assert result.failure.check.startswith("the gradient with respect to ")


@pytest.mark.parametrize("name", GRADIENT_PROPERTIES)
def test_a_wrong_backward_is_not_diagnosed_as_a_forward_mistake(name):
    """A right forward with a wrong dK, graded in float64: no forward mistake (computed_in_float32 would fit
    the right output's rounding) is named for a gradient failure."""
    _Scaled.k_scale = 1.05
    try:
        from tests.catalogue.test_gradient_properties import _hand_written

        result = _judge("specs/attention.yaml", name, _hand_written, "float64")
    finally:
        _Scaled.k_scale = 1.0
    assert result.verdict is Verdict.WRONG_VALUE
    assert "with respect to K" in result.failure.check and result.failure.diagnosis is None


SANDBOXED_SDPA = """import torch

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
"""

SANDBOXED_ALIBI = """import math
import torch

def alibi_attention(query, key, value, alibi_slopes=None, *, scale=None, is_causal=False, softcap=None):
    n_q, n_k = query.shape[-2], key.shape[-2]
    group = query.shape[-3] // key.shape[-3]
    key, value = key.repeat_interleave(group, -3), value.repeat_interleave(group, -3)
    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    distance = (torch.arange(n_q)[:, None] + n_k - n_q - torch.arange(n_k)[None, :]).abs()
    s = s - alibi_slopes[:, None, None] * distance
    return torch.softmax(s, -1) @ value
"""

# the slopes as a student might read them: through numpy (refused for a tensor that requires grad)
SANDBOXED_ALIBI_NUMPY = SANDBOXED_ALIBI.replace(
    "s = s - alibi_slopes[:, None, None] * distance",
    "slopes = torch.from_numpy(alibi_slopes.numpy().copy())\n    s = s - slopes[:, None, None] * distance",
)


def test_masks_and_slopes_reach_an_in_process_backward_without_requires_grad():
    """In process too, the ALiBi slopes of a backward call are a plain tensor: reading them with
    .numpy() passes (a tensor that requires grad would raise RuntimeError there)."""
    namespace: dict = {}
    exec(SANDBOXED_ALIBI_NUMPY, namespace)
    result = _judge("specs/alibi.yaml", "gradients_match_golden", namespace["alibi_attention"], count=3)
    assert result.verdict is Verdict.PASSED, result.message


@pytest.mark.parametrize(
    "stem, source, function",
    [
        pytest.param("sdpa", SANDBOXED_SDPA, "scaled_dot_product_attention", id="sdpa by-name mask and keywords"),
        pytest.param("alibi", SANDBOXED_ALIBI, "alibi_attention", id="alibi slopes by name"),
        pytest.param("alibi", SANDBOXED_ALIBI_NUMPY, "alibi_attention", id="alibi slopes read with numpy"),
    ],
)
def test_keyword_backward_in_the_sandbox(tmp_path, stem, source, function):
    """The sandboxed worker runs a keyword contract's backward (inputs by name, keywords fixed): full marks."""
    from attnscore.sandbox.launch import Limits, SandboxRunner

    path = tmp_path / "solution.py"
    path.write_text(source)
    spec, case = _case(f"specs/{stem}.yaml", "gradients_match_golden", count=3)
    contract = spec.contract
    by_name = tuple(n for n in spec.parameter_names if n in contract.keyword_parameters)
    limits = Limits(call_timeout_s=30.0)
    with SandboxRunner(path, function, limits, by_name=by_name, options=dict(contract.options)) as runner:
        result = judge_case(spec, case, runner, "float32")
    assert result.verdict is Verdict.PASSED, result.message
