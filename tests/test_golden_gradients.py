"""The float64 closed-form gradients against torch autograd of the reference, over shapes and masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.catalogue.families import differentiable
from attnscore.maths import golden_gradients as gg
from attnscore.maths import variants
from attnscore.maths.contracts import CONTRACTS, get_contract
from attnscore.maths.strategies import legend_sizes, random_args


def autograd(contract_name: str, args: dict[str, np.ndarray], d_out: np.ndarray) -> dict[str, np.ndarray]:
    """torch autograd of the reference in float64: the independent side of every comparison."""
    c = get_contract(contract_name)
    tensors = {}
    for n in c.parameter_names:
        t = torch.tensor(args[n], dtype=torch.bool if n in c.bool_parameters else torch.float64)
        if n not in c.bool_parameters:
            t.requires_grad_(True)
        tensors[n] = t
    out = c.reference(*tensors.values())
    out.backward(torch.tensor(d_out, dtype=torch.float64))
    return {n: t.grad.numpy() for n, t in tensors.items() if n not in c.bool_parameters}


@st.composite
def contract_case(draw, name: str):
    c = get_contract(name)
    sizes = draw(legend_sizes(c))
    args = draw(random_args(c, 3.0, sizes=sizes))
    shape = np.shape(c.golden(args))
    seed = draw(st.integers(0, 2**32 - 1))
    d_out = np.random.default_rng(seed).uniform(-2, 2, size=shape)
    return args, d_out


DIFFERENTIABLE = sorted(n for n, c in CONTRACTS.items() if differentiable(c))


def test_the_keyword_contracts_are_the_ones_without_golden_gradients():
    """Every contract has golden gradients but the kernel variants' keyword contracts."""
    assert sorted(set(CONTRACTS) - set(DIFFERENTIABLE)) == ["flash_attn", "kernel_attention", "sdpa", "sdpa_float_mask"]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_contract_gradients_match_autograd(name: str, data: st.DataObject) -> None:
    """Every contract's closed-form gradients equal torch autograd's in float64 (masks, fully masked rows, batch)."""
    args, d_out = data.draw(contract_case(name))
    want = autograd(name, args, d_out)
    got = gg.contract_gradients(get_contract(name), args, d_out)
    assert set(got) == set(want) == set(gg.differentiable_parameters(get_contract(name)))
    for n in want:
        assert got[n].shape == np.shape(args[n]), n
        np.testing.assert_allclose(got[n], want[n], rtol=1e-9, atol=1e-9, err_msg=n)


def test_fully_masked_row_gets_no_gradient() -> None:
    """A query that keeps no key (output the constant 0) gives no gradient to Q, K or V."""
    Q = np.array([[1.0, 2.0], [0.5, -1.0]])
    K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    V = np.array([[1.0], [2.0], [4.0]])
    mask = np.array([[False, False, False], [True, False, True]])
    dQ, dK, dV = gg.attention(Q, K, V, mask, np.array([[5.0], [1.0]]))
    assert dQ[0].tolist() == [0.0, 0.0]
    assert dV[:, 0].tolist()[1] == 0.0  # key 1 is masked for every query: no gradient to its value
    assert np.all(dK[1] == 0.0)


def test_attention_worked_values() -> None:
    """Hand-checked: equal scores P = [1/2, 1/2], dV = Pᵀ dO, dK = scale·dSᵀ Q with dS = P(dP − D)."""
    dQ, dK, dV = gg.attention([[1.0]], [[0.0], [0.0]], [[1.0], [3.0]], None, [[1.0]], scale=1.0)
    # dP = dO Vᵀ = [1, 3]; D = Σ P dP = 2; dS = [½(1-2), ½(3-2)] = [-½, ½]
    assert (dQ.tolist(), dK.tolist(), dV.tolist()) == ([[0.0]], [[-0.5], [0.5]], [[0.5], [0.5]])


def test_broadcast_key_gets_the_summed_gradient() -> None:
    """A 2-D K shared by a batch of queries gets the sum of the batch's gradients, as autograd does."""
    rng = np.random.default_rng(3)
    Q, K = rng.normal(size=(3, 2, 4)), rng.normal(size=(5, 4))
    dS = rng.normal(size=(3, 2, 5))
    dQ, dK = gg.dot_products(Q, K, dS)
    assert dK.shape == (5, 4)
    np.testing.assert_allclose(dK, sum(dS[b].T @ Q[b] for b in range(3)), rtol=1e-12)


@st.composite
def variant_case(draw):
    batch = draw(st.integers(1, 2))
    h_kv = draw(st.integers(1, 2))
    h_q = h_kv * draw(st.integers(1, 3))
    n_q, n_k = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.uniform(-2, 2, (batch, h_q, n_q, d_k))
    k = rng.uniform(-2, 2, (batch, h_kv, n_k, d_k))
    v = rng.uniform(-2, 2, (batch, h_kv, n_k, d_v))
    options: dict = {}
    if draw(st.booleans()):
        options["is_causal"] = True
        options["alignment"] = draw(st.sampled_from(["top_left", "bottom_right", 1]))
    if draw(st.booleans()):
        options["softcap"] = draw(st.sampled_from([0.5, 2.0, 30.0]))
    if draw(st.booleans()):
        options["scale"] = draw(st.sampled_from([0.3, 1.0, -0.7]))
    if draw(st.booleans()):
        options["window"] = (draw(st.integers(-1, 2)), draw(st.integers(-1, 2)))
    if draw(st.booleans()):
        options["alibi_slopes"] = rng.uniform(0, 1, (h_q,))
    if draw(st.booleans()):
        options["attn_mask"] = rng.uniform(size=(n_q, n_k)) > 0.3
    if draw(st.booleans()):
        options["key_lengths"] = rng.integers(0, n_k + 1, size=(batch,))
    d_out = rng.uniform(-2, 2, (batch, h_q, n_q, d_v))
    d_lse = rng.uniform(-2, 2, (batch, h_q, n_q)) if draw(st.booleans()) else None
    return q, k, v, d_out, d_lse, options


@settings(max_examples=60, deadline=None)
@given(variant_case())
def test_variant_gradients_match_autograd(case) -> None:
    """GQA, causal alignments, windows, softcap, ALiBi, masks, padding and the lse's own gradient: as autograd."""
    q, k, v, d_out, d_lse, options = case
    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    torch_options = {key: (torch.tensor(val) if isinstance(val, np.ndarray) else val) for key, val in options.items()}
    parts = variants.general_attention_parts(tq, tk, tv, **torch_options)
    loss = (parts.output * torch.tensor(d_out)).sum()
    if d_lse is not None:
        lse = parts.lse
        loss = loss + torch.where(torch.isfinite(lse), lse, 0.0).mul(torch.tensor(d_lse)).sum()
    loss.backward()
    got = gg.general_attention(q, k, v, d_out, d_lse, **options)
    for name, g, t in zip(("query", "key", "value"), got, (tq, tk, tv), strict=True):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-9, atol=1e-9, err_msg=name)


def test_variant_two_d_and_gqa_group_sum() -> None:
    """2-D inputs work; a KV head shared by two query heads gets both heads' gradients."""
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 3, 2)), rng.normal(size=(1, 4, 2)), rng.normal(size=(1, 4, 3))
    dO = rng.normal(size=(2, 3, 3))
    dq, dk, dv = gg.general_attention(q, k, v, dO)
    one = [gg.general_attention(q[h], k[0], v[0], dO[h]) for h in range(2)]
    np.testing.assert_allclose(dk[0], one[0][1] + one[1][1], rtol=1e-12)
    np.testing.assert_allclose(dv[0], one[0][2] + one[1][2], rtol=1e-12)
    np.testing.assert_allclose(dq[1], one[1][0], rtol=1e-12)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradient_scales_cover_the_gradients(name: str) -> None:
    """Every scale has its gradient's shape and is at least the gradient's own magnitude (M >= |g|)."""
    c = get_contract(name)
    rng = np.random.default_rng(1)
    from hypothesis import find

    args = find(random_args(c, 3.0), lambda a: all(np.size(x) > 1 for x in a.values()))
    d_out = rng.uniform(-1, 1, np.shape(c.golden(args)))
    n, scales = gg.contract_gradient_scales(c, args, d_out)
    grads = gg.contract_gradients(c, args, d_out)
    assert n >= 1 and set(scales) == set(grads)
    for p, g in grads.items():
        assert scales[p].shape == g.shape, p
        assert np.all(scales[p] >= np.abs(g) - 1e-12), p


def test_unknown_contract_kind_is_refused() -> None:
    """A contract with no closed form gets one clear error naming it."""
    import dataclasses

    odd = dataclasses.replace(get_contract("attention"), name="odd", kind="other")
    with pytest.raises(ValueError, match="contract 'odd': no closed-form gradient"):
        gg.contract_gradients(
            odd, {"Q": np.ones((1, 1)), "K": np.ones((1, 1)), "V": np.ones((1, 1)), "mask": np.ones((1, 1), bool)}, 0.0
        )
