"""Assignment rules: calls a submission must not make, or must make, as a spec states them.

``rules`` in a spec lists what an assignment asks beyond right values, in the manner of Moodle
CodeRunner's proscribed and required functions::

    rules:
      - id: no_sdpa
        forbid: torch.nn.functional.scaled_dot_product_attention
        points: 1
        statement: "The forward computes attention itself, without scaled_dot_product_attention."
      - id: hand_written_backward
        forbid: [torch.autograd.grad, torch.autograd.backward]
        during: backward
        points: 1
        statement: "The backward is written by hand, without torch.autograd."

Each rule is one case of the rubric (``rule:<id>``) worth its ``points``: kept when the
submission's code (its files, notebooks included, read statically: :mod:`attnscore.submission.static_rules`)
names none of the forbidden calls and the sandboxed worker saw none of them made
(:mod:`attnscore.boundary.traps`), or, for ``require``, names and makes one of them; ``during``
narrows where: ``forward`` while the graded function runs, ``backward`` inside its backward pass
(statically: inside a function named ``backward``), ``any`` (the default) either. A kept rule earns
its points only beside right values (:mod:`attnscore.check.rule_cases`): a submission that
computes nothing keeps every forbidding rule and earns nothing for it.

A rule is for honest students, not a security boundary: a determined cheat can hide a call from the
static reading (``getattr`` on a built string) and from the worker's traps (another alias of the same
function, its own kernel); what it can never do is earn a point that its values do not earn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from attnscore.spec.located import Positioned, SpecProblem

__all__ = ["Rule", "RULE_PHASES", "read_rules"]

RULE_PHASES = ("any", "forward", "backward")
"""Where a rule looks: anywhere, while the graded function runs, or inside its backward pass."""

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
_ID = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Rule:
    """One rule of a spec (see the module docstring).

    Attributes:
        id: snake_case, unique among the spec's rules; the case is ``rule:<id>``.
        kind: ``"forbid"`` or ``"require"``.
        names: the calls by their dotted names (``torch.autograd.grad``), at least one: a
            ``forbid`` rule is broken by any of them, a ``require`` rule kept by any of them.
        during: ``"any"``, ``"forward"`` or ``"backward"`` (:data:`RULE_PHASES`).
        points: exact points.
        statement: what the rule asks, in a student's words.
        line: the rule's line in the spec file.
    """

    id: str
    kind: str
    names: tuple[str, ...]
    during: str
    points: Fraction
    statement: str
    line: int

    def applies_to(self, phase: str) -> bool:
        """Whether a call made in ``phase`` (``forward`` or ``backward``) counts for this rule."""
        return self.during == "any" or self.during == phase


def _names(raw: Any) -> tuple[str, ...]:
    return tuple(raw) if isinstance(raw, list) else (raw,)


def read_rules(doc: Positioned, raw: Any, problems: list[SpecProblem]) -> tuple[Rule, ...]:
    """The spec's ``rules`` (already of the schema's form: a list of objects with ``id``,
    ``forbid`` or ``require`` (a dotted name or a list of them), optional ``during``, ``points``
    and ``statement``), with a located problem for each rule that forbids and requires at once or
    neither, names something that is not a dotted name (``module.function``), or repeats an id."""
    if raw is None:
        return ()
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        kinds = [k for k in ("forbid", "require") if k in item]
        if len(kinds) != 1:
            found = "both" if kinds else "neither"
            problems.append(
                doc.problem(("rules", i), f"expected one of forbid or require (a dotted name or a list), found {found}")
            )
            continue
        kind = kinds[0]
        names = _names(item[kind])
        bad = [n for n in names if not isinstance(n, str) or not _DOTTED.fullmatch(n)]
        if bad or not names:
            shown = repr(bad[0]) if bad else "an empty list"
            problems.append(
                doc.problem(
                    ("rules", i, kind),
                    f"expected dotted names of functions (torch.nn.functional.scaled_dot_product_attention), "
                    f"found {shown}",
                )
            )
            continue
        rule_id = item["id"]
        if not _ID.fullmatch(rule_id):
            problems.append(doc.problem(("rules", i, "id"), f"expected a snake_case id, found {rule_id!r}"))
            continue
        if rule_id in seen:
            problems.append(
                doc.problem(
                    ("rules", i, "id"),
                    f"expected a unique id, found {rule_id!r} again (first at rules[{seen[rule_id]}])",
                )
            )
            continue
        seen[rule_id] = i
        points = item["points"]
        rules.append(
            Rule(
                id=rule_id,
                kind=kind,
                names=tuple(dict.fromkeys(names)),
                during=item.get("during", "any"),
                points=Fraction(repr(points)) if isinstance(points, float) else Fraction(points),
                statement=item["statement"].strip(),
                line=doc.where(("rules", i))[0],
            )
        )
    return tuple(rules)
