"""Diagnosis: which known mistake does a failing output match, with evidence beyond coincidence?

For a failing call, every catalogue mistake that applies to the spec's contract and the tested
dtype (:mod:`attnscore.catalogue.mistakes`) is recomputed on the same inputs (as the implementation
received them, promoted to float64; bool masks stay bool) and compared with the output under the
case's allowed error, widened by the close tolerance of the tested dtype (of the precision the
mistake computes in, for ``computed_in_float32``). A mistake with parameters (a constant scale
ratio, a fill value) first fits them to the output; a mistake with several forms (real code that
differs only where conventions differ, such as a query with no kept key) matches when one of its
forms does. A mistake that agrees with the golden value on these inputs cannot explain a failure
and is skipped. The ones that match are *candidates*; a name is shown only when evidence rules it
in (the evidence rule):

1. **Agreement on other inputs.** With a runner (always, when grading or testing), the
   implementation is also called on :data:`CONFIRMATIONS` fixed random inputs of the contract
   (random non-zero values; every size >= 2; ``d_k`` differs between them, and on each of them
   √d_k, d_k/2, 2·d_k, √d_v and √(heads·d_k) all differ; ``d_v != d_k``; at least two heads;
   every query keeps a key and masks one; the same for every submission), and on the further
   confirmation inputs of the mistakes that apply (``Mistake.confirm_sizes``: n = 17 for the
   tile-edge mistakes). A candidate survives only if, on each of them, the implementation's output
   matches the mistake recomputed there, with the parameters fitted on the failing call and the
   same form throughout (or both raise). A fit may give several parameter sets (tile sizes the
   failing call cannot tell apart): each is a candidate, and the best borne out is kept.
2. **Enough entries.** Over the failing call and the confirmation inputs together, the
   mistake must differ from the golden value in at least :data:`MIN_EVIDENCE` entries: one
   scalar that matches is a coincidence, not a diagnosis.
3. **One name.** When several candidates survive, or one lacks evidence, the implementation is
   called on probe inputs where they disagree or where the short one is not golden (the spec's
   worked examples, and corners of the first confirmation input: a query with every key masked,
   a masked key holding +inf, NaN or a huge score, more queries than keys, and the mistakes' own
   ``probe_sizes``); a candidate that does not match there is dropped, one that does gains its
   evidence. Exactly one must remain, with enough evidence; otherwise the diagnosis is None and
   the feedback says nothing more: a wrong name is worse than none.

Entries a mistake's code never writes (``Mistake.unwritten``: rows past a kernel's last full tile)
agree with any value but the right row, and are evidence only beside written entries of the same
call. A call that raised is diagnosed by :func:`diagnose_raised`: a mistake that raises there
(``Mistake.raises``) and does what the implementation does on its witnesses (``Mistake.witnesses``).

A mistake that cannot happen in the tested dtype (``computed_in_float16`` for float16 inputs,
``computed_in_float32`` for anything but float64; :meth:`Mistake.applies_in`) is never a candidate.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from attnscore.boundary.dtypes import UNIT_ROUNDOFF
from attnscore.boundary.gradients import NoBackward, WithGradients, backward_call
from attnscore.boundary.outputs import CallFailure, Received, to_received
from attnscore.boundary.verdict import Verdict
from attnscore.catalogue.conventions import corner_region
from attnscore.catalogue.mistakes import Mistake, mistakes_for
from attnscore.check.cases import spec_call
from attnscore.check.runner import Runner
from attnscore.maths.strategies import derive_seed
from attnscore.maths.tolerance import CLOSE_DEFAULTS, close_enough, entries_close

if TYPE_CHECKING:
    import torch
else:
    from attnscore.boundary.lazy_torch import torch

__all__ = [
    "diagnose",
    "recompute",
    "matches",
    "holds",
    "confirmation_args",
    "nonfinite_hint",
    "CONFIRMATIONS",
    "MIN_EVIDENCE",
]

CONFIRMATIONS = 3
MIN_EVIDENCE = 2

# The legend sizes of the confirmation inputs. d_k differs from one to the next, so that no
# per-d_k scale rule (√d_k, d_k/2, 2·d_k, √(heads·d_k)) is a constant factor of the right one over
# all three, and on each of them those scales and √d_v all differ (d_k = 4, where d_k/2 = √d_k, is
# avoided); d_v != d_k; two to four heads; n_q <= n_k, so no query lacks a key under either
# causal alignment; d_a = d_k once (for the additive projection mistake that needs it).
_CONFIRMATION_SIZES: tuple[dict[str, Any], ...] = (
    {"...": (2,), "n_q": 3, "n_k": 5, "d_k": 3, "d_v": 5, "d_q": 4, "d_a": 2},
    {"...": (3,), "n_q": 4, "n_k": 4, "d_k": 6, "d_v": 4, "d_q": 3, "d_a": 5},
    {"...": (2, 4), "n_q": 2, "n_k": 6, "d_k": 10, "d_v": 7, "d_q": 5, "d_a": 10},
)

# The confirmation and probe inputs per (spec, dtype), and each runner's outputs on them.
_INPUTS: dict[tuple[str, ...], list[Any]] = {}
_OUTPUTS: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], list[Any]]] = weakref.WeakKeyDictionary()


@dataclass
class _Candidate:
    """A mistake that explains the failing output: its fitted parameters, the forms that held on
    every input seen so far, and how many entries of those inputs it gets wrong (the evidence)."""

    mistake: Mistake
    params: dict[str, float]
    forms: set[int] = field(default_factory=set)
    evidence: int = 0


_RECOMPUTED: dict[tuple[Any, ...], tuple[Any, Any, np.ndarray | None]] = {}
_RECOMPUTED_MAX = 4096


def recompute(
    mistake: Mistake, spec: Any, args: dict[str, np.ndarray], form: int = 0, params: dict[str, float] | None = None
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
            value = mistake.bind(spec.contract, spec, form, **(params or {}))(*_tensors(args))
    except Exception:  # noqa: BLE001 - a mistake that cannot run on these inputs does not match
        value = None
    received = None if value is None else to_received(value)
    out = received.array.astype(np.float64) if isinstance(received, Received) else None
    if len(_RECOMPUTED) >= _RECOMPUTED_MAX:
        _RECOMPUTED.clear()
    _RECOMPUTED[key] = (spec, args, out)
    return out


def _tensors(args: dict[str, np.ndarray]) -> list[torch.Tensor]:
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


def _differing(
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
    mistake: Mistake, spec: Any, call: Any, form: int, params: dict[str, float], shape: tuple[int, ...]
) -> np.ndarray | None:
    """The entries the mistake's ``fn`` (form 0) never writes on ``call`` (a bool array of ``shape``), or None."""
    if form != 0 or mistake.unwritten is None:
        return None
    try:
        free = mistake.unwritten(spec.contract, tuple(_tensors(call.args)), params)
    except Exception:  # noqa: BLE001 - a rule that cannot run here leaves every entry written
        return None
    return np.asarray(free, dtype=bool) if free is not None and np.shape(free) == shape else None


def _right(mistake: Mistake, want: np.ndarray, golden: np.ndarray, allowed: np.ndarray, dtype: str) -> bool:
    """Whether the mistake's value is the golden value here (so it cannot explain a failure)."""
    if mistake.computes_in:
        return _differing(want, golden, allowed, dtype, strict=True) == 0
    return matches(want, golden, allowed, dtype)


def _holds_on(
    cand: _Candidate,
    spec: Any,
    call: Any,
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
        if skip_right and want.shape == golden.shape and _right(mistake, want, golden, allowed, dtype):
            continue
        tol: np.ndarray | float = allowed if want.shape == golden.shape else 0.0
        if mistake.computes_in:  # rounding errors of the precision the mistake computes in
            tol = np.asarray(tol) * (UNIT_ROUNDOFF[level] / UNIT_ROUNDOFF[dtype])
        if matches(got, want, tol, level):
            held.add(form)
            if evidence < 0:
                # unwritten rows are evidence only beside written ones: the tile boundary shows in this call
                aside = free if free is not None and bool(free.all()) else None
                evidence = _differing(want, golden, allowed, dtype, strict=bool(mistake.computes_in), free=aside)
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


def _set_aside_region(spec: Any, call: Any) -> np.ndarray | None:
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


def _fitted(mistake: Mistake, spec: Any, call: Any, got: np.ndarray) -> list[dict[str, float]]:
    """The parameter sets of ``mistake`` that its fit reads from ``got`` on ``call`` (one empty set
    for a mistake without parameters; none when the fit explains nothing)."""
    if mistake.fit is None:
        return [{}]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = mistake.fit(spec.contract, tuple(_tensors(call.args)), got)
    except Exception:  # noqa: BLE001 - a fit that cannot run on these inputs explains nothing
        fitted = None
    if fitted is None:
        return []
    return [dict(p) for p in fitted] if isinstance(fitted, list) else [dict(fitted)]


def _explains(mistake: Mistake, spec: Any, call: Any, got: np.ndarray, dtype: str) -> list[_Candidate]:
    """``mistake`` as the candidates (one per fitted parameter set) that explain ``got`` on ``call``."""
    found = []
    aside = _set_aside_region(spec, call)
    for params in _fitted(mistake, spec, call, got):
        cand = _Candidate(mistake, params, set(range(mistake.form_count)))
        cand.forms, cand.evidence = _holds_on(cand, spec, call, got, dtype, skip_right=True, aside=aside)
        if cand.forms:
            found.append(cand)
    return found


def holds(mistake: Mistake, spec: Any, call: Any, received: Received | CallFailure, dtype: str) -> bool:
    """Whether the output ``received`` of ``call`` is what ``mistake`` gives (and not the golden
    value); for a call that raised, whether the mistake raises there too (:attr:`Mistake.raises`)."""
    if isinstance(received, CallFailure):
        return _raises_here(mistake, spec, call) is not None
    return bool(_explains(mistake, spec, call, received.array.astype(np.float64), dtype))


def _raises_here(mistake: Mistake, spec: Any, call: Any) -> dict[str, float] | None:
    """The first parameter set (:attr:`Mistake.raises`) under which the mistake raises on ``call``, or None."""
    if mistake.raises is None:
        return None
    try:
        options = mistake.raises(spec.contract, tuple(_tensors(call.args)))
    except Exception:  # noqa: BLE001 - a rule that cannot run here explains nothing
        return None
    return next((p for p in options if recompute(mistake, spec, call.args, 0, p) is None), None)


def _additive_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A float mask added to the scores: biases in ±[0.25, 2], about one entry in five exactly 0 and
    one in four ``-inf``; every row keeps a finite entry and (with two or more keys) has a ``-inf`` one
    and a non-zero finite one where it can (so reading it as bool, ignoring it or subtracting it all differ)."""
    mask = rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.25, 2.0, size=shape)
    draw = rng.random(shape)
    mask[draw < 0.2] = 0.0
    mask[draw > 0.75] = -np.inf
    if len(shape) >= 1 and shape[-1] >= 1:
        rows = mask.reshape(-1, shape[-1])
        for row in rows:
            j = rng.integers(shape[-1])
            if not np.isfinite(row[j]):
                row[j] = rng.uniform(0.25, 2.0)
            if shape[-1] >= 2 and np.isfinite(row).all():
                row[(j + 1 + rng.integers(shape[-1] - 1)) % shape[-1]] = -np.inf
        mask = rows.reshape(shape)
    return mask


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], is_bool: bool) -> np.ndarray:
    """Random non-zero values in ±[0.25, 2] (no ties, no zeros); a mask keeps about 60% of the
    keys, and in every row at least one key and (with two or more keys) masks at least one."""
    if not is_bool:
        return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.25, 2.0, size=shape)
    mask = rng.random(shape) < 0.6
    if len(shape) >= 1 and shape[-1] >= 1:
        rows = mask.reshape(-1, shape[-1])
        for row in rows:
            row[rng.integers(shape[-1])] = True
            if shape[-1] >= 2 and row.all():
                row[rng.integers(shape[-1])] = False
                if not row.any():
                    row[0] = True
        mask = rows.reshape(shape)
    return mask


def _pick(rng: np.random.Generator, lo: int, hi: int) -> int:
    """An integer in ``[lo, hi]`` from ``rng`` (an integer parameter's rule, :meth:`Contract.integers`)."""
    return int(rng.integers(lo, hi + 1))


def _leading_sizes(contract: Any, batch: tuple[int, ...]) -> tuple[int, ...]:
    """``batch`` with exactly as many dims as the spec names (:attr:`Contract.leading`: its inputs
    always have that rank): cut, or padded with 2s; ``batch`` itself for the open ``...``."""
    if contract.leading is None:
        return batch
    count = len(contract.leading)
    return batch[:count] + (2,) * max(0, count - len(batch))


def _sized_args(spec: Any, sizes: dict[str, Any], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random arguments of the legend ``sizes`` (see :func:`_random_array`), with the rank the spec
    states (:func:`_leading_sizes`) and its contract's own integer parameters."""
    contract = spec.contract
    legend = {sym: 3 for _, symbols in contract.parameters for sym in symbols if sym != "..."}
    sizes = {**sizes, "...": _leading_sizes(contract, tuple(sizes["..."]))}
    sizes, integers = contract.integers(functools.partial(_pick, rng), {**legend, **sizes})
    args = {}
    for name, legend in contract.parameters:
        if name in integers:  # offsets or lengths from the contract's own rule, with the sizes they fit
            args[name] = integers[name]
            continue
        shape: tuple[int, ...] = ()
        for sym in legend:
            shape += tuple(sizes["..."]) if sym == "..." else (int(sizes.get(sym, 3)),)
        if name in contract.additive_parameters:
            args[name] = _additive_mask(rng, shape)
        else:
            args[name] = _random_array(rng, shape, name in contract.bool_parameters)
    return args


def confirmation_args(spec: Any) -> list[dict[str, np.ndarray]]:
    """The :data:`CONFIRMATIONS` argument sets (by contract parameter name, float64 or bool) the
    implementation is also called on, drawn once per spec from its seed (see ``_CONFIRMATION_SIZES``)."""
    out = []
    for number, sizes in enumerate(_CONFIRMATION_SIZES[:CONFIRMATIONS]):
        rng = np.random.default_rng(derive_seed(spec.id, spec.version, "diagnosis", number))
        out.append(_sized_args(spec, dict(sizes), rng))
    return out


def resized_args(spec: Any, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """Arguments like the first confirmation input's, with the legend ``sizes`` in place of its own
    (``{"n_q": 17, "n_k": 17}``: a mistake's further confirmation, probe or witness input), drawn
    from the spec's seed and the sizes, so the same every time."""
    rng = np.random.default_rng(derive_seed(spec.id, spec.version, "diagnosis", "sized", sorted(sizes.items())))
    return _sized_args(spec, {**_CONFIRMATION_SIZES[0], **sizes}, rng)


def _mistake_sizes(spec: Any, which: str) -> list[dict[str, int]]:
    """The further confirmation (``which="confirm_sizes"``) or probe (``"probe_sizes"``) sizes of the
    mistakes that apply to the spec's contract, each once, in catalogue order."""
    out: list[dict[str, int]] = []
    for mistake in mistakes_for(spec.contract):
        for sizes in getattr(mistake, which):
            if sizes not in out:
                out.append(dict(sizes))
    return out


def _corners(spec: Any, base: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Inputs where conventions and masking rules part: from ``base``, a query with every key
    masked; a masked key holding +inf, NaN or a huge score; more queries than keys."""
    contract = spec.contract
    names = set(contract.parameter_names)
    out: list[dict[str, np.ndarray]] = []
    if "mask" in names:
        mask = np.array(base["mask"], dtype=bool)
        full = dict(base, mask=mask.copy())
        full["mask"][..., 0, :] = False
        out.append(full)
        first = mask[..., 0, :].reshape(-1, mask.shape[-1])[0]
        j = int(np.argmin(first))  # a masked key of query 0 (every row masks one)
        if "S" in names:
            for value in (np.inf, np.nan, 1e4):
                S = np.array(base["S"], dtype=np.float64)
                S[..., 0, j] = value
                out.append(dict(base, S=S))
        elif {"Q", "K"} <= names:
            Q, K = np.asarray(base["Q"], dtype=np.float64), np.array(base["K"], dtype=np.float64)
            q0 = Q[..., 0, :]
            K[..., j, :] = q0 * (1e4 * np.sqrt(Q.shape[-1]) / np.sum(q0 * q0, axis=-1, keepdims=True))
            out.append(dict(base, K=K))  # query 0's masked key j scores 1e4
            K = np.array(base["K"], dtype=np.float64)
            K[..., j, :] = np.inf * np.sign(q0)  # query 0's masked key j scores +inf
            out.append(dict(base, K=K))
    for name in sorted(contract.additive_parameters & names):  # a float mask: query 0 with every entry -inf
        blank = np.array(base[name], dtype=np.float64)
        blank[..., 0, :] = -np.inf
        out.append(dict(base, **{name: blank}))
    if contract.name.startswith("causal_attention") and {"Q", "K", "V"} <= names:
        Q, K, V = (np.asarray(base[n]) for n in ("Q", "K", "V"))
        n = min(K.shape[-2], Q.shape[-2])
        out.append({"Q": np.concatenate([Q, Q[..., :1, :]], axis=-2), "K": K[..., : n - 1, :], "V": V[..., : n - 1, :]})
    return out


def _calls(spec: Any, dtype: str, which: str) -> list[Any]:
    """The confirmation calls (``which="confirm"``: :func:`confirmation_args` and the mistakes' own
    ``confirm_sizes``) or the probe calls (``"probe"``: the worked examples, the corners and the
    mistakes' ``probe_sizes``), made once per spec and dtype."""
    key = (spec.id, str(spec.version), str(getattr(spec, "path", "")), dtype, which)
    if key not in _INPUTS:
        confirm = confirmation_args(spec)
        if which == "confirm":
            confirm += [resized_args(spec, sizes) for sizes in _mistake_sizes(spec, "confirm_sizes")]
            _INPUTS[key] = [spec_call(spec, args, dtype, spec.tolerance) for args in confirm]
        else:
            calls = []
            for ex in getattr(spec, "worked_examples", ()):
                try:
                    calls.append(spec_call(spec, ex.inputs, dtype, ex.tolerance or spec.tolerance))
                except Exception:  # noqa: BLE001 - an example that cannot be cast here is no probe
                    continue
            calls.extend(spec_call(spec, args, dtype, spec.tolerance) for args in _corners(spec, confirm[0]))
            sized = [resized_args(spec, sizes) for sizes in _mistake_sizes(spec, "probe_sizes")]
            calls.extend(spec_call(spec, args, dtype, spec.tolerance) for args in sized)
            _INPUTS[key] = calls
    return _INPUTS[key]


def _outputs(spec: Any, runner: Runner, dtype: str, which: str) -> list[tuple[Any, Any]]:
    """The runner's outputs on :func:`_calls`, made once per runner, spec, dtype and kind."""
    calls = _calls(spec, dtype, which)
    try:
        cache = _OUTPUTS.setdefault(runner, {})
    except TypeError:  # pragma: no cover - a runner that cannot be weakly referenced
        cache = {}
    key = (spec.id, str(spec.version), dtype, which)
    if key not in cache:
        cache[key] = [runner.call(c.args, dtype) for c in calls]
    return list(zip(calls, cache[key], strict=True))


def _values(outcome: Any) -> np.ndarray | None:
    return None if isinstance(outcome, CallFailure) else outcome.array.astype(np.float64)


def _confirm(cand: _Candidate, spec: Any, observed: list[tuple[Any, Any]], dtype: str) -> bool:
    """Keep the forms of ``cand`` that hold on every observed call; add their evidence."""
    for call, outcome in observed:
        cand.forms, more = _holds_on(cand, spec, call, _values(outcome), dtype, skip_right=False)
        if not cand.forms:
            return False
        cand.evidence += more
    return True


def _disagree(cands: list[_Candidate], spec: Any, call: Any, dtype: str) -> bool:
    """Whether the candidates' outputs on ``call`` are not all the same (so it can tell them apart)."""
    wants = (recompute(c.mistake, spec, call.args, f, c.params) for c in cands for f in sorted(c.forms))
    first = next(wants)
    allowed = np.asarray(call.allowed, dtype=np.float64)
    for want in wants:  # made one by one: the first that differs settles it
        if (first is None) != (want is None):
            return True
        if first is not None and want is not None:
            tol = allowed if want.shape == np.shape(call.golden) else 0.0
            if not matches(want, first, tol, dtype):
                return True
    return False


def _differs_from_golden(cand: _Candidate, spec: Any, call: Any, dtype: str) -> bool:
    golden = np.asarray(call.golden, dtype=np.float64)
    allowed = np.asarray(call.allowed, dtype=np.float64)
    for form in sorted(cand.forms):
        want = recompute(cand.mistake, spec, call.args, form, cand.params)
        if want is None or want.shape != golden.shape or not _right(cand.mistake, want, golden, allowed, dtype):
            return True
    return False


def _probe(cands: list[_Candidate], spec: Any, runner: Runner, dtype: str) -> list[_Candidate]:
    """Call the implementation on the probe inputs that can tell the candidates apart (where they
    disagree) or add evidence (where a candidate short of :data:`MIN_EVIDENCE` is not golden), and
    drop the candidates that do not hold there."""

    def settled() -> bool:
        return len(cands) <= 1 and all(c.evidence >= MIN_EVIDENCE for c in cands)

    for number, call in enumerate(_calls(spec, dtype, "probe")):
        if settled():
            break
        useful = (len(cands) > 1 and _disagree(cands, spec, call, dtype)) or any(
            c.evidence < MIN_EVIDENCE and _differs_from_golden(c, spec, call, dtype) for c in cands
        )
        if not useful:
            continue
        outcome = _outputs(spec, runner, dtype, "probe")[number][1]
        cands = [c for c in cands if _confirm(c, spec, [(call, outcome)], dtype)]
    return cands


def diagnose(
    spec: Any,
    call: Any,
    received: Received,
    dtype: str,
    runner: Runner | None = None,
    *,
    output_right: bool = False,
) -> dict[str, str] | None:
    """``{"id", "message"}`` of the one catalogue mistake the output matches, with evidence, else None.

    ``runner`` makes the confirmation and probe calls (see the module docstring); without it only
    the failing call counts as evidence. The message has the fitted parameters filled in
    (``r = 0.5`` for a constant scale ratio). ``output_right``: a backward call whose output is
    right (only a gradient or ``L`` is wrong), so only the backward mistakes (``Mistake.backward``)
    can explain it; a forward mistake that happens to agree with the output is never named.
    """
    if isinstance(received, WithGradients) and getattr(call, "upstream", None) is not None:
        named = _diagnose_backward(spec, call, received, dtype, runner)
        if named is not None or output_right:
            return named
    if output_right:
        return None
    got = received.array.astype(np.float64)
    found: list[_Candidate] = []
    for mistake in mistakes_for(spec.contract):
        if not mistake.applies_in(dtype) or mistake.scores_zero:  # a null implementation is verify's guard
            continue
        found.extend(_explains(mistake, spec, call, got, dtype))
    if not found:
        return None
    if runner is not None:
        observed = _outputs(spec, runner, dtype, "confirm")
        found = [c for c in found if _confirm(c, spec, observed, dtype)]
    if runner is not None and (len(found) > 1 or any(c.evidence < MIN_EVIDENCE for c in found)):
        found = _probe(found, spec, runner, dtype)
    found = _best_of_each([c for c in found if c.evidence >= MIN_EVIDENCE])
    if len(found) != 1:
        return None
    return {"id": found[0].mistake.id, "message": found[0].mistake.describe(found[0].params)}


def _best_of_each(cands: list[_Candidate]) -> list[_Candidate]:
    """One candidate per mistake: of the parameter sets that all held (tile sizes the inputs could
    not tell apart), the one with the most evidence (the first of equals)."""
    best: dict[str, _Candidate] = {}
    for cand in cands:
        kept = best.get(cand.mistake.id)
        if kept is None or cand.evidence > kept.evidence:
            best[cand.mistake.id] = cand
    return list(best.values())


def diagnose_raised(
    spec: Any, call: Any, failure: CallFailure, dtype: str, runner: Runner | None
) -> dict[str, str] | None:
    """``{"id", "message"}`` of the one catalogue mistake that raises where the implementation raised
    (:attr:`Mistake.raises`), with evidence, else None.

    For each such mistake and each parameter set under which it raises on ``call`` (smallest tile
    first), the implementation is called on the mistake's witnesses (:attr:`Mistake.witnesses`:
    n = tile, where it runs and is right, and n = tile + 1, where it raises): the first parameter
    set on which the implementation raises exactly where the mistake does, and gives its value
    where it runs, is the mistake's. The failing call and each witness that raises are one entry of
    evidence each; :data:`MIN_EVIDENCE` are needed, and exactly one mistake must remain. Only an
    exception verdict is diagnosed (a timeout or a crash is not the mistake's), and only with a runner.
    """
    if runner is None or failure.verdict is not Verdict.EXCEPTION:
        return None
    found: list[tuple[Mistake, dict[str, float]]] = []
    for mistake in mistakes_for(spec.contract):
        if mistake.raises is None or mistake.witnesses is None or not mistake.applies_in(dtype):
            continue
        try:
            options = mistake.raises(spec.contract, tuple(_tensors(call.args)))
        except Exception:  # noqa: BLE001 - a rule that cannot run here explains nothing
            continue
        for params in options:
            if recompute(mistake, spec, call.args, 0, params) is not None:
                continue  # the mistake runs here: it cannot explain the exception
            if _witnessed(mistake, params, spec, runner, dtype) + 1 >= MIN_EVIDENCE:
                found.append((mistake, params))
                break
    if len(found) != 1:
        return None
    mistake, params = found[0]
    return {"id": mistake.id, "message": mistake.describe(params)}


def _witnessed(mistake: Mistake, params: dict[str, float], spec: Any, runner: Runner, dtype: str) -> int:
    """The entries of evidence the mistake's witnesses give (one per witness where both raise), or
    -1 when on some witness the implementation does not do what the mistake does."""
    assert mistake.witnesses is not None
    evidence = 0
    for sizes in mistake.witnesses(params):
        call = _sized_call(spec, dtype, sizes)
        want = recompute(mistake, spec, call.args, 0, params)
        outcome = _sized_output(spec, runner, dtype, sizes, call)
        if isinstance(outcome, CallFailure) and outcome.verdict is not Verdict.EXCEPTION:
            return -1  # a timeout or a crash is not the mistake's exception
        got = _values(outcome)
        if want is None and got is None:
            evidence += 1
        elif want is None or got is None:
            return -1
        elif not matches(
            got, want, np.asarray(call.allowed, dtype=np.float64) if want.shape == got.shape else 0.0, dtype
        ):
            return -1
    return evidence


def _sized_call(spec: Any, dtype: str, sizes: dict[str, int]) -> Any:
    """The call of :func:`resized_args` for ``sizes``, built once per spec and dtype."""
    key = (spec.id, str(spec.version), str(getattr(spec, "path", "")), dtype, "sized", str(sorted(sizes.items())))
    if key not in _INPUTS:
        _INPUTS[key] = [spec_call(spec, resized_args(spec, sizes), dtype, spec.tolerance)]
    return _INPUTS[key][0]


def _sized_output(spec: Any, runner: Runner, dtype: str, sizes: dict[str, int], call: Any) -> Any:
    """The runner's outcome on the sized call, made once per runner."""
    try:
        cache = _OUTPUTS.setdefault(runner, {})
    except TypeError:  # pragma: no cover - a runner that cannot be weakly referenced
        cache = {}
    key = (spec.id, str(spec.version), dtype, "sized", str(sorted(sizes.items())))
    if key not in cache:
        cache[key] = [runner.call(call.args, dtype)]
    return cache[key][0]


# ---------------------------------------------------------------------------------------------
# backward mistakes: matched on the output, every gradient and the saved logsumexp together


def recompute_backward(
    mistake: Mistake, spec: Any, call: Any, params: dict[str, float] | None = None
) -> WithGradients | None:
    """The mistake's forward and backward on ``call``'s inputs and upstream in float64 (its ``L``
    read as the spec reads a submission's), or None when it cannot run there."""
    names = list(call.args)
    tensors: list[object] = list(_tensors(call.args))
    place = getattr(spec, "logsumexp", None) or ("saved_tensors", None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, got = backward_call(
                mistake.bind(spec.contract, spec, 0, **(params or {})),
                names,
                tensors,
                torch.tensor(np.asarray(call.upstream), dtype=torch.float64),
                logsumexp=place,
            )
    except Exception:  # noqa: BLE001 - a mistake that cannot run on these inputs does not match
        return None
    return got if isinstance(got, WithGradients) and not isinstance(got, NoBackward) else None


def _parts(call: Any, spec: Any, dtype: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(part, golden, allowed)`` of a backward call: the output, each gradient, and ``L``."""
    parts = [("O", np.asarray(call.golden, dtype=np.float64), np.asarray(call.allowed, dtype=np.float64))]
    for name, golden in (call.gradient_goldens or {}).items():
        parts.append((name, golden, (call.gradient_allowed or {})[name]))
    if spec.contract.kind == "flash_attention_2":
        from attnscore.maths.flash_contract import logsumexp_allowed, logsumexp_golden

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


def _backward_agrees(got: WithGradients, want: WithGradients, call: Any, spec: Any, dtype: str) -> tuple[bool, int]:
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
        evidence += _differing(theirs, golden, np.asarray(allowed), dtype)
    return True, evidence


def _backward_calls(spec: Any, dtype: str) -> list[Any]:
    """The confirmation inputs with an upstream gradient each (drawn once per spec and dtype)."""
    key = (spec.id, str(spec.version), str(getattr(spec, "path", "")), dtype, "backward")
    if key not in _INPUTS:
        calls = []
        inputs = confirmation_args(spec) + [resized_args(spec, z) for z in _mistake_sizes(spec, "confirm_sizes")]
        for number, args in enumerate(inputs):
            rng = np.random.default_rng(derive_seed(spec.id, spec.version, "diagnosis-upstream", number))
            with np.errstate(all="ignore"):
                shape = np.shape(spec.contract.golden(args))
            upstream = _random_array(rng, shape, False)
            calls.append(spec_call(spec, args, dtype, spec.tolerance, upstream=upstream))
        _INPUTS[key] = calls
    return _INPUTS[key]


def _backward_outputs(spec: Any, runner: Runner, dtype: str) -> list[tuple[Any, Any]]:
    calls = _backward_calls(spec, dtype)
    try:
        cache = _OUTPUTS.setdefault(runner, {})
    except TypeError:  # pragma: no cover - a runner that cannot be weakly referenced
        cache = {}
    key = (spec.id, str(spec.version), dtype, "backward")
    if key not in cache:
        cache[key] = [runner.call(c.args, dtype, upstream=c.upstream) for c in calls]
    return list(zip(calls, cache[key], strict=True))


def _diagnose_backward(
    spec: Any, call: Any, received: WithGradients, dtype: str, runner: Runner | None
) -> dict[str, str] | None:
    """The one backward mistake (``Mistake.backward``) whose output, gradients and ``L`` are the
    submission's on the failing call and on the confirmation inputs, with evidence; else None."""
    found: list[tuple[Mistake, dict[str, float], int]] = []
    for mistake in mistakes_for(spec.contract):
        if not mistake.backward or not mistake.applies_in(dtype) or mistake.scores_zero:
            continue
        for params in _fitted(mistake, spec, call, received.array.astype(np.float64)):
            want = recompute_backward(mistake, spec, call, params)
            if want is None:
                continue
            agrees, evidence = _backward_agrees(received, want, call, spec, dtype)
            if agrees and evidence > 0:
                found.append((mistake, params, evidence))
                break
    if runner is not None and found:
        kept = []
        observed = _backward_outputs(spec, runner, dtype)
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


def _keep(spec: Any, args: dict[str, np.ndarray]) -> np.ndarray | None:
    """The keep mask (True = kept) of a call, ``(..., n_q, n_k)``: the mask argument, or the causal
    mask of a flag form; None for contracts without one."""
    contract = spec.contract
    values = dict(zip(contract.parameter_names, args.values(), strict=True))
    if "mask" in values:
        return np.asarray(values["mask"], dtype=bool)
    if contract.name.startswith("causal_attention") and {"Q", "K"} <= set(values):
        n_q, n_k = np.shape(values["Q"])[-2], np.shape(values["K"])[-2]
        i, j = np.arange(n_q)[:, None], np.arange(n_k)[None, :]
        return j <= i + (0 if contract.name.endswith("top_left") else n_k - n_q)
    return None


def nonfinite_hint(spec: Any, call: Any, received: Received) -> str | None:
    """A masking-specific cause for non-finite output entries that sit in a masked row, else None.

    The first unexpected non-finite entry's row (query) is looked up in the keep mask: a query
    with no kept key, or one whose masked keys hold +inf, NaN or a huge score, gets a sentence
    about that (softmax of all -inf is 0/0; inf + (-inf) is NaN), instead of the generic "look for
    a division by zero" hint.
    """
    keep = _keep(spec, call.args)
    got = received.array.astype(np.float64)
    golden = np.asarray(call.golden, dtype=np.float64)
    if keep is None or got.shape != golden.shape or got.ndim < 1:
        return None
    bad = ~np.isfinite(got) & np.isfinite(golden)
    if not bad.any():
        return None
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    row_shape = got.shape[:-1]  # (..., n_q): one row per query for weights, scores and outputs
    try:
        rows = np.broadcast_to(keep, (*row_shape, keep.shape[-1])) if keep.ndim else None
    except ValueError:
        return None
    if rows is None:
        return None
    kept = rows[index[:-1]]
    if spec.contract.kind == "mask":
        return (
            "a masked entry became non-finite: adding -inf to a masked score of +inf or NaN gives NaN; "
            "replace masked entries instead, scores.masked_fill(~mask, float('-inf'))"
        )
    if not kept.any():
        return (
            "this query keeps no key: softmax over scores that are all -inf is 0/0 = NaN; give a query "
            "with no kept key zero weights (e.g. torch.where(mask, torch.softmax(masked, dim=-1), 0))"
        )
    if not kept.all():
        return (
            "this query has masked keys: a masked score that is +inf or NaN (or a huge score taken into "
            "the row max) must not reach the softmax; replace masked scores with "
            "scores.masked_fill(~mask, float('-inf')) before the max and exp, instead of adding -inf "
            "(inf + (-inf) = NaN) or multiplying exp by the mask afterwards"
        )
    return None
