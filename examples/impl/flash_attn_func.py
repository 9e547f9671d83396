"""An engineer's ``flash_attn_func`` written with plain torch operations: what
``attnscore test --impl examples.impl.flash_attn_func:flash_attn_func --spec sliding_window_causal``
checks (a Mistral-style causal sliding window, the spec passing ``causal=True, window_size=(2, 0)``),
and the same kernel for ``--spec sliding_window`` and ``--spec kv_cache``."""

from __future__ import annotations

import math

import torch


def flash_attn_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
) -> torch.Tensor:
    """q (b, n_q, h_q, d_k), k (b, n_k, h_kv, d_k), v (b, n_k, h_kv, d_v) -> (b, n_q, h_q, d_v), FlashAttention's
    layout; causal and the window aligned bottom-right (query i at key i + n_k - n_q), -1 = unbounded side."""
    n_q, n_k = q.shape[1], k.shape[1]
    group = q.shape[2] // k.shape[2]
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (b, h, n, d)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # h0 h0 h1 h1
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else softmax_scale
    s = (q @ k.transpose(-2, -1)) * scale
    rows = torch.arange(n_q, device=q.device).unsqueeze(-1) + (n_k - n_q)
    cols = torch.arange(n_k, device=q.device).unsqueeze(0)
    left, right = window_size
    if causal:
        right = 0
    keep = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device)
    if left >= 0:
        keep &= cols >= rows - left
    if right >= 0:
        keep &= cols <= rows + right
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)  # no key left: zeros
    return (w @ v).transpose(1, 2)
