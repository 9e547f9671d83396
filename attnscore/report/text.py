"""Text reports for people: one submission in detail, or a table for a batch.

Both return a :class:`rich` renderable; the CLI prints it with colour where the terminal allows.

An assignment's result (one with questions) is shown question by question: each question's line
(its points, function and spec, or why it could not be graded) before its cases, case by case, then
the feedback with each case named ``question/id``; a batch table of an assignment has a column of
points per question instead of a code per case.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attnscore.boundary.untrusted import clean_text
from attnscore.maths.display import counted
from attnscore.report.feedback import cause_groups, failure_text, summary_line
from attnscore.report.questions import class_questions, question_scores
from attnscore.report.results import SubmissionResult, Verdict, points_out

__all__ = ["submission_text", "batch_table"]


def _verdict_text(verdict: Verdict) -> Text:
    if verdict is Verdict.PASSED:
        return Text("passed", style="green")
    return Text(verdict.label, style="yellow" if verdict in (Verdict.TIMEOUT, Verdict.BUDGET_SPENT) else "red")


def _one_line(name: str, limit: int) -> str:
    """A submission's name on one line: names are escaped at the boundary
    (:func:`attnscore.submission.files.printable_name`); this keeps a stored older name's newline
    or tab from breaking a row too."""
    return clean_text(name, limit).replace("\n", "\\n").replace("\t", "\\t")


def _score(result: SubmissionResult) -> str:
    return f"{points_out(result.score)}/{points_out(result.max_score)}"


def submission_text(result: SubmissionResult) -> Group:
    """A readable report of one submission: a line per case (verdict, points), then the feedback.

    Failing cases with one cause (:func:`attnscore.report.feedback.cause_groups`) are explained
    once, in full for the smallest visible counterexample, and in one line each for the others;
    a submission-wide error (an import failure) is shown once.
    """
    graded = (
        f"assignment {result.spec_id} v{result.spec_version}, {counted(len(result.questions), 'question')}"
        if result.questions
        else f"{result.spec_id} v{result.spec_version}, function {result.function}"
    )
    header = Text.assemble(
        (_one_line(result.submission, 500), "bold"),
        f"  {graded}, ",
        f"{result.dtype} on {result.device}, seed {result.seed}\n",
    )
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("case")
    table.add_column("verdict")
    table.add_column("points", justify="right")
    scores = question_scores(result)
    for score in scores:  # an assignment: each question's line, then its cases
        question = score.question
        line = f"{question.id}: {question.title}" if question.title else question.id
        spec = f"{question.function}, {question.spec_id} v{question.spec_version}" + (
            ", hidden" if question.visibility == "hidden" else ""
        )
        table.add_row(
            Text(f"{line} ({spec})", style="bold"),
            Text("could not be graded", style="red") if question.error else Text(""),
            Text(f"{points_out(score.points)}/{points_out(score.max_points)}", style="bold"),
        )
        for case in score.cases:
            table.add_row(
                f"  {case.id}", _verdict_text(case.verdict), f"{points_out(case.points)}/{points_out(case.max_points)}"
            )
    for case in result.cases if not scores else ():
        table.add_row(case.id, _verdict_text(case.verdict), f"{points_out(case.points)}/{points_out(case.max_points)}")
    parts: list[RenderableType] = [header, table]
    for score in scores:
        if score.question.error:
            parts.append(Text(f"\n{score.question.id}: {score.question.error}", style="red"))
    if result.error:
        parts.append(Text(f"\n{result.error}", style="red"))
    # an assignment's failures are grouped by cause within each question, and named question/id
    # (two questions may both have a case example:a)
    sections = [(f"{s.question.id}/", s.cases) for s in scores] if scores else [("", result.cases)]
    for where, cases in sections:
        for group in cause_groups([c.failure for c in cases if c.failure is not None]):
            lead = group.lead
            parts.append(Text(f"\n{where}{lead.case_id} ({lead.verdict.label})", style="bold"))
            parts.append(Text(failure_text(lead)))
            if group.others:
                more = counted(len(group.others), "more case")
                parts.append(Text(f"Same cause ({group.cause}) in {more}:", style="bold"))
                for other in group.others:
                    parts.append(
                        Text(
                            f"  {where}{other.case_id} "
                            f"({', '.join(filter(None, (other.verdict.label, other.location)))}): "
                            f"{summary_line(other)}"
                        )
                    )
    parts.append(Text(f"\nScore: {_score(result)}  ({result.duration_s:.1f} s)", style="bold"))
    return Group(*parts)


_CODES = {
    Verdict.PASSED: "ok",
    Verdict.WRONG_VALUE: "value",
    Verdict.WRONG_SHAPE: "shape",
    Verdict.WRONG_DTYPE: "dtype",
    Verdict.NON_FINITE: "nan",
    Verdict.EXCEPTION: "raise",
    Verdict.TIMEOUT: "time",
    Verdict.MEMORY_LIMIT: "mem",
    Verdict.CRASHED: "crash",
    Verdict.FUNCTION_MISSING: "miss",
    Verdict.BAD_RETURN_TYPE: "type",
    Verdict.GRADER_ERROR: "ERR",
    Verdict.BUDGET_SPENT: "spent",
    Verdict.RULE_BROKEN: "rule",
    Verdict.WRONG_PARAMETERS: "param",
}


def batch_table(results: Sequence[SubmissionResult]) -> Group:
    """One row per submission: score, time and a short verdict code per case, then a legend; for an
    assignment, each question's points (green when every case of it passed) instead of the codes."""
    if not results:
        return Group(Text("no submissions"))
    table = Table(
        title=f"{results[0].spec_id}: {counted(len(results), 'submission')}",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("submission", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    questions = class_questions(results)
    if questions:  # an assignment: each question's points, not a code per case of every question
        for q in questions:
            table.add_column(q.id, justify="right", no_wrap=True)
        for r in results:
            points = {s.question.id: s for s in question_scores(r)}
            cells = [
                Text(
                    f"{points_out(points[q.id].points)}/{points_out(points[q.id].max_points)}",
                    style="green" if points[q.id].all_passed else "red",
                )
                if q.id in points
                else Text("-")
                for q in questions
            ]
            name = Text(_one_line(Path(r.submission).name, 200))
            table.add_row(name, _score(r), f"{r.duration_s:.1f}s", *cells)
        legend = Text(
            "\n".join(f"{q.id}: {q.function} ({q.spec_id} v{q.spec_version})" for q in questions), style="dim"
        )
        return Group(table, legend)
    cases = results[0].cases
    headers = [{"example": "E", "rule": "R"}.get(c.kind, "P") + str(i) for i, c in enumerate(cases, start=1)]
    for h in headers:
        table.add_column(h, justify="center", no_wrap=True)
    for r in results:
        cells = [Text(_CODES[c.verdict], style="green" if c.passed else "red") for c in r.cases]
        name = Text(_one_line(Path(r.submission).name, 200))  # plain text: a file named "[bold]x.py" stays as is
        table.add_row(name, _score(r), f"{r.duration_s:.1f}s", *cells)
    legend = Text("\n".join(f"{h}: {c.id}" for h, c in zip(headers, cases, strict=True)), style="dim")
    codes = Text("codes: " + ", ".join(f"{code} = {v.label}" for v, code in _CODES.items()), style="dim")
    return Group(table, legend, codes)
