"""The call inputs in the memory the grader shares with its worker: their bytes in each dtype, and
the watch that reads them back after a call (inputs changed in place) and writes the canaries
(an output that shares an input's memory shows the input's canary)."""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np

from attnscore.boundary import wire
from attnscore.boundary.calls import to_torch
from attnscore.boundary.lazy_torch import torch

__all__ = ["CANARY_FLOATS", "InputWatch", "canary_bytes", "canary_value", "input_bytes"]

CANARY_FLOATS = ("float64", "float32", "float16", "bfloat16")
"""The input dtypes the grader writes canaries into once a call has returned (a mask or an integer
parameter that an output shared would make the output's dtype wrong anyway)."""


def canary_value(index: int) -> float:
    """The value every entry of float input ``index`` holds once its call has returned: exact in
    float16 and bfloat16 (8 significant bits), far outside what a case's inputs or outputs hold, and
    different for each input, so an output entry equal to it read that input's memory.

    >>> canary_value(0), canary_value(1)
    (-16512.0, -16640.0)
    """
    return -(1.0 + (index + 1) / 128.0) * 2.0**14


class InputWatch:
    """One call's inputs as the grader wrote them, and what it found of them (:meth:`settle`,
    :meth:`finish`): ``stages`` (input name -> ``"forward"``, ``"backward"`` or ``"after"``: when its
    bytes were first seen changed), ``aliased`` (inputs whose canaries the output holds)."""

    MOST_STOPS = 4  # Returned messages a call may send: "forward" and "call", and a few forged

    def __init__(self, layout: list[dict[str, Any]], raws: list[bytes], written: bytearray | None = None) -> None:
        """``layout``: the items as the request names them (``name``, ``dtype``, ``offset``, ...);
        ``raws``: the bytes the grader wrote for each, in the same order; ``written``, when given:
        the whole span the grader wrote from offset 0 to the last item's end (the items at their
        offsets, the gaps zero), taken over as it is instead of built again from ``raws``."""
        self.layout = layout
        self.expected = list(raws)
        # what the whole span should hold now: the items' expected bytes (the gaps as they were
        # written, zero); a span read back equal to it has no item changed (one comparison)
        if written is not None:
            self.start, self.end, self.span = 0, len(written), written
        else:
            # the shared memory the items lie in, from the first one's start to the last one's end
            self.start = min((item["offset"] for item in layout), default=0)
            self.end = max((item["offset"] + len(raw) for item, raw in zip(layout, raws, strict=True)), default=0)
            self.span = bytearray(self.end - self.start)
            for item, raw in zip(layout, raws, strict=True):
                at = item["offset"] - self.start
                self.span[at : at + len(raw)] = raw
        self.backward = any(item["name"] == wire.UPSTREAM for item in layout)
        self.forward_seen = False
        self.canaried = False
        self.stops = 0
        self.stages: dict[str, str] = {}
        self.aliased: set[str] = set()
        self.canaries: dict[str, float] = {}

    def _expect(self, index: int, raw: bytes) -> None:
        """Item ``index`` should hold ``raw`` from now on."""
        self.expected[index] = raw
        at = self.layout[index]["offset"] - self.start
        self.span[at : at + len(raw)] = raw

    def _read(self, shared: int) -> None:
        """Note every item whose bytes differ from what it should hold now, and when (the items'
        whole span read at once: one system call, whatever the count of inputs; compared item by
        item only when it differs from the whole span expected)."""
        if not self.layout:
            return
        span = os.pread(shared, self.end - self.start, self.start)
        if span == self.span:
            return
        when = "after" if self.canaried else "backward" if self.backward and self.forward_seen else "forward"
        for item, want in zip(self.layout, self.expected, strict=True):
            at = item["offset"] - self.start
            if item["name"] not in self.stages and span[at : at + len(want)] != want:
                self.stages[item["name"]] = when

    def settle(self, shared: int, reply: wire.Returned) -> bool:
        """The worker said :class:`~attnscore.boundary.wire.Returned`: read the inputs (and ``dO``);
        once the whole call has returned (``"call"``), write the canaries into the float inputs.
        False when the call may not stop again (its reply is then judged as it is: a crash)."""
        self.stops += 1
        if self.stops > self.MOST_STOPS or reply.stage is None:
            return False
        self._read(shared)
        if self.canaried:
            return True
        if reply.stage == "forward" and self.backward:
            self.forward_seen = True
            return True
        run: list[int] = []  # float inputs next to one another: their canaries written in one system call
        for index, item in enumerate(self.layout):
            if item["name"] == wire.UPSTREAM or item["dtype"] not in CANARY_FLOATS:
                self._write_canaries(shared, run)
                run = []
                # dO and masks keep their values: anything written to them from now on is seen too
                self._expect(index, os.pread(shared, len(self.expected[index]), item["offset"]))
                continue
            value = canary_value(index)
            self._expect(
                index, canary_bytes(value, item["dtype"], len(self.expected[index]) // _ITEM_BYTES[item["dtype"]])
            )
            self.canaries[item["name"]] = value
            run.append(index)
        self._write_canaries(shared, run)
        self.canaried = True
        return True

    def _write_canaries(self, shared: int, run: list[int]) -> None:
        """Write the expected bytes (their canaries) of the items ``run``, next to one another in
        the layout, in one system call: the stretch from the first one's start to the last one's
        end, the gaps between them zero as they were written."""
        if not run:
            return
        start = self.layout[run[0]]["offset"] - self.start
        end = self.layout[run[-1]]["offset"] - self.start + len(self.expected[run[-1]])
        os.pwrite(shared, self.span[start:end], self.start + start)

    def finish(self, shared: int, probe: np.ndarray | None) -> None:
        """After the result: anything written into the inputs since, and the canaries in ``probe``
        (the output read again after they were written; None when it read as the value did)."""
        self._read(shared)
        if probe is None or not self.canaries:
            return
        with np.errstate(invalid="ignore"):
            values = np.asarray(probe).astype(np.float64)
        for name, value in self.canaries.items():
            if values.size and bool(np.any(values == value)):
                self.aliased.add(name)


_ITEM_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
_PACKED = {"float64": "<d", "float32": "<f", "float16": "<e", "bfloat16": "<f"}


def canary_bytes(value: float, kind: str, count: int) -> bytes:
    """``count`` entries of ``value`` (a :func:`canary_value`, exact in every float dtype) as a
    tensor of ``kind`` (one of :data:`CANARY_FLOATS`) holds them: what :func:`input_bytes` makes
    of them, packed once and repeated.

    >>> canary_bytes(canary_value(0), "bfloat16", 2).hex()
    '81c681c6'
    """
    one = struct.pack(_PACKED[kind], value)
    return (one[2:] if kind == "bfloat16" else one) * count  # bfloat16: a float32's top half


_NUMPY_KINDS = {
    "float64": np.float64,
    "float32": np.float32,
    "float16": np.float16,
    "bool": np.bool_,
    "int32": np.int32,
}
_WANTED = {kind: np.dtype(numpy_kind).newbyteorder("<") for kind, numpy_kind in _NUMPY_KINDS.items()}


def input_bytes(array: np.ndarray, kind: str) -> bytes:
    """The bytes of ``array`` as a contiguous tensor of ``kind`` (a dtype name, ``bool`` or ``int32``)
    holds them, in C order: what the worker rebuilds the input from.

    Made with numpy, so that the grader needs no torch to send inputs: numpy rounds to float16 and
    float32 as torch does (to nearest, ties to even), and a bfloat16 input already rounded to
    bfloat16 (as built cases are, stored as float32) is the top half of each float32. Any other
    bfloat16 input (or one holding NaN, whose bits torch sets its own way) is converted by torch.
    """
    arr = np.asarray(array)
    if kind == "bfloat16":
        bits = np.ascontiguousarray(arr).view(np.uint32) if arr.dtype == np.float32 else None
        if bits is not None and not (bits & 0xFFFF).any() and not np.isnan(arr).any():
            return (bits >> 16).astype("<u2").tobytes()
        tensor = to_torch(arr, kind).contiguous().reshape(-1)  # torch's own rounding (and its NaN)
        return tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    wanted = _WANTED[kind]
    if arr.dtype == wanted:  # nothing to convert: its bytes in C order
        return arr.tobytes()
    with np.errstate(over="ignore", invalid="ignore"):  # out of range: inf, as torch rounds it
        return np.ascontiguousarray(arr, dtype=wanted).tobytes()
