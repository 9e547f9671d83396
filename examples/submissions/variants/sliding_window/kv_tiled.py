import torch


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1)):
    b, n_q, h_q, d = q.shape
    n_k, h_kv = k.shape[1], k.shape[2]
    scale = softmax_scale if softmax_scale is not None else d**-0.5
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    k = k.repeat(1, h_q // h_kv, 1, 1)
    v = v.repeat(1, h_q // h_kv, 1, 1)
    s = (q @ k.transpose(-2, -1)) * scale
    pos = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)
    j = torch.arange(n_k).unsqueeze(0)
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    left, right = window_size
    if left >= 0:
        keep &= j >= pos - left
    if right >= 0:
        keep &= j <= pos + right
    if causal:
        keep &= j <= pos
    s = s.masked_fill(~keep, float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-1))
    return (p @ v).transpose(1, 2)
