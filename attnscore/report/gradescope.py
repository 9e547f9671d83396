"""Gradescope ``results.json`` for one submission.

Format: top-level ``score``, ``execution_time``, ``output``, ``output_format``, ``visibility``,
``stdout_visibility`` and ``tests[]`` with ``name``, ``number``, ``score``, ``max_score``,
``status`` (passed|failed), ``output``, ``tags`` and ``visibility``. Hidden cases are shown
only after the due date, and their messages never hold expected values.
"""

from __future__ import annotations

from typing import Any

from attnscore.report.feedback import cause_groups, failure_text, second_cause_text, summary_line
from attnscore.report.results import SubmissionResult, points_out

__all__ = ["gradescope_results"]


def gradescope_results(result: SubmissionResult) -> dict[str, Any]:
    """The Gradescope results object for ``result`` (serialise with ``allow_nan=False``)."""
    tests = []
    same: dict[str, str] = {}  # a case explained under another case's test: one line and a pointer
    for group in cause_groups([c.failure for c in result.cases if c.failure is not None]):
        for other in group.others:
            if other.beside:  # a second cause: shown in its own case's test, under the first
                continue
            same[other.case_id] = (
                f"{summary_line(other)} ({other.location})\n"
                f"Same cause as {group.lead.case_id} ({group.cause}): see that test."
            )
    for number, case in enumerate(result.cases, start=1):
        status = "passed" if case.passed else "failed"
        text = case.verdict.label
        if case.failure is not None:
            text += f": {same.get(case.id) or failure_text(case.failure)}"
            if case.id in same:  # the pointer covers the first cause; a second one is its own
                text += "".join(f"\n{second_cause_text(o)}" for o in case.failure.other_causes)
        tests.append(
            {
                "name": f"{case.id}: {case.title}",
                "number": str(number),
                "score": points_out(case.points),
                "max_score": points_out(case.max_points),
                "status": status,
                "output": text,
                "output_format": "text",
                "tags": [case.kind, case.verdict.value],
                "visibility": "after_due_date" if case.visibility == "hidden" else "visible",
            }
        )
    summary = (
        f"{result.spec_id} v{result.spec_version}: {points_out(result.score)}/{points_out(result.max_score)} points"
    )
    if result.error:
        summary += f"\n{result.error}"
    return {
        "score": points_out(result.score),
        "execution_time": round(result.duration_s, 3),
        "output": summary,
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "seed": result.seed,
            "dtype": result.dtype,
            "device": result.device,
            "environment": dict(result.environment),
        },
    }
