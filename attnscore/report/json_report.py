"""JSON reports: results as plain, strictly valid JSON data (no NaN tokens)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attnscore.report.feedback import failure_data
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
        "cases": [case_to_json(c) for c in result.cases],
    }


def batch_to_json(results: Sequence[SubmissionResult]) -> dict[str, Any]:
    """Several submissions' results as one JSON object."""
    return {
        "format": REPORT_FORMAT,
        "count": len(results),
        "all_passed": all(r.all_passed for r in results),
        "submissions": [submission_to_json(r) for r in results],
    }
