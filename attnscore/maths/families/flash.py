"""FlashAttention's ``flash_attn_func`` (:attr:`ContractFamily.FLASH`): sliding-window and KV-cache
attention, its keywords fixed per spec (:class:`FlashOptions`).

``flash_attn`` is ``flash_attn.flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None,
causal=False, window_size=(-1, -1), ...)`` as FlashAttention 2.1+ defines it, configured per
spec by its keywords (:meth:`attnscore.maths.contract.Contract.configured`):

- layout ``(batch, seqlen, nheads, headdim)``: ``q`` ``(b, n_q, h_q, d_k)``, ``k``
  ``(b, n_k, h_kv, d_k)``, ``v`` ``(b, n_k, h_kv, d_v)``, the result ``(b, n_q, h_q, d_v)``; query
  head ``h`` uses key/value head ``h // (h_q / h_kv)`` (multi- and grouped-query attention);
- every mask is aligned **bottom-right**: query ``i`` sits at key position ``i + n_k - n_q`` (the
  last query with the last key: a KV cache of ``n_k - n_q`` earlier tokens, ONNX's ``past_key``
  offset when the cache is not padded);
- ``causal``: query ``i`` keeps keys ``j <= i + n_k - n_q``;
- ``window_size = (left, right)``: query ``i`` keeps keys ``j`` in
  ``[i + n_k - n_q - left, i + n_k - n_q + right]``, ``-1`` = unbounded on that side; with
  ``causal`` the right side is 0;
- ``softmax_scale`` defaults to ``1/√d_k``; ``dropout_p`` is 0; a query with no key left gets the
  zero vector.

Reference :func:`attnscore.maths.variants.general_attention` (``alignment="bottom_right"``), golden
:func:`attnscore.maths.golden_variants.general_attention`, both on the inputs transposed to
``(b, h, n, d)``; the error bound is attention's (:mod:`attnscore.maths.error_scales`) on the
equivalent plain attention arguments with the window folded into a bool mask.

Source: FlashAttention README ("causal", "sliding window", 2.1 and 2.3 changes) and
``flash_attn_interface.flash_attn_func``.
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
from attnscore.maths.key_view import heads_after_rows, key_view
from attnscore.maths.options import Options, causal_keyword, dropout_keyword, scale_keyword, window_keyword
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.tolerance import ErrorTerms

MEMBER = ContractFamily.FLASH
SHARED_MASKS = False


@dataclass(frozen=True)
class FlashOptions(Options):
    """``flash_attn_func``'s keywords, as a spec fixes them (``dropout_p`` is always 0); also the
    packed batches' (:class:`attnscore.maths.families.flash_varlen.VarlenOptions`, the same keywords
    per sequence)."""

    dropout_p: float = dropout_keyword()
    softmax_scale: float | None = scale_keyword()
    causal: bool = causal_keyword("bottom_right", "bottom-right: the last query sees the last key")
    window_size: tuple[int, int] = window_keyword()


def flash_window(contract: Contract) -> tuple[int, int]:
    """The ``(left, right)`` window a ``flash_attn`` or ``flash_attn_varlen`` contract keeps (in each
    sequence), with ``causal`` folded in (right side 0); ``(-1, -1)`` is full attention."""
    options = options_of(contract, FlashOptions)
    left, right = options.window_size
    return (left, 0) if options.causal else (left, right)


def flash_keep(window: tuple[int, int], n_q: int, n_k: int, offset: int | None = None) -> np.ndarray:
    """``(n_q, n_k)`` bool: True where query ``i`` keeps key ``j`` under ``window`` (``-1`` unbounded),
    query ``i`` sitting at key position ``i + offset`` (default ``n_k - n_q``, bottom-right)."""
    offset = n_k - n_q if offset is None else offset
    rel = np.arange(n_k)[None, :] - (np.arange(n_q)[:, None] + offset)  # (n_q, n_k): j - (i + offset)
    return within_window(np.ones((n_q, n_k), dtype=bool), rel, window)


def _to_heads_first(x: Any, name: str) -> torch.Tensor:
    """``(b, n, h, d)`` -> ``(b, h, n, d)`` (a view), checking the rank."""
    t = x if is_tensor(x) else torch.as_tensor(np.asarray(x))
    if t.ndim != 4:
        raise ScoreInputError(
            name,
            f"expected FlashAttention's layout (batch, seqlen, nheads, headdim), 4-D; found shape {tuple(t.shape)}",
        )
    return t.transpose(1, 2)


def rescaled_and_grouped(
    Q: np.ndarray, K: np.ndarray, V: np.ndarray, scale: float | None, heads: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Q``, ``K``, ``V`` (heads along axis ``heads``) as plain attention's: ``Q`` rescaled so that
    ``Q' Kᵀ/√d_k = scale·Q Kᵀ`` (unchanged for ``scale`` None), and each key/value head repeated for
    its group of query heads (``h0 h0 h1 h1``)."""
    if scale is not None:
        Q = Q * (float(scale) * np.sqrt(Q.shape[-1]))
    if K.shape[heads] not in (Q.shape[heads], 0):
        K = np.repeat(K, Q.shape[heads] // K.shape[heads], axis=heads)
        V = np.repeat(V, Q.shape[heads] // V.shape[heads], axis=heads)
    return Q, K, V


def through_attention(
    configured: Contract,
    reference: Callable[..., torch.Tensor],
    golden_fn: Callable[[Args], np.ndarray],
    as_attention: Callable[[Args], dict[str, np.ndarray]],
    axes: tuple[int, int],
    rows: Any,
) -> Contract:
    """``configured`` with its ``reference`` and ``golden_fn``, and its error bound, low-precision budget
    and key view read through the plain ``attention`` contract: ``as_attention`` gives a call's
    arguments as ``attention``'s (heads first), whose per-entry results come back to the contract's
    layout by swapping ``axes``; ``rows`` says how the output's rows map to ``attention``'s
    (:func:`attnscore.maths.key_view.key_view`). Shared by ``flash_attn`` and ``flash_attn_varlen``."""

    def back(x: Any) -> Any:
        return np.swapaxes(x, *axes) if np.ndim(x) >= 3 else x

    def error(a: Args) -> tuple[int, np.ndarray]:
        n, per_entry = attention_error(as_attention(a))
        return n, back(per_entry)

    def low_terms(a: Args, dtype: str, factor: float) -> ErrorTerms:
        terms = attention_low_terms(as_attention(a), dtype, factor)
        return ErrorTerms(back(terms.rounding), back(terms.accumulation), back(terms.floor))

    return dataclasses.replace(
        configured,
        reference=reference,
        golden_fn=golden_fn,
        error_fn=error,
        low_error_fn=low_terms,
        key_view_fn=lambda a: key_view(as_attention(a), rows),
    )


def _configure(base: Contract, options: FlashOptions, kept: tuple[str, ...]) -> Contract:
    """The ``flash_attn`` contract for fixed keywords (``causal``, ``window_size``, ``softmax_scale``)."""
    configured = dataclasses.replace(base, options=options)
    causal, window, scale = bool(options.causal), options.window_size, options.softmax_scale
    keep_window = flash_window(configured)

    def ref(
        q: Any,
        k: Any,
        v: Any,
        dropout_p: float = 0.0,
        softmax_scale: float | None = scale,
        causal: bool = causal,
        window_size: tuple[int, int] = window,
    ) -> torch.Tensor:
        # flash_attn_func's signature and layout; dropout_p is 0, every mask bottom-right aligned.
        out = variants.general_attention(
            _to_heads_first(q, "q"),
            _to_heads_first(k, "k"),
            _to_heads_first(v, "v"),
            is_causal=causal,
            alignment="bottom_right",
            window=tuple(window_size),
            scale=softmax_scale,
        )
        return out.transpose(1, 2)  # (b, h_q, n_q, d_v) -> (b, n_q, h_q, d_v)

    def gold(a: Args) -> np.ndarray:
        q, k, v = (np.swapaxes(as_float64(a, n), -3, -2) for n in ("q", "k", "v"))
        out = golden_variants.general_attention(
            q, k, v, is_causal=causal, alignment="bottom_right", window=window, scale=scale
        )
        return np.swapaxes(out, -3, -2)

    def as_attention(a: Args) -> dict[str, np.ndarray]:
        """The plain ``attention`` contract's arguments with the same scores, weights and output:
        heads first, Q rescaled so that ``Q' Kᵀ/√d_k = scale·Q Kᵀ``, K and V grouped, the window
        folded into a bool mask."""
        Q, K, V = (np.swapaxes(as_float64(a, n), -3, -2) for n in ("q", "k", "v"))  # (b, h, n, d)
        n_q, n_k = Q.shape[-2], K.shape[-2]
        Q, K, V = rescaled_and_grouped(Q, K, V, scale, -3)
        keep = flash_keep(keep_window, n_q, n_k)
        S_shape = np.broadcast_shapes(Q.shape[:-1], K.shape[:-2] + (1,)) + (n_k,)
        return {"Q": Q, "K": K, "V": V, "mask": np.broadcast_to(keep, S_shape)}

    # (b, h_q, n_q, d_v) -> (b, n_q, h_q, d_v), the result's layout
    return through_attention(configured, ref, gold, as_attention, (-3, -2), heads_after_rows)


def flash_attn_contract() -> Contract:
    """FlashAttention's ``flash_attn_func`` with ``dropout_p = 0``, its keywords (``causal``,
    ``window_size``, ``softmax_scale``) fixed by the spec; see the module docstring for the layout
    and the bottom-right alignment. Reference :func:`attnscore.maths.variants.general_attention`,
    golden :func:`attnscore.maths.golden_variants.general_attention`, the error bound of ``attention``.

    Example:
        >>> c = flash_attn_contract().configured({"window_size": [1, 0]})
        >>> q = torch.zeros(1, 3, 1, 1); v = torch.tensor([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1)
        >>> c.reference(q, q, v).flatten().tolist()  # query i averages keys i - 1 and i
        [1.0, 1.5, 2.5]
    """
    unconfigured = Contract(
        name="flash_attn",
        family=MEMBER,
        parameters=(
            ("q", ("b", "n_q", "h_q", "d_k")),
            ("k", ("b", "n_k", "h_kv", "d_k")),
            ("v", ("b", "n_k", "h_kv", "d_v")),
        ),
        returns=("b", "n_q", "h_q", "d_v"),
        reference=variants.general_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        options=FlashOptions(),
        configure=_configure,
        samples=(
            ((("window_size", (2, 1)),), ("q", "k", "v")),
            ((("causal", True),), ("q", "k", "v")),
        ),
        bound_text="u·(error of scores and weights propagated through V)",
    )
    return _configure(unconfigured, FlashOptions(), unconfigured.parameter_names)


CONTRACTS = (flash_attn_contract(),)


def general_options(options: FlashOptions) -> AttentionOptions:
    """General attention's options for FlashAttention's keywords ``options`` (``flash_attn``'s, or
    ``flash_attn_varlen``'s in each sequence): ``causal`` and ``window_size`` aligned bottom-right,
    ``softmax_scale``."""
    return AttentionOptions(
        is_causal=bool(options.causal),
        alignment="bottom_right",
        window=(int(options.window_size[0]), int(options.window_size[1])),
        scale=options.softmax_scale,
    )


def attention_options(contract: Contract, args: Mapping[str, np.ndarray]) -> AttentionOptions:
    """``causal`` and ``window_size`` aligned bottom-right, ``softmax_scale`` (heads first):
    :func:`general_options` of the contract's keywords."""
    return general_options(options_of(contract, FlashOptions))


def attention_changed(contract: Contract, args: tuple[Any, ...], change: AttentionChange) -> torch.Tensor:
    """The call on ``args`` (``q, k, v`` tensors, ``(b, n, h, d)``) by general attention with ``change``
    under :func:`attention_options`, on the inputs heads first: ``(b, n_q, h_q, d_v)``."""
    q, k, v = (_to_heads_first(x, n) for x, n in zip(args, contract.parameter_names, strict=True))
    out = variants.general_attention(q, k, v, attention_options(contract, {}), change=change)
    return out.transpose(1, 2)  # (b, h_q, n_q, d_v) -> (b, n_q, h_q, d_v)


_GENERAL = GeneralGradients(attention_options, heads_last=True)
gradients = _GENERAL.gradients
gradient_scales = _GENERAL.gradient_scales


def unused_keys(contract: Contract) -> UnusedKeys | None:
    """``causal`` or a bounded ``window_size`` can leave a key out of every query: which, under
    :func:`attention_options`, in the ``(b, n_k, h_kv)`` layout."""
    options = options_of(contract, FlashOptions)
    if not options.causal and tuple(options.window_size) == (-1, -1):
        return None
    return _GENERAL.unused_keys(contract)
