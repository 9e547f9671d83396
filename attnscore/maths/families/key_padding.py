"""Attention with key padding (:attr:`ContractFamily.KEY_PADDING`), its one keyword in
:class:`KeyPaddingOptions`.

``key_padding_attention`` is ``f(query (b, h_q, n_q, d_k), key (b, h_kv, n_k, d_k), value (b, h_kv,
n_k, d_v), key_lengths (b,), *, scale=None) -> (b, h_q, n_q, d_v)``: SDPA's layout, grouped heads as
SDPA's ``enable_gqa``, and for batch item ``b`` only keys ``j < key_lengths[b]`` take part (the
padding mask ONNX's ``Attention`` builds from ``nonpad_kv_seqlen``, and ``flash_attn_with_kvcache``
from ``cache_seqlens``); ``key_lengths`` int32 in ``[0, n_k]``; a row without keys gets zeros.

Reference :func:`attnscore.maths.variants.general_attention` (``key_lengths``), golden twin
:func:`attnscore.maths.golden_variants.general_attention`; the error bound is attention's
(:mod:`attnscore.maths.error_scales`) with the padding folded into a bool mask; gradients
:mod:`attnscore.maths.keyword_gradients`.

Source: ONNX ``Attention`` (opset 23, ``nonpad_kv_seqlen``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.maths import golden_variants, variants
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.attention_options import AttentionOptions
from attnscore.maths.contract import Args, Contract
from attnscore.maths.error_scales import as_float64, attention_error, attention_low_terms
from attnscore.maths.families.base import Gradients, Scales, no_unused_keys, options_of
from attnscore.maths.family import ContractFamily
from attnscore.maths.key_view import key_view
from attnscore.maths.keyword_gradients import keyword_gradient_scales, keyword_gradients
from attnscore.maths.options import Options, scale_keyword

if TYPE_CHECKING:
    import torch
else:
    from attnscore.boundary.lazy_torch import torch

__all__ = [
    "CONTRACTS",
    "MEMBER",
    "SHARED_MASKS",
    "KeyPaddingOptions",
    "attention_changed",
    "attention_options",
    "gradient_scales",
    "gradients",
    "key_keep",
    "key_padding_contract",
    "unused_keys",
]

MEMBER = ContractFamily.KEY_PADDING
SHARED_MASKS = False


@dataclass(frozen=True)
class KeyPaddingOptions(Options):
    """The one keyword a key-padding spec fixes."""

    scale: float | None = scale_keyword()


def key_keep(key_lengths: Any, n_k: int) -> np.ndarray:
    """``(b, n_k)`` bool: True where key ``j`` of batch item ``b`` is valid (``j < key_lengths[b]``)."""
    lengths = np.asarray(key_lengths).astype(np.int64).reshape(-1)
    return np.arange(n_k)[None, :] < lengths[:, None]


def _padding_check(a: Args) -> list[tuple[str, str]]:
    lengths = np.asarray(a["key_lengths"])
    n_k = int(np.shape(a["key"])[-2]) if np.ndim(a["key"]) >= 2 else 0
    bad = [int(x) for x in lengths.reshape(-1) if not 0 <= int(x) <= n_k]
    if bad:
        return [("key_lengths", f"expected valid key counts in [0, n_k={n_k}], found {bad[0]} in {lengths.tolist()}")]
    return []


def _padding_integers(pick: Callable[[int, int], int], sizes: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One valid length in ``[0, n_k]`` per batch item. A length of 0 (every key padding: each query of
    the item keeps no key and gets the zero vector, a fully masked corner that property cases set
    aside and its own worked example judges) is drawn for some items (one choice in eight), never for every
    item of a call (a call with no key at all would leave its cases nothing to judge)."""
    n_k = int(sizes["n_k"])
    lengths = [0 if pick(0, 7) == 0 else pick(1, n_k) for _ in range(int(sizes["b"]))]
    if not any(lengths):
        lengths[-1] = pick(1, n_k)
    return sizes, {"key_lengths": np.asarray(lengths)}


def _configure(base: Contract, options: KeyPaddingOptions, kept: tuple[str, ...]) -> Contract:
    """The ``key_padding_attention`` contract for a fixed ``scale``."""
    scale = options.scale

    def ref(query: Any, key: Any, value: Any, key_lengths: Any, *, scale: float | None = scale) -> torch.Tensor:
        return variants.general_attention(query, key, value, key_lengths=key_lengths, scale=scale)

    def gold(a: Args) -> np.ndarray:
        return golden_variants.general_attention(
            as_float64(a, "query"),
            as_float64(a, "key"),
            as_float64(a, "value"),
            key_lengths=np.asarray(a["key_lengths"]).astype(np.int64),
            scale=scale,
        )

    def as_attention(a: Args) -> dict[str, np.ndarray]:
        Q, K, V = as_float64(a, "query"), as_float64(a, "key"), as_float64(a, "value")  # (b, h, n, d)
        d_k, n_k = Q.shape[-1], K.shape[-2]
        if scale is not None:
            Q = Q * (float(scale) * np.sqrt(d_k))
        if K.shape[-3] not in (Q.shape[-3], 0):
            K = np.repeat(K, Q.shape[-3] // K.shape[-3], axis=-3)
            V = np.repeat(V, Q.shape[-3] // V.shape[-3], axis=-3)
        keep = key_keep(a["key_lengths"], n_k)[:, None, None, :]  # (b, 1, 1, n_k)
        return {"Q": Q, "K": K, "V": V, "mask": np.broadcast_to(keep, (*Q.shape[:-1], n_k))}

    return dataclasses.replace(
        base,
        reference=ref,
        golden_fn=gold,
        error_fn=lambda a: attention_error(as_attention(a)),
        low_error_fn=lambda a, dtype, factor: attention_low_terms(as_attention(a), dtype, factor),
        options=options,
        key_view_fn=lambda a: key_view(as_attention(a)),
    )


def key_padding_contract() -> Contract:
    """Attention with key padding in SDPA's layout:
    ``f(query (b, h_q, n_q, d_k), key (b, h_kv, n_k, d_k), value (b, h_kv, n_k, d_v), key_lengths (b,),
    *, scale=None) -> (b, h_q, n_q, d_v)``; ``key_lengths`` int32 in ``[0, n_k]``: batch item ``b``
    keeps keys ``j < key_lengths[b]``; query head ``h`` uses key/value head ``h // (h_q / h_kv)``.

    Example:
        >>> c = key_padding_contract()
        >>> q = torch.zeros(1, 1, 1, 1); v = torch.tensor([1.0, 2.0, 4.0]).reshape(1, 1, 3, 1)
        >>> c.reference(q, torch.zeros(1, 1, 3, 1), v, torch.tensor([2], dtype=torch.int32)).flatten().tolist()
        [1.5]
    """
    unconfigured = Contract(
        name="key_padding_attention",
        family=MEMBER,
        parameters=(
            ("query", ("b", "h_q", "n_q", "d_k")),
            ("key", ("b", "h_kv", "n_k", "d_k")),
            ("value", ("b", "h_kv", "n_k", "d_v")),
            ("key_lengths", ("b",)),
        ),
        returns=("b", "h_q", "n_q", "d_v"),
        reference=variants.general_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        options=KeyPaddingOptions(),
        configure=_configure,
        samples=(((("scale", 0.5),), ("query", "key", "value", "key_lengths")),),
        bound_text="u·(error of scores and weights propagated through V)",
        int_parameters=frozenset({"key_lengths"}),
        integer_fn=_padding_integers,
        integer_check=_padding_check,
    )
    return _configure(unconfigured, KeyPaddingOptions(), unconfigured.parameter_names)


CONTRACTS = (key_padding_contract(),)


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> AttentionOptions:
    """``key_lengths`` from ``args`` (int64), ``scale``."""
    scale = options_of(contract, KeyPaddingOptions).scale
    return AttentionOptions(key_lengths=np.asarray(args["key_lengths"], dtype=np.int64), scale=scale)


def attention_changed(contract: Contract, args: tuple[Any, ...], change: AttentionChange) -> torch.Tensor:
    """The call on ``args`` (``query, key, value, key_lengths`` tensors) by general attention with
    ``change``, the valid lengths as ``key_lengths`` and the spec's ``scale``: ``(b, h_q, n_q, d_v)``."""
    query, key, value, key_lengths = args
    scale = options_of(contract, KeyPaddingOptions).scale
    options = AttentionOptions(key_lengths=key_lengths, scale=scale)
    return variants.general_attention(query, key, value, options, change=change)


def gradients(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Gradients:
    """General attention's gradients with :func:`attention_options`; ``key_lengths`` gets none."""
    return keyword_gradients(contract.parameter_names, args, d_out, attention_options(contract, args))


def gradient_scales(contract: Contract, args: Mapping[str, np.ndarray], d_out: Any) -> Scales:
    """:func:`~attnscore.maths.keyword_gradients.keyword_gradient_scales` with :func:`attention_options`."""
    return keyword_gradient_scales(contract.parameter_names, args, d_out, attention_options(contract, args))


# its one keyword, scale, leaves no key out (padding is the key_lengths argument)
unused_keys = no_unused_keys
