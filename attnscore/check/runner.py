"""Runners: how a case's calls reach an implementation.

A runner takes the arguments of one call (plain numpy arrays already cast to the tested dtype,
and optionally the memory layout to hand each one over in, see :mod:`attnscore.boundary.layouts`) and
returns an :data:`attnscore.boundary.outputs.Outcome`: the result as plain data, or a failure with its
verdict. :class:`InProcessRunner` calls trusted code (the reference, an engineer's function)
directly; the sandboxed runner for untrusted submissions is in :mod:`attnscore.sandbox.launch`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import numpy as np

from attnscore.boundary.calls import describe_exception, inspect_call, tensor_layout, to_torch, type_name
from attnscore.boundary.outputs import BadReturn, CallFailure, Outcome, to_received
from attnscore.report.results import Verdict

__all__ = ["Runner", "InProcessRunner"]


class Runner(Protocol):
    """Anything that can make one call of the implementation under test."""

    def call(self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str] | None = None) -> Outcome: ...


class InProcessRunner:
    """Calls a trusted function in this process, with torch tensors on ``device``.

    After each call ``last_inspection`` says which inputs the function changed in place
    (``"mutated"``) and which ones the output shares memory with (``"aliased"``); the properties
    ``inputs_not_mutated`` and ``output_not_aliased`` read it.
    """

    def __init__(self, function: Callable[..., object], device: str = "cpu") -> None:
        self.function = function
        self.device = device
        self.last_inspection: dict[str, list[str]] | None = None

    def call(self, args: Mapping[str, np.ndarray], dtype: str, layouts: Mapping[str, str] | None = None) -> Outcome:
        names = list(args)
        layouts = layouts or {}
        tensors = [to_torch(a, dtype, self.device, layouts.get(n)) for n, a in args.items()]
        copies = [t.clone() for t in tensors]
        before = [tensor_layout(t) for t in tensors]  # shape and strides: metadata changes are mutation too
        self.last_inspection = None
        try:
            value = self.function(*tensors)
        except Exception as exc:  # the implementation's own error is a verdict, not a crash
            return CallFailure(Verdict.EXCEPTION, describe_exception(exc), exception=type_name(exc))
        self.last_inspection = inspect_call(names, tensors, copies, value, before)
        received = to_received(value)
        if isinstance(received, BadReturn):
            return CallFailure(Verdict.BAD_RETURN_TYPE, received.message)
        return received
