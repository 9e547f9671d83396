"""Backward mistakes: matched on the output, every gradient and the saved logsumexp together, on the
failing call and on the diagnosis's confirmation inputs (:mod:`attnscore.check.diagnosis_inputs`).
"""

from __future__ import annotations

import warnings

import numpy as np

from attnscore.boundary.gradients import NoBackward, WithGradients, backward_call
from attnscore.boundary.lazy_torch import torch
from attnscore.boundary.outputs import CallFailure
from attnscore.catalogue.families import flash_attention_2
from attnscore.catalogue.mistakes import Mistake
from attnscore.check.cases import Call
from attnscore.check.diagnosis_inputs import backward_outputs
from attnscore.check.diagnosis_match import MIN_EVIDENCE, differing, fitted, matches, tensors
from attnscore.check.runner import Runner
from attnscore.spec.model import Spec

__all__ = ["diagnose_backward", "recompute_backward"]


def recompute_backward(
    mistake: Mistake, spec: Spec, call: Call, params: dict[str, float] | None = None
) -> WithGradients | None:
    """The mistake's forward and backward on ``call``'s inputs and upstream in float64 (its ``L``
    read as the spec reads a submission's), or None when it cannot run there."""
    names = list(call.args)
    inputs: list[object] = list(tensors(call.args))
    place = getattr(spec, "logsumexp", None) or ("saved_tensors", None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, got = backward_call(
                mistake.bind(spec.contract, spec, 0, **(params or {})),
                names,
                inputs,
                torch.tensor(np.asarray(call.upstream), dtype=torch.float64),
                logsumexp=place,
            )
    except Exception:  # noqa: BLE001 - a mistake that cannot run on these inputs does not match
        return None
    return got if isinstance(got, WithGradients) and not isinstance(got, NoBackward) else None


def _parts(call: Call, spec: Spec, dtype: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(part, golden, allowed)`` of a backward call: the output, each gradient, and ``L``."""
    parts = [("O", np.asarray(call.golden, dtype=np.float64), np.asarray(call.allowed, dtype=np.float64))]
    for name, golden in (call.gradient_goldens or {}).items():
        parts.append((name, golden, (call.gradient_allowed or {})[name]))
    if flash_attention_2(spec.contract):
        from attnscore.maths.families.flash_attention_2 import logsumexp_allowed, logsumexp_golden

        values = list(call.args.values())
        causal = bool(spec.contract.option("is_causal"))
        parts.append(
            (
                "L",
                logsumexp_golden(values[0], values[1], causal),
                logsumexp_allowed(values[0], values[1], causal, dtype, 4.0),
            )
        )
    return parts


def _part_of(value: WithGradients, part: str) -> np.ndarray | None:
    if part == "O":
        return value.array.astype(np.float64)
    if part == "L":
        return value.logsumexp
    grad = value.gradients.get(part)
    return None if grad is None else grad.astype(np.float64)


def _backward_agrees(got: WithGradients, want: WithGradients, call: Call, spec: Spec, dtype: str) -> tuple[bool, int]:
    """Whether ``got`` is ``want`` in every part both have, and how many entries ``want`` gets wrong."""
    evidence = 0
    for part, golden, allowed in _parts(call, spec, dtype):
        mine, theirs = _part_of(got, part), _part_of(want, part)
        if theirs is None:
            continue
        if mine is None:
            if part == "L":
                continue  # the submission's L could not be read: judge the rest
            return False, 0
        tol = allowed if np.shape(theirs) == np.shape(golden) else 0.0
        if not matches(mine, theirs, tol, dtype):
            return False, 0
        evidence += differing(theirs, golden, np.asarray(allowed), dtype)
    return True, evidence


def diagnose_backward(
    spec: Spec, call: Call, received: WithGradients, dtype: str, runner: Runner | None
) -> dict[str, str] | None:
    """The one backward mistake (``Mistake.backward``) whose output, gradients and ``L`` are the
    submission's on the failing call and on the confirmation inputs, with evidence; else None."""
    found: list[tuple[Mistake, dict[str, float], int]] = []
    for mistake in spec.known_mistakes():
        if not mistake.backward or not mistake.applies_in(dtype) or mistake.scores_zero:
            continue
        for params in fitted(mistake, spec, call, received.array.astype(np.float64)):
            want = recompute_backward(mistake, spec, call, params)
            if want is None:
                continue
            agrees, evidence = _backward_agrees(received, want, call, spec, dtype)
            if agrees and evidence > 0:
                found.append((mistake, params, evidence))
                break
    if runner is not None and found:
        kept = []
        observed = backward_outputs(spec, runner, dtype)
        for mistake, params, evidence in found:
            for other, outcome in observed:
                want = recompute_backward(mistake, spec, other, params)
                if isinstance(outcome, CallFailure) or not isinstance(outcome, WithGradients) or want is None:
                    break
                agrees, more = _backward_agrees(outcome, want, other, spec, dtype)
                if not agrees:
                    break
                evidence += more
            else:
                kept.append((mistake, params, evidence))
        found = kept
    found = [f for f in found if f[2] >= MIN_EVIDENCE]
    if len(found) != 1:
        return None
    mistake, params, _ = found[0]
    return {"id": mistake.id, "message": mistake.describe(params)}
