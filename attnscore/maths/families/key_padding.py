"""Attention with key padding (:attr:`ContractFamily.KEY_PADDING`), its keywords in
:class:`KeyPaddingOptions`.

``key_padding_attention`` is ``f(query (b, h_q, n_q, d_k), key (b, h_kv, n_k, d_k), value (b, h_kv,
n_k, d_v), key_lengths (b,), *, scale=None, is_causal=False, window_size=(-1, -1)) -> (b, h_q, n_q,
d_v)``: SDPA's layout, grouped heads as SDPA's ``enable_gqa``, and for batch item ``b`` only keys
``j < key_lengths[b]`` take part (the padding mask ONNX's ``Attention`` builds from
``nonpad_kv_seqlen``, and ``flash_attn_with_kvcache`` from ``cache_seqlens``); ``key_lengths`` int32
in ``[0, n_k]``; a row without keys gets zeros.

``is_causal`` and ``window_size`` (FlashAttention's ``(left, right)``, -1 unbounded; with
``is_causal`` the right side is 0) place query ``i`` at key position ``i + offset[b]``, the
``alignment`` convention the spec states: ``valid_length`` (the default; ``offset[b] = key_lengths[b]
- n_q``: the last query sits on the last *valid* key, as FlashAttention's ``attention_ref`` with a
key padding mask, ``flash_attn_with_kvcache`` with ``cache_seqlens`` and ONNX with
``nonpad_kv_seqlen`` align them), ``bottom_right`` (``n_k - n_q``, the padded length) or
``top_left`` (0, SDPA's ``is_causal``). Query ``i`` of item ``b`` keeps key ``j`` when ``j <
key_lengths[b]`` and ``i + offset[b] - left <= j <= i + offset[b] + right``.

Reference :func:`attnscore.maths.variants.general_attention` (``key_lengths``), golden twin
:func:`attnscore.maths.golden_variants.general_attention`; the error bound is attention's
(:mod:`attnscore.maths.error_scales`) with the padding folded into a bool mask; gradients
:mod:`attnscore.maths.keyword_gradients`.

Source: ONNX ``Attention`` (opset 23, ``nonpad_kv_seqlen``); FlashAttention's ``attention_ref`` and
``construct_local_mask`` (``tests/test_flash_attn.py``: causal and local masks aligned at
``key_padding_mask.sum(-1)``) and ``flash_attn_with_kvcache`` (``cache_seqlens``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.maths import golden_variants, variants
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.attention_options import AttentionOptions, within_window
from attnscore.maths.contract import Args, Contract
from attnscore.maths.error_scales import as_float64, attention_error, attention_low_terms
from attnscore.maths.families.base import GeneralGradients, UnusedKeys, options_of
from attnscore.maths.family import ContractFamily
from attnscore.maths.key_view import key_view
from attnscore.maths.options import Options, convention, keyword, scale_keyword

MEMBER = ContractFamily.KEY_PADDING
SHARED_MASKS = False


ALIGNMENTS = ("valid_length", "bottom_right", "top_left")
"""Where query ``i`` of batch item ``b`` sits among the keys, for ``is_causal`` and ``window_size``:
at ``i + key_lengths[b] - n_q``, ``i + n_k - n_q`` or ``i`` (:func:`offsets`)."""


@dataclass(frozen=True)
class KeyPaddingOptions(Options):
    """The keywords a key-padding spec fixes, and where causal and the window are aligned."""

    scale: float | None = scale_keyword()
    is_causal: bool = keyword(
        "bool", False, "keep key j for query i only when j <= i + offset (offset: the alignment convention)"
    )
    window_size: tuple[int, int] = keyword(
        "window",
        (-1, -1),
        "(left, right): query i keeps keys j in [i + offset - left, i + offset + right] (offset: the alignment "
        "convention); -1 = unbounded",
    )
    alignment: str = convention(
        "valid_length",
        "where query i sits among the keys of batch item b, for is_causal and window_size: valid_length "
        "(i + key_lengths[b] - n_q, FlashAttention's and ONNX's with key padding), bottom_right (i + n_k - n_q, "
        "the padded length) or top_left (i)",
        ALIGNMENTS,
    )


def offsets(options: KeyPaddingOptions, key_lengths: Any, n_q: int, n_k: int) -> np.ndarray:
    """``(b,)`` int64: where query ``i`` of batch item ``b`` sits among the keys, ``i + offset[b]``,
    under ``options.alignment`` (:data:`ALIGNMENTS`).

    >>> offsets(KeyPaddingOptions(), np.array([2, 5]), 3, 5).tolist()
    [-1, 2]
    >>> offsets(KeyPaddingOptions(alignment="bottom_right"), np.array([2, 5]), 3, 5).tolist()
    [2, 2]
    """
    lengths = np.asarray(key_lengths).astype(np.int64).reshape(-1)
    if options.alignment == "valid_length":
        return lengths - n_q
    return np.full(lengths.shape, n_k - n_q if options.alignment == "bottom_right" else 0, dtype=np.int64)


def _keep(options: KeyPaddingOptions, key_lengths: Any, n_q: int, n_k: int) -> np.ndarray:
    """``(b, n_q, n_k)`` bool: the keys query ``i`` of item ``b`` keeps (padding, causal and window)."""
    lengths = np.asarray(key_lengths).astype(np.int64).reshape(-1)
    rel = np.arange(n_k)[None, None, :] - (
        np.arange(n_q)[None, :, None] + offsets(options, lengths, n_q, n_k)[:, None, None]
    )
    left, right = options.window_size
    if options.is_causal:
        right = 0  # FlashAttention: causal means window_size[1] = 0
    keep = np.broadcast_to(key_keep(lengths, n_k)[:, None, :], rel.shape).copy()
    return within_window(keep, rel, (left, right))


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
    """The ``key_padding_attention`` contract for fixed keywords (``scale``, ``is_causal``,
    ``window_size``) and alignment."""
    scale, causal, window = options.scale, bool(options.is_causal), options.window_size

    def ref(
        query: Any,
        key: Any,
        value: Any,
        key_lengths: Any,
        *,
        scale: float | None = scale,
        is_causal: bool = causal,
        window_size: tuple[int, int] = window,
    ) -> torch.Tensor:
        left, right = window_size
        called = dataclasses.replace(options, scale=scale, is_causal=is_causal, window_size=(left, right))
        return _torch_call(called, query, key, value, key_lengths)

    def gold(a: Args) -> np.ndarray:
        Q, K = as_float64(a, "query"), as_float64(a, "key")
        lengths = np.asarray(a["key_lengths"]).astype(np.int64)
        return golden_variants.general_attention(
            Q,
            K,
            as_float64(a, "value"),
            key_lengths=lengths,
            scale=scale,
            is_causal=causal,
            window=window,
            alignment=offsets(options, lengths, Q.shape[-2], K.shape[-2]),
        )

    def as_attention(a: Args) -> dict[str, np.ndarray]:
        Q, K, V = as_float64(a, "query"), as_float64(a, "key"), as_float64(a, "value")  # (b, h, n, d)
        d_k, n_k = Q.shape[-1], K.shape[-2]
        if scale is not None:
            Q = Q * (float(scale) * np.sqrt(d_k))
        if K.shape[-3] not in (Q.shape[-3], 0):
            K = np.repeat(K, Q.shape[-3] // K.shape[-3], axis=-3)
            V = np.repeat(V, Q.shape[-3] // V.shape[-3], axis=-3)
        keep = _keep(options, a["key_lengths"], Q.shape[-2], n_k)[:, None, :, :]  # (b, 1, n_q, n_k)
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
    *, scale=None, is_causal=False, window_size=(-1, -1)) -> (b, h_q, n_q, d_v)``; ``key_lengths`` int32
    in ``[0, n_k]``: batch item ``b`` keeps keys ``j < key_lengths[b]``; query head ``h`` uses key/value
    head ``h // (h_q / h_kv)``; ``is_causal`` and ``window_size`` aligned as the module docstring says.

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
        samples=(
            ((("scale", 0.5),), ("query", "key", "value", "key_lengths")),
            ((("is_causal", True), ("window_size", (2, 0))), ("query", "key", "value", "key_lengths")),
        ),
        bound_text="u·(error of scores and weights propagated through V)",
        int_parameters=frozenset({"key_lengths"}),
        integer_fn=_padding_integers,
        integer_check=_padding_check,
    )
    return _configure(unconfigured, KeyPaddingOptions(), unconfigured.parameter_names)


CONTRACTS = (key_padding_contract(),)


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> AttentionOptions:
    """``key_lengths`` from ``args`` (int64), ``scale``, ``is_causal`` and ``window_size`` at the
    alignment's offsets (one per batch item, :func:`offsets`)."""
    options = options_of(contract, KeyPaddingOptions)
    lengths = np.asarray(args["key_lengths"], dtype=np.int64)
    if not options.is_causal and tuple(options.window_size) == (-1, -1):  # nothing to align
        return AttentionOptions(key_lengths=lengths, scale=options.scale)
    n_q, n_k = np.shape(args["query"])[-2], np.shape(args["key"])[-2]
    return AttentionOptions(
        key_lengths=lengths,
        scale=options.scale,
        is_causal=bool(options.is_causal),
        window=options.window_size,
        alignment=offsets(options, lengths, n_q, n_k),
    )


def attention_changed(contract: Contract, args: tuple[Any, ...], change: AttentionChange) -> torch.Tensor:
    """The call on ``args`` (``query, key, value, key_lengths`` tensors) by general attention with
    ``change``, the valid lengths as ``key_lengths``, the spec's ``scale``, ``is_causal`` and
    ``window_size`` at the alignment's offsets (as the reference): ``(b, h_q, n_q, d_v)``."""
    query, key, value, key_lengths = args
    return _torch_call(options_of(contract, KeyPaddingOptions), query, key, value, key_lengths, change)


def _torch_call(
    options: KeyPaddingOptions,
    query: Any,
    key: Any,
    value: Any,
    key_lengths: Any,
    change: AttentionChange | None = None,
) -> torch.Tensor:
    """General attention (torch) on one call under ``options``: the valid lengths as ``key_lengths``,
    ``scale``, ``is_causal`` and ``window_size`` at the alignment's offsets, with ``change`` made to one step
    (None: the reference)."""
    lengths = key_lengths if is_tensor(key_lengths) else torch.as_tensor(np.asarray(key_lengths))
    aligned = offsets(options, lengths.cpu().numpy(), query.shape[-2], key.shape[-2])
    call = AttentionOptions(
        key_lengths=key_lengths,
        scale=options.scale,
        is_causal=bool(options.is_causal),
        window=options.window_size,
        alignment=torch.as_tensor(aligned, device=lengths.device),
    )
    return variants.general_attention(query, key, value, call, change=change)


_GENERAL = GeneralGradients(attention_options)
gradients = _GENERAL.gradients
gradient_scales = _GENERAL.gradient_scales


def unused_keys(contract: Contract) -> UnusedKeys | None:
    """``is_causal`` or a bounded ``window_size`` can leave a key out of every query (``scale`` never
    does): which, under :func:`attention_options` (padding keys, left out by ``key_lengths``, among them)."""
    options = options_of(contract, KeyPaddingOptions)
    if not options.is_causal and tuple(options.window_size) == (-1, -1):
        return None
    return _GENERAL.unused_keys(contract)
