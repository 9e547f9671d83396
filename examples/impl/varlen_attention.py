"""An engineer's packed-batch and key-padding kernels, written with plain torch operations: what
``attnscore test --impl examples.impl.varlen_attention:flash_attn_varlen_func --spec varlen`` and
``--impl examples.impl.varlen_attention:attention --spec key_padding`` check (the integer
arguments arrive as FlashAttention takes them: ``cu_seqlens`` int32 tensors on the inputs' device,
``max_seqlen`` Python ints, ``key_lengths`` an int32 tensor)."""

from __future__ import annotations

import math

import torch


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor, scale: float | None) -> torch.Tensor:
    """q (h_q, n_q, d_k), k (h_kv, n_k, d_k), v (h_kv, n_k, d_v), keep broadcasting to (h_q, n_q, n_k)."""
    group = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)  # h0 h0 h1 h1
    s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1).nan_to_num(0.0) @ v  # a query that keeps no key: zeros


def flash_attn_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
) -> torch.Tensor:
    """q (total_q, h_q, d_k), k (total_k, h_kv, d_k), v (total_k, h_kv, d_v) -> (total_q, h_q, d_v);
    each sequence alone, causal and window aligned bottom-right inside it (FlashAttention 2.1+)."""
    left, right = window_size
    right = 0 if causal else right
    out = q.new_zeros(q.shape[0], q.shape[1], v.shape[2])
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for b in range(len(cq) - 1):
        qs, ks, vs = (t.transpose(0, 1) for t in (q[cq[b] : cq[b + 1]], k[ck[b] : ck[b + 1]], v[ck[b] : ck[b + 1]]))
        n_q, n_k = qs.shape[1], ks.shape[1]
        if n_q == 0 or n_k == 0:
            continue
        rel = torch.arange(n_k, device=q.device)[None, :] - (torch.arange(n_q, device=q.device)[:, None] + n_k - n_q)
        keep = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device)
        if left >= 0:
            keep &= rel >= -left
        if right >= 0:
            keep &= rel <= right
        out[cq[b] : cq[b + 1]] = _attend(qs, ks, vs, keep, softmax_scale).transpose(0, 1)
    return out


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, key_lengths: torch.Tensor) -> torch.Tensor:
    """query (b, h_q, n_q, d_k), key/value (b, h_kv, n_k, d), key_lengths (b,) -> (b, h_q, n_q, d_v):
    batch item b keeps keys j < key_lengths[b] (specs/key_padding.yaml)."""
    keep = torch.arange(key.shape[-2], device=key.device)[None, :] < key_lengths[:, None]  # (b, n_k)
    return _attend(query, key, value, keep[:, None, None, :], None)
