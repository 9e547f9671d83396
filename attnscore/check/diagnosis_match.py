"""Whether one catalogue mistake explains one output: the mistake recomputed on the call's inputs
(its fitted parameters, each of its forms) and compared under the case's allowed error, with the
evidence it gives (the entries where it is wrong). :mod:`attnscore.check.diagnosis` applies the
evidence rule over many calls.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnscore.boundary.dtypes import UNIT_ROUNDOFF
from attnscore.boundary.lazy_torch import torch
from attnscore.boundary.outputs import CallFailure, Received, to_received
from attnscore.catalogue.conventions import corner_region
from attnscore.catalogue.mistakes import Mistake
from attnscore.check.cases import Call
from attnscore.maths.tolerance import CLOSE_DEFAULTS, close_enough, entries_close
from attnscore.spec.model import Spec

__all__ = ["Candidate", "MIN_EVIDENCE", "fitted", "holds", "matches", "recompute"]

MIN_EVIDENCE = 2


@dataclass
class Candidate:
    """A mistake that explains the failing output: its fitted parameters, the forms that held on
    every input seen so far, and how many entries of those inputs it gets wrong (the evidence)."""

    mistake: Mistake
    params: dict[str, float]
    forms: set[int] = field(default_factory=set)
    evidence: int = 0


_RECOMPUTED: dict[tuple[Any, ...], tuple[Any, Any, np.ndarray | None]] = {}
_RECOMPUTED_MAX = 4096


def recompute(
    mistake: Mistake, spec: Spec, args: dict[str, np.ndarray], form: int = 0, params: dict[str, float] | None = None
) -> np.ndarray | None:
    """The mistake's output (its ``form``, with ``params``) on ``args`` in float64 (None when it
    raises or returns no numbers).

    Kept per process for the same spec, arguments, mistake, form and parameters (the entry holds the
    spec and the arguments, so their ids are not reused meanwhile): the diagnosis of each failing
    case asks again for the same mistakes on the same confirmation and probe inputs."""
    key = (id(spec), id(args), mistake.id, form, tuple(sorted((params or {}).items())))
    hit = _RECOMPUTED.get(key)
    if hit is not None and hit[0] is spec and hit[1] is args:
        return hit[2]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = mistake.bind(spec.contract, spec, form, **(params or {}))(*tensors(args))
    except Exception:  # noqa: BLE001 - a mistake that cannot run on these inputs does not match
        value = None
    received = None if value is None else to_received(value)
    out = received.array.astype(np.float64) if isinstance(received, Received) else None
    if len(_RECOMPUTED) >= _RECOMPUTED_MAX:
        _RECOMPUTED.clear()
    _RECOMPUTED[key] = (spec, args, out)
    return out


def tensors(args: dict[str, np.ndarray]) -> list[torch.Tensor]:
    """The arguments as float64 tensors; bool masks stay bool and integer parameters int32."""
    kept = {np.dtype(np.bool_): torch.bool, np.dtype(np.int32): torch.int32}
    return [torch.tensor(np.asarray(a), dtype=kept.get(np.asarray(a).dtype, torch.float64)) for a in args.values()]


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


def differing(
    want: np.ndarray,
    golden: np.ndarray,
    allowed: np.ndarray,
    dtype: str,
    strict: bool = False,
    free: np.ndarray | None = None,
) -> int:
    """How many entries of the mistake's value are not the golden value (all of them if shapes differ).

    ``strict``: within the case's allowed error only, not widened by close(dtype) (whose float64
    rtol of 1e-7 is coarser than float32 rounding), for a mistake that is only a precision.
    ``free``: entries the mistake never writes (:attr:`Mistake.unwritten`), which are no evidence.
    """
    if want.shape != golden.shape:
        return max(int(want.size), 1)
    if strict:
        tol = np.broadcast_to(np.where(np.isfinite(allowed), allowed, 0.0), want.shape)
    else:
        tol = _tolerance(allowed, golden, want.shape, dtype)
    wrong = ~entries_close(want, golden, tol)
    if free is not None:
        wrong &= ~free
    return int(np.count_nonzero(wrong))


def _unwritten(
    mistake: Mistake, spec: Spec, call: Call, form: int, params: dict[str, float], shape: tuple[int, ...]
) -> np.ndarray | None:
    """The entries the mistake's ``fn`` (form 0) never writes on ``call`` (a bool array of ``shape``), or None."""
    if form != 0 or mistake.unwritten is None:
        return None
    try:
        free = mistake.unwritten(spec.contract, tuple(tensors(call.args)), params)
    except Exception:  # noqa: BLE001 - a rule that cannot run here leaves every entry written
        return None
    return np.asarray(free, dtype=bool) if free is not None and np.shape(free) == shape else None


def is_right(mistake: Mistake, want: np.ndarray, golden: np.ndarray, allowed: np.ndarray, dtype: str) -> bool:
    """Whether the mistake's value is the golden value here (so it cannot explain a failure)."""
    if mistake.computes_in:
        return differing(want, golden, allowed, dtype, strict=True) == 0
    return matches(want, golden, allowed, dtype)


def holds_on(
    cand: Candidate,
    spec: Spec,
    call: Call,
    got: np.ndarray | None,
    dtype: str,
    skip_right: bool,
    aside: np.ndarray | None = None,
) -> tuple[set[int], int]:
    """The forms of ``cand`` whose output on ``call`` is ``got`` (None: the implementation raised,
    so the forms that raise too), and the evidence: entries where the first of them is not golden.

    ``skip_right``: a form that gives the golden value here cannot explain a failure (the failing
    call itself), so it does not count. ``aside``: the entries the failing call was judged without
    (its convention corners set aside), taken as golden in the form's value as in ``got``.
    """
    golden = np.asarray(call.golden, dtype=np.float64)
    allowed = np.asarray(call.allowed, dtype=np.float64)
    mistake = cand.mistake
    level = mistake.computes_in or dtype
    held: set[int] = set()
    evidence = -1
    got = _outside(got, aside, golden)
    for form in sorted(cand.forms):
        want = _outside(recompute(mistake, spec, call.args, form, cand.params), aside, golden)
        if want is None or got is None:
            if want is None and got is None:
                held.add(form)  # both raise here: consistent, but no evidence
                evidence = max(evidence, 0)
            continue
        free = _unwritten(mistake, spec, call, form, cand.params, want.shape) if got.shape == want.shape else None
        if free is not None:  # entries its code never writes hold whatever memory held, never the right row
            if not _never_right(got, golden, allowed, free, dtype):
                continue
            want = np.where(free, got, want)
        if skip_right and want.shape == golden.shape and is_right(mistake, want, golden, allowed, dtype):
            continue
        tol: np.ndarray | float = allowed if want.shape == golden.shape else 0.0
        if mistake.computes_in:  # rounding errors of the precision the mistake computes in
            tol = np.asarray(tol) * (UNIT_ROUNDOFF[level] / UNIT_ROUNDOFF[dtype])
        if matches(got, want, tol, level):
            held.add(form)
            if evidence < 0:
                # unwritten rows are evidence only beside written ones: the tile boundary shows in this call
                aside = free if free is not None and bool(free.all()) else None
                evidence = differing(want, golden, allowed, dtype, strict=bool(mistake.computes_in), free=aside)
    return held, max(evidence, 0)


def _never_right(got: np.ndarray, golden: np.ndarray, allowed: np.ndarray, free: np.ndarray, dtype: str) -> bool:
    """Whether every row (last axis) of ``free`` entries differs from the golden value somewhere: a row
    that is right there was written after all (memory holds the right row only by accident). A row
    whose golden value is zero within the tolerance tells nothing (zeroed memory holds it) and is
    not asked to differ."""
    if golden.shape != got.shape or not free.any():
        return True
    tol = _tolerance(allowed, golden, got.shape, dtype)
    width = free.shape[-1] if free.ndim else 1
    wrong = (~entries_close(got, golden, tol)).reshape(-1, width)
    telling = (~entries_close(np.zeros_like(golden), golden, tol)).reshape(-1, width).any(axis=-1)
    rows = free.reshape(-1, width)
    asked = rows.any(axis=-1) & telling
    return bool((wrong & rows).any(axis=-1)[asked].all())


def _set_aside_region(spec: Spec, call: Call) -> np.ndarray | None:
    """The entries of the failing ``call``'s output in the convention corners the spec (as the case
    is judged) sets aside, as a bool array of the golden value's shape, or None when there are none:
    a mistake is matched there on everything else, as the output was judged. The confirmation and
    probe calls are matched whole: what the code does in a corner is evidence of which mistake it is."""
    names = getattr(spec, "set_aside", ())
    if not names:
        return None
    shape = np.shape(call.golden)
    args = dict(zip(spec.contract.parameter_names, call.args.values(), strict=True))
    regions = [r for r in (corner_region(n, spec.contract, args, shape) for n in names) if r is not None]
    return np.logical_or.reduce(regions) if regions else None


def _outside(value: np.ndarray | None, aside: np.ndarray | None, golden: np.ndarray) -> np.ndarray | None:
    """``value`` with the set-aside entries taken as the golden value (a value of another shape as it is)."""
    if value is None or aside is None or value.shape != golden.shape:
        return value
    return np.where(aside, golden, value)


def fitted(mistake: Mistake, spec: Spec, call: Call, got: np.ndarray) -> list[dict[str, float]]:
    """The parameter sets of ``mistake`` that its fit reads from ``got`` on ``call`` (one empty set
    for a mistake without parameters; none when the fit explains nothing)."""
    if mistake.fit is None:
        return [{}]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = mistake.fit(spec.contract, tuple(tensors(call.args)), got)
    except Exception:  # noqa: BLE001 - a fit that cannot run on these inputs explains nothing
        fit = None
    if fit is None:
        return []
    return [dict(p) for p in fit] if isinstance(fit, list) else [dict(fit)]


def explains(mistake: Mistake, spec: Spec, call: Call, got: np.ndarray, dtype: str) -> list[Candidate]:
    """``mistake`` as the candidates (one per fitted parameter set) that explain ``got`` on ``call``."""
    found = []
    aside = _set_aside_region(spec, call)
    for params in fitted(mistake, spec, call, got):
        cand = Candidate(mistake, params, set(range(mistake.form_count)))
        cand.forms, cand.evidence = holds_on(cand, spec, call, got, dtype, skip_right=True, aside=aside)
        if cand.forms:
            found.append(cand)
    return found


def holds(mistake: Mistake, spec: Spec, call: Call, received: Received | CallFailure, dtype: str) -> bool:
    """Whether the output ``received`` of ``call`` is what ``mistake`` gives (and not the golden
    value); for a call that raised, whether the mistake raises there too (:attr:`Mistake.raises`)."""
    if isinstance(received, CallFailure):
        return raises_here(mistake, spec, call) is not None
    return bool(explains(mistake, spec, call, received.array.astype(np.float64), dtype))


def raises_here(mistake: Mistake, spec: Spec, call: Call) -> dict[str, float] | None:
    """The first parameter set (:attr:`Mistake.raises`) under which the mistake raises on ``call``, or None."""
    if mistake.raises is None:
        return None
    try:
        options = mistake.raises(spec.contract, tuple(tensors(call.args)))
    except Exception:  # noqa: BLE001 - a rule that cannot run here explains nothing
        return None
    return next((p for p in options if recompute(mistake, spec, call.args, 0, p) is None), None)
