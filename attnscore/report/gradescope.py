"""Gradescope ``results.json`` for one submission.

Format (Gradescope's autograder specification): top-level ``score`` (it overrides the sum of the
tests' scores), ``execution_time``, ``output``, ``output_format``, ``visibility``,
``stdout_visibility`` and ``tests[]`` with ``name``, ``number``, ``score``, ``max_score``,
``status`` (passed|failed), ``output``, ``tags`` and ``visibility``. These are students' results:
the hidden cases are named "hidden case N" with their verdict and points
(:func:`attnscore.report.redact.for_students`), never by id, title or spec line, and their
messages never hold their inputs, expected values or the submission's own text, whatever their
visibility.

How hidden cases are shown, and so whether a student sees their total, is ``hidden_cases``
(:data:`HIDDEN_CASES`). Gradescope's visibility values are ``visible`` (always shown, its
default), ``after_due_date`` (after the due date, or the late due date when late submissions are
allowed), ``after_published`` (once the instructor publishes grades) and ``hidden`` (never shown
to students); and while any test is not shown, Gradescope does not show the student their total
score. So:

- ``visible`` (the default): every case is a test shown at once, hidden cases with their verdict
  and points only; the student sees the total score right away.
- ``summary``: the hidden cases are one test shown at once (how many passed, their points
  together), never one by one; the student sees the total right away, not which hidden case failed.
- ``after_due_date``, ``after_published``, ``hidden``: each hidden case is a test with that
  visibility; until it is shown (never, for ``hidden``) the student sees the visible cases only,
  and no total. The top-level output then gives the visible cases' points, not the total.

An assignment (a result with questions) is graded as one submission: every case is a test named
with its question (``softmax: example:no_mask: ...``; a hidden case ``softmax: hidden case 1``,
numbered within its question) and tagged with the question's id. A hidden question's cases are
all hidden cases, so ``hidden_cases`` decides how they are shown, as for any hidden case; with
``summary`` each question's hidden cases are one test (``softmax: hidden cases``). The top-level
output gives one line per question (its points, or when it is shown for a question whose cases
are all shown later) and ``score`` is the exact total, rounded once.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from attnscore.report.feedback import at, cause_groups, failure_text, second_cause_text, summary_line
from attnscore.report.questions import question_scores
from attnscore.report.redact import for_students
from attnscore.report.results import CaseResult, SubmissionResult, points_out

__all__ = ["DEFAULT_HIDDEN_CASES", "HIDDEN_CASES", "gradescope_results"]

HIDDEN_CASES = ("visible", "summary", "after_due_date", "after_published", "hidden")
"""How hidden cases reach the student on Gradescope (see the module docstring)."""

DEFAULT_HIDDEN_CASES = "visible"
"""The default: hidden cases shown at once (verdict and points), so the total is shown."""

_WHEN = {
    "after_due_date": "after the due date",
    "after_published": "once grades are published",
    "hidden": "to your instructor only",
}


def gradescope_results(result: SubmissionResult, hidden_cases: str = DEFAULT_HIDDEN_CASES) -> dict[str, Any]:
    """The Gradescope results object for ``result`` (serialise with ``allow_nan=False``).

    Args:
        result: one submission's result.
        hidden_cases: one of :data:`HIDDEN_CASES` (see the module docstring for what each shows).

    Raises:
        ValueError: ``hidden_cases`` is not one of :data:`HIDDEN_CASES`.
    """
    if hidden_cases not in HIDDEN_CASES:
        raise ValueError(f"expected hidden_cases to be one of {', '.join(HIDDEN_CASES)}, found {hidden_cases!r}")
    result = for_students(result)
    hidden = [c for c in result.cases if c.visibility == "hidden"]
    shown = [c for c in result.cases if c.visibility != "hidden"] if hidden_cases == "summary" else list(result.cases)
    same = _pointers(shown)
    tests = [_test(number, case, same, hidden_cases) for number, case in enumerate(shown, start=1)]
    if hidden_cases == "summary":
        groups: dict[str, list[CaseResult]] = {}
        for case in hidden:  # one summary test per question (one in all for a single spec)
            groups.setdefault(case.question, []).append(case)
        for question, cases in groups.items():
            tests.append(_summary_test(len(tests) + 1, cases, question))
    summary = f"{result.spec_id} v{result.spec_version}: "
    if hidden and hidden_cases in _WHEN:
        summary += _points_shown(result.cases, hidden_cases)
    else:
        summary += f"{points_out(result.score)}/{points_out(result.max_score)} points"
    for score in question_scores(result):
        line = f"{score.question.id}: "
        if any(c.visibility == "hidden" for c in score.cases) and hidden_cases in _WHEN:
            line += _points_shown(score.cases, hidden_cases)
        else:
            line += f"{points_out(score.points)}/{points_out(score.max_points)} points"
        if score.question.error:
            line += f" ({score.question.error})"
        summary += f"\n{line}"
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
            "hidden_cases": hidden_cases,
            "environment": dict(result.environment),
        },
    }


def _cases(n: int) -> str:
    return "case" if n == 1 else "cases"


def _points_shown(cases: tuple[CaseResult, ...], hidden_cases: str) -> str:
    """The points of ``cases`` while their hidden ones are not shown yet: the visible cases' points,
    and how many hidden cases (with their points) are shown when."""
    visible = [c for c in cases if c.visibility != "hidden"]
    hidden = [c for c in cases if c.visibility == "hidden"]
    top = sum((c.max_points for c in hidden), start=Fraction(0))
    later = f"{len(hidden)} hidden {_cases(len(hidden))} ({points_out(top)} points) shown {_WHEN[hidden_cases]}"
    if not visible:
        return later
    score = sum((c.points for c in visible), start=Fraction(0))
    shown = sum((c.max_points for c in visible), start=Fraction(0))
    return f"{points_out(score)}/{points_out(shown)} points on the visible cases; {later}"


def _pointers(cases: list[CaseResult]) -> dict[str, str]:
    """A case explained under another case's test: one line and a pointer (by case id)."""
    same: dict[str, str] = {}
    for group in cause_groups([c.failure for c in cases if c.failure is not None]):
        for other in group.others:
            if other.beside:  # a second cause: shown in its own case's test, under the first
                continue
            same[other.case_id] = (
                f"{summary_line(other)}{at(other.location)}\n"
                f"Same cause as {group.lead.case_id} ({group.cause}): see that test."
            )
    return same


def _test(number: int, case: CaseResult, same: dict[str, str], hidden_cases: str) -> dict[str, Any]:
    text = case.verdict.label
    if case.failure is not None:
        text += f": {same.get(case.id) or failure_text(case.failure)}"
        if case.id in same:  # the pointer covers the first cause; a second one is its own
            text += "".join(f"\n{second_cause_text(o)}" for o in case.failure.other_causes)
    hidden = case.visibility == "hidden"
    return {
        "name": f"{case.question}: {case.label}" if case.question else case.label,
        "number": str(number),
        "score": points_out(case.points),
        "max_score": points_out(case.max_points),
        "status": "passed" if case.passed or case.advises else "failed",  # advice carries no points
        "output": text,
        "output_format": "text",
        "tags": [case.kind, case.verdict.value, *([case.question] if case.question else [])],
        "visibility": hidden_cases if hidden and hidden_cases != "visible" else "visible",
    }


def _summary_test(number: int, hidden: list[CaseResult], question: str) -> dict[str, Any]:
    """The hidden cases (of one question, for an assignment) as one test: how many passed and their
    points together, no case named."""
    passed = sum(c.passed for c in hidden)
    score = sum((c.points for c in hidden), start=Fraction(0))
    top = sum((c.max_points for c in hidden), start=Fraction(0))
    return {
        "name": f"{question}: hidden cases" if question else "hidden cases",
        "number": str(number),
        "score": points_out(score),
        "max_score": points_out(top),
        "status": "passed" if all(c.passed or c.advises for c in hidden) else "failed",
        "output": (
            f"{passed} of {len(hidden)} hidden {_cases(len(hidden))} passed, {points_out(score)}/{points_out(top)} "
            "points (hidden cases are not shown one by one)"
        ),
        "output_format": "text",
        "tags": ["hidden", *([question] if question else [])],
        "visibility": "visible",
    }
