"""The arguments of the attention variants checked (:mod:`attnscore.maths.variants`): each bad argument
is one :class:`~attnscore.maths.reference.ScoreInputError` naming it, what was expected and what was
found; a good one comes back as the tensor or value the computation uses."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import is_tensor, torch
from attnscore.maths.reference import ScoreInputError, _as_tensor

__all__ = [
    "VARIANT_ALIGNMENTS",
    "checked_alibi",
    "checked_alignment",
    "checked_bool",
    "checked_cu_seqlens",
    "checked_key_lengths",
    "checked_mask",
    "checked_qkv",
    "checked_scale",
    "checked_softcap",
    "checked_window",
]

VARIANT_ALIGNMENTS = ("top_left", "bottom_right")  # or an int offset


def checked_qkv(query: Any, key: Any, value: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """query, key, value as tensors of one dtype and device with compatible shapes (SDPA layout)."""
    q, k, v = _as_tensor(query, "query"), _as_tensor(key, "key"), _as_tensor(value, "value")
    if q.ndim < 2:
        raise ScoreInputError(
            "query", f"expected shape (..., H_q, n_q, d_k) or (n_q, d_k) (at least 2-D), found shape {tuple(q.shape)}"
        )
    if q.ndim == 2:
        for t, name, shape in ((k, "key", "(n_k, d_k)"), (v, "value", "(n_k, d_v)")):
            if t.ndim != 2:
                raise ScoreInputError(
                    name, f"expected shape {shape} (2-D, like the 2-D query), found shape {tuple(t.shape)}"
                )
    else:
        for t, name, shape in ((k, "key", "(..., H_kv, n_k, d_k)"), (v, "value", "(..., H_kv, n_k, d_v)")):
            if t.ndim != q.ndim:
                raise ScoreInputError(
                    name,
                    f"expected shape {shape} with the query's rank {q.ndim}, found shape {tuple(t.shape)} ({t.ndim}-D)",
                )
    for t, name in ((k, "key"), (v, "value")):
        if t.dtype != q.dtype:
            raise ScoreInputError(name, f"expected the query's dtype {q.dtype}, found {t.dtype}; cast all three to one")
        if t.device != q.device:
            raise ScoreInputError(
                name, f"expected the query's device {q.device}, found {t.device}; move all three to one"
            )
    if k.shape[-1] != q.shape[-1]:
        raise ScoreInputError(
            "key", f"expected the query's width d_k={q.shape[-1]} as last dim, found d_k={k.shape[-1]}"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ScoreInputError("value", f"expected n_k={k.shape[-2]} keys as in key, found {v.shape[-2]}")
    if q.ndim > 2:
        h_q, h_kv = q.shape[-3], k.shape[-3]
        if v.shape[-3] != h_kv:
            raise ScoreInputError("value", f"expected H_kv={h_kv} heads as in key, found {v.shape[-3]}")
        if h_kv == 0 or h_q % h_kv != 0:
            raise ScoreInputError(
                "key",
                f"expected a number of KV heads H_kv that divides the query's H_q={h_q} (grouped-query "
                f"attention), found H_kv={h_kv}",
            )
        try:
            torch.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
        except RuntimeError:
            raise ScoreInputError(
                "key",
                f"expected batch dims that broadcast with the query's {tuple(q.shape[:-3])}, found "
                f"{tuple(k.shape[:-3])} (value {tuple(v.shape[:-3])})",
            ) from None
    return q, k, v


def checked_bool(flag: Any, argument: str) -> bool:
    if not isinstance(flag, (bool, np.bool_)):
        raise ScoreInputError(argument, f"expected True or False, found {flag!r}")
    return bool(flag)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def checked_alignment(alignment: Any, batch: torch.Size, q: torch.Tensor) -> str | int | torch.Tensor:
    """'top_left', 'bottom_right', an int, or an int64 tensor of the batch shape (one offset per batch item)."""
    if _is_int(alignment):
        return int(alignment)
    if isinstance(alignment, str):
        if alignment in VARIANT_ALIGNMENTS:
            return alignment
    elif isinstance(alignment, (torch.Tensor, np.ndarray, list, tuple)):
        t = _as_integers(alignment, "alignment", q)
        if t.ndim == 0:
            return int(t)
        if len(batch) == 0 or t.shape != batch:
            raise ScoreInputError(
                "alignment",
                f"expected one offset per batch item, shape {tuple(batch)} (the batch dims of the inputs), "
                f"found shape {tuple(t.shape)}",
            )
        return t
    raise ScoreInputError(
        "alignment",
        "expected 'top_left', 'bottom_right', an int offset (the KV-cache length) or one int offset per "
        f"batch item, found {alignment!r}",
    )


def checked_window(window: Any) -> tuple[int, int]:
    if not isinstance(window, (tuple, list)) or len(window) != 2 or not all(_is_int(w) and w >= -1 for w in window):
        raise ScoreInputError(
            "window", f"expected (left, right), each an int >= 0 or -1 for unbounded, found {window!r}"
        )
    return int(window[0]), int(window[1])


def checked_scale(scale: Any, d_k: int) -> float:
    if scale is None:
        if d_k == 0:
            raise ScoreInputError("scale", "expected d_k >= 1 for the default 1/√d_k, found d_k=0: pass a scale")
        return 1.0 / float(np.sqrt(d_k))  # as reference.attention computes it
    if not _is_real(scale) or not math.isfinite(float(scale)):
        raise ScoreInputError("scale", f"expected a finite real number (or None for 1/√d_k), found {scale!r}")
    return float(scale)


def checked_softcap(softcap: Any) -> float | None:
    if softcap is None:
        return None
    if not _is_real(softcap) or not math.isfinite(float(softcap)) or float(softcap) <= 0:
        raise ScoreInputError(
            "softcap",
            f"expected a finite number > 0 (or None for no cap; FlashAttention's softcap=0.0 means None), "
            f"found {softcap!r}",
        )
    return float(softcap)


def checked_mask(mask: Any, argument: str, q: torch.Tensor, shape: torch.Size) -> torch.Tensor | None:
    """A bool mask or a float mask of q's dtype that broadcasts from the right to `shape`, or None."""
    if mask is None:
        return None
    if is_tensor(mask):
        m = mask
    else:
        if isinstance(mask, (str, bytes)):
            raise ScoreInputError(
                argument, f"expected a bool or float tensor, array or list, found {type(mask).__name__}"
            )
        arr = _host_array(
            mask, argument, "a rectangular array", "bf", "bool (True = takes part) or float values (added)"
        )
        m = torch.as_tensor(arr)
        if arr.dtype.kind == "f" and not isinstance(mask, np.ndarray):  # lists of floats take the query's dtype
            m = m.to(q.dtype)
    if m.dtype != torch.bool:
        if not m.is_floating_point():
            raise ScoreInputError(
                argument,
                f"expected a bool mask (True = takes part) or a float mask of dtype {q.dtype}, found {m.dtype}",
            )
        if m.dtype != q.dtype:
            raise ScoreInputError(
                argument,
                f"expected a float mask of the query's dtype {q.dtype} (as SDPA), found {m.dtype}; "
                "cast it with .to(query.dtype) or pass a bool mask",
            )
    if m.device != q.device:
        raise ScoreInputError(argument, f"expected the query's device {q.device}, found {m.device}")
    fits = m.ndim <= len(shape)
    if fits:
        try:
            fits = torch.broadcast_shapes(m.shape, shape) == shape
        except RuntimeError:
            fits = False
    if not fits:
        raise ScoreInputError(
            argument,
            f"expected a shape that broadcasts from the right to the scores' shape {tuple(shape)}, "
            f"found {tuple(m.shape)}",
        )
    return m


def _host_array(x: Any, argument: str, shape_words: str, kinds: str, values: str) -> np.ndarray:
    """``x`` (an array or nested lists, not a tensor) as a numpy array whose dtype kind is one of
    ``kinds``: one that numpy cannot make rectangular is "expected ``shape_words``", another dtype
    "expected ``values``, found DTYPE values" (each a ScoreInputError naming ``argument``)."""
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:
        raise ScoreInputError(argument, f"expected {shape_words}, found {type(x).__name__} ({exc})") from None
    if arr.dtype.kind not in kinds:
        raise ScoreInputError(argument, f"expected {values}, found {arr.dtype} values")
    return arr


def _as_integers(x: Any, argument: str, q: torch.Tensor) -> torch.Tensor:
    """x as an int64 tensor on q's device; bool, float and non-numeric input refused."""
    if is_tensor(x):
        t = x
        if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
            raise ScoreInputError(argument, f"expected integers, found dtype {t.dtype}")
    else:
        arr = _host_array(x, argument, "a 1-D array of integers", "iu", "integers")
        t = torch.as_tensor(arr)
    return t.to(device=q.device, dtype=torch.int64)


def checked_key_lengths(lengths: Any, batch: torch.Size, n_k: int, q: torch.Tensor) -> torch.Tensor | None:
    if lengths is None:
        return None
    if len(batch) == 0:
        raise ScoreInputError(
            "key_lengths",
            "expected a query with a batch axis, (B, H_q, n_q, d_k) or more (key_lengths has one entry per "
            f"batch item), found a query of shape {tuple(q.shape)} without one",
        )
    t = _as_integers(lengths, "key_lengths", q)
    if t.shape != batch:
        raise ScoreInputError("key_lengths", f"expected the batch shape {tuple(batch)}, found shape {tuple(t.shape)}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) > n_k):
        raise ScoreInputError(
            "key_lengths",
            f"expected valid key counts in [0, n_k={n_k}], found values from {int(t.min())} to {int(t.max())}",
        )
    return t


def checked_alibi(slopes: Any, batch: torch.Size, h_q: int, q: torch.Tensor, two_d: bool) -> torch.Tensor | None:
    if slopes is None:
        return None
    t = _as_tensor(slopes, "alibi_slopes")
    allowed = [torch.Size([h_q])] + ([torch.Size([*batch, h_q])] if len(batch) else [])
    if t.shape not in allowed:
        wanted = " or ".join(str(tuple(s)) for s in allowed)
        what = "one slope for the single head of 2-D inputs" if two_d else "(H_q,) or (*batch, H_q)"
        raise ScoreInputError("alibi_slopes", f"expected shape {wanted} ({what}), found shape {tuple(t.shape)}")
    if t.device != q.device:
        raise ScoreInputError("alibi_slopes", f"expected the query's device {q.device}, found {t.device}")
    return t


def checked_cu_seqlens(cu: Any, argument: str, total: int, total_desc: str, length: int | None) -> list[int]:
    """cu_seqlens as a list of ints: (B + 1,), starting at 0, non-decreasing, ending at `total`."""
    if cu is None:
        raise ScoreInputError(argument, "expected a 1-D integer tensor (B + 1,) of sequence offsets, found None")
    t = _as_integers(cu, argument, torch.empty(0))
    if t.ndim != 1 or t.numel() == 0:
        raise ScoreInputError(
            argument, f"expected shape (B + 1,) with at least one entry, found shape {tuple(t.shape)}"
        )
    offsets = [int(x) for x in t.tolist()]
    if length is not None and len(offsets) != length:
        raise ScoreInputError(argument, f"expected {length} entries (B + 1) as cu_seqlens_q has, found {len(offsets)}")
    if offsets[0] != 0:
        raise ScoreInputError(argument, f"expected a first entry 0, found {offsets[0]}")
    for b in range(len(offsets) - 1):
        if offsets[b + 1] < offsets[b]:
            raise ScoreInputError(
                argument, f"expected non-decreasing offsets, found {offsets[b]} then {offsets[b + 1]} at entry {b + 1}"
            )
    if offsets[-1] != total:
        raise ScoreInputError(argument, f"expected a last entry equal to {total_desc} {total}, found {offsets[-1]}")
    return offsets
