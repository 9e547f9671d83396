"""Contracts with integer tensor parameters: FlashAttention's packed variable-length batches
(``flash_attn_varlen``) and attention with key padding (``key_padding_attention``).

``flash_attn_varlen`` is ``flash_attn.flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k,
max_seqlen_q, max_seqlen_k, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1))``
as FlashAttention 2.1+ defines it, configured per spec by its keywords:

- ``q`` ``(total_q, h_q, d_k)``, ``k`` ``(total_k, h_kv, d_k)``, ``v`` ``(total_k, h_kv, d_v)``: the
  ``b`` sequences of a batch packed along axis 0; the result is ``(total_q, h_q, d_v)``; query head
  ``h`` uses key/value head ``h // (h_q / h_kv)``;
- ``cu_seqlens_q``, ``cu_seqlens_k``: int32 ``(b + 1,)``, ``0 = c_0 <= c_1 <= ... <= c_b = total``:
  sequence ``s`` owns query rows ``cu_seqlens_q[s] .. cu_seqlens_q[s+1] - 1`` and key rows
  ``cu_seqlens_k[s] .. cu_seqlens_k[s+1] - 1``, and attends only inside itself;
- ``max_seqlen_q``, ``max_seqlen_k``: Python ints, the longest sequence (``max(diff(cu_seqlens))``);
  in this package's specs they are integer parameters of shape ``()``, derived from the offsets;
- ``causal`` and ``window_size`` are aligned **bottom-right per sequence**: query ``i`` of sequence
  ``s`` sits at key position ``i + n_k_s - n_q_s`` of that sequence (FlashAttention 2.1+);
- ``softmax_scale`` defaults to ``1/√d_k``; ``dropout_p`` is 0; a query without keys gets zeros.

``key_padding_attention`` is ``f(query (b, h_q, n_q, d_k), key (b, h_kv, n_k, d_k), value (b, h_kv,
n_k, d_v), key_lengths (b,), *, scale=None) -> (b, h_q, n_q, d_v)``: SDPA's layout, grouped heads as
SDPA's ``enable_gqa``, and for batch item ``b`` only keys ``j < key_lengths[b]`` take part (the
padding mask ONNX's ``Attention`` builds from ``nonpad_kv_seqlen``, and ``flash_attn_with_kvcache``
from ``cache_seqlens``); ``key_lengths`` int32 in ``[0, n_k]``; a row without keys gets zeros.

References :func:`attnscore.maths.variants.varlen_attention` and
:func:`attnscore.maths.variants.general_attention` (``key_lengths``), golden twins in
:mod:`attnscore.maths.golden_variants`; the error bound is attention's
(:mod:`attnscore.maths.error_scales`) with the sequence blocks, windows or padding folded into a
bool mask.

Source: FlashAttention README and ``flash_attn_interface.flash_attn_varlen_func``; ONNX
``Attention`` (opset 23, ``nonpad_kv_seqlen``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.maths import golden_variants, variants
from attnscore.maths.contract import Args, Contract, Keyword
from attnscore.maths.error_scales import as_float64, attention_error, attention_low_terms
from attnscore.maths.family import ContractFamily
from attnscore.maths.key_view import key_view, packed_rows
from attnscore.maths.reference import ScoreInputError
from attnscore.maths.sequence_contracts import flash_configured, flash_keep, rescaled_and_grouped, through_attention

if TYPE_CHECKING:
    import torch
else:
    from attnscore.boundary.lazy_torch import torch

__all__ = [
    "flash_attn_varlen_contract",
    "key_padding_contract",
    "offsets_problem",
    "packed_keep",
    "sequence_slices",
    "varlen_window",
]

_VARLEN_KEYWORDS = (
    Keyword("dropout_p", "zero", 0.0, "dropout probability; 0 (a deterministic reference)"),
    Keyword("softmax_scale", "positive_or_null", None, "the factor of Q Kᵀ; null means 1/√d_k"),
    Keyword(
        "causal",
        "bool",
        False,
        "per sequence, keep key j for query i only when j <= i + n_k - n_q of that sequence (bottom-right)",
    ),
    Keyword(
        "window_size",
        "window",
        (-1, -1),
        "(left, right) per sequence: query i keeps keys j in [i + n_k - n_q - left, i + n_k - n_q + right]; "
        "-1 = unbounded",
    ),
)


_VARLEN_NAMES = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")


def varlen_window(contract: Contract) -> tuple[int, int]:
    """The ``(left, right)`` window a ``flash_attn_varlen`` contract keeps in each sequence, with
    ``causal`` folded in (right side 0); ``(-1, -1)`` is full attention inside each sequence."""
    left, right = (int(x) for x in contract.option("window_size"))
    return (left, 0) if contract.option("causal") else (left, right)


def sequence_slices(cu_seqlens: Any) -> list[slice]:
    """The rows of each sequence: ``[0, 2, 5]`` -> ``[slice(0, 2), slice(2, 5)]``."""
    c = [int(x) for x in np.asarray(cu_seqlens).reshape(-1)]
    return [slice(a, b) for a, b in zip(c[:-1], c[1:], strict=True)]


def packed_keep(window: tuple[int, int], cu_seqlens_q: Any, cu_seqlens_k: Any) -> np.ndarray:
    """``(total_q, total_k)`` bool: True where packed query row ``i`` keeps packed key row ``j``: the
    same sequence, inside that sequence's ``window`` aligned bottom-right (:func:`flash_keep`)."""
    rows, cols = sequence_slices(cu_seqlens_q), sequence_slices(cu_seqlens_k)
    total_q = rows[-1].stop if rows else 0
    total_k = cols[-1].stop if cols else 0
    keep = np.zeros((total_q, total_k), dtype=bool)
    for r, c in zip(rows, cols, strict=True):
        keep[r, c] = flash_keep(window, r.stop - r.start, c.stop - c.start)
    return keep


def offsets_problem(cu: np.ndarray, total: int, what: str) -> str | None:
    """What is wrong with offsets ``cu`` over ``total`` rows (``what``: ``"total_q, q's first dim"``), or None."""
    c = [int(x) for x in np.asarray(cu).reshape(-1)]
    if np.ndim(cu) != 1 or len(c) < 2:
        return f"expected offsets of shape (b + 1,) with at least 2 entries, found shape {tuple(np.shape(cu))}"
    if c[0] != 0:
        return f"expected offsets starting at 0, found {c}"
    for s in range(len(c) - 1):
        if c[s + 1] < c[s]:
            return f"expected non-decreasing offsets, found {c} ({c[s]} then {c[s + 1]} at entry {s + 1})"
    if c[-1] != total:
        return f"expected offsets ending at {what} {total}, found {c} (ending at {c[-1]})"
    return None


def _varlen_check(a: Args) -> list[tuple[str, str]]:
    """The integer parameters of a worked example against its ``q`` and ``k``."""
    problems = []
    for suffix, tensor in (("q", "q"), ("k", "k")):
        name = f"cu_seqlens_{suffix}"
        total = int(np.shape(a[tensor])[0]) if np.ndim(a[tensor]) else 0
        problem = offsets_problem(a[name], total, f"total_{suffix} ({tensor}'s first dim)")
        if problem:
            problems.append((name, problem))
            continue
        longest = int(np.max(np.diff(np.asarray(a[name]).astype(np.int64)), initial=0))
        given = int(np.asarray(a[f"max_seqlen_{suffix}"]))
        if given != longest:
            problems.append(
                (
                    f"max_seqlen_{suffix}",
                    f"expected the longest sequence of cu_seqlens_{suffix}, {longest}, found {given}",
                )
            )
    if not problems and np.size(a["cu_seqlens_q"]) != np.size(a["cu_seqlens_k"]):
        problems.append(
            (
                "cu_seqlens_k",
                f"expected {np.size(a['cu_seqlens_q'])} offsets (b + 1) as cu_seqlens_q has, "
                f"found {np.size(a['cu_seqlens_k'])}",
            )
        )
    return problems


def _varlen_integers(pick: Callable[[int, int], int], sizes: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``b`` in 1..3 sequences of 1..4 queries and 1..5 keys each (drawn independently, so a
    sequence may have more queries than keys); ``total_q``, ``total_k`` and ``b+1`` follow."""
    b = pick(1, 3)
    lens_q = [pick(1, 4) for _ in range(b)]
    lens_k = [pick(1, 5) for _ in range(b)]
    cu_q, cu_k = np.cumsum([0, *lens_q]), np.cumsum([0, *lens_k])
    sizes = {**sizes, "total_q": int(cu_q[-1]), "total_k": int(cu_k[-1]), "b+1": b + 1}
    ints = {
        "cu_seqlens_q": cu_q,
        "cu_seqlens_k": cu_k,
        "max_seqlen_q": np.asarray(max(lens_q)),
        "max_seqlen_k": np.asarray(max(lens_k)),
    }
    return sizes, ints


def _max_seqlen(x: Any, name: str, cu: Any) -> int:
    """``max_seqlen_*`` as an int (a Python int, or a 0-d integer tensor); at least the longest sequence."""
    if isinstance(x, torch.Tensor):
        if x.ndim != 0 or x.dtype.is_floating_point or x.dtype == torch.bool:
            raise ScoreInputError(name, f"expected an int, found a tensor of shape {tuple(x.shape)}, dtype {x.dtype}")
        x = int(x.item())
    if isinstance(x, bool) or not isinstance(x, int | np.integer):
        raise ScoreInputError(name, f"expected an int, found {type(x).__name__}")
    c = np.asarray(cu.cpu() if isinstance(cu, torch.Tensor) else cu).astype(np.int64).reshape(-1)
    longest = int(np.max(np.diff(c), initial=0))
    if int(x) < longest:
        raise ScoreInputError(name, f"expected at least the longest sequence, {longest}, found {int(x)}")
    return int(x)


def _varlen_configure(base: Contract, options: Mapping[str, Any], kept: tuple[str, ...]) -> Contract:
    """The ``flash_attn_varlen`` contract for fixed keywords (``causal``, ``window_size``, ``softmax_scale``)."""
    configured, causal, window, scale = flash_configured(base, options)
    keep_window = varlen_window(configured)

    def ref(
        q: Any,
        k: Any,
        v: Any,
        cu_seqlens_q: Any,
        cu_seqlens_k: Any,
        max_seqlen_q: Any,
        max_seqlen_k: Any,
        dropout_p: float = 0.0,
        softmax_scale: float | None = scale,
        causal: bool = causal,
        window_size: tuple[int, int] = window,
    ) -> torch.Tensor:
        # flash_attn_varlen_func's signature; every mask aligned bottom-right inside each sequence
        _max_seqlen(max_seqlen_q, "max_seqlen_q", cu_seqlens_q)
        _max_seqlen(max_seqlen_k, "max_seqlen_k", cu_seqlens_k)
        return variants.varlen_attention(
            q,
            k,
            v,
            cu_seqlens_q,
            cu_seqlens_k,
            is_causal=causal,
            alignment="bottom_right",
            window=(int(window_size[0]), int(window_size[1])),
            scale=softmax_scale,
        )

    def gold(a: Args) -> np.ndarray:
        return golden_variants.varlen_attention(
            as_float64(a, "q"),
            as_float64(a, "k"),
            as_float64(a, "v"),
            a["cu_seqlens_q"],
            a["cu_seqlens_k"],
            is_causal=causal,
            alignment="bottom_right",
            window=window,
            scale=scale,
        )

    def as_attention(a: Args) -> dict[str, np.ndarray]:
        """Plain ``attention`` arguments with the same kept scores, weights and output: heads first
        over the packed rows, Q rescaled so that ``Q' Kᵀ/√d_k = scale·Q Kᵀ``, K and V grouped, the
        sequence blocks and their windows folded into one bool mask."""
        Q, K, V = (np.swapaxes(as_float64(a, n), 0, 1) for n in ("q", "k", "v"))  # (h, total, d)
        Q, K, V = rescaled_and_grouped(Q, K, V, scale, 0)
        keep = packed_keep(keep_window, a["cu_seqlens_q"], a["cu_seqlens_k"])  # (total_q, total_k)
        return {"Q": Q, "K": K, "V": V, "mask": np.broadcast_to(keep, (Q.shape[0], *keep.shape))}

    # (h_q, total_q, d_v) -> (total_q, h_q, d_v)
    return through_attention(configured, ref, gold, as_attention, (0, 1), packed_rows)


def flash_attn_varlen_contract() -> Contract:
    """FlashAttention's ``flash_attn_varlen_func`` with ``dropout_p = 0`` (see the module docstring
    for the layout and the per-sequence bottom-right alignment); its keywords (``causal``,
    ``window_size``, ``softmax_scale``) fixed by the spec. ``cu_seqlens_q``, ``cu_seqlens_k`` are
    int32 tensors, ``max_seqlen_q``, ``max_seqlen_k`` Python ints.

    Example:
        >>> c = flash_attn_varlen_contract().configured({"causal": True})
        >>> q = torch.zeros(3, 1, 1); v = torch.tensor([1.0, 2.0, 4.0]).reshape(3, 1, 1)
        >>> cu = torch.tensor([0, 2, 3], dtype=torch.int32)
        >>> c.reference(q, q, v, cu, cu, 2, 2).flatten().tolist()  # sequences [0, 1] and [2]
        [1.0, 1.5, 4.0]
    """
    unconfigured = Contract(
        name="flash_attn_varlen",
        family=ContractFamily.FLASH_VARLEN,
        parameters=(
            ("q", ("total_q", "h_q", "d_k")),
            ("k", ("total_k", "h_kv", "d_k")),
            ("v", ("total_k", "h_kv", "d_v")),
            ("cu_seqlens_q", ("b+1",)),
            ("cu_seqlens_k", ("b+1",)),
            ("max_seqlen_q", ()),
            ("max_seqlen_k", ()),
        ),
        returns=("total_q", "h_q", "d_v"),
        reference=variants.varlen_attention,
        golden_fn=lambda a: np.zeros(0),
        error_fn=lambda a: (1, np.zeros(0)),
        keywords=_VARLEN_KEYWORDS,
        configure=_varlen_configure,
        samples=(((("causal", True),), _VARLEN_NAMES),),
        bound_text="u·(error of scores and weights propagated through V), per sequence",
        int_parameters=frozenset({"cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"}),
        integer_fn=_varlen_integers,
        integer_check=_varlen_check,
    )
    return _varlen_configure(unconfigured, {}, unconfigured.parameter_names)


# ---------------------------------------------------------------------------------------------
# key padding


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
    """One valid length in ``[1, n_k]`` per batch item (a length of 0, every key padding, is a corner
    the worked examples show)."""
    return sizes, {"key_lengths": np.asarray([pick(1, int(sizes["n_k"])) for _ in range(int(sizes["b"]))])}


def _padding_configure(base: Contract, options: Mapping[str, Any], kept: tuple[str, ...]) -> Contract:
    """The ``key_padding_attention`` contract for a fixed ``scale``."""
    scale = options.get("scale")

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
        options=tuple(sorted(options.items())),
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
        family=ContractFamily.KEY_PADDING,
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
        keywords=(Keyword("scale", "positive_or_null", None, "the factor of Q Kᵀ; null means 1/√d_k"),),
        configure=_padding_configure,
        samples=(((("scale", 0.5),), ("query", "key", "value", "key_lengths")),),
        bound_text="u·(error of scores and weights propagated through V)",
        int_parameters=frozenset({"key_lengths"}),
        integer_fn=_padding_integers,
        integer_check=_padding_check,
    )
    return _padding_configure(unconfigured, {}, unconfigured.parameter_names)
