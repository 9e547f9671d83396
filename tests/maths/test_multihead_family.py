"""The multi-head attention family: reference, float64 twin, a per-token per-head loop, gradients,
error bounds, drawn integers and bad arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.maths.contracts import get_contract
from attnscore.maths.expectation import expect
from attnscore.maths.families import multihead
from attnscore.maths.golden_gradients import contract_gradients
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.rotary import rotate_golden
from attnscore.maths.strategies import draw_examples, random_args
from attnscore.maths.tolerance import Tolerance

NAMES = (
    "multihead_self_attention",
    "multihead_cross_attention",
    "multihead_self_attention_packed",
    "multihead_self_attention_rope",
)
CONFIGS = [
    pytest.param(name, opts, id=f"{name}-{'-'.join(f'{k}={v}' for k, v in opts.items()) or 'default'}")
    for name in NAMES
    for opts in ({}, {"causal": True})
] + [
    pytest.param(
        "multihead_self_attention_rope",
        {"causal": True, "pairing": "rotate_half"},
        id="multihead_self_attention_rope-causal-rotate_half",
    )
]


def _loop(name: str, opts: dict, a: dict) -> np.ndarray:
    """One batch item, token and head at a time, straight from the equations (float64 Python)."""
    causal = bool(opts.get("causal", False))
    pairing = opts.get("pairing", "interleaved")
    x = np.asarray(a["x"], dtype=np.float64)
    ctx = np.asarray(a.get("context", a["x"]), dtype=np.float64)
    if "c_attn" in a:
        d = x.shape[-1]
        W_q, W_k, W_v = (np.asarray(a["c_attn"][i * d : (i + 1) * d], dtype=np.float64) for i in range(3))
    else:
        W_q, W_k, W_v = (np.asarray(a[n], dtype=np.float64) for n in ("W_q", "W_k", "W_v"))
    W_o = np.asarray(a["W_o"], dtype=np.float64)
    h = int(a["num_heads"])
    d = x.shape[-1]
    dh = d // h
    batch = x.shape[:-2]
    out = np.zeros(batch + (x.shape[-2], d))

    def rot(vec: list[float], m: float) -> list[float]:
        if "theta" not in a:
            return vec
        y = list(vec)
        for i in range(dh // 2):
            ia, ib = (2 * i, 2 * i + 1) if pairing == "interleaved" else (i, i + dh // 2)
            angle = m * float(a["theta"]) ** (-2.0 * i / dh)
            y[ia] = vec[ia] * math.cos(angle) - vec[ib] * math.sin(angle)
            y[ib] = vec[ia] * math.sin(angle) + vec[ib] * math.cos(angle)
        return y

    positions = [float(p) for p in a["token_positions"]] if "token_positions" in a else None
    for b in np.ndindex(*batch):
        for i in range(x.shape[-2]):
            concat: list[float] = []
            for head in range(h):
                cols = range(head * dh, (head + 1) * dh)
                q = [sum(x[b][i][c] * W_q[r][c] for c in range(d)) for r in cols]
                if positions is not None:
                    q = rot(q, positions[i])
                keys = [j for j in range(ctx.shape[-2]) if not causal or j <= i]
                scores = []
                values = []
                for j in keys:
                    k = [sum(ctx[b][j][c] * W_k[r][c] for c in range(d)) for r in cols]
                    if positions is not None:
                        k = rot(k, positions[j])
                    scores.append(sum(qq * kk for qq, kk in zip(q, k, strict=True)) / math.sqrt(dh))
                    values.append([sum(ctx[b][j][c] * W_v[r][c] for c in range(d)) for r in cols])
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                w = [v / sum(e) for v in e]
                concat += [sum(w[t] * values[t][r] for t in range(len(keys))) for r in range(dh)]
            out[b][i] = [sum(concat[c] * W_o[r][c] for c in range(d)) for r in range(d)]
    return out


def _torch(c, a: dict, dtype=torch.float64) -> list:
    return [
        torch.tensor(np.asarray(v), dtype=torch.int32) if n in c.int_parameters else torch.tensor(v, dtype=dtype)
        for n, v in a.items()
    ]


@pytest.mark.parametrize(("name", "opts"), CONFIGS)
def test_reference_golden_and_loop_agree(name: str, opts: dict) -> None:
    """On drawn inputs, the torch reference, the float64 twin and the plain loop give one value."""
    c = get_contract(name).configured(opts)
    for a in draw_examples(random_args(c), 12, 41):
        want = _loop(name, opts, a)
        gold = c.golden(a)
        ref = c.reference(*_torch(c, a)).numpy()
        assert gold.shape == want.shape == ref.shape
        np.testing.assert_allclose(gold, want, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(ref, want, rtol=1e-10, atol=1e-9)


def _identity() -> list[list[float]]:
    return np.eye(4).tolist()


def test_two_heads_permutation_by_hand() -> None:
    """d_model 4, two heads: W_v a cyclic permutation, one token: out = x shifted (x @ W.T, not x @ W)."""
    c = get_contract("multihead_self_attention")
    shift = [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]]
    a = {"x": np.array([[1.0, 2, 3, 4]]), "W_q": np.eye(4), "W_k": np.eye(4), "W_v": np.array(shift, float)}
    a |= {"W_o": np.eye(4), "num_heads": np.asarray(2)}
    assert c.golden(a).tolist() == [[2.0, 3.0, 4.0, 1.0]]
    assert c.reference(*_torch(c, a)).tolist() == [[2.0, 3.0, 4.0, 1.0]]


def test_causal_two_tokens_by_hand() -> None:
    """Identity weights, tokens e0 and e2: causal token 0 sees itself; token 1's heads mix as computed by hand."""
    c = get_contract("multihead_self_attention").configured({"causal": True})
    a = {"x": np.array([[1.0, 0, 0, 0], [0, 0, 1, 0]]), **{n: np.eye(4) for n in ("W_q", "W_k", "W_v", "W_o")}}
    a["num_heads"] = np.asarray(2)
    w = 1 / (1 + math.exp(-1 / math.sqrt(2)))
    np.testing.assert_allclose(c.golden(a), [[1, 0, 0, 0], [0.5, 0, w, 0]], rtol=1e-15)
    open_ = get_contract("multihead_self_attention")
    np.testing.assert_allclose(open_.golden(a)[0], [w, 0, 0.5, 0], rtol=1e-15)


def test_rope_position_zero_is_identity_and_quarter_turn() -> None:
    """RoPE at position 0 changes nothing; d_head 2, theta anything: position m turns by m radians."""
    c = get_contract("multihead_self_attention_rope")
    base = {"x": np.array([[1.0, 0.0], [0.0, 1.0]]), **{n: np.eye(2) for n in ("W_q", "W_k", "W_v", "W_o")}}
    base |= {"num_heads": np.asarray(1), "theta": np.asarray(10000)}
    plain = get_contract("multihead_self_attention").golden({k: v for k, v in base.items() if k != "theta"})
    at_zero = c.golden(base | {"token_positions": np.array([0, 0])})
    np.testing.assert_allclose(at_zero, plain, rtol=1e-15)
    # query at position 0, key at position 1 turned by 1 radian: the score of e1 vs e1 is cos(1)
    turned = c.reference(*_torch(c, base | {"token_positions": np.array([0, 1])})).numpy()
    np.testing.assert_allclose(turned, c.golden(base | {"token_positions": np.array([0, 1])}), rtol=1e-12)
    q = rotate_golden(np.array([[0.0, 1.0]]), np.array([math.pi / 2]), 10000, "interleaved")
    np.testing.assert_allclose(q, [[-1.0, 0.0]], atol=1e-15)


@pytest.mark.parametrize(("name", "opts"), CONFIGS)
def test_gradients_match_autograd_float64(name: str, opts: dict) -> None:
    """The chain-rule gradients of every float parameter equal torch autograd's in float64."""
    c = get_contract(name).configured(opts)
    for a in draw_examples(random_args(c, max_value=3.0), 6, 7):
        tensors = _torch(c, a)
        for n, t in zip(c.parameter_names, tensors, strict=True):
            if n not in c.int_parameters:
                t.requires_grad_(True)
        out = c.reference(*tensors)
        dO = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape)
        out.backward(dO)
        got = contract_gradients(c, a, dO.numpy())
        floats = [n for n in c.parameter_names if n not in c.int_parameters]
        assert sorted(got) == sorted(floats)
        for n, t in zip(c.parameter_names, tensors, strict=True):
            if n in got:
                np.testing.assert_allclose(got[n], t.grad.numpy(), rtol=1e-9, atol=1e-9, err_msg=n)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize(("name", "opts"), CONFIGS)
def test_reference_inside_its_bound_and_bound_below_values(name: str, opts: dict, dtype: str) -> None:
    """The reference run in ``dtype`` is within its own error bound (factor 2), and the bound is
    smaller than some value it guards (an all-zeros answer fails)."""
    from attnscore.check.cases import cast

    c = get_contract(name).configured(opts)
    worst, zero_fails = 0.0, []
    for a in draw_examples(random_args(c, max_value=2.0), 10, 5):
        ca = {n: np.asarray(v) if n in c.int_parameters else cast(v, dtype) for n, v in a.items()}
        out = c.reference(*_torch(c, ca, getattr(torch, dtype))).double().numpy()
        e = expect(c, ca, dtype, Tolerance("dot_bound", factor=2))
        worst = max(worst, float(np.max(np.abs(out - e.golden) / e.allowed)))
        if np.abs(e.golden).max() > 0.5:
            zero_fails.append(bool((np.abs(e.golden) > e.allowed).any()))
    assert worst <= 1.0
    assert zero_fails and all(zero_fails)


def test_integers_are_consistent_and_vary() -> None:
    """Drawn heads divide d_model (d_head even for RoPE), c_attn has 3·d_model rows, theta and the
    head count vary between draws and token positions are distinct, uneven and never arange + c."""
    rope = get_contract("multihead_self_attention_rope")
    drawn = draw_examples(random_args(rope), 40, 3)
    for a in drawn:
        h, d = int(a["num_heads"]), a["x"].shape[-1]
        assert d % h == 0 and (d // h) % 2 == 0
        p = a["token_positions"]
        assert p.shape == (a["x"].shape[-2],) and p.dtype == np.int32
        gaps = np.diff(p)
        assert (gaps > 0).all()
        if len(p) >= 2:
            assert not (gaps == 1).all()
    assert len({int(a["theta"]) for a in drawn}) >= 3
    assert len({int(a["num_heads"]) for a in drawn}) >= 2
    packed = get_contract("multihead_self_attention_packed")
    for a in draw_examples(random_args(packed), 10, 3):
        assert a["c_attn"].shape == (3 * a["x"].shape[-1], a["x"].shape[-1])


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 5))
def test_split_and_merge_are_inverse(heads: int, d_head: int, n: int) -> None:
    """merge_heads(split_heads(t)) is t, and head h of the split is columns h·d_head .. (h+1)·d_head − 1."""
    t = torch.arange(2 * n * heads * d_head, dtype=torch.float64).reshape(2, n, heads * d_head)
    split = multihead.split_heads(t, heads)
    assert split.shape == (2, heads, n, d_head)
    assert torch.equal(split[:, -1], t[..., (heads - 1) * d_head :])
    assert torch.equal(multihead.merge_heads(split), t)


@pytest.mark.parametrize(
    ("name", "change", "argument", "fragment"),
    [
        pytest.param("multihead_self_attention", {"num_heads": 3}, "num_heads", "divisor of d_model = 4", id="heads"),
        pytest.param("multihead_self_attention", {"W_o": np.eye(3)}, "W_o", "(4, 4), found (3, 3)", id="W_o"),
        pytest.param("multihead_self_attention_packed", {"c_attn": np.eye(4)}, "c_attn", "(12, 4)", id="c_attn"),
        pytest.param("multihead_self_attention_rope", {"num_heads": 4}, "num_heads", "even d_head", id="odd d_head"),
        pytest.param("multihead_self_attention", {"num_heads": True}, "num_heads", "expected an int", id="bool"),
    ],
)
def test_bad_arguments_raise_one_line(name: str, change: dict, argument: str, fragment: str) -> None:
    """A head count that does not divide d_model, a wrong weight shape or an odd RoPE width raises
    ScoreInputError naming the argument, what was expected and what was found."""
    c = get_contract(name)
    args = {"x": torch.zeros(1, 2, 4), "num_heads": 2, "theta": 100, "token_positions": torch.tensor([0, 3])}
    args |= {n: torch.eye(4) for n in ("W_q", "W_k", "W_v", "W_o")} | {"c_attn": torch.zeros(12, 4)}
    args |= {k: torch.as_tensor(v) if isinstance(v, np.ndarray) else v for k, v in change.items()}
    with pytest.raises(ScoreInputError) as info:
        c.reference(*[args[n] for n in c.parameter_names])
    assert info.value.argument == argument and fragment in str(info.value)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param(
            {"num_heads": np.asarray(3)}, ("num_heads", "expected a divisor of d_model = 4, found 3"), id="heads"
        ),
        pytest.param({"theta": np.asarray(0)}, ("theta", "expected one int >= 1, found 0"), id="theta"),
        pytest.param(
            {"token_positions": np.array([0, 1, 2])},
            ("token_positions", "expected shape (seq,) = (2,), found (3,)"),
            id="positions",
        ),
    ],
)
def test_integer_check_names_the_problem(change: dict, problem: tuple[str, str]) -> None:
    """A worked example's integers are checked: the parameter and what was expected and found."""
    c = get_contract("multihead_self_attention_rope")
    a = {
        "x": np.zeros((2, 4)),
        "num_heads": np.asarray(2),
        "theta": np.asarray(10),
        "token_positions": np.array([0, 2]),
    }
    assert c.integer_problems(a) == []
    assert c.integer_problems(a | change) == [problem]


def test_causal_is_a_convention_never_passed() -> None:
    """causal and pairing are stated by the spec but never passed to the implementation."""
    c = get_contract("multihead_self_attention_rope").configured({"causal": True, "pairing": "rotate_half"})
    assert dict(c.options) == {}
    assert c.options.stated() == {"causal": True, "pairing": "rotate_half"}
    assert c.binding(lambda *a, **k: sorted(k))(*range(8)) == []
