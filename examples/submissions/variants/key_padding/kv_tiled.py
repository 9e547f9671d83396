import math

import torch


def attention(query, key, value, key_lengths):
    b, h_q, n_q, d = query.shape
    h_kv, n_k = key.shape[1], key.shape[2]
    key = key.repeat(1, h_q // h_kv, 1, 1)
    value = value.repeat(1, h_q // h_kv, 1, 1)
    s = query @ key.transpose(-2, -1) / math.sqrt(d)
    valid = torch.arange(n_k)[None, :] < key_lengths[:, None]  # (b, n_k)
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-1))
    return p @ value
