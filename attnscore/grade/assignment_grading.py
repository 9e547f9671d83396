"""Grading an assignment: several questions, one submission imported once, one result.

Each submission gets one sandboxed worker (:class:`~attnscore.sandbox.launch.SandboxRunner`) that
serves every question: the submission is imported once, and each question's calls name its
function and call settings (:class:`attnscore.boundary.wire.Binding`, through a
:class:`~attnscore.sandbox.bound_runner.BoundRunner`). Every visible case of every question runs
(with its shrinking) before any hidden case of any question
(:class:`attnscore.check.assignment_session.AssignmentSession`). A function missing from the
submission costs only its question; an import that fails costs every question.

Time: each question keeps its spec's limit per call (``timeout_s``) and its own time budget
(``time_budget_s``, or the default for its limit), as when its spec is graded alone, so a
question that hangs cannot spend another question's time; ``--timeout`` and ``--time-budget``
apply to every question. The worker's setup time (``load_timeout_s``) is paid once, and its total
own time limit is at least the questions' budgets together.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from attnscore.boundary import wire
from attnscore.boundary.outputs import CallFailure
from attnscore.check.assignment_session import AssignmentSession, QuestionPart
from attnscore.check.case_cache import cached_cases
from attnscore.check.cases import Case
from attnscore.check.runner import RefusedRunner
from attnscore.check.session import NO_SHRINK, Session
from attnscore.grade.grading import _environment, _finished, grade_batch
from attnscore.grade.policy import grading_budget, unscored_in_sandbox
from attnscore.grade.time_budget import assignment_limits, call_and_budget
from attnscore.report.results import CaseResult, Question, SubmissionResult, Verdict
from attnscore.sandbox.bound_runner import BoundRunner
from attnscore.sandbox.launch import Limits, SandboxRunner
from attnscore.spec.assignment import Assignment, AssignmentQuestion, load_assignment
from attnscore.submission.files import Submission
from attnscore.submission.static_rules import rule_places

__all__ = ["assignment_cases", "grade_assignment", "grade_assignment_many", "question_binding"]

QuestionCases = tuple[tuple[Case, ...], ...]
"""Every question's cases, in question order (points rescaled, visibility applied)."""


def _question_dtype(question: AssignmentQuestion, dtype: str | None) -> str:
    return dtype or question.spec.dtypes[0]


def assignment_cases(
    assignment: Assignment, dtype: str | None = None, seed: int | None = None, *, cache_cases: bool = False
) -> QuestionCases:
    """Every question's cases: its spec's cases (:func:`attnscore.check.cases.build_cases`, in
    ``dtype`` or the spec's first dtype, with ``seed`` or the spec's own), the points of
    worker-evidenced properties set to 0 (:func:`attnscore.grade.policy.unscored_in_sandbox`), every
    case's points multiplied by the question's :attr:`~attnscore.spec.assignment.AssignmentQuestion.scale`
    (exact: the question totals its ``points``), and every case of a hidden question hidden.
    ``cache_cases``: read (and store) them in the grader's case cache, as ``attnscore grade`` does
    (:func:`attnscore.check.case_cache.cached_cases`, the one way grading builds cases).

    Raises:
        SpecError: a question's cases cannot be built (located in its spec).
    """
    out = []
    for q in assignment.questions:
        cases = unscored_in_sandbox(cached_cases(q.spec, _question_dtype(q, dtype), seed, use_cache=cache_cases))
        hidden = q.visibility == "hidden"
        out.append(
            tuple(replace(c, points=c.points * q.scale, visibility="hidden" if hidden else c.visibility) for c in cases)
        )
    return tuple(out)


def question_binding(question: AssignmentQuestion) -> wire.Binding:
    """How the worker calls ``question``'s function: its name and its spec's call settings (the
    contract's parameters passed by name, fixed keywords, logsumexp, factory), as
    :func:`attnscore.grade.grading.grade_submission` sets them up for one spec."""
    spec = question.spec
    contract = spec.contract
    by_name = tuple(n for n in contract.parameter_names if n in contract.keyword_parameters)
    module = None if spec.module is None else spec.module.to_json()
    return wire.Binding(
        question.function, by_name, tuple(dict(contract.options).items()), spec.logsumexp, spec.factory, module
    )


def _dtype_word(assignment: Assignment, dtype: str | None) -> str:
    """The result's dtype: ``dtype``, else the questions' dtypes each once (``float32``, ``float32/float64``)."""
    return dtype or "/".join(dict.fromkeys(q.spec.dtypes[0] for q in assignment.questions))


def grade_assignment(
    submission: Submission | Path,
    assignment: Assignment,
    cases: QuestionCases | None = None,
    *,
    dtype: str | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
    timeout: float | None = None,
    time_budget: float | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
    source: bytes | None = None,
    shrink_steps: int = 50,
) -> SubmissionResult:
    """Grade one submission (a :class:`Submission`, or the path of one ``.py`` file whose bytes
    are ``source``, default: read now) against every question of ``assignment``.

    ``cases``: :func:`assignment_cases` (default: built now, with ``dtype`` and ``seed``).
    ``limits``: the sandbox's limits for the one worker (default:
    :func:`attnscore.grade.time_budget.assignment_limits` with ``timeout`` and ``time_budget``);
    each question's per-call limit and time budget are its spec's, or ``timeout`` and
    ``time_budget`` for every question (:func:`attnscore.grade.time_budget.call_and_budget`).
    ``shrink_steps`` and the shrinking budget are grading's, per question
    (:func:`attnscore.grade.policy.grading_budget`).

    Returns:
        One :class:`SubmissionResult`: every question's cases in question order, each with its
        ``question``; ``questions`` lists them (``error``: the question's own problem, such as its
        function missing); ``spec_id``, ``spec_version`` and ``spec_path`` name the assignment;
        ``error`` and ``output`` are the submission's, as they were before any hidden input reached
        it. ``seed`` is ``seed``, else the first question's spec seed (each question draws with its
        own spec's).

    Raises:
        ValueError: ``time_budget`` shorter than a question's per-call limit.
    """
    start = time.perf_counter()
    cases = cases if cases is not None else assignment_cases(assignment, dtype, seed)
    limits = limits or assignment_limits(assignment, timeout=timeout, time_budget=time_budget)
    if not isinstance(submission, Submission):
        submission = Submission.from_file(Path(submission), source)
    environment = _environment(limits.device)
    shown_seed = seed if seed is not None else assignment.questions[0].spec.seed
    sessions = [
        Session(
            q.spec,
            qcases,
            _question_dtype(q, dtype),
            limits.device,
            submission.name,
            q.spec.seed if seed is None else seed,
            q.function,
            budget=grading_budget(shrink_steps),
            hidden_last=True,
            cheapest_first=True,
            environment=environment,
            rule_places=rule_places(submission, q.spec.rules) if q.spec.rules else None,
        )
        for q, qcases in zip(assignment.questions, cases, strict=True)
    ]
    questions = [
        Question(q.id, q.title, q.spec.id, q.spec.version, q.function, q.visibility) for q in assignment.questions
    ]
    word = _dtype_word(assignment, dtype)
    if submission.problem is not None:  # never run: every case of every question says why
        refused = RefusedRunner(CallFailure(Verdict.FUNCTION_MISSING, submission.problem, "submission"), limits.device)
        parts = tuple(
            QuestionPart(question, replace(session, budget=NO_SHRINK), refused)
            for question, session in zip(questions, sessions, strict=True)
        )
        run = AssignmentSession(assignment, parts, submission.name, word, limits.device, shown_seed, environment)
        return run.run(refused, on_case=on_case, started=start)
    functions = tuple(dict.fromkeys(q.function for q in assignment.questions))
    traps = tuple(dict.fromkeys(name for q in assignment.questions for name in q.spec.ruled_calls))
    shared = SandboxRunner(submission, "", limits, traps=traps, functions=functions)
    parts = tuple(
        QuestionPart(
            question,
            session,
            BoundRunner(shared, question_binding(q), *call_and_budget(q.spec, timeout, time_budget)),
        )
        for q, question, session in zip(assignment.questions, questions, sessions, strict=True)
    )
    run = AssignmentSession(assignment, parts, submission.name, word, limits.device, shown_seed, environment)
    return _finished(run.run(shared, on_case=on_case, started=start), submission, shared)


def grade_assignment_many(
    submissions: Sequence[Submission | Path],
    assignment: Assignment,
    *,
    dtype: str | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
    timeout: float | None = None,
    time_budget: float | None = None,
    on_result: Callable[[SubmissionResult], None] | None = None,
    shrink_steps: int = 50,
    jobs: int = 1,
    cache_cases: bool = False,
    keep: bool = True,
) -> list[SubmissionResult]:
    """Grade every submission against ``assignment`` (:func:`grade_assignment`); results come back
    in the same order (none without ``keep``: only ``on_result`` sees them), as
    :func:`attnscore.grade.grading.grade_many` does for one spec: every file
    read before the first submission runs, the questions' cases built once, ``on_result`` called
    with each result as it is ready, and with ``jobs`` > 1 that many grader processes (forked with
    the cases built, else fresh interpreters building the same cases from the assignment file),
    every submission still in a sandboxed worker of its own, forked from one template."""
    read = [s if isinstance(s, Submission) else Submission.from_file(Path(s)) for s in submissions]
    limits = limits or assignment_limits(assignment, timeout=timeout, time_budget=time_budget)
    options: dict[str, Any] = {
        "dtype": dtype,
        "seed": seed,
        "limits": limits,
        "timeout": timeout,
        "time_budget": time_budget,
        "shrink_steps": shrink_steps,
    }
    cases = assignment_cases(assignment, dtype, seed, cache_cases=cache_cases)  # here first: fails once, located

    def remember() -> None:  # forked grader processes start with the questions' cases built here
        _CHILD_ASSIGNMENTS[(assignment.path, dtype, seed)] = (assignment, cases)

    child_options = {**options, "cache_cases": cache_cases, "outside_reference": assignment.outside_reference}
    return grade_batch(
        read,
        lambda submission: grade_assignment(submission, assignment, cases, **options),
        functools.partial(_grade_in_child, assignment.path, options=child_options),
        remember,
        limits=limits,
        jobs=jobs,
        on_result=on_result,
        keep=keep,
    )


_CHILD_ASSIGNMENTS: dict[tuple[str, str | None, int | None], tuple[Assignment, QuestionCases]] = {}


def _grade_in_child(path: str, submission: Submission, *, options: dict[str, Any]) -> SubmissionResult:
    """One submission in a grader child process; the assignment's cases are built once per process."""
    key = (path, options["dtype"], options["seed"])
    if key not in _CHILD_ASSIGNMENTS:
        assignment = load_assignment(path, allow_outside_reference=options["outside_reference"])
        cases = assignment_cases(assignment, options["dtype"], options["seed"], cache_cases=options["cache_cases"])
        _CHILD_ASSIGNMENTS[key] = (assignment, cases)
    assignment, cases = _CHILD_ASSIGNMENTS[key]
    own = {k: v for k, v in options.items() if k not in ("cache_cases", "outside_reference")}
    return grade_assignment(submission, assignment, cases, **own)
