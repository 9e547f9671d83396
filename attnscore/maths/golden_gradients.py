"""Golden gradients: the backward pass of every contract and variant in float64 numpy, by closed forms.

Shape legend: ``...`` batch dims, ``H_q``/``H_kv`` query and key/value heads, ``n_q`` queries,
``n_k`` keys, ``d_k`` query/key width, ``d_v`` value width. ``d_*`` is the gradient of a scalar
loss ``ℓ`` with respect to ``*``; the upstream gradient ``d_out`` (``dO``) is that of the output.

torch is never imported: these are the closed forms, so a wrong autograd graph in the torch
reference and a wrong formula here would have to agree to go unnoticed (the tests compare the two
in float64). With ``S = scale · Q Kᵀ`` (masked entries ``-inf``), ``P = softmax(S)`` row-wise and
``O = P V``:

- ``dV = Pᵀ dO`` and ``dP = dO Vᵀ``;
- ``dS = P ⊙ (dP − D)`` with ``D = rowsum(dP ⊙ P) = rowsum(dO ⊙ O)`` (the softmax Jacobian);
  a masked entry has ``P = 0``, so it gets no gradient, and a fully masked row (output the constant
  zero vector) gets none at all;
- ``dQ = scale · dS K`` and ``dK = scale · dSᵀ Q``.

Source: the softmax Jacobian ``∂p_i/∂s_j = p_i (δ_ij − p_j)``; Dao (2023), FlashAttention-2,
Algorithm 2 (the same ``D`` and ``dS``). Batch dims that broadcast (a 2-D ``K`` against a 3-D
``Q``) get the sum of the gradient over the dims they were broadcast along, as autograd gives.

Besides the gradients, :func:`contract_gradient_scales` gives per entry of each gradient the
magnitude ``M`` of the same computation carried out on absolute values (every difference made a
sum, each softmax weight with its own rounding error), and the length ``n`` of its longest sum:
the allowed error is about ``factor · n · u · M`` (:mod:`attnscore.maths.tolerance`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from attnscore.boundary import gradients as boundary_gradients
from attnscore.boundary.dtypes import LOW_PRECISION, SMALLEST_SUBNORMAL, UNIT_ROUNDOFF
from attnscore.maths import golden, golden_variants
from attnscore.maths.contracts import Contract
from attnscore.maths.tolerance import Tolerance, allowed_error

__all__ = [
    "dot_products",
    "scaled_dot_products",
    "bilinear",
    "additive",
    "masked",
    "softmax_weights",
    "attention",
    "causal_attention",
    "general_attention",
    "NOT_DIFFERENTIATED",
    "KEYWORD_KINDS",
    "keyword_attention_options",
    "keyword_gradients",
    "keyword_gradient_scales",
    "varlen_gradients",
    "varlen_gradient_scales",
    "differentiable_parameters",
    "contract_gradients",
    "contract_gradient_scales",
    "gradient_allowed",
]

Args = Mapping[str, np.ndarray]


def _f64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` over the dims that ``shape`` was broadcast along (leading ones and size-1 ones)."""
    g = np.asarray(g)
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    ones = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if ones:
        g = g.sum(axis=ones, keepdims=True)
    return g.reshape(shape)


def _keep(mask: Any, shape: tuple[int, ...]) -> np.ndarray:
    if mask is None:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(np.asarray(mask, dtype=bool), shape)


def dot_products(Q: Any, K: Any, dS: Any) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of ``S = Q Kᵀ``: ``dQ = dS K`` ``(..., n_q, d_k)``, ``dK = dSᵀ Q`` ``(..., n_k, d_k)``.

    Example (one query, two keys, the upstream picks the second score):
        >>> dQ, dK = dot_products([[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]], [[0.0, 1.0]])
        >>> dQ.tolist(), dK.tolist()
        ([[5.0, 6.0]], [[0.0, 0.0], [1.0, 2.0]])
    """
    Q, K, dS = _f64(Q), _f64(K), _f64(dS)
    dQ = np.einsum("...ij,...jd->...id", dS, K)  # (..., n_q, n_k) @ (..., n_k, d_k)
    dK = np.einsum("...ij,...id->...jd", dS, Q)  # (..., n_k, n_q) @ (..., n_q, d_k)
    return _unbroadcast(dQ, Q.shape), _unbroadcast(dK, K.shape)


def scaled_dot_products(Q: Any, K: Any, dS: Any) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of ``S = Q Kᵀ / √d_k``: those of :func:`dot_products` divided by ``√d_k``."""
    root = np.sqrt(np.shape(Q)[-1])
    dQ, dK = dot_products(Q, K, dS)
    return dQ / root, dK / root


def bilinear(Q: Any, K: Any, W: Any, dS: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ``S = Q W Kᵀ``: ``dQ = dS K Wᵀ``, ``dK = dSᵀ Q W``, ``dW = Σ_batch Qᵀ dS K`` ``(d_q, d_k)``."""
    Q, K, W, dS = _f64(Q), _f64(K), _f64(W), _f64(dS)
    dQ = np.einsum("...ij,...jb,ab->...ia", dS, K, W)
    dK = np.einsum("...ij,...ia,ab->...jb", dS, Q, W)
    dW = np.einsum("...ij,...ia,...jb->...ab", dS, Q, K)
    return _unbroadcast(dQ, Q.shape), _unbroadcast(dK, K.shape), _unbroadcast(dW, W.shape)


def additive(
    Q: Any, K: Any, W_q: Any, W_k: Any, v: Any, dS: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ``S_ij = vᵀ tanh(W_q q_i + W_k k_j)``: ``(dQ, dK, dW_q, dW_k, dv)``.

    With ``t = tanh(h)``, ``h_ija = (W_q q_i)_a + (W_k k_j)_a``: ``dv = Σ_ij dS_ij t_ij``,
    ``dh_ija = dS_ij v_a (1 − t_ija²)``, ``dq_i = Σ_j dh_ij W_q``, ``dk_j = Σ_i dh_ij W_k``,
    ``dW_q = Σ_ij dh_ij q_iᵀ``, ``dW_k = Σ_ij dh_ij k_jᵀ``.
    """
    Q, K, W_q, W_k, v, dS = _f64(Q), _f64(K), _f64(W_q), _f64(W_k), _f64(v), _f64(dS)
    qp = np.einsum("...id,ad->...ia", Q, W_q)  # (..., n_q, d_a)
    kp = np.einsum("...jd,ad->...ja", K, W_k)  # (..., n_k, d_a)
    t = np.tanh(qp[..., :, None, :] + kp[..., None, :, :])  # (..., n_q, n_k, d_a)
    dh = dS[..., None] * v * (1.0 - t * t)  # (..., n_q, n_k, d_a)
    dq_proj = dh.sum(axis=-2)  # (..., n_q, d_a)
    dk_proj = dh.sum(axis=-3)  # (..., n_k, d_a)
    dQ = np.einsum("...ia,ad->...id", dq_proj, W_q)
    dK = np.einsum("...ja,ad->...jd", dk_proj, W_k)
    dW_q = np.einsum("...ia,...id->...ad", dq_proj, np.broadcast_to(Q, (*dq_proj.shape[:-1], Q.shape[-1])))
    dW_k = np.einsum("...ja,...jd->...ad", dk_proj, np.broadcast_to(K, (*dk_proj.shape[:-1], K.shape[-1])))
    dv = np.einsum("...ij,...ija->...a", dS, t)
    return (
        _unbroadcast(dQ, Q.shape),
        _unbroadcast(dK, K.shape),
        _unbroadcast(dW_q, W_q.shape),
        _unbroadcast(dW_k, W_k.shape),
        _unbroadcast(dv, v.shape),
    )


def masked(S: Any, mask: Any, d_out: Any) -> np.ndarray:
    """Gradient of ``masked_fill(S, ~mask, -inf)`` with respect to ``S``: ``d_out`` where kept, 0 where masked."""
    S = _f64(S)
    return _unbroadcast(np.where(_keep(mask, np.broadcast_shapes(S.shape, np.shape(d_out))), _f64(d_out), 0.0), S.shape)


def _softmax_backward(P: np.ndarray, dP: np.ndarray) -> np.ndarray:
    """``dS = P ⊙ (dP − rowsum(dP ⊙ P))``: 0 wherever ``P`` is 0 (masked keys, fully masked rows)."""
    D = np.sum(dP * P, axis=-1, keepdims=True)  # (..., n_q, 1)
    return P * (dP - D)


def softmax_weights(S: Any, mask: Any, d_out: Any) -> np.ndarray:
    """Gradient of the masked softmax ``P`` (:func:`attnscore.maths.golden.softmax_weights`) w.r.t. ``S``.

    Example (two equal scores: ``P = [½, ½]``; pushing the first weight up moves the scores apart):
        >>> softmax_weights([[0.0, 0.0]], None, [[1.0, 0.0]]).tolist()
        [[0.25, -0.25]]
    """
    S = _f64(S)
    P = golden.softmax_weights(S, mask)
    return _unbroadcast(_softmax_backward(P, _f64(d_out)), S.shape)


def attention(
    Q: Any, K: Any, V: Any, mask: Any, d_out: Any, scale: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ``O = softmax(scale · Q Kᵀ, masked) V``: ``(dQ, dK, dV)`` (module docstring's forms).

    Args:
        Q: ``(..., n_q, d_k)``; K: ``(..., n_k, d_k)``; V: ``(..., n_k, d_v)``.
        mask: bool, True = keep, broadcasting to ``(..., n_q, n_k)``, or None.
        d_out: ``(..., n_q, d_v)``, the upstream gradient ``dO``.
        scale: the factor on ``Q Kᵀ``; None means ``1/√d_k``.

    Returns:
        float64 arrays of the shapes of ``Q``, ``K`` and ``V``.

    Example (one query, two keys with equal scores, so ``P = [½, ½]``):
        >>> dQ, dK, dV = attention([[1.0]], [[0.0], [0.0]], [[1.0], [3.0]], None, [[1.0]], scale=1.0)
        >>> dQ.tolist(), dK.tolist(), dV.tolist()
        ([[0.0]], [[-0.5], [0.5]], [[0.5], [0.5]])
    """
    Q, K, V, dO = _f64(Q), _f64(K), _f64(V), _f64(d_out)
    s = 1.0 / np.sqrt(Q.shape[-1]) if scale is None else float(scale)
    P = golden.softmax_weights(s * golden.dot_products(Q, K), mask)  # (..., n_q, n_k)
    dV = np.einsum("...ij,...id->...jd", P, dO)  # Pᵀ dO: (..., n_k, d_v)
    dP = np.einsum("...id,...jd->...ij", dO, V)  # dO Vᵀ: (..., n_q, n_k)
    dS = _softmax_backward(P, dP)
    dQ = s * np.einsum("...ij,...jd->...id", dS, K)
    dK = s * np.einsum("...ij,...id->...jd", dS, Q)
    return _unbroadcast(dQ, Q.shape), _unbroadcast(dK, K.shape), _unbroadcast(dV, V.shape)


def causal_attention(Q: Any, K: Any, V: Any, alignment: str, d_out: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of causal attention (``"top_left"`` or ``"bottom_right"``): :func:`attention` with the causal mask."""
    keep = golden.causal_keep(np.shape(Q)[-2], np.shape(K)[-2], alignment)
    return attention(Q, K, V, keep, d_out)


def general_attention(
    query: Any, key: Any, value: Any, d_out: Any, d_lse: Any = None, **options: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of :func:`attnscore.maths.golden_variants.general_attention_parts` (every variant):
    ``(d_query, d_key, d_value)``.

    Args:
        query, key, value: as there (``(..., H_q, n_q, d_k)``, ``(..., H_kv, n_k, d_k)``,
            ``(..., H_kv, n_k, d_v)``, or 2-D for one head).
        d_out: ``(..., H_q, n_q, d_v)``, the upstream gradient of the output.
        d_lse: optional ``(..., H_q, n_q)``, the upstream gradient of the logsumexp
            (``∂ lse_i / ∂ biased_ij = P_ij``), for a backward that also differentiates the saved ``L``.
        options: the variant options of ``general_attention_parts`` (``attn_mask``, ``is_causal``,
            ``alignment``, ``window``, ``scale``, ``softcap``, ``alibi_slopes``, ``key_lengths``).

    Returns:
        float64 arrays of the shapes of ``query``, ``key`` and ``value``. A key/value head shared by
        a group of query heads gets the sum of its group's gradients; a softcap multiplies the
        score gradient by ``1 − tanh²(s / cap)``; the mask, slopes and lengths get none (a float
        mask's gradient, ``dS``, is never asked for).

    Raises:
        ValueError: as ``general_attention_parts``.
    """
    Q, K, V = _f64(query), _f64(key), _f64(value)
    if Q.ndim == 2:
        slopes = options.pop("alibi_slopes", None)
        dq, dk, dv = general_attention(
            Q[None], K[None], V[None], _f64(d_out)[None], None if d_lse is None else _f64(d_lse)[None],
            alibi_slopes=None if slopes is None else np.reshape(_f64(slopes), (1,)), **options,
        )  # fmt: skip
        return dq[0], dk[0], dv[0]
    parts = golden_variants.general_attention_parts(Q, K, V, **options)
    H_q, d_k = Q.shape[-3], Q.shape[-1]
    group = H_q // K.shape[-3]
    kv_head = np.arange(H_q) // group
    K_h, V_h = K[..., kv_head, :, :], V[..., kv_head, :, :]  # (..., H_q, n_k, d)
    P = parts.weights  # (*batch, H_q, n_q, n_k)
    dO = _f64(d_out)
    dV_h = np.einsum("...ij,...id->...jd", P, dO)  # (*batch, H_q, n_k, d_v)
    dP = np.einsum("...id,...jd->...ij", dO, V_h)
    dB = _softmax_backward(P, dP)
    if d_lse is not None:
        dB = dB + P * _f64(d_lse)[..., None]
    scale = options.get("scale")
    s = 1.0 / np.sqrt(d_k) if scale is None else float(scale)
    softcap = options.get("softcap")
    if softcap is not None:
        t = np.tanh(parts.scores / float(softcap))
        dB = dB * (1.0 - t * t)  # d(cap·tanh(x/cap))/dx
    dQ = s * np.einsum("...ij,...jd->...id", dB, K_h)
    dK_h = s * np.einsum("...ij,...id->...jd", dB, Q)  # (*batch, H_q, n_k, d_k)

    def per_kv_head(g: np.ndarray) -> np.ndarray:
        return g.reshape(*g.shape[:-3], K.shape[-3], group, *g.shape[-2:]).sum(axis=-3)

    return _unbroadcast(dQ, Q.shape), _unbroadcast(per_kv_head(dK_h), K.shape), _unbroadcast(per_kv_head(dV_h), V.shape)


NOT_DIFFERENTIATED = boundary_gradients.NOT_DIFFERENTIATED
"""Float parameters whose gradient is never asked for (a mask, the ALiBi slopes): the boundary's own
set, so the grader never asks for what the worker does not differentiate."""

KEYWORD_KINDS = ("sdpa", "kernel_attention", "flash", "key_padding")
"""The kinds of the keyword contracts (:mod:`attnscore.maths.variant_contracts`,
:mod:`attnscore.maths.sequence_contracts`, key padding in :mod:`attnscore.maths.varlen_contracts`),
whose gradients are :func:`keyword_gradients`; packed varlen batches (kind ``flash_varlen``) are
:func:`varlen_gradients`."""


def differentiable_parameters(contract: Contract) -> tuple[str, ...]:
    """The contract's parameters a gradient is asked for, in parameter order: all but its bool
    masks and :data:`NOT_DIFFERENTIATED` (a float ``attn_mask``, ``alibi_slopes``).

    >>> from attnscore.maths.contracts import get_contract
    >>> differentiable_parameters(get_contract("kernel_attention"))
    ('query', 'key', 'value')
    """
    skipped = contract.bool_parameters | contract.int_parameters | NOT_DIFFERENTIATED  # masks, lengths, offsets
    return tuple(n for n in contract.parameter_names if n not in skipped)


def _alignment(contract: Contract) -> str:
    return "top_left" if contract.name.endswith("top_left") else "bottom_right"


def contract_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    """The float64 gradients of ``contract``'s output with respect to each differentiable parameter.

    Args:
        contract: a contract of :data:`attnscore.maths.contracts.CONTRACTS` (keyed by its own
            parameter names, not a spec's renaming).
        args: the call's arguments (already cast to the tested dtype).
        d_out: the upstream gradient, of the output's shape (``()`` for ``score``).

    Returns:
        ``{parameter: gradient}`` for :func:`differentiable_parameters`, each of its argument's shape.

    Raises:
        ValueError: a contract with no closed form here (none of the bundled ones).

    Example (``score(q, k) = q · k``: ``dq = dO·k``, ``dk = dO·q``):
        >>> from attnscore.maths.contracts import get_contract
        >>> g = contract_gradients(get_contract("score"), {"q": np.array([1.0, 2.0]), "k": np.array([3.0, 4.0])}, 2.0)
        >>> g["q"].tolist(), g["k"].tolist()
        ([6.0, 8.0], [2.0, 4.0])
    """
    if contract.kind in KEYWORD_KINDS:
        return keyword_gradients(contract, args, d_out)
    if contract.kind == "flash_varlen":
        return varlen_gradients(contract, args, d_out)
    a = {n: np.asarray(args[n]) for n in contract.parameter_names}
    dO = _f64(d_out)
    if contract.is_qk_view:
        assert contract.to_qk is not None and contract.pack is not None
        Q, K = contract.to_qk(a)
        dS = dO.reshape(Q.shape[:-2] + (Q.shape[-2], K.shape[-2])) if dO.ndim < 2 else dO
        grad = scaled_dot_products if contract.scale == "sqrt" else dot_products
        dQ, dK = grad(Q, K, dS)
        return {n: np.asarray(g, dtype=np.float64) for n, g in contract.pack(dQ, dK).items()}
    if contract.kind == "scores" and "W" in a:
        return dict(zip(("Q", "K", "W"), bilinear(a["Q"], a["K"], a["W"], dO), strict=True))
    if contract.kind == "scores" and "v" in a:
        parts = additive(a["Q"], a["K"], a["W_q"], a["W_k"], a["v"], dO)
        return dict(zip(("Q", "K", "W_q", "W_k", "v"), parts, strict=True))
    if contract.kind == "mask":
        return {"S": masked(a["S"], a["mask"], dO)}
    if contract.kind == "weights":
        return {"S": softmax_weights(a["S"], a["mask"], dO)}
    if contract.kind == "attention":
        return dict(zip(("Q", "K", "V"), attention(a["Q"], a["K"], a["V"], a["mask"], dO), strict=True))
    if contract.kind == "causal":
        grads = causal_attention(a["Q"], a["K"], a["V"], _alignment(contract), dO)
        return dict(zip(("Q", "K", "V"), grads, strict=True))
    if contract.kind == "flash_attention_2":
        return contract_gradients(_attention(), _flash_as_attention(contract, a), dO)
    raise ValueError(f"contract {contract.name!r}: no closed-form gradient (kind {contract.kind!r})")


def _weights_rounding(S: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``P ⊙ (1 + |s| + |max s|)``: each weight with the size of its own rounding error (relative)."""
    P = np.nan_to_num(golden.softmax_weights(S, keep))
    with np.errstate(invalid="ignore"):
        z = np.where(keep & np.isfinite(S), S, -np.inf)
        m = np.max(z, axis=-1, keepdims=True, initial=-np.inf)
        ok = keep & np.isfinite(z - m)
        spread = np.where(ok, np.abs(z) + np.abs(np.where(np.isfinite(m), m, 0.0)), 0.0)
    return P * (1.0 + spread)


def _clean(x: np.ndarray) -> np.ndarray:
    return np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)


def contract_gradient_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    """``(n, {parameter: M})``: the error scale of each gradient entry.

    ``M`` is the gradient's computation on absolute values, every difference made a sum (the
    softmax Jacobian's ``dP − D`` becomes ``|dP| + |D|``), each softmax weight carried with its own
    rounding error ``P ⊙ (1 + |s| + |max s|)``, and for attention the scores' own error
    ``d_k · Σ|q_i k_i| · scale`` on top; ``n`` is the longest sum's length. A backward-stable
    implementation's error is at most about ``factor · n · u · M`` per entry. The keyword
    contracts (``sdpa``, ``kernel_attention``, ``flash_attn``): :func:`keyword_gradient_scales`.
    """
    if contract.kind in KEYWORD_KINDS:
        return keyword_gradient_scales(contract, args, d_out)
    if contract.kind == "flash_varlen":
        return varlen_gradient_scales(contract, args, d_out)
    a = {
        n: _clean(args[n]) if n not in contract.bool_parameters else np.asarray(args[n])
        for n in contract.parameter_names
    }
    dO = np.abs(_clean(d_out))
    if contract.is_qk_view or (contract.kind == "scores" and "W" in a):
        absolute = {n: (np.abs(x) if n not in contract.bool_parameters else x) for n, x in a.items()}
        grads = contract_gradients(contract, absolute, dO)
        if contract.is_qk_view:
            assert contract.to_qk is not None
            Q, K = contract.to_qk(a)
            n = int(max(Q.shape[-2], K.shape[-2])) + 2
        else:
            n = int(np.shape(a["K"])[-2] + np.shape(a["Q"])[-2] + np.shape(a["W"])[0] + np.shape(a["W"])[1])
        return n, grads
    if contract.kind == "scores":  # additive: |dS||v| through |W|, with the tanh's own error
        Q, K, W_q, W_k, v = (np.abs(a[n]) for n in ("Q", "K", "W_q", "W_k", "v"))
        hmag = (
            np.einsum("...id,ad->...ia", Q, W_q)[..., :, None, :]
            + np.einsum("...jd,ad->...ja", K, W_k)[..., None, :, :]
        )
        dh = dO[..., None] * v * (1.0 + hmag)  # (..., n_q, n_k, d_a)
        dq_proj, dk_proj = dh.sum(axis=-2), dh.sum(axis=-3)
        dW_q = np.einsum("...ia,...id->...ad", dq_proj, np.broadcast_to(Q, (*dq_proj.shape[:-1], Q.shape[-1])))
        dW_k = np.einsum("...ja,...jd->...ad", dk_proj, np.broadcast_to(K, (*dk_proj.shape[:-1], K.shape[-1])))
        dv = np.sum(dO) * np.ones_like(v)  # |tanh| <= 1: dv_a <= Σ_ij |dS_ij|
        grads = {
            "Q": _unbroadcast(np.einsum("...ia,ad->...id", dq_proj, W_q), Q.shape),
            "K": _unbroadcast(np.einsum("...ja,ad->...jd", dk_proj, W_k), K.shape),
            "W_q": _unbroadcast(dW_q, W_q.shape),
            "W_k": _unbroadcast(dW_k, W_k.shape),
            "v": dv,
        }
        n = int(Q.shape[-1] + K.shape[-2] + Q.shape[-2] + v.shape[-1] + 4)
        return n, grads
    if contract.kind == "mask":
        return 1, {"S": np.zeros(np.shape(a["S"]))}
    if contract.kind == "weights":
        S = a["S"]
        keep = _keep(a["mask"], S.shape)
        A = _weights_rounding(_f64(args["S"]), keep)
        D = np.sum(dO * A, axis=-1, keepdims=True)
        return int(S.shape[-1]) + 2, {"S": _unbroadcast(A * (dO + D), S.shape)}
    if contract.kind in ("attention", "causal"):
        Q, K, V = (_f64(args[n]) for n in ("Q", "K", "V"))
        n_q, n_k, d_k, d_v = Q.shape[-2], K.shape[-2], Q.shape[-1], V.shape[-1]
        keep_arg = a["mask"] if contract.kind == "attention" else golden.causal_keep(n_q, n_k, _alignment(contract))
        s = 1.0 / np.sqrt(d_k)
        with np.errstate(invalid="ignore", over="ignore"):
            S = s * golden.dot_products(Q, K)
            keep = _keep(keep_arg, S.shape)
            A = _weights_rounding(S, keep) + np.nan_to_num(golden.softmax_weights(S, keep)) * _clean(
                d_k * s * golden.dot_magnitudes(Q, K)
            )
        aQ, aK, aV = np.abs(_clean(Q)), np.abs(_clean(K)), np.abs(_clean(V))
        dV = np.einsum("...ij,...id->...jd", A, dO)
        dP = np.einsum("...id,...jd->...ij", dO, aV)
        D = np.sum(dP * A, axis=-1, keepdims=True)
        dS = A * (dP + D)
        dQ = s * np.einsum("...ij,...jd->...id", dS, aK)
        dK = s * np.einsum("...ij,...id->...jd", dS, aQ)
        grads = {"Q": _unbroadcast(dQ, Q.shape), "K": _unbroadcast(dK, K.shape), "V": _unbroadcast(dV, V.shape)}
        return int(d_k + n_k + d_v + n_q) + 2, grads
    if contract.kind == "flash_attention_2":
        return contract_gradient_scales(_attention(), _flash_as_attention(contract, args), d_out)
    raise ValueError(f"contract {contract.name!r}: no closed-form gradient (kind {contract.kind!r})")


def _attention() -> Contract:
    """The plain ``attention`` contract (imported at use: the contract table is built after this module)."""
    from attnscore.maths.contracts import get_contract

    return get_contract("attention")


def _flash_as_attention(contract: Contract, args: Args) -> dict[str, np.ndarray]:
    """A FlashAttention-2 call's arguments as plain ``attention``'s: its causal flag as a mask."""
    Q, K = np.asarray(args["Q"]), np.asarray(args["K"])
    n_q, n_k = Q.shape[-2], K.shape[-2]
    keep = golden.causal_keep(n_q, n_k, "top_left") if contract.option("is_causal") else np.ones((n_q, n_k), bool)
    return {"Q": Q, "K": K, "V": np.asarray(args["V"]), "mask": keep}


def gradient_allowed(
    tol: Tolerance,
    golden_grad: np.ndarray,
    scale: np.ndarray,
    n: int,
    dtype: str,
    reference_grad: np.ndarray | None = None,
) -> np.ndarray:
    """Per-entry allowed absolute error of one gradient, same shape as ``golden_grad`` (float64).

    Args:
        tol: the spec's tolerance.
        golden_grad: the float64 gradient (:func:`contract_gradients`).
        scale, n: its error scale ``M`` and sum length (:func:`contract_gradient_scales`).
        dtype: the tested dtype.
        reference_grad: for float16/bfloat16, the reference's own gradient computed in ``dtype``
            (torch autograd of the reference); required there.

    Rules: ``close`` is the dtype's ``close`` rule on the gradient; otherwise (``dot_bound``,
    ``exact``, ``ratio`` in float32/float64) ``factor · n · u · M + u·|g| + (n + 1)`` subnormals,
    with the spec's factor (2 for ``exact``: a gradient is rarely exact where the forward is). In
    float16/bfloat16 the ratio rule, as forward (FlashAttention's tests): at most ``factor`` (the
    spec's for ``ratio``, else 2) times the reference's own largest error in that dtype, with the
    dtype's ``close`` atol, one ulp of each entry and one low-precision rounding of each term summed in
    float32 (``u·M + n·u_fp32·M``) as floors.

    Raises:
        ValueError: a float16/bfloat16 dtype without ``reference_grad``.

    Example (float32, a gradient entry of 1 with magnitude 1 over 2 terms, factor 2):
        >>> allowed = gradient_allowed(Tolerance(), np.array([1.0]), np.array([1.0]), 2, "float32")
        >>> float(allowed[0] / 2**-24).__round__(6)
        5.0
    """
    g = np.nan_to_num(np.asarray(golden_grad, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    M = _clean(scale)
    u = UNIT_ROUNDOFF[dtype]
    if tol.mode == "close":
        return allowed_error(tol, g, dtype, n, M)
    if dtype in LOW_PRECISION:
        if reference_grad is None:
            raise ValueError(f"gradient_allowed: {dtype} needs the reference's own {dtype} gradient (ratio rule)")
        factor = tol.factor if tol.mode == "ratio" else 2.0
        ratio = Tolerance("ratio", factor=factor).ratio_allowed(g, reference_grad, dtype)
        floor = u * M + max(n, 1) * UNIT_ROUNDOFF["float32"] * M + u * np.abs(g)
        return np.maximum(ratio, floor + (n + 1) * SMALLEST_SUBNORMAL[dtype])
    factor = 2.0 if tol.mode == "exact" else tol.factor
    return factor * max(n, 1) * u * M + u * np.abs(g) + (n + 1) * SMALLEST_SUBNORMAL[dtype]


def keyword_attention_options(contract: Contract, args: Args) -> dict[str, Any]:
    """The :func:`attnscore.maths.golden_variants.general_attention_parts` options of a configured
    keyword contract (``sdpa``: ``attn_mask``, ``is_causal`` top-left, ``scale``; ``kernel_attention``:
    ``is_causal`` bottom-right, ``scale``, ``softcap``, ``alibi_slopes``; ``flash_attn``: ``causal``
    bottom-right, ``window_size``, ``softmax_scale``), its arguments taken from ``args``.

    Raises:
        ValueError: a contract that is not one of :data:`KEYWORD_KINDS`.
    """
    if contract.kind == "sdpa":
        return {
            "attn_mask": args.get("attn_mask"),
            "is_causal": bool(contract.option("is_causal")),
            "alignment": "top_left",
            "scale": contract.option("scale"),
        }
    if contract.kind == "kernel_attention":
        slopes = args.get("alibi_slopes")
        return {
            "is_causal": bool(contract.option("is_causal")),
            "alignment": "bottom_right",
            "scale": contract.option("scale"),
            "softcap": contract.option("softcap"),
            "alibi_slopes": None if slopes is None else _f64(slopes),
        }
    if contract.kind == "key_padding":
        return {"key_lengths": np.asarray(args["key_lengths"], dtype=np.int64), "scale": contract.option("scale")}
    if contract.kind == "flash":
        return {
            "is_causal": bool(contract.option("causal")),
            "alignment": "bottom_right",
            "window": tuple(int(x) for x in contract.option("window_size")),
            "scale": contract.option("softmax_scale"),
        }
    raise ValueError(f"contract {contract.name!r}: not a keyword contract (kind {contract.kind!r})")


def _heads_first(contract: Contract, x: Any) -> np.ndarray:
    """``flash_attn``'s ``(b, n, h, d)`` as ``(b, h, n, d)`` (its own inverse); others unchanged."""
    x = _f64(x)
    return np.swapaxes(x, -3, -2) if contract.kind == "flash" else x


def _qkv(contract: Contract) -> tuple[str, str, str]:
    names = contract.parameter_names
    return (names[0], names[1], names[2])


def keyword_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    """The float64 gradients of a keyword contract (``sdpa``, ``kernel_attention``, ``flash_attn``)
    with respect to its query, key and value: :func:`general_attention` with the contract's options
    (:func:`keyword_attention_options`), in the contract's own layout.

    A key/value head shared by a group of query heads (``enable_gqa``, ``h_kv < h_q``) gets the sum
    of its group's gradients; a softcap multiplies the score gradient by ``1 − tanh²(s / cap)``;
    ``attn_mask`` and ``alibi_slopes`` get none (:data:`NOT_DIFFERENTIATED`).

    Args:
        contract: a configured keyword contract (its keywords in :attr:`Contract.options`).
        args: its arguments by its own parameter names (``query``/``key``/``value`` or ``q``/``k``/``v``).
        d_out: the upstream gradient, of the output's shape (``(b, n_q, h_q, d_v)`` for ``flash_attn``).

    Returns:
        ``{query name: dQ, key name: dK, value name: dV}``, float64 arrays of the inputs' shapes.

    Example (SDPA with ``scale = 1``, one query, two equal keys: ``P = [½, ½]``):
        >>> from attnscore.maths.contracts import get_contract
        >>> c = get_contract("sdpa").configured({"scale": 1.0}, ("query", "key", "value"))
        >>> g = keyword_gradients(c, {"query": np.array([[1.0]]), "key": np.array([[0.0], [0.0]]),
        ...                           "value": np.array([[1.0], [3.0]])}, np.array([[1.0]]))
        >>> g["key"].tolist(), g["value"].tolist()
        ([[-0.5], [0.5]], [[0.5], [0.5]])
    """
    q, k, v = _qkv(contract)
    options = keyword_attention_options(contract, args)
    dq, dk, dv = general_attention(
        _heads_first(contract, args[q]),
        _heads_first(contract, args[k]),
        _heads_first(contract, args[v]),
        _heads_first(contract, d_out),
        **options,
    )
    return {q: _heads_first(contract, dq), k: _heads_first(contract, dk), v: _heads_first(contract, dv)}


def keyword_gradient_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    """``(n, {name: M})``, the error scale of each gradient entry of a keyword contract (as
    :func:`contract_gradient_scales` for attention, through every variant).

    ``M`` is :func:`keyword_gradients`'s computation on absolute values, every difference made a
    sum, each weight carried with its own rounding error ``P ⊙ (1 + |b| + |max b|)`` (``b`` the
    biased score) plus the score's own error ``P ⊙ e_s`` (``e_s`` as in
    :func:`attnscore.maths.variant_contracts.kernel_attention_error`: the product
    ``d_k·|scale|·Σ|q_i k_i|``, the cap, the bias and its addition); a softcap's derivative
    ``1 − t²`` (``t = tanh(s/cap)``) is carried as ``1 + 2t² + 2|t|(1 − t²)·e_s/cap`` (the
    cancellation in ``1 − t²`` and the score's error moving it); the group sum of GQA adds the
    group size to ``n``, the longest sum's length.
    """
    q, k, v = _qkv(contract)
    options = keyword_attention_options(contract, args)
    Q, K, V = (_heads_first(contract, args[n]) for n in (q, k, v))
    dO = np.abs(_clean(_heads_first(contract, d_out)))
    two_d = Q.ndim == 2
    if two_d:
        Q, K, V, dO = Q[None], K[None], V[None], dO[None]
        if options.get("alibi_slopes") is not None:
            options["alibi_slopes"] = np.reshape(options["alibi_slopes"], (1,))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        parts = golden_variants.general_attention_parts(Q, K, V, **options)
        H_q, n_q, d_k = Q.shape[-3:]
        n_k, d_v = K.shape[-2], V.shape[-1]
        group = H_q // K.shape[-3]
        kv_head = np.arange(H_q) // group
        aQ, aK, aV = np.abs(_clean(Q)), np.abs(_clean(K)), np.abs(_clean(V))
        aK_h, aV_h = aK[..., kv_head, :, :], aV[..., kv_head, :, :]  # (..., H_q, n_k, d)
        scale = options.get("scale")
        s = 1.0 / np.sqrt(d_k) if scale is None else abs(float(scale))
        keep = np.isfinite(parts.biased)  # (*batch, H_q, n_q, n_k)
        mags = s * np.einsum("...id,...jd->...ij", aQ, aK_h)  # |scale|·Σ|q_i k_i|
        err_S = _clean(d_k * mags + np.abs(parts.scores))  # the scaled product
        cap = options.get("softcap")
        slope_error = np.ones_like(err_S)
        if cap is not None:
            t = np.tanh(parts.scores / float(cap))
            slope = 1.0 - t * t
            slope_error = 1.0 + 2.0 * t * t + 2.0 * np.abs(t) * slope * err_S / float(cap)
            err_S = (err_S + np.abs(parts.scores)) * slope + 2.0 * np.abs(parts.capped)
        bias = np.where(keep, parts.biased - parts.capped, 0.0)
        err_S = np.where(keep, _clean(err_S + 2.0 * np.abs(bias) + np.abs(parts.biased)), 0.0)
        P = np.nan_to_num(parts.weights)
        A = _weights_rounding(parts.biased, keep) + P * err_S  # (*batch, H_q, n_q, n_k)
        dV_h = np.einsum("...ij,...id->...jd", A, dO)  # (*batch, H_q, n_k, d_v)
        dP = np.einsum("...id,...jd->...ij", dO, aV_h)
        D = np.sum(dP * A, axis=-1, keepdims=True)
        dB = A * (dP + D) * slope_error
        dQ = s * np.einsum("...ij,...jd->...id", dB, aK_h)
        dK_h = s * np.einsum("...ij,...id->...jd", dB, aQ)

    def per_kv_head(g: np.ndarray) -> np.ndarray:
        return g.reshape(*g.shape[:-3], K.shape[-3], group, *g.shape[-2:]).sum(axis=-3)

    grads = [
        _unbroadcast(dQ, Q.shape),
        _unbroadcast(per_kv_head(dK_h), K.shape),
        _unbroadcast(per_kv_head(dV_h), V.shape),
    ]
    if two_d:
        grads = [g[0] for g in grads]
    n = int(d_k + n_k + d_v + n_q + group) + 2
    return n, {name: _clean(_heads_first(contract, g)) for name, g in zip((q, k, v), grads, strict=True)}


def _varlen_sequences(contract: Contract, args: Args) -> tuple[Contract, list[tuple[slice, slice]]]:
    """The ``flash_attn`` contract with a packed ``flash_attn_varlen`` contract's keywords, and each
    sequence's ``(query rows, key rows)`` of the packed ``(total, h, d)`` arrays."""
    from attnscore.maths.contracts import get_contract  # the registry imports this module's users

    names = ("causal", "window_size", "softmax_scale")
    flash = get_contract("flash_attn").configured({n: contract.option(n) for n in names}, ("q", "k", "v"))
    cu_q = [int(x) for x in np.asarray(args["cu_seqlens_q"]).reshape(-1)]
    cu_k = [int(x) for x in np.asarray(args["cu_seqlens_k"]).reshape(-1)]
    spans = [(slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])) for b in range(len(cu_q) - 1)]
    return flash, [(rows, keys) for rows, keys in spans if rows.stop > rows.start and keys.stop > keys.start]


def _one_sequence(q: str, k: str, v: str, args: Args, d_out: Any, rows: slice, keys: slice) -> tuple[Args, Any]:
    """Sequence ``rows``/``keys`` of a packed call as a ``flash_attn`` call of batch 1 ``(1, n, h, d)``."""
    one = {"q": _f64(args[q])[rows][None], "k": _f64(args[k])[keys][None], "v": _f64(args[v])[keys][None]}
    return one, _f64(d_out)[rows][None]


def varlen_gradients(contract: Contract, args: Args, d_out: Any) -> dict[str, np.ndarray]:
    """The float64 gradients of a packed ``flash_attn_varlen`` call with respect to ``q``, ``k``, ``v``
    (each ``(total, h, d)``): sequence ``b`` (rows ``cu_seqlens_q[b]:cu_seqlens_q[b+1]`` of ``q``,
    ``cu_seqlens_k[b]:cu_seqlens_k[b+1]`` of ``k``/``v``) is ``flash_attn`` on its own
    (:func:`keyword_gradients`, causal and window bottom-right per sequence); rows of no sequence,
    and a sequence without queries or keys, get zeros. The offsets and lengths get none.

    Source: FlashAttention's ``flash_attn_varlen_func`` (each sequence attends only inside itself).
    """
    q, k, v = _qkv(contract)
    flash, spans = _varlen_sequences(contract, args)
    grads = {n: np.zeros(np.shape(args[n]), dtype=np.float64) for n in (q, k, v)}
    for rows, keys in spans:
        one, d_one = _one_sequence(q, k, v, args, d_out, rows, keys)
        g = keyword_gradients(flash, one, d_one)
        grads[q][rows] += g["q"][0]
        grads[k][keys] += g["k"][0]
        grads[v][keys] += g["v"][0]
    return grads


def varlen_gradient_scales(contract: Contract, args: Args, d_out: Any) -> tuple[int, dict[str, np.ndarray]]:
    """``(n, {name: M})`` of :func:`varlen_gradients`: each sequence's :func:`keyword_gradient_scales`
    in its rows, ``n`` the longest over the sequences."""
    q, k, v = _qkv(contract)
    flash, spans = _varlen_sequences(contract, args)
    scales = {n: np.zeros(np.shape(args[n]), dtype=np.float64) for n in (q, k, v)}
    longest = 1
    for rows, keys in spans:
        one, d_one = _one_sequence(q, k, v, args, d_out, rows, keys)
        n, m = keyword_gradient_scales(flash, one, d_one)
        longest = max(longest, n)
        scales[q][rows] += m["q"][0]
        scales[k][keys] += m["k"][0]
        scales[v][keys] += m["v"][0]
    return longest, scales
