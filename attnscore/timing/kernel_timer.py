"""Timing one kernel call: CUDA events on a GPU, wall time on the CPU, with the cache flushed.

Method (the one Triton's ``do_bench`` and most kernel papers use): run the function a few times to
warm up (compilation, allocator, autotuning), then time ``repeats`` calls one by one. Before each
timed call a buffer larger than the last-level cache is overwritten, so no call finds its inputs in
a cache warmed by the previous one. On CUDA each call sits between two events recorded on the
current stream (the flush is before the first event, so it is not timed) and the device is
synchronised once at the end; on the CPU each call is timed with :func:`time.perf_counter_ns`.

Units: milliseconds. The summary is the median with the interquartile range (IQR, the spread of
the middle half), which one slow outlier (a context switch, a clock change) does not move.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attnscore.boundary.lazy_torch import torch

__all__ = ["FLUSH_BYTES", "Timing", "time_calls"]

FLUSH_BYTES = 256 * 1024**2
"""Bytes overwritten before each timed call: larger than the L2 of current GPUs (H100 50 MB,
H200 60 MB, B200 126 MB) and the last-level cache of current CPUs."""


@dataclass(frozen=True)
class Timing:
    """The timed calls of one function, in milliseconds.

    Attributes:
        samples_ms: one wall or event time per timed call, in the order they ran.
        clock: ``"cuda events"`` or ``"wall"``.
    """

    samples_ms: tuple[float, ...]
    clock: str

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def iqr_ms(self) -> float:
        """Interquartile range (75th minus 25th percentile); 0 with fewer than two samples."""
        if len(self.samples_ms) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples_ms, n=4, method="inclusive")
        return q3 - q1

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)


def _flusher(device: torch.device, flush_bytes: int) -> Callable[[], None]:
    if flush_bytes <= 0:
        return lambda: None
    buffer = torch.empty(flush_bytes, dtype=torch.uint8, device=device)

    def flush() -> None:
        buffer.zero_()

    return flush


def time_calls(
    function: Callable[..., Any],
    args: dict[str, torch.Tensor],
    *,
    device: str = "cpu",
    warmup: int = 3,
    repeats: int = 20,
    flush_bytes: int = FLUSH_BYTES,
    keywords: dict[str, Any] | None = None,
) -> Timing:
    """Time ``function(**args, **keywords)`` ``repeats`` times after ``warmup`` untimed calls.

    Args:
        function: the kernel; called with keyword arguments only.
        args: its tensor arguments, already on ``device``.
        device: ``"cpu"`` (wall time) or ``"cuda[:N]"`` (CUDA events on that device's current stream).
        warmup, repeats: untimed and timed calls (``repeats >= 1``).
        flush_bytes: bytes overwritten before every call (0: no flush).

    Raises:
        ValueError: ``repeats < 1`` or ``warmup < 0``.
        Whatever ``function`` raises, unchanged (the caller reports it).
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"expected repeats >= 1 and warmup >= 0, found repeats={repeats}, warmup={warmup}")
    dev = torch.device(device)
    extra = keywords or {}
    flush = _flusher(dev, flush_bytes)
    for _ in range(warmup):
        function(**args, **extra)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        for start, end in zip(starts, ends, strict=True):
            flush()
            start.record()
            function(**args, **extra)
            end.record()
        torch.cuda.synchronize(dev)
        return Timing(tuple(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)), "cuda events")
    samples = []
    for _ in range(repeats):
        flush()
        begin = time.perf_counter_ns()
        function(**args, **extra)
        samples.append((time.perf_counter_ns() - begin) / 1e6)
    return Timing(tuple(samples), "wall")
