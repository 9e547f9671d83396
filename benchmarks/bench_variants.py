"""The attention-variant reference against PyTorch's SDPA (math backend) on the same inputs.

Usage: ``.venv/bin/python benchmarks/bench_variants.py [--shape B,H,N,D] [--kv-heads H_kv] [--repeats R]
[--device cpu|cuda]``.

For each variant path of :func:`attnscore.maths.variants.general_attention` (plain, causal,
grouped-query ``H/H_kv``, sliding window, softcap, ALiBi, key padding, a float ``attn_mask`` bias) it
times the reference and
``torch.nn.functional.scaled_dot_product_attention`` under ``SDPBackend.MATH`` on the same float32
inputs (``(4, 16, 512, 64)`` with GQA 4:1 by default), and the float64 numpy twin
(:func:`attnscore.maths.golden_variants.general_attention`, CPU only), and prints each one's median
time and its cost as a ratio to SDPA's. SDPA has no window, ALiBi or key-length argument: it
gets the same rule as a float ``attn_mask`` (built outside the timing), so both compute the same
output, which is checked; it has no softcap, so that row compares with plain SDPA (the
output check is skipped there). The packed varlen row (:func:`attnscore.maths.variants.varlen_attention`,
``B`` sequences of lengths ``N, N - 37, ...`` packed into ``(total, H, D)``, causal) is compared
with SDPA called once per sequence. A GPU section runs the torch paths on CUDA when it is there
(the twin is numpy: CPU only). The machine's load average is printed with the figures: other work
on the machine slows every path.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnscore.maths import golden_variants, variants


def _median_s(fn: Callable[[], Any], repeats: int, device: str) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cases(B: int, H: int, N: int, D: int, H_kv: int, device: str) -> list[tuple[str, dict[str, Any], Any, bool]]:
    """``(name, reference options, SDPA attn_mask or None, enable_gqa)`` per variant path."""
    i = torch.arange(N, device=device)[:, None]
    j = torch.arange(N, device=device)[None, :]
    neg = torch.tensor(float("-inf"), device=device)
    zero = torch.tensor(0.0, device=device)
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device=device)
    lengths = torch.tensor([N - 17 * b for b in range(B)], device=device)
    window = torch.where((j >= i - 128) & (j <= i), zero, neg)  # (N, N)
    alibi = -slopes[:, None, None] * (i - j).abs()  # (H, N, N)
    padding = torch.where(j[None, None] < lengths[:, None, None, None], zero, neg)  # (B, 1, 1, N)
    bias = torch.randn(B, H, N, N, generator=torch.Generator().manual_seed(1)).to(device)
    bias = torch.where((i + j) % 7 == 0, neg, bias)  # finite biases, one entry in 7 masked
    return [
        ("plain", {}, None, False),
        ("causal (top-left)", {"is_causal": True}, "causal", False),
        (f"GQA {H}:{H_kv}", {}, None, True),
        ("window (128, 0)", {"window": (128, 0)}, window, False),
        ("softcap 30 (SDPA: plain)", {"softcap": 30.0}, None, False),
        ("ALiBi", {"alibi_slopes": slopes}, alibi, False),
        ("key lengths", {"key_lengths": lengths}, padding, False),
        ("float attn_mask (bias)", {"attn_mask": bias}, bias, False),
    ]


def run(shape: tuple[int, int, int, int], H_kv: int, repeats: int, device: str, golden: bool) -> None:
    B, H, N, D = shape
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, N, D, generator=gen).to(device)
    k_full = torch.randn(B, H, N, D, generator=gen).to(device)
    v_full = torch.randn(B, H, N, D, generator=gen).to(device)
    k_kv, v_kv = k_full[:, :H_kv].contiguous(), v_full[:, :H_kv].contiguous()
    print(f"device {device}, float32, query {tuple(q.shape)}, GQA key/value {tuple(k_kv.shape)}, median of {repeats}")
    print(f"{'path':26} {'SDPA math ms':>12} {'reference ms':>12} {'ratio':>7} {'golden ms':>10} {'ratio':>7}")
    for name, options, mask, gqa in _cases(B, H, N, D, H_kv, device):
        k, v = (k_kv, v_kv) if gqa else (k_full, v_full)
        causal = mask == "causal"
        sdpa_mask = None if causal or mask is None else mask

        def sdpa(
            k: torch.Tensor = k, v: torch.Tensor = v, m: Any = sdpa_mask, c: bool = causal, g: bool = gqa
        ) -> torch.Tensor:
            with sdpa_kernel(SDPBackend.MATH):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=c, enable_gqa=g)

        def ref(k: torch.Tensor = k, v: torch.Tensor = v, o: dict[str, Any] = options) -> torch.Tensor:
            return variants.general_attention(q, k, v, **o)

        if "softcap" not in name:
            err = (sdpa().float() - ref().float()).abs().max().item()
            assert err < 1e-3, f"{name}: reference and SDPA differ by {err}"
        t_sdpa = _median_s(sdpa, repeats, device)
        t_ref = _median_s(ref, repeats, device)
        cells = f"{name:26} {t_sdpa * 1e3:12.1f} {t_ref * 1e3:12.1f} {t_ref / t_sdpa:7.2f}"
        if golden:
            np_args = [x.cpu().numpy() for x in (q, k, v)]
            np_options = {key: (val.cpu().numpy() if torch.is_tensor(val) else val) for key, val in options.items()}
            t_gold = _median_s(lambda a=np_args, o=np_options: golden_variants.general_attention(*a, **o), 1, "cpu")
            cells += f" {t_gold * 1e3:10.1f} {t_gold / t_sdpa:7.2f}"
        print(cells)
    _varlen_row(q, k_full, v_full, repeats, device, golden)


def _varlen_row(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, repeats: int, device: str, golden: bool) -> None:
    """The packed varlen path against SDPA once per sequence, causal, on the same packed rows."""
    B, H, N, D = q.shape
    lengths = [max(1, N - 37 * b) for b in range(B)]
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)
    pack = [x[b, :, :n].transpose(0, 1) for x in (q, k, v) for b, n in enumerate(lengths)]  # (n_b, H, D) each
    pq, pk, pv = (torch.cat(pack[i * B : (i + 1) * B]).contiguous() for i in range(3))  # (total, H, D)

    def sdpa() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.MATH):
            outs = [
                torch.nn.functional.scaled_dot_product_attention(
                    pq[s:e].transpose(0, 1), pk[s:e].transpose(0, 1), pv[s:e].transpose(0, 1), is_causal=True
                ).transpose(0, 1)
                for s, e in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)
            ]
        return torch.cat(outs)

    def ref() -> torch.Tensor:
        return variants.varlen_attention(pq, pk, pv, cu, cu, is_causal=True, alignment="bottom_right")

    err = (sdpa().float() - ref().float()).abs().max().item()
    assert err < 1e-3, f"varlen: reference and SDPA differ by {err}"
    t_sdpa, t_ref = _median_s(sdpa, repeats, device), _median_s(ref, repeats, device)
    cells = f"{f'varlen packed ({B} seqs)':26} {t_sdpa * 1e3:12.1f} {t_ref * 1e3:12.1f} {t_ref / t_sdpa:7.2f}"
    if golden:
        a = [x.cpu().numpy() for x in (pq, pk, pv, cu, cu)]
        t_gold = _median_s(
            lambda: golden_variants.varlen_attention(*a, is_causal=True, alignment="bottom_right"), 1, "cpu"
        )
        cells += f" {t_gold * 1e3:10.1f} {t_gold / t_sdpa:7.2f}"
    print(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="4,16,512,64", help="B,H,N,D (default 4,16,512,64)")
    parser.add_argument("--kv-heads", type=int, default=4, help="key/value heads of the GQA row (default 4: 16:4)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-golden", action="store_true", help="skip the float64 numpy twin (slow)")
    args = parser.parse_args()
    shape = tuple(int(x) for x in args.shape.split(","))
    if len(shape) != 4 or shape[1] % args.kv_heads:
        parser.error(f"--shape: expected B,H,N,D with H a multiple of --kv-heads {args.kv_heads}, found {args.shape}")
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    run(shape, args.kv_heads, args.repeats, "cpu", not args.no_golden)  # type: ignore[arg-type]
    if torch.cuda.is_available():
        print(f"\nGPU: {torch.cuda.get_device_name(0)}")
        run(shape, args.kv_heads, max(args.repeats, 10), "cuda", False)  # type: ignore[arg-type]
    else:
        print("\nGPU section skipped: torch sees no CUDA device")


if __name__ == "__main__":
    main()
