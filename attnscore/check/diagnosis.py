"""Diagnosis: which known mistake does a failing output match, with evidence beyond coincidence?

For a failing call, every catalogue mistake that applies to the spec's contract
(:mod:`attnscore.catalogue.mistakes`) is recomputed on the same inputs (as the implementation received
them, promoted to float64; bool masks stay bool) and compared with the output under the case's
allowed error, widened by the close tolerance of the tested dtype. A mistake that agrees with the
golden value on these inputs cannot explain a failure and is skipped. The ones that match are
*candidates*; a name is shown only when evidence rules it in:

1. **Agreement on other inputs.** With a runner (always, when grading or testing), the
   implementation is also called on :data:`CONFIRMATIONS` fixed random inputs of the contract
   (every size >= 2, drawn once per spec and dtype, the same for every submission). A candidate
   survives only if, on each of them, the implementation's output matches the mistake
   recomputed there (or both raise). A 1×1 output that happens to equal a worked example's
   answer, or a NaN that several wrong rules share on one edge case, does not survive.
2. **Enough entries.** Over the failing call and the confirmation inputs together, the
   mistake must differ from the golden value in at least :data:`MIN_EVIDENCE` entries: one
   scalar that matches is a coincidence, not a diagnosis.
3. **One name.** Exactly one candidate must survive; otherwise the diagnosis is None and the
   feedback says nothing more: a wrong name is worse than none.

A mistake that does not apply to the tested dtype (``computed_in_float16`` for float16 inputs,
whose message says "do not cast to half") is never a candidate.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import numpy as np
import torch

from attnscore.catalogue.mistakes import Mistake, mistakes_for
from attnscore.check.cases import _call, derive_seed
from attnscore.check.outputs import CallFailure, Received, to_received
from attnscore.check.strategies import draw_examples, legend_sizes, random_args
from attnscore.maths.tolerance import CLOSE_DEFAULTS, close_enough, entries_close

__all__ = ["diagnose", "recompute", "matches", "holds", "CONFIRMATIONS", "MIN_EVIDENCE"]

CONFIRMATIONS = 3
MIN_EVIDENCE = 2

# Which mistakes cannot be what happened in a dtype: their message would be false there.
_NOT_IN_DTYPE = {"computed_in_float16": ("float16",)}

# The confirmation inputs per (spec, dtype), and each runner's outputs on them.
_INPUTS: dict[tuple[str, int, str, str], list[Any]] = {}
_OUTPUTS: weakref.WeakKeyDictionary[Any, dict[tuple[str, int, str], list[Any]]] = weakref.WeakKeyDictionary()


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


def _tolerance(allowed: np.ndarray | float, want: np.ndarray, shape: tuple[int, ...], dtype: str) -> Any:
    rtol, atol = CLOSE_DEFAULTS[dtype]
    allowed_arr = np.broadcast_to(np.where(np.isfinite(allowed), allowed, 0.0), shape) if np.ndim(allowed) else allowed
    return allowed_arr + 4 * (atol + rtol * np.abs(np.where(np.isfinite(want), want, 0.0)))


def matches(got: np.ndarray, want: np.ndarray, allowed: np.ndarray | float, dtype: str) -> bool:
    """Same shape, same NaN/±inf placement, finite entries within ``allowed`` + close(dtype)
    (:func:`attnscore.maths.tolerance.close_enough` with the widened tolerance)."""
    if got.shape != want.shape:
        return False
    return close_enough(got, want, _tolerance(allowed, want, got.shape, dtype))


def _differing(want: np.ndarray, golden: np.ndarray, allowed: np.ndarray, dtype: str) -> int:
    """How many entries of the mistake's value are not the golden value (all of them if shapes differ)."""
    if want.shape != golden.shape:
        return max(int(want.size), 1)
    return int(np.count_nonzero(~entries_close(want, golden, _tolerance(allowed, golden, want.shape, dtype))))


def _explains(mistake: Mistake, spec: Any, call: Any, got: np.ndarray, dtype: str) -> tuple[bool, int]:
    """Whether ``mistake`` explains ``got`` on ``call``, and in how many entries it differs from golden."""
    want = recompute(mistake, spec, call.args)
    golden = np.asarray(call.golden, dtype=np.float64)
    allowed = np.asarray(call.allowed, dtype=np.float64)
    if want is None:
        return False, 0
    if want.shape == golden.shape and matches(want, golden, allowed, dtype):
        return False, 0  # the mistake gives the right answer here: it cannot explain a failure
    tol = allowed if want.shape == golden.shape else 0.0
    return matches(got, want, tol, dtype), _differing(want, golden, allowed, dtype)


def holds(mistake: Mistake, spec: Any, call: Any, received: Received, dtype: str) -> bool:
    """Whether the output ``received`` of ``call`` is what ``mistake`` gives (and not the golden value)."""
    return _explains(mistake, spec, call, received.array.astype(np.float64), dtype)[0]


def _confirmation_calls(spec: Any, dtype: str) -> list[Any]:
    """:data:`CONFIRMATIONS` fixed random calls of the spec's contract (every size >= 2)."""
    key = (spec.id, spec.version, str(getattr(spec, "path", "")), dtype)
    if key not in _INPUTS:
        contract = spec.contract
        strategy = legend_sizes(contract, max_size=6, min_size=2).flatmap(
            lambda sizes: random_args(contract, 5.0, sizes)
        )
        examples = draw_examples(strategy, CONFIRMATIONS, derive_seed(spec.id, spec.version, "diagnosis", dtype))
        _INPUTS[key] = [_call(spec, args, dtype, spec.tolerance) for args in examples]
    return _INPUTS[key]


def _confirmation_outputs(spec: Any, runner: Any, dtype: str) -> list[tuple[Any, Any]]:
    """The runner's outputs on the confirmation calls, made once per runner, spec and dtype."""
    calls = _confirmation_calls(spec, dtype)
    try:
        cache = _OUTPUTS.setdefault(runner, {})
    except TypeError:  # pragma: no cover - a runner that cannot be weakly referenced
        cache = {}
    key = (spec.id, spec.version, dtype)
    if key not in cache:
        cache[key] = [runner.call(c.args, dtype) for c in calls]
    return list(zip(calls, cache[key], strict=True))


def _confirmed(mistake: Mistake, spec: Any, observed: list[tuple[Any, Any]], dtype: str) -> tuple[bool, int]:
    """Whether the implementation behaves as ``mistake`` on every confirmation input; evidence count."""
    evidence = 0
    for call, outcome in observed:
        want = recompute(mistake, spec, call.args)
        if isinstance(outcome, CallFailure) or want is None:
            if isinstance(outcome, CallFailure) and want is None:
                continue  # both raise here: consistent, but no evidence
            return False, 0
        golden = np.asarray(call.golden, dtype=np.float64)
        allowed = np.asarray(call.allowed, dtype=np.float64)
        tol = allowed if want.shape == golden.shape else 0.0
        if not matches(outcome.array.astype(np.float64), want, tol, dtype):
            return False, 0
        evidence += _differing(want, golden, allowed, dtype)
    return True, evidence


def diagnose(spec: Any, call: Any, received: Received, dtype: str, runner: Any = None) -> dict[str, str] | None:
    """``{"id", "message"}`` of the one catalogue mistake the output matches, with evidence, else None.

    ``runner`` makes the confirmation calls (see the module docstring); without it only the
    failing call counts as evidence.
    """
    got = received.array.astype(np.float64)
    found: list[tuple[Mistake, int]] = []
    for mistake in mistakes_for(spec.contract.name):
        if dtype in _NOT_IN_DTYPE.get(mistake.id, ()):
            continue
        explained, evidence = _explains(mistake, spec, call, got, dtype)
        if explained:
            found.append((mistake, evidence))
    if not found:
        return None
    if runner is not None:
        observed = _confirmation_outputs(spec, runner, dtype)
        survivors = []
        for mistake, evidence in found:
            ok, more = _confirmed(mistake, spec, observed, dtype)
            if ok:
                survivors.append((mistake, evidence + more))
        found = survivors
    found = [(m, e) for m, e in found if e >= MIN_EVIDENCE]
    if len(found) != 1:
        return None
    return {"id": found[0][0].id, "message": found[0][0].message}
