"""An engineer's attention kernel with FlashAttention's options in SDPA's layout, written with plain
torch operations: what ``attnscore test --impl examples.impl.kernel_attention:kernel_attention``
checks against specs/gqa.yaml, specs/softcap.yaml and specs/alibi.yaml (each spec passes its own
flags by name: ``softcap=2.0, is_causal=True``, ``alibi_slopes=...``)."""

from __future__ import annotations

import math

import torch


def kernel_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    alibi_slopes: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    softcap: float | None = None,
) -> torch.Tensor:
    """query (..., H_q, n_q, d_k), key (..., H_kv, n_k, d_k), value (..., H_kv, n_k, d_v) ->
    (..., H_q, n_q, d_v); causal and ALiBi aligned bottom-right, as FlashAttention does."""
    n_q, n_k, d_k = query.shape[-2], key.shape[-2], query.shape[-1]
    group = query.shape[-3] // key.shape[-3]
    key = key.repeat_interleave(group, dim=-3)  # h0 h0 h1 h1
    value = value.repeat_interleave(group, dim=-3)
    s = (query @ key.transpose(-2, -1)) * (1.0 / math.sqrt(d_k) if scale is None else scale)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    rows = torch.arange(n_q, device=query.device).unsqueeze(-1) + (n_k - n_q)  # query i sits at key i + n_k - n_q
    cols = torch.arange(n_k, device=query.device).unsqueeze(0)
    if alibi_slopes is not None:
        s = s - alibi_slopes.to(s.dtype)[..., None, None] * (rows - cols).abs().to(s.dtype)
    if is_causal:
        s = s.masked_fill(cols > rows, float("-inf"))
    w = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a query that keeps no key: zeros
    return w @ value


def gqa_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """specs/gqa.yaml's function name."""
    return kernel_attention(query, key, value)
