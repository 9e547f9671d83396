"""Mistakes of packed variable-length batches (``flash_attn_varlen``) and of key padding
(``key_padding_attention``): :mod:`attnscore.maths.families.flash_varlen`, :mod:`~attnscore.maths.families.key_padding`.

Each wrong implementation is the reference with one rule changed: which rows form a sequence, how a
sequence's queries are aligned with its keys, or which keys (or queries) the valid lengths cut off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import key_padding, varlen
from attnscore.catalogue.mistakes.registry import add
from attnscore.catalogue.mistakes.shared import changing
from attnscore.maths import variants
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.contract import Contract
from attnscore.maths.families.flash import flash_keep
from attnscore.maths.families.flash_varlen import sequence_slices, varlen_window

__all__ = ["varlen", "varlen_bounded", "key_padding", "key_padding_aligned_per_item"]


def varlen_bounded(c: Contract) -> bool:
    """``flash_attn_varlen_func`` whose sequences mask some keys (``causal`` or a sliding window)."""
    return varlen(c) and varlen_window(c) != (-1, -1)


Keep = Callable[[int, int], np.ndarray]


def _packed(
    c: Contract, args: tuple[torch.Tensor, ...], rows: list[slice], cols: list[slice], keep: Keep
) -> torch.Tensor:
    """``flash_attn_varlen_func`` with the sequences' query ``rows`` and key ``cols`` given, and
    query ``i`` of a sequence keeping the keys where ``keep(n_q, n_k)[i]`` is True."""
    q, k, v = args[:3]  # (total, h, d)
    out = q.new_zeros(q.shape[0], q.shape[1], v.shape[2])  # (total_q, h_q, d_v)
    for r, s in zip(rows, cols, strict=True):
        n_q, n_k = r.stop - r.start, s.stop - s.start
        if n_q <= 0 or n_k <= 0:
            continue  # no keys: zeros
        mask = torch.as_tensor(keep(n_q, n_k), device=q.device)  # (n_q, n_k)
        o = variants.general_attention(
            q[r].transpose(0, 1),
            k[s].transpose(0, 1),
            v[s].transpose(0, 1),
            attn_mask=mask,
            scale=c.option("softmax_scale"),
        )
        out[r] = o.transpose(0, 1)  # (h_q, n_q, d_v) -> (n_q, h_q, d_v)
    return out


def _whole(rows: int) -> list[slice]:
    return [slice(0, rows)]


def _across(offset: str) -> Callable[..., torch.Tensor]:
    """The packed batch attended as one sequence, the contract's window aligned ``offset``
    (``"bottom_right"`` of the totals, ``"top_left"``, or ``"none"``: every key)."""

    def form(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        window = varlen_window(c)

        def keep(n_q: int, n_k: int) -> np.ndarray:
            if offset == "none":
                return np.ones((n_q, n_k), dtype=bool)
            return flash_keep(window, n_q, n_k, 0 if offset == "top_left" else None)

        return _packed(c, args, _whole(args[0].shape[0]), _whole(args[1].shape[0]), keep)

    return form


add(
    "varlen_across_boundary",
    "sequences of a packed batch attending across their boundary",
    varlen,
    "each sequence of a packed batch attends only to its own keys: sequence b is query rows "
    "cu_seqlens_q[b]..cu_seqlens_q[b+1]-1 and key rows cu_seqlens_k[b]..cu_seqlens_k[b+1]-1; your queries also "
    "saw the keys of other sequences (the packed rows attended as one long sequence)",
    forms=(_across("top_left"), _across("none")),
)(_across("bottom_right"))


def _sequences(
    slices: Callable[[tuple[torch.Tensor, ...]], tuple[list[slice], list[slice]]], offset: int | None = None
) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn``: :func:`_packed` with the sequences' query and key rows ``slices(args)`` and
    the contract's window, query ``i`` of a sequence at key ``i + offset`` (default ``n_k - n_q``)."""

    def wrong(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        window = varlen_window(c)
        rows, cols = slices(args)
        return _packed(c, args, rows, cols, lambda n_q, n_k: flash_keep(window, n_q, n_k, offset))

    return wrong


def _offsets(args: tuple[torch.Tensor, ...]) -> tuple[list[slice], list[slice]]:
    """The sequences as ``cu_seqlens_q`` and ``cu_seqlens_k`` give them (the right rows)."""
    return sequence_slices(args[3].cpu()), sequence_slices(args[4].cpu())


def _key_rows_from_queries(args: tuple[torch.Tensor, ...]) -> tuple[list[slice], list[slice]]:
    """The keys sliced with ``cu_seqlens_q`` too (cut at the number of keys)."""
    total_k = int(args[1].shape[0])
    rows = sequence_slices(args[3].cpu())
    return rows, [slice(min(r.start, total_k), min(r.stop, total_k)) for r in rows]


def _as_lengths(cu: torch.Tensor, total: int) -> list[slice]:
    """The rows a kernel that reads ``cu_seqlens[1:]`` as the sequences' lengths gives each sequence:
    offsets ``0, c_1, c_1 + c_2, ...``, cut at ``total``."""
    offsets = np.minimum(np.cumsum([0, *[int(x) for x in cu.reshape(-1).tolist()[1:]]]), total)
    return [slice(int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def _lengths(args: tuple[torch.Tensor, ...]) -> tuple[list[slice], list[slice]]:
    """The sequences with ``cu_seqlens_q`` and ``cu_seqlens_k`` read as lengths (:func:`_as_lengths`)."""
    return _as_lengths(args[3].cpu(), int(args[0].shape[0])), _as_lengths(args[4].cpu(), int(args[1].shape[0]))


add(
    "varlen_causal_top_left",
    "causal mask of a packed sequence aligned top-left",
    varlen_bounded,
    "flash_attn_varlen_func aligns causal and window_size bottom-right in each sequence: query i of a sequence "
    "with n_q queries and n_k keys sits at key i + n_k - n_q; your mask put it at key i (top-left, as SDPA's "
    "is_causal), which differs whenever a sequence has fewer queries than keys",
)(_sequences(_offsets, offset=0))


add(
    "varlen_key_offsets_from_queries",
    "cu_seqlens_q used for the keys too",
    varlen,
    "the keys of sequence b are rows cu_seqlens_k[b]..cu_seqlens_k[b+1]-1 of k and v; you sliced them with "
    "cu_seqlens_q, which is right only when every sequence has as many keys as queries",
)(_sequences(_key_rows_from_queries))


add(
    "varlen_cu_seqlens_as_lengths",
    "cu_seqlens read as lengths",
    varlen,
    "cu_seqlens holds cumulative offsets (0, n_0, n_0 + n_1, ...), not lengths: sequence b is rows "
    "cu_seqlens[b]..cu_seqlens[b+1]-1; you took cu_seqlens[b+1] as the length of sequence b, which moves every "
    "boundary after the second sequence",
)(_sequences(_lengths))


# ---------------------------------------------------------------------------------------------
# key padding


def _padded(c: Contract, args: tuple[torch.Tensor, ...], keep: Callable[[int, int, int], np.ndarray]) -> torch.Tensor:
    """Attention on ``(query, key, value, key_lengths)`` with batch item ``b``'s mask
    ``keep(length_b, n_q, n_k)`` (``(n_q, n_k)``; a row without keys gives zeros)."""
    q, k, v, lengths = args
    n_q, n_k = q.shape[-2], k.shape[-2]
    masks = [torch.as_tensor(keep(int(n), n_q, n_k)) for n in lengths.cpu().reshape(-1).tolist()]
    mask = torch.stack(masks)[:, None].to(q.device)  # (b, 1, n_q, n_k)
    return variants.general_attention(q, k, v, attn_mask=mask, scale=c.option("scale"))


@add(
    "padding_on_queries",
    "padding applied to queries instead of keys",
    key_padding,
    "key_lengths[b] says how many keys of batch item b are valid: keys j >= key_lengths[b] must get no weight, "
    "while every query is computed; you masked the queries i >= key_lengths[b] (zero rows) and let every query "
    "attend to the padding keys",
)
def _padding_on_queries(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _padded(c, args, lambda n, n_q, n_k: np.broadcast_to((np.arange(n_q) < n)[:, None], (n_q, n_k)).copy())


def _shifted_length(step: int) -> Callable[..., torch.Tensor]:
    def form(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        return _padded(c, args, lambda n, n_q, n_k: np.broadcast_to(np.arange(n_k) < n + step, (n_q, n_k)).copy())

    return form


add(
    "key_length_off_by_one",
    "valid key length off by one",
    key_padding,
    "batch item b keeps keys 0 .. key_lengths[b] - 1 (j < key_lengths[b]): your mask kept one key more "
    "(j <= key_lengths[b]) or one fewer",
    forms=(_shifted_length(-1),),
)(_shifted_length(1))


@add(
    "key_padding_ignored",
    "key padding ignored",
    key_padding,
    "keys j >= key_lengths[b] are padding and must get no weight; you attended to every key",
)
def _padding_ignored(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    return _padded(c, args, lambda n, n_q, n_k: np.ones((n_q, n_k), dtype=bool))


def key_padding_aligned_per_item(c: Contract) -> bool:
    """Key padding with a causal mask or a bounded window aligned at each item's valid key length
    (``alignment: valid_length``, FlashAttention's and ONNX's): where aligning elsewhere shows."""
    if not key_padding(c) or c.option("alignment") != "valid_length":
        return False
    return bool(c.option("is_causal")) or tuple(c.option("window_size")) != (-1, -1)


add(
    "key_padding_aligned_at_padded_end",
    "causal mask or window aligned at the padded key length",
    key_padding_aligned_per_item,
    "align the causal mask and the window at each batch item's valid key length: query i of item b sits at "
    "key i + key_lengths[b] - n_q (the last query on the last valid key, as FlashAttention and ONNX do); you "
    "aligned at the padded length n_k (i + n_k - n_q), so a shorter item's queries keep padding positions and "
    "lose their own keys",
)(changing(AttentionChange(options=(("alignment", "bottom_right"),)), __name__))


add(
    "key_padding_aligned_top_left",
    "causal mask or window aligned top-left (j <= i) under key padding",
    key_padding_aligned_per_item,
    "align the causal mask and the window at each batch item's valid key length: query i of item b sits at "
    "key i + key_lengths[b] - n_q; you aligned query i with key i (torch.ones(n_q, n_k).tril(), SDPA's "
    "is_causal), which differs whenever n_q != key_lengths[b]",
)(changing(AttentionChange(options=(("alignment", "top_left"),)), __name__))
