"""The class report: one self-contained HTML page for a whole class run.

Sections: a summary, the score histogram, per-case pass rates, the class's diagnosed mistakes
ranked by how many students made them (with one example each), a student × case heatmap of the
fraction of points earned, and timing outliers. Plots are drawn with matplotlib (Agg, no pyplot
state) and embedded as base64 PNG ``data:`` URIs; the page loads nothing from anywhere else and
runs no script. Every piece of text from a result is HTML-escaped, and every label drawn in a
plot is plain text (matplotlib's mathtext and TeX are off, whatever the user's matplotlibrc says:
a student named ``$\\undefinedcmd$.py`` is drawn as those characters). A plot that cannot be
drawn anyway is replaced by a note saying why; the rest of the page is written.
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

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from attnscore.maths.display import counted
from attnscore.report.results import CaseResult, SubmissionResult, Verdict, points_out

__all__ = ["class_report_html", "MistakeCount", "ranked_mistakes", "timing_outliers", "pass_rates"]

_MAX_HEATMAP_LABELS = 60


@dataclass(frozen=True)
class MistakeCount:
    """One diagnosed mistake across the class.

    Attributes:
        id: the mistake's catalogue id, e.g. ``"softmax_applied"``.
        students: how many students' results carry it (on any case).
        cases: how many failing cases carry it, all students together.
        example_student, example_case, message: one instance (the first student, by name).
    """

    id: str
    students: int
    cases: int
    example_student: str
    example_case: str
    message: str


def ranked_mistakes(rows: Sequence[tuple[str, SubmissionResult]]) -> list[MistakeCount]:
    """Diagnosed mistakes (:attr:`CaseResult.diagnosis`), most students first, then by id."""
    students: Counter[str] = Counter()
    cases: Counter[str] = Counter()
    example: dict[str, tuple[str, str, str]] = {}
    for student, result in sorted(rows, key=lambda r: r[0]):
        seen: set[str] = set()
        for case in result.cases:
            if case.passed or not case.diagnosis or "id" not in case.diagnosis:
                continue
            mistake = case.diagnosis["id"]
            cases[mistake] += 1
            if mistake not in seen:
                seen.add(mistake)
                students[mistake] += 1
            example.setdefault(mistake, (student, case.title, case.diagnosis.get("message", "")))
    order = sorted(students, key=lambda m: (-students[m], m))
    return [MistakeCount(m, students[m], cases[m], *example[m]) for m in order]


def pass_rates(rows: Sequence[tuple[str, SubmissionResult]]) -> list[tuple[str, str, int, int]]:
    """``(case id, title, students passed, students graded on it)`` in the first result's case order."""
    titles: dict[str, str] = {}
    passed: Counter[str] = Counter()
    graded: Counter[str] = Counter()
    for _, result in rows:
        for case in result.cases:
            titles.setdefault(case.id, case.title)
            graded[case.id] += 1
            passed[case.id] += case.passed
    return [(cid, titles[cid], passed[cid], graded[cid]) for cid in titles]


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
        by_id = {c.id: c for c in result.cases}
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
    image = ax.imshow(grid, aspect="auto", cmap="RdYlGn", vmin=0, vmax=1, interpolation="nearest")
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
    """A failed case in the students table: its id, marked when the time budget left it unrun."""
    return f"{case.id} (not run)" if case.verdict is Verdict.BUDGET_SPENT else case.id


def _budget_detail(result: SubmissionResult) -> str:
    """The budget's sentence of a submission that spent it (its first unrun case's)."""
    return next(c.failure.detail for c in result.cases if c.verdict is Verdict.BUDGET_SPENT and c.failure is not None)


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
        parts.append(
            _table(
                ["mistake", "students", "cases", "example student", "example case", "feedback"],
                [
                    [
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
    parts.append(
        _table(
            ["student", "score", "max", "failed cases", "seconds"],
            [
                [
                    ("student", e(s)),
                    ("num", str(points_out(r.score))),
                    ("num", str(points_out(r.max_score))),
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
