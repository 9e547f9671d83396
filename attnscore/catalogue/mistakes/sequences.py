"""Mistakes of sequence masks in FlashAttention-style kernels (the ``flash_attn`` contract): the
sliding window (``window_size``) and the KV cache (``causal`` aligned bottom-right).

Each wrong implementation is the reference with one rule changed: which keys a query keeps
(a bool mask over ``(n_q, n_k)``), computed on the ``(b, n, h, d)`` inputs transposed to heads first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnscore.boundary.lazy_torch import torch
from attnscore.catalogue.families import flash
from attnscore.catalogue.mistakes.registry import add
from attnscore.catalogue.mistakes.shared import changing
from attnscore.maths import variants
from attnscore.maths.attention_changes import AttentionChange
from attnscore.maths.contract import Contract
from attnscore.maths.families.flash import flash_keep, flash_window

__all__ = ["flash", "flash_windowed", "flash_sliding", "flash_two_sided_window", "flash_cache"]


def flash_windowed(c: Contract) -> bool:
    """``flash_attn_func`` with a sliding window (``window_size`` not ``(-1, -1)``), not causal."""
    return flash(c) and tuple(c.option("window_size")) != (-1, -1) and not c.option("causal")


def flash_sliding(c: Contract) -> bool:
    """A sliding window, two-sided or causal: :func:`flash_windowed`, or ``causal`` with a bounded left
    side (``causal=True, window_size=(w - 1, 0)``, Hugging Face's ``sliding_window = w``)."""
    return flash_windowed(c) or (flash(c) and bool(c.option("causal")) and flash_window(c)[0] != -1)


def flash_two_sided_window(c: Contract) -> bool:
    """A sliding window that keeps keys after the query too (``right`` > 0 or unbounded), not causal."""
    return flash_windowed(c) and flash_window(c)[1] != 0


def flash_cache(c: Contract) -> bool:
    """``flash_attn_func`` with ``causal``: a KV cache of ``n_k - n_q`` earlier tokens, aligned bottom-right."""
    return flash(c) and bool(c.option("causal"))


Keep = Callable[[int, int], np.ndarray]


def _attend(c: Contract, args: tuple[torch.Tensor, ...], keep: Keep) -> torch.Tensor:
    """``flash_attn_func`` on ``args`` (``q, k, v`` as ``(b, n, h, d)``) with query ``i`` keeping the
    keys where ``keep(n_q, n_k)[i]`` is True instead of the contract's window."""
    q, k, v = args
    mask = torch.as_tensor(keep(q.shape[1], k.shape[1]), device=q.device)  # (n_q, n_k)
    out = variants.general_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, scale=c.option("softmax_scale")
    )
    return out.transpose(1, 2)  # (b, h_q, n_q, d_v) -> (b, n_q, h_q, d_v)


def _relative(n_q: int, n_k: int, offset: int) -> np.ndarray:
    """``(n_q, n_k)``: key ``j``'s position relative to query ``i``'s, ``j - (i + offset)``."""
    return np.arange(n_k)[None, :] - (np.arange(n_q)[:, None] + offset)


def _shifted_window(c: Contract, narrower: bool, both_sides: bool) -> Keep:
    """The contract's window with each bounded side (only the left one unless ``both_sides``) one
    key narrower (``<`` for ``<=``) or wider."""
    left, right = flash_window(c)
    step = -1 if narrower else 1

    def keep(n_q: int, n_k: int) -> np.ndarray:
        rel = _relative(n_q, n_k, n_k - n_q)
        out = np.ones((n_q, n_k), dtype=bool)
        if left != -1:
            out &= rel >= -(left + step)
        if right != -1:
            out &= rel <= (right + step if both_sides else right)
        return out

    return keep


def _window_form(narrower: bool, both_sides: bool) -> Callable[..., torch.Tensor]:
    def form(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        return _attend(c, args, _shifted_window(c, narrower, both_sides))

    return form


add(
    "window_off_by_one",
    "sliding window off by one",
    flash_sliding,
    "window_size=(left, right) keeps keys j with i - left <= j <= i + right (both ends included, "
    "left + right + 1 keys): your window is one key narrower or wider (< for <=, or left + 1 keys back)",
    forms=(_window_form(False, True), _window_form(True, False), _window_form(False, False)),
)(_window_form(True, True))


Rule = Callable[[tuple[int, int], int, int], np.ndarray]


def _keeping(rule: Rule) -> Callable[..., torch.Tensor]:
    """A mistake's ``fn``: :func:`_attend` with query ``i`` keeping the keys where
    ``rule(window, n_q, n_k)[i]`` is True, ``window`` the contract's ``(left, right)``."""

    def wrong(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
        window = flash_window(c)
        return _attend(c, args, lambda n_q, n_k: rule(window, n_q, n_k))

    return wrong


def _every_key(window: tuple[int, int], n_q: int, n_k: int) -> np.ndarray:
    """No mask: every query keeps every key."""
    return np.ones((n_q, n_k), dtype=bool)


def _top_left(window: tuple[int, int], n_q: int, n_k: int) -> np.ndarray:
    """The window with query ``i`` at key ``i`` (top-left) instead of ``i + n_k - n_q``."""
    return flash_keep(window, n_q, n_k, offset=0)


def _without_cache(window: tuple[int, int], n_q: int, n_k: int) -> np.ndarray:
    """The window with the first ``n_k - n_q`` keys (the cache) left out."""
    out = flash_keep(window, n_q, n_k)
    out[:, : max(n_k - n_q, 0)] = False  # the cache
    return out


def _cache_offset(shift: int) -> Rule:
    """The window with query ``i`` at key ``i + n_k - n_q + shift``."""
    return lambda window, n_q, n_k: flash_keep(window, n_q, n_k, offset=n_k - n_q + shift)


@add(
    "window_ignored",
    "sliding window ignored",
    flash_sliding,
    "with window_size=(left, right) query i keeps only keys i - left .. i + right (right = 0 with causal); "
    "your queries attended to every key (with causal: to every earlier key), as if there were no window",
)
def _window_ignored(c: Contract, spec: Any, *args: torch.Tensor) -> torch.Tensor:
    """Every key (a two-sided window), or the causal mask alone (a causal window: the window left out)."""
    rule = (
        (lambda n_q, n_k: flash_keep((-1, 0), n_q, n_k))
        if c.option("causal")
        else (lambda n_q, n_k: _every_key((-1, -1), n_q, n_k))
    )
    return _attend(c, args, rule)


add(
    "window_one_sided",
    "keys after the query dropped from the window",
    flash_two_sided_window,
    "window_size=(left, right) also keeps the right keys after query i (i + 1 .. i + right); you kept none, "
    "as a causal sliding window does",
)(_keeping(lambda window, n_q, n_k: flash_keep((window[0], 0), n_q, n_k)))


add(
    "window_top_left",
    "sliding window aligned top-left",
    flash_windowed,
    "flash_attn_func aligns the window bottom-right: query i sits at key position i + n_k - n_q (the last query "
    "with the last key); you centred it on key i, as if n_q = n_k",
)(_keeping(_top_left))


add(
    "kv_cache_top_left",
    "causal mask aligned top-left against a KV cache",
    flash_cache,
    "with a KV cache of n_k - n_q earlier tokens, query i is token n_k - n_q + i and keeps keys "
    "j <= i + n_k - n_q (bottom-right, FlashAttention; ONNX's past length offset); you kept j <= i "
    "(top-left, torch.ones(n_q, n_k).tril()), so the new tokens miss most of the cache",
)(_keeping(_top_left))


add(
    "kv_cache_offset_off_by_one",
    "KV-cache offset off by one",
    flash_cache,
    "query i is token n_k - n_q + i and keeps keys j <= i + n_k - n_q, its own key included; your offset is one "
    "too large (it sees the next token) or one too small (it misses its own key)",
    forms=(_keeping(_cache_offset(-1)),),
)(_keeping(_cache_offset(1)))


add(
    "kv_cache_causal_ignored",
    "causal mask left out with a KV cache",
    flash_cache,
    "one decoded query may see the whole cache, but a chunk of n_q > 1 new queries must not see each "
    "other's future: query i keeps keys j <= i + n_k - n_q (also when a cache is present, n_k > n_q: "
    "the causal mask is not only for the prefill)",
    forms=(changing(AttentionChange(causal_only_without_cache=True), __name__),),
)(_keeping(_every_key))


add(
    "kv_cache_ignored",
    "the cache left out: queries attend to the new keys only",
    flash_cache,
    "the first n_k - n_q keys are the cache of earlier tokens and take part too: attend to all n_k keys "
    "(bottom-right causal), not only to the n_q newest",
)(_keeping(_without_cache))
