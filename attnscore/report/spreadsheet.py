"""The class's grades as a CSV file that opens in a spreadsheet.

One row per student: ``student, score, max, error``, then one column per case (its id) holding
the points earned. For an assignment, one column per question (its id, in the assignment's order)
comes between ``error`` and the cases, holding the question's points, and each case column is
named ``question/id`` (two questions may both have a case ``example:no_mask``); the ``error`` cell
also names a question whose function was missing (``rope: ...``). ``score`` is the exact total
rounded once, never a sum of rounded cells; a question worth 0 points shows ``0``, and a cell is
empty only when that student's result has no such question or case. A submission whose time
budget ran out says so in its ``error`` cell (``4 cases not run: this submission used its whole
time budget of 30 s on earlier cases``).
Points are exact in the gradebook and rounded here once
(:func:`attnscore.report.results.points_out`).

Encoding: UTF-8 *with* a byte-order mark (``utf-8-sig``). Without it Excel reads a CSV file in the
machine's legacy code page and garbles non-ASCII student names (``José`` becomes ``JosÃ©``);
LibreOffice, Google Sheets, pandas and Python's ``csv`` module (with ``encoding="utf-8-sig"``)
all read the mark and drop it. Line endings are ``\\r\\n`` (RFC 4180).

Text cells that a spreadsheet would run as a formula get a leading ``'``, the usual defence
against CSV formula injection: every text cell (student names, and the error column, whose text
may come from the submission) whose first character after any leading spaces, tabs or line breaks
is ``=``, ``+``, ``-``, ``@``, tab or carriage return, or their full-width forms (``＝``, ``＋``,
``－``, ``＠``, which some spreadsheets read as the ASCII ones): a student can name their file
``=HYPERLINK(...)``, or raise an exception whose message is one.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence

from attnscore.maths.display import counted
from attnscore.report.questions import case_key, class_questions, question_scores
from attnscore.report.results import SubmissionResult, Verdict, points_out

__all__ = ["grades_csv", "CSV_ENCODING"]

CSV_ENCODING = "utf-8-sig"
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def _text_cell(text: str) -> str:
    """``text`` as a cell no spreadsheet runs as a formula (a leading ``'`` where it would)."""
    return f"'{text}" if text.startswith(_FORMULA_START) or text.lstrip(" \t\r\n").startswith(_FORMULA_START) else text


def grades_csv(rows: Sequence[tuple[str, SubmissionResult]], notes: Mapping[str, str] | None = None) -> str:
    """The CSV text (without the byte-order mark: write it with :data:`CSV_ENCODING`).

    Args:
        rows: ``(student, result)`` in the order wanted; question and case columns follow the
            first result's questions and cases, then any that only later results have.
        notes: student -> a problem of the class run with that student's outputs (e.g. the
            feedback file could not be written), added to the ``error`` cell.

    Returns:
        ``student,score,max,error,<question id>...,<case id>...`` and one line per student; a
        question or case a student's result lacks is an empty cell.
    """
    case_ids: dict[str, None] = {}  # in order of first appearance
    for _, result in rows:
        for case in result.cases:
            case_ids.setdefault(case_key(case))
    question_ids = [q.id for q in class_questions([r for _, r in rows])]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(
        ["student", "score", "max", "error", *(_text_cell(q) for q in question_ids), *map(_text_cell, case_ids)]
    )
    notes = notes or {}
    for student, result in rows:
        points = {case_key(c): points_out(c.points) for c in result.cases}
        scores = question_scores(result)
        by_question = {s.question.id: points_out(s.points) for s in scores}
        error = result.error.splitlines()[0] if result.error else ""
        for score in scores:  # a question's own problem (its function missing) names the question
            if score.question.error:
                note = f"{score.question.id}: {score.question.error.splitlines()[0]}"
                error = f"{error}; {note}" if error else note
        unrun = [c for c in result.cases if c.verdict is Verdict.BUDGET_SPENT and c.failure is not None]
        if unrun and unrun[0].failure is not None:  # the time budget ran out: say so beside the zeros
            note = f"{counted(len(unrun), 'case')} {unrun[0].failure.detail}"
            error = f"{error}; {note}" if error else note
        if student in notes:
            error = f"{error}; {notes[student]}" if error else notes[student]
        writer.writerow(
            [
                _text_cell(student),
                points_out(result.score),
                points_out(result.max_score),
                _text_cell(error),
                *(by_question.get(q, "") for q in question_ids),
                *(points.get(c, "") for c in case_ids),
            ]
        )
    return buffer.getvalue()
