"""Diagnosis: which known mistake does a failing output match?

For a failing call, every catalogue mistake that applies to the spec's contract
(:mod:`attnscore.mistakes`) is recomputed on the same inputs (as the implementation received
them, promoted to float64; bool masks stay bool) and compared with the output under the case's
allowed error, widened by the close tolerance of the tested dtype. Exactly one match names the
mistake; when nothing matches, or several mistakes match (small or degenerate inputs, where e.g.
softmax of one score and a score divided by itself agree), the diagnosis is None and the feedback
says nothing more: a wrong name is worse than none. A mistake that agrees with the golden value
on these inputs cannot explain a failure and is skipped.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from attnscore.mistakes import Mistake, mistakes_for
from attnscore.outputs import Received, to_received
from attnscore.tolerance import CLOSE_DEFAULTS

__all__ = ["diagnose", "recompute", "matches"]


def recompute(mistake: Mistake, spec: Any, args: dict[str, np.ndarray]) -> np.ndarray | None:
    """The mistake's output on ``args`` in float64 (None when it raises or returns no numbers)."""
    tensors = [
        torch.tensor(np.asarray(a), dtype=torch.bool if np.asarray(a).dtype == np.bool_ else torch.float64)
        for a in args.values()
    ]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = mistake.bind(spec.contract, spec)(*tensors)
    except Exception:  # noqa: BLE001 - a mistake that cannot run on these inputs does not match
        return None
    received = to_received(value)
    if not isinstance(received, Received):
        return None
    return received.array.astype(np.float64)


def matches(got: np.ndarray, want: np.ndarray, allowed: np.ndarray | float, dtype: str) -> bool:
    """Same shape, same NaN/±inf placement, finite entries within ``allowed`` + close(dtype)."""
    if got.shape != want.shape:
        return False
    with np.errstate(invalid="ignore", over="ignore"):
        if not np.array_equal(np.isnan(got), np.isnan(want)):
            return False
        inf_g, inf_w = np.isinf(got), np.isinf(want)
        if not np.array_equal(inf_g, inf_w) or not np.all(np.where(inf_g, got == want, True)):
            return False
        rtol, atol = CLOSE_DEFAULTS[dtype]
        allowed_arr = (
            np.broadcast_to(np.where(np.isfinite(allowed), allowed, 0.0), got.shape) if np.ndim(allowed) else allowed
        )
        tol = allowed_arr + 4 * (atol + rtol * np.abs(np.where(np.isfinite(want), want, 0.0)))
        fin = np.isfinite(got)
        return bool(np.all(np.abs(np.where(fin, got - want, 0.0)) <= tol))


def diagnose(spec: Any, call: Any, received: Received, dtype: str) -> dict[str, str] | None:
    """``{"id", "message"}`` of the one catalogue mistake the output matches, else None."""
    got = received.array.astype(np.float64)
    found = []
    golden = np.asarray(call.golden, dtype=np.float64)
    allowed = np.asarray(call.allowed, dtype=np.float64)
    for mistake in mistakes_for(spec.contract.name):
        want = recompute(mistake, spec, call.args)
        if want is None:
            continue
        if want.shape == golden.shape and matches(want, golden, allowed, dtype):
            continue  # the mistake gives the right answer here: it cannot explain a failure
        tol = allowed if want.shape == golden.shape else 0.0
        if matches(got, want, tol, dtype):
            found.append(mistake)
    if len(found) != 1:
        return None
    return {"id": found[0].id, "message": found[0].message}
