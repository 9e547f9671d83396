"""A checking session: every case judged, each failing property shrunk, all within a stated budget.

The one entry point that grading (:mod:`attnscore.grade.grading`), ``attnscore test``
(:mod:`attnscore.check.implementation`) and the pytest plugin (:mod:`attnscore.pytest_plugin`)
share. :func:`judge_cases` judges the cases in order (:func:`attnscore.check.judge.judge_case`,
diagnosis included), then shrinks each failing visible property (:func:`attnscore.check.shrink.add_shrunk`)
while the :class:`Budget` lasts. The result's ``duration_s`` is the wall time of all of it:
calls, comparison, diagnosis and shrinking.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any

from attnscore.check.cases import Case
from attnscore.check.judge import judge_case
from attnscore.check.runner import Runner
from attnscore.check.shrink import add_shrunk
from attnscore.report.feedback import cause_key
from attnscore.report.results import CaseResult, SubmissionResult
from attnscore.spec.model import Spec

__all__ = ["Budget", "NO_SHRINK", "judge_cases"]


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much work shrinking may do in one session.

    Attributes:
        shrink_steps: examples hypothesis may try per failing property (a count, so feedback is
            the same on every run); 0 turns shrinking off.
        shrink_s: seconds of work (:func:`work_clock`: the grader's CPU time and the
            submission's own time, not wall time) for all shrinking of the session together, a
            safety net for slow code (None: no time limit). A case shrunk when the time runs out keeps the best
            counterexample found so far; later cases keep their original one.
        skip_shown_causes: do not shrink a failing property whose cause (same diagnosed mistake,
            exception type, ...) a failing visible worked example already shows; its feedback is
            one line pointing at that example either way.

    Diagnosis is not budgeted here: it makes at most
    :data:`attnscore.check.diagnosis.CONFIRMATIONS` extra calls per runner, spec and dtype.
    """

    shrink_steps: int = 50
    shrink_s: float | None = 10.0
    skip_shown_causes: bool = False

    # skip_shown_causes: a property whose failure has the same cause
    # (attnscore.report.feedback.cause_key: the same diagnosed mistake, exception type, ...) as a
    # failing visible worked example is judged but not shrunk. Feedback explains each cause once, on
    # its smallest visible case, and a worked example is already a small, hand-made counterexample
    # with its own explanation, so a generated one would not be shown. Grading sets it (throughput
    # of a class); `attnscore test` and pytest shrink every failing property.

    def __post_init__(self) -> None:
        if self.shrink_steps < 0:
            raise ValueError(f"Budget.shrink_steps must be >= 0, found {self.shrink_steps}")
        if self.shrink_s is not None and not self.shrink_s >= 0:
            raise ValueError(f"Budget.shrink_s must be >= 0 seconds or None, found {self.shrink_s}")


NO_SHRINK = Budget(shrink_steps=0, shrink_s=None)
"""Judging only: no shrinking (a reference check, a mutation run, a submission that never ran)."""


def work_clock(runner: object) -> Callable[[], float]:
    """A clock of work done, seconds: this thread's CPU time plus, for a sandboxed runner, the
    submission's own time in its worker (``runner.spent``, :mod:`attnscore.sandbox.clock`).

    The shrinking safety net (:attr:`Budget.shrink_s`) runs on it, so that a busy machine, which
    stretches wall time but neither of these, cannot cut shrinking short and change the
    counterexample a submission is shown.
    """
    return lambda: time.thread_time() + float(getattr(runner, "spent", 0.0))


def judge_cases(
    spec: Spec,
    cases: Iterable[Case],
    runner: Runner,
    *,
    dtype: str,
    device: str,
    submission: str,
    seed: int,
    function: str | None = None,
    budget: Budget | None = None,
    make_runner: Callable[[], Any] | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
    worth_shrinking: Callable[[], bool] | None = None,
) -> SubmissionResult:
    """Judge every case with ``runner``, shrink failing properties within ``budget``.

    Args:
        spec, cases: the spec and its built cases (:func:`attnscore.check.cases.build_cases`).
        runner: makes the calls (in process, or a sandboxed worker).
        dtype, device, submission, seed: recorded in the result.
        function: the graded function's name as shown in feedback (default: the spec's).
        budget: the shrinking budget (default :class:`Budget`\\ ()).
        make_runner: gives the runner each shrink step calls (default: ``runner`` itself).
        on_case: called with each case's final result (after shrinking), in order.
        worth_shrinking: asked before each shrink; False skips it (e.g. a submission that never
            loaded fails every input the same way, so a smaller input says nothing new).

    Returns:
        A :class:`SubmissionResult` whose ``duration_s`` is the time spent, shrinking and
        diagnosis included.
    """
    budget = budget or Budget()
    start = time.perf_counter()
    clock = work_clock(runner)
    shrinking_s = 0.0  # work spent shrinking so far (seconds of work_clock)
    on_examples: set[tuple[str, ...]] = set()  # causes a failing visible worked example already shows
    results = []
    for case in cases:
        result = judge_case(spec, case, runner, dtype, function)
        key = cause_key(result.failure) if result.failure is not None else None
        if key is not None and case.kind == "example" and case.visibility != "hidden":
            on_examples.add(key)
        left = None if budget.shrink_s is None else budget.shrink_s - shrinking_s
        shown = budget.skip_shown_causes and key in on_examples
        wanted = (worth_shrinking is None or worth_shrinking()) and not shown
        if not result.passed and wanted and budget.shrink_steps > 0 and (left is None or left > 0):
            started = clock()
            result = add_shrunk(
                spec,
                case,
                result,
                make_runner or (lambda: runner),
                dtype,
                max_steps=budget.shrink_steps,
                budget_s=left,
                function=function,
                clock=clock,
            )
            shrinking_s += clock() - started
        results.append(result)
        if on_case is not None:
            on_case(result)
    return SubmissionResult(
        submission=submission,
        spec_id=spec.id,
        spec_version=spec.version,
        spec_path=spec.shown_path,
        function=function or spec.function,
        cases=tuple(results),
        dtype=dtype,
        device=device,
        seed=seed,
        duration_s=time.perf_counter() - start,
    )
