"""A grading run: one spec, one or more untrusted submissions, one result each.

Cases are built once per spec (they hold golden values and stay in this process); each
submission gets its own :class:`attnscore.sandbox.launch.SandboxRunner`. Whatever a submission does, its
result is complete: every case has a verdict.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

from attnscore.boundary import lazy_torch
from attnscore.boundary.outputs import CallFailure
from attnscore.boundary.untrusted import clean_text
from attnscore.check.case_cache import cached_cases
from attnscore.check.cases import Case
from attnscore.check.implementation import environment
from attnscore.check.runner import RefusedRunner
from attnscore.check.session import NO_SHRINK, Session
from attnscore.grade.policy import grading_budget, unscored_in_sandbox
from attnscore.grade.time_budget import grading_limits
from attnscore.report.results import CaseResult, SubmissionResult, Verdict
from attnscore.sandbox.launch import Limits, SandboxRunner, warm_template
from attnscore.spec.load import load_spec
from attnscore.spec.model import Spec
from attnscore.submission.files import Submission
from attnscore.submission.static_rules import rule_places

__all__ = ["grade_submission", "grade_many", "grade_batch"]


def grade_submission(
    submission: Submission | Path,
    spec: Spec,
    cases: Sequence[Case],
    *,
    function: str | None = None,
    dtype: str | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
    source: bytes | None = None,
    shrink_steps: int = 50,
) -> SubmissionResult:
    """Grade one submission (a :class:`Submission`, or the path of one ``.py`` file) against
    ``spec`` using the prebuilt ``cases``.

    ``source`` is a single file's content as read before any submission of the batch ran (so one
    submission cannot rewrite another before it is graded); default: read the file now. A
    :class:`Submission` already holds its files.
    A failing visible property gets hypothesis's minimal failing input, searched with the same
    sandboxed worker, trying at most ``shrink_steps`` examples per case (0 turns shrinking off; a
    count keeps feedback identical run to run) and, as a safety net, at most
    :data:`attnscore.grade.policy.SHRINK_SAFETY_S` seconds for the whole submission
    (:class:`attnscore.check.session.Budget`). The reported ``duration_s`` includes shrinking and
    diagnosis.

    ``limits`` default to :func:`attnscore.grade.time_budget.grading_limits` of the spec: its
    per-call limit and its time budget per submission (``Limits.time_budget_s``); the cases left
    when the budget is spent get the verdict ``budget_spent`` and no points. Within the visible
    cases, and within the hidden ones, worked examples run first, then the properties cheapest
    first (:func:`attnscore.check.session.case_cost`).

    Hidden cases run last, after the visible ones and their shrinking; the report keeps the
    submission's output and import error as they were before any hidden input reached it, and a
    hidden case's own message never carries text from the submission (:func:`attnscore.check.judge`).
    Results are in ``cases`` order. It is an :class:`attnscore.check.session.Session` with
    ``hidden_last`` and the grading budget, run with a :class:`SandboxRunner`; a submission that
    cannot be run (no file, a folder without its entry) is judged with a
    :class:`attnscore.check.runner.RefusedRunner`, every case saying why, in order.
    """
    start = time.perf_counter()
    function = function or spec.function
    limits = limits or grading_limits(spec)
    cases = unscored_in_sandbox(cases)
    if not isinstance(submission, Submission):
        submission = Submission.from_file(Path(submission), source)
    session = Session(
        spec,
        tuple(cases),
        dtype or spec.dtypes[0],
        limits.device,
        submission.name,
        spec.seed if seed is None else seed,
        function,
        budget=NO_SHRINK,
        environment=_environment(limits.device),
        rule_places=rule_places(submission, spec.rules) if spec.rules else None,
    )
    if submission.problem is not None:  # never run: every case says why
        refused = CallFailure(Verdict.FUNCTION_MISSING, submission.problem, "submission")
        return session.run(RefusedRunner(refused, limits.device), on_case=on_case, started=start)
    contract = spec.contract  # the worker calls the function as the contract binds it in process
    by_name = tuple(n for n in contract.parameter_names if n in contract.keyword_parameters)
    runner = SandboxRunner(
        submission,
        function,
        limits,
        by_name=by_name,
        options=dict(contract.options),
        logsumexp=spec.logsumexp,
        factory=spec.factory,
        traps=spec.ruled_calls,
        module=spec.module,
    )
    # Visible cases and their shrinking first: nothing the submission says after it has seen a
    # hidden input (its output, a later exception, its import error) can reach the student.
    # Within each, the cheapest cases first: a time budget that runs out leaves the costliest unrun.
    graded = replace(session, budget=grading_budget(shrink_steps), hidden_last=True, cheapest_first=True)
    return _finished(graded.run(runner, on_case=on_case, started=start), submission, runner)


def _finished(result: SubmissionResult, submission: Submission, runner: SandboxRunner) -> SubmissionResult:
    """``result`` of a submission run by ``runner`` (one spec's or a whole assignment's), finished:
    its environment names the sandbox's protections as they were in the end (a template that failed
    to start falls back to fresh workers); where a case failed, its error adds how a notebook was read."""
    result = replace(result, environment={**result.environment, "sandbox": runner.protections})
    if submission.notes and not result.all_passed:  # how a notebook was read, when it matters
        notes = "\n".join([result.error, *(clean_text(n, 600) for n in submission.notes)]).strip("\n")
        result = replace(result, error=notes)
    return result


def _environment(device: str) -> dict[str, str]:
    """The report's environment for a grading run on ``device``: the grader's versions; on a GPU,
    the precision the worker pins (TF32 off, float32 matmul precision "highest"). The grader
    never initialises CUDA itself (its forked grader processes could not use it afterwards)."""
    if device == "cpu":
        return {**environment("cpu", pinned=False), "device": device}
    return {**environment("cpu", pinned=True), "device": device, "tf32": "off (pinned in the worker)"}


def grade_many(
    submissions: Sequence[Submission | Path],
    spec: Spec,
    *,
    function: str | None = None,
    dtype: str | None = None,
    seed: int | None = None,
    limits: Limits | None = None,
    on_result: Callable[[SubmissionResult], None] | None = None,
    shrink_steps: int = 50,
    jobs: int = 1,
    cache_cases: bool = False,
    keep: bool = True,
) -> list[SubmissionResult]:
    """Grade every submission against ``spec``; results come back in the same order.

    ``on_result`` is called in this process with each result as it is ready: in order with one
    job, in finishing order with ``jobs`` > 1. Without ``keep``, each result is only handed to
    ``on_result`` and the list returned is empty: a class run that stores each result as it comes
    (:mod:`attnscore.grade.class_run`) holds none of them here, whatever the size of the class.

    Every file is read before the first submission runs: a submission that rewrites files on disk
    cannot change what the others are graded on. With ``jobs`` > 1, that many grader processes
    (forked from this one with the cases built; fresh interpreters building the same derandomised
    cases where fork is missing) grade in parallel; each submission still gets its own sandboxed
    worker, forked from one worker template shared by the batch (see
    :mod:`attnscore.sandbox.template`) unless ``limits`` say otherwise.

    With ``cache_cases``, the spec's built cases are read from (and stored in) the grader's private
    case cache (:mod:`attnscore.check.case_cache`), as ``attnscore grade`` does: a cold run then
    skips drawing the inputs. The cases are the same either way.
    """
    dtype = dtype or spec.dtypes[0]
    read = [s if isinstance(s, Submission) else Submission.from_file(Path(s)) for s in submissions]
    options: dict[str, Any] = {
        "function": function,
        "dtype": dtype,
        "seed": seed,
        "limits": limits,
        "shrink_steps": shrink_steps,
    }
    # here first: a spec whose cases cannot be built fails once, located
    cases = cached_cases(spec, dtype, seed, use_cache=cache_cases)

    def remember() -> None:  # forked grader processes start with the spec's cases built here
        _CHILD_CASES[(spec.path, dtype, seed)] = (spec, cases)

    child_options = {**options, "cache_cases": cache_cases, "outside_reference": spec.outside_reference}
    in_child = functools.partial(_grade_in_child, spec.path, options=child_options)
    return grade_batch(
        read,
        lambda submission: grade_submission(submission, spec, cases, **options),
        in_child,
        remember,
        limits=limits,
        jobs=jobs,
        on_result=on_result,
        keep=keep,
    )


def grade_batch(
    read: Sequence[Submission],
    grade_one: Callable[[Submission], SubmissionResult],
    in_child: Callable[[Submission], SubmissionResult],
    remember: Callable[[], None],
    *,
    limits: Limits | None,
    jobs: int,
    on_result: Callable[[SubmissionResult], None] | None,
    keep: bool = True,
) -> list[SubmissionResult]:
    """Grade the submissions ``read`` (every file already read), in order, one way for a spec
    (:func:`grade_many`) and an assignment
    (:func:`attnscore.grade.assignment_grading.grade_assignment_many`): ``grade_one`` in this
    process, or, with ``jobs`` > 1, ``in_child`` (picklable: a module-level function with its
    arguments bound) in that many grader processes, forked after ``remember`` stored the built cases
    where a forked child finds them (fresh interpreters, where fork is missing, build the same
    derandomised cases from the file). Each submission still gets its own sandboxed worker, forked
    from one worker template shared by the batch unless ``limits`` say otherwise. ``on_result`` is
    called in this process with each result as it is ready: in order with one job, in finishing
    order with several. Results come back in the order of ``read``; without ``keep`` none is held
    here once ``on_result`` has it (the list returned is empty).
    """
    parallel = jobs > 1 and len(read) > 1
    fork = "fork" in multiprocessing.get_all_start_methods()
    if len(read) > 1 and (fork or not parallel) and (limits is None or limits.device == "cpu"):
        # A class: while the template loads torch (waited for below), this process loads it too, as
        # the first wrong submission's diagnosis would (off the critical path), and forked grader
        # processes share it instead of each importing it. No torch op runs here before the fork.
        lazy_torch.bind()
    warm_template(limits)  # once, before any grader process forks: they all share it
    if parallel:
        context = multiprocessing.get_context("fork" if fork else "spawn")
        if fork:
            remember()
        with ProcessPoolExecutor(
            max_workers=min(jobs, len(read)), mp_context=context, initializer=lazy_torch.one_thread_in_this_process
        ) as pool:
            futures = {pool.submit(in_child, submission): n for n, submission in enumerate(read)}
            finished: dict[int, SubmissionResult] = {}
            # each result is handed on as it finishes (a class run commits it at once), so a slow
            # or hanging submission never holds back the commits and progress of those after it;
            # a finished future is let go of (it holds its result)
            for future in as_completed(futures):
                n, result = futures.pop(future), future.result()
                if keep:
                    finished[n] = result
                if on_result is not None:
                    on_result(result)
        return [finished[n] for n in range(len(read))] if keep else []
    results: list[SubmissionResult] = []
    with lazy_torch.one_thread():  # the grader's small tensors: one thread (lazy_torch.one_thread)
        for submission in read:
            result = grade_one(submission)
            if keep:
                results.append(result)
            if on_result is not None:
                on_result(result)
    return results


_CHILD_CASES: dict[tuple[str, str, int | None], tuple[Spec, list[Case]]] = {}


def _grade_in_child(spec_path: str, submission: Submission, *, options: dict[str, Any]) -> SubmissionResult:
    """One submission in a grader child process; the spec's cases are built once per process."""
    key = (spec_path, options["dtype"], options["seed"])
    if key not in _CHILD_CASES:
        # a spec's own reference file outside its folder was trusted by the parent: trusted here too
        spec = load_spec(spec_path, allow_outside_reference=bool(options.get("outside_reference")))
        cases = cached_cases(spec, options["dtype"], options["seed"], use_cache=bool(options.get("cache_cases")))
        _CHILD_CASES[key] = (spec, cases)
    spec, cases = _CHILD_CASES[key]
    own = ("cache_cases", "outside_reference")
    return grade_submission(submission, spec, cases, **{k: v for k, v in options.items() if k not in own})
