"""A checking session: one run of cases against one runner, ordered, judged, shrunk and stamped.

The one entry point that grading (:mod:`attnscore.grade.grading`), the self-check
(:mod:`attnscore.selfcheck`), ``attnscore test`` (:mod:`attnscore.check.implementation`),
``attnscore verify`` (:mod:`attnscore.check.verify`) and the pytest plugin
(:mod:`attnscore.pytest_plugin`) share. :meth:`Session.run`:

1. orders: the cases in their order, or (``hidden_last``) the visible ones and their shrinking
   first, then the hidden ones, unshrunk; with ``cheapest_first``, within each of those groups the
   worked examples first (in spec order), then the properties by their cost (:func:`case_cost`),
   so that a submission's time budget is spent on the cheapest evidence first;
2. judges each case (:func:`attnscore.check.judge.judge_case`, diagnosis included) and shrinks
   each failing visible property (:func:`attnscore.check.shrink.add_shrunk`) while the
   :class:`Budget` lasts and the implementation loaded;
3. closes the runner and stamps the result: seed, dtype, device, environment, the runner's
   load failure as ``error`` and its output as ``output`` (both as they were before any hidden
   input reached it), a note of what it could not clean up, and ``duration_s``, the wall time of
   all of it (from ``started`` when the caller's own setup counts too).

It reads only what :class:`attnscore.check.runner.Runner` declares. :func:`judge_cases` is the
same session written as one call.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

import numpy as np

from attnscore.boundary.outputs import CallFailure
from attnscore.boundary.untrusted import clean_text
from attnscore.boundary.verdict import Verdict
from attnscore.check.cases import Case
from attnscore.check.judge import judge_case
from attnscore.check.rule_cases import judge_rules
from attnscore.check.runner import Runner
from attnscore.check.shrink import add_shrunk, build_small
from attnscore.report.feedback import cause_key
from attnscore.report.results import CaseResult, Question, SubmissionResult
from attnscore.spec.assignment import Assignment
from attnscore.spec.model import Spec

__all__ = ["Budget", "NO_SHRINK", "Session", "case_cost", "judge_cases", "work_clock"]


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
        drawn_first: try the property's other drawn inputs and its small inputs
            (:mod:`attnscore.check.small_inputs`), smallest first, before hypothesis
            (:func:`attnscore.check.shrink.smallest_drawn_failure`): a few calls instead of a
            hypothesis run, for a counterexample about as small as hypothesis's, though its values
            are drawn ones rather than hypothesis's simplest.

    Diagnosis is not budgeted here: each of its extra calls (the
    :data:`attnscore.check.diagnosis.CONFIRMATIONS` confirmation inputs, the catalogue mistakes' own
    confirmation, probe and witness inputs) is made at most once per runner, spec and dtype.
    """

    shrink_steps: int = 50
    shrink_s: float | None = 10.0
    skip_shown_causes: bool = False
    drawn_first: bool = False

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


def work_clock(runner: Runner) -> Callable[[], float]:
    """A clock of work done, seconds: this thread's CPU time plus the implementation's own time
    outside it (:attr:`attnscore.check.runner.Runner.spent`: a sandboxed worker's, see
    :mod:`attnscore.sandbox.clock`; 0 in process).

    The shrinking safety net (:attr:`Budget.shrink_s`) runs on it, so that a busy machine, which
    stretches wall time but neither of these, cannot cut shrinking short and change the
    counterexample a submission is shown.
    """
    return lambda: time.thread_time() + runner.spent


def case_cost(case: Case) -> int:
    """What judging ``case`` is expected to cost: the entries of every argument of its calls, plus
    one per call (a call's overhead). Only the order of cases reads it (``Session.cheapest_first``).

    >>> import numpy as np
    >>> from attnscore.check.cases import Call
    >>> call = Call({"q": np.zeros(2), "keys": np.zeros((3, 2))}, np.zeros(3), np.zeros(3))
    >>> case_cost(Case("property:p", "property", "t", "", (call, call), 1, "visible", "", None))
    18
    """
    return sum(
        1 + sum(a.size if isinstance(a, np.ndarray) else int(np.size(a)) for a in call.args.values())
        for call in case.calls
    )


CLEANUP_NOTE = "the grader could not remove what your code left in its folders: {problem}"
"""The run's note when its runner could not remove everything (:attr:`Runner.cleanup_problem`)."""


class Recorded(Protocol):
    """What a run records in its result besides its cases (:class:`Session`,
    :class:`attnscore.check.assignment_session.AssignmentSession`)."""

    @property
    def submission(self) -> str: ...

    @property
    def dtype(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @property
    def environment(self) -> Mapping[str, str]: ...


def run_result(
    run: Recorded,
    graded: Spec | Assignment,
    function: str,
    cases: tuple[CaseResult, ...],
    runner: Runner,
    output: str,
    said: CallFailure | None,
    started: float,
    questions: tuple[Question, ...] = (),
) -> SubmissionResult:
    """The result of ``run`` on ``graded`` (the spec or assignment naming it) once ``runner`` is
    closed: ``cases`` in order, ``output`` and ``said`` (the load failure, its message the result's
    ``error``) as taken before any hidden input, then :data:`CLEANUP_NOTE` when the runner could not
    remove everything (this student's own note; a batch goes on); ``started`` the
    :func:`time.perf_counter` reading the run began at."""
    error = said.message if said is not None else ""
    if runner.cleanup_problem is not None:
        note = clean_text(CLEANUP_NOTE.format(problem=runner.cleanup_problem), 600)
        error = f"{error}\n{note}" if error else note
    return SubmissionResult(
        submission=run.submission,
        spec_id=graded.id,
        spec_version=graded.version,
        spec_path=graded.shown_path,
        function=function,
        cases=cases,
        dtype=run.dtype,
        device=run.device,
        seed=run.seed,
        duration_s=time.perf_counter() - started,
        error=error,
        output=output,
        environment=dict(run.environment),
        questions=questions,
    )


@dataclasses.dataclass(frozen=True)
class Session:
    """One run: these cases of ``spec`` in ``dtype``, judged with one runner.

    Attributes:
        spec, cases: the spec and its built cases (:func:`attnscore.check.cases.build_cases`);
            results come back in this order.
        dtype, device, submission, seed: recorded in the result (``seed``: the base seed the
            cases were built with).
        function: the graded function's name as shown in feedback (default: the spec's).
        budget: the shrinking budget (:data:`NO_SHRINK`: judging only).
        hidden_last: judge the visible cases (and shrink them) first, then the hidden ones without
            shrinking; the run's ``error`` and ``output`` are taken between the two, and a hidden
            case's call failure that *is* the load failure already reported then is marked
            ``disclosed`` (shown in full). Grading sets it; a run in order discloses nothing.
        environment: the result's ``environment`` (versions, device, precision, sandbox).
        cheapest_first: judge the worked examples first, then the properties by
            :func:`case_cost`, cheapest first (ties in spec order), within the visible cases and
            within the hidden ones: when a time budget runs out (``Limits.time_budget_s``), the
            cases judged are the cheapest evidence. Grading and the self-check set it; results
            are in spec order either way.
        rule_places: where the submission's code names each rule's calls (rule id -> places), read
            before anything ran (:func:`attnscore.submission.static_rules.rule_places`); None when no
            code was read. The rule cases (``kind == "rule"``) are judged last, from it, the
            runner's ``calls_seen`` and every other case's result (:mod:`attnscore.check.rule_cases`).

    >>> from attnscore.check.cases import build_cases
    >>> from attnscore.check.runner import InProcessRunner
    >>> from attnscore.spec.load import load_spec
    >>> from attnscore.check.verify import bundled_spec_paths
    >>> spec = load_spec(next(p for p in bundled_spec_paths() if p.name == "dot_product_scores.yaml"))
    >>> session = Session(spec, tuple(build_cases(spec, "float64")), "float64", "cpu", "mine", spec.seed)
    >>> session.run(InProcessRunner(lambda q, keys: keys @ q)).all_passed
    True
    """

    spec: Spec
    cases: Sequence[Case]
    dtype: str
    device: str
    submission: str
    seed: int
    function: str | None = None
    budget: Budget = Budget()
    hidden_last: bool = False
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cheapest_first: bool = False
    rule_places: Mapping[str, tuple[str, ...]] | None = None

    def run(
        self,
        runner: Runner,
        *,
        make_runner: Callable[[], Runner] | None = None,
        on_case: Callable[[CaseResult], None] | None = None,
        started: float | None = None,
    ) -> SubmissionResult:
        """Judge every case with ``runner``, shrink failing visible properties, close ``runner``.

        Args:
            runner: makes the calls (in process, or a sandboxed worker); closed at the end, also
                when judging raises.
            make_runner: gives the runner each shrink step calls (default: ``runner`` itself).
            on_case: called with each case's final result (after shrinking), in judging order.
            started: the :func:`time.perf_counter` reading the run began at (default: now), so
                that ``duration_s`` covers the caller's setup too (building cases, starting a worker).

        Returns:
            The :class:`SubmissionResult`, cases in :attr:`cases` order.
        """
        start = time.perf_counter() if started is None else started
        first, last, ruled = self.order()
        judged: dict[int, CaseResult] = {}
        try:
            judged.update(self.judge(first, runner, self.budget, make_runner=make_runner, on_case=on_case))
            # said before any hidden input reached the implementation: the report may show it
            output, said = runner.output_text(), runner.load_failure
            judged.update(self.judge(last, runner, NO_SHRINK, make_runner=make_runner, on_case=on_case, disclosed=said))
            judged.update(self.judge_rules(ruled, judged, runner, on_case=on_case))
        finally:
            runner.close()
        return self.result(judged, runner, output, said, start)

    def order(self) -> tuple[list[int], list[int], list[int]]:
        """The indices of :attr:`cases` in judging order, as three groups: the cases judged first
        (every case, or with ``hidden_last`` the visible ones), those judged last (with
        ``hidden_last``, the hidden ones) and the rule cases (judged after both, over the whole run);
        within the first two, ``cheapest_first``'s order."""
        cases = self.cases
        everything = range(len(cases))
        ruled = [i for i in everything if cases[i].kind == "rule"]  # judged last, over the whole run
        called = [i for i in everything if i not in ruled]
        first = [i for i in called if not (self.hidden_last and cases[i].visibility == "hidden")]
        last = [i for i in called if self.hidden_last and cases[i].visibility == "hidden"]
        if self.cheapest_first:
            costs = {i: case_cost(cases[i]) if cases[i].kind != "example" else 0 for i in called}
            first.sort(key=lambda i: (cases[i].kind != "example", costs[i], i))
            last.sort(key=lambda i: (cases[i].kind != "example", costs[i], i))
        return first, last, ruled

    def judge(
        self,
        indices: Sequence[int],
        runner: Runner,
        budget: Budget,
        *,
        make_runner: Callable[[], Runner] | None = None,
        on_case: Callable[[CaseResult], None] | None = None,
        disclosed: CallFailure | None = None,
    ) -> dict[int, CaseResult]:
        """Judge the cases at ``indices`` (in that order) with ``runner``, shrinking failing ones
        within ``budget``; ``disclosed``: the load failure already reported before any hidden input
        (see :attr:`hidden_last`). One group of :meth:`run`; an assignment interleaves the groups of
        its questions' sessions (:mod:`attnscore.check.assignment_session`)."""
        shown = self._judge([self.cases[i] for i in indices], runner, budget, make_runner, on_case, disclosed)
        return dict(zip(indices, shown, strict=True))

    def judge_rules(
        self,
        indices: Sequence[int],
        judged: Mapping[int, CaseResult],
        runner: Runner,
        *,
        on_case: Callable[[CaseResult], None] | None = None,
    ) -> dict[int, CaseResult]:
        """The rule cases at ``indices``, judged from every other case's result in ``judged`` and
        the runner's ``calls_seen`` (:mod:`attnscore.check.rule_cases`); empty when there are none."""
        if not indices:
            return {}
        cases = self.cases
        others = [(cases[i], judged[i]) for i in range(len(cases)) if i in judged and cases[i].kind != "rule"]
        rules = judge_rules(
            self.spec,
            [cases[i] for i in indices],
            others,
            self.rule_places,
            runner.calls_seen,
            self.dtype,
            self.function,
        )
        for result in rules:
            if on_case is not None:
                on_case(result)
        return dict(zip(indices, rules, strict=True))

    def result(
        self,
        judged: Mapping[int, CaseResult],
        runner: Runner,
        output: str,
        said: CallFailure | None,
        started: float,
    ) -> SubmissionResult:
        """The run's result from every case's result ``judged`` (by index), once ``runner`` is
        closed: ``output`` and ``said`` (the load failure) as taken before any hidden input,
        ``started`` the :func:`time.perf_counter` reading the run began at."""
        cases = tuple(judged[i] for i in range(len(self.cases)))
        return run_result(self, self.spec, self.function or self.spec.function, cases, runner, output, said, started)

    def _judge(
        self,
        cases: list[Case],
        runner: Runner,
        budget: Budget,
        make_runner: Callable[[], Runner] | None,
        on_case: Callable[[CaseResult], None] | None,
        disclosed: CallFailure | None,
    ) -> list[CaseResult]:
        """Judge ``cases`` in order, shrinking failing ones within ``budget``."""
        spec, dtype, function = self.spec, self.dtype, self.function
        clock = work_clock(runner)
        shrinking_s = 0.0  # work spent shrinking so far (seconds of work_clock)
        on_examples: set[tuple[str, ...]] = set()  # causes a failing visible worked example already shows
        results = []
        for case in cases:
            result = judge_case(spec, case, runner, dtype, function, disclosed=disclosed)
            key = cause_key(result.failure) if result.failure is not None else None
            if key is not None and case.kind == "example" and case.visibility != "hidden":
                on_examples.add(key)
            left = None if budget.shrink_s is None else budget.shrink_s - shrinking_s
            shown = budget.skip_shown_causes and key in on_examples
            # a submission that never loaded fails every input the same way: a smaller input says nothing new
            # nor does a case the time budget left unrun
            wanted = runner.load_failure is None and not shown and result.verdict is not Verdict.BUDGET_SPENT
            if not result.passed and wanted and budget.shrink_steps > 0 and (left is None or left > 0):
                if budget.drawn_first:  # drawn once per process: not this submission's shrinking work
                    build_small(spec, case, result, dtype, self.seed)
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
                    drawn_first=budget.drawn_first,
                    seed=self.seed,
                )
                shrinking_s += clock() - started
            results.append(result)
            if on_case is not None:
                on_case(result)
        return results


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
    make_runner: Callable[[], Runner] | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
) -> SubmissionResult:
    """:meth:`Session.run` in one call: every case in order, judged with ``runner`` and shrunk
    within ``budget`` (default :class:`Budget`\\ ()); see :class:`Session` for the arguments."""
    session = Session(spec, tuple(cases), dtype, device, submission, seed, function, budget or Budget())
    return session.run(runner, make_runner=make_runner, on_case=on_case)
