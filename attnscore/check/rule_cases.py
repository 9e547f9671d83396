"""Judging a spec's assignment rules (:mod:`attnscore.spec.rules`), once every other case is judged.

A rule's case (``rule:<id>``) makes no calls of its own. It is decided from what was seen of the
whole run:

- ``places``: where the submission's code names a ruled call, read statically before anything ran
  (:func:`attnscore.submission.static_rules.rule_places`), per rule id; None when no code was read
  (an engineer's function, in process);
- ``calls_seen``: the ruled calls the sandboxed worker's traps saw made, as ``name@phase`` words
  (:mod:`attnscore.boundary.traps`); None when the runner has no traps (in process).

A ``forbid`` rule is broken when either names one of its calls in its phase; a ``require`` rule when
the code names none of its calls or (where the worker watched) none was made. A rule that holds
earns its points only beside right values: some other case passed (for a rule about the backward
pass, one that ran a backward pass), so that a function that computes nothing keeps every
forbidding rule and earns nothing for it. The verdict of a broken rule is ``rule_broken``.

These findings come from the submission's own process and code, so a rule is for honest students:
a determined cheat can hide a call; it can never earn a point its values do not earn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attnscore.check.cases import Case
from attnscore.report.results import CaseResult, Verdict
from attnscore.spec.model import Spec
from attnscore.spec.rules import Rule

__all__ = ["judge_rules", "rule_text"]

_PHASE_WORDS = {"forward": "while your function ran", "backward": "inside your backward pass"}


def _seen(rule: Rule, calls_seen: frozenset[str] | None) -> dict[str, list[str]]:
    """``{name: [phase words]}`` of the rule's calls the traps saw in a phase the rule looks at."""
    found: dict[str, list[str]] = {}
    order = {phase: i for i, phase in enumerate(_PHASE_WORDS)}
    for word in sorted(calls_seen or (), key=lambda w: (w.rpartition("@")[0], order.get(w.rpartition("@")[2], 9))):
        name, _, phase = word.rpartition("@")
        if name in rule.names and rule.applies_to(phase):
            found.setdefault(name, []).append(_PHASE_WORDS.get(phase, phase))
    return found


def rule_text(rule: Rule, places: tuple[str, ...] | None, calls_seen: frozenset[str] | None) -> str | None:
    """Why ``rule`` is broken (what was found and where), or None when it holds.

    >>> from fractions import Fraction
    >>> rule = Rule("no_sdpa", "forbid", ("torch.nn.functional.scaled_dot_product_attention",), "any",
    ...             Fraction(1), "No SDPA.", 3)
    >>> seen = frozenset({"torch.nn.functional.scaled_dot_product_attention@forward"})
    >>> rule_text(rule, ("solution.py, line 7",), seen)  # doctest: +NORMALIZE_WHITESPACE
    'your code calls torch.nn.functional.scaled_dot_product_attention (solution.py, line 7; called while
    your function ran): this assignment asks you not to use it'
    >>> rule_text(rule, (), frozenset()) is None
    True
    """
    where = "" if rule.during == "any" else f" {_PHASE_WORDS[rule.during]}"
    seen = _seen(rule, calls_seen)
    if rule.kind == "forbid":
        if not places and not seen:
            return None
        short = {n: n.rsplit(".", 1)[-1] for n in rule.names}
        in_code = [
            n for n in rule.names if len(rule.names) == 1 or any(p.startswith(f"{short[n]}:") for p in places or ())
        ]
        named = [n for n in rule.names if n in seen or (places and n in in_code)] or list(rule.names[:1])
        prefix = (lambda n: f"{short[n]}: ") if len(named) > 1 else (lambda n: "")
        found = [p if len(named) > 1 else p.split(": ", 1)[-1] for p in places or ()]
        for name, phases in seen.items():
            found.append(f"{prefix(name)}called {' and '.join(dict.fromkeys(phases))}")
        what = " and ".join(named)
        return f"your code calls {what}{where} ({'; '.join(found)}): this assignment asks you not to use it"
    named_in_code = places is None or bool(places)
    made = calls_seen is None or bool(seen)
    if named_in_code and made:
        return None
    what = " or ".join(rule.names)
    how = "never names" if not named_in_code else "never called"
    return f"your code {how} {what}{where}: this assignment asks you to use it"


def judge_rules(
    spec: Spec,
    rule_cases: Sequence[Case],
    judged: Sequence[tuple[Case, CaseResult]],
    places: Mapping[str, tuple[str, ...]] | None,
    calls_seen: frozenset[str] | None,
    dtype: str,
    function: str | None = None,
) -> list[CaseResult]:
    """The results of ``rule_cases`` (``kind == "rule"``), in order, from the rest of the run
    (``judged``: every other case with its result), the static ``places`` and the traps'
    ``calls_seen`` (see the module docstring)."""
    rules = {f"rule:{r.id}": r for r in spec.rules}
    computed = any(result.passed and case.points > 0 for case, result in judged)
    computed_backward = any(
        result.passed and case.points > 0 and any(c.upstream is not None for c in case.calls) for case, result in judged
    )
    out = []
    for case in rule_cases:
        rule = rules[case.id]
        text = rule_text(rule, None if places is None else places.get(rule.id, ()), calls_seen)
        verdict = Verdict.RULE_BROKEN
        if text is None:
            right = computed_backward if rule.during == "backward" else computed
            if right:
                out.append(case.passed(calls=0))
                continue
            which = "that ran a backward pass " if rule.during == "backward" else ""
            text = (
                f"the rule holds, but no case of yours {which}passed: a rule's points come only beside right "
                "values, so that a function that computes nothing earns nothing for the calls it does not make"
            )
            verdict = Verdict.WRONG_VALUE
        failure = case.failure(verdict, function or spec.function, dtype, check=text)
        out.append(case.failed(failure, 0))
    return out
