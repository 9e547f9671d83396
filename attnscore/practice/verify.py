"""``attnscore practice --verify``: generate many variants and check them against an independent solver.

For every family, over ``count`` variants:

1. generation never fails (every variant is accepted within ``max_attempts``);
2. every numeric answer agrees with an independent float64 computation: the reference
   implementation (:func:`attnscore.reference.score`, :func:`~attnscore.reference.scores`,
   :func:`~attnscore.reference.score_matrix`) for scores, plain torch float64 for scaled scores and
   softmax; every correct option is re-derived the same way, and the key lies within its tolerance;
3. duplicate variants stay under the family's ``max_duplicate_rate``;
4. correct options of shuffled multiple-choice parts spread evenly over the positions;
5. every printed number is well-formed (no ``-0``, no ``1e-05``, no float artefacts), in the
   answers and in the rendered Markdown, LaTeX and HTML;
6. exports are well-formed (Moodle and QTI XML and PrairieLearn markup parse with ``xml.etree``,
   LaTeX braces balance, JSON loads) and each platform's tolerance rule accepts the key and rejects
   ``key ± (tolerance + 1e-9)``.
"""

from __future__ import annotations

import json
import math
import re
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import torch

from attnscore import reference
from attnscore.practice.export_json import key_json, problems_json
from attnscore.practice.export_moodle import moodle_xml, read_moodle_numeric
from attnscore.practice.export_prairielearn import prairielearn_files, read_prairielearn_numeric
from attnscore.practice.export_qti import qti_assessment_xml, read_qti_numeric
from attnscore.practice.families import Family
from attnscore.practice.generators import GenerationError, generate_family, givens_key
from attnscore.practice.numbers import is_well_formed
from attnscore.practice.problem import Problem
from attnscore.practice.render_latex import braces_balanced, render_key_latex, render_worksheet_latex
from attnscore.practice.render_md import render_key_md, render_worksheet_md
from attnscore.practice.solutions import CONCEPTS
from attnscore.practice.tolerance import canvas_accepts, moodle_accepts, prairielearn_accepts
from attnscore.practice.worksheet import Worksheet

__all__ = ["FamilyReport", "VerifyReport", "verify_families", "independent_answers", "bad_number_tokens"]

_EPS = 1e-9

# Tokens that must never appear in rendered output: a lone -0 / -0.0, exponent notation, float artefacts.
_BAD_NUMBER = re.compile(r"(?<![\w.])-0(?:\.0*)?(?![\d.])|\d(?:\.\d+)?[eE][-+]?\d+|\d\.\d{9,}")


def bad_number_tokens(rendered: str) -> list[str]:
    """Ill-formed number tokens found in rendered text (empty when clean)."""
    return [m.group(0) for m in _BAD_NUMBER.finditer(rendered)]


@dataclass
class FamilyReport:
    """What ``--verify`` found for one family."""

    family_id: str
    variants: int = 0
    seconds: float = 0.0
    acceptance_rate: float = 1.0
    rejections: Counter[str] = field(default_factory=Counter)
    duplicate_rate: float = 0.0
    max_duplicate_rate: float = 0.0
    positions: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def variants_per_second(self) -> float:
        """Generation throughput (variants per second of wall time)."""
        return self.variants / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class VerifyReport:
    """The whole verification: per-family reports plus export checks."""

    families: list[FamilyReport]
    export_failures: list[str] = field(default_factory=list)
    count: int = 0
    seconds: float = 0.0

    @property
    def failures(self) -> list[str]:
        """Every failure, family checks first."""
        return [f for r in self.families for f in r.failures] + self.export_failures

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.failures


def _t(values: Any) -> torch.Tensor:
    """Exact givens -> float64 tensor (the float nearest each shown value)."""

    def conv(v: Any) -> Any:
        return [conv(x) for x in v] if isinstance(v, (list, tuple)) else float(v)

    return torch.tensor(conv(values), dtype=torch.float64)


def _softmax(scores: Sequence[float]) -> list[float]:
    return torch.softmax(torch.tensor(list(scores), dtype=torch.float64), dim=0).tolist()


def _claim_holds(claim: tuple[Any, ...], s: list[float]) -> bool:
    kind = claim[0]
    if kind == "highest" or kind == "key_highest":
        j = claim[1]
        return all(s[j] > v + _EPS for i, v in enumerate(s) if i != j)
    if kind == "score_is":
        return abs(s[claim[1]] - float(claim[2])) <= _EPS * max(1.0, abs(s[claim[1]]))
    if kind == "negative":
        return s[claim[1]] < -_EPS
    if kind == "perpendicular":
        return abs(s[claim[1]]) <= _EPS
    if kind == "are_weights":
        return all(v >= 0 for v in s) and abs(sum(s) - 1) <= _EPS
    raise ValueError(f"unknown claim {claim!r}")


def independent_answers(p: Problem) -> tuple[dict[str, float], dict[str, set[int]]]:
    """Re-solve a problem from its givens in float64, independently of the exact solver.

    Returns:
        ``(numbers, choices)``: answer name -> value, and choice name -> set of option positions
        whose claim holds (a sound problem has exactly one, the keyed one).
    """
    g = p.givens
    numbers: dict[str, float] = {}
    choices: dict[str, set[int]] = {}

    def holds(name: str, claims: Sequence[tuple[Any, ...]], test: Any) -> None:
        choices[name] = {i for i, c in enumerate(claims) if test(c)}

    claims_of = {q.choice.name: q.choice.claims for q in p.questions if q.choice is not None}
    if p.kind == "one_score":
        score = float(reference.score(_t(g["q"]), _t(g["k"])))
        numbers["score"] = score
        sign = 0 if abs(score) <= _EPS else (1 if score > 0 else -1)
        holds("meaning", claims_of["meaning"], lambda c: c[1] == sign)
    elif p.kind == "score_vector":
        s = reference.scores(_t(g["q"]), _t(g["keys"])).tolist()
        numbers.update({f"s_{j + 1}": v for j, v in enumerate(s)})
        holds("most_relevant", claims_of["most_relevant"], lambda c: _claim_holds(c, s))
    elif p.kind == "score_matrix":
        S = reference.score_matrix(_t(g["Q"]), _t(g["K"])).tolist()
        numbers.update({f"S_{i + 1}{j + 1}": v for i, row in enumerate(S) for j, v in enumerate(row)})
    elif p.kind == "scaled_score":
        q, k = _t(g["q"]), _t(g["k"])
        numbers["raw"] = float(reference.score(q, k))
        numbers["scaled"] = float(torch.dot(q, k) / math.sqrt(q.shape[0]))
    elif p.kind == "softmax" and "multipliers" in g:
        w = _softmax([g["base"] + math.log(m) for m in g["multipliers"]])
        numbers.update({f"w_{j + 1}": v for j, v in enumerate(w)})
        holds("largest_weight", claims_of["largest_weight"], lambda c: _claim_holds(("highest", c[1]), w))
    elif p.kind == "softmax":
        s = [float(x) for x in g["scores"]]
        w = _softmax(s)
        numbers["sum"] = float(torch.tensor(s, dtype=torch.float64).sum())
        order = tuple(torch.argsort(torch.tensor(w, dtype=torch.float64), descending=True).tolist())
        holds("ordering", claims_of["ordering"], lambda c: tuple(c[1]) == order)
        total = sum(s)
        concept = {
            "keeps_order": all(v > 0 for v in w)
            and abs(sum(w) - 1) <= _EPS
            and order == tuple(sorted(range(len(s)), key=lambda j: -s[j])),
            "scores_are_weights": all(v >= 0 for v in s) and abs(total - 1) <= _EPS,
            "divide_by_sum": total != 0 and all(abs(v / total - x) <= 1e-6 for v, x in zip(s, w, strict=True)),
            "negative_weight": any(x < 0 for x in w),
        }
        if set(concept) != {c[0] for c in CONCEPTS}:
            raise ValueError("verify knows a different set of concept statements than solutions.CONCEPTS")
        holds("concept", claims_of["concept"], lambda c: concept[c[1]])
    else:  # multiple_choice
        template = g["template"]
        if template in ("highest_key", "true_statement"):
            s = reference.scores(_t(g["q"]), _t(g["keys"])).tolist()
            name = "highest" if template == "highest_key" else "true_statement"
            holds(name, claims_of[name], lambda c: _claim_holds(c, s))
        else:
            q, k = _t(g["q"]), _t(g["k"])
            raw, root = float(torch.dot(q, k)), math.sqrt(q.shape[0])
            right = raw / root
            holds(
                "scaled",
                claims_of["scaled"],
                lambda c: (
                    abs({"sqrt": right, "d": raw / q.shape[0], "none": raw, "times_sqrt": raw * root}[c[1]] - right)
                    <= _EPS
                    and c[1] == "sqrt"
                ),
            )
    return numbers, choices


def _check_problem(p: Problem) -> list[str]:
    failures = []
    numbers, choices = independent_answers(p)
    for q in p.questions:
        for a in q.numeric:
            got = numbers.get(a.name)
            if got is None:
                failures.append(f"{p.uid} ({q.part}) {a.name}: no independent value")
                continue
            if abs(float(a.exact) - got) > _EPS * max(1.0, abs(got)):
                failures.append(f"{p.uid} ({q.part}) {a.name}: exact {a.exact} but float64 solver says {got!r}")
            if abs(float(Decimal(a.key)) - got) > float(a.tolerance) + _EPS:
                failures.append(f"{p.uid} ({q.part}) {a.name}: key {a.key} is not within ±{a.tolerance} of {got!r}")
            for text in (a.key, str(Decimal(a.tolerance.numerator) / Decimal(a.tolerance.denominator))):
                if not is_well_formed(text):
                    failures.append(f"{p.uid} ({q.part}) {a.name}: ill-formed number {text!r}")
        if q.choice is not None:
            c = q.choice
            true_positions = choices.get(c.name, set())
            if true_positions != {c.correct}:
                failures.append(
                    f"{p.uid} ({q.part}): keyed option {c.correct} but the float64 solver finds "
                    f"{sorted(true_positions)} true"
                )
            if len({str(o) for o in c.options}) != len(c.options):
                failures.append(f"{p.uid} ({q.part}): duplicate options")
    return failures


def _check_positions(report: FamilyReport, n_options: int) -> None:
    total = sum(report.positions.values())
    if total < 40 or n_options < 2:
        return
    p = 1 / n_options
    allowed = 4 * math.sqrt(p * (1 - p) / total) + 0.02
    for position in range(n_options):
        share = report.positions[position] / total
        if abs(share - p) > allowed:
            report.failures.append(
                f"{report.family_id}: correct option at position {'ABCDEFGH'[position]} in "
                f"{share:.1%} of {total} shuffled parts, expected {p:.1%} ± {allowed:.1%}"
            )


def _check_exports(problems: Sequence[Problem], sheet: Worksheet) -> list[str]:
    failures = []
    rendered = {
        "worksheet.md": render_worksheet_md(problems, sheet),
        "answer-key.md": render_key_md(problems, sheet),
        "worksheet.tex": render_worksheet_latex(problems, sheet),
        "answer-key.tex": render_key_latex(problems, sheet),
    }
    for name in ("worksheet.tex", "answer-key.tex"):
        if not braces_balanced(rendered[name]):
            failures.append(f"{name}: unbalanced braces")
    for name in ("problems.json", "answer-key.json"):
        try:
            json.loads((problems_json if name == "problems.json" else key_json)(problems, sheet))
        except ValueError as exc:
            failures.append(f"{name}: invalid JSON ({exc})")
    moodle = moodle_xml(problems, sheet)
    qti = qti_assessment_xml(problems, sheet, "verify")
    pl = prairielearn_files(problems, sheet)
    rendered["questions.xml"] = moodle.decode("utf-8")
    rendered["qti.xml"] = qti.decode("utf-8")
    for name, text in rendered.items():
        bad = bad_number_tokens(text)
        if bad:
            failures.append(f"{name}: ill-formed numbers {sorted(set(bad))[:5]}")
    try:
        for _, answer, tol in read_moodle_numeric(moodle):
            a, t = float(answer), float(tol)
            if not moodle_accepts(a, a, t) or moodle_accepts(a + t + 1e-9, a, t) or moodle_accepts(a - t - 1e-9, a, t):
                failures.append(f"questions.xml: Moodle tolerance rule fails for answer {answer} ± {tol}")
        for ident, exact, lo, hi in read_qti_numeric(qti):
            e, lo_, hi_ = float(exact), float(lo), float(hi)
            t = hi_ - e
            if (
                not canvas_accepts(e, e, lo_, hi_)
                or canvas_accepts(hi_ + 1e-9, e, lo_, hi_)
                or canvas_accepts(lo_ - 1e-9, e, lo_, hi_)
            ):
                failures.append(f"qti.xml: Canvas margin rule fails for {ident} ({exact}, {lo}..{hi})")
            if any(0 < abs(v) < 1e-4 for v in (e, lo_, hi_, t)):
                failures.append(f"qti.xml: {ident} has a value below 1e-4, which Canvas stores as 0")
        for path, data in pl.items():
            if path.endswith(".html"):
                for name, correct, rtol, atol in read_prairielearn_numeric(data.decode("utf-8")):
                    c, r, a = float(correct), float(rtol), float(atol)
                    if (
                        not prairielearn_accepts(c, c, r, a)
                        or prairielearn_accepts(c + a + 1e-9, c, r, a)
                        or prairielearn_accepts(c - a - 1e-9, c, r, a)
                        or r != 0
                    ):
                        failures.append(f"{path}: PrairieLearn relabs rule fails for {name}")
            else:
                json.loads(data)
    except (ET.ParseError, ValueError) as exc:
        failures.append(f"exports: not well-formed ({exc})")
    return failures


def verify_families(
    families: Sequence[Family],
    count: int,
    base_seed: int = 0,
    student: str | None = None,
    render_sample: int = 60,
) -> VerifyReport:
    """Run every check in the module docstring on ``count`` variants per family.

    Args:
        families: the families to check.
        count: variants per family.
        base_seed, student: the generation arguments.
        render_sample: how many variants per family are also rendered and exported (rendering is
            the slow part; the checks on numbers cover all ``count`` variants).
    """
    start = time.perf_counter()
    reports = []
    sample: list[Problem] = []
    for fam in families:
        report = FamilyReport(fam.id, max_duplicate_rate=fam.max_duplicate_rate)
        t0 = time.perf_counter()
        try:
            problems, stats = generate_family(fam, count, base_seed, student)
        except GenerationError as exc:
            report.failures.append(str(exc))
            reports.append(report)
            continue
        report.seconds = time.perf_counter() - t0
        report.variants = len(problems)
        report.acceptance_rate = stats.acceptance_rate
        report.rejections = stats.rejections
        keys = [givens_key(p) for p in problems]
        report.duplicate_rate = (len(keys) - len(set(keys))) / len(keys)
        if report.duplicate_rate > fam.max_duplicate_rate:
            report.failures.append(
                f"{fam.id}: {report.duplicate_rate:.1%} duplicate variants, above the stated "
                f"{fam.max_duplicate_rate:.0%}"
            )
        n_options = 0
        for p in problems:
            report.failures.extend(_check_problem(p))
            for q in p.questions:
                if q.choice is not None and q.choice.shuffled:
                    report.positions[q.choice.correct] += 1
                    n_options = max(n_options, len(q.choice.options))
        _check_positions(report, n_options)
        reports.append(report)
        sample.extend(problems[:render_sample])
    sheet = Worksheet("attnscore practice --verify", base_seed, student, "attnscore practice --verify")
    export_failures = _check_exports(sample, sheet) if sample else []
    return VerifyReport(reports, export_failures, count, time.perf_counter() - start)
