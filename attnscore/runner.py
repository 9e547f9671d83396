"""Runners: how a case's calls reach an implementation.

A runner takes the arguments of one call (plain numpy arrays already cast to the tested dtype)
and returns an :data:`attnscore.outputs.Outcome`: the result as plain data, or a failure with its
verdict. :class:`InProcessRunner` calls trusted code (the reference, an engineer's function)
directly; the sandboxed runner for untrusted submissions is in :mod:`graders.sandbox`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import numpy as np
import torch

from attnscore.outputs import BadReturn, CallFailure, Outcome, to_received
from attnscore.results import Verdict

__all__ = ["Runner", "InProcessRunner", "to_torch", "describe_exception"]

_TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class Runner(Protocol):
    """Anything that can make one call of the implementation under test."""

    def call(self, args: Mapping[str, np.ndarray], dtype: str) -> Outcome: ...


def to_torch(array: np.ndarray, dtype: str, device: str = "cpu") -> torch.Tensor:
    """A fresh tensor of ``dtype`` on ``device`` holding ``array``'s values."""
    return torch.tensor(np.asarray(array), dtype=_TORCH_DTYPES[dtype], device=device)


def describe_exception(exc: BaseException) -> str:
    """``"raised ValueError: message"`` (message truncated to one screen line)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > 300:
        text = text[:297] + "..."
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


class InProcessRunner:
    """Calls a trusted function in this process, with torch tensors on ``device``."""

    def __init__(self, function: Callable[..., object], device: str = "cpu") -> None:
        self.function = function
        self.device = device

    def call(self, args: Mapping[str, np.ndarray], dtype: str) -> Outcome:
        tensors = [to_torch(a, dtype, self.device) for a in args.values()]
        try:
            value = self.function(*tensors)
        except Exception as exc:  # the implementation's own error is a verdict, not a crash
            return CallFailure(Verdict.EXCEPTION.value, describe_exception(exc))
        received = to_received(value)
        if isinstance(received, BadReturn):
            return CallFailure(Verdict.BAD_RETURN_TYPE.value, received.message)
        return received
