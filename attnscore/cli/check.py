"""``attnscore check``: a student's self-check on the spec's visible cases, on their own machine."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from attnscore.cli.errors import BadUsage
from attnscore.cli.options import (
    check_spec_dtype,
    dtype_option,
    entry_option,
    format_option,
    function_option,
    outside_reference_option,
    shrink_steps_option,
    spec_option,
    time_budget_option,
)
from attnscore.cli.output import finish, stdout_console

__all__ = ["check_solution"]


@click.command("check")
@click.argument("solution", type=click.Path())
@spec_option("The spec to check against, or an assignment file (its visible questions).")
@outside_reference_option()
@function_option()
@entry_option("Entry file of a folder solution.")
@dtype_option("Dtype the inputs are cast to (default: the spec's first, as the grader).")
@shrink_steps_option()
@time_budget_option()
@format_option("text", "json")
def check_solution(
    solution: str,
    spec_path: str,
    allow_outside_reference: bool,
    function: str | None,
    entry: str | None,
    dtype: str | None,
    shrink_steps: int,
    time_budget: float | None,
    fmt: str,
) -> None:
    """Self-check SOLUTION (.py, .ipynb or folder) on the spec's visible cases, on this machine.

    The grader's feedback for the visible cases only (hidden cases are neither run nor shown). The
    code runs in this process with a per-call time limit, without the grader's sandbox: use it
    on your own code.

    With an assignment file, every visible question is checked this way (each its function, its
    points rescaled as the grader does); hidden questions are skipped, and the report says so.

    Exit code 0 when every visible case passed, 1 when some failed, 2 for a usage error.
    """
    from attnscore.selfcheck import check_path
    from attnscore.spec.assignment import Assignment, load_spec_or_assignment

    graded = load_spec_or_assignment(spec_path, allow_outside_reference=allow_outside_reference)
    run: dict[str, Any] = {"entry": entry, "dtype": dtype, "shrink_steps": shrink_steps, "time_budget": time_budget}
    if isinstance(graded, Assignment):
        done = _check_assignment(solution, graded, function, run)
        _show(done, fmt, {"hidden_cases_not_run": done.hidden, "hidden_questions_not_run": list(done.skipped)})
        return
    spec = graded
    check_spec_dtype(dtype, spec)
    lacking = spec.environment.missing()
    if lacking:  # said once; code that imports them fails here, not on the grader
        from attnscore.grade.environment import missing_packages_text

        click.echo(f"Note: {missing_packages_text(lacking)} (the grader has them)", err=True)
    if time_budget is not None:
        from attnscore.grade.time_budget import budget_problem

        problem = budget_problem(spec.timeout_s, time_budget)
        if problem is not None:
            raise BadUsage(problem)
    outcome = check_path(solution, spec, function=function, **run)
    _show(outcome, fmt, {"hidden_cases_not_run": outcome.hidden})


def _check_assignment(solution: str, assignment: Any, function: str | None, run: dict[str, Any]) -> Any:
    """``attnscore check SOLUTION --spec ASSIGNMENT``: every visible question's visible cases, with
    the command's ``run`` settings (entry, dtype, shrink steps, time budget)."""
    from attnscore.selfcheck import check_assignment_path

    if function is not None:
        raise BadUsage("--function does not apply to an assignment: each question names its function")
    for question in assignment.questions:
        check_spec_dtype(run["dtype"], question.spec)
    try:
        return check_assignment_path(solution, assignment, **run)
    except ValueError as exc:
        raise BadUsage(str(exc)) from None


def _show(outcome: Any, fmt: str, not_run: dict[str, Any]) -> None:
    """Print a self-check's ``outcome`` (its result and footer) as text, or as JSON with ``not_run``
    (the hidden cases and questions it did not run) added, and exit with its status."""
    if fmt == "json":
        from attnscore.report.json_report import submission_to_json

        data = {**submission_to_json(outcome.result), **not_run}
        sys.stdout.write(json.dumps(data, indent=2, allow_nan=False, ensure_ascii=False) + "\n")
    else:
        from attnscore.report.text import submission_text

        console = stdout_console()
        console.print(submission_text(outcome.result))
        console.print(outcome.footer())
    finish(outcome.passed)
