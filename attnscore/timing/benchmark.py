"""``attnscore bench``: an implementation's kernel time next to attnscore's reference and torch's own op.

For a spec's function contract (:mod:`attnscore.maths.contracts`), random inputs of the sizes given
(legend symbols ``n_q``, ``n_k``, ``d_k``, ``d_v``, ``d_q``, ``d_a``; the batch dims ``...`` as
``batch``) are built once, in the tested dtype on the tested device, and three candidates are
timed in the same run with :func:`attnscore.timing.kernel_timer.time_calls`:

- the implementation under test;
- attnscore's reference (:mod:`attnscore.maths.reference`: plain torch ops, the correctness
  baseline);
- torch's own fused or library op for the same maths (``torch.nn.functional.scaled_dot_product_attention``
  for attention, ``matmul`` for the Q Kᵀ views, ...; none for additive scores).

Before timing, the implementation's result is compared once with the reference's on the same
inputs, so a fast wrong kernel is reported as such (the spec's cases judge correctness; this is
only a guard against timing the wrong thing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnscore.boundary.dtypes import TORCH_DTYPES, UNIT_ROUNDOFF
from attnscore.boundary.lazy_torch import torch
from attnscore.maths import golden
from attnscore.maths.contract import Contract
from attnscore.timing.kernel_timer import FLUSH_BYTES, Timing, time_calls

__all__ = [
    "DEFAULT_SIZES",
    "Candidate",
    "BenchResult",
    "agrees",
    "parse_sizes",
    "bench_inputs",
    "torch_baseline",
    "bench",
]

DEFAULT_SIZES: dict[str, tuple[int, ...]] = {
    "batch": (4, 8),
    "n_q": (1024,),
    "n_k": (1024,),
    "d_k": (64,),
    "d_v": (64,),
    "d_q": (64,),
    "d_a": (64,),
}
"""A typical attention layer: batch 4, 8 heads, 1024 tokens, head width 64."""


@dataclass(frozen=True)
class Candidate:
    """One timed function: its label and its timing, or why it could not be timed."""

    label: str
    timing: Timing | None
    error: str = ""


@dataclass(frozen=True)
class BenchResult:
    """Everything one ``attnscore bench`` run measured.

    Attributes:
        contract: the contract's name; sizes: the sizes of the legend symbols its parameters use;
        dtype, device: as timed.
        candidates: implementation first, then the reference, then torch's op (when there is one).
        max_abs_diff: ``max |implementation - reference|`` over the output, or None when the
            implementation failed; ``reference_scale``: ``max |reference|`` for reading it.
        disagreement: "" when the implementation's result matches the reference's shape and is
            within the coarse guard :func:`agrees` allows; else what is wrong, in one line.
    """

    contract: str
    sizes: dict[str, tuple[int, ...]]
    dtype: str
    device: str
    candidates: tuple[Candidate, ...]
    max_abs_diff: float | None
    reference_scale: float
    disagreement: str = ""


def agrees(max_abs_diff: float, reference_scale: float, dtype: str) -> bool:
    """The coarse guard: ``max|diff| <= √u · max(1, max|reference|)``, ``u`` the dtype's unit roundoff.

    √u (float32: 2.4e-4, float16: 0.022, bfloat16: 0.0625) is far above rounding noise and far
    below a wrong formula; the spec's cases are the real correctness check.

    >>> agrees(1e-5, 30.0, "float32"), agrees(0.5, 30.0, "float32")
    (True, False)
    """
    return max_abs_diff <= math.sqrt(UNIT_ROUNDOFF[dtype]) * max(1.0, reference_scale)


def parse_sizes(pairs: Mapping[str, str]) -> dict[str, tuple[int, ...]]:
    """``{"n_q": "512", "batch": "2,8"}`` over :data:`DEFAULT_SIZES`; ``batch=`` (empty) means none.

    Raises:
        ValueError: an unknown symbol or a size that is not a positive integer, naming both.
    """
    sizes = dict(DEFAULT_SIZES)
    for name, text in pairs.items():
        if name not in DEFAULT_SIZES:
            raise ValueError(f"--size {name}={text}: expected one of {', '.join(DEFAULT_SIZES)}, found {name!r}")
        try:
            values = tuple(int(part) for part in text.split(",") if part.strip()) if text.strip() else ()
        except ValueError:
            raise ValueError(f"--size {name}={text}: expected positive integers separated by commas") from None
        if any(v < 1 for v in values) or (name != "batch" and len(values) != 1):
            raise ValueError(
                f"--size {name}={text}: expected {'positive integers' if name == 'batch' else 'one positive integer'}"
            )
        sizes[name] = values
    return sizes


def bench_inputs(contract: Contract, sizes: Mapping[str, tuple[int, ...]], dtype: str, device: str, seed: int = 0):
    """Random arguments of ``contract`` at ``sizes``: standard normal values in ``dtype`` on ``device``.

    Bool masks (``contract.bool_parameters``) keep about 90 % of the keys and always the first one,
    so no query is fully masked. Returns ``{parameter name: tensor}``.
    """
    rng = np.random.default_rng(seed)
    args: dict[str, torch.Tensor] = {}
    for name, legend in contract.parameters:
        shape: list[int] = []
        for symbol in legend:
            shape.extend(sizes["batch"] if symbol == "..." else sizes[symbol])
        if name in contract.bool_parameters:
            keep = rng.random(shape) < 0.9
            keep[..., 0] = True
            args[name] = torch.from_numpy(keep).to(device)
        else:
            args[name] = torch.from_numpy(rng.standard_normal(shape)).to(device=device, dtype=TORCH_DTYPES[dtype])
    return args


def _causal_sdpa(alignment: str) -> Callable[..., torch.Tensor]:
    def run(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        if alignment == "top_left":
            return torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)
        keep = torch.from_numpy(golden.causal_keep(Q.shape[-2], K.shape[-2], alignment)).to(Q.device)
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=keep)

    return run


def torch_baseline(contract: Contract) -> tuple[str, Callable[..., torch.Tensor]] | None:
    """torch's own op for ``contract``'s maths, with its label; None when torch has none (additive)."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    table: dict[str, tuple[str, Callable[..., torch.Tensor]]] = {
        "score": ("torch.dot", lambda q, k: torch.dot(q, k)),
        "scores": ("torch.mv", lambda q, keys: torch.mv(keys, q)),
        "score_matrix": ("torch.matmul", lambda Q, K: torch.matmul(Q, K.mT)),
        "scaled_score_matrix": ("torch.matmul", lambda Q, K: torch.matmul(Q, K.mT) / math.sqrt(Q.shape[-1])),
        "bilinear_scores": ("torch.matmul", lambda Q, K, W: torch.matmul(torch.matmul(Q, W), K.mT)),
        "masked_scores": ("Tensor.masked_fill", lambda S, mask: S.masked_fill(~mask, -math.inf)),
        "attention_weights": ("torch.softmax", lambda S, mask: torch.softmax(S.masked_fill(~mask, -math.inf), -1)),
        "attention": ("scaled_dot_product_attention", lambda Q, K, V, mask: sdpa(Q, K, V, attn_mask=mask)),
        "causal_attention_top_left": ("scaled_dot_product_attention", _causal_sdpa("top_left")),
        "causal_attention_bottom_right": ("scaled_dot_product_attention", _causal_sdpa("bottom_right")),
    }
    return table.get(contract.name)


def _timed(label: str, function: Callable[..., Any], args: dict[str, torch.Tensor], **options: Any) -> Candidate:
    try:
        return Candidate(label, time_calls(function, args, **options))
    except Exception as exc:  # noqa: BLE001 - the implementation's own error is the report
        return Candidate(label, None, f"{type(exc).__name__}: {exc}")


def bench(
    contract: Contract,
    function: Callable[..., Any],
    label: str,
    *,
    sizes: Mapping[str, tuple[int, ...]] = DEFAULT_SIZES,
    dtype: str = "float32",
    device: str = "cpu",
    warmup: int = 3,
    repeats: int = 20,
    flush_bytes: int = FLUSH_BYTES,
    keywords: dict[str, Any] | None = None,
    seed: int = 0,
) -> BenchResult:
    """Time ``function`` (the implementation, ``label``), the reference and torch's op on one input.

    ``keywords`` go to the implementation only (e.g. ``is_causal=True``). TF32 is not touched: an
    engineer times the kernel as it runs in their setting. Units: milliseconds (see
    :class:`~attnscore.timing.kernel_timer.Timing`).
    """
    args = bench_inputs(contract, sizes, dtype, device, seed)
    options = {"device": device, "warmup": warmup, "repeats": repeats, "flush_bytes": flush_bytes}
    expected = torch.as_tensor(contract.reference(**args))
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    diff: float | None = None
    problem = ""
    try:
        got = torch.as_tensor(function(**args, **(keywords or {})))
    except Exception as exc:  # noqa: BLE001 - the implementation's own error is the report
        problem = f"the implementation raised {type(exc).__name__}: {exc}"
    else:
        if tuple(got.shape) != tuple(expected.shape):
            problem = f"result shape {tuple(got.shape)} differs from the reference's {tuple(expected.shape)}"
        else:
            diff = (
                float(
                    (got.to(device=expected.device, dtype=torch.float64) - expected.double())
                    .abs()
                    .nan_to_num(math.inf)
                    .max()
                )
                if got.numel()
                else 0.0
            )
            if not agrees(diff, scale, dtype):
                problem = (
                    f"max |result - reference| = {diff:.3g} with max |reference| = {scale:.3g}: a different function?"
                )
    candidates = [_timed(label, function, args, keywords=keywords, **options)]
    candidates.append(_timed("attnscore reference", contract.reference, args, **options))
    baseline = torch_baseline(contract)
    if baseline is not None:
        candidates.append(_timed(f"torch {baseline[0]}", baseline[1], args, **options))
    used = {"batch" if symbol == "..." else symbol for _, legend in contract.parameters for symbol in legend}
    return BenchResult(
        contract.name,
        {k: v for k, v in sizes.items() if k in used},
        dtype,
        device,
        tuple(candidates),
        diff,
        scale,
        problem,
    )
