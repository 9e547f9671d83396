"""The class report: one self-contained HTML page for a whole class run.

Sections: a summary, the score histogram, per-case pass rates, the class's diagnosed mistakes
ranked by how many students made them (with one example each), a student × case heatmap of the
fraction of points earned, and timing outliers. Plots are drawn with matplotlib (Agg, no pyplot
state) and embedded as base64 PNG ``data:`` URIs; the page loads nothing from anywhere else and
runs no script. Every piece of text from a result is HTML-escaped, and every label drawn in a
plot is plain text (matplotlib's mathtext and TeX are off, whatever the user's matplotlibrc says:
a student named ``$\\undefinedcmd$.py`` is drawn as those characters). A plot that cannot be
drawn anyway is replaced by a note saying why; the rest of the page is written.

An assignment's class (results with questions) gets a section per question too: a table of each
question's points across the class (mean, median, full marks, zero, function missing), one score
histogram per question, and the diagnosed mistakes ranked within each question (a mistake made in
two questions is two rows); the case tables and the heatmap name each case ``question/id``
(:func:`attnscore.report.questions.case_key`), and the students table gives each question's points
beside the exact total.
"""

from __future__ import annotations

import base64
import html
import io
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from matplotlib import colormaps, rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from attnscore.maths.display import counted
from attnscore.report.questions import case_key, class_questions, question_scores
from attnscore.report.results import CaseResult, Question, SubmissionResult, Verdict, points_out

__all__ = [
    "class_report_html",
    "MistakeCount",
    "QuestionSummary",
    "ranked_mistakes",
    "timing_outliers",
    "pass_rates",
    "question_summaries",
]

_MAX_HEATMAP_LABELS = 60


@dataclass(frozen=True)
class MistakeCount:
    """One diagnosed mistake across the class.

    Attributes:
        id: the mistake's catalogue id, e.g. ``"softmax_applied"``.
        students: how many students' results carry it (on any case).
        cases: how many failing cases carry it, all students together.
        example_student, example_case, message: one instance (the first student, by name).
        question: the assignment question whose cases carry it (``""`` for one spec).
    """

    id: str
    students: int
    cases: int
    example_student: str
    example_case: str
    message: str
    question: str = ""


def ranked_mistakes(rows: Sequence[tuple[str, SubmissionResult]]) -> list[MistakeCount]:
    """Diagnosed mistakes (:attr:`CaseResult.diagnosis`), most students first, then by question and
    id; for an assignment, one entry per question and mistake."""
    students: Counter[tuple[str, str]] = Counter()
    cases: Counter[tuple[str, str]] = Counter()
    example: dict[tuple[str, str], tuple[str, str, str]] = {}
    for student, result in sorted(rows, key=lambda r: r[0]):
        seen: set[tuple[str, str]] = set()
        for case in result.cases:
            if case.passed or not case.diagnosis or "id" not in case.diagnosis:
                continue
            key = (case.question, case.diagnosis["id"])
            cases[key] += 1
            if key not in seen:
                seen.add(key)
                students[key] += 1
            example.setdefault(key, (student, case.title, case.diagnosis.get("message", "")))
    order = sorted(students, key=lambda k: (-students[k], k))
    return [MistakeCount(k[1], students[k], cases[k], *example[k], question=k[0]) for k in order]


def pass_rates(rows: Sequence[tuple[str, SubmissionResult]]) -> list[tuple[str, str, int, int]]:
    """``(case, title, students passed, students graded on it)`` in the first result's case order;
    a case of an assignment is named ``question/id`` (:func:`attnscore.report.questions.case_key`)."""
    titles: dict[str, str] = {}
    passed: Counter[str] = Counter()
    graded: Counter[str] = Counter()
    for _, result in rows:
        for case in result.cases:
            key = case_key(case)
            titles.setdefault(key, case.title)
            graded[key] += 1
            passed[key] += case.passed
    return [(cid, titles[cid], passed[cid], graded[cid]) for cid in titles]


@dataclass(frozen=True)
class QuestionSummary:
    """One assignment question across the class.

    Attributes:
        question: the question (as the first result that has it graded it).
        max_points: its exact maximum (the largest any student's result has).
        scores: each graded student's exact points on it, in row order.
        full, zero: how many students earned all of its points, and none of them.
        missing: how many students' results say the question could not be graded
            (:attr:`Question.error`: its function missing).
    """

    question: Question
    max_points: Fraction
    scores: tuple[Fraction, ...]
    full: int
    zero: int
    missing: int

    @property
    def mean(self) -> Fraction:
        return sum(self.scores, Fraction(0)) / len(self.scores) if self.scores else Fraction(0)

    @property
    def median(self) -> Fraction:
        return Fraction(statistics.median(self.scores)) if self.scores else Fraction(0)


def question_summaries(rows: Sequence[tuple[str, SubmissionResult]]) -> list[QuestionSummary]:
    """Each question of an assignment's class, in the assignment's order; empty for one spec."""
    summaries = []
    for question in class_questions([r for _, r in rows]):
        found = [s for _, r in rows for s in question_scores(r) if s.question.id == question.id]
        top = max((s.max_points for s in found), default=Fraction(0))
        summaries.append(
            QuestionSummary(
                question,
                top,
                tuple(s.points for s in found),
                sum(s.points == s.max_points for s in found),
                sum(s.points == 0 and s.max_points > 0 for s in found),
                sum(bool(s.question.error) for s in found),
            )
        )
    return summaries


def timing_outliers(rows: Sequence[tuple[str, SubmissionResult]]) -> list[tuple[str, float]]:
    """Students whose grading took unusually long: more than the median plus 5 median absolute
    deviations and more than twice the median (so a class of near-equal times has none);
    slowest first, as ``(student, seconds)``."""
    times = [r.duration_s for _, r in rows]
    if len(times) < 3:
        return []
    median = statistics.median(times)
    mad = statistics.median(abs(t - median) for t in times)
    limit = max(median + 5 * mad, 2 * median)
    return sorted(((s, r.duration_s) for s, r in rows if r.duration_s > limit), key=lambda x: -x[1])


def _png(figure: Figure) -> str:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


_PLAIN_TEXT: dict[Any, Any] = {"text.parse_math": False, "text.usetex": False}


def _img(draw: Callable[[], str], alt: str, id_: str) -> str:
    """The plot ``draw`` makes, as an inline image; a note instead when it cannot be drawn."""
    try:
        with rc_context(_PLAIN_TEXT):  # untrusted labels: never mathtext or TeX
            data = draw()
    except Exception as exc:  # noqa: BLE001 - a plot is never worth the whole report
        reason = html.escape(f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        return f'<p class="note" id="{id_}-missing">This plot could not be drawn ({reason}).</p>'
    return f'<img id="{id_}" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _histogram(fractions: list[float]) -> str:
    figure = Figure(figsize=(6, 3))
    ax = figure.add_subplot()
    ax.hist([100 * f for f in fractions], bins=[i * 10 for i in range(11)], color="#4878a8", edgecolor="white")
    ax.set_xlabel("score (% of the maximum)")
    ax.set_ylabel("students")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0, 100)
    return _png(figure)


def _question_histograms(summaries: list[QuestionSummary]) -> str:
    """One small histogram per question (percent of the question's points), side by side."""
    columns = min(len(summaries), 3)
    lines = -(-len(summaries) // columns)
    figure = Figure(figsize=(3.2 * columns, 2.4 * lines))
    for number, summary in enumerate(summaries, start=1):
        ax = figure.add_subplot(lines, columns, number)
        top = summary.max_points
        values = [100 * float(p / top) if top else 0.0 for p in summary.scores]
        ax.hist(values, bins=[i * 10 for i in range(11)], color="#4878a8", edgecolor="white")
        ax.set_title(f"{summary.question.id} ({points_out(top)} points)", fontsize=9)
        ax.set_xlim(0, 100)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
    figure.supxlabel("score on the question (% of its points)", fontsize=9)
    figure.supylabel("students", fontsize=9)
    return _png(figure)


def _pass_rate_plot(rates: list[tuple[str, str, int, int]]) -> str:
    figure = Figure(figsize=(6, 0.6 + 0.35 * len(rates)))
    ax = figure.add_subplot()
    ids = [r[0] for r in rates][::-1]
    values = [100 * r[2] / r[3] if r[3] else 0 for r in rates][::-1]
    ax.barh(ids, values, color="#59a14f")
    ax.set_xlim(0, 100)
    ax.set_xlabel("students who passed (%)")
    return _png(figure)


def _heatmap(rows: Sequence[tuple[str, SubmissionResult]], case_ids: list[str]) -> str:
    grid = []
    for _, result in rows:
        by_id = {case_key(c): c for c in result.cases}
        grid.append(
            [
                float(by_id[c].points / by_id[c].max_points)
                if c in by_id and by_id[c].max_points
                else (1.0 if c in by_id and by_id[c].passed else 0.0)
                for c in case_ids
            ]
        )
    height = min(2 + 0.25 * len(rows), 40)
    figure = Figure(figsize=(max(4, 0.5 * len(case_ids) + 2), height))
    ax = figure.add_subplot()
    # coloured here, one RGBA byte quad per cell: matplotlib then only scales bytes to the figure's
    # pixels (colouring floats there took 108 MiB for 200 students and 192 MiB for 2,000; this
    # takes about 97 MiB for either, the canvas itself)
    colours, scale = colormaps["RdYlGn"], Normalize(vmin=0, vmax=1)
    ax.imshow(colours(scale(np.asarray(grid, dtype=float)), bytes=True), aspect="auto", interpolation="nearest")
    image = ScalarMappable(norm=scale, cmap=colours)
    ax.set_xticks(range(len(case_ids)), case_ids, rotation=60, ha="right", fontsize=7)
    if len(rows) <= _MAX_HEATMAP_LABELS:
        ax.set_yticks(range(len(rows)), [s for s, _ in rows], fontsize=7)
    else:
        ax.set_ylabel(f"{counted(len(rows), 'student')}, in the order of the table below")
    figure.colorbar(image, ax=ax, label="fraction of the case's points")
    return _png(figure)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; } p.note { color: #555; }
"""


def _table(header: list[str], body: list[list[tuple[str, str]]], id_: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    lines = "".join("<tr>" + "".join(f'<td class="{cls}">{text}</td>' for cls, text in row) + "</tr>" for row in body)
    return f'<table id="{id_}"><thead><tr>{head}</tr></thead><tbody>{lines}</tbody></table>'


def _failed_label(case: CaseResult) -> str:
    """A failed case in the students table: its id (``question/id`` in an assignment), marked when
    the time budget left it unrun."""
    return f"{case_key(case)} (not run)" if case.verdict is Verdict.BUDGET_SPENT else case_key(case)


def _budget_detail(result: SubmissionResult) -> str:
    """The budget's sentence of a submission that spent it (its first unrun case's)."""
    return next(c.failure.detail for c in result.cases if c.verdict is Verdict.BUDGET_SPENT and c.failure is not None)


def _question_cell(result: SubmissionResult, question: str) -> str:
    """A student's points on ``question`` (rounded once from the exact sum), ``-`` when their result
    has no such question."""
    for score in question_scores(result):
        if score.question.id == question:
            return str(points_out(score.points))
    return "-"


def class_report_html(rows: Sequence[tuple[str, SubmissionResult]], title: str) -> str:
    """The class report page.

    Args:
        rows: ``(student, result)``, one per student, in the order tables list them.
        title: the page's heading (escaped here), e.g. the spec id.

    Returns:
        A complete HTML5 document (UTF-8 text) with every plot inline; no external resources,
        no script. An empty ``rows`` gives a page that says so.
    """
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}: class report</title><style>{_STYLE}</style></head><body>",
        f"<h1>{e(title)}: class report</h1>",
    ]
    if not rows:
        parts.append('<p id="empty">No graded submissions.</p></body></html>')
        return "\n".join(parts) + "\n"
    scores = [r.score for _, r in rows]
    maximum = max(r.max_score for _, r in rows)
    fractions = [float(r.score / r.max_score) if r.max_score else 0.0 for _, r in rows]
    full = sum(r.all_passed for _, r in rows)
    errors = sum(bool(r.error) for _, r in rows)
    parts.append(
        f'<p id="summary">{counted(len(rows), "student")}; '
        f"mean score {points_out(sum(scores, Fraction(0)) / len(scores), 2)} "
        f"of {points_out(maximum)}; median {points_out(Fraction(statistics.median(scores)), 2)}; "
        f"{full} passed every case; {errors} could not be loaded or run.</p>"
    )
    parts.append("<h2>Score histogram</h2>")
    parts.append(_img(lambda: _histogram(fractions), "histogram of scores as a percentage of the maximum", "histogram"))

    summaries = question_summaries(rows)
    if summaries:
        parts.append("<h2>Questions</h2>")
        parts.append(
            _table(
                ["question", "what it asks", "function", "points", "mean", "median", "full marks", "zero", "missing"],
                [
                    [
                        ("id", e(q.question.id)),
                        ("title", e(q.question.title)),
                        ("function", e(q.question.function)),
                        ("num", str(points_out(q.max_points))),
                        ("num", str(points_out(q.mean, 2))),
                        ("num", str(points_out(q.median, 2))),
                        ("num full", str(q.full)),
                        ("num zero", str(q.zero)),
                        ("num missing", str(q.missing)),
                    ]
                    for q in summaries
                ],
                "question-table",
            )
        )
        parts.append(
            _img(
                lambda: _question_histograms(summaries),
                "one histogram per question of its scores as a percentage of its points",
                "question-histograms",
            )
        )

    rates = pass_rates(rows)
    parts.append("<h2>Per-case pass rates</h2>")
    parts.append(
        _img(lambda: _pass_rate_plot(rates), "bar chart of the share of students passing each case", "pass-rates")
    )
    parts.append(
        _table(
            ["case", "what it checks", "passed", "graded", "pass rate"],
            [
                [
                    ("id", e(cid)),
                    ("title", e(ctitle)),
                    ("num passed", str(ok)),
                    ("num graded", str(n)),
                    ("num rate", f"{100 * ok / n:.0f}%" if n else "-"),
                ]
                for cid, ctitle, ok, n in rates
            ],
            "case-table",
        )
    )

    mistakes = ranked_mistakes(rows)
    parts.append("<h2>Diagnosed mistakes</h2>")
    if mistakes:
        by_question = bool(summaries)  # an assignment: each question's mistakes, which question first
        parts.append(
            _table(
                [
                    *(["question"] if by_question else []),
                    "mistake",
                    "students",
                    "cases",
                    "example student",
                    "example case",
                    "feedback",
                ],
                [
                    [
                        *([("question", e(m.question))] if by_question else []),
                        ("id", e(m.id)),
                        ("num students", str(m.students)),
                        ("num cases", str(m.cases)),
                        ("student", e(m.example_student)),
                        ("case", e(m.example_case)),
                        ("message", e(m.message)),
                    ]
                    for m in mistakes
                ],
                "mistake-table",
            )
        )
    else:
        parts.append('<p id="no-mistakes">No failing case matched a known mistake.</p>')

    parts.append("<h2>Students × cases</h2>")
    case_ids = [r[0] for r in rates]
    parts.append(
        _img(lambda: _heatmap(rows, case_ids), "heatmap of the fraction of points per student and case", "heatmap")
    )

    parts.append("<h2>Timing outliers</h2>")
    outliers = timing_outliers(rows)
    median = statistics.median(r.duration_s for _, r in rows)
    parts.append(f'<p class="note">Median grading time {median:.2f} s per student.</p>')
    if outliers:
        parts.append(
            _table(
                ["student", "seconds", "× median"],
                [
                    [("student", e(s)), ("num", f"{t:.2f}"), ("num", f"{t / median:.1f}" if median else "-")]
                    for s, t in outliers
                ],
                "timing-table",
            )
        )
    else:
        parts.append('<p id="no-outliers">No student took more than twice the median time.</p>')

    spent = [(s, r) for s, r in rows if any(c.verdict is Verdict.BUDGET_SPENT for c in r.cases)]
    if spent:  # the time budget (Limits.time_budget_s): who ran out of it, and how many cases went unrun
        parts.append("<h2>Time budget spent</h2>")
        parts.append(
            '<p class="note">These submissions used their whole time budget before every case had run; the '
            "cases left were not run and earn no points (verdict budget spent).</p>"
        )
        parts.append(
            _table(
                ["student", "cases not run", "why"],
                [
                    [
                        ("student", e(s)),
                        ("not-run", e(", ".join(c.id for c in r.cases if c.verdict is Verdict.BUDGET_SPENT))),
                        ("message", e(_budget_detail(r))),
                    ]
                    for s, r in spent
                ],
                "budget-table",
            )
        )

    parts.append("<h2>Students</h2>")
    question_ids = [q.question.id for q in summaries]
    parts.append(
        _table(
            ["student", "score", "max", *question_ids, "failed cases", "seconds"],
            [
                [
                    ("student", e(s)),
                    ("num", str(points_out(r.score))),
                    ("num", str(points_out(r.max_score))),
                    *(("num question", _question_cell(r, q)) for q in question_ids),
                    ("failed", e(", ".join(_failed_label(c) for c in r.cases if not c.passed)) or "-"),
                    ("num", f"{r.duration_s:.2f}"),
                ]
                for s, r in rows
            ],
            "student-table",
        )
    )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
