"""PrairieLearn external-grader ``results.json`` for one submission.

Format (PrairieLearn's external grading documentation): ``gradable`` (false, with
``format_errors``, when the submission could not be graded at all: not counted against the
student), ``score`` as a fraction 0..1, ``message``, ``output``, and ``tests[]`` with ``name``,
``description``, ``points``, ``max_points``, ``message`` and ``output``. The file is capped at
1 MB by PrairieLearn; :func:`prairielearn_json` shortens per-test text to stay under it. These are
students' results: a hidden case is listed as "hidden case N" with its verdict and points
(:func:`attnscore.report.redact.for_students`), never by id, title or spec line, and its message
never holds inputs or expected values.

An assignment (a result with questions) is one PrairieLearn question with one test per case, each
named with its question (``softmax: example no_mask``; a hidden case ``softmax: hidden case 1``,
numbered within its question, every case of a hidden question among them); the message gives each
question's points on a line of its own, and ``score`` is the exact total over the exact maximum.
"""

from __future__ import annotations

import json
from typing import Any

from attnscore.report.questions import question_scores
from attnscore.report.redact import for_students
from attnscore.report.results import SubmissionResult, points_out

__all__ = ["prairielearn_results", "prairielearn_ungradable", "prairielearn_json", "MAX_RESULTS_BYTES"]

MAX_RESULTS_BYTES = 1_000_000
"""PrairieLearn's cap on results.json, in bytes."""


def prairielearn_results(result: SubmissionResult) -> dict[str, Any]:
    """The PrairieLearn results object for ``result`` (``score``: exact points ratio as a float).

    A test is named by its case id (``example anti_aligned``, ``property deterministic``; a hidden
    case ``hidden case N``), after its question's id for an assignment (``softmax: example a``),
    and described by its title ("" for a hidden case).
    """
    result = for_students(result)
    tests = []
    for case in result.cases:
        name = case.id.replace(":", " ", 1)
        tests.append(
            {
                "name": f"{case.question}: {name}" if case.question else name,
                "description": case.title,
                "points": points_out(case.points),
                "max_points": points_out(case.max_points),
                "message": case.verdict.label if case.passed else f"{case.verdict.label}: {case.message}",
                "output": "",
            }
        )
    score = result.score / result.max_score if result.max_score else 0
    message = (
        f"{result.spec_id} v{result.spec_version}: {points_out(result.score)}/{points_out(result.max_score)} points"
    )
    for part in question_scores(result):
        message += f"\n{part.question.id}: {points_out(part.points)}/{points_out(part.max_points)} points"
        if part.question.error:
            message += f" ({part.question.error})"
    if result.error:
        message += f"\n{result.error}"
    return {
        "gradable": True,
        "score": float(score),
        "message": message,
        "output": result.output,
        "tests": tests,
    }


def prairielearn_ungradable(reason: str) -> dict[str, Any]:
    """Results for a submission that could not be graded at all (not counted against the student)."""
    return {"gradable": False, "score": 0.0, "message": reason, "format_errors": [reason], "tests": []}


def prairielearn_json(data: dict[str, Any]) -> str:
    """``data`` as JSON text under :data:`MAX_RESULTS_BYTES`: long per-test messages and the
    output are cut (with a note) until it fits."""
    text = json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False)
    limit = 4000
    while len(text.encode("utf-8")) > MAX_RESULTS_BYTES and limit >= 50:
        data = {**data, "output": _cut(str(data.get("output", "")), limit)}
        data["tests"] = [
            {**t, "message": _cut(t["message"], limit), "output": _cut(t["output"], limit)} for t in data["tests"]
        ]
        text = json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False)
        limit //= 4
    return text + "\n"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " ... (cut to fit PrairieLearn's 1 MB results)"
