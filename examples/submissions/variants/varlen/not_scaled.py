import torch


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
):
    h_q = q.shape[1]
    h_kv = k.shape[1]
    out = torch.zeros(q.shape[0], h_q, v.shape[2], dtype=q.dtype)
    for s in range(len(cu_seqlens_q) - 1):
        qs = q[cu_seqlens_q[s] : cu_seqlens_q[s + 1]].transpose(0, 1)
        ks = k[cu_seqlens_k[s] : cu_seqlens_k[s + 1]].transpose(0, 1).repeat_interleave(h_q // h_kv, 0)
        vs = v[cu_seqlens_k[s] : cu_seqlens_k[s + 1]].transpose(0, 1).repeat_interleave(h_q // h_kv, 0)
        n_q, n_k = qs.shape[1], ks.shape[1]
        sc = qs @ ks.transpose(-2, -1)
        if causal:
            i = torch.arange(n_q)[:, None]
            j = torch.arange(n_k)[None, :]
            sc = sc.masked_fill(j > i + n_k - n_q, float("-inf"))
        p = torch.nan_to_num(torch.softmax(sc, dim=-1))
        out[cu_seqlens_q[s] : cu_seqlens_q[s + 1]] = (p @ vs).transpose(0, 1)
    return out
