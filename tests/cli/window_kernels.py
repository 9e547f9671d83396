"""Sliding-window kernels in flash_attn_func's form for the --keyword and --sweep tests: one right,
one that ignores the window whenever causal is set (wrong only at those grid points), one that gives
NaN for a query whose window holds no key (wrong only in that convention corner)."""

from __future__ import annotations

import torch


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    """flash_attn_func with causal and window_size aligned bottom-right: (b, n, h, d) layout."""
    return _attention(q, k, v, softmax_scale, causal, window_size, window_when_causal=True)


def window_dropped_when_causal(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    """As :func:`flash_attn_func`, but with causal set the window's left side is ignored."""
    return _attention(q, k, v, softmax_scale, causal, window_size, window_when_causal=False)


def nan_rows(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    """As :func:`flash_attn_func`, but a query whose window holds no key gets NaN, not zeros."""
    return _attention(q, k, v, softmax_scale, causal, window_size, window_when_causal=True, zero_empty=False)


def _attention(q, k, v, softmax_scale, causal, window_size, window_when_causal, zero_empty=True):
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (b, h, n, d)
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    s = (q @ k.transpose(-2, -1)) * scale
    i = torch.arange(n_q)[:, None] + n_k - n_q  # each query's position among the keys
    j = torch.arange(n_k)[None, :]
    left, right = window_size
    if causal:
        right = 0
        if not window_when_causal:
            left = -1
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    if left != -1:
        keep &= j >= i - left
    if right != -1:
        keep &= j <= i + right
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    if zero_empty:
        w = w.nan_to_num(0.0)
    return (w @ v).transpose(1, 2)
