import math

import torch


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    b, n_q, h_q, d = q.shape
    n_k, h_kv = k.shape[1], k.shape[2]
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(d)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    k = k.repeat_interleave(h_q // h_kv, dim=1)
    v = v.repeat_interleave(h_q // h_kv, dim=1)
    s = (q @ k.transpose(-2, -1)) * softmax_scale
    # prefill: causal; decoding with a cache: the new tokens see the whole cache
    if causal and n_q == n_k:
        mask = torch.ones(n_q, n_k, dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ v).transpose(1, 2)
