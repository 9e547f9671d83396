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
   √d_k, d_k/2, 2·d_k, √d_v and √(heads·d_k) all differ; ``d_v != d_k``; at least two heads, and
   grouped query and key/value heads where the contract names both (H_q = 2·H_kv or 3·H_kv); every
   query keeps a key and masks one, and a float (additive) mask has a ``-inf`` entry in every other
   row only, so a name that depends on them is confirmed on rows with and without; the same for
   every submission), and on the further
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
   a masked key holding +inf, NaN or a huge score, more queries than keys (n_q = n_k + 2 wherever
   the contract has both), and the mistakes' own
   ``probe_sizes``); a candidate that does not match there is dropped, one that does gains its
   evidence. Exactly one must remain, with enough evidence; otherwise the diagnosis is None and
   the feedback says nothing more: a wrong name is worse than none.

Entries a mistake's code never writes (``Mistake.unwritten``: rows past a kernel's last full tile)
agree with any value but the right row, and are evidence only beside written entries of the same
call. A call that raised is diagnosed by :func:`diagnose_raised`: a mistake that raises there
(``Mistake.raises``) and does what the implementation does on its witnesses (``Mistake.witnesses``).
A backward call is first matched against the backward mistakes (``Mistake.backward``) by
:func:`diagnose_backward`: its output, every gradient and the saved ``L`` together, on the failing
call and on the confirmation inputs with an upstream gradient each.

The implementation's calls on the diagnosis's own inputs (:mod:`attnscore.check.diagnosis_inputs`,
plain data) are made here, each once per runner (:func:`outcomes_on`), whatever case asks.

A mistake that cannot happen in the tested dtype (``computed_in_float16`` for float16 inputs,
``computed_in_float32`` for anything but float64; :meth:`Mistake.applies_in`) is never a candidate.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from attnscore.boundary.gradients import NoBackward, WithGradients, backward_call
from attnscore.boundary.lazy_torch import torch
from attnscore.boundary.outputs import CallFailure, Outcome, Received
from attnscore.boundary.verdict import Verdict
from attnscore.catalogue.families import flash_attention_2
from attnscore.catalogue.mistakes import Mistake
from attnscore.check.cases import Call
from attnscore.check.diagnosis_inputs import (
    CONFIRMATIONS,
    backward_calls,
    confirmation_args,
    diagnosis_calls,
    drawn_from,
    sized_call,
    sized_kind,
)
from attnscore.check.diagnosis_match import (
    MIN_EVIDENCE,
    Candidate,
    differing,
    explains,
    fitted,
    holds,
    holds_on,
    is_right,
    matches,
    recompute,
    tensors,
)
from attnscore.check.row_hints import nonfinite_hint
from attnscore.check.runner import Runner
from attnscore.spec.model import Spec

__all__ = [
    "diagnose",
    "outcomes_on",
    "diagnose_raised",
    "recompute_backward",
    "recompute",
    "matches",
    "holds",
    "confirmation_args",
    "nonfinite_hint",
    "CONFIRMATIONS",
    "MIN_EVIDENCE",
]


# Each runner's outcomes on the diagnosis's own calls, by :func:`drawn_from`'s key.
_OUTCOMES: weakref.WeakKeyDictionary[Runner, dict[tuple[object, ...], list[Outcome]]] = weakref.WeakKeyDictionary()


def outcomes_on(spec: Spec, runner: Runner, dtype: str, which: str, calls: list[Call]) -> list[tuple[Call, Outcome]]:
    """The implementation's outcome on each of the diagnosis's ``calls`` of kind ``which``
    (:func:`attnscore.check.diagnosis_inputs.diagnosis_calls`' ``"confirm"`` or ``"probe"``,
    ``"backward"``, or a :func:`attnscore.check.diagnosis_inputs.sized_kind`), with its call; made
    once per runner, whatever case asks (a call with an upstream gradient runs the backward pass)."""
    try:
        made = _OUTCOMES.setdefault(runner, {})
    except TypeError:  # pragma: no cover - a runner that cannot be weakly referenced
        made = {}
    key = drawn_from(spec, dtype, which)
    if key not in made:
        made[key] = [
            runner.call(c.args, dtype, upstream=c.upstream) if c.upstream is not None else runner.call(c.args, dtype)
            for c in calls
        ]
    return list(zip(calls, made[key], strict=True))


def _values(outcome: Outcome) -> np.ndarray | None:
    return None if isinstance(outcome, CallFailure) else outcome.array.astype(np.float64)


def _confirm(cand: Candidate, spec: Spec, observed: list[tuple[Call, Outcome]], dtype: str) -> bool:
    """Keep the forms of ``cand`` that hold on every observed call; add their evidence."""
    for call, outcome in observed:
        cand.forms, more = holds_on(cand, spec, call, _values(outcome), dtype, skip_right=False)
        if not cand.forms:
            return False
        cand.evidence += more
    return True


def _disagree(cands: list[Candidate], spec: Spec, call: Call, dtype: str) -> bool:
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


def _differs_from_golden(cand: Candidate, spec: Spec, call: Call, dtype: str) -> bool:
    golden = np.asarray(call.golden, dtype=np.float64)
    allowed = np.asarray(call.allowed, dtype=np.float64)
    for form in sorted(cand.forms):
        want = recompute(cand.mistake, spec, call.args, form, cand.params)
        if want is None or want.shape != golden.shape or not is_right(cand.mistake, want, golden, allowed, dtype):
            return True
    return False


def _probe(cands: list[Candidate], spec: Spec, runner: Runner, dtype: str) -> list[Candidate]:
    """Call the implementation on the probe inputs that can tell the candidates apart (where they
    disagree) or add evidence (where a candidate short of :data:`MIN_EVIDENCE` is not golden), and
    drop the candidates that do not hold there."""

    def settled() -> bool:
        return len(cands) <= 1 and all(c.evidence >= MIN_EVIDENCE for c in cands)

    probes = diagnosis_calls(spec, dtype, "probe")
    for number, call in enumerate(probes):
        if settled():
            break
        useful = (len(cands) > 1 and _disagree(cands, spec, call, dtype)) or any(
            c.evidence < MIN_EVIDENCE and _differs_from_golden(c, spec, call, dtype) for c in cands
        )
        if not useful:
            continue
        outcome = outcomes_on(spec, runner, dtype, "probe", probes)[number][1]
        cands = [c for c in cands if _confirm(c, spec, [(call, outcome)], dtype)]
    return cands


def diagnose(
    spec: Spec,
    call: Call,
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
        named = diagnose_backward(spec, call, received, dtype, runner)
        if named is not None or output_right:
            return named
    if output_right:
        return None
    got = received.array.astype(np.float64)
    found: list[Candidate] = []
    for mistake in spec.known_mistakes():
        if not mistake.applies_in(dtype) or mistake.scores_zero:  # a null implementation is verify's guard
            continue
        found.extend(explains(mistake, spec, call, got, dtype))
    if not found:
        return None
    if runner is not None:
        observed = outcomes_on(spec, runner, dtype, "confirm", diagnosis_calls(spec, dtype, "confirm"))
        found = [c for c in found if _confirm(c, spec, observed, dtype)]
    if runner is not None and (len(found) > 1 or any(c.evidence < MIN_EVIDENCE for c in found)):
        found = _probe(found, spec, runner, dtype)
    found = _best_of_each([c for c in found if c.evidence >= MIN_EVIDENCE])
    if len(found) != 1:
        return None
    return {"id": found[0].mistake.id, "message": found[0].mistake.describe(found[0].params)}


def _best_of_each(cands: list[Candidate]) -> list[Candidate]:
    """One candidate per mistake: of the parameter sets that all held (tile sizes the inputs could
    not tell apart), the one with the most evidence (the first of equals)."""
    best: dict[str, Candidate] = {}
    for cand in cands:
        kept = best.get(cand.mistake.id)
        if kept is None or cand.evidence > kept.evidence:
            best[cand.mistake.id] = cand
    return list(best.values())


def diagnose_raised(
    spec: Spec, call: Call, failure: CallFailure, dtype: str, runner: Runner | None
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
    for mistake in spec.known_mistakes():
        if mistake.raises is None or mistake.witnesses is None or not mistake.applies_in(dtype):
            continue
        try:
            options = mistake.raises(spec.contract, tuple(tensors(call.args)))
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


def _witnessed(mistake: Mistake, params: dict[str, float], spec: Spec, runner: Runner, dtype: str) -> int:
    """The entries of evidence the mistake's witnesses give (one per witness where both raise), or
    -1 when on some witness the implementation does not do what the mistake does."""
    assert mistake.witnesses is not None
    evidence = 0
    for sizes in mistake.witnesses(params):
        call = sized_call(spec, dtype, sizes)
        want = recompute(mistake, spec, call.args, 0, params)
        outcome = outcomes_on(spec, runner, dtype, sized_kind(sizes), [call])[0][1]
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


# ---------------------------------------------------------------------------------------------
# backward mistakes: the output, every gradient and the saved logsumexp matched together, on the
# failing call and on the confirmation inputs with an upstream gradient each


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
        observed = outcomes_on(spec, runner, dtype, "backward", backward_calls(spec, dtype))
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
