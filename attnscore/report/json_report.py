"""JSON reports: results as plain, strictly valid JSON data (no NaN tokens).

An assignment's result (one with questions) adds ``questions``, one object per question in the
assignment's order (``id``, ``title``, ``spec`` ``{id, version}``, ``function``, ``visibility``,
``score``, ``max_score``, ``error``: null or the question's own problem), and a ``question`` key
to each case; a single spec's report has neither, as before. Points are rounded once, from the
exact values (:func:`attnscore.report.results.points_out`): ``score`` is the exact total rounded,
never a sum of rounded question scores. The lossless form, exact points kept, is the record
(:mod:`attnscore.report.record`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attnscore.report.feedback import failure_data
from attnscore.report.questions import QuestionScore, question_scores
from attnscore.report.results import CaseResult, SubmissionResult, points_out

__all__ = ["case_to_json", "submission_to_json", "batch_to_json", "REPORT_FORMAT"]

REPORT_FORMAT = "attnscore-result/2"


def case_to_json(case: CaseResult) -> dict[str, Any]:
    """One case as JSON data; ``diagnosis`` is null until a known mistake matches.

    ``message`` is the rendered feedback; ``failure`` holds the record's fields (verdict, the
    call's arguments, worst entries with index/got/expected/error/allowed, counts, tolerance,
    hint, diagnosis, explanation, shrunk-from, reproduction), null when passed, under the
    hidden-case rules (:func:`attnscore.report.feedback.failure_data`).
    """
    return {
        "id": case.id,
        **({"question": case.question} if case.question else {}),
        "kind": case.kind,
        "title": case.title,
        "verdict": case.verdict.value,
        "points": points_out(case.points),
        "max_points": points_out(case.max_points),
        "message": case.message,
        "visibility": case.visibility,
        "location": case.location,
        "counterexample": case.counterexample,
        "calls": case.calls,
        "diagnosis": dict(case.diagnosis) if case.diagnosis else None,
        "failure": failure_data(case.failure) if case.failure is not None else None,
    }


def submission_to_json(result: SubmissionResult) -> dict[str, Any]:
    """One submission's result as JSON data (the object ``grade --format json`` prints)."""
    return {
        "format": REPORT_FORMAT,
        "submission": result.submission,
        "spec": {"id": result.spec_id, "version": result.spec_version, "path": result.spec_path},
        "function": result.function,
        "score": points_out(result.score),
        "max_score": points_out(result.max_score),
        "all_passed": result.all_passed,
        "dtype": result.dtype,
        "device": result.device,
        "seed": result.seed,
        "duration_s": round(result.duration_s, 3),
        "error": result.error or None,
        "output": result.output,
        "environment": dict(result.environment),
        **({"questions": [_question_to_json(s) for s in question_scores(result)]} if result.questions else {}),
        "cases": [case_to_json(c) for c in result.cases],
    }


def _question_to_json(score: QuestionScore) -> dict[str, Any]:
    question = score.question
    return {
        "id": question.id,
        "title": question.title,
        "spec": {"id": question.spec_id, "version": question.spec_version},
        "function": question.function,
        "visibility": question.visibility,
        "score": points_out(score.points),
        "max_score": points_out(score.max_points),
        "all_passed": score.all_passed,
        "error": question.error or None,
    }


def batch_to_json(results: Sequence[SubmissionResult]) -> dict[str, Any]:
    """Several submissions' results as one JSON object."""
    return {
        "format": REPORT_FORMAT,
        "count": len(results),
        "all_passed": all(r.all_passed for r in results),
        "submissions": [submission_to_json(r) for r in results],
    }
