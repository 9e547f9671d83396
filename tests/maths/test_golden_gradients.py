"""The float64 closed-form gradients against torch autograd of the reference, over shapes and masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscore.boundary.gradients import NOT_DIFFERENTIATED
from attnscore.catalogue.families import differentiable
from attnscore.maths import golden_gradients as gg
from attnscore.maths import gradient_formulas as gf
from attnscore.maths import variants
from attnscore.maths.contracts import CONTRACTS, get_contract
from attnscore.maths.strategies import legend_sizes, random_args


def autograd(contract, args: dict[str, np.ndarray], d_out: np.ndarray) -> dict[str, np.ndarray]:
    """torch autograd of the reference in float64: the independent side of every comparison.

    ``contract`` is a contract or a name; only the parameters a gradient is asked for require grad
    (never a mask, the ALiBi slopes or an integer parameter, which stays int32)."""
    c = get_contract(contract) if isinstance(contract, str) else contract
    asked = c.differentiable_parameters
    tensors = {}
    for n in c.parameter_names:
        kind = torch.bool if n in c.bool_parameters else torch.int32 if n in c.int_parameters else torch.float64
        t = torch.tensor(args[n], dtype=kind)
        if n in asked:
            t.requires_grad_(True)
        tensors[n] = t
    out = c.reference(*tensors.values())
    out.backward(torch.tensor(d_out, dtype=torch.float64))
    return {n: tensors[n].grad.numpy() for n in asked}


@st.composite
def contract_case(draw, contract):
    c = get_contract(contract) if isinstance(contract, str) else contract
    sizes = draw(legend_sizes(c))
    args = draw(random_args(c, 3.0, sizes=sizes))
    shape = np.shape(c.golden(args))
    seed = draw(st.integers(0, 2**32 - 1))
    d_out = np.random.default_rng(seed).uniform(-2, 2, size=shape)
    return args, d_out


DIFFERENTIABLE = sorted(n for n, c in CONTRACTS.items() if differentiable(c))

CONFIGURATIONS = [
    pytest.param(c, id=f"{name}{''.join(f'-{k}={v}' for k, v in c.options)}-{'+'.join(c.parameter_names)}")
    for name in DIFFERENTIABLE
    for c in CONTRACTS[name].sample_configurations()
]


def test_every_contract_has_golden_gradients():
    """Every contract is differentiable with closed-form gradients, the keyword contracts included."""
    assert sorted(CONTRACTS) == DIFFERENTIABLE
    assert {"sdpa", "kernel_attention", "flash_attn"} <= set(DIFFERENTIABLE)


@pytest.mark.slow
@pytest.mark.parametrize("contract", CONFIGURATIONS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_contract_gradients_match_autograd(contract, data: st.DataObject) -> None:
    """Every contract in each sample configuration (SDPA's scale/GQA/causal, the kernel's softcap/ALiBi/causal,
    FlashAttention's window and causal): closed-form gradients equal torch autograd's in float64."""
    args, d_out = data.draw(contract_case(contract))
    want = autograd(contract, args, d_out)
    got = gg.contract_gradients(contract, args, d_out)
    assert set(got) == set(want) == set(contract.differentiable_parameters)
    for n in want:
        assert got[n].shape == np.shape(args[n]), n
        np.testing.assert_allclose(got[n], want[n], rtol=1e-9, atol=1e-9, err_msg=n)


def test_fully_masked_row_gets_no_gradient() -> None:
    """A query that keeps no key (output the constant 0) gives no gradient to Q, K or V."""
    Q = np.array([[1.0, 2.0], [0.5, -1.0]])
    K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    V = np.array([[1.0], [2.0], [4.0]])
    mask = np.array([[False, False, False], [True, False, True]])
    dQ, dK, dV = gf.attention(Q, K, V, mask, np.array([[5.0], [1.0]]))
    assert dQ[0].tolist() == [0.0, 0.0]
    assert dV[:, 0].tolist()[1] == 0.0  # key 1 is masked for every query: no gradient to its value
    assert np.all(dK[1] == 0.0)


def test_attention_worked_values() -> None:
    """Hand-checked: equal scores P = [1/2, 1/2], dV = Pᵀ dO, dK = scale·dSᵀ Q with dS = P(dP − D)."""
    dQ, dK, dV = gf.attention([[1.0]], [[0.0], [0.0]], [[1.0], [3.0]], None, [[1.0]], scale=1.0)
    # dP = dO Vᵀ = [1, 3]; D = Σ P dP = 2; dS = [½(1-2), ½(3-2)] = [-½, ½]
    assert (dQ.tolist(), dK.tolist(), dV.tolist()) == ([[0.0]], [[-0.5], [0.5]], [[0.5], [0.5]])


def test_broadcast_key_gets_the_summed_gradient() -> None:
    """A 2-D K shared by a batch of queries gets the sum of the batch's gradients, as autograd does."""
    rng = np.random.default_rng(3)
    Q, K = rng.normal(size=(3, 2, 4)), rng.normal(size=(5, 4))
    dS = rng.normal(size=(3, 2, 5))
    dQ, dK = gf.dot_products(Q, K, dS)
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
    got = gf.general_attention(q, k, v, d_out, d_lse, **options)
    for name, g, t in zip(("query", "key", "value"), got, (tq, tk, tv), strict=True):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-9, atol=1e-9, err_msg=name)


def test_variant_two_d_and_gqa_group_sum() -> None:
    """2-D inputs work; a KV head shared by two query heads gets both heads' gradients."""
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 3, 2)), rng.normal(size=(1, 4, 2)), rng.normal(size=(1, 4, 3))
    dO = rng.normal(size=(2, 3, 3))
    dq, dk, dv = gf.general_attention(q, k, v, dO)
    one = [gf.general_attention(q[h], k[0], v[0], dO[h]) for h in range(2)]
    np.testing.assert_allclose(dk[0], one[0][1] + one[1][1], rtol=1e-12)
    np.testing.assert_allclose(dv[0], one[0][2] + one[1][2], rtol=1e-12)
    np.testing.assert_allclose(dq[1], one[1][0], rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("contract", CONFIGURATIONS)
def test_gradient_scales_cover_the_gradients(contract) -> None:
    """Every scale has its gradient's shape and is at least the gradient's own magnitude (M >= |g|)."""
    c = contract
    rng = np.random.default_rng(1)
    from hypothesis import find

    floats = [n for n in c.parameter_names if n not in c.int_parameters]  # max_seqlen is one int
    args = find(random_args(c, 3.0), lambda a: all(np.size(a[n]) > 1 for n in floats))
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

    odd = dataclasses.replace(get_contract("attention"), name="odd", family="other")
    with pytest.raises(ValueError, match="contract 'odd': no closed-form gradient"):
        gg.contract_gradients(
            odd, {"Q": np.ones((1, 1)), "K": np.ones((1, 1)), "V": np.ones((1, 1)), "mask": np.ones((1, 1), bool)}, 0.0
        )


def _kernel(options, kept=("query", "key", "value")):
    return get_contract("kernel_attention").configured(options, kept)


def test_sdpa_gqa_key_and_value_gradients_sum_over_the_group() -> None:
    """SDPA with enable_gqa: dK and dV of a KV head are the sums over its query heads (h0 h0 h1 h1)."""
    c = get_contract("sdpa").configured({"enable_gqa": True, "scale": 0.5}, ("query", "key", "value"))
    rng = np.random.default_rng(4)
    a = {"query": rng.normal(size=(4, 3, 2)), "key": rng.normal(size=(2, 5, 2)), "value": rng.normal(size=(2, 5, 3))}
    dO = rng.normal(size=(4, 3, 3))
    g = gg.contract_gradients(c, a, dO)
    for kv in range(2):
        heads = [
            gf.attention(a["query"][h], a["key"][kv], a["value"][kv], None, dO[h], 0.5) for h in (2 * kv, 2 * kv + 1)
        ]  # noqa: E501
        np.testing.assert_allclose(g["key"][kv], heads[0][1] + heads[1][1], rtol=1e-12)
        np.testing.assert_allclose(g["value"][kv], heads[0][2] + heads[1][2], rtol=1e-12)
        np.testing.assert_allclose(g["query"][2 * kv + 1], heads[1][0], rtol=1e-12)


def test_softcap_chain_rule_by_hand() -> None:
    """Softcap: dS_raw = dS_capped · (1 − tanh²(s/cap)); one query, two keys, hand-checked."""
    cap, s1 = 2.0, 1.0  # scores s = [0, 1] (scale 1): capped [0, 2·tanh(0.5)]
    c = _kernel({"softcap": cap, "scale": 1.0})
    a = {"query": np.array([[[1.0]]]), "key": np.array([[[0.0], [s1]]]), "value": np.array([[[1.0], [3.0]]])}
    g = gg.contract_gradients(c, a, np.array([[[1.0]]]))
    capped = cap * np.tanh(s1 / cap)
    P = np.exp([0.0, capped]) / np.exp([0.0, capped]).sum()
    dP = np.array([1.0, 3.0])  # dO Vᵀ
    dS_capped = P * (dP - P @ dP)
    dS_raw = dS_capped * (1.0 - np.tanh(np.array([0.0, s1]) / cap) ** 2)
    assert g["key"][0, :, 0].tolist() == pytest.approx((dS_raw * 1.0).tolist(), rel=1e-12)  # dK_j = dS_j q
    assert g["query"][0, 0, 0] == pytest.approx(dS_raw @ np.array([0.0, s1]), rel=1e-12)  # dQ = Σ_j dS_j k_j
    # without the derivative of tanh, dK would be dS_capped: a different number
    assert abs(dS_capped[1] - dS_raw[1]) > 0.05


def test_flash_layout_gradients_are_in_its_own_layout() -> None:
    """flash_attn's gradients come back (b, n, h, d), equal to the heads-first ones transposed."""
    c = get_contract("flash_attn").configured({"window_size": [1, 0]})
    rng = np.random.default_rng(5)
    a = {"q": rng.normal(size=(1, 3, 2, 4)), "k": rng.normal(size=(1, 5, 1, 4)), "v": rng.normal(size=(1, 5, 1, 2))}
    dO = rng.normal(size=(1, 3, 2, 2))
    g = gg.contract_gradients(c, a, dO)
    assert {n: x.shape for n, x in g.items()} == {"q": (1, 3, 2, 4), "k": (1, 5, 1, 4), "v": (1, 5, 1, 2)}
    t = [np.swapaxes(x, 1, 2) for x in (a["q"], a["k"], a["v"], dO)]
    dq, dk, dv = gf.general_attention(*t, is_causal=False, alignment="bottom_right", window=(1, 0))
    np.testing.assert_allclose(g["k"], np.swapaxes(dk, 1, 2), rtol=1e-12)
    np.testing.assert_allclose(g["q"], np.swapaxes(dq, 1, 2), rtol=1e-12)
    # the first key is outside every query's window [i + 2 - 1, i + 2]: no gradient reaches it
    assert np.all(g["k"][:, 0] == 0.0) and np.all(g["v"][:, 0] == 0.0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "contract, left_out",
    [
        pytest.param(get_contract("sdpa"), "attn_mask", id="sdpa bool attn_mask"),
        pytest.param(get_contract("kernel_attention"), "alibi_slopes", id="ALiBi slopes"),
        pytest.param(get_contract("attention"), "mask", id="attention mask"),
        pytest.param(get_contract("attention_weights"), "mask", id="weights mask"),
    ],
)
def test_masks_and_slopes_are_never_differentiated(contract, left_out) -> None:
    """A mask (bool, or a float attn_mask) and the ALiBi slopes get no golden gradient: never asked for."""
    assert left_out in contract.parameter_names
    assert left_out not in contract.differentiable_parameters
    from hypothesis import find

    args = find(random_args(contract, 3.0), lambda a: True)
    d_out = np.ones(np.shape(contract.golden(args)))
    assert left_out not in gg.contract_gradients(contract, args, d_out)
    assert left_out not in gg.contract_gradient_scales(contract, args, d_out)[1]
    assert "attn_mask" in NOT_DIFFERENTIATED  # a float attn_mask too, whatever its dtype


def test_alibi_slopes_shift_the_gradients_but_get_none() -> None:
    """With ALiBi the gradients are those of the biased scores (as autograd), and the slopes get none."""
    c = get_contract("kernel_attention")
    rng = np.random.default_rng(6)
    a = {"query": rng.normal(size=(2, 3, 2)), "key": rng.normal(size=(1, 4, 2)), "value": rng.normal(size=(1, 4, 2)),
         "alibi_slopes": np.array([0.5, 0.25])}  # fmt: skip
    dO = rng.normal(size=(2, 3, 2))
    with_bias = gg.contract_gradients(c, a, dO)
    without = gg.contract_gradients(_kernel({}), {n: a[n] for n in ("query", "key", "value")}, dO)
    assert set(with_bias) == {"query", "key", "value"}
    assert not np.allclose(with_bias["query"], without["query"])
    want = autograd(c, a, dO)
    for n in want:
        np.testing.assert_allclose(with_bias[n], want[n], rtol=1e-9, atol=1e-12)


def test_keyword_options_refuse_other_contracts() -> None:
    """keyword_attention_options names a contract that is not a keyword contract."""
    with pytest.raises(ValueError, match="contract 'attention': not a keyword contract"):
        gg.keyword_attention_options(get_contract("attention"), {})


@pytest.mark.parametrize("stem", ["sdpa", "sdpa_causal", "gqa", "softcap", "alibi", "sliding_window", "kv_cache"])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_bundled_keyword_spec_gradients_match_autograd(stem: str, data: st.DataObject) -> None:
    """Each bundled keyword spec's own configuration (its keywords, ties and kept parameters): as autograd."""
    contract = _bundled(stem)
    args, d_out = data.draw(contract_case(contract))
    want = autograd(contract, args, d_out)
    got = gg.contract_gradients(contract, args, d_out)
    assert set(got) == set(want)
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-9, atol=1e-9, err_msg=n)


_BUNDLED: dict = {}


def _bundled(stem: str):
    """The contract of specs/<stem>.yaml, loaded once."""
    from attnscore.spec.load import load_spec

    if stem not in _BUNDLED:
        _BUNDLED[stem] = load_spec(f"specs/{stem}.yaml").contract
    return _BUNDLED[stem]
