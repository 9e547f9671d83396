import math

import torch


def attention(query, key, value, key_lengths):
    b, h_q, n_q, d = query.shape
    h_kv, n_k = key.shape[1], key.shape[2]
    key = key.repeat_interleave(h_q // h_kv, dim=1)
    value = value.repeat_interleave(h_q // h_kv, dim=1)
    s = query @ key.transpose(-2, -1) / math.sqrt(d)
    valid = torch.arange(n_k)[None, :] < key_lengths[:, None]
    s = s.masked_fill(~valid[:, None, None, :], torch.finfo(s.dtype).min)
    return torch.softmax(s, dim=-1) @ value
