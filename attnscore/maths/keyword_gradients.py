"""Golden gradients of the keyword contracts (SDPA, the kernel variants, FlashAttention's layout, key
padding) and of packed varlen batches: :func:`attnscore.maths.gradient_formulas.general_attention`
with each contract's options, in its own layout, and their error scales."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from attnscore.maths import golden_variants
from attnscore.maths.contract import Contract
from attnscore.maths.family import ContractFamily
from attnscore.maths.gradient_formulas import cleaned, f64, general_attention, unbroadcast, weights_rounding

__all__ = [
    "keyword_attention_options",
    "keyword_gradients",
    "keyword_gradient_scales",
    "varlen_gradients",
    "varlen_gradient_scales",
]

Args = Mapping[str, np.ndarray]


def keyword_attention_options(contract: Contract, args: Args) -> dict[str, Any]:
    """The :func:`attnscore.maths.golden_variants.general_attention_parts` options of a configured
    keyword contract (``sdpa``: ``attn_mask``, ``is_causal`` top-left, ``scale``; ``kernel_attention``:
    ``is_causal`` bottom-right, ``scale``, ``softcap``, ``alibi_slopes``; ``flash_attn``: ``causal``
    bottom-right, ``window_size``, ``softmax_scale``), its arguments taken from ``args``.

    Raises:
        ValueError: a contract that is not one of :data:`attnscore.maths.family.KEYWORD_FAMILIES`.
    """
    options = _OPTIONS.get(contract.family)
    if options is None:
        raise ValueError(f"contract {contract.name!r}: not a keyword contract (family {str(contract.family)!r})")
    return options(contract, args)


def _sdpa_options(contract: Contract, args: Args) -> dict[str, Any]:
    return {
        "attn_mask": args.get("attn_mask"),
        "is_causal": bool(contract.option("is_causal")),
        "alignment": "top_left",
        "scale": contract.option("scale"),
    }


def _kernel_options(contract: Contract, args: Args) -> dict[str, Any]:
    slopes = args.get("alibi_slopes")
    return {
        "is_causal": bool(contract.option("is_causal")),
        "alignment": "bottom_right",
        "scale": contract.option("scale"),
        "softcap": contract.option("softcap"),
        "alibi_slopes": None if slopes is None else f64(slopes),
    }


def _key_padding_options(contract: Contract, args: Args) -> dict[str, Any]:
    return {"key_lengths": np.asarray(args["key_lengths"], dtype=np.int64), "scale": contract.option("scale")}


def _flash_options(contract: Contract, args: Args) -> dict[str, Any]:
    return {
        "is_causal": bool(contract.option("causal")),
        "alignment": "bottom_right",
        "window": tuple(int(x) for x in contract.option("window_size")),
        "scale": contract.option("softmax_scale"),
    }


_OPTIONS: dict[ContractFamily, Callable[[Contract, Args], dict[str, Any]]] = {
    ContractFamily.SDPA: _sdpa_options,
    ContractFamily.KERNEL_ATTENTION: _kernel_options,
    ContractFamily.KEY_PADDING: _key_padding_options,
    ContractFamily.FLASH: _flash_options,
}
"""Each keyword family's :func:`keyword_attention_options` (one entry per family, no branching on it)."""


def _heads_first(contract: Contract, x: Any) -> np.ndarray:
    """``flash_attn``'s ``(b, n, h, d)`` as ``(b, h, n, d)`` (its own inverse); others unchanged."""
    x = f64(x)
    return np.swapaxes(x, -3, -2) if contract.family is ContractFamily.FLASH else x


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
    :func:`attnscore.maths.golden_gradients.contract_gradient_scales` for attention, through every variant).

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
    dO = np.abs(cleaned(_heads_first(contract, d_out)))
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
        aQ, aK, aV = np.abs(cleaned(Q)), np.abs(cleaned(K)), np.abs(cleaned(V))
        aK_h, aV_h = aK[..., kv_head, :, :], aV[..., kv_head, :, :]  # (..., H_q, n_k, d)
        scale = options.get("scale")
        s = 1.0 / np.sqrt(d_k) if scale is None else abs(float(scale))
        keep = np.isfinite(parts.biased)  # (*batch, H_q, n_q, n_k)
        mags = s * np.einsum("...id,...jd->...ij", aQ, aK_h)  # |scale|·Σ|q_i k_i|
        err_S = cleaned(d_k * mags + np.abs(parts.scores))  # the scaled product
        cap = options.get("softcap")
        slope_error = np.ones_like(err_S)
        if cap is not None:
            t = np.tanh(parts.scores / float(cap))
            slope = 1.0 - t * t
            slope_error = 1.0 + 2.0 * t * t + 2.0 * np.abs(t) * slope * err_S / float(cap)
            err_S = (err_S + np.abs(parts.scores)) * slope + 2.0 * np.abs(parts.capped)
        bias = np.where(keep, parts.biased - parts.capped, 0.0)
        err_S = np.where(keep, cleaned(err_S + 2.0 * np.abs(bias) + np.abs(parts.biased)), 0.0)
        P = np.nan_to_num(parts.weights)
        A = weights_rounding(parts.biased, keep) + P * err_S  # (*batch, H_q, n_q, n_k)
        dV_h = np.einsum("...ij,...id->...jd", A, dO)  # (*batch, H_q, n_k, d_v)
        dP = np.einsum("...id,...jd->...ij", dO, aV_h)
        D = np.sum(dP * A, axis=-1, keepdims=True)
        dB = A * (dP + D) * slope_error
        dQ = s * np.einsum("...ij,...jd->...id", dB, aK_h)
        dK_h = s * np.einsum("...ij,...id->...jd", dB, aQ)

    def per_kv_head(g: np.ndarray) -> np.ndarray:
        return g.reshape(*g.shape[:-3], K.shape[-3], group, *g.shape[-2:]).sum(axis=-3)

    grads = [
        unbroadcast(dQ, Q.shape),
        unbroadcast(per_kv_head(dK_h), K.shape),
        unbroadcast(per_kv_head(dV_h), V.shape),
    ]
    if two_d:
        grads = [g[0] for g in grads]
    n = int(d_k + n_k + d_v + n_q + group) + 2
    return n, {name: cleaned(_heads_first(contract, g)) for name, g in zip((q, k, v), grads, strict=True)}


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
    one = {"q": f64(args[q])[rows][None], "k": f64(args[k])[keys][None], "v": f64(args[v])[keys][None]}
    return one, f64(d_out)[rows][None]


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
