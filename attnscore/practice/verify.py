"""``attnscore practice --verify``: generate many variants and check them against an independent solver.

For every family, over ``count`` variants:

1. generation never fails (every variant is accepted within ``max_attempts``);
2. every numeric answer agrees with an independent float64 computation: the reference
   implementation (:func:`attnscore.maths.reference.score`, :func:`~attnscore.maths.reference.scores`,
   :func:`~attnscore.maths.reference.score_matrix`) for scores, plain torch float64 for scaled scores and
   softmax; every correct option is re-derived the same way, and the key lies within its tolerance;
3. duplicate variants stay under the family's ``max_duplicate_rate`` at a class of
   :data:`CLASS_SIZE` students (the first 1,000 variants), and under ``max_duplicate_rate x
   count / 1000`` over the whole run (under the birthday law duplicates grow linearly with the
   count while it is small against the capacity); ``count`` never exceeds the family's capacity;
4. no fixed feature of the options identifies the correct one: for every multiple-choice question
   (grouped by question and number of options) the correct option's rank by each feature
   (position; text length; magnitude and signed value for numeric options; vector length for key
   options; ties broken by position) is tested against the uniform distribution with a chi-square
   goodness-of-fit test, which fails when ``p <`` :data:`BALANCE_ALPHA`. A group with fewer than
   :data:`MIN_EXPECTED` expected answers per rank is skipped (too few to have power) and reported
   as skipped;
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

from attnscore.practice import kinds
from attnscore.practice.export_json import key_json, problems_json
from attnscore.practice.export_moodle import moodle_xml, read_moodle_numeric
from attnscore.practice.export_prairielearn import prairielearn_files, read_prairielearn_numeric
from attnscore.practice.export_qti import qti_assessment_xml, read_qti_numeric
from attnscore.practice.family import Family
from attnscore.practice.float64 import FLOAT64
from attnscore.practice.generators import GenerationError, capacity, generate_family, givens_key
from attnscore.practice.numbers import is_well_formed
from attnscore.practice.problem import ChoiceAnswer, Problem
from attnscore.practice.render_latex import braces_balanced, render_key_latex, render_worksheet_latex
from attnscore.practice.render_md import render_key_md, render_worksheet_md
from attnscore.practice.richtext import plain
from attnscore.practice.tolerance import canvas_accepts, moodle_accepts, prairielearn_accepts
from attnscore.practice.worksheet import Worksheet

__all__ = [
    "BALANCE_ALPHA",
    "CLASS_SIZE",
    "MIN_EXPECTED",
    "BalanceTest",
    "FamilyReport",
    "VerifyReport",
    "verify_families",
    "independent_answers",
    "option_features",
    "chi_square_sf",
    "duplicate_rate",
    "bad_number_tokens",
]

_EPS = 1e-9

#: The class size at which ``max_duplicate_rate`` is stated (and checked).
CLASS_SIZE = 1000
#: Significance level of the option-balance tests: fail when the chi-square p-value is below it.
BALANCE_ALPHA = 0.001
#: A balance test runs only when every rank expects at least this many correct answers.
MIN_EXPECTED = 25

# Tokens that must never appear in rendered output: a lone -0 / -0.0, exponent notation, float artefacts.
_BAD_NUMBER = re.compile(r"(?<![\w.])-0(?:\.0*)?(?![\d.])|\d(?:\.\d+)?[eE][-+]?\d+|\d\.\d{9,}")


def bad_number_tokens(rendered: str) -> list[str]:
    """Ill-formed number tokens found in rendered text (empty when clean)."""
    return [m.group(0) for m in _BAD_NUMBER.finditer(rendered)]


def chi_square_sf(x: float, df: int) -> float:
    """Upper tail ``P(X >= x)`` of the chi-square distribution with ``df`` degrees of freedom.

    Exact closed forms for integer ``df`` (Abramowitz & Stegun 26.4.4 and 26.4.5): a finite
    Poisson sum for even ``df``, ``erfc`` plus a finite sum for odd ``df``.

    Raises:
        ValueError: ``df < 1`` or ``x < 0``.
    """
    if df < 1 or x < 0:
        raise ValueError(f"chi_square_sf needs df >= 1 and x >= 0, found df={df}, x={x}")
    half = x / 2
    if df % 2 == 0:
        term = total = math.exp(-half)
        for i in range(1, df // 2):
            term *= half / i
            total += term
        return min(1.0, total)
    total = math.erfc(math.sqrt(half))
    term = math.sqrt(x) * math.exp(-half) * math.sqrt(2 / math.pi)  # i = 1 of the odd series
    for i in range(1, (df - 1) // 2 + 1):
        total += term
        term *= x / (2 * i + 1)
    return min(1.0, total)


@dataclass(frozen=True)
class BalanceTest:
    """One chi-square test: is the correct option's rank by ``feature`` uniform over the options?

    Attributes:
        question: the choice's name (``"scaled"``, ``"meaning"``...).
        n_options: options per question in this group.
        feature: ``position``, ``length``, ``magnitude``, ``value`` or ``norm``.
        counts: how many correct options had rank 0, 1, ... (rank 0 = smallest feature value).
        statistic, p_value: the chi-square statistic (``n_options - 1`` degrees of freedom) and its
            p-value; ``p_value`` is ``None`` when the test was skipped.
        skipped: why the test did not run (too few answers), else ``""``.
    """

    question: str
    n_options: int
    feature: str
    counts: tuple[int, ...]
    statistic: float
    p_value: float | None
    skipped: str = ""

    @property
    def failed(self) -> bool:
        """Whether the feature predicts the answer above chance (``p < BALANCE_ALPHA``)."""
        return self.p_value is not None and self.p_value < BALANCE_ALPHA

    def describe(self) -> str:
        """One line: ``scaled/4 magnitude: ranks [0, 812, 0, 0], chi2 = 2436.0, p = 0``."""
        head = f"{self.question}/{self.n_options} {self.feature}: ranks {list(self.counts)}"
        if self.p_value is None:
            return f"{head}, skipped ({self.skipped})"
        return f"{head}, chi2 = {self.statistic:.1f}, p = {self.p_value:.3g}"


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
    capacity: int = 0
    class_duplicate_rate: float = 0.0
    balance: list[BalanceTest] = field(default_factory=list)
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


def independent_answers(p: Problem) -> tuple[dict[str, float], dict[str, set[int]]]:
    """Re-solve a problem from its givens in float64, independently of the exact solver.

    The problem's kind re-derives it (``Kind.independent``) through :data:`~attnscore.practice.float64.FLOAT64`.

    Returns:
        ``(numbers, choices)``: answer name -> value, and choice name -> set of option positions
        whose claim holds (a sound problem has exactly one, the keyed one).
    """
    return kinds.get(p.kind).independent(p, FLOAT64)


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


def option_features(p: Problem, choice: ChoiceAnswer) -> dict[str, list[float]]:
    """Per-option features a test-wise student could read without solving, recomputed from the givens.

    Returns:
        feature name -> one value per option (display order): ``position`` and ``length`` (of the
        option's plain text) always; ``magnitude`` and ``value`` for numeric options (the
        "which scaled score" question); ``norm`` (squared length) for key-vector options
        (the kind's own, ``Kind.option_features``).
    """
    n = len(choice.options)
    feats: dict[str, list[float]] = {
        "position": [float(i) for i in range(n)],
        "length": [float(len(plain(o))) for o in choice.options],
    }
    feats.update(kinds.get(p.kind).option_features(p, choice, FLOAT64))
    return feats


def _rank(values: Sequence[float], i: int) -> int:
    """Rank of option ``i`` when options are sorted by (value, position)."""
    return sum(1 for j, v in enumerate(values) if (v, j) < (values[i], i))


def _balance_tests(ranks: dict[tuple[str, int, str], Counter[int]]) -> list[BalanceTest]:
    out = []
    for (name, n, feature), counter in sorted(ranks.items()):
        counts = tuple(counter[r] for r in range(n))
        total = sum(counts)
        if total / n < MIN_EXPECTED:
            out.append(
                BalanceTest(
                    name,
                    n,
                    feature,
                    counts,
                    0.0,
                    None,
                    f"{total} answers; needs >= {MIN_EXPECTED * n} ({MIN_EXPECTED} per rank) for power",
                )
            )
            continue
        expected = total / n
        statistic = sum((c - expected) ** 2 / expected for c in counts)
        out.append(BalanceTest(name, n, feature, counts, statistic, chi_square_sf(statistic, n - 1)))
    return out


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


def _poisson_tail(k: int, mean: float) -> float:
    """P(X >= k) for X ~ Poisson(mean)."""
    if k <= 0:
        return 1.0
    term = total = math.exp(-mean)
    for i in range(1, k):
        term *= mean / i
        total += term
    return max(0.0, 1.0 - total)


def duplicate_rate(keys: Sequence[str]) -> float:
    """Share of variants that repeat an earlier one: ``(len - distinct) / len`` (0.0 when empty)."""
    return (len(keys) - len(set(keys))) / len(keys) if keys else 0.0


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
        report.capacity = capacity(fam)
        if count > report.capacity:
            report.failures.append(
                f"{fam.id}: --count {count} is above the family's capacity of {report.capacity} distinct variants"
            )
        keys = [givens_key(p) for p in problems]
        report.duplicate_rate = duplicate_rate(keys)
        report.class_duplicate_rate = duplicate_rate(keys[:CLASS_SIZE])
        if count < CLASS_SIZE:
            # Below the class size a duplicate or two is no evidence against the stated rate: under the
            # birthday law the rate grows linearly with the count, so at `count` about
            # rate·count²/CLASS_SIZE duplicates are expected. Fail only on far more than that.
            repeats = len(keys) - len(set(keys))
            expected = fam.max_duplicate_rate * count * count / CLASS_SIZE
            if _poisson_tail(repeats, expected) < 0.001:
                report.failures.append(
                    f"{fam.id}: {repeats} duplicate variants among {count}, far above the "
                    f"{expected:.2g} expected at the stated {fam.max_duplicate_rate:.0%} for {CLASS_SIZE} (p < 0.001)"
                )
        elif report.class_duplicate_rate > fam.max_duplicate_rate:
            report.failures.append(
                f"{fam.id}: {report.class_duplicate_rate:.1%} duplicate variants among the first "
                f"{min(count, CLASS_SIZE)}, above the stated {fam.max_duplicate_rate:.0%}"
            )
        allowed = fam.max_duplicate_rate * max(1.0, count / CLASS_SIZE)
        if count > CLASS_SIZE and report.duplicate_rate > allowed:
            report.failures.append(
                f"{fam.id}: {report.duplicate_rate:.1%} duplicate variants in {count}, above "
                f"{allowed:.1%} (the stated {fam.max_duplicate_rate:.0%} at {CLASS_SIZE}, scaled by the count)"
            )
        ranks: dict[tuple[str, int, str], Counter[int]] = {}
        for p in problems:
            report.failures.extend(_check_problem(p))
            for q in p.questions:
                c = q.choice
                if c is None or len(c.options) < 2:
                    continue
                report.positions[c.correct] += 1
                for feature, values in option_features(p, c).items():
                    ranks.setdefault((c.name, len(c.options), feature), Counter())[_rank(values, c.correct)] += 1
        report.balance = _balance_tests(ranks)
        for test in report.balance:
            if test.failed:
                report.failures.append(
                    f"{fam.id}: the correct option's rank by {test.feature} is not uniform, so it gives the "
                    f"answer away: {test.describe()} (fail below p = {BALANCE_ALPHA})"
                )
        reports.append(report)
        sample.extend(problems[:render_sample])
    sheet = Worksheet("attnscore practice --verify", base_seed, student, "attnscore practice --verify")
    export_failures = _check_exports(sample, sheet) if sample else []
    return VerifyReport(reports, export_failures, count, time.perf_counter() - start)
